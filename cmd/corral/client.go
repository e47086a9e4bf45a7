package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"corral/sdk/go/corral"

	"github.com/spf13/cobra"
)

// client returns the API client configured from the environment.
func client() (*corral.Client, error) { return corral.FromEnv() }

// cmdContext is cancelled by SIGINT/SIGTERM.
func cmdContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// withClient adapts f into a cobra RunE: f gets the API client and a
// context cancelled by SIGINT/SIGTERM.
func withClient(f func(ctx context.Context, c *corral.Client, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := client()
		if err != nil {
			return err
		}
		ctx, cancel := cmdContext()
		defer cancel()
		return f(ctx, c, args)
	}
}
