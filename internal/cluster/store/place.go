package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"corral/internal/errdefs"
)

// Placement states.
const (
	Reserved = "reserved" // admitted, the create not yet answered
	Placed   = "placed"   // the node created it
	Lost     = "lost"     // its node was lost
	Ended    = "ended"    // terminated, or gone from its node
)

// Request is what a create asks of a node.
type Request struct {
	Runtime  string
	CPUMilli int64
	MemoryMB int64
	DiskMB   int64
	// Labels the node must carry (all of them, equal values).
	Labels map[string]string
	// Exclude are nodes not to try (one that just failed the create).
	Exclude []string
	// FreshWithin: only nodes that beat this recently.
	FreshWithin time.Duration
}

// Placement is where a sandbox is (or a reservation for one).
type Placement struct {
	ID    string // the sandbox's id; a reservation's own before Bind
	State string
	Node  Node
	// Updated is when the state last changed (when it was lost, for one
	// that is).
	Updated time.Time
}

// free is what a node has left.
type free struct {
	id                    string
	cpu, mem, disk, slots int64
}

func (f free) fits(r Request) bool {
	return f.cpu >= r.CPUMilli && f.mem >= r.MemoryMB && f.disk >= r.DiskMB && f.slots >= 1
}

// Reserve places r: among the ready nodes that carry its runtime and
// labels and have room, two at random, and the one with more free memory
// (power of two choices), admitted in a transaction that locks the
// node's row and checks its room again, so control instances reserving
// at once never overcommit a node. A node that filled up meanwhile is
// dropped and the choice made again.
//
// The candidates are first a random sample of the eligible nodes
// (sampledCandidates), then, when none of those had room, all of them.
func (s *Store) Reserve(ctx context.Context, r Request) (Placement, error) {
	cands, err := s.sampledCandidates(ctx, r)
	for all := false; ; all = true {
		if err != nil {
			return Placement{}, err
		}
		for len(cands) > 0 {
			i := pick(cands)
			ok, p, err := s.admit(ctx, cands[i].id, r)
			if err != nil {
				return Placement{}, err
			}
			if ok {
				return p, nil
			}
			cands = append(cands[:i], cands[i+1:]...)
		}
		if all {
			break
		}
		cands, err = s.candidates(ctx, r)
	}
	return Placement{}, fmt.Errorf("%w: no ready node has room for %s with %d milli-CPU, %d MiB of memory and %d MiB of disk%s",
		errdefs.ErrResourceExhausted, r.Runtime, r.CPUMilli, r.MemoryMB, r.DiskMB, labelsNote(r.Labels))
}

func labelsNote(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	return fmt.Sprintf(" and labels %v", l)
}

// pick is the power of two choices: the fuller of two random candidates
// loses (more free memory wins, then more free CPU).
func pick(c []free) int {
	a := mrand.IntN(len(c))
	if len(c) == 1 {
		return a
	}
	b := mrand.IntN(len(c) - 1)
	if b >= a {
		b++
	}
	if c[b].mem > c[a].mem || c[b].mem == c[a].mem && c[b].cpu > c[a].cpu {
		return b
	}
	return a
}

const liveStates = `('reserved', 'placed')`

// candidates are the nodes that could take r now, with what they have left.
func (s *Store) candidates(ctx context.Context, r Request) ([]free, error) {
	labels := r.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	exclude := r.Exclude
	if exclude == nil {
		exclude = []string{}
	}
	rows, err := s.pool.Query(ctx, `SELECT n.id,
			n.cpu_milli - coalesce(sum(p.cpu_milli), 0), n.memory_mb - coalesce(sum(p.memory_mb), 0),
			n.disk_mb - coalesce(sum(p.disk_mb), 0), n.max_sandboxes - count(p.id)
		FROM nodes n LEFT JOIN placements p ON p.node_id = n.id AND p.state IN `+liveStates+`
		WHERE n.state = 'ready' AND n.heartbeat_at > now() - $1 * interval '1 second'
			AND $2 = ANY(n.runtimes) AND n.labels @> $3 AND NOT (n.id = ANY($4))
		GROUP BY n.id`, seconds(r.FreshWithin), r.Runtime, labels, exclude)
	if err != nil {
		return nil, fmt.Errorf("placing a sandbox: %w", err)
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (free, error) {
		var f free
		err := row.Scan(&f.id, &f.cpu, &f.mem, &f.disk, &f.slots)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("placing a sandbox: %w", err)
	}
	out := all[:0]
	for _, f := range all {
		if f.fits(r) {
			out = append(out, f)
		}
	}
	return out, nil
}

// admit reserves r on node id if, with the node's row locked, it still
// has room; false when it has not.
func (s *Store) admit(ctx context.Context, id string, r Request) (bool, Placement, error) {
	var p Placement
	ok := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		n, err := scanNode(tx.QueryRow(ctx, `SELECT `+nodeColumns+` FROM nodes
			WHERE id = $1 AND state = 'ready' AND heartbeat_at > now() - $2 * interval '1 second' FOR UPDATE`, id, seconds(r.FreshWithin)))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		f := free{id: id}
		if err := tx.QueryRow(ctx, `SELECT $2::bigint - coalesce(sum(cpu_milli), 0), $3::bigint - coalesce(sum(memory_mb), 0),
				$4::bigint - coalesce(sum(disk_mb), 0), $5::bigint - count(*)
			FROM placements WHERE node_id = $1 AND state IN `+liveStates, id, n.CPUMilli, n.MemoryMB, n.DiskMB, n.MaxSandboxes).
			Scan(&f.cpu, &f.mem, &f.disk, &f.slots); err != nil {
			return err
		}
		if !f.fits(r) {
			return nil
		}
		p = Placement{ID: "rsv-" + randomHex(12), State: Reserved, Node: n}
		if _, err := tx.Exec(ctx, `INSERT INTO placements (id, node_id, state, runtime, cpu_milli, memory_mb, disk_mb)
			VALUES ($1, $2, 'reserved', $3, $4, $5, $6)`, p.ID, id, r.Runtime, r.CPUMilli, r.MemoryMB, r.DiskMB); err != nil {
			return err
		}
		ok = true
		return nil
	})
	if err != nil {
		return false, Placement{}, fmt.Errorf("admitting a sandbox on node %s: %w", id, err)
	}
	return ok, p, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Bind turns reservation rsv into sandbox id's placement; name (may be
// empty) is its name, which no other placed sandbox of the cluster may
// have.
func (s *Store) Bind(ctx context.Context, rsv, id, name string) error {
	var n *string
	if name != "" {
		n = &name
	}
	tag, err := s.pool.Exec(ctx, `UPDATE placements SET id = $2, name = $3, state = 'placed', updated_at = now()
		WHERE id = $1 AND state = 'reserved'`, rsv, id, n)
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == uniqueViolation {
		return fmt.Errorf("%w: a sandbox named %q already runs in the cluster", errdefs.ErrAlreadyExists, name)
	}
	if err != nil {
		return fmt.Errorf("recording sandbox %s's placement: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: recording sandbox %s's placement: reservation %s is gone (its node was lost meanwhile)", errdefs.ErrUnavailable, id, rsv)
	}
	return nil
}

// Release drops reservation rsv (its create failed).
func (s *Store) Release(ctx context.Context, rsv string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM placements WHERE id = $1 AND state = 'reserved'`, rsv)
	return err
}

// End records that sandbox id ended, giving its node the room back.
func (s *Store) End(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, `UPDATE placements SET state = 'ended', updated_at = now() WHERE id = $1 AND state = 'placed'`, id)
	return err
}

// NameTaken says whether a placed sandbox is named name.
func (s *Store) NameTaken(ctx context.Context, name string) (bool, error) {
	var taken bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM placements WHERE name = $1 AND state = 'placed')`, name).Scan(&taken)
	return taken, err
}

// Lookup returns the placement of the sandbox whose id (or else name) is
// id, and its node. A name finds the placed sandbox of that name, or
// else the latest lost or ended one.
func (s *Store) Lookup(ctx context.Context, id string) (Placement, error) {
	var p Placement
	var nodeID string
	err := s.pool.QueryRow(ctx, `SELECT id, state, updated_at, node_id FROM placements
		WHERE (id = $1 OR name = $1) AND state <> 'reserved'
		ORDER BY id = $1 DESC, state = 'placed' DESC, updated_at DESC LIMIT 1`, id).
		Scan(&p.ID, &p.State, &p.Updated, &nodeID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Placement{}, fmt.Errorf("%w: sandbox %s", errdefs.ErrNotFound, id)
	}
	if err != nil {
		return Placement{}, fmt.Errorf("looking up sandbox %s: %w", id, err)
	}
	if p.Node, err = s.Node(ctx, nodeID); err != nil {
		return Placement{}, err
	}
	return p, nil
}

// Use is what is placed on a node now.
type Use struct {
	Node                       string
	CPUMilli, MemoryMB, DiskMB int64
	Sandboxes                  int
}

// Uses sums the live placements of every node.
func (s *Store) Uses(ctx context.Context) (map[string]Use, error) {
	rows, err := s.pool.Query(ctx, `SELECT node_id, sum(cpu_milli), sum(memory_mb), sum(disk_mb), count(*)
		FROM placements WHERE state IN `+liveStates+` GROUP BY node_id`)
	if err != nil {
		return nil, err
	}
	us, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Use, error) {
		var u Use
		err := r.Scan(&u.Node, &u.CPUMilli, &u.MemoryMB, &u.DiskMB, &u.Sandboxes)
		return u, err
	})
	if err != nil {
		return nil, err
	}
	out := map[string]Use{}
	for _, u := range us {
		out[u.Node] = u
	}
	return out, nil
}

// uniqueViolation is PostgreSQL's SQLSTATE for a unique index refusing a row.
const uniqueViolation = "23505"
