package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"corral/internal/mcp"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

func newMCPCmd() *cobra.Command {
	var (
		maxTimeout time.Duration
		httpAddr   string
	)
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve Corral's sandboxes as Model Context Protocol tools over stdio (or streamable HTTP with --http), talking to the daemon at CORRAL_URL with CORRAL_TOKEN",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			ctx, cancel := cmdContext()
			defer cancel()
			o := mcp.Options{MaxTimeout: maxTimeout, Version: version}
			if httpAddr == "" {
				return mcp.New(c, o).Run(ctx, &sdkmcp.StdioTransport{})
			}
			token := os.Getenv("CORRAL_TOKEN")
			if token == "" {
				return errors.New("--http needs CORRAL_TOKEN: HTTP clients must present it as a bearer token")
			}
			ln, err := net.Listen("tcp", httpAddr)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: mcp.HTTPHandler(c, o, token), ReadHeaderTimeout: 10 * time.Second}
			go func() { <-ctx.Done(); _ = srv.Close() }()
			fmt.Fprintf(os.Stderr, "listening on http://%s/\n", ln.Addr())
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&maxTimeout, "max-timeout", mcp.DefaultMaxTimeout, "the longest lifetime a sandbox created through MCP may have")
	cmd.Flags().StringVar(&httpAddr, "http", "", "serve MCP's streamable HTTP transport on this address (e.g. 127.0.0.1:7071) instead of stdio; clients need CORRAL_TOKEN as a bearer token")
	return cmd
}
