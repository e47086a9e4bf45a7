package main

import (
	"context"

	"github.com/spf13/cobra"

	"corral/sdk/go/corral"
)

func newFsRmCmd() *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "rm ID PATH",
		Short: "Remove a file or directory in a sandbox",
		Args:  cobra.ExactArgs(2),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			return c.Remove(ctx, args[0], args[1], recursive, fsOpts()...)
		}),
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "remove directories and their contents")
	return cmd
}
