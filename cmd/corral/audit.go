package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"corral/internal/audit"
	"corral/pkg/apiv1"
	"corral/sdk/go/corral"

	"github.com/spf13/cobra"
)

func newAuditCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Read, export and verify the daemon's audit trail",
	}
	cmd.AddCommand(newAuditLogCmd(), newAuditExportCmd(), newAuditVerifyCmd())
	return cmd
}

// auditFlags are the selection flags log and export share.
func auditFlags(cmd *cobra.Command, q *corral.AuditQuery) {
	f := cmd.Flags()
	f.StringSliceVar(&q.Kinds, "kind", nil, "only entries of these kinds (repeatable or comma-separated): "+strings.Join(audit.Kinds, ", "))
	f.StringVar(&q.Since, "since", "", "only entries since this time (RFC 3339) or this long ago (24h)")
}

func newAuditLogCmd() *cobra.Command {
	var q corral.AuditQuery
	var asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "log [ID]",
		Short: "Print the audit trail, oldest first (of one sandbox with ID)",
		Args:  cobra.MaximumNArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			if len(args) == 1 {
				q.Sandbox = args[0]
			}
			return walkAudit(ctx, c, q, limit, func(e apiv1.AuditEntry) error {
				if asJSON {
					return json.NewEncoder(os.Stdout).Encode(e)
				}
				printAuditEntry(e)
				return nil
			})
		}),
	}
	auditFlags(cmd, &q)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each entry as a JSON line")
	cmd.Flags().IntVar(&limit, "limit", 0, "print at most this many entries (0: all)")
	return cmd
}

// walkAudit calls fn with the entries q selects, a page at a time, at most
// limit of them (0: all).
func walkAudit(ctx context.Context, c *corral.Client, q corral.AuditQuery, limit int, fn func(apiv1.AuditEntry) error) error {
	n := 0
	for {
		q.Limit = 1000
		if limit > 0 {
			q.Limit = min(1000, limit-n)
		}
		page, err := c.Audit(ctx, q)
		if err != nil {
			return err
		}
		for _, e := range page.Entries {
			if err := fn(e); err != nil {
				return err
			}
			n++
		}
		if page.Next == "" || limit > 0 && n >= limit {
			return nil
		}
		q.Next = page.Next // a daemon's or a control plane's position
	}
}

func printAuditEntry(e apiv1.AuditEntry) {
	var kv []string
	for k, v := range e.Fields {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	fmt.Fprintf(os.Stdout, "%6d  %s  %-15s %-20s %-18s %s\n", e.Seq, e.Time.Local().Format(time.RFC3339), e.Kind,
		or(e.SandboxID, "-"), or(e.Caller, "-"), strings.Join(kv, " "))
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func newAuditExportCmd() *cobra.Command {
	var q corral.AuditQuery
	cmd := &cobra.Command{
		Use:   "export [ID]",
		Short: "Write the audit trail (of one sandbox with ID) to stdout as JSON lines, exactly as stored",
		Args:  cobra.MaximumNArgs(1),
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			if len(args) == 1 {
				q.Sandbox = args[0]
			}
			body, err := c.AuditExport(ctx, q)
			if err != nil {
				return err
			}
			defer body.Close()
			_, err = io.Copy(os.Stdout, body)
			return err
		}),
	}
	auditFlags(cmd, &q)
	return cmd
}

func newAuditVerifyCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Walk the audit trail's hash chain; exit 1 naming the first entry edited, removed or reordered",
		Long: "Walk the audit trail's hash chain: the daemon's, or with --file a whole-trail export (corral audit export, " +
			"no selection; a control plane's is checked node by node) checked here without the daemon. Prints the entries walked and the last entry's hash (keep it: " +
			"a later verify whose trail no longer holds it shows a cut at the end); exits 1 naming the first entry that " +
			"does not verify.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var rep apiv1.AuditReport
			if file != "" {
				r, err := verifyFile(file)
				if err != nil {
					return err
				}
				rep = r
			} else {
				c, err := client()
				if err != nil {
					return err
				}
				ctx, cancel := cmdContext()
				defer cancel()
				r, err := c.AuditVerify(ctx)
				if err != nil {
					return err
				}
				rep = *r
			}
			if b := rep.Broken; b != nil {
				fmt.Fprintf(os.Stderr, "audit trail broken at entry %d: %s: %s (%d entries walked)\n", b.Seq, b.Problem, b.Detail, rep.Entries)
				return exitCode(1)
			}
			fmt.Fprintf(os.Stdout, "ok: %d entries, head %s\n", rep.Entries, or(rep.Head, "-"))
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "verify this export (JSON lines; - for stdin) instead of the daemon's trail")
	return cmd
}

// verifyFile verifies an export, in the order of its lines.
func verifyFile(path string) (apiv1.AuditReport, error) {
	in := io.Reader(os.Stdin)
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return apiv1.AuditReport{}, err
		}
		defer f.Close()
		in = f
	}
	// A control plane's export holds each node's chain in turn, each
	// line naming its node: one verifier per node ("" for a daemon's).
	vs := map[string]*audit.Verifier{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		var e apiv1.NodeAuditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return apiv1.AuditReport{}, fmt.Errorf("%s line %d: %w", path, line, err)
		}
		if vs[e.Node] == nil {
			vs[e.Node] = &audit.Verifier{}
		}
		vs[e.Node].Add(audit.Entry(e.AuditEntry))
	}
	if err := sc.Err(); err != nil {
		return apiv1.AuditReport{}, err
	}
	if len(vs) == 0 {
		return verifierReport(&audit.Verifier{}), nil
	}
	if only, ok := vs[""]; ok && len(vs) == 1 {
		return verifierReport(only), nil
	}
	nodes := make([]string, 0, len(vs))
	for n := range vs {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	rep := apiv1.AuditReport{OK: true, Nodes: map[string]apiv1.AuditReport{}}
	for _, n := range nodes {
		r := verifierReport(vs[n])
		rep.Nodes[n] = r
		rep.Entries += r.Entries
		if b := r.Broken; b != nil && rep.OK {
			rep.OK = false
			rep.Broken = &apiv1.AuditBreak{Seq: b.Seq, Problem: b.Problem, Detail: "node " + n + ": " + b.Detail}
		}
	}
	return rep, nil
}

// verifierReport is what v found.
func verifierReport(v *audit.Verifier) apiv1.AuditReport {
	b, n, head := v.Result()
	rep := apiv1.AuditReport{OK: b == nil, Entries: n, Head: head}
	if b != nil {
		rep.Broken = &apiv1.AuditBreak{Seq: b.Seq, Problem: b.Problem, Detail: b.Detail}
	}
	return rep
}
