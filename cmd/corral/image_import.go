package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"corral/sdk/go/corral"
)

func newImageImportCmd() *cobra.Command {
	var tag string
	cmd := &cobra.Command{
		Use:   "import ARCHIVE -t NAME:TAG",
		Short: "Import an image archive (docker save, or a tar of an OCI layout)",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			img, err := c.ImportImage(ctx, f, tag)
			if err != nil {
				return err
			}
			fmt.Println(img.Digest)
			return nil
		}),
	}
	cmd.Flags().StringVarP(&tag, "tag", "t", "", "name:tag for the image (required)")
	_ = cmd.MarkFlagRequired("tag")
	return cmd
}

func newImagePullCmd() *cobra.Command {
	var insecure bool
	cmd := &cobra.Command{
		Use:   "pull REF",
		Short: "Pull an image from a registry (credentials from the docker config)",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			img, err := c.PullImage(ctx, args[0], insecure)
			if err != nil {
				return err
			}
			fmt.Println(img.Digest)
			return nil
		}),
	}
	cmd.Flags().BoolVar(&insecure, "insecure", false, "allow a plain-HTTP registry (loopback registries always may)")
	return cmd
}
