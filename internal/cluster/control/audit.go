package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"corral/internal/audit"
	"corral/internal/cluster/store"
	"corral/internal/errdefs"
	"corral/pkg/apiv1"
)

// Each node keeps its own audit trail, a hash chain of what happened
// there, and ships it to the cluster database about a second behind
// (package node, ship.go). A control plane answers from the database, so
// a lost node's trail is read as any other's and a query asks no node:
// GET /v1/audit pages the nodes' entries in the order the database
// received them (each node's in its own order), each naming its node;
// verify walks each node's chain there with package audit's verifier;
// export streams each node's selected entries in turn.

// auditTokenPrefix marks a control plane's audit token: a position in
// the order received (store.AuditPos; a node's own token is a sequence
// number).
const auditTokenPrefix = "c2."

// auditDefaultPage is the API's default page.
const auditDefaultPage = 100

// auditPage is GET /v1/audit through a control plane.
func (s *Server) auditPage(w http.ResponseWriter, r *http.Request) {
	f, err := s.auditFilter(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	es, err := s.st.QueryAudit(r.Context(), f)
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := apiv1.NodeAuditPage{Entries: make([]apiv1.NodeAuditEntry, 0, len(es))}
	for _, e := range es {
		out.Entries = append(out.Entries, apiv1.NodeAuditEntry{Node: e.Node, AuditEntry: apiv1.AuditEntry(toAuditEntry(e))})
	}
	if len(es) == f.Limit {
		at := es[len(es)-1].At
		out.Next = auditTokenPrefix + strconv.FormatInt(at.Tx, 10) + "." + strconv.FormatInt(at.ID, 10)
	}
	writeJSON(w, http.StatusOK, out)
}

// auditFilter reads GET /v1/audit's query as a node does: sandbox (id or
// name), since (RFC 3339 or a duration back from now), kind (repeated or
// comma-separated), after (a control plane's next token) and limit.
func (s *Server) auditFilter(r *http.Request) (store.AuditFilter, error) {
	q := r.URL.Query()
	f := store.AuditFilter{Limit: auditDefaultPage}
	if v := q.Get("sandbox"); v != "" {
		f.SandboxID = v
		// A name is the placement's; an id unknown to the placements (a
		// sandbox made on its node directly) is taken as it is.
		if p, err := s.st.Lookup(r.Context(), v); err == nil {
			f.SandboxID = p.ID
		} else if !errors.Is(err, errdefs.ErrNotFound) {
			return f, err
		}
	}
	if v := q.Get("since"); v != "" {
		t, err := parseSince(v)
		if err != nil {
			return f, err
		}
		f.Since = t
	}
	for _, v := range q["kind"] {
		for _, k := range strings.Split(v, ",") {
			if !slices.Contains(audit.Kinds, k) {
				return f, errdefs.Invalid("kind", "unknown kind %.64q (one of %s)", k, strings.Join(audit.Kinds, ", "))
			}
			f.Kinds = append(f.Kinds, k)
		}
	}
	after, err := readAuditToken(q.Get("after"))
	if err != nil {
		return f, err
	}
	f.After = after
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > audit.MaxPage {
			return f, errdefs.Invalid("limit", "must be 1 to %d, got %.64q", audit.MaxPage, v)
		}
		f.Limit = n
	}
	return f, nil
}

func parseSince(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, errdefs.Invalid("since", "must be an RFC 3339 time or a positive duration (24h), got %.64q", v)
}

// readAuditToken reads after= (a control plane's next token, c2.TX.ID;
// "" is the start).
func readAuditToken(v string) (store.AuditPos, error) {
	if v == "" {
		return store.AuditPos{}, nil
	}
	bad := errdefs.Invalid("after", "want the next token of a control plane's page, got %.64q", v)
	rest, ok := strings.CutPrefix(v, auditTokenPrefix)
	txs, ids, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return store.AuditPos{}, bad
	}
	tx, err1 := strconv.ParseInt(txs, 10, 64)
	id, err2 := strconv.ParseInt(ids, 10, 64)
	if err1 != nil || err2 != nil || tx < 0 || id < 0 {
		return store.AuditPos{}, bad
	}
	return store.AuditPos{Tx: tx, ID: id}, nil
}

// toAuditEntry is e as its node hashed it.
func toAuditEntry(e store.AuditEntry) audit.Entry {
	return audit.Entry{Seq: e.Seq, Time: e.Time, Kind: e.Kind, SandboxID: e.SandboxID, Caller: e.Caller,
		Fields: e.Fields, PrevHash: e.PrevHash, Hash: e.Hash}
}

// auditVerify is GET /v1/audit/verify through a control plane: every
// node's chain as shipped, walked in the database.
func (s *Server) auditVerify(w http.ResponseWriter, r *http.Request) {
	nodes, err := s.st.AuditNodes(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	reps := map[string]apiv1.AuditReport{}
	for _, n := range nodes {
		rep, err := s.verifyNode(r.Context(), n)
		if err != nil {
			s.writeError(w, err)
			return
		}
		reps[n] = rep
	}
	writeJSON(w, http.StatusOK, sumAudit(reps))
}

// verifyNode walks node n's shipped chain.
func (s *Server) verifyNode(ctx context.Context, n string) (apiv1.AuditReport, error) {
	var v audit.Verifier
	if err := s.st.WalkAudit(ctx, n, func(e store.AuditEntry) error { v.Add(toAuditEntry(e)); return nil }); err != nil {
		return apiv1.AuditReport{}, err
	}
	b, entries, head := v.Result()
	rep := apiv1.AuditReport{OK: b == nil, Entries: entries, Head: head}
	if b != nil {
		rep.Broken = &apiv1.AuditBreak{Seq: b.Seq, Problem: b.Problem, Detail: b.Detail}
	}
	return rep, nil
}

// sumAudit is the cluster's report: each node's, their entries summed, OK
// when every node's chain verified whole; Broken is the first node's (by
// id) break, naming the node.
func sumAudit(reps map[string]apiv1.AuditReport) apiv1.AuditReport {
	out := apiv1.AuditReport{OK: true, Nodes: reps}
	ids := make([]string, 0, len(reps))
	for n, rep := range reps {
		ids = append(ids, n)
		out.Entries += rep.Entries
	}
	sort.Strings(ids)
	for _, n := range ids {
		if b := reps[n].Broken; b != nil {
			out.OK = false
			out.Broken = &apiv1.AuditBreak{Seq: b.Seq, Problem: b.Problem, Detail: "node " + n + ": " + b.Detail}
			break
		}
	}
	return out
}

// auditExport is GET /v1/audit/export through a control plane: each
// node's selected entries in its own order (nodes by id), each line the
// entry as stored with its node named; a line-by-line verify is per node.
// after= is refused: an export is not paged.
func (s *Server) auditExport(w http.ResponseWriter, r *http.Request) {
	f, err := s.auditFilter(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if f.After != (store.AuditPos{}) {
		s.writeError(w, errdefs.Invalid("after", "an export through a control plane is not paged"))
		return
	}
	nodes, err := s.st.AuditNodes(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for _, n := range nodes {
		if err := s.exportNode(r.Context(), n, f, enc); err != nil {
			// The status is sent; a cut stream is all the caller can see.
			s.log.WarnContext(r.Context(), "exporting a node's audit trail", "op", "cluster", "node", n, "err", err)
			return
		}
	}
}

// exportNode writes node n's entries f selects to enc.
func (s *Server) exportNode(ctx context.Context, n string, f store.AuditFilter, enc *json.Encoder) error {
	f.Node, f.AfterSeq, f.Limit = n, -1<<62, store.MaxAuditPage
	for {
		es, err := s.st.QueryAudit(ctx, f)
		if err != nil {
			return err
		}
		for _, e := range es {
			if err := enc.Encode(apiv1.NodeAuditEntry{Node: n, AuditEntry: apiv1.AuditEntry(toAuditEntry(e))}); err != nil {
				return fmt.Errorf("writing the export: %w", err)
			}
			f.AfterSeq = e.Seq
		}
		if len(es) < f.Limit {
			return nil
		}
	}
}
