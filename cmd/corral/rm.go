package main

import (
	"context"
	"fmt"
	"os"

	"corral/sdk/go/corral"

	"github.com/spf13/cobra"
)

func newRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm ID...",
		Short: "Terminate sandboxes (everything in them is killed and removed)",
		Args:  cobra.MinimumNArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			var firstErr error
			for _, id := range args {
				if _, err := c.Terminate(ctx, id); err != nil {
					fmt.Fprintf(os.Stderr, "corral: %s: %v\n", id, err)
					if firstErr == nil {
						firstErr = exitCode(1)
					}
					continue
				}
				fmt.Println(id)
			}
			return firstErr
		}),
	}
}
