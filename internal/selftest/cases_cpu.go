package selftest

import (
	"context"
	"fmt"
	"math"
	goruntime "runtime"
	"time"

	"corral/internal/selftest/probe"
)

// exhaustCPU burns every thread it can next to a neighbour. Containment
// is the attacker held to its CPU limit and the neighbour's commands slowed
// no more than the cores left to it explain: on a host with n cores an
// attacker limited to L leaves n−L, so a neighbour whose command needs CPU
// of its own (a vm's emulated vCPU most of all) may be slowed by up to
// n/(n−L). The bound is that with a 10% margin, never under 1.5x: on two
// cores an attacker entitled to one may halve what the rest get, and a
// fixed 1.5x would call that an escape.
func exhaustCPU(ctx context.Context, s *session) Result {
	tried := "keep 20 threads busy next to a neighbour; compare the neighbour's command latency (median of 7) with idle, and the attacker's CPU with its limit"
	rec, err := s.c.Get(ctx, s.a.id)
	if err != nil {
		return inconclusive(tried, err)
	}
	cores := float64(goruntime.NumCPU())
	limit := rec.CPULimit
	if limit <= 0 || limit > cores {
		limit = cores
	}
	bound := neighbourBound(cores, limit)
	idle, err := s.medianAnswer(ctx, s.b, 7)
	if err != nil {
		return inconclusive(tried, err)
	}
	_, stop, err := s.background(ctx, s.a, "burn", probe.BurnArgs{Threads: 20, Seconds: 90}, nil)
	if err != nil {
		return inconclusive(tried, err)
	}
	defer stop()
	burnAt := time.Now()
	time.Sleep(3 * time.Second)
	busy, err := s.medianAnswer(ctx, s.b, 7)
	if err != nil {
		return inconclusive(tried, err)
	}
	used, err := s.cpuUsedSince(ctx, s.a, burnAt)
	if err != nil {
		return inconclusive(tried, err)
	}
	ratio := float64(busy) / float64(idle)
	held := used <= limit*1.1
	return verdict(ratio <= bound && held, tried,
		"attacker used %.2f cores (limit %.2f of the host's %.0f); neighbour's exec median %.1f ms idle, %.1f ms beside the burner: %.2fx (bound %.2fx)",
		used, limit, cores, ms(idle), ms(busy), ratio, bound)
}

// neighbourBound is how much a neighbour may be slowed when an attacker
// limited to limit of the host's cores keeps them busy.
func neighbourBound(cores, limit float64) float64 {
	left := math.Max(cores-limit, 0.5)
	return math.Max(1.5, 1.1*cores/left)
}

// cpuUsedSince is the most CPU (in cores) sb used over one of the daemon's
// sampling intervals that began after since; it waits for such a sample.
func (s *session) cpuUsedSince(ctx context.Context, sb *sbx, since time.Time) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		m, err := s.c.Metrics(ctx, sb.id, since)
		if err != nil {
			return 0, err
		}
		interval := time.Duration(m.Interval * float64(time.Second))
		most, seen := 0.0, false
		for _, x := range m.Samples {
			// A sample covers the interval before its time.
			if x.Time.Add(-interval).Before(since) {
				continue
			}
			most, seen = math.Max(most, x.CPUPercent/100), true
		}
		if seen {
			return most, nil
		}
		if m.Interval <= 0 {
			return 0, fmt.Errorf("the daemon samples no metrics")
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no metrics sample of %s a whole interval after the burner started: %w", sb.id, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}
