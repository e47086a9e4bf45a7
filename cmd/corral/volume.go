package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"corral/sdk/go/corral"
)

func newVolumeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "volume", Short: "Named volumes: data that outlives sandboxes (mount with create/run --volume NAME:/path[:ro])"}
	cmd.AddCommand(newVolumeCreateCmd(), newVolumeLsCmd(), newVolumeInspectCmd(), newVolumeRmCmd(), newVolumePutCmd(), newVolumeGetCmd())
	return cmd
}

func newVolumeCreateCmd() *cobra.Command {
	var size int64
	cmd := &cobra.Command{
		Use:   "create NAME [--size GiB]",
		Short: "Create a volume: a file system of --size GiB (sparse on the host; full is ENOSPC inside)",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			v, err := c.CreateVolume(ctx, args[0], size)
			if err != nil {
				return err
			}
			fmt.Println(v.Name)
			return nil
		}),
	}
	cmd.Flags().Int64Var(&size, "size", 0, "size in GiB (default 1, at most 1024)")
	return cmd
}

func newVolumeInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect NAME",
		Short: "Print a volume as JSON (size, use, the sandboxes that mount it)",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			v, err := c.Volume(ctx, args[0])
			if err != nil {
				return err
			}
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		}),
	}
}

func newVolumeRmCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "rm NAME... [--force]",
		Short: "Remove volumes and their data (refused while a sandbox mounts one; --force terminates those sandboxes first)",
		Args:  cobra.MinimumNArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			for _, n := range args {
				if err := c.RemoveVolume(ctx, n, force); err != nil {
					return err
				}
				fmt.Println(n)
			}
			return nil
		}),
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "terminate the sandboxes that mount it, then remove it")
	return cmd
}
