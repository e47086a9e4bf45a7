package netpolicy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"corral/internal/errdefs"
	"corral/internal/ids"
	"corral/internal/netpolicy/policy"
)

// Slot is one sandbox's network attachment.
type Slot struct {
	ID string `json:"id"`
	// NetnsPath is the bind-mounted network namespace: the OCI spec's
	// linux.namespaces network path.
	NetnsPath string `json:"netns_path"`
	// HostLink is the host side of the veth; SandboxLink its peer inside
	// the namespace (where a VM runtime attaches its tap later).
	HostLink    string `json:"host_link"`
	SandboxLink string `json:"sandbox_link"`
	// Gateway is the host side's address: the sandbox's default route and
	// nameserver (port 53 there reaches the daemon's resolver).
	Gateway netip.Addr `json:"gateway"`
	// Addr is the sandbox's address; Prefix the /30 holding both.
	Addr   netip.Addr   `json:"addr"`
	Prefix netip.Prefix `json:"prefix"`
}

// slotState is what the state file records: the slot, its lease index and
// its current policy.
type slotState struct {
	Version int `json:"version"`
	Slot
	Index  uint32        `json:"index"`
	Policy policy.Policy `json:"policy"`
}

const stateVersion = 1

// checkID keeps ids usable as file and link names: only sandbox ids.
func checkID(id string) error { return ids.CheckSandbox(id) }

func (c Config) statePath(id string) string { return filepath.Join(c.slotsDir(), id+".json") }

// writeState records s atomically (temporary file, fsync, rename).
func writeState(c Config, s *slotState) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding state of %s: %w", s.ID, err)
	}
	f, err := os.CreateTemp(c.slotsDir(), "."+s.ID+".*")
	if err != nil {
		return fmt.Errorf("writing state of %s: %w", s.ID, err)
	}
	tmp := f.Name()
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, c.statePath(s.ID))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing state of %s: %w", s.ID, err)
	}
	return nil
}

// readState returns the recorded slot of id, or an ErrNotFound error.
func readState(c Config, id string) (*slotState, error) {
	b, err := os.ReadFile(c.statePath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading state of %s: %w", id, err)
	}
	var s slotState
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decoding state of %s: %w", id, err)
	}
	if s.ID != id || s.Version != stateVersion {
		return nil, fmt.Errorf("state of %s: id %q version %d: %w", id, s.ID, s.Version, errdefs.ErrFailedPrecondition)
	}
	return &s, nil
}

func removeState(c Config, id string) error {
	if err := os.Remove(c.statePath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing state of %s: %w", id, err)
	}
	return nil
}

// stateIDs lists the ids with a state file, sorted.
func stateIDs(c Config) ([]string, error) {
	ents, err := os.ReadDir(c.slotsDir())
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", c.slotsDir(), err)
	}
	var ids []string
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if ok && !strings.HasPrefix(e.Name(), ".") && checkID(id) == nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// loadStates reads every state file. Unreadable ones are returned as
// errors, since dropping them would leak the kernel objects they name.
func loadStates(c Config) ([]*slotState, error) {
	ids, err := stateIDs(c)
	if err != nil {
		return nil, err
	}
	var out []*slotState
	for _, id := range ids {
		s, err := readState(c, id)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
