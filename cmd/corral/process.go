package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// runProcess runs req in sandbox id with the terminal's streams and returns
// the exit code the CLI should exit with.
func runProcess(ctx context.Context, c *corral.Client, id string, req apiv1.ExecRequest, forwardStdin bool) (int, error) {
	var stdin io.Reader
	if forwardStdin {
		stdin = os.Stdin
	}
	res, err := c.Run(ctx, id, req, stdin, os.Stdout, os.Stderr)
	if err != nil {
		if ae, ok := err.(*corral.Error); ok {
			// Answer as a shell does when the command cannot run.
			if strings.Contains(ae.Message, "args: ") {
				switch ae.Code {
				case "not_found":
					fmt.Fprintln(os.Stderr, "corral:", ae.Message)
					return 127, nil
				case "permission_denied":
					fmt.Fprintln(os.Stderr, "corral:", ae.Message)
					return 126, nil
				}
			}
		}
		return 1, err
	}
	switch {
	case res.OOMKilled:
		fmt.Fprintln(os.Stderr, "corral: killed:", res.Error)
	case res.Error != "":
		fmt.Fprintln(os.Stderr, "corral:", res.Error)
	}
	return res.ExitCode, nil
}
