package apiv1

import "time"

// AuditEntry is one entry of the audit trail (GET /v1/audit): Hash is
// hex(sha256(PrevHash "\n" canonical entry)), see docs/ARCHITECTURE.md,
// The audit trail.
type AuditEntry struct {
	Seq       int64             `json:"seq"`
	Time      time.Time         `json:"time"`
	Kind      string            `json:"kind"`
	SandboxID string            `json:"sandbox_id,omitempty"`
	Caller    string            `json:"caller,omitempty"`
	Fields    map[string]string `json:"fields,omitempty"`
	PrevHash  string            `json:"prev_hash"`
	Hash      string            `json:"hash"`
}

// AuditPage is the body of GET /v1/audit. Next, when set, is the after=
// of the following page.
type AuditPage struct {
	Entries []AuditEntry `json:"entries"`
	Next    string       `json:"next,omitempty"`
}

// AuditBreak is the first entry of the trail that does not verify.
// Problem is edited, removed or reordered.
type AuditBreak struct {
	Seq     int64  `json:"seq"`
	Problem string `json:"problem"`
	Detail  string `json:"detail"`
}

// AuditReport is the body of GET /v1/audit/verify.
type AuditReport struct {
	OK bool `json:"ok"`
	// Entries is how many entries were walked; Head is the last one's
	// hash (record it elsewhere to detect a cut at the end later).
	Entries int64       `json:"entries"`
	Head    string      `json:"head"`
	Broken  *AuditBreak `json:"broken,omitempty"`
	// Nodes, through a cluster's control plane, is each node's report
	// (each node keeps its own chain, verified as shipped to the cluster
	// database); the rest then sums them, and Broken is the first node's
	// break, naming the node.
	Nodes map[string]AuditReport `json:"nodes,omitempty"`
}

// NodeAuditEntry is an entry of a cluster's trail, through a control
// plane: a node's entry (each node keeps its own hash chain) and the
// node's id.
type NodeAuditEntry struct {
	Node string `json:"node"`
	AuditEntry
}

// NodeAuditPage is GET /v1/audit through a control plane: the entries
// the nodes shipped to the cluster database, in the order it received
// them. Next continues after this page (send it back as after=).
type NodeAuditPage struct {
	Entries []NodeAuditEntry `json:"entries"`
	Next    string           `json:"next,omitempty"`
}
