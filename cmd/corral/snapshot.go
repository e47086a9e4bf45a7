package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"corral/sdk/go/corral"
)

func newSnapshotCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "snapshot", Short: "Snapshot a running sandbox"}
	cmd.AddCommand(newSnapshotFSCmd())
	return cmd
}

func newSnapshotFSCmd() *cobra.Command {
	var tag string
	cmd := &cobra.Command{
		Use:   "fs ID [-t NAME:TAG]",
		Short: "Turn a running sandbox's files into an image (either runtime can start from it); the sandbox keeps running",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			img, err := c.SnapshotFS(ctx, args[0], tag)
			if err != nil {
				return err
			}
			fmt.Println(img.Digest)
			return nil
		}),
	}
	cmd.Flags().StringVarP(&tag, "tag", "t", "", "name:tag for the image")
	return cmd
}
