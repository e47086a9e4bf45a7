// Package cleanup is Corral's one rollback idiom for multi-step operations.
//
//	c := cleanup.Make()
//	defer c.Clean()          // runs the undo stack unless released
//	... step; c.Add(undo) ...
//	c.Release()              // success: keep everything
//
// Undos run in reverse order. They receive a context detached from the
// caller's cancellation (context.WithoutCancel) with a bounded timeout, so a
// cancelled request still cleans up what it created.
package cleanup

import (
	"context"
	"time"
)

// Timeout bounds the whole undo stack.
const Timeout = 60 * time.Second

// Cleanup is a stack of undo functions.
type Cleanup struct {
	ctx   context.Context
	undos []func(context.Context)
}

// Make returns an empty stack whose undos run under a context derived from
// ctx without its cancellation.
func Make(ctx context.Context) *Cleanup {
	return &Cleanup{ctx: context.WithoutCancel(ctx)}
}

// Add pushes an undo.
func (c *Cleanup) Add(f func(context.Context)) { c.undos = append(c.undos, f) }

// Release drops every undo: the operation succeeded.
func (c *Cleanup) Release() { c.undos = nil }

// Clean runs the undos in reverse order, once.
func (c *Cleanup) Clean() {
	if len(c.undos) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, Timeout)
	defer cancel()
	for i := len(c.undos) - 1; i >= 0; i-- {
		c.undos[i](ctx)
	}
	c.undos = nil
}
