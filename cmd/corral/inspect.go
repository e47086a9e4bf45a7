package main

import (
	"context"
	"encoding/json"
	"os"

	"corral/sdk/go/corral"

	"github.com/spf13/cobra"
)

func newInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect ID",
		Short: "Print a sandbox's full record as JSON",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			sb, err := c.Get(ctx, args[0])
			if err != nil {
				return err
			}
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(sb)
		}),
	}
}
