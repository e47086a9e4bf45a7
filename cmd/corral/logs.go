package main

import (
	"context"
	"io"
	"os"

	"corral/sdk/go/corral"

	"github.com/spf13/cobra"
)

func newLogsCmd() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print the output of a sandbox's entrypoint",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			r, err := c.Logs(ctx, args[0], follow)
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = io.Copy(os.Stdout, r)
			return err
		}),
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep streaming until the sandbox ends")
	return cmd
}
