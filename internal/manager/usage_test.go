package manager

import (
	"context"
	"errors"
	"testing"
	"time"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// TestUsageSettled: a live sandbox's usage is read fresh; at its end the
// teardown settles it into the records, where its record, the report by
// tag and a second read find it; a failed create has none.
func TestUsageSettled(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sb := e.create(sandbox.Spec{CPU: 0.5, MemoryMB: 256, Tags: map[string]string{"team": "red"}})
	e.run(sb.ID, "true")
	live, err := e.m.UsageOf(ctx, sb.ID)
	if err != nil || !live.Live || live.Totals.CPUSeconds <= 0 || live.Totals.MemoryPeakBytes == 0 || !live.EndedAt.IsZero() {
		t.Fatalf("live usage: %+v, %v", live, err)
	}
	if _, err := e.m.Terminate(ctx, sb.ID, sandbox.EndTerminated, nil); err != nil {
		t.Fatal(err)
	}
	got, err := e.m.UsageOf(ctx, sb.ID)
	if err != nil || got.Live || got.EndedAt.IsZero() || got.Tags["team"] != "red" || got.Runtime != "gvisor" {
		t.Fatalf("settled usage: %+v, %v", got, err)
	}
	if got.Totals.CPUSeconds < live.Totals.CPUSeconds || got.Totals.RunningSeconds < live.Totals.RunningSeconds || got.Totals.MemoryRequestedGiBSeconds <= 0 {
		t.Errorf("settled %+v is less than live %+v", got.Totals, live.Totals)
	}
	if got.Totals.DiskQuotaBytes != uint64(sandbox.DefaultDiskMB)<<20 {
		t.Errorf("disk quota %d", got.Totals.DiskQuotaBytes)
	}
	groups, err := e.m.UsageReport(ctx, time.Now().Add(-time.Hour), time.Time{}, "tag:team")
	if err != nil || len(groups) != 1 || groups[0].Key != "red" || groups[0].Sandboxes != 1 || groups[0].Totals.CPUSeconds != got.Totals.CPUSeconds {
		t.Fatalf("report: %+v, %v", groups, err)
	}
	if _, err := e.m.UsageReport(ctx, time.Now(), time.Time{}, "color"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("group_by color: %v", err)
	}
	e.rt.FailStarts(errors.New("boom"))
	if _, err := e.m.Create(ctx, sandbox.Spec{User: selfUser()}); err == nil {
		t.Fatal("create did not fail")
	}
	groups, _ = e.m.UsageReport(ctx, time.Now().Add(-time.Hour), time.Time{}, "sandbox")
	if len(groups) != 1 || groups[0].Key != sb.ID {
		t.Errorf("a failed create has usage: %+v", groups)
	}
}

// TestMeteringOff: with metering off nothing is metered or stored, and a
// report says why there is none.
func TestMeteringOff(t *testing.T) {
	e := newEnvWith(t, func(c *Config) { c.Metering.Off = true })
	ctx := context.Background()
	sb := e.create(sandbox.Spec{})
	if _, err := e.m.UsageOf(ctx, sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("usage with metering off: %v", err)
	}
	if _, err := e.m.Terminate(ctx, sb.ID, sandbox.EndTerminated, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.GetUsage(ctx, sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("stored usage with metering off: %v", err)
	}
	if _, err := e.m.UsageReport(ctx, time.Time{}, time.Time{}, ""); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("report with metering off: %v", err)
	}
}

// TestUsageFromWarmPool: a claimed warm pool sandbox is metered from its
// claim, not from its start in the pool.
func TestUsageFromWarmPool(t *testing.T) {
	e := newEnv(t)
	e.m.Close()
	e.m = e.openPooled(1)
	e.poolReady(1)
	time.Sleep(50 * time.Millisecond) // time in the pool, not the caller's
	sb := e.create(sandbox.Spec{})
	u, err := e.m.UsageOf(context.Background(), sb.ID)
	if err != nil || !u.StartedAt.Equal(sb.CreatedAt) || !u.StartedAt.After(sb.StartedAt) {
		t.Fatalf("usage of a claimed sandbox: %+v, %v (created %s, started %s)", u, err, sb.CreatedAt, sb.StartedAt)
	}
	if u.Totals.RunningSeconds >= time.Since(sb.StartedAt).Seconds() {
		t.Errorf("running %.3f s counts the time in the pool", u.Totals.RunningSeconds)
	}
}
