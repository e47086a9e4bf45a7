package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"

	"golang.org/x/sys/unix"
)

// Main is the entry point of `corral agent --listen unix:PATH [--root DIR]`
// (and of the one-shot `corral agent boot-id UUID`, BootIDMain); args are
// the arguments after the subcommand. It takes on PID 1's duties
// (or becomes a child subreaper when it is not PID 1), listens, and serves
// until SIGTERM or SIGINT, which kill every process group it started (every
// process in the sandbox when it is PID 1). It returns the exit code.
func Main(ctx context.Context, args []string) int {
	if len(args) > 0 && args[0] == "boot-id" {
		return BootIDMain(args[1:])
	}
	fs := flag.NewFlagSet("corral agent", flag.ContinueOnError)
	listenAt := fs.String("listen", "", "where to serve the agent protocol: unix:PATH or vport:NAME (a virtio-serial port)")
	root := fs.String("root", "/", "directory that file paths are resolved in")
	upper := fs.String("upper", "", "the root overlay's upper directory, for exports of the sandbox's changes")
	var nameservers []netip.Addr
	fs.Func("nameserver", "write /etc/resolv.conf naming this resolver (repeatable)", func(v string) error {
		a, err := netip.ParseAddr(v)
		if err == nil {
			nameservers = append(nameservers, a)
		}
		return err
	})
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if fs.NArg() > 0 || *listenAt == "" {
		fmt.Fprintln(fs.Output(), "usage: corral agent --listen unix:PATH|vport:NAME [--root DIR]")
		return 2
	}
	defer absorbSignals()()
	if err := becomeInit(); err != nil {
		log.Warn("cannot become a child subreaper; orphans will not be reaped", "op", "init", "err", err)
	}
	setDefaultEnv()
	if name, err := os.Hostname(); err == nil {
		if err := writeHostFiles(*root, name); err != nil {
			log.Warn("cannot write /etc/hostname and /etc/hosts", "op", "init", "err", err)
		}
	}
	if len(nameservers) > 0 {
		if err := writeResolvConf(*root, nameservers); err != nil {
			log.Warn("cannot write /etc/resolv.conf", "op", "init", "err", err)
		}
	}
	l, err := listen(*listenAt)
	if err != nil {
		log.Error("listen failed", "op", "init", "err", err)
		return 1
	}
	cfg := Config{Root: *root, Listen: *listenAt, UpperDir: *upper, Logger: log, Console: os.Stdout}
	if h, ok := l.(*hostListener); ok {
		cfg.OnSessionEnd = func() {
			if err := h.Release(); err != nil {
				log.Warn("releasing the listener", "op", "end_session", "err", err)
			}
		}
	}
	srv := New(cfg)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT)
	defer signal.Stop(sigs)
	go func() {
		select {
		case sig := <-sigs:
			log.Info("terminating", "op", "init", "signal", sig.String())
			srv.KillAll()
			cancel()
		case <-ctx.Done():
		}
	}()
	if h, ok := l.(*hostListener); ok {
		go relistenOnSignal(ctx, h, log)
	}
	log.Info("agent listening", "op", "init", "listen", *listenAt, "pid", os.Getpid())
	if err := srv.Serve(ctx, l); err != nil {
		log.Error("serving failed", "op", "init", "err", err)
		return 1
	}
	return 0
}

// becomeInit makes this process the reaper of orphans: PID 1 is by nature;
// otherwise it asks to be a child subreaper.
func becomeInit() error {
	if os.Getpid() == 1 {
		return nil
	}
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// absorbSignals keeps stray signals from killing the agent. The kernel
// spares PID 1 only the signals it has no handler for, and the Go runtime
// installs handlers that exit on SIGHUP, SIGUSR1, SIGPIPE (a console that
// went away) and many more, so code in the sandbox could kill its init with
// kill(1, SIGHUP). Relaying every signal to a channel nobody reads turns them
// into no-ops; unlike ignoring them, it is not inherited across exec, so the
// processes the agent starts get default dispositions. SIGTERM and SIGINT
// are still handled by Main, SIGCHLD by the reaper.
// It returns a func that stops absorbing.
func absorbSignals() (stop func()) {
	sink := make(chan os.Signal, 1)
	signal.Notify(sink)
	return func() { signal.Stop(sink) }
}

// setDefaultEnv gives processes a usable PATH and HOME when the runtime
// started the agent with an empty environment.
func setDefaultEnv() {
	if os.Getenv("PATH") == "" {
		os.Setenv("PATH", defaultPath)
	}
	if os.Getenv("HOME") == "" {
		os.Setenv("HOME", rootAccount.home)
	}
}

// listen listens on "unix:PATH" (gvisor: a socket the host reaches through
// --host-uds) or "vport:NAME" (vm: a virtio-serial port).
func listen(addr string) (net.Listener, error) {
	if name, ok := strings.CutPrefix(addr, "vport:"); ok {
		return listenVport(name)
	}
	return newHostListener(addr)
}

// relistenOnSignal listens again each time SIGUSR2 arrives (see
// hostListener), until ctx ends.
func relistenOnSignal(ctx context.Context, h *hostListener, log *slog.Logger) {
	usr2 := make(chan os.Signal, 1)
	signal.Notify(usr2, unix.SIGUSR2)
	defer signal.Stop(usr2)
	for {
		select {
		case <-usr2:
			if err := h.Relisten(); err != nil {
				log.Error("listening again", "op", "relisten", "err", err)
			}
		case <-ctx.Done():
			return
		}
	}
}

// listenUnix listens on "unix:PATH", removing a stale socket left by a
// previous agent (but nothing that is not a socket).
func listenUnix(addr string) (net.Listener, error) {
	path, ok := strings.CutPrefix(addr, "unix:")
	if !ok || path == "" {
		return nil, fmt.Errorf("listen address %q: want unix:PATH", addr)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("listen address %s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing stale socket: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return net.Listen("unix", path)
}

// KillAll SIGKILLs every process group the agent started and, as PID 1,
// every other process in the sandbox (kill(-1) spares only the caller).
func (s *Server) KillAll() {
	for _, pgid := range s.procs.pgids() {
		_ = unix.Kill(-pgid, unix.SIGKILL)
	}
	if os.Getpid() == 1 {
		_ = unix.Kill(-1, unix.SIGKILL)
	}
}
