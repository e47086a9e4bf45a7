package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"corral/sdk/go/corral"

	"github.com/spf13/cobra"
)

func newWaitCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait ID",
		Short: "Wait for a sandbox to end; print and exit with its exit code (124 timeout, 137 killed)",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			res, err := c.Wait(ctx, args[0], timeout.Seconds())
			if err != nil {
				return err
			}
			fmt.Println(res.ExitCode)
			if res.Error != "" {
				fmt.Fprintf(os.Stderr, "end reason: %s: %s\n", res.EndReason, res.Error)
			} else {
				fmt.Fprintln(os.Stderr, "end reason:", res.EndReason)
			}
			if res.ExitCode != 0 {
				return exitCode(res.ExitCode)
			}
			return nil
		}),
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long")
	return cmd
}
