package main

import (
	"context"

	"github.com/spf13/cobra"

	"corral/sdk/go/corral"
)

func newFsMkdirCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "mkdir ID PATH",
		Short: "Create a directory (and its parents) in a sandbox",
		Args:  cobra.ExactArgs(2),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			_, err := c.MakeDir(ctx, args[0], args[1], fsOpts()...)
			return err
		}),
	}
}
