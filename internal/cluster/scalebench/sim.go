package scalebench

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"corral/internal/cluster/store"
	"corral/internal/usage"
	"corral/pkg/apiv1"
)

// What a simulated node holds of each sandbox it runs, and what it makes
// of it: the public record a control plane binds, the states its
// heartbeats send, the audit entries and the usage figures it ships.

// simSandbox is one sandbox a simulated node runs.
type simSandbox struct {
	id      string
	started time.Time
	tags    map[string]string
}

// sandboxTags are a create's tags, as a caller sets them (the record's
// and the usage records' tags).
func sandboxTags(i int64) map[string]string {
	return map[string]string{"team": fmt.Sprintf("team-%02d", i%40), "project": fmt.Sprintf("proj-%04d", i%1000),
		"env": "prod", "owner": fmt.Sprintf("user-%05d@example.com", i%20000)}
}

// record is sandbox sb's public record, built as a node answers a
// create (apiv1.Sandbox): about 1 KB of JSON.
func (sb simSandbox) record() []byte {
	exp := sb.started.Add(time.Hour)
	b, _ := json.Marshal(apiv1.Sandbox{ID: sb.id, State: "running", Runtime: runtimeName,
		Image: "registry.example.com/agents/python-3.12-toolbox:2026.11.3", CPU: float64(reqCPUMilli) / 1000, CPULimit: 1,
		MemoryMB: reqMemoryMB, MemoryLimitMB: reqMemoryMB, DiskMB: reqDiskMB, Timeout: 3600, IdleTimeout: 600, AutoPause: true,
		Env: map[string]string{"LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1", "TASK_ID": sb.id + "-task"}, Workdir: "/workspace",
		User: "agent", Tags: sb.tags, Network: apiv1.NetworkPolicy{DomainAllowlist: []string{"pypi.org", "files.pythonhosted.org", "github.com"}},
		Address: "10.88.3.17", Gateway: "10.88.0.1", PortToken: hash(sb.id, "port")[:32], EnvdAccessToken: hash(sb.id, "envd")[:40],
		CreatedAt: sb.started, StartedAt: &sb.started, ExpiresAt: &exp})
	return b
}

// live is sb as the node's heartbeat lists it.
func (sb simSandbox) live() store.Live { return store.Live{ID: sb.id, State: "running"} }

// usageAt is sb's running figures at now, as a node's meter has them.
func (sb simSandbox) usageAt(now time.Time) usage.Record {
	run := now.Sub(sb.started).Seconds()
	return usage.Record{SandboxID: sb.id, Runtime: runtimeName, Tags: sb.tags, StartedAt: sb.started,
		Totals: usage.Totals{CPUSeconds: 0.2 * run, CPUBurstSeconds: 0.01 * run, MemoryRequestedGiBSeconds: 0.5 * run,
			MemoryUsedGiBSeconds: 0.3 * run, MemoryPeakBytes: 400 << 20, MemoryAvgBytes: 300 << 20,
			NetInBytes: uint64(2000 * run), NetOutBytes: uint64(500 * run), DiskPeakBytes: 200 << 20,
			DiskQuotaBytes: reqDiskMB << 20, RunningSeconds: run}}
}

// createEntries are the audit entries a node's trail records for a
// create: the API call (audit.Calls) and the lifecycle move to running
// (the manager's "create"), chained after prev at seq.
func createEntries(node string, seq int64, prev string, sb simSandbox) []store.AuditEntry {
	now := time.Now().UTC()
	caller := "token:" + hash(sb.tags["owner"], "caller")[:12]
	es := []store.AuditEntry{
		{Kind: "api", SandboxID: "", Caller: caller, Fields: map[string]string{"face": "native", "method": "POST",
			"path": "/v1/sandboxes", "status": "201", "duration_ms": "412"}},
		{Kind: "create", SandboxID: sb.id, Caller: caller, Fields: map[string]string{"runtime": runtimeName,
			"agent": "0.19.0", "image": "registry.example.com/agents/python-3.12-toolbox:2026.11.3", "platform": "ptrace"}},
	}
	for i := range es {
		e := &es[i]
		e.Node, e.Seq, e.Time, e.PrevHash = node, seq+int64(i), now, prev
		e.Hash = hash(prev, strconv.FormatInt(e.Seq, 10), e.Kind, e.SandboxID)
		prev = e.Hash
	}
	return es
}

// hash is a SHA-256 in hex, the size of the trail's hashes.
func hash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
