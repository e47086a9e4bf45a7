package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	"corral/internal/selftest"
	"corral/internal/selftest/probe"
	"corral/sdk/go/corral"

	"github.com/spf13/cobra"
)

func newSelftestCmd() *cobra.Command {
	var (
		runtime string
		asJSON  bool
		cfg     selftest.Config
	)
	cmd := &cobra.Command{
		Use:   "selftest",
		Short: "Attack fresh sandboxes of the running daemon as a hostile tenant would, and report what stayed contained (as root, on the daemon's host)",
		Long: "selftest starts fresh sandboxes on this daemon and tries, with its own probe, to reach the host and other sandboxes,\n" +
			"escape, outlive rm, exhaust shared resources and read secrets; each attempt is judged by the host's own evidence.\n" +
			"It prints a table per runtime and exits 1 if any case was not contained (or could not be judged).\n\nCases: " +
			strings.Join(selftest.Names(), ", "),
		Args: cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, c *corral.Client, _ []string) error {
			cfg.Client, cfg.Log = c, os.Stderr
			port, err := apiPort(c.BaseURL)
			if err != nil {
				return err
			}
			cfg.APIPort = port
			if runtime != "all" {
				cfg.Runtimes = []string{runtime}
			}
			if cfg.DaemonLog != "" {
				if _, err := os.Stat(cfg.DaemonLog); err != nil {
					cfg.DaemonLog = ""
				}
			}
			rep, err := selftest.Run(ctx, cfg)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else {
				rep.WriteTable(os.Stdout)
			}
			if rep.Failures() > 0 {
				return exitCode(1)
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&runtime, "runtime", "all", "gvisor, vm, or all (every runtime the daemon offers)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&cfg.StateDir, "state-dir", "/var/lib/corral", "the daemon's --state-dir (for the host's evidence)")
	f.StringVar(&cfg.DaemonLog, "daemon-log", "/var/log/corral.log", "the daemon's log file, searched for secrets (skipped if absent)")
	f.StringVar(&cfg.EnvdURL, "envd", "http://127.0.0.1:49983", "the daemon's E2B envd face (its --envd-listen), for the signed-URL case")
	f.StringSliceVar(&cfg.Cases, "case", nil, "run only the cases whose names start with these (e.g. reach/,exhaust/disk)")
	return cmd
}

// apiPort is the port of the daemon's URL.
func apiPort(base string) (int, error) {
	u, err := url.Parse(base)
	if err != nil {
		return 0, fmt.Errorf("CORRAL_URL %q: %w", base, err)
	}
	p := u.Port()
	if p == "" {
		p = map[string]string{"https": "443"}[u.Scheme]
		if p == "" {
			p = "80"
		}
	}
	return strconv.Atoi(p)
}

func newSelftestProbeCmd() *cobra.Command {
	return &cobra.Command{
		Use:                probe.Cmd,
		Short:              "Run one of selftest's probes (inside a sandbox; not for direct use)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := probe.Main(args, os.Stdout); code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
}
