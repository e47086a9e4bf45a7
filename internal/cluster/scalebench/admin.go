package scalebench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// admin is the benchmark's own connection: emptying the tables, the bulk
// load, the statement statistics. Never the code under measurement.
type admin struct {
	conn *pgx.Conn
}

func openAdmin(ctx context.Context, url string) (*admin, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connecting to the benchmark's database: %w", err)
	}
	return &admin{conn: conn}, nil
}

func (a *admin) close() { _ = a.conn.Close(context.Background()) }

// reset empties the cluster's tables (the schema is store.Open's).
func (a *admin) reset(ctx context.Context) error {
	_, err := a.conn.Exec(ctx, `TRUNCATE audit_entries, usage_records, drain_moves, drains, volume_locations, node_layers, snapshot_locations, node_images, node_warm, placements, nodes`)
	if err != nil {
		return fmt.Errorf("emptying the cluster's tables: %w", err)
	}
	return nil
}

// preload COPYs records sandbox records: livePerNode placed on each node
// (as many of records as there are; running, with tags, started up to an
// hour ago), the rest ended, spread over the nodes. Then ANALYZE, as
// autovacuum would after a load. No row carries a public record: the
// load stays minutes long at 1,000,000 (the creates' BindRecord writes
// theirs).
func (c *Cluster) preload(ctx context.Context, records, livePerNode int) error {
	if records == 0 || len(c.ids) == 0 {
		return nil
	}
	live := min(records, livePerNode*len(c.ids))
	running := "running"
	i := 0
	now := time.Now().UTC()
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if i == records {
			return nil, nil
		}
		n := c.nodes[c.ids[i%len(c.ids)]]
		state, sbState, tags := "ended", (*string)(nil), map[string]string{}
		id := fmt.Sprintf("sb-old-%07d", i)
		if i < live {
			state, sbState = "placed", &running
			id = fmt.Sprintf("sb-pre-%07d", i)
			sb := simSandbox{id: id, started: now.Add(-time.Duration(i%3600) * time.Second), tags: sandboxTags(int64(i))}
			n.live = append(n.live, sb)
			tags = sb.tags
		}
		i++
		return []any{id, n.id, state, runtimeName, int64(reqCPUMilli), int64(reqMemoryMB), int64(reqDiskMB), sbState, tags}, nil
	})
	if _, err := c.db.conn.CopyFrom(ctx, pgx.Identifier{"placements"},
		[]string{"id", "node_id", "state", "runtime", "cpu_milli", "memory_mb", "disk_mb", "sandbox_state", "tags"}, src); err != nil {
		return fmt.Errorf("loading %d sandbox records: %w", records, err)
	}
	// The store keeps each node's use in counters on its row, changed with
	// every placement; a bulk load bypasses it, so the counters are set
	// from what was loaded.
	if _, err := c.db.conn.Exec(ctx, `UPDATE nodes n SET used_cpu_milli = u.cpu, used_memory_mb = u.mem,
		used_disk_mb = u.disk, used_sandboxes = u.k
		FROM (SELECT node_id, sum(cpu_milli) cpu, sum(memory_mb) mem, sum(disk_mb) disk, count(*) k
			FROM placements WHERE state IN ('reserved', 'placed') GROUP BY node_id) u
		WHERE n.id = u.node_id`); err != nil {
		return fmt.Errorf("counting the loaded records on their nodes: %w", err)
	}
	if _, err := c.db.conn.Exec(ctx, `ANALYZE nodes; ANALYZE placements`); err != nil {
		return fmt.Errorf("analyzing after the load: %w", err)
	}
	return nil
}

// Statement is one statement's share of the server's execution time.
type Statement struct {
	Label   string
	Calls   int64
	TotalMS float64
	MeanMS  float64
}

// statsReset zeroes pg_stat_statements; false when it is not loaded.
func (a *admin) statsReset(ctx context.Context) bool {
	if _, err := a.conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return false
	}
	_, err := a.conn.Exec(ctx, `SELECT pg_stat_statements_reset()`)
	return err == nil
}

// statements are the top statements by execution time since statsReset.
func (a *admin) statements(ctx context.Context) ([]Statement, error) {
	rows, err := a.conn.Query(ctx, `SELECT query, calls, total_exec_time FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time DESC LIMIT 16`)
	if err != nil {
		return nil, fmt.Errorf("reading pg_stat_statements: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Statement, error) {
		var s Statement
		var q string
		if err := r.Scan(&q, &s.Calls, &s.TotalMS); err != nil {
			return s, err
		}
		s.Label = label(q)
		if s.Calls > 0 {
			s.MeanMS = s.TotalMS / float64(s.Calls)
		}
		return s, nil
	})
}

// labels name the store's statements by a piece of their text; the
// first match wins.
var labels = []struct{ part, label string }{
	{"cpu_milli - used_cpu_milli", "place: candidates, a sample from a random start in the place_key index"},
	{"INSERT INTO placements", "place: admit, the node's counters and the reservation"},
	{"SET id = $2", "place: bind the sandbox's id"},
	{"UPDATE nodes SET heartbeat_at", "heartbeat: the node's row"},
	{"SET sandbox_state = l.state", "heartbeat: the live sandboxes' states"},
	{"SET state = 'ended'", "heartbeat: end what the node no longer runs"},
	{"state = 'lost' AND NOT reaped", "heartbeat: lost sandboxes to reap"},
	{"FROM nodes WHERE id = $1 AND credential_hash", "heartbeat: images, the node's credential"},
	{"node_warm", "heartbeat: images, the warm pools"},
	{"INSERT INTO node_images", "heartbeat: images, upserted"},
	{"DELETE FROM node_images", "heartbeat: images, gone ones"},
	{"INSERT INTO audit_entries", "ship: audit entries"},
	{"INSERT INTO usage_records", "ship: usage records"},
}

// Heartbeat reports whether a statement's label is a heartbeat's.
func (s Statement) Heartbeat() bool { return strings.HasPrefix(s.Label, "heartbeat:") }

// Ship reports whether a statement's label is a node's shipment's.
func (s Statement) Ship() bool { return strings.HasPrefix(s.Label, "ship:") }

func label(q string) string {
	for _, l := range labels {
		if strings.Contains(q, l.part) {
			return l.label
		}
	}
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 50 {
		q = q[:50] + "…"
	}
	return q
}

// postgresCPU is the CPU seconds PostgreSQL's processes used so far: the
// postmaster (from its pid file) and its children, read from /proc.
func (a *admin) postgresCPU(ctx context.Context) (float64, error) {
	var dir string
	if err := a.conn.QueryRow(ctx, `SHOW data_directory`).Scan(&dir); err != nil {
		return 0, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	pm, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid: %w", err)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	ticks := 0.0
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		// Fields after the command's closing parenthesis: state ppid … utime(12) stime(13).
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		ppid, _ := strconv.Atoi(f[1])
		if pid != pm && ppid != pm {
			continue
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		ticks += u + st
	}
	return ticks / clockTicks, nil
}

// clockTicks is USER_HZ, 100 on every Linux Go runs on.
const clockTicks = 100
