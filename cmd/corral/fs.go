package main

import (
	"github.com/spf13/cobra"

	"corral/sdk/go/corral"
)

// fsUser is the fs commands' --user.
var fsUser string

func newFsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "fs", Short: "Read and write files in a sandbox"}
	cmd.PersistentFlags().StringVarP(&fsUser, "user", "u", "",
		"act as this user (name or uid[:gid]): it owns what is created; default the sandbox's user")
	cmd.AddCommand(newFsPutCmd(), newFsGetCmd(), newFsLsCmd(), newFsRmCmd(), newFsMkdirCmd(), newFsWatchCmd())
	return cmd
}

// fsOpts are the file options the fs flags ask for.
func fsOpts() []corral.FileOption {
	if fsUser == "" {
		return nil
	}
	return []corral.FileOption{corral.AsUser(fsUser)}
}
