package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"corral/pkg/apiv1"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func newShellCmd() *cobra.Command {
	var shell string
	cmd := &cobra.Command{
		Use:   "shell ID",
		Short: "Open an interactive shell (PTY) in a sandbox",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			id := args[0]
			fd := int(os.Stdin.Fd())
			cols, rows := 80, 24
			if term.IsTerminal(fd) {
				if w, h, err := term.GetSize(fd); err == nil {
					cols, rows = w, h
				}
				old, err := term.MakeRaw(fd)
				if err != nil {
					return err
				}
				defer term.Restore(fd, old)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := apiv1.ExecRequest{
				Cmd:   []string{shell, "-l"},
				Env:   map[string]string{"TERM": envOr("TERM", "xterm-256color")},
				Stdin: true, PTY: &apiv1.PTYSize{Cols: uint16(cols), Rows: uint16(rows)},
			}
			s, err := c.Exec(ctx, id, req)
			if err != nil {
				return err
			}
			defer s.Close()
			go func() { _ = c.Stdin(ctx, id, s.PID(), os.Stdin, true) }()
			go forwardResize(ctx, fd, func(w, h int) { _ = c.Resize(ctx, id, s.PID(), uint16(w), uint16(h)) })
			res, err := s.Copy(os.Stdout, os.Stderr)
			if err != nil {
				return err
			}
			if res.ExitCode != 0 {
				return exitCode(res.ExitCode)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&shell, "shell", "/bin/bash", "shell to run")
	return cmd
}

// forwardResize calls resize with the terminal's size on every SIGWINCH.
func forwardResize(ctx context.Context, fd int, resize func(w, h int)) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	defer signal.Stop(ch)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
			if w, h, err := term.GetSize(fd); err == nil {
				resize(w, h)
			}
		}
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
