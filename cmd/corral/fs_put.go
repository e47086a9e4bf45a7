package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

func newFsPutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "put ID LOCAL REMOTE",
		Short: "Copy a local file into a sandbox (- reads stdin)",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			in, mode := io.Reader(os.Stdin), os.FileMode(0o644)
			if args[1] != "-" {
				f, err := os.Open(args[1])
				if err != nil {
					return err
				}
				defer f.Close()
				if st, err := f.Stat(); err == nil {
					mode = st.Mode().Perm()
				}
				in = f
			}
			ctx, cancel := cmdContext()
			defer cancel()
			e, err := c.WriteFile(ctx, args[0], args[2], in, mode, fsOpts()...)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "wrote %s (%d bytes)\n", e.Path, e.Size)
			return nil
		},
	}
}
