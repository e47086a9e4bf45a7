package e2b

import (
	"context"
	"slices"
	"strconv"

	"corral/internal/manager"
	"corral/internal/sandbox"
)

// totalRunning is the X-Total-Running of a v2 list: how many running
// sandboxes match its filters, before paging; "" when the list did not
// ask for running ones (E2B sends the header only when it did).
func (s *Server) totalRunning(ctx context.Context, o manager.ListOptions) (string, error) {
	if !slices.Contains(o.States, sandbox.Running) {
		return "", nil
	}
	q := manager.ListOptions{States: []sandbox.State{sandbox.Running, sandbox.Creating}, Tags: o.Tags, Limit: manager.MaxListLimit}
	n := 0
	for {
		page, next, err := s.m.ListPage(ctx, q)
		if err != nil {
			return "", err
		}
		n += len(page)
		if next == "" {
			return strconv.Itoa(n), nil
		}
		q.Next = next
	}
}
