package bench

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
)

func TestForEach(t *testing.T) {
	for _, tc := range []struct {
		name        string
		stopOnError bool
		failAt      int // -1: none fails
		wantAll     bool
	}{
		{"all succeed", true, -1, true},
		{"failure stops new starts", true, 5, false},
		{"failure does not stop", false, 5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &densityRun{dc: DensityConfig{Concurrency: 3, Log: io.Discard}}
			const n = 40
			var started, inFlight, most atomic.Int64
			res, _, errs := d.forEach(context.Background(), n, tc.stopOnError, "op", func(_ context.Context, i int) error {
				started.Add(1)
				now := inFlight.Add(1)
				defer inFlight.Add(-1)
				for {
					m := most.Load()
					if now <= m || most.CompareAndSwap(m, now) {
						break
					}
				}
				if i == tc.failAt {
					return errors.New("boom")
				}
				return nil
			})
			if most.Load() > 3 {
				t.Errorf("%d in flight at once, want at most 3", most.Load())
			}
			wantErrs := 0
			if tc.failAt >= 0 {
				wantErrs = 1
			}
			if len(errs) != wantErrs {
				t.Errorf("errors = %v, want %d", errs, wantErrs)
			}
			if got := int(started.Load()); tc.wantAll && got != n || !tc.wantAll && got == n {
				t.Errorf("started %d of %d (want all: %v)", got, n, tc.wantAll)
			}
			if len(res.Samples)+len(errs) != int(started.Load()) {
				t.Errorf("%d samples and %d errors for %d started", len(res.Samples), len(errs), started.Load())
			}
		})
	}
}

func TestMountPoints(t *testing.T) {
	info := "36 35 98:0 /mnt1 /mnt/a\\040b rw,noatime master:1 - ext3 /dev/root rw\n" +
		"37 35 0:5 / /tmp/st/sandboxes/sb-1/upper rw - tmpfs tmpfs rw\n"
	got := mountPoints([]byte(info))
	if len(got) != 2 || got[0] != "/mnt/a b" || got[1] != "/tmp/st/sandboxes/sb-1/upper" {
		t.Fatalf("mountPoints = %q", got)
	}
	if !namesAny(got[1], []string{"sb-0", "sb-1"}) || namesAny(got[0], []string{"sb-1"}) {
		t.Error("namesAny disagrees with the mount points")
	}
}
