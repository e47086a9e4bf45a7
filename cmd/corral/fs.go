package main

import "github.com/spf13/cobra"

func newFsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "fs", Short: "Read and write files in a sandbox"}
	cmd.AddCommand(newFsPutCmd(), newFsGetCmd(), newFsLsCmd(), newFsRmCmd(), newFsMkdirCmd())
	return cmd
}
