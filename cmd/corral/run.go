package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"

	"github.com/spf13/cobra"
)

func newRunCmd() *cobra.Command {
	var (
		f       createFlags
		noStdin bool
		keep    bool
	)
	cmd := &cobra.Command{
		Use:   "run [flags] [-- CMD [ARG...]]",
		Short: "Create a sandbox, run a command in it with streamed output and forwarded stdin, then remove it",
		Long: "Creates a sandbox, runs CMD with stdout and stderr streamed as they come and stdin\n" +
			"forwarded, exits with CMD's exit code and terminates the sandbox. Without CMD it runs\n" +
			"the image's default command (its cmd).",
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
			if len(args) == 0 {
				if args, err = imageCmd(ctx, c, req.Image); err != nil {
					return err
				}
			}
			sb, err := c.Create(ctx, req)
			if err != nil {
				return err
			}
			if !keep {
				// The command has ended; the daemon removes the sandbox
				// without the CLI waiting for the host to be clean.
				defer func() {
					rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
					defer rcancel()
					if _, err := c.TerminateNoWait(rctx, sb.ID); err != nil {
						fmt.Fprintf(os.Stderr, "corral: removing %s: %v\n", sb.ID, err)
					}
				}()
			}
			code, err := runProcess(ctx, c, sb.ID, apiv1.ExecRequest{Cmd: args}, !noStdin)
			if err != nil {
				return err
			}
			if code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
	f.register(cmd.Flags(), false)
	cmd.Flags().BoolVar(&noStdin, "no-stdin", false, "do not forward stdin (the command gets /dev/null)")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the sandbox after the command ends")
	return cmd
}

// imageCmd is the default command of image ref.
func imageCmd(ctx context.Context, c *corral.Client, ref string) ([]string, error) {
	if ref == "" || ref == "base" {
		return nil, errors.New("give a command (-- CMD [ARG...]); the base image has no default command")
	}
	img, err := c.Image(ctx, ref)
	if err != nil {
		return nil, err
	}
	if len(img.Cmd) == 0 {
		return nil, fmt.Errorf("give a command (-- CMD [ARG...]); image %s has no default command", ref)
	}
	return img.Cmd, nil
}
