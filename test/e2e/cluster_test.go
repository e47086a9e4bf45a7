package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"corral/internal/cluster/pgtest"
	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// controlPlane is one `corral serve --control` process.
type controlPlane struct {
	t      *testing.T
	addr   string
	envd   string // its envd face's address, when it serves one
	cmd    *exec.Cmd
	log    bytes.Buffer
	client *corral.Client
	token  string
	exited <-chan struct{}
}

func startControl(t *testing.T, args []string, token string) *controlPlane {
	t.Helper()
	c := &controlPlane{t: t, token: token}
	ready := filepath.Join(t.TempDir(), "ready")
	c.cmd = exec.Command(binary, append([]string{"serve", "--control", "--listen", "127.0.0.1:0", "--ready-file", ready, "--log-level", "debug"}, args...)...)
	c.cmd.Stdout, c.cmd.Stderr = &c.log, &c.log
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(exited) }()
	c.exited = exited
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		if t.Failed() {
			t.Logf("control plane %s log:\n%s", c.addr, c.log.String())
		}
	})
	r, err := waitReady(ready, exited, 30*time.Second)
	if err != nil {
		t.Fatalf("control plane did not come up: %v\n%s", err, c.log.String())
	}
	c.addr, c.envd = r.Listen, r.EnvdListen
	c.client = corral.New("http://"+c.addr, token)
	return c
}

func (c *controlPlane) nodes() map[string]apiv1.ClusterNode {
	c.t.Helper()
	ns, err := c.client.ClusterNodes(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	m := map[string]apiv1.ClusterNode{}
	for _, n := range ns {
		m[n.ID] = n
	}
	return m
}

// viaCLI runs the CLI against control plane c.
func viaCLI(t *testing.T, c *controlPlane, token string) *daemon {
	return &daemon{t: t, addr: c.addr, token: token}
}

// startClusterNode starts a node daemon on a fresh state dir, with a
// network of its own (nftables table, address pool, link prefix, log
// group) so two nodes share the host.
func startClusterNode(t *testing.T, name string, cluster []string) *daemon {
	t.Helper()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	// The node's address says port 0: the daemon registers the port it
	// bound. Its slot's network (table, pool, links, log group) is its
	// own, so nodes share the host.
	flags := []string{"--envd-listen", "", "--max-sandboxes", "3", "--node", "--node-name", name,
		"--node-address", "https://127.0.0.1:0", "--heartbeat", "500ms"}
	d := newDaemon(t, newStateDir(t), append(flags, cluster...)...)
	d.tls = true
	d.start()
	t.Cleanup(func() { d.teardown() })
	return d
}

// checkClusterUsage compares the usage report through control c (the
// records the nodes shipped to the database) with the nodes' own, once
// shipped: one group per runtime holding every node's sandboxes; and a
// bad grouping is a 400.
func checkClusterUsage(ctx context.Context, t *testing.T, c *controlPlane, nodes ...*daemon) {
	t.Helper()
	opts := corral.UsageOptions{From: time.Now().Add(-time.Hour), GroupBy: "runtime"}
	want := 0
	for _, n := range nodes {
		own, err := n.client.Usage(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range own.Groups {
			want += g.Sandboxes
		}
	}
	var rep *apiv1.UsageReport
	var err error
	waitFor(t, 30*time.Second, "the nodes' usage shipped", func() bool {
		rep, err = c.client.Usage(ctx, opts)
		return err != nil || len(rep.Groups) > 1 || len(rep.Groups) == 1 && rep.Groups[0].Sandboxes >= want
	})
	if err != nil || len(rep.Groups) != 1 || rep.Groups[0].Key != "gvisor" || rep.Groups[0].Sandboxes != want || want < 5 {
		t.Errorf("usage through a control: %+v, %v; want one gvisor group of the nodes' %d sandboxes", rep, err, want)
	}
	if _, err := c.client.Usage(ctx, corral.UsageOptions{GroupBy: "colour"}); err == nil || !strings.Contains(err.Error(), "group_by") {
		t.Errorf("a bad group_by through a control: %v, want a 400 naming group_by", err)
	}
}

// checkClusterAudit pages the audit trail through control c by 3 (what
// the nodes shipped to the database): every entry of every node's own
// trail once, naming its node; the CLI's log and verify through it work.
func checkClusterAudit(ctx context.Context, t *testing.T, c *controlPlane, token string, nodes ...*daemon) {
	t.Helper()
	want := 0
	for _, n := range nodes {
		page, err := n.client.Audit(ctx, corral.AuditQuery{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		want += len(page.Entries)
	}
	// What the nodes recorded reaches the database about a second later.
	var seen map[string]bool
	var byNode map[string]int
	waitFor(t, 30*time.Second, "the nodes' audit trails shipped", func() bool {
		seen, byNode = pageClusterAudit(ctx, t, c, token)
		return len(seen) >= want
	})
	if byNode["n1"] == 0 || byNode["n2"] == 0 {
		t.Errorf("audit through a control: %d entries %v, want the nodes' %d from both", len(seen), byNode, want)
	}
	cli := viaCLI(t, c, token)
	if out := cli.mustCLI("audit", "log", "--limit", "5"); strings.Count(out, "\n") != 5 {
		t.Errorf("corral audit log --limit 5 through a control:\n%s", out)
	}
	cli.mustCLI("audit", "verify")
}

// pageClusterAudit pages the trail through control c by 3: each entry
// once, naming its node.
func pageClusterAudit(ctx context.Context, t *testing.T, c *controlPlane, token string) (map[string]bool, map[string]int) {
	t.Helper()
	seen := map[string]bool{}
	byNode := map[string]int{}
	for after := ""; ; {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+c.addr+"/v1/audit?limit=3&after="+url.QueryEscape(after), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var page apiv1.NodeAuditPage
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(page.Entries) > 3 {
			t.Fatalf("audit page through a control: %d, %d entries, %v", resp.StatusCode, len(page.Entries), err)
		}
		for _, e := range page.Entries {
			k := fmt.Sprintf("%s/%d", e.Node, e.Seq)
			if seen[k] {
				t.Errorf("audit entry %s twice", k)
			}
			seen[k] = true
			byNode[e.Node]++
		}
		if page.Next == "" {
			return seen, byNode
		}
		after = page.Next
	}
}

// getOnceListening GETs u, an exposed port's URL, once a server listens
// there (it starts in the background), and returns the answer's status
// and body.
func getOnceListening(t *testing.T, u string) (int, string) {
	t.Helper()
	var status int
	var body string
	waitFor(t, 30*time.Second, "the port's server through "+u, func() bool {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		status, body = resp.StatusCode, string(b)
		return !(status == http.StatusBadRequest && strings.Contains(body, "nothing listens"))
	})
	return status, body
}

// testCluster is what every role of a test cluster is given: a
// throwaway PostgreSQL, the join token's file and the control planes'
// token file.
type testCluster struct {
	join, token, tokenFile string
	db                     string   // the database's connection string
	args                   []string // --cluster-db, --join-token-file, --node-lost-after
}

// newTestCluster starts the database and writes the files; nodes are
// lost after lostAfter silent.
func newTestCluster(t *testing.T, token, lostAfter string) testCluster {
	t.Helper()
	db := pgtest.Start(t)
	dir := t.TempDir()
	c := testCluster{join: "join-token-0123456789abcdef", token: token, tokenFile: filepath.Join(dir, "token"), db: db}
	joinFile := filepath.Join(dir, "join")
	for f, v := range map[string]string{joinFile: c.join, c.tokenFile: token} {
		if err := os.WriteFile(f, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c.args = []string{"--cluster-db", db, "--join-token-file", joinFile, "--node-lost-after", lostAfter}
	return c
}

// controlArgs are a control plane's flags: the token file, extra, and the
// cluster's.
func (c testCluster) controlArgs(extra ...string) []string {
	return append(append([]string{"--token-file", c.tokenFile}, extra...), c.args...)
}

// TestCluster: a real PostgreSQL, two nodes and two control planes on one
// host. Creates through both controls spread over both nodes; exec, files,
// a PTY, an exposed port and the CLI through a control reach the
// sandbox's node; creates at
// once through both controls at capacity never overcommit; a control killed
// mid-exec leaves the other serving; a node killed is marked lost (its
// sandboxes answer so, creates go elsewhere, their usage and audit
// entries are still listed from the database, where the chain verifies
// and an edited row is named), and when it returns it terminates what
// the cluster gave up.
func TestCluster(t *testing.T) {
	t.Parallel()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	tc := newTestCluster(t, "control-token-0123456789abcdef", "4s")
	token, cluster := tc.token, tc.args
	n1 := startClusterNode(t, "n1", cluster)
	n2 := startClusterNode(t, "n2", cluster)
	ctlArgs := tc.controlArgs()
	a, b := startControl(t, ctlArgs, token), startControl(t, ctlArgs, token)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The user token of a control opens no node, and a node's own token
	// opens no control.
	asControl := corral.New(n1.base(), token)
	asControl.HTTP = n1.httpClient()
	if _, err := asControl.List(ctx, ""); !isStatus(err, http.StatusUnauthorized) {
		t.Fatalf("a node accepted the control plane's user token: %v", err)
	}
	checkNodePlainHTTPRefused(t, n1)
	if _, err := corral.New("http://"+a.addr, n1.token).List(ctx, ""); err == nil {
		t.Fatal("a control plane accepted a node's token")
	}

	// Four creates, two through each control, spread two and two.
	where := map[string]*daemon{}
	var ids []string
	for i := range 4 {
		c := []*controlPlane{a, b}[i%2]
		sb, err := c.client.Create(ctx, apiv1.CreateSandboxRequest{Timeout: 300})
		if err != nil {
			t.Fatalf("create %d through %s: %v", i, c.addr, err)
		}
		ids = append(ids, sb.ID)
	}
	for _, n := range []*daemon{n1, n2} {
		own, err := n.client.List(ctx, "running")
		if err != nil {
			t.Fatal(err)
		}
		for _, sb := range own {
			where[sb.ID] = n
		}
		if len(own) != 2 {
			t.Errorf("node %s runs %d sandboxes, want 2 of the 4", n.addr, len(own))
		}
	}
	nodes := a.nodes()
	if nodes["n1"].Sandboxes != 2 || nodes["n2"].Sandboxes != 2 {
		t.Fatalf("placements %+v, want 2 on each node", nodes)
	}
	// Drained, n1 takes nothing new; undrained, it does again.
	if out := strings.TrimSpace(viaCLI(t, a, token).mustCLI("node", "drain", "n1")); out != "ready (draining)" {
		t.Fatalf("corral node drain n1: %q", out)
	}
	sb, err := b.client.Create(ctx, apiv1.CreateSandboxRequest{Timeout: 300})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n2.client.Get(ctx, sb.ID); err != nil {
		t.Fatalf("a create with n1 drained is not on n2: %v", err)
	}
	if _, err := a.client.Terminate(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	viaCLI(t, a, token).mustCLI("node", "undrain", "n1")
	running, err := b.client.List(ctx, "running")
	if err != nil || len(running) != 4 {
		t.Fatalf("list: %d sandboxes, %v; want 4", len(running), err)
	}
	checkListFollowsNode(ctx, t, b, where[ids[0]], ids[0])
	checkClusterUsage(ctx, t, a, n1, n2)
	checkClusterAudit(ctx, t, b, token, n1, n2)
	checkClusterMCP(ctx, t, a, token)

	// A file written through one control is read on the sandbox's own
	// node; exec and a PTY through the other see it.
	for _, id := range ids {
		mark := "on-" + id
		if _, err := a.client.WriteFile(ctx, id, "/tmp/mark", strings.NewReader(mark), 0o644); err != nil {
			t.Fatalf("write through a control: %v", err)
		}
		rc, _, err := where[id].client.ReadFile(ctx, id, "/tmp/mark")
		if err != nil {
			t.Fatalf("reading %s on its node: %v", id, err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if string(got) != mark {
			t.Fatalf("%s on its node: %q, want %q", id, got, mark)
		}
		var out bytes.Buffer
		res, err := b.client.Run(ctx, id, apiv1.ExecRequest{Cmd: []string{"cat", "/tmp/mark"}}, nil, &out, io.Discard)
		if err != nil || res.ExitCode != 0 || out.String() != mark {
			t.Fatalf("exec through a control: %q, %+v, %v", out.String(), res, err)
		}
	}
	var pty bytes.Buffer
	if _, err := b.client.Run(ctx, ids[0], apiv1.ExecRequest{Cmd: []string{"tty"}, PTY: &apiv1.PTYSize{Cols: 80, Rows: 24}}, nil, &pty, io.Discard); err != nil ||
		!strings.Contains(pty.String(), "/dev/pts/") {
		t.Fatalf("a PTY through a control: %q, %v", pty.String(), err)
	}

	// The CLI works through a control plane as through a daemon.
	cli := viaCLI(t, b, token)
	if out := cli.mustCLI("exec", ids[2], "--", "echo", "via-cli"); out != "via-cli\n" {
		t.Fatalf("corral exec through a control: %q", out)
	}
	if out := cli.mustCLI("ls"); !strings.Contains(out, ids[0]) || !strings.Contains(out, ids[3]) {
		t.Fatalf("corral ls through a control:\n%s", out)
	}
	if out := cli.mustCLI("node", "ls"); !strings.Contains(out, "n1") || !strings.Contains(out, "n2") || strings.Count(out, " ready ") != 2 {
		t.Fatalf("corral node ls through a control:\n%s", out)
	}
	if out := cli.mustCLI("run", "--", "echo", "run-via-cli"); out != "run-via-cli\n" {
		t.Fatalf("corral run through a control: %q", out)
	}

	// run's sandbox is removed without waiting (202): its room comes back
	// once its node no longer lists it.
	waitFor(t, 30*time.Second, "run's sandbox gone from the placements", func() bool {
		nodes := b.nodes()
		return nodes["n1"].Sandboxes == 2 && nodes["n2"].Sandboxes == 2
	})

	// Each node takes 3 (--max-sandboxes): one place is left on each.
	// Four creates at once through both controls take exactly those two,
	// and the other two are refused by the cluster's admission.
	var mu sync.Mutex
	var extra []string
	refused := 0
	var wg sync.WaitGroup
	for i := range 4 {
		c := []*controlPlane{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := c.client.Create(ctx, apiv1.CreateSandboxRequest{Timeout: 300})
			mu.Lock()
			defer mu.Unlock()
			var ce *corral.Error
			switch {
			case err == nil:
				extra = append(extra, sb.ID)
			case errors.As(err, &ce) && ce.Status == http.StatusTooManyRequests && strings.Contains(ce.Message, "no ready node has room"):
				refused++
			default:
				t.Errorf("a create at capacity: %v", err)
			}
		}()
	}
	wg.Wait()
	if len(extra) != 2 || refused != 2 {
		t.Fatalf("at capacity: %d created, %d refused; want 2 and 2", len(extra), refused)
	}
	if nodes := b.nodes(); nodes["n1"].Sandboxes != 3 || nodes["n2"].Sandboxes != 3 {
		t.Fatalf("placements at capacity %+v, want 3 on each node", nodes)
	}
	for _, id := range extra {
		if _, err := a.client.Terminate(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if nodes := b.nodes(); nodes["n1"].Sandboxes != 2 || nodes["n2"].Sandboxes != 2 {
		t.Fatalf("placements after removing the extra ones %+v, want 2 on each node", nodes)
	}

	// An exposed port answers through either control, with its port token.
	web := strings.TrimSpace(cli.mustCLI("create", "--expose", "8000"))
	cli.mustCLI("exec", "-d", web, "--", "python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "/etc")
	portURL := strings.TrimSpace(cli.mustCLI("url", web, "8000"))
	if !strings.HasPrefix(portURL, "http://"+b.addr+"/") || !strings.Contains(portURL, "corral_token=") {
		t.Fatalf("corral url through a control: %q", portURL)
	}
	for _, u := range []string{portURL, strings.Replace(portURL, b.addr, a.addr, 1)} {
		status, body := getOnceListening(t, u)
		if status != http.StatusOK || !strings.Contains(body, "hostname") {
			t.Fatalf("an exposed port through %s: %d %.300s", u, status, body)
		}
	}
	if _, err := b.client.Terminate(ctx, web); err != nil {
		t.Fatal(err)
	}

	// Control a dies mid-exec; b serves the same sandbox and creates.
	st, err := a.client.Exec(ctx, ids[1], apiv1.ExecRequest{Cmd: []string{"sh", "-c", "echo started; sleep 60"}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := st.Next()
		if err != nil {
			t.Fatalf("exec through a: %v", err)
		}
		if ev.Type == apiv1.EventStdout {
			break
		}
	}
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.exited
	if _, err := st.Copy(io.Discard, io.Discard); err == nil {
		t.Fatal("an exec stream through a killed control plane ended cleanly")
	}
	st.Close()
	var out bytes.Buffer
	if res, err := b.client.Run(ctx, ids[1], apiv1.ExecRequest{Cmd: []string{"echo", "still"}}, nil, &out, io.Discard); err != nil || res.ExitCode != 0 || out.String() != "still\n" {
		t.Fatalf("exec through b after a died: %q, %+v, %v", out.String(), res, err)
	}

	// n2 dies: b's leader job marks it lost, its sandboxes answer that
	// they are lost, and creates go to n1; their usage and audit entries,
	// shipped before, are still listed.
	var onN2s []string
	for _, id := range ids {
		if where[id] == n2 {
			onN2s = append(onN2s, id)
		}
	}
	waitFor(t, 30*time.Second, "n2's sandboxes' usage shipped", func() bool { return usageShipped(ctx, t, b, onN2s) })
	n2.kill9()
	killed := time.Now()
	waitFor(t, 30*time.Second, "n2 marked lost", func() bool { return b.nodes()["n2"].State == "lost" })
	t.Logf("n2 marked lost %s after its kill (bound 4 s)", time.Since(killed).Round(100*time.Millisecond))
	var onN2 string
	var lostIDs []string
	for _, id := range ids {
		if where[id] == n2 {
			onN2 = id
			lostIDs = append(lostIDs, id)
		}
	}
	checkListedLost(ctx, t, b, lostIDs)
	_, err = b.client.Get(ctx, onN2)
	var ce *corral.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusConflict || !strings.Contains(ce.Message, "lost") {
		t.Fatalf("GET of a sandbox on the lost node: %v, want 409 naming it lost", err)
	}
	checkLostNodeRecords(ctx, t, b, token, tc.db, "n2", onN2s)
	sb, err = b.client.Create(ctx, apiv1.CreateSandboxRequest{Timeout: 300})
	if err != nil {
		t.Fatalf("create with n2 lost: %v", err)
	}
	if _, err := n1.client.Get(ctx, sb.ID); err != nil {
		t.Fatalf("the create with n2 lost is not on n1: %v", err)
	}

	// n2 returns, with a new TLS key (its files deleted): it registers
	// the key's fingerprint, and terminates the sandboxes the cluster
	// gave up on.
	oldKey := rotateNodeKey(t, n2)
	n2.start()
	back := time.Now()
	waitFor(t, 60*time.Second, "n2's lost sandboxes terminated on its return", func() bool {
		for id, n := range where {
			if n != n2 {
				continue
			}
			sb, err := n2.client.Get(ctx, id)
			if err != nil || sb.State != "terminated" {
				return false
			}
		}
		return true
	})
	for id, n := range where {
		if n != n2 {
			continue
		}
		if sb, err := n2.client.Get(ctx, id); err != nil || sb.EndReason != "lost" {
			t.Errorf("%s on n2 after its return: %+v, %v; want ended as lost", id, sb, err)
		}
	}
	t.Logf("n2's 2 lost sandboxes terminated %s after its restart answered", time.Since(back).Round(100*time.Millisecond))
	var n2IDs []string
	for id, n := range where {
		if n == n2 {
			n2IDs = append(n2IDs, id)
		}
	}
	checkRotatedKey(ctx, t, b, token, "n2", n2, oldKey, n2IDs)
	if n := b.nodes()["n2"]; n.State != "ready" || n.Sandboxes != 0 {
		t.Fatalf("n2 after its return: %+v, want ready with nothing placed", n)
	}
}
