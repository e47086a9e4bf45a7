package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func newFsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "fs", Short: "Read and write files in a sandbox"}
	cmd.AddCommand(newFsPutCmd(), newFsGetCmd(), newFsLsCmd(), newFsRmCmd(), newFsMkdirCmd())
	return cmd
}

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
			e, err := c.WriteFile(ctx, args[0], args[2], in, mode)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "wrote %s (%d bytes)\n", e.Path, e.Size)
			return nil
		},
	}
}

func newFsGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get ID REMOTE LOCAL",
		Short: "Copy a file out of a sandbox (- writes stdout)",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			ctx, cancel := cmdContext()
			defer cancel()
			r, size, err := c.ReadFile(ctx, args[0], args[1])
			if err != nil {
				return err
			}
			defer r.Close()
			if args[2] == "-" {
				_, err = io.Copy(os.Stdout, r)
				return err
			}
			return writeLocal(args[2], r, size)
		},
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

func newFsLsCmd() *cobra.Command {
	var (
		depth  int
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "ls ID PATH",
		Short: "List a directory in a sandbox",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			ctx, cancel := cmdContext()
			defer cancel()
			es, err := c.ListDir(ctx, args[0], args[1], depth)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(os.Stdout).Encode(es)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			for _, e := range es {
				name := e.Path
				if e.SymlinkTarget != "" {
					name += " -> " + e.SymlinkTarget
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", e.Permissions, e.Owner, e.Group, e.Size, e.ModifiedAt.Local().Format(time.DateTime), name)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVar(&depth, "depth", 1, "levels to descend (1..16)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newFsRmCmd() *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "rm ID PATH",
		Short: "Remove a file or directory in a sandbox",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			ctx, cancel := cmdContext()
			defer cancel()
			return c.Remove(ctx, args[0], args[1], recursive)
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "remove directories and their contents")
	return cmd
}

func newFsMkdirCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "mkdir ID PATH",
		Short: "Create a directory (and its parents) in a sandbox",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			ctx, cancel := cmdContext()
			defer cancel()
			_, err = c.MakeDir(ctx, args[0], args[1])
			return err
		},
	}
}
