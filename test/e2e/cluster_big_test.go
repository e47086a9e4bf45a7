package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
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

// bigCluster is TestClusterBig's cluster: three nodes, two controls.
type bigCluster struct {
	t     *testing.T
	token string
	names []string
	nodes map[string]*daemon
	caps  map[string]int // each node's --max-sandboxes
	a, b  *controlPlane
}

// bigCaps are the nodes' bounds on live sandboxes: they add up to the
// creates the test makes, so every create needs the cluster's admission
// to find the node that still has room.
var bigCaps = map[string]int{"b1": 45, "b2": 50, "b3": 55}

const bigCreates = 150

func startBigCluster(t *testing.T) *bigCluster {
	t.Helper()
	db := pgtest.Start(t)
	dir := t.TempDir()
	joinFile, tokenFile := filepath.Join(dir, "join"), filepath.Join(dir, "token")
	c := &bigCluster{t: t, token: "control-token-big-0123456789abcdef", names: []string{"b1", "b2", "b3"},
		nodes: map[string]*daemon{}, caps: bigCaps}
	if err := os.WriteFile(joinFile, []byte("join-token-big-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(c.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The database's URL from a file, as the Kubernetes manifests give it.
	dbFile := filepath.Join(dir, "cluster-db")
	if err := os.WriteFile(dbFile, []byte(db+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cluster := []string{"--cluster-db-file", dbFile, "--join-token-file", joinFile, "--node-lost-after", "4s"}
	for _, name := range c.names {
		// A later flag wins: each node's own bound over startClusterNode's.
		c.nodes[name] = startClusterNode(t, name, append(cluster, "--max-sandboxes", fmt.Sprint(c.caps[name])))
	}
	ctlArgs := append([]string{"--token-file", tokenFile}, cluster...)
	c.a, c.b = startControl(t, ctlArgs, c.token), startControl(t, ctlArgs, c.token)
	return c
}

// TestClusterBig is the must-show at its size: a real PostgreSQL,
// two control planes and three nodes, each a process of its own with its
// own state directory, nftables table, address pool and link prefix.
// 150 creates at once through both controls fill the three nodes exactly
// to their (different) bounds, and one more is refused; exec, files, a
// PTY and an exposed port work through either control for a sandbox on
// each node; a node killed with -9 is marked lost while creates keep
// succeeding on the others, and on its return nothing of its lost
// sandboxes is left on it; a control killed mid-exec leaves the other
// serving. Everything is removed at the end.
func TestClusterBig(t *testing.T) {
	// Not parallel: a hundred and fifty sandboxes, and heartbeats timed against a 4 s loss.
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	start := time.Now()
	c := startBigCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t.Logf("cluster up in %s", time.Since(start).Round(100*time.Millisecond))

	where := c.fill(ctx)
	c.checkPlacements(ctx, where)
	c.refusedWhenFull(ctx)
	for _, name := range c.names {
		c.reach(ctx, c.firstOn(where, name))
	}
	t.Logf("filled and reached in %s", time.Since(start).Round(100*time.Millisecond))

	c.loseNode(ctx, where, "b3")
	c.killControlMidExec(ctx, c.firstOn(where, "b1"))
	c.removeAll(ctx)
	t.Logf("whole test %s", time.Since(start).Round(100*time.Millisecond))
}

// fill makes bigCreates sandboxes at once, alternating the controls; it
// returns where each one runs, by the nodes' own lists.
func (c *bigCluster) fill(ctx context.Context) map[string]string {
	t := c.t
	start := time.Now()
	errs := make([]error, bigCreates)
	var wg sync.WaitGroup
	for i := range bigCreates {
		ctl := []*controlPlane{c.a, c.b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = ctl.client.Create(ctx, apiv1.CreateSandboxRequest{Timeout: 600, Expose: []apiv1.ExposedPort{{Port: 8000}}})
		}()
	}
	wg.Wait()
	failed := 0
	for i, err := range errs {
		if err != nil {
			failed++
			t.Errorf("create %d: %v", i, err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d creates through the controls failed", failed, bigCreates)
	}
	t.Logf("%d creates through two controls took %s", bigCreates, time.Since(start).Round(100*time.Millisecond))
	return c.where(ctx, c.names)
}

// where maps every live sandbox of nodes to its node by the nodes' own
// lists.
func (c *bigCluster) where(ctx context.Context, nodes []string) map[string]string {
	out := map[string]string{}
	for _, name := range nodes {
		own, err := c.nodes[name].client.List(ctx, "running")
		if err != nil {
			c.t.Fatalf("listing node %s: %v", name, err)
		}
		for _, sb := range own {
			out[sb.ID] = name
		}
	}
	return out
}

func (c *bigCluster) firstOn(where map[string]string, node string) string {
	for id, n := range where {
		if n == node {
			return id
		}
	}
	c.t.Fatalf("no sandbox runs on %s", node)
	return ""
}

func count(where map[string]string, node string) int {
	n := 0
	for _, w := range where {
		if w == node {
			n++
		}
	}
	return n
}

// checkPlacements: each node runs exactly its bound (they add up to the
// creates), and the cluster's placed counter of each node, as both
// controls read it, is the node's own count.
func (c *bigCluster) checkPlacements(ctx context.Context, where map[string]string) {
	t := c.t
	if len(where) != bigCreates {
		t.Fatalf("the nodes run %d sandboxes, want %d", len(where), bigCreates)
	}
	for _, ctl := range []*controlPlane{c.a, c.b} {
		nodes := ctl.nodes()
		for _, name := range c.names {
			own := count(where, name)
			if own > c.caps[name] {
				t.Errorf("node %s runs %d sandboxes, over its bound %d", name, own, c.caps[name])
			}
			if own != c.caps[name] {
				t.Errorf("node %s runs %d sandboxes, want its bound %d (the bounds add up to the creates)", name, own, c.caps[name])
			}
			if n := nodes[name]; n.Sandboxes != own || n.MaxSandboxes != c.caps[name] {
				t.Errorf("control %s says node %s has %d placed of %d, the node runs %d of %d", ctl.addr, name, n.Sandboxes, n.MaxSandboxes, own, c.caps[name])
			}
		}
	}
	c.pageThrough(ctx, where)
}

// pageThrough lists the sandboxes through a control in pages of 7: each
// sandbox of the three nodes comes once, in creation order.
func (c *bigCluster) pageThrough(ctx context.Context, where map[string]string) {
	t := c.t
	seen := map[string]bool{}
	var last apiv1.Sandbox
	o := corral.ListOptions{States: []string{"running"}, Limit: 7}
	for pages := 0; ; pages++ {
		page, err := c.b.client.ListPage(ctx, o)
		if err != nil {
			t.Fatalf("page %d through a control: %v", pages, err)
		}
		if len(page.Sandboxes) > 7 {
			t.Fatalf("page %d through a control has %d sandboxes, limit 7", pages, len(page.Sandboxes))
		}
		for _, sb := range page.Sandboxes {
			if seen[sb.ID] || where[sb.ID] == "" {
				t.Fatalf("page %d through a control: %s repeated or not running", pages, sb.ID)
			}
			if sb.CreatedAt.Before(last.CreatedAt) {
				t.Fatalf("page %d through a control: %s (%s) after %s (%s)", pages, sb.ID, sb.CreatedAt, last.ID, last.CreatedAt)
			}
			seen[sb.ID], last = true, sb
		}
		if page.Next == "" {
			break
		}
		o.Next = page.Next
	}
	if len(seen) != bigCreates {
		t.Fatalf("paging through a control gave %d sandboxes, want %d", len(seen), bigCreates)
	}
	_, err := c.a.client.ListPage(ctx, corral.ListOptions{Limit: 1001})
	var ce *corral.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusBadRequest || !strings.Contains(ce.Message, "limit") {
		t.Fatalf("a list through a control with limit 1001: %v, want 400 naming limit", err)
	}
}

// refusedWhenFull: with every node at its bound, the next create is
// refused by the cluster's admission.
func (c *bigCluster) refusedWhenFull(ctx context.Context) {
	_, err := c.a.client.Create(ctx, apiv1.CreateSandboxRequest{Timeout: 600})
	var ce *corral.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusTooManyRequests || !strings.Contains(ce.Message, "no ready node has room") {
		c.t.Fatalf("a create with every node full: %v, want 429 no ready node has room", err)
	}
}

// reach checks sandbox id through both controls: a file written through
// one reads back through the other, exec and a PTY answer, and its
// exposed port's server answers at the port URL of either control.
func (c *bigCluster) reach(ctx context.Context, id string) {
	t := c.t
	for i, ctl := range []*controlPlane{c.a, c.b} {
		other := []*controlPlane{c.b, c.a}[i]
		mark := fmt.Sprintf("%s-via-%d", id, i)
		if _, err := ctl.client.WriteFile(ctx, id, "/tmp/mark", strings.NewReader(mark), 0o644); err != nil {
			t.Fatalf("write to %s through %s: %v", id, ctl.addr, err)
		}
		rc, _, err := other.client.ReadFile(ctx, id, "/tmp/mark")
		if err != nil {
			t.Fatalf("read %s through %s: %v", id, other.addr, err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if string(got) != mark {
			t.Fatalf("%s through %s: read %q, want %q", id, other.addr, got, mark)
		}
		var out bytes.Buffer
		if res, err := ctl.client.Run(ctx, id, apiv1.ExecRequest{Cmd: []string{"cat", "/tmp/mark"}}, nil, &out, io.Discard); err != nil || res.ExitCode != 0 || out.String() != mark {
			t.Fatalf("exec in %s through %s: %q, %+v, %v", id, ctl.addr, out.String(), res, err)
		}
		var pty bytes.Buffer
		if _, err := ctl.client.Run(ctx, id, apiv1.ExecRequest{Cmd: []string{"tty"}, PTY: &apiv1.PTYSize{Cols: 80, Rows: 24}}, nil, &pty, io.Discard); err != nil ||
			!strings.Contains(pty.String(), "/dev/pts/") {
			t.Fatalf("a PTY in %s through %s: %q, %v", id, ctl.addr, pty.String(), err)
		}
	}
	viaCLI(t, c.a, c.token).mustCLI("exec", "-d", id, "--", "python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "/etc")
	for _, ctl := range []*controlPlane{c.a, c.b} {
		u, err := ctl.client.PortURL(ctx, id, 8000)
		if err != nil || !strings.HasPrefix(u, "http://"+ctl.addr+"/v1/sandboxes/"+id+"/ports/") {
			t.Fatalf("port URL of %s through %s: %q, %v", id, ctl.addr, u, err)
		}
		status, body := getOnceListening(t, u)
		if status != http.StatusOK || !strings.Contains(body, "hostname") {
			t.Fatalf("the exposed port of %s through %s: %d %.300s", id, u, status, body)
		}
	}
}

// loseNode kills node victim with -9: it is marked lost, its sandboxes
// answer so, and creates keep succeeding on the other nodes (room made
// on them first); back, it ends every sandbox the cluster gave up on and
// nothing of them is left on the host.
func (c *bigCluster) loseNode(ctx context.Context, where map[string]string, victim string) {
	t := c.t
	const room = 5
	var others []string
	for _, name := range c.names {
		if name != victim {
			others = append(others, name)
			c.removeSome(ctx, where, name, room)
		}
	}
	waitFor(t, 30*time.Second, "the removed sandboxes' room back", func() bool {
		nodes := c.b.nodes()
		for _, name := range others {
			if nodes[name].Sandboxes != c.caps[name]-room {
				return false
			}
		}
		return true
	})

	n := c.nodes[victim]
	n.kill9()
	killed := time.Now()
	var made []string
	create := func(i int) {
		ctl := []*controlPlane{c.a, c.b}[i%2]
		sb, err := ctl.client.Create(ctx, apiv1.CreateSandboxRequest{Timeout: 600})
		if err != nil {
			t.Fatalf("create %d with %s killed: %v", i, victim, err)
		}
		made = append(made, sb.ID)
	}
	// Creates while it is silent but not yet marked lost, then after.
	for i := range room {
		create(i)
	}
	waitFor(t, 30*time.Second, victim+" marked lost", func() bool { return c.b.nodes()[victim].State == "lost" })
	t.Logf("%s marked lost %s after its kill (bound 4 s)", victim, time.Since(killed).Round(100*time.Millisecond))
	for i := room; i < 2*room; i++ {
		create(i)
	}
	now := c.where(ctx, others)
	for _, id := range made {
		if w := now[id]; w == "" || w == victim {
			t.Errorf("sandbox %s made with %s lost runs on %q", id, victim, w)
		}
	}
	lostIDs := c.lostOf(ctx, where, victim)
	c.refusedWhenFull(ctx)

	n.start()
	back := time.Now()
	c.checkReaped(ctx, victim, lostIDs)
	t.Logf("%s's %d lost sandboxes ended %s after its restart answered", victim, len(lostIDs), time.Since(back).Round(100*time.Millisecond))
}

// removeSome terminates k sandboxes of node name through a control.
func (c *bigCluster) removeSome(ctx context.Context, where map[string]string, name string, k int) {
	for id, w := range where {
		if k == 0 {
			return
		}
		if w != name {
			continue
		}
		if _, err := c.a.client.Terminate(ctx, id); err != nil {
			c.t.Fatalf("terminate %s through a control: %v", id, err)
		}
		delete(where, id)
		k--
	}
}

// lostOf returns the sandboxes of node victim, checking that they answer
// through a control that they are lost.
func (c *bigCluster) lostOf(ctx context.Context, where map[string]string, victim string) []string {
	var ids []string
	for id, w := range where {
		if w == victim {
			ids = append(ids, id)
		}
	}
	for _, id := range ids[:3] {
		_, err := c.a.client.Get(ctx, id)
		var ce *corral.Error
		if !errors.As(err, &ce) || ce.Status != http.StatusConflict || !strings.Contains(ce.Message, "lost") {
			c.t.Fatalf("GET of %s on the lost node: %v, want 409 naming it lost", id, err)
		}
	}
	return ids
}

// checkReaped waits until node name, back, has ended every one of ids as
// lost and nothing of them is left on the host: no process naming its
// state directory but the daemon (runsc), no mount, sandbox directory,
// nftables object or address.
func (c *bigCluster) checkReaped(ctx context.Context, name string, ids []string) {
	t := c.t
	n := c.nodes[name]
	waitFor(t, 90*time.Second, name+"'s lost sandboxes ended on its return", func() bool {
		live, err := n.client.ListPage(ctx, corral.ListOptions{States: []string{"creating", "running", "paused", "terminating"}, Limit: 1})
		return err == nil && len(live.Sandboxes) == 0
	})
	for _, id := range ids {
		if sb, err := n.client.Get(ctx, id); err != nil || sb.State != "terminated" || sb.EndReason != "lost" {
			t.Fatalf("%s on %s after its return: %+v, %v; want terminated as lost", id, name, sb, err)
		}
	}
	// Processes being reaped get a moment.
	var left []string
	poll(30*time.Second, func() bool { left = n.hostLeftovers(); return len(left) == 0 })
	if len(left) > 0 {
		t.Fatalf("left on the host of %s after it ended its lost sandboxes:\n%s", name, strings.Join(left, "\n"))
	}
	if node := c.b.nodes()[name]; node.State != "ready" || node.Sandboxes != 0 {
		t.Fatalf("%s after its return: %+v, want ready with nothing placed", name, node)
	}
}

// killControlMidExec kills control a with -9 while an exec streams
// through it; the next call through b works.
func (c *bigCluster) killControlMidExec(ctx context.Context, id string) {
	t := c.t
	st, err := c.a.client.Exec(ctx, id, apiv1.ExecRequest{Cmd: []string{"sh", "-c", "echo started; sleep 60"}})
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
	_ = c.a.cmd.Process.Signal(syscall.SIGKILL)
	<-c.a.exited
	if _, err := st.Copy(io.Discard, io.Discard); err == nil {
		t.Fatal("an exec stream through a killed control plane ended cleanly")
	}
	st.Close()
	var out bytes.Buffer
	if res, err := c.b.client.Run(ctx, id, apiv1.ExecRequest{Cmd: []string{"echo", "still"}}, nil, &out, io.Discard); err != nil || res.ExitCode != 0 || out.String() != "still\n" {
		t.Fatalf("exec through b after a died: %q, %+v, %v", out.String(), res, err)
	}
}

// removeAll terminates every live sandbox through control b, several at
// once, and checks the cluster holds nothing placed.
func (c *bigCluster) removeAll(ctx context.Context) {
	t := c.t
	live, err := c.b.client.List(ctx, "running")
	if err != nil {
		t.Fatal(err)
	}
	ids := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				if _, err := c.b.client.Terminate(ctx, id); err != nil {
					t.Errorf("terminate %s: %v", id, err)
				}
			}
		}()
	}
	for _, sb := range live {
		ids <- sb.ID
	}
	close(ids)
	wg.Wait()
	waitFor(t, 30*time.Second, "nothing placed", func() bool {
		for _, n := range c.b.nodes() {
			if n.Sandboxes != 0 {
				return false
			}
		}
		return true
	})
}
