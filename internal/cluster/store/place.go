package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"corral/internal/errdefs"
)

// Placement states.
const (
	Reserved = "reserved" // admitted, the create not yet answered
	Placed   = "placed"   // the node created it
	Ending   = "ending"   // being removed on its node, which still holds it
	Lost     = "lost"     // its node was lost
	Ended    = "ended"    // terminated, or gone from its node
)

// Request is what a create asks of a node.
type Request struct {
	Runtime string
	// RuntimeVersion, when set, is the version of Runtime the node must
	// run (a restore from a memory snapshot).
	RuntimeVersion string
	CPUMilli       int64
	MemoryMB       int64
	DiskMB         int64
	// Labels the node must carry (all of them, equal values).
	Labels map[string]string
	// Exclude are nodes not to try (one that just failed the create).
	Exclude []string
	// FreshWithin: only nodes that beat this recently.
	FreshWithin time.Duration
	// Node, when set, is the only node to place on (the one holding
	// the create's volumes).
	Node string
	// Image (a digest or a normalized name:tag; may be empty) and Warm
	// (a WarmKey) earn a node a bonus: one that holds the image, or has
	// a warm sandbox ready for it, is preferred among those with room.
	Image, Warm string
	// Snapshot (a snapshot id) is the memory snapshot a restore starts
	// from: a node that holds it is preferred, as an image's holder is
	// for a create (it need not be sent there).
	Snapshot string
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

// Reserve places r: among the ready nodes that carry its runtime and
// labels and have room, a few (r's image's holders when any is eligible,
// else a sample), of those with the highest bonus (a warm sandbox ready
// for r, r's image held) two at random, and the one with more free
// memory (power of two choices), admitted by one atomic statement that adds r to
// the node's counters only where they stay within its capacity (the row
// lock makes control instances reserving at once wait for each other and
// re-check), so no node is ever overcommitted. A node that filled up
// meanwhile is left out and the choice made again.
func (s *Store) Reserve(ctx context.Context, r Request) (Placement, error) {
	exclude := slices.Clone(r.Exclude)
	for range maxAdmitTries {
		cands, err := s.candidates(ctx, r, exclude)
		if err != nil {
			return Placement{}, err
		}
		if len(cands) == 0 {
			break
		}
		cands = bestBonus(cands)
		c := cands[pick(cands)]
		p, ok, err := s.admit(ctx, c.id, r)
		if err != nil {
			return Placement{}, err
		}
		if ok {
			return p, nil
		}
		exclude = append(exclude, c.id)
	}
	return Placement{}, fmt.Errorf("%w: no ready node has room for a %s%s sandbox of %d milli-CPU and %d MiB of memory%s",
		errdefs.ErrResourceExhausted, r.Runtime, versionNote(r.RuntimeVersion), r.CPUMilli, r.MemoryMB, labelsNote(r.Labels)+nodeNote(r.Node))
}

// maxAdmitTries bounds the nodes one Reserve tries to admit on.
const maxAdmitTries = 8

func versionNote(v string) string {
	if v == "" {
		return ""
	}
	return fmt.Sprintf(" (version %q)", v)
}

func nodeNote(n string) string {
	if n == "" {
		return ""
	}
	return fmt.Sprintf(" on node %s (it holds the create's volumes)", n)
}

func labelsNote(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	return fmt.Sprintf(" and labels %v", l)
}

// bestBonus is the candidates that share the highest bonus.
func bestBonus(c []free) []free {
	top := slices.MaxFunc(c, func(a, b free) int { return a.bonus - b.bonus }).bonus
	return slices.DeleteFunc(slices.Clone(c), func(f free) bool { return f.bonus != top })
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

// sampleSize is how many fitting nodes a placement chooses among: two
// of those with the highest bonus are compared, the rest are spares
// should those fill first.
const sampleSize = 4

// fitsSQL is the room condition, on a nodes row, for $cpu, $mem.
const fitsSQL = `used_cpu_milli + $%[1]d <= cpu_milli AND used_memory_mb + $%[2]d <= memory_mb AND used_sandboxes < max_sandboxes`

// eligibleSQL is the rest of a candidate's condition: ready, fresh within
// $1 seconds, with runtime $2, labels $3, not one of $4 and room for $5
// milli-CPU and $6 MiB, and (when $11 is not empty) node $11.
var eligibleSQL = `state = 'ready' AND NOT draining AND heartbeat_at > now() - $1 * interval '1 second'
	AND $2 = ANY(runtimes) AND labels @> $3 AND NOT (id = ANY($4)) AND ` + fmt.Sprintf(fitsSQL, 5, 6) + `
	AND ($9 = '' OR runtime_versions @> jsonb_build_object($2::text, $9::text)) AND ($11 = '' OR id = $11)`

// candidatesSQL samples the nodes from a random start ($8) in the
// place_key index (each node's random position): the first $7 eligible
// ones at or after it, then, wrapping around, before it. It reads only
// as many rows as it takes to meet that many eligible ones (a handful
// when most nodes have room), where sorting every eligible node at
// random read them all; and it finds a node with room whenever one
// exists, which a page sample (TABLESAMPLE) would not. A node is drawn
// about in proportion to the gap before its key, a bias the two choices
// among the sample even out (store_test checks the spread).
var candidatesSQL = `(SELECT id, cpu_milli - used_cpu_milli, memory_mb - used_memory_mb FROM nodes
		WHERE place_key >= $8 AND ` + eligibleSQL + ` ORDER BY place_key LIMIT $7)
	UNION ALL
	(SELECT id, cpu_milli - used_cpu_milli, memory_mb - used_memory_mb FROM nodes
		WHERE place_key < $8 AND ` + eligibleSQL + ` ORDER BY place_key LIMIT $7)
	LIMIT $7`

// candidates are a few random nodes that could take r now (ready, fresh,
// with its runtime and labels, with room), with what they have left.
// Room is what a node's own admission bounds: CPU, memory and live
// sandboxes. Disk is recorded and reported but not a bound: a sandbox's
// disk_mb caps a sparse layer, it is not allocated, and a node does not
// refuse by it either (with the 10 GiB default, a node's free disk would
// otherwise hold a handful). Admission re-checks the room atomically
// (admit): a sample is only where to try.
func (s *Store) candidates(ctx context.Context, r Request, exclude []string) ([]free, error) {
	labels := r.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	if exclude == nil {
		exclude = []string{}
	}
	q, held := holdersSQL, r.Image
	if held == "" {
		q, held = snapshotHoldersSQL, r.Snapshot
	}
	if held != "" {
		// The eligible nodes that hold the image (or snapshot), if any:
		// found through its table's indexes, so a create reads those
		// nodes' rows only.
		rows, err := s.pool.Query(ctx, q, seconds(r.FreshWithin), r.Runtime, labels, exclude,
			r.CPUMilli, r.MemoryMB, sampleSize, r.Warm, r.RuntimeVersion, held, r.Node)
		if err != nil {
			return nil, fmt.Errorf("placing a sandbox: %w", err)
		}
		out, err := pgx.CollectRows(rows, scanFree)
		if err != nil || len(out) > 0 {
			return out, err
		}
	}
	rows, err := s.pool.Query(ctx, sampleSQL, seconds(r.FreshWithin), r.Runtime, labels, exclude,
		r.CPUMilli, r.MemoryMB, sampleSize, mrand.Float64(), r.RuntimeVersion, r.Warm, r.Node)
	if err != nil {
		return nil, fmt.Errorf("placing a sandbox: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanFree)
	if err != nil {
		return nil, fmt.Errorf("placing a sandbox: %w", err)
	}
	return out, nil
}

func scanFree(row pgx.CollectableRow) (free, error) {
	var f free
	return f, row.Scan(&f.id, &f.cpu, &f.mem, &f.bonus)
}

// warmSQL is 2 for a node (id) with a warm sandbox ready for $%d (a
// WarmKey; node_warm's primary key), else 0.
const warmSQL = `(CASE WHEN EXISTS (SELECT 1 FROM node_warm w WHERE w.key = $%d AND w.node_id = id) THEN 2 ELSE 0 END)`

// holdersSQL is a random few of the eligible nodes that hold the image
// $10 (a digest or a tag), each with its bonus: 1, plus 2 with a warm
// sandbox ready for $8. node_images' indexes find them: a create reads
// the holders' rows only.
var holdersSQL = `SELECT id, cpu_milli - used_cpu_milli, memory_mb - used_memory_mb, 1 + ` + fmt.Sprintf(warmSQL, 8) + `
	FROM nodes WHERE id IN (SELECT node_id FROM node_images WHERE digest = $10 OR $10 = ANY(tags))
		AND ` + eligibleSQL + ` ORDER BY random() LIMIT $7`

// snapshotHoldersSQL is holdersSQL for a restore: a random few of the
// eligible nodes that hold the snapshot $10, found through
// snapshot_locations' key, each with bonus 1 ($8, the warm key, is
// empty for a restore and matches none).
var snapshotHoldersSQL = `SELECT id, cpu_milli - used_cpu_milli, memory_mb - used_memory_mb, 1 + ` + fmt.Sprintf(warmSQL, 8) + `
	FROM nodes WHERE id IN (SELECT node_id FROM snapshot_locations WHERE snapshot_id = $10)
		AND ` + eligibleSQL + ` ORDER BY random() LIMIT $7`

// sampleSQL is the candidate walk (candidatesSQL), each node with its
// bonus: 2 with a warm sandbox ready for $10 (an empty $10 matches none).
// The bonus is looked up for the sampled nodes only, so it orders the
// sample and never widens what a create reads.
var sampleSQL = `SELECT id, cpu, mem, ` + fmt.Sprintf(warmSQL, 10) + ` FROM (` + candidatesSQL + `) c (id, cpu, mem)`

// free is what a candidate node has left, and its bonus for the request.
type free struct {
	id       string
	cpu, mem int64
	bonus    int
}

// admit reserves r on node id if it still has room: one statement adds r
// to the node's counters where they stay within its capacity and inserts
// the reservation; false when the node had no room (or is no longer
// ready).
func (s *Store) admit(ctx context.Context, id string, r Request) (Placement, bool, error) {
	p := Placement{ID: "rsv-" + randomHex(12), State: Reserved}
	var tag pgconn.CommandTag
	err := retry(ctx, func() error {
		var err error
		tag, err = s.pool.Exec(ctx, `WITH n AS (
			UPDATE nodes SET used_cpu_milli = used_cpu_milli + $2, used_memory_mb = used_memory_mb + $3,
				used_disk_mb = used_disk_mb + $4, used_sandboxes = used_sandboxes + 1
			WHERE id = $1 AND state = 'ready' AND NOT draining AND heartbeat_at > now() - $5 * interval '1 second' AND `+fmt.Sprintf(fitsSQL, 2, 3)+`
			RETURNING id)
		INSERT INTO placements (id, node_id, state, runtime, cpu_milli, memory_mb, disk_mb)
		SELECT $6, n.id, 'reserved', $7, $2, $3, $4 FROM n`,
			id, r.CPUMilli, r.MemoryMB, r.DiskMB, seconds(r.FreshWithin), p.ID, r.Runtime)
		return err
	})
	if err != nil {
		return Placement{}, false, fmt.Errorf("admitting a sandbox on node %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return Placement{}, false, nil
	}
	if p.Node, err = s.Node(ctx, id); err != nil {
		return Placement{}, false, err
	}
	return p, true, nil
}

// unplace is the statement tail that gives back to their nodes what the
// placements RETURNING node_id, cpu_milli, memory_mb, disk_mb in the CTE
// "gone" took: every change of a placement out of reserved or placed goes
// through it, in the same statement, so the counters never drift.
const unplace = `, agg AS (SELECT node_id, sum(cpu_milli) AS c, sum(memory_mb) AS m, sum(disk_mb) AS d, count(*) AS k
		FROM gone GROUP BY node_id)
	UPDATE nodes SET used_cpu_milli = used_cpu_milli - agg.c, used_memory_mb = used_memory_mb - agg.m,
		used_disk_mb = used_disk_mb - agg.d, used_sandboxes = used_sandboxes - agg.k
	FROM agg WHERE nodes.id = agg.node_id`

const goneColumns = ` RETURNING node_id, cpu_milli, memory_mb, disk_mb)`

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
	return retry(ctx, func() error {
		_, err := s.pool.Exec(ctx, `WITH gone AS (DELETE FROM placements WHERE id = $1 AND state = 'reserved'`+goneColumns+unplace, rsv)
		return err
	})
}

// End records that sandbox id ended and is gone from its node, giving
// the node the room back.
func (s *Store) End(ctx context.Context, id string) error {
	return retry(ctx, func() error {
		_, err := s.pool.Exec(ctx, `WITH gone AS (UPDATE placements SET state = 'ended', updated_at = now()
			WHERE id = $1 AND state IN ('placed', 'ending')`+goneColumns+unplace, id)
		return err
	})
}

// Ending records that sandbox id is being removed: its node holds it (and
// refuses by it) until it is gone, so its room stays taken until the
// node's next heartbeat no longer lists it.
func (s *Store) Ending(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, `UPDATE placements SET state = 'ending', updated_at = now() WHERE id = $1 AND state = 'placed'`, id)
	return err
}

// NameTaken says whether a placed (or ending) sandbox is named name.
func (s *Store) NameTaken(ctx context.Context, name string) (bool, error) {
	var taken bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM placements WHERE name = $1 AND state IN ('placed', 'ending'))`, name).Scan(&taken)
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
		ORDER BY id = $1 DESC, state IN ('placed', 'ending') DESC, updated_at DESC LIMIT 1`, id).
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

// Uses reads every node's counters.
func (s *Store) Uses(ctx context.Context) (map[string]Use, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, used_cpu_milli, used_memory_mb, used_disk_mb, used_sandboxes FROM nodes`)
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
