package store

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"corral/internal/cluster/pgtest"
)

// BenchmarkReserve places sandboxes on simulated nodes (rows only, no
// daemons) already holding live sandboxes, from 8 goroutines, and reports
// placements per second and the p99 of one Reserve and Bind:
//
//	go test -run '^$' -bench Reserve -benchtime 2000x ./internal/cluster/store
func BenchmarkReserve(b *testing.B) {
	url := pgtest.Start(b)
	for _, c := range []struct{ nodes, perNode int }{{100, 10}, {1000, 10}, {1000, 100}, {10000, 100}} {
		b.Run(fmt.Sprintf("nodes=%d/live=%d", c.nodes, c.nodes*c.perNode), func(b *testing.B) {
			ctx := context.Background()
			s := open(b, url)
			if _, err := s.pool.Exec(ctx, `TRUNCATE audit_entries, usage_records, drain_moves, drains, volume_locations, node_layers, snapshot_locations, node_images, node_warm, placements, nodes`); err != nil {
				b.Fatal(err)
			}
			if _, err := s.pool.Exec(ctx, `INSERT INTO nodes (id, address, cpu_milli, memory_mb, disk_mb, max_sandboxes, runtimes, kvm,
					credential_nonce, credential_hash, state)
				SELECT 'n' || i, 'http://127.0.0.1:1', 1000000000, 1000000000, 1000000000, 1000000, '{gvisor}', false, 'n', 'h', 'ready'
				FROM generate_series(1, $1) i`, c.nodes); err != nil {
				b.Fatal(err)
			}
			if _, err := s.pool.Exec(ctx, `INSERT INTO placements (id, node_id, state, runtime, cpu_milli, memory_mb, disk_mb)
				SELECT 'sb-seed' || i, 'n' || (1 + i % $1), 'placed', 'gvisor', 1000, 512, 10240
				FROM generate_series(1, $2) i`, c.nodes, c.nodes*c.perNode); err != nil {
				b.Fatal(err)
			}
			if _, err := s.pool.Exec(ctx, `UPDATE nodes SET used_cpu_milli = $1 * 1000, used_memory_mb = $1 * 512,
				used_disk_mb = $1 * 10240, used_sandboxes = $1`, c.perNode); err != nil {
				b.Fatal(err)
			}
			req := Request{Runtime: "gvisor", CPUMilli: 1000, MemoryMB: 512, DiskMB: 10240, FreshWithin: time.Hour}
			var mu sync.Mutex
			var lat []time.Duration
			next := 0
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						mu.Lock()
						if next >= b.N {
							mu.Unlock()
							return
						}
						next++
						i := next
						mu.Unlock()
						t0 := time.Now()
						p, err := s.Reserve(ctx, req)
						if err == nil {
							err = s.Bind(ctx, p.ID, fmt.Sprintf("sb-b%d", i), "")
						}
						if err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						lat = append(lat, time.Since(t0))
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(len(lat))/el.Seconds(), "placements/s")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}
