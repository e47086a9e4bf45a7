package netpolicy

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"corral/internal/errdefs"
)

// Counters returns the bytes sandbox id's link carried so far: in, to the
// sandbox, and out, from it (the host side's transmit and receive
// counters, headers included). They count from the link's creation and
// go with it; both runtimes' traffic crosses it (a vm's tap sits in the
// namespace behind it). An unknown id is ErrNotFound.
func (n *Network) Counters(id string) (in, out uint64, err error) {
	n.mu.RLock()
	s, ok := n.slots[id]
	n.mu.RUnlock()
	if !ok {
		return 0, 0, fmt.Errorf("%w: no network for sandbox %s", errdefs.ErrNotFound, id)
	}
	dir := "/sys/class/net/" + s.HostLink + "/statistics/"
	if in, err = readCounter(dir + "tx_bytes"); err != nil {
		return 0, 0, err
	}
	if out, err = readCounter(dir + "rx_bytes"); err != nil {
		return 0, 0, err
	}
	return in, out, nil
}

// readCounter reads one decimal counter file.
func readCounter(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading link counters: %w", err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("reading link counters: %w", err)
	}
	return v, nil
}
