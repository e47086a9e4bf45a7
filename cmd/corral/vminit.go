package main

import (
	"os"

	"github.com/spf13/cobra"

	"corral/internal/vminit"
)

// newVMInitCmd is PID 1 of a vm sandbox's initramfs: the kernel runs
// "/init vminit" (arguments after "--" on its command line).
func newVMInitCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "vminit",
		Short:              "First stage of a vm sandbox's guest (PID 1 of its initramfs; not for direct use)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Getpid() != 1 {
				return exitCode(2)
			}
			return exitCode(vminit.Main())
		},
	}
}
