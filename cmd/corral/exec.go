package main

import (
	"fmt"
	"time"

	"corral/pkg/apiv1"

	"github.com/spf13/cobra"
)

func newExecCmd() *cobra.Command {
	var (
		noStdin bool
		detach  bool
		cwd     string
		user    string
		env     []string
		secrets []string
		timeout time.Duration
		tree    bool
	)
	cmd := &cobra.Command{
		Use:   "exec ID -- CMD [ARG...]",
		Short: "Run a command in a running sandbox",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			envs, err := pairs("--env", env)
			if err != nil {
				return err
			}
			ctx, cancel := cmdContext()
			defer cancel()
			req := apiv1.ExecRequest{Cmd: args[1:], Cwd: cwd, User: user, Env: envs, Timeout: timeout.Seconds(), KillTree: tree, Secrets: secrets}
			if detach {
				req.Background = true
				s, err := c.Exec(ctx, args[0], req)
				if err != nil {
					return err
				}
				fmt.Println(s.PID())
				return s.Close()
			}
			code, err := runProcess(ctx, c, args[0], req, !noStdin)
			if err != nil {
				return err
			}
			if code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&noStdin, "no-stdin", false, "do not forward stdin")
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "run in the background and print the pid (see ps, attach)")
	cmd.Flags().StringVarP(&cwd, "workdir", "w", "", "working directory")
	cmd.Flags().StringVarP(&user, "user", "u", "", "user (name, uid or uid:gid)")
	cmd.Flags().StringArrayVarP(&env, "env", "e", nil, "environment variable K=V (repeatable)")
	cmd.Flags().StringArrayVar(&secrets, "secret", nil, "a stored secret whose keys and values the process gets as env variables (repeatable)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "kill the command's process group after this long (exit 124); see --kill-tree")
	cmd.Flags().BoolVar(&tree, "kill-tree", false, "the timeout, Ctrl-C and signals kill every descendant of the command, setsid'd ones too, not only its process group")
	return cmd
}
