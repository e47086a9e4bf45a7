package netpolicy

import (
	"errors"
	"testing"

	"github.com/vishvananda/netlink"
)

// An interrupted dump is read again; a whole one, or another error, is
// returned at once; a dump interrupted every time gives up.
func TestDumpRetriesInterrupted(t *testing.T) {
	calls := 0
	got, err := dump(func() (int, error) {
		calls++
		if calls < 3 {
			return -1, netlink.ErrDumpInterrupted
		}
		return 7, nil
	})
	if got != 7 || err != nil || calls != 3 {
		t.Errorf("dump = %d, %v after %d calls; want 7, nil after 3", got, err, calls)
	}
	other := errors.New("no such device")
	calls = 0
	if _, err := dump(func() (int, error) { calls++; return 0, other }); err != other || calls != 1 {
		t.Errorf("another error: %v after %d calls", err, calls)
	}
	calls = 0
	if _, err := dump(func() (int, error) { calls++; return 0, netlink.ErrDumpInterrupted }); !errors.Is(err, netlink.ErrDumpInterrupted) || calls != dumpAttempts {
		t.Errorf("always interrupted: %v after %d calls", err, calls)
	}
}
