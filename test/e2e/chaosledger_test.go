package e2e

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"corral/pkg/apiv1"
)

// chaos is one chaos run: the daemon, the random source, and the ledger
// of what the daemon acknowledged.
type chaos struct {
	t       *testing.T
	d       *daemon
	runtime string // of the sandboxes it creates
	seed    uint64
	rng     *rand.Rand
	n       int // makes names unique

	boxes  []*chaosBox // acknowledged sandboxes, oldest first
	snaps  []*chaosSnap
	images []*chaosImage
	tgt    *chaosBox       // the sandbox the next pause, snapshot or fork works on
	seen   map[string]bool // every sandbox any list showed, for the leak check

	typical       map[string]time.Duration // per op, measured without a kill
	inside, after map[string]int           // kills inside an op, and after its answer
	prevLog       string                   // the daemon's log before the last restart
}

// chaosBox is an acknowledged sandbox.
type chaosBox struct {
	id, env string
	mark    string // what /root/chaos holds once written ("" before)
	paused  bool   // an acknowledged pause: it must be paused after the restart
}

// chaosSnap is an acknowledged memory snapshot.
type chaosSnap struct {
	id, name, mark string
	restored       bool // a copy started from it after a restart
}

// chaosImage is an acknowledged image build.
type chaosImage struct {
	tag, nonce string
	started    bool // a sandbox started from it after a restart
}

// How much of the ledger is kept (and checked after every restart) once
// it has been checked after a restart: the oldest go beyond this.
const (
	chaosKeepSandboxes = 4
	chaosKeepSnapshots = 2
	chaosKeepImages    = 2
)

func (c *chaos) next() int { c.n++; return c.n }

// prepare gives a pause, snapshot or fork its target: a running sandbox
// of the ledger with a file written, created first if there is none.
func (c *chaos) prepare(op chaosOp) {
	c.t.Helper()
	if op.name == "create" || op.name == "build" {
		return
	}
	var cands []*chaosBox
	for _, b := range c.boxes {
		if b.mark != "" {
			cands = append(cands, b)
		}
	}
	if len(cands) == 0 {
		ctx, cancel := chaosCtx()
		defer cancel()
		ack, err := c.opCreate(ctx)
		if err != nil {
			c.t.Fatalf("creating a sandbox to %s: %v", op.name, err)
		}
		ack()
		c.checkBox(ctx, c.boxes[len(c.boxes)-1])
		cands = c.boxes[len(c.boxes)-1:]
	}
	c.tgt = cands[c.rng.IntN(len(cands))]
}

func (c *chaos) target() *chaosBox { return c.tgt }

// settle checks the restarted daemon against the ledger, then trims the
// ledger and removes what no acknowledged call made.
func (c *chaos) settle() {
	c.t.Helper()
	ctx, cancel := chaosCtx()
	defer cancel()
	list, err := c.d.client.List(ctx, "")
	if err != nil {
		c.t.Fatalf("listing: %v", err)
	}
	byID := map[string]apiv1.Sandbox{}
	for _, sb := range list {
		c.seen[sb.ID] = true
		byID[sb.ID] = sb
		c.checkRecord(sb)
	}
	ledger := map[string]bool{}
	for _, b := range c.boxes {
		ledger[b.id] = true
		c.checkAcked(ctx, b, byID)
	}
	for _, sb := range list {
		if !ledger[sb.ID] && (sb.State == "running" || sb.State == "paused") {
			c.checkUnacked(ctx, sb)
		}
	}
	c.checkSnapshots(ctx)
	c.checkImages(ctx)
	c.trim(ctx)
}

// checkRecord fails a record that is neither live nor ended with a reason.
func (c *chaos) checkRecord(sb apiv1.Sandbox) {
	switch sb.State {
	case "running", "paused":
	case "terminated", "failed":
		if sb.EndReason == "" && sb.Error == "" {
			c.t.Errorf("%s is %s without a reason", sb.ID, sb.State)
		}
	default:
		c.t.Errorf("%s is left %s after the restart: a half-done record", sb.ID, sb.State)
	}
}

// checkAcked fails an acknowledged sandbox that is gone, not as
// acknowledged, or without its env and file.
func (c *chaos) checkAcked(ctx context.Context, b *chaosBox, byID map[string]apiv1.Sandbox) {
	sb, ok := byID[b.id]
	switch {
	case !ok:
		c.t.Errorf("acknowledged sandbox %s is gone", b.id)
		return
	case sb.State == "paused":
		if _, err := c.d.client.Resume(ctx, b.id); err != nil {
			c.t.Errorf("resuming %s: %v", b.id, err)
			return
		}
	case b.paused:
		c.t.Errorf("the acknowledged pause of %s is lost: it is %s (%s %s)", b.id, sb.State, sb.EndReason, sb.Error)
		return
	case sb.State != "running":
		c.t.Errorf("acknowledged sandbox %s is %s (%s %s)", b.id, sb.State, sb.EndReason, sb.Error)
		return
	}
	b.paused = false
	c.checkBox(ctx, b)
}

// checkBox reads a ledger sandbox's env and file, writing the file first
// if it has none yet.
func (c *chaos) checkBox(ctx context.Context, b *chaosBox) {
	c.t.Helper()
	if b.mark == "" {
		b.mark = "mark-" + b.id
		if out, err := c.exec(ctx, b.id, "echo "+b.mark+" > /root/chaos"); err != nil {
			c.t.Errorf("writing into %s: %v %q", b.id, err, out)
		}
	}
	out, err := c.exec(ctx, b.id, `echo "$CHAOS"; cat /root/chaos`)
	if want := b.env + "\n" + b.mark + "\n"; err != nil || out != want {
		c.t.Errorf("acknowledged sandbox %s reads %q (%v), want %q", b.id, out, err, want)
	}
}

// checkUnacked checks a live sandbox no acknowledged call made (a create
// or fork answered by the daemon the kill ended) works, then removes it. A
// build's sandbox must not outlive its build.
func (c *chaos) checkUnacked(ctx context.Context, sb apiv1.Sandbox) {
	c.t.Helper()
	if sb.Tags["corral.build/step"] != "" {
		c.t.Errorf("build sandbox %s outlived its build: it is %s", sb.ID, sb.State)
	}
	if sb.State == "paused" {
		if _, err := c.d.client.Resume(ctx, sb.ID); err != nil {
			c.t.Errorf("resuming %s: %v", sb.ID, err)
		}
	}
	if out, err := c.exec(ctx, sb.ID, "echo ok"); err != nil || out != "ok\n" {
		c.t.Errorf("%s is %s but does not work: %q %v", sb.ID, sb.State, out, err)
	}
	c.remove(ctx, sb.ID)
}

// checkSnapshots fails an acknowledged snapshot that is gone or does not
// restore; a snapshot no acknowledged call made must restore too (it is
// then removed), and a fork's own snapshot must not outlive the fork.
func (c *chaos) checkSnapshots(ctx context.Context) {
	c.t.Helper()
	list, err := c.d.client.Snapshots(ctx)
	if err != nil {
		c.t.Fatalf("listing snapshots: %v", err)
	}
	listed := map[string]apiv1.Snapshot{}
	for _, sn := range list {
		listed[sn.ID] = sn
	}
	for _, s := range c.snaps {
		if _, ok := listed[s.id]; !ok {
			c.t.Errorf("acknowledged snapshot %s (%s) is gone", s.id, s.name)
			continue
		}
		delete(listed, s.id)
		if !s.restored {
			c.restores(ctx, s.id, s.mark)
			s.restored = true
		}
	}
	for _, sn := range listed {
		if sn.Name == "" {
			c.t.Errorf("the unnamed snapshot %s of %s (a fork's) outlived its fork", sn.ID, sn.SandboxID)
		} else {
			c.restores(ctx, sn.ID, c.markOf(sn.SandboxID))
		}
		if _, err := c.d.client.RemoveSnapshot(ctx, sn.ID); err != nil {
			c.t.Errorf("removing snapshot %s: %v", sn.ID, err)
		}
	}
}

// markOf is what sandbox id's file holds: its ledger mark (a fork's copy
// holds its parent's), else the mark checkBox writes.
func (c *chaos) markOf(id string) string {
	for _, b := range c.boxes {
		if b.id == id && b.mark != "" {
			return b.mark
		}
	}
	return "mark-" + id
}

// restores starts a copy of a snapshot and reads its file.
func (c *chaos) restores(ctx context.Context, snap, mark string) {
	c.t.Helper()
	sb, err := c.d.client.Create(ctx, apiv1.CreateSandboxRequest{FromSnapshot: snap})
	if err != nil {
		c.t.Errorf("snapshot %s does not restore: %v", snap, err)
		return
	}
	c.seen[sb.ID] = true
	if out, err := c.exec(ctx, sb.ID, "cat /root/chaos"); err != nil || out != mark+"\n" {
		c.t.Errorf("a copy of snapshot %s reads %q (%v), want %q", snap, out, err, mark)
	}
	c.remove(ctx, sb.ID)
}

// checkImages fails an acknowledged image that is gone or does not start
// with its file; an image no acknowledged build made must start too (it is
// then removed).
func (c *chaos) checkImages(ctx context.Context) {
	c.t.Helper()
	imgs, err := c.d.client.Images(ctx)
	if err != nil {
		c.t.Fatalf("listing images: %v", err)
	}
	tagged := map[string]bool{}
	for _, img := range imgs {
		for _, tag := range img.Tags {
			if strings.HasPrefix(tag, "chaos/") {
				tagged[tag] = true
			}
		}
	}
	for _, im := range c.images {
		if !tagged[im.tag] {
			c.t.Errorf("acknowledged image %s is gone", im.tag)
			continue
		}
		delete(tagged, im.tag)
		if !im.started {
			c.starts(ctx, im.tag, im.nonce)
			im.started = true
		}
	}
	for tag := range tagged {
		c.starts(ctx, tag, "")
		if err := c.d.client.RemoveImage(ctx, tag); err != nil {
			c.t.Errorf("removing image %s: %v", tag, err)
		}
	}
}

// starts starts a sandbox of an image and reads the file its build wrote
// (any content when nonce is "").
func (c *chaos) starts(ctx context.Context, tag, nonce string) {
	c.t.Helper()
	sb, err := c.d.client.Create(ctx, apiv1.CreateSandboxRequest{Image: tag})
	if err != nil {
		c.t.Errorf("image %s does not start: %v", tag, err)
		return
	}
	c.seen[sb.ID] = true
	out, err := c.exec(ctx, sb.ID, "cat /chaos-build")
	if err != nil || (nonce != "" && out != nonce+"\n") || !strings.HasPrefix(out, "built-") {
		c.t.Errorf("a sandbox of image %s reads %q (%v), want %q", tag, out, err, nonce)
	}
	c.remove(ctx, sb.ID)
}

// trim removes the oldest of the ledger beyond what is kept.
func (c *chaos) trim(ctx context.Context) {
	c.t.Helper()
	for len(c.boxes) > chaosKeepSandboxes {
		c.remove(ctx, c.boxes[0].id)
		c.boxes = c.boxes[1:]
	}
	for len(c.snaps) > chaosKeepSnapshots {
		if _, err := c.d.client.RemoveSnapshot(ctx, c.snaps[0].id); err != nil {
			c.t.Errorf("removing snapshot %s: %v", c.snaps[0].id, err)
		}
		c.snaps = c.snaps[1:]
	}
	for len(c.images) > chaosKeepImages {
		if err := c.d.client.RemoveImage(ctx, c.images[0].tag); err != nil {
			c.t.Errorf("removing image %s: %v", c.images[0].tag, err)
		}
		c.images = c.images[1:]
	}
}

// remove terminates a sandbox and checks it ended.
func (c *chaos) remove(ctx context.Context, id string) {
	c.t.Helper()
	sb, err := c.d.client.Terminate(ctx, id)
	if err != nil || sb.State != "terminated" {
		c.t.Errorf("removing %s: %v", id, err)
	}
}

// exec runs a shell script in a sandbox and returns its stdout; a non-zero
// exit is an error carrying stderr.
func (c *chaos) exec(ctx context.Context, id, script string) (string, error) {
	var out, errb bytes.Buffer
	res, err := c.d.client.Run(ctx, id, apiv1.ExecRequest{Cmd: []string{"sh", "-c", script}}, nil, &out, &errb)
	if err == nil && res.ExitCode != 0 {
		err = &execError{res.ExitCode, errb.String()}
	}
	return out.String(), err
}

type execError struct {
	code   int
	stderr string
}

func (e *execError) Error() string { return "exit " + strconv.Itoa(e.code) + ": " + e.stderr }

// finish removes everything and checks nothing is left on the host.
func (c *chaos) finish() {
	c.t.Helper()
	ctx, cancel := chaosCtx()
	defer cancel()
	for _, b := range c.boxes {
		c.remove(ctx, b.id)
	}
	c.boxes = nil
	for _, s := range c.snaps {
		if _, err := c.d.client.RemoveSnapshot(ctx, s.id); err != nil {
			c.t.Errorf("removing snapshot %s: %v", s.id, err)
		}
	}
	for _, im := range c.images {
		if err := c.d.client.RemoveImage(ctx, im.tag); err != nil {
			c.t.Errorf("removing image %s: %v", im.tag, err)
		}
	}
	if _, err := c.d.client.PruneImages(ctx); err != nil {
		c.t.Errorf("pruning images: %v", err)
	}
	list, err := c.d.client.List(ctx, "")
	if err != nil {
		c.t.Fatal(err)
	}
	for _, sb := range list {
		c.seen[sb.ID] = true
		if sb.State == "running" || sb.State == "paused" {
			c.t.Errorf("%s is still %s", sb.ID, sb.State)
		}
	}
	var ids []string
	for id := range c.seen {
		ids = append(ids, id)
	}
	c.d.assertHostClean(c.t, ids)
}
