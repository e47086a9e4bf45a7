package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"corral/sdk/go/corral"
)

func newVolumePutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "put NAME LOCAL PATH",
		Short: "Copy a local file into a volume from the host side, no sandbox needed (- reads stdin)",
		Args:  cobra.ExactArgs(3),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
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
			e, err := c.WriteVolumeFile(ctx, args[0], args[2], in, mode)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "wrote %s (%d bytes)\n", e.Path, e.Size)
			return nil
		}),
	}
}

func newVolumeGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME PATH LOCAL",
		Short: "Copy a file out of a volume from the host side, no sandbox needed (- writes stdout)",
		Args:  cobra.ExactArgs(3),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			r, size, err := c.ReadVolumeFile(ctx, args[0], args[1])
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
