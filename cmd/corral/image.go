package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

func newImageCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Manage images (sandboxes start from them with --image)"}
	cmd.AddCommand(newImageLsCmd(), newImageInspectCmd(), newImageRmCmd(), newImagePruneCmd(), newImageImportCmd(), newImagePullCmd(), newImageBuildCmd())
	return cmd
}

func newImageLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List images",
		Args:  cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			imgs, err := c.Images(ctx)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			if slices.ContainsFunc(imgs, func(img apiv1.Image) bool { return len(img.Nodes) > 0 }) {
				// A control plane's list: where each image is.
				fmt.Fprintln(tw, "TAGS\tDIGEST\tSIZE\tNODES")
				for _, img := range imgs {
					fmt.Fprintf(tw, "%s\t%.19s\t%d MiB\t%s\n", strings.Join(img.Tags, ","), img.Digest, img.Size>>20, strings.Join(img.Nodes, ","))
				}
				return tw.Flush()
			}
			fmt.Fprintln(tw, "TAGS\tDIGEST\tLAYERS\tSIZE\tCREATED\tIN USE")
			for _, img := range imgs {
				fmt.Fprintf(tw, "%s\t%.19s\t%d\t%d MiB\t%s\t%v\n", strings.Join(img.Tags, ","), img.Digest, len(img.Layers),
					img.Size>>20, img.Created.Local().Format(time.DateTime), img.InUse)
			}
			return tw.Flush()
		}),
	}
}

func newImageInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect REF",
		Short: "Print an image's record as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			img, err := c.Image(ctx, args[0])
			if err != nil {
				return err
			}
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(img)
		}),
	}
}

func newImageRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm REF...",
		Short: "Untag images (layers go at the next prune)",
		Args:  cobra.MinimumNArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			for _, ref := range args {
				if err := c.RemoveImage(ctx, ref); err != nil {
					return fmt.Errorf("%s: %w", ref, err)
				}
				fmt.Println(ref)
			}
			return nil
		}),
	}
}
