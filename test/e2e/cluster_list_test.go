package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"corral/sdk/go/corral"
)

// listedIDs are the ids a control plane lists in state.
func listedIDs(ctx context.Context, t *testing.T, c *controlPlane, state string) []string {
	t.Helper()
	l, err := c.client.List(ctx, state)
	if err != nil {
		t.Fatalf("list %s through a control: %v", state, err)
	}
	ids := []string{}
	for _, sb := range l {
		ids = append(ids, sb.ID)
	}
	slices.Sort(ids)
	return ids
}

// checkListFollowsNode: a control plane's list is the cluster database's,
// kept in step with the node. Sandbox id, paused on its node n directly
// (the node's own API and token, no control plane involved), is listed
// paused after the node's next heartbeat; resumed through control c, it
// is listed running from the resume's answer.
func checkListFollowsNode(ctx context.Context, t *testing.T, c *controlPlane, n *daemon, id string) {
	t.Helper()
	if _, err := n.client.Pause(ctx, id); err != nil {
		t.Fatalf("pause %s on its node: %v", id, err)
	}
	waitFor(t, 30*time.Second, id+" listed paused through the control plane", func() bool {
		return slices.Equal(listedIDs(ctx, t, c, "paused"), []string{id})
	})
	sb, err := c.client.Resume(ctx, id)
	if err != nil || sb.State != "running" {
		t.Fatalf("resume %s through a control: %+v, %v", id, sb, err)
	}
	if !slices.Contains(listedIDs(ctx, t, c, "running"), id) || len(listedIDs(ctx, t, c, "paused")) != 0 {
		t.Fatalf("%s not listed running after its resume through the control plane", id)
	}
}

// checkListedLost: the sandboxes of a lost node stay in the list, as
// lost, and only they.
func checkListedLost(ctx context.Context, t *testing.T, c *controlPlane, want []string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	if got := listedIDs(ctx, t, c, "lost"); !slices.Equal(got, want) {
		t.Fatalf("listed lost through a control: %v, want %v", got, want)
	}
	l, err := c.client.ListPage(ctx, corral.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range l.Sandboxes {
		if slices.Contains(want, sb.ID) != (sb.State == "lost") {
			t.Fatalf("%s listed %s through a control", sb.ID, sb.State)
		}
	}
}
