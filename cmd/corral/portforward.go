package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"corral/sdk/go/corral"
)

func newPortForwardCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "port-forward ID [LOCAL:]PORT",
		Short: "Forward a local TCP port to an exposed port in a sandbox (raw TCP tunnel)",
		Args:  cobra.ExactArgs(2),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			local, remote, err := parseForward(args[1])
			if err != nil {
				return err
			}
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(local)))
			if err != nil {
				return err
			}
			defer l.Close()
			fmt.Fprintf(os.Stderr, "forwarding %s -> %s:%d\n", l.Addr(), args[0], remote)
			go func() { <-ctx.Done(); l.Close() }()
			for {
				conn, err := l.Accept()
				if err != nil {
					return nil
				}
				go forwardOne(ctx, c, args[0], remote, conn)
			}
		}),
	}
}

func parseForward(s string) (int, int, error) {
	l, r, ok := strings.Cut(s, ":")
	if !ok {
		l, r = s, s
	}
	local, err1 := strconv.Atoi(l)
	remote, err2 := strconv.Atoi(r)
	if err1 != nil || err2 != nil || local < 0 || local > 65535 || remote < 1 || remote > 65535 {
		return 0, 0, fmt.Errorf("%q: want [LOCAL:]PORT", s)
	}
	return local, remote, nil
}

func forwardOne(ctx context.Context, c *corral.Client, id string, port int, down net.Conn) {
	defer down.Close()
	up, err := c.Tunnel(ctx, id, port)
	if err != nil {
		fmt.Fprintln(os.Stderr, "corral:", err)
		return
	}
	defer up.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(up, down)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}()
	_, _ = io.Copy(down, up)
	if cw, ok := down.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	wg.Wait()
}
