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
	rep := &Report{Version: v.Version}
	for _, rt := range runtimes {
		t0 := time.Now()
		s := newSession(&cfg, rt, w, logf)
		results := s.run(ctx)
		rep.Runtimes = append(rep.Runtimes, RuntimeReport{Runtime: rt, Results: results, Seconds: time.Since(t0).Seconds()})
	}
	return rep, nil
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
