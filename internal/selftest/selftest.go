// Package selftest is `corral selftest`: an adopter's hostile-tenant test
// run as a product feature. On the daemon's own host and configuration it
// starts fresh sandboxes, runs the attacker's probes in them
// (internal/selftest/probe: reach the host, escape, outlive rm, exhaust,
// leak), judges each attempt by the host's own evidence (its processes,
// cgroups, files, addresses, the selftest's fake internet in a network
// namespace), and reports a table per runtime.
//
// It talks to the daemon only through the public API (sdk/go/corral) and
// reads the host directly; it imports nothing of the daemon.
package selftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"corral/sdk/go/corral"
)

// Config says which daemon to test and how.
type Config struct {
	Client    *corral.Client
	APIPort   int      // the daemon's API port, tried from inside
	Runtimes  []string // empty: every runtime the daemon offers
	StateDir  string   // the daemon's --state-dir (host evidence)
	DaemonLog string   // the daemon's log file, searched for secrets ("" to skip)
	ProbeBin  string   // the binary uploaded as the probe (default: this one)
	Cases     []string // run only the cases whose name starts with one of these
	EnvdURL   string   // the daemon's E2B envd face ("": its cases are inconclusive)
	Log       io.Writer
}

// Run runs the selftest; the error is for what stopped it from running at
// all (not root, no daemon), while every case's verdict is in the Report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("selftest needs root on the daemon's host: it reads the host's processes, cgroups and files and builds a network namespace")
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.ProbeBin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding the probe binary: %w", err)
		}
		cfg.ProbeBin = exe
	}
	v, err := cfg.Client.Version(ctx)
	if err != nil {
		return nil, fmt.Errorf("asking the daemon its version: %w", err)
	}
	runtimes := cfg.Runtimes
	if len(runtimes) == 0 {
		runtimes = v.Runtimes
	}
	for _, rt := range runtimes {
		if !slices.Contains(v.Runtimes, rt) {
			return nil, fmt.Errorf("the daemon offers runtimes %v, not %q", v.Runtimes, rt)
		}
	}
	logf := func(format string, a ...any) { fmt.Fprintf(cfg.Log, "selftest: "+format+"\n", a...) }
	w, err := newWorld(ctx, cfg.ProbeBin, logf)
	if err != nil {
		return nil, fmt.Errorf("building the selftest's network: %w", err)
	}
	defer w.close()
	return runSessions(ctx, &cfg, runtimes, w, logf, v.Version), nil
}

// runSessions runs the runtimes' sessions side by side, each in sandboxes
// of its own, and then, one runtime at a time, the cases that must run
// alone (they time a neighbour, weigh the daemon's memory, or join the
// host to a network of its own); each session is cleaned up once its
// last case is done.
func runSessions(ctx context.Context, cfg *Config, runtimes []string, w *world, logf func(string, ...any), version string) *Report {
	sessions := make([]*session, len(runtimes))
	reports := make([]RuntimeReport, len(runtimes))
	started := make([]time.Time, len(runtimes))
	var wg sync.WaitGroup
	for i, rt := range runtimes {
		sessions[i], started[i] = newSession(cfg, rt, w, logf), time.Now()
		reports[i].Runtime = rt
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := sessions[i].start(ctx); r != nil {
				reports[i].Results, sessions[i] = []Result{*r}, nil
				return
			}
			reports[i].Results = sessions[i].runCases(ctx, false)
		}()
	}
	wg.Wait()
	for i, s := range sessions {
		if s != nil {
			reports[i].Results = inCaseOrder(append(reports[i].Results, s.runCases(ctx, true)...))
			s.cleanup()
		}
		reports[i].Seconds = time.Since(started[i]).Seconds()
	}
	return &Report{Version: version, Runtimes: reports}
}

// inCaseOrder sorts results as the cases are listed.
func inCaseOrder(rs []Result) []Result {
	order := map[string]int{}
	for i, c := range cases {
		order[c.name] = i
	}
	slices.SortStableFunc(rs, func(a, b Result) int { return order[a.Case] - order[b.Case] })
	return rs
}

// wanted says whether the case name is selected.
func (c *Config) wanted(name string) bool {
	if len(c.Cases) == 0 {
		return true
	}
	for _, p := range c.Cases {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
