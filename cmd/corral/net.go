package main

import (
	"context"
	"encoding/json"
	"os"

	"github.com/spf13/cobra"

	"corral/sdk/go/corral"
)

func newNetCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "net", Short: "Show or change a sandbox's network policy"}
	cmd.AddCommand(newNetSetCmd())
	return cmd
}

func newNetSetCmd() *cobra.Command {
	var n netFlags
	cmd := &cobra.Command{
		Use:   "set ID [--block-network | --cidr-allow R,... | --domain-allow D,...]",
		Short: "Replace a running sandbox's network policy (no flags: the default policy)",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			sb, err := c.SetNetwork(ctx, args[0], n.policy())
			if err != nil {
				return err
			}
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(sb.Network)
		}),
	}
	n.register(cmd.Flags())
	return cmd
}
