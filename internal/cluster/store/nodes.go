package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"corral/internal/errdefs"
)

// Node states.
const (
	NodeReady = "ready"
	NodeLost  = "lost"
)

// Node is one node as the cluster knows it.
type Node struct {
	ID      string
	Address string // base URL the control plane reaches its API at
	// EnvdAddress is the base URL of its E2B envd face ("": none), which
	// a control plane's envd face passes requests on to.
	EnvdAddress string
	// Capacity: what the node admits (its admittable CPU and memory, its
	// free disk and its bound on live sandboxes), as of its last
	// heartbeat.
	CPUMilli     int64
	MemoryMB     int64
	DiskMB       int64
	MaxSandboxes int
	Runtimes     []string
	// RuntimeVersions names each runtime's version (what a memory
	// snapshot records); empty for a node that did not say.
	RuntimeVersions map[string]string
	KVM             bool
	Labels          map[string]string
	// CredentialNonce is public: with the join token it derives the
	// node's credential (nodeauth); CredentialHash is that credential's
	// SHA-256, so the database never holds the credential itself.
	CredentialNonce string
	CredentialHash  string
	State           string
	Draining        bool // no new sandboxes (Drain)
	Heartbeat       time.Time
	LostAt          *time.Time
}

const nodeColumns = `id, address, cpu_milli, memory_mb, disk_mb, max_sandboxes, runtimes, kvm, labels,
	credential_nonce, credential_hash, state, draining, heartbeat_at, lost_at, runtime_versions, envd_address`

func scanNode(row pgx.Row) (Node, error) {
	var n Node
	err := row.Scan(&n.ID, &n.Address, &n.CPUMilli, &n.MemoryMB, &n.DiskMB, &n.MaxSandboxes, &n.Runtimes, &n.KVM, &n.Labels,
		&n.CredentialNonce, &n.CredentialHash, &n.State, &n.Draining, &n.Heartbeat, &n.LostAt, &n.RuntimeVersions, &n.EnvdAddress)
	return n, err
}

// Register adds node n, or updates it (a restart, a return after being
// lost) when the row's credential is n's. A name held under another
// credential is refused: two nodes must not share one.
func (s *Store) Register(ctx context.Context, n Node) error {
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	if n.RuntimeVersions == nil {
		n.RuntimeVersions = map[string]string{}
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO nodes (`+nodeColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'ready', false, now(), NULL, $12, $13)
		ON CONFLICT (id) DO UPDATE SET address = EXCLUDED.address, envd_address = EXCLUDED.envd_address, cpu_milli = EXCLUDED.cpu_milli,
			memory_mb = EXCLUDED.memory_mb, disk_mb = EXCLUDED.disk_mb, max_sandboxes = EXCLUDED.max_sandboxes,
			runtimes = EXCLUDED.runtimes, kvm = EXCLUDED.kvm, labels = EXCLUDED.labels,
			runtime_versions = EXCLUDED.runtime_versions, heartbeat_at = now()
		WHERE nodes.credential_hash = EXCLUDED.credential_hash`,
		n.ID, n.Address, n.CPUMilli, n.MemoryMB, n.DiskMB, n.MaxSandboxes, n.Runtimes, n.KVM, n.Labels,
		n.CredentialNonce, n.CredentialHash, n.RuntimeVersions, n.EnvdAddress)
	if err != nil {
		return fmt.Errorf("registering node %s: %w", n.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: registering node %s: the name is registered with another credential (another node, or a replaced state directory)", errdefs.ErrAlreadyExists, n.ID)
	}
	return nil
}

// Heartbeat records that node n (n.ID, proving itself with
// n.CredentialHash) is alive, has n's capacity (CPU, memory, free disk,
// bound on sandboxes, runtimes, KVM: what its host admits now, which
// changes without a restart) and runs the sandboxes live. A lost node
// that beats again is ready again. Placements of the node that are no longer live
// end: ending ones at once, placed ones bound more than grace ago (a
// create may have finished after the node listed its sandboxes). It returns the
// sandboxes the cluster gave up on while the node was lost, which the
// node must terminate and then report with Reaped.
func (s *Store) Heartbeat(ctx context.Context, n Node, live []string, grace time.Duration) ([]string, error) {
	l := make([]Live, len(live))
	for i, id := range live {
		l[i] = Live{ID: id}
	}
	return s.HeartbeatLive(ctx, n, l, grace)
}

// HeartbeatLive is Heartbeat with each live sandbox's state: the placed
// ones whose recorded state differs take it, in the same transaction
// (records.go), so a pause, an idle auto-pause or a resume on the node
// shows in lists after its next beat.
func (s *Store) HeartbeatLive(ctx context.Context, n Node, lives []Live, grace time.Duration) ([]string, error) {
	id := n.ID
	live := make([]string, len(lives))
	for i, l := range lives {
		live[i] = l.ID
	}
	var reap []string
	err := retry(ctx, func() error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `UPDATE nodes SET heartbeat_at = now(), state = 'ready', lost_at = NULL,
				cpu_milli = $3, memory_mb = $4, disk_mb = $5, max_sandboxes = $6, runtimes = $7, kvm = $8
			WHERE id = $1 AND credential_hash = $2`, id, n.CredentialHash, n.CPUMilli, n.MemoryMB, n.DiskMB, n.MaxSandboxes, n.Runtimes, n.KVM)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return fmt.Errorf("%w: node %s is not registered with this credential", errdefs.ErrNotFound, id)
			}
			if _, err := tx.Exec(ctx, `WITH gone AS (UPDATE placements SET state = 'ended', updated_at = now()
			WHERE node_id = $1 AND NOT (id = ANY($3))
				AND (state = 'placed' AND updated_at < now() - $2 * interval '1 second' OR state = 'ending')`+
				goneColumns+unplace, id, seconds(grace), live); err != nil {
				return err
			}
			if err := updateStates(ctx, tx, id, lives); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, `SELECT id FROM placements WHERE node_id = $1 AND state = 'lost' AND NOT reaped`, id)
			if err != nil {
				return err
			}
			reap, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat of node %s: %w", id, err)
	}
	return reap, nil
}

// Reaped records that node id terminated the lost sandboxes ids.
func (s *Store) Reaped(ctx context.Context, id string, ids []string) error {
	_, err := s.pool.Exec(ctx, `UPDATE placements SET reaped = true, updated_at = now()
		WHERE node_id = $1 AND state = 'lost' AND id = ANY($2)`, id, ids)
	return err
}

// Nodes lists every node, by id.
func (s *Store) Nodes(ctx context.Context) ([]Node, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+nodeColumns+` FROM nodes ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Node, error) { return scanNode(r) })
}

// Node returns node id.
func (s *Store) Node(ctx context.Context, id string) (Node, error) {
	n, err := scanNode(s.pool.QueryRow(ctx, `SELECT `+nodeColumns+` FROM nodes WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Node{}, fmt.Errorf("%w: node %s", errdefs.ErrNotFound, id)
	}
	return n, err
}

// MarkLost marks every ready node silent for longer than after lost, and
// its sandboxes with it (their rows kept, so their ids answer that they
// are lost); reservations older than staleReservation, left by a control
// instance that died mid-create, are dropped. It returns the nodes it
// marked. Call it from the leader only (Lead).
func (s *Store) MarkLost(ctx context.Context, after time.Duration) ([]string, error) {
	var lost []string
	err := retry(ctx, func() error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			// Everything live on a lost node stops being live below, in this
			// transaction: its counters start again from zero.
			rows, err := tx.Query(ctx, `UPDATE nodes SET state = 'lost', lost_at = now(),
				used_cpu_milli = 0, used_memory_mb = 0, used_disk_mb = 0, used_sandboxes = 0
			WHERE state = 'ready' AND heartbeat_at < now() - $1 * interval '1 second' RETURNING id`, seconds(after))
			if err != nil {
				return err
			}
			if lost, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return err
			}
			if len(lost) > 0 {
				if _, err := tx.Exec(ctx, `UPDATE placements SET state = 'lost', updated_at = now()
				WHERE node_id = ANY($1) AND state = 'placed'`, lost); err != nil {
					return err
				}
				// What was being removed there is taken as removed.
				if _, err := tx.Exec(ctx, `UPDATE placements SET state = 'ended', updated_at = now()
				WHERE node_id = ANY($1) AND state = 'ending'`, lost); err != nil {
					return err
				}
				// A create in flight there fails to bind (Bind), and its
				// control instance removes what the node made.
				if _, err := tx.Exec(ctx, `DELETE FROM placements WHERE node_id = ANY($1) AND state = 'reserved'`, lost); err != nil {
					return err
				}
			}
			_, err = tx.Exec(ctx, `WITH gone AS (DELETE FROM placements WHERE state = 'reserved' AND created_at < now() - $1 * interval '1 second'`+
				goneColumns+unplace, seconds(staleReservation))
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("marking silent nodes lost: %w", err)
	}
	return lost, nil
}

// staleReservation is how long a reservation may wait for its create.
const staleReservation = 10 * time.Minute

// Drain stops (on) or resumes (off) placing new sandboxes on node id; the
// sandboxes it runs stay. It survives the node's restarts and losses.
func (s *Store) Drain(ctx context.Context, id string, on bool) (Node, error) {
	n, err := scanNode(s.pool.QueryRow(ctx, `UPDATE nodes SET draining = $2 WHERE id = $1 RETURNING `+nodeColumns, id, on))
	if errors.Is(err, pgx.ErrNoRows) {
		return Node{}, fmt.Errorf("%w: node %s", errdefs.ErrNotFound, id)
	}
	if err != nil {
		return Node{}, fmt.Errorf("draining node %s: %w", id, err)
	}
	return n, nil
}
