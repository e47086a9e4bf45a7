package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"corral/internal/errdefs"
	"corral/internal/ids"
)

// checkHolder accepts the ids that hold leases: sandboxes and memory
// snapshots (ids.Sandbox, ids.Snapshot), nothing else, since the id names
// a file under leases/.
func checkHolder(id string) error {
	if !ids.Sandbox(id) && !ids.Snapshot(id) {
		return errdefs.Invalid("sandbox", "%q is neither a sandbox nor a snapshot id", truncate(id))
	}
	return nil
}

// Lease records that sandboxID uses the image d, for the sandbox's whole
// life: until Release, across daemon restarts. A leased image, its layers
// and its RootFS mount are never pruned. Leasing the same image again is a
// no-op; a sandbox holds at most one lease (ErrAlreadyExists for another
// image).
func (s *Store) Lease(sandboxID string, d Digest) error {
	return s.lease(sandboxID, d, false)
}

// MoveLease makes sandboxID lease image d instead of the one it leases,
// if any, in one step: a sandbox whose root filesystem moved to another
// image (a filesystem-only pause) never holds neither.
func (s *Store) MoveLease(sandboxID string, d Digest) error {
	return s.lease(sandboxID, d, true)
}

// lease is Lease, or MoveLease with move.
func (s *Store) lease(sandboxID string, d Digest, move bool) error {
	if err := checkHolder(sandboxID); err != nil {
		return err
	}
	if _, err := ParseDigest(string(d)); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.readImage(d); err != nil {
		return fmt.Errorf("leasing for sandbox %s: %w", sandboxID, err)
	}
	leases, err := s.readLeases()
	if err != nil {
		return err
	}
	if cur, ok := leases[sandboxID]; ok && !move {
		if cur == d {
			return nil
		}
		return fmt.Errorf("%w: sandbox %s already leases image %s", errdefs.ErrAlreadyExists, sandboxID, cur)
	}
	if err := writeFileAtomic(s.path("leases", sandboxID), []byte(string(d)+"\n"), 0o644); err != nil {
		return fmt.Errorf("leasing for sandbox %s: %w", sandboxID, err)
	}
	return nil
}

// Release drops sandboxID's lease, if any. The image and its mount stay
// until Prune.
func (s *Store) Release(sandboxID string) error {
	if err := checkHolder(sandboxID); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.Remove(s.path("leases", sandboxID)); err != nil {
		if isNotExist(err) {
			return nil
		}
		return fmt.Errorf("releasing sandbox %s: %w", sandboxID, err)
	}
	return syncDir(s.path("leases"))
}

// Leases returns every lease: sandbox ID -> image digest.
func (s *Store) Leases() (map[string]Digest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readLeases()
}

// readLeases reads and validates the lease files. Caller holds s.mu.
func (s *Store) readLeases() (map[string]Digest, error) {
	dir := s.path("leases")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading leases: %w", err)
	}
	out := map[string]Digest{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			continue // an interrupted write
		}
		p := filepath.Join(dir, e.Name())
		if checkHolder(e.Name()) != nil || !e.Type().IsRegular() {
			return nil, fmt.Errorf("corrupt lease %s: not a sandbox ID or not a file", p)
		}
		b, err := readBounded(p, 128)
		if err != nil {
			return nil, fmt.Errorf("reading lease: %w", err)
		}
		d, err := ParseDigest(strings.TrimSuffix(string(b), "\n"))
		if err != nil {
			return nil, fmt.Errorf("corrupt lease %s: %w", p, err)
		}
		out[e.Name()] = d
	}
	return out, nil
}

func leasedDigests(leases map[string]Digest) map[Digest]bool {
	out := make(map[Digest]bool, len(leases))
	for _, d := range leases {
		out[d] = true
	}
	return out
}
