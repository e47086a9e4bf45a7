package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm ID...",
		Short: "Terminate sandboxes (everything in them is killed and removed)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			ctx, cancel := cmdContext()
			defer cancel()
			var firstErr error
			for _, id := range args {
				if _, err := c.Terminate(ctx, id); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "corral: %s: %v\n", id, err)
					if firstErr == nil {
						firstErr = exitCode(1)
					}
					continue
				}
				fmt.Println(id)
			}
			return firstErr
		},
	}
}
