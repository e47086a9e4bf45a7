package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"corral/internal/daemon"
	"corral/internal/manager"
	"corral/internal/mcp"

	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command {
	cfg := daemon.Config{}
	var level, logFile, logFormat string
	var logMaxMB int64
	var logMaxFiles int
	var caCerts []string
	var auditOn bool
	var metering bool
	var cluster clusterFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the Corral daemon",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Metering.Off = !metering
			var lv slog.Level
			err := lv.UnmarshalText([]byte(level))
			if err != nil {
				return err
			}
			var out io.Writer = os.Stderr
			if logFile != "" {
				f, err := daemon.OpenLogFile(logFile, logMaxMB<<20, logMaxFiles)
				if err != nil {
					return err
				}
				defer f.Close()
				stop := reopenOnHUP(f)
				defer stop()
				out = f
			}
			if cfg.Logger, err = newLogger(out, logFormat, lv); err != nil {
				return err
			}
			cfg.Version = version
			if err := cluster.apply(&cfg); err != nil {
				return err
			}
			if cluster.control {
				ctx, cancel := cmdContext()
				defer cancel()
				// A control plane serves an envd face only when asked
				// (the default address is one per host).
				envd := ""
				if cmd.Flags().Changed("envd-listen") {
					envd = cfg.EnvdListen
				}
				return runControl(ctx, cluster, cfg.Listen, envd, cfg.E2BRuntime, cfg.ReadyFile, cfg.MCPMaxTimeout, cfg.Logger)
			}
			cfg.AuditOff = !auditOn
			if cfg.CACerts, err = readCACerts(caCerts); err != nil {
				return err
			}
			ctx, cancel := cmdContext()
			defer cancel()
			return daemon.Run(ctx, cfg)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&caCerts, "ca-cert", nil, "a PEM file of CA certificates every sandbox and image build trusts beyond its image's (repeatable)")
	f.StringVar(&cfg.SecretUpstreamCA, "secret-upstream-ca", "", "a PEM file of CAs trusted, beside the system's, for the real certificates of hosts that --secret-header rules inject into")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:7070", "address of the HTTP API")
	f.StringVar(&cfg.ReadyFile, "ready-file", "", "once serving, write the bound addresses (JSON: listen, envd_listen, ports_listen, ports_domain, metrics_listen, pid) to this file: how a caller that gave port 0 learns the port")
	f.StringVar(&cfg.EnvdListen, "envd-listen", "127.0.0.1:49983", "address of the E2B envd face (E2B clients' E2B_SANDBOX_URL); empty: off")
	f.StringVar(&cfg.PortsListen, "ports-listen", "127.0.0.1:7071", "address of the ports origin: exposed ports for browsers, each at <port>-<id>.<--ports-domain>, never on the API's (the console's) origin; empty: off, and browsers are refused exposed ports")
	f.StringVar(&cfg.PortsDomain, "ports-domain", "", "domain, with the port browsers reach --ports-listen on unless the scheme's, under which each exposed port gets the host <port>-<id>.<domain> (a wildcard DNS name to this host; default localhost:<--ports-listen's port>)")
	f.StringSliceVar(&cfg.ConsoleHosts, "console-host", nil, "a host name browsers open the console (--listen) under when it is not --listen's own, e.g. behind a reverse proxy (repeatable); corral serve refuses a --ports-domain that shares a registrable domain with it or with --listen's")
	f.BoolVar(&cfg.PortsSharedParentOK, "ports-domain-shared-parent-ok", false, "start even though --ports-domain shares a registrable domain with the console's host, with a warning in the log: a sandbox's page could then set cookies for that domain that browsers send to the console (shadowing its session over plain HTTP, or filling its requests' headers until they are refused)")
	f.StringVar(&cfg.EnvdDebugSandbox, "envd-debug-sandbox", "", "sandbox (id or name) the E2B SDK's debug mode (E2B_DEBUG=true) reaches through the envd face, with no access token; needs a loopback --envd-listen")
	f.StringVar(&cfg.E2BRuntime, "e2b-runtime", "", "runtime of the sandboxes E2B clients create from a template: gvisor (the default) or vm; a memory snapshot's copy keeps the snapshot's")
	f.StringVar(&cfg.StateDir, "state-dir", "/var/lib/corral", "state directory (records, token, sandboxes, caches)")
	f.StringVar(&cfg.RunscPath, "runsc", "", "runsc binary (default <state-dir>/bin/runsc)")
	f.StringVar(&cfg.BaseRootFS, "base-rootfs", "", "root filesystem of the base image (default <state-dir>/rootfs/debian-bookworm)")
	f.StringVar(&cfg.Platform, "platform", "systrap", "gVisor platform")
	f.StringVar(&cfg.VMKernel, "vm-kernel", "", "guest kernel of the vm runtime: vmlinuz and lib/modules (default <state-dir>/vm/kernel/current)")
	f.StringVar(&cfg.QEMUPath, "qemu", "", "qemu-system-x86_64 binary of the vm runtime (default: on PATH)")
	f.StringVar(&cfg.VMAccel, "vm-accel", "", "vm accelerator: kvm or tcg (default: kvm where /dev/kvm runs ordinary guests, else tcg)")
	f.IntVar(&cfg.MaxSandboxes, "max-sandboxes", 0, "maximum live sandboxes; 0: as many idle ones as the machine's memory and thread limit hold (32 MiB and 32 threads each), at least 64")
	f.IntVar(&cfg.WarmPool, "warm-pool", daemon.AutoWarmPool,
		fmt.Sprintf("sandboxes of the default spec (base image, gvisor, default resources) kept started for fast creates; -1: one per CPU, 1 to 8 (%d here); 0: none", daemon.AutoWarmPoolSize()))
	f.Var(warmPoolsValue{&cfg.WarmPools}, "warm-pool-spec", "another warm pool (repeatable): size=N[,runtime=R][,image=I][,cpu=C][,memory_mb=M][,disk_mb=D]...")
	f.DurationVar(&cfg.MetricsInterval, "metrics-interval", 5*time.Second, "how often each running sandbox's CPU, memory and disk are sampled (corral stats, GET .../metrics); 0 turns sampling off")
	f.StringVar(&level, "log-level", "info", "log level: debug, info, warn, error")
	f.DurationVar(&cfg.Retention, "retention", manager.DefaultRetention,
		"how long after a sandbox ends its record (inspect, ls --all), events and entrypoint log are kept, then pruned in the background; 0: forever")
	f.StringVar(&logFormat, "log-format", "json", "log format: json (one JSON object a line) or text (key=value)")
	f.StringVar(&cfg.MetricsListen, "metrics-listen", "", "serve the Prometheus /metrics on this address without a token, and not on --listen (where it otherwise is, behind the token)")
	f.DurationVar(&cfg.MCPMaxTimeout, "mcp-max-timeout", mcp.DefaultMaxTimeout, "the longest lifetime a sandbox created through the daemon's /mcp may have (as corral mcp --max-timeout)")
	f.BoolVar(&auditOn, "audit", true, "keep the audit trail (corral audit): every changing API call, exec, file write, lifecycle move and network decision, hash-chained; --audit=false: off")
	f.DurationVar(&cfg.AuditRetention, "audit-retention", daemon.DefaultAuditRetention,
		"how long audit trail entries are kept, then pruned (a checkpoint entry keeps the rest verifiable); 0: forever")
	f.BoolVar(&metering, "metering", true, "meter each sandbox's usage (CPU-seconds, memory, network bytes, disk, wall time; corral usage, GET /v1/usage)")
	f.DurationVar(&cfg.Metering.Retention, "usage-retention", manager.DefaultUsageRetention,
		"how long after a sandbox ends its usage record is kept, then pruned in the background; 0: forever")
	f.StringVar(&logFile, "log-file", "", "append the log to this file (created 0600, an existing one made 0600) instead of stderr; rotated by size, and reopened on SIGHUP")
	f.Int64Var(&logMaxMB, "log-max-size", 100, "rotate --log-file when it would pass this many MiB (to FILE.1, FILE.2, ...); 0: never")
	f.IntVar(&logMaxFiles, "log-max-files", 5, "rotated log files kept beside --log-file")
	f.BoolVar(&cfg.Net.Disabled, "no-network", false, "run every sandbox without a network (block_network)")
	f.Var(prefixValue{&cfg.Net.Pool}, "net-pool", "sandbox address pool, a /30 per sandbox (default 10.88.0.0/16)")
	f.StringVar(&cfg.Net.Table, "net-table", "corral", "nftables table the daemon owns")
	f.StringVar(&cfg.Net.LinkPrefix, "net-link-prefix", "crl", "name prefix of the host-side veths")
	f.Uint16Var(&cfg.Net.DNSPort, "dns-port", 15053, "port of the sandboxes' resolver on each gateway")
	f.Uint16Var(&cfg.Net.ProxyPort, "proxy-port", 15001, "port of the egress proxy on each gateway")
	f.Uint16Var(&cfg.Net.LogGroup, "net-log-group", 7717, "NFLOG group through which the kernel reports refused packets")
	f.StringSliceVar(&cfg.Net.DNSUpstream, "dns-upstream", nil, "upstream resolvers host:port (default: /etc/resolv.conf)")
	f.Var(prefixesValue{&cfg.Net.OperatorAllowed}, "allow-range", "re-open an always-denied range for every sandbox (repeatable)")
	addShareFlags(f, &cfg.Shares)
	addClusterFlags(f, &cluster)
	return cmd
}

// warmPoolsValue is a repeatable --warm-pool-spec.
type warmPoolsValue struct{ p *[]manager.WarmPoolConfig }

func (v warmPoolsValue) String() string { return fmt.Sprint(len(*v.p)) }
func (v warmPoolsValue) Type() string   { return "pool" }
func (v warmPoolsValue) Set(s string) error {
	c, err := manager.ParseWarmPool(s)
	if err != nil {
		return err
	}
	*v.p = append(*v.p, c)
	return nil
}

// reopenOnHUP reopens f on each SIGHUP (for logrotate and the like) until
// the returned stop is called.
func reopenOnHUP(f *daemon.LogFile) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				if err := f.Reopen(); err != nil {
					fmt.Fprintf(os.Stderr, "corral: reopening the log on SIGHUP: %v\n", err)
				}
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}
