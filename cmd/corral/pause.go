package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"corral/sdk/go/corral"
)

func newPauseCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "pause ID",
		Short: "Save a running sandbox to disk, freeing its CPU and memory (its paused time does not count against its timeout)",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			sb, err := c.Pause(ctx, args[0])
			if err != nil {
				return err
			}
			fmt.Println(sb.State)
			return nil
		}),
	}
}

func newResumeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "resume ID",
		Short: "Bring a paused sandbox back with its processes, files and connections",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			sb, err := c.Resume(ctx, args[0])
			if err != nil {
				return err
			}
			fmt.Println(sb.State)
			return nil
		}),
	}
}
