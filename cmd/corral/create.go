package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newCreateCmd() *cobra.Command {
	var f createFlags
	cmd := &cobra.Command{
		Use:   "create [flags]",
		Short: "Create a sandbox and print its id",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			req, err := f.request()
			if err != nil {
				return err
			}
			ctx, cancel := cmdContext()
			defer cancel()
			sb, err := c.Create(ctx, req)
			if err != nil {
				return err
			}
			fmt.Println(sb.ID)
			return nil
		},
	}
	f.register(cmd.Flags(), true)
	return cmd
}
