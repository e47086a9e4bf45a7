package scalebench

import (
	"fmt"
	"io"
	"time"
)

// Write prints r.
func (r Result) Write(w io.Writer) {
	fmt.Fprintf(w, "nodes %d, records %d (%d live), controls %d × %d placers, heartbeat %v, %.1fs\n",
		r.Nodes, r.Records, min(r.Records, r.LivePerNode*r.Nodes), r.Controls, r.Placers, r.Heartbeat, r.Elapsed.Seconds())
	if r.Controls > 0 {
		fmt.Fprintf(w, "  creates placed   %7d  %8.1f/s  p50 %8s  p99 %8s  max %8s  (no room: %d)\n",
			r.Creates, r.PerSecond(), ms(r.Place.P50), ms(r.Place.P99), ms(r.Place.Max), r.Exhausted)
	}
	if r.Heartbeat > 0 {
		want := float64(r.Nodes) / r.Heartbeat.Seconds()
		fmt.Fprintf(w, "  heartbeats       %7d  %8.1f/s  p50 %8s  p99 %8s  max %8s  (due: %.1f/s)\n",
			r.Heartbeats, float64(r.Heartbeats)/r.Elapsed.Seconds(), ms(r.Beat.P50), ms(r.Beat.P99), ms(r.Beat.Max), want)
	}
	if r.ShipEvery > 0 {
		sec := r.Elapsed.Seconds()
		fmt.Fprintf(w, "  audit shipments  %7d  %8.1f/s  p50 %8s  p99 %8s  max %8s  (%.0f entries/s)\n",
			r.AuditShips.N, float64(r.AuditShips.N)/sec, ms(r.AuditShips.P50), ms(r.AuditShips.P99), ms(r.AuditShips.Max), float64(r.AuditRows)/sec)
		due := 0.0
		if r.LiveEvery > 0 {
			due = float64(min(r.Records, r.LivePerNode*r.Nodes)) / r.LiveEvery.Seconds()
		}
		fmt.Fprintf(w, "  usage shipments  %7d  %8.1f/s  p50 %8s  p99 %8s  max %8s  (%.0f live records/s, every %v; due from the pre-loaded alone: %.0f/s)\n",
			r.UsageShips.N, float64(r.UsageShips.N)/sec, ms(r.UsageShips.P50), ms(r.UsageShips.P99), ms(r.UsageShips.Max), float64(r.UsageRows)/sec, r.LiveEvery, due)
	}
	fmt.Fprintf(w, "  CPU              postgres %.1fs, bench %.1fs, of %.1fs wall\n", r.PostgresCPU, r.BenchCPU, r.Elapsed.Seconds())
	if len(r.SQL) == 0 {
		return
	}
	var placeSQL, beatSQL, shipSQL float64
	for _, s := range r.SQL {
		switch {
		case s.Heartbeat():
			beatSQL += s.TotalMS
		case s.Ship():
			shipSQL += s.TotalMS
		default:
			placeSQL += s.TotalMS
		}
	}
	if r.Place.Sum > 0 {
		fmt.Fprintf(w, "  database share   placement SQL executing %.0f%% of placement time (%.1fs of %.1fs)\n",
			100*placeSQL/float64(r.Place.Sum.Milliseconds()), placeSQL/1000, r.Place.Sum.Seconds())
	}
	if r.Beat.Sum > 0 {
		fmt.Fprintf(w, "                   heartbeat SQL executing %.0f%% of heartbeat time (%.1fs of %.1fs)\n",
			100*beatSQL/float64(r.Beat.Sum.Milliseconds()), beatSQL/1000, r.Beat.Sum.Seconds())
	}
	if ship := r.AuditShips.Sum + r.UsageShips.Sum; ship > 0 {
		fmt.Fprintf(w, "                   shipping SQL executing %.0f%% of shipping time (%.1fs of %.1fs)\n",
			100*shipSQL/float64(ship.Milliseconds()), shipSQL/1000, ship.Seconds())
	}
	fmt.Fprintf(w, "  statements (server execution time):\n")
	for _, s := range r.SQL {
		fmt.Fprintf(w, "    %9.1fms %8d calls %8.3fms mean  %s\n", s.TotalMS, s.Calls, s.MeanMS, s.Label)
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }
