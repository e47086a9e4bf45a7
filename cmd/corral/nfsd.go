package main

import (
	"github.com/spf13/cobra"

	"corral/internal/volume/nfsd"
)

// newNFSDCmd is the NFS server of one volume mount of a vm sandbox, a
// child of the daemon (internal/volume/nfsd).
func newNFSDCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "nfsd",
		Short:              "Serve one volume to one vm guest over NFS (run by the daemon; not for direct use)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := nfsd.ChildMain(args); code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
}
