// Command corral is Corral's one binary: the daemon (corral serve), the CLI
// that talks to it, and the guest agent (corral agent) that runs as PID 1
// inside every sandbox. This package only wires packages together.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// exitCode makes the process exit with a given code without printing.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func main() {
	root := newRoot()
	err := root.Execute()
	var code exitCode
	switch {
	case err == nil:
	case errors.As(err, &code):
		os.Exit(int(code))
	default:
		fmt.Fprintln(os.Stderr, "corral:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "corral",
		Short:         "Disposable sandboxes for AI agents",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newServeCmd(), newAgentCmd(), newVMInitCmd(), newNFSDCmd(),
		newRunCmd(), newCreateCmd(), newExecCmd(), newLsCmd(), newInspectCmd(), newRmCmd(),
		newWaitCmd(), newLogsCmd(), newEventsCmd(), newShellCmd(), newFsCmd(), newBenchCmd(),
		newPsCmd(), newAttachCmd(), newNetCmd(), newURLCmd(), newPortForwardCmd(), newImageCmd(), newSnapshotCmd(), newPauseCmd(), newResumeCmd(), newForkCmd(),
		newTimeoutCmd(), newTagCmd(), newStatsCmd(), newMCPCmd(), newVolumeCmd(), newSecretCmd(), newAuditCmd(), newUsageCmd(),
		newSelftestCmd(), newSelftestProbeCmd(), newNodeCmd(),
	)
	return root
}
