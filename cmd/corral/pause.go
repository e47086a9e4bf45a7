package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"corral/sdk/go/corral"
)

func newPauseCmd() *cobra.Command {
	var fsOnly bool
	cmd := &cobra.Command{
		Use:   "pause [--filesystem-only] ID",
		Short: "Save a running sandbox to disk, freeing its CPU and memory (its paused time does not count against its timeout)",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			pause := c.Pause
			if fsOnly {
				pause = c.PauseFilesystem
			}
			sb, err := pause(ctx, args[0])
			if err != nil {
				return err
			}
			fmt.Println(sb.State)
			return nil
		}),
	}
	cmd.Flags().BoolVar(&fsOnly, "filesystem-only", false, "keep only the root filesystem: processes end, and resume boots the sandbox afresh on its files")
	return cmd
}

func newResumeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "resume ID",
		Short: "Bring a paused sandbox back with its processes, files and connections (after --filesystem-only: booted afresh on its files)",
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
