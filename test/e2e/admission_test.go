package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"corral/pkg/apiv1"
)

// The admission by resources: the daemon reports its capacity;
// sandboxes whose memory requests add up past it (times the overcommit
// factor) are refused with a 429 naming the resource, what was asked and
// what is free, as is one whose limit the host could never hold (a 400
// naming the field); an ended sandbox frees its reservation. Before,
// four sandboxes asking 29 GiB each on this 24 GiB host were all admitted.
func TestAdmissionByResources(t *testing.T) {
	// Not parallel: it fills the daemon to the host's capacity.
	d := startDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := d.capacity()
	if c.MemoryMB <= 0 || c.CPU != float64(runtime.NumCPU()) || c.MemoryOvercommit != 3 || c.CPUOvercommit != 64 ||
		c.AdmittableMemoryMB != int64(float64(c.MemoryMB)*c.MemoryOvercommit) || c.ReservedMemoryMB != 0 {
		t.Fatalf("capacity %+v", c)
	}

	status, body := d.api("POST", "/v1/sandboxes", d.token, `{"memory_mb": 29696, "memory_limit_mb": 29696}`)
	if status != 400 || !strings.Contains(body, "memory_limit_mb") || !strings.Contains(body, fmt.Sprint(c.MemoryMB)) {
		t.Errorf("a sandbox over the host's memory: %d %s", status, body)
	}
	status, body = d.api("POST", "/v1/sandboxes", d.token, fmt.Sprintf(`{"cpu": %d}`, runtime.NumCPU()+1))
	if status != 400 || !strings.Contains(body, `cpu`) {
		t.Errorf("a CPU request over the host's: %d %s", status, body)
	}

	// Sandboxes asking the whole capacity each: as many as the factor
	// admits, then a refusal.
	ask := fmt.Sprintf(`{"memory_mb": %d}`, c.MemoryMB)
	fit := int(c.AdmittableMemoryMB / c.MemoryMB)
	var ids []string
	for i := range fit {
		status, body := d.api("POST", "/v1/sandboxes", d.token, ask)
		if status != 201 {
			t.Fatalf("sandbox %d of %d that fit: %d %s", i+1, fit, status, body)
		}
		var sb apiv1.Sandbox
		if err := json.Unmarshal([]byte(body), &sb); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	status, body = d.api("POST", "/v1/sandboxes", d.token, ask)
	free := c.AdmittableMemoryMB - int64(fit)*c.MemoryMB
	for _, w := range []string{"resource_exhausted", "memory", fmt.Sprintf("asked %d MiB", c.MemoryMB), fmt.Sprintf("%d MiB free", free)} {
		if status != 429 || !strings.Contains(body, w) {
			t.Errorf("sandbox %d over the capacity: %d %s, want 429 saying %q", fit+1, status, body, w)
		}
	}
	if got := d.capacity(); got.ReservedMemoryMB != int64(fit)*c.MemoryMB || got.Sandboxes != fit {
		t.Errorf("after %d admitted: %+v", fit, got)
	}
	if _, err := d.client.Terminate(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	status, body = d.api("POST", "/v1/sandboxes", d.token, ask)
	var again apiv1.Sandbox
	if err := json.Unmarshal([]byte(body), &again); status != 201 || err != nil {
		t.Fatalf("after one ended: %d %s", status, body)
	}
	for _, id := range append(ids[1:], again.ID) {
		if _, err := d.client.Terminate(ctx, id); err != nil {
			t.Fatal(err)
		}
	}

	// A CPU limit alone below the default request lowers the request.
	id := d.create("--cpu-limit", "0.5", "--memory", "64")
	var sb apiv1.Sandbox
	if err := json.Unmarshal([]byte(d.mustCLI("inspect", id)), &sb); err != nil {
		t.Fatal(err)
	}
	if sb.CPU != 0.5 || sb.CPULimit != 0.5 {
		t.Errorf("--cpu-limit 0.5 alone: cpu %g, cpu_limit %g", sb.CPU, sb.CPULimit)
	}
}

// capacity is GET /v1/version's capacity.
func (d *daemon) capacity() apiv1.Capacity {
	d.t.Helper()
	status, body := d.api("GET", "/v1/version", d.token, "")
	var v apiv1.Version
	if err := json.Unmarshal([]byte(body), &v); status != 200 || err != nil {
		d.t.Fatalf("version: %d %s %v", status, body, err)
	}
	return v.Capacity
}

// Memory snapshots have quotas: one over the per-sandbox quota, or one
// whose estimated size would leave less free disk than the daemon keeps,
// is a 429 naming the quota; removing a snapshot makes room again.
func TestSnapshotQuotas(t *testing.T) {
	// Not parallel: its quotas read the free space of the disk every test writes to.
	t.Run("per sandbox", func(t *testing.T) {
		d := startDaemon(t, "--snapshot-quota-per-sandbox", "1")
		id := d.create("--memory-limit", "256")
		snap := strings.TrimSpace(d.mustCLI("snapshot", "mem", id))
		status, body := d.api("POST", "/v1/sandboxes/"+id+"/snapshots/memory", d.token, "{}")
		if status != 429 || !strings.Contains(body, "quota per sandbox is 1") {
			t.Errorf("a second snapshot over the quota of 1: %d %s", status, body)
		}
		d.mustCLI("snapshot", "rm", snap)
		status, body = d.api("POST", "/v1/sandboxes/"+id+"/snapshots/memory", d.token, "{}")
		if status != 201 && status != 200 {
			t.Errorf("a snapshot after the first was removed: %d %s", status, body)
		}
	})
	t.Run("free disk", func(t *testing.T) {
		d := startDaemon(t, "--snapshot-min-free-mb", "1073741824")
		id := d.create("--memory-limit", "256")
		status, body := d.api("POST", "/v1/sandboxes/"+id+"/snapshots/memory", d.token, "{}")
		if status != 429 || !strings.Contains(body, "snapshot disk") || !strings.Contains(body, "kept free") {
			t.Errorf("a snapshot the disk cannot hold: %d %s", status, body)
		}
	})
}
