package sandbox

import (
	"errors"
	"testing"

	"corral/internal/errdefs"
)

func TestMove(t *testing.T) {
	tests := []struct {
		from, to State
		ok       bool
	}{
		{Creating, Running, true},
		{Creating, Failed, true},
		{Creating, Terminating, true},
		{Running, Paused, true},
		{Paused, Running, true},
		{Running, Terminating, true},
		{Terminating, Terminated, true},
		{Running, Creating, false},
		{Terminated, Running, false},
		{Failed, Terminating, false},
		{Terminating, Running, false},
		{Running, Terminated, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.from)+"->"+string(tt.to), func(t *testing.T) {
			err := Move(tt.from, tt.to)
			if (err == nil) != tt.ok {
				t.Fatalf("Move(%s, %s) = %v, want ok=%v", tt.from, tt.to, err, tt.ok)
			}
			if err != nil && !errors.Is(err, errdefs.ErrFailedPrecondition) {
				t.Fatalf("error kind = %v, want failed precondition", err)
			}
		})
	}
}

func TestTerminal(t *testing.T) {
	for s := range transitions {
		if s.Terminal() != (len(transitions[s]) == 0) {
			t.Errorf("%s: Terminal()=%v disagrees with its transitions", s, s.Terminal())
		}
	}
}
