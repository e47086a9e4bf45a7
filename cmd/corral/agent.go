package main

import (
	"context"

	"corral/internal/agent"

	"github.com/spf13/cobra"
)

func newAgentCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "agent",
		Short:              "Run the guest agent (PID 1 inside a sandbox; not for direct use)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := agent.Main(context.Background(), args); code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
}
