package netpolicy

import (
	"errors"

	"github.com/vishvananda/netlink"
)

// dumpAttempts bounds how often a netlink dump is read again when the
// kernel says it was interrupted (the table changed while it was read,
// NLM_F_DUMP_INTR), as the host's links, addresses and routes do all the
// time while sandboxes start and end; the daemon failed to start once on
// a busy host with "results may be incomplete or inconsistent".
const dumpAttempts = 10

// dump calls list until it returns a whole dump, at most dumpAttempts
// times; the last interrupted result and its error are returned after.
func dump[T any](list func() (T, error)) (T, error) {
	var v T
	var err error
	for range dumpAttempts {
		if v, err = list(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, err
}
