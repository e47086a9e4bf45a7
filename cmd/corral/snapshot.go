package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

func newSnapshotCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "snapshot", Short: "Snapshot a running sandbox (its files as an image, or its whole state) and manage memory snapshots"}
	cmd.AddCommand(newSnapshotFSCmd(), newSnapshotMemCmd(), newSnapshotLsCmd(), newSnapshotInspectCmd(), newSnapshotRmCmd())
	return cmd
}

func newSnapshotFSCmd() *cobra.Command {
	var tag string
	cmd := &cobra.Command{
		Use:   "fs ID [-t NAME:TAG]",
		Short: "Turn a running sandbox's files into an image (either runtime can start from it); the sandbox keeps running",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			res, err := c.SnapshotFS(ctx, args[0], tag)
			if err != nil {
				return err
			}
			printLeftOut(os.Stderr, res)
			fmt.Println(res.Digest)
			return nil
		}),
	}
	cmd.Flags().StringVarP(&tag, "tag", "t", "", "name:tag for the image")
	return cmd
}

func newSnapshotMemCmd() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "mem ID [--name NAME]",
		Short: "Save a running sandbox's whole state (memory, processes, files); start copies with create --from-snapshot",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			sn, err := c.SnapshotMemory(ctx, args[0], name)
			if err != nil {
				return err
			}
			fmt.Println(sn.ID)
			return nil
		}),
	}
	cmd.Flags().StringVarP(&name, "name", "n", "", "a name for the snapshot")
	return cmd
}

func newSnapshotLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List memory snapshots",
		Args:  cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, c *corral.Client, _ []string) error {
			all, err := c.Snapshots(ctx)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tSANDBOX\tRUNTIME\tIMAGE\tMEMORY\tSIZE\tCREATED")
			for _, sn := range all {
				name := sn.Name
				if name == "" {
					name = "-"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.19s\t%d MiB\t%d MiB\t%s\n", sn.ID, name, sn.SandboxID, sn.Runtime,
					sn.Image, sn.MemoryMB, sn.SizeBytes>>20, sn.CreatedAt.Local().Format(time.DateTime))
			}
			return w.Flush()
		}),
	}
}

func newSnapshotInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect ID|NAME",
		Short: "Print a memory snapshot's record as JSON (runtime and agent versions included)",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			sn, err := c.Snapshot(ctx, args[0])
			if err != nil {
				return err
			}
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(sn)
		}),
	}
}

func newSnapshotRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm ID|NAME...",
		Short: "Remove memory snapshots (sandboxes started from them keep running)",
		Args:  cobra.MinimumNArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			for _, ref := range args {
				sn, err := c.RemoveSnapshot(ctx, ref)
				if err != nil {
					return err
				}
				fmt.Println(sn.ID)
			}
			return nil
		}),
	}
}

func newForkCmd() *cobra.Command {
	var n int
	cmd := &cobra.Command{
		Use:   "fork ID [-n N]",
		Short: "Start N copies of a running sandbox (memory, processes, files), each with its own id, hostname, address and randomness",
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			copies, err := c.Fork(ctx, args[0], n)
			if err != nil {
				return err
			}
			for _, sb := range copies {
				fmt.Println(sb.ID)
			}
			return nil
		}),
	}
	cmd.Flags().IntVarP(&n, "count", "n", 1, "number of copies (1 to 100)")
	return cmd
}

// printLeftOut says what a filesystem snapshot could not keep.
func printLeftOut(w io.Writer, res *apiv1.SnapshotFSResult) {
	if res.LeftOutCount == 0 {
		return
	}
	more := ""
	if n := res.LeftOutCount - len(res.LeftOut); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	what := "entries"
	if res.LeftOutCount == 1 {
		what = "entry"
	}
	fmt.Fprintf(w, "warning: left out %d %s an image cannot hold (device nodes, FIFOs, sockets): %s%s\n",
		res.LeftOutCount, what, strings.Join(res.LeftOut, ", "), more)
}
