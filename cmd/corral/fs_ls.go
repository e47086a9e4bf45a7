package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"corral/sdk/go/corral"
)

func newFsLsCmd() *cobra.Command {
	var (
		depth  int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "ls ID PATH",
		Short: "List a directory in a sandbox",
		Args:  cobra.ExactArgs(2),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			es, err := c.ListDir(ctx, args[0], args[1], depth, fsOpts()...)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(os.Stdout).Encode(es)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			for _, e := range es {
				name := e.Path
				if e.SymlinkTarget != "" {
					name += " -> " + e.SymlinkTarget
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", e.Permissions, e.Owner, e.Group, e.Size, e.ModifiedAt.Local().Format(time.DateTime), name)
			}
			return tw.Flush()
		}),
	}
	cmd.Flags().IntVar(&depth, "depth", 1, "levels to descend (1..16)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
