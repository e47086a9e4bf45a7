package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

func newVolumeLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls [NAME [PATH]]",
		Short: "List volumes; with NAME, list a directory of that volume from the host side (no sandbox needed)",
		Args:  cobra.MaximumNArgs(2),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			if len(args) == 0 {
				return listVolumes(ctx, c)
			}
			path := "/"
			if len(args) == 2 {
				path = args[1]
			}
			ents, err := c.ListVolumeDir(ctx, args[0], path)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			for _, e := range ents {
				name := e.Name
				if e.SymlinkTarget != "" {
					name += " -> " + e.SymlinkTarget
				}
				fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", e.Permissions, e.Size, e.ModifiedAt.Format("2006-01-02 15:04"), name)
			}
			return w.Flush()
		}),
	}
}

func listVolumes(ctx context.Context, c *corral.Client) error {
	vols, err := c.Volumes(ctx)
	if err != nil {
		return err
	}
	// Through a control plane, each volume's node (a column of its own).
	cluster := slices.ContainsFunc(vols, func(v apiv1.Volume) bool { return v.Node != "" })
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	head := "NAME\tSIZE\tUSED\tMOUNTED BY\tCREATED"
	if cluster {
		head += "\tNODE"
	}
	fmt.Fprintln(w, head)
	for _, v := range vols {
		used := "-"
		if v.UsedBytes != nil {
			used = fmt.Sprintf("%.1f MiB", float64(*v.UsedBytes)/(1<<20))
		}
		by := strings.Join(v.MountedBy, ",")
		if by == "" {
			by = "-"
		}
		line := fmt.Sprintf("%s\t%d GiB\t%s\t%s\t%s", v.Name, v.SizeGiB, used, by, v.CreatedAt.Local().Format("2006-01-02 15:04"))
		if cluster {
			line += "\t" + v.Node
		}
		fmt.Fprintln(w, line)
	}
	return w.Flush()
}
