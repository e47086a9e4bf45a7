package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"corral/sdk/go/corral"
)

func newFsGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get ID REMOTE LOCAL",
		Short: "Copy a file out of a sandbox (- writes stdout)",
		Args:  cobra.ExactArgs(3),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			r, size, err := c.ReadFile(ctx, args[0], args[1], fsOpts()...)
			if err != nil {
				return err
			}
			defer r.Close()
			if args[2] == "-" {
				_, err = io.Copy(os.Stdout, r)
				return err
			}
			return writeLocal(args[2], r, size)
		}),
	}
}

// writeLocal writes r to path through a temporary file, so a failed copy
// never leaves a truncated file behind.
func writeLocal(path string, r io.Reader, size int64) error {
	tmp, err := os.CreateTemp(dirOf(path), ".corral-get-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, r)
	if err == nil && size >= 0 && n != size {
		err = fmt.Errorf("short read: got %d of %d bytes", n, size)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func dirOf(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			if i == 0 {
				return "/"
			}
			return path[:i]
		}
	}
	return "."
}
