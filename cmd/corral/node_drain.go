package main

import (
	"context"
	"fmt"
	"time"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// drainPoll is how often `corral node drain --wait` asks for progress.
const drainPoll = time.Second

// waitDrain waits until node id's drain has moved what it can, then
// prints each sandbox moved (and where) and each left (and why). An
// undrain meanwhile ends the wait with an error.
func waitDrain(ctx context.Context, c *corral.Client, id string) error {
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	for {
		nodes, err := c.ClusterNodes(ctx)
		if err != nil {
			return err
		}
		d, err := drainOf(nodes, id)
		if err != nil {
			return err
		}
		if d.Done {
			for _, sb := range d.Moved {
				fmt.Printf("moved  %s  to %s\n", sb.ID, sb.Node)
			}
			for _, sb := range d.NotMoved {
				fmt.Printf("stays  %s  %s\n", sb.ID, sb.Reason)
			}
			fmt.Printf("%d moved, %d left on %s\n", len(d.Moved), len(d.NotMoved), id)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func drainOf(nodes []apiv1.ClusterNode, id string) (*apiv1.DrainProgress, error) {
	for _, n := range nodes {
		if n.ID != id {
			continue
		}
		if !n.Draining || n.Drain == nil {
			return nil, fmt.Errorf("node %s is no longer draining", id)
		}
		if n.State != "ready" {
			return nil, fmt.Errorf("node %s is %s: its sandboxes cannot be moved (%d moved before)", id, n.State, len(n.Drain.Moved))
		}
		return n.Drain, nil
	}
	return nil, fmt.Errorf("node %s is no longer in the cluster", id)
}

// drainSummary is a drain's progress in `corral node ls`.
func drainSummary(d *apiv1.DrainProgress) string {
	switch {
	case d == nil:
		return "-"
	case !d.Scanned:
		return "starting"
	}
	return fmt.Sprintf("%d to move, %d moved, %d left", d.ToMove, len(d.Moved), len(d.NotMoved))
}
