package main

import (
	"os"
	"strconv"

	"github.com/spf13/cobra"
)

func newAttachCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "attach ID PID",
		Short: "Re-attach to a running process's output; exit with its exit code",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			pid, err := strconv.Atoi(args[1])
			if err != nil {
				return err
			}
			c, err := client()
			if err != nil {
				return err
			}
			ctx, cancel := cmdContext()
			defer cancel()
			s, err := c.Attach(ctx, args[0], pid)
			if err != nil {
				return err
			}
			defer s.Close()
			res, err := s.Copy(os.Stdout, os.Stderr)
			if err != nil {
				return err
			}
			if res.ExitCode != 0 {
				return exitCode(res.ExitCode)
			}
			return nil
		},
	}
}
