package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"corral/sdk/go/corral"

	"github.com/spf13/cobra"
)

func newNodeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "node", Short: "A cluster's nodes (through a control plane: corral serve --control)"}
	cmd.AddCommand(newNodeLsCmd(), newNodeDrainCmd(true), newNodeDrainCmd(false))
	return cmd
}

// newNodeDrainCmd is `corral node drain` (on) or `corral node undrain`.
func newNodeDrainCmd(on bool) *cobra.Command {
	use, short := "drain NODE", "Place no new sandboxes on NODE and move its paused sandboxes to other nodes"
	if !on {
		use, short = "undrain NODE", "Place sandboxes on NODE again"
	}
	var wait bool
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			n, err := c.DrainNode(ctx, args[0], on)
			if err != nil {
				return err
			}
			fmt.Println(nodeState(n.State, n.Draining))
			if !wait {
				return nil
			}
			return waitDrain(ctx, c, n.ID)
		}),
	}
	if on {
		cmd.Flags().BoolVar(&wait, "wait", false, "wait until the paused sandboxes are moved; print each one moved or left, and why")
	}
	return cmd
}
func nodeState(state string, draining bool) string {
	if draining {
		return state + " (draining)"
	}
	return state
}

func newNodeLsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the cluster's nodes: state, runtimes, capacity and what is placed on each",
		Args:  cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			nodes, err := c.ClusterNodes(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(nodes)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tSTATE\tRUNTIMES\tSANDBOXES\tCPU\tMEMORY MiB\tLABELS\tHEARTBEAT\tDRAIN")
			for _, n := range nodes {
				var labels []string
				for k, v := range n.Labels {
					labels = append(labels, k+"="+v)
				}
				sort.Strings(labels)
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%g/%g\t%d/%d\t%s\t%s\t%s\n", n.ID, nodeState(n.State, n.Draining), strings.Join(n.Runtimes, ","),
					n.Sandboxes, n.MaxSandboxes, n.PlacedCPU, n.CPU, n.PlacedMemoryMB, n.MemoryMB, strings.Join(labels, ","), n.Heartbeat, drainSummary(n.Drain))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, n := range nodes {
				if n.Drain != nil {
					for _, sb := range n.Drain.NotMoved {
						fmt.Printf("%s: %s stays: %s\n", n.ID, sb.ID, sb.Reason)
					}
				}
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
