// Package sandbox is the sandbox model: its spec, its record, and the
// lifecycle state machine. It is a contract package: it imports no runtime,
// store or API code.
package sandbox

import (
	"fmt"

	"corral/internal/errdefs"
)

// State is where a sandbox is in its lifecycle.
//
//	creating → running ⇄ paused → terminating → terminated
//	    └──────────┴─────────┴──→ failed (creating only) / terminating
type State string

// The states.
const (
	Creating    State = "creating"
	Running     State = "running"
	Paused      State = "paused"
	Terminating State = "terminating"
	Terminated  State = "terminated"
	Failed      State = "failed"
)

// transitions lists every legal move; anything else is an error.
var transitions = map[State][]State{
	Creating:    {Running, Failed, Terminating},
	Running:     {Paused, Terminating},
	Paused:      {Running, Terminating},
	Terminating: {Terminated},
	Terminated:  {},
	Failed:      {},
}

// Terminal reports whether no move leaves s.
func (s State) Terminal() bool { return s == Terminated || s == Failed }

// Valid reports whether s is a known state.
func (s State) Valid() bool { _, ok := transitions[s]; return ok }

// CanMove reports whether from → to is legal.
func CanMove(from, to State) bool {
	for _, t := range transitions[from] {
		if t == to {
			return true
		}
	}
	return false
}

// Move returns an ErrFailedPrecondition error when from → to is illegal.
func Move(from, to State) error {
	if CanMove(from, to) {
		return nil
	}
	return fmt.Errorf("%w: sandbox is %s, cannot become %s", errdefs.ErrFailedPrecondition, from, to)
}
