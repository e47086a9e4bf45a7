package manager

import (
	"context"
	"io"
	"strings"
	"testing"

	"corral/internal/agentapi"
	"corral/internal/sandbox"
)

// A write with extended attributes keeps them with an agent of protocol 4
// and, in a sandbox whose agent is older (an image or snapshot frozen
// before them), still writes the file, without them, and says so.
func TestWriteWithXattrs(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	set := &agentapi.XattrSet{Prefix: "user.e2b.", Values: map[string]string{"k": "v"}}
	opt := agentapi.WriteOptions{InPlace: true, Xattrs: set}

	sb := e.create(sandbox.Spec{})
	info, err := e.m.Files().WriteWith(ctx, sb.ID, "/root/f", strings.NewReader("new"), 0, "", opt)
	if err != nil {
		t.Fatal(err)
	}
	if info.XattrsUnsupported || info.Xattrs["k"] != "v" {
		t.Errorf("a protocol 4 agent answered %v", info.Xattrs)
	}

	e.rt.AgentProtocols(1, 2, 3)
	old := e.create(sandbox.Spec{})
	info, err = e.m.Files().WriteWith(ctx, old.ID, "/root/f", strings.NewReader("old"), 0, "", opt)
	if err != nil || !info.XattrsUnsupported || len(info.Xattrs) != 0 {
		t.Fatalf("a protocol 3 agent: %+v %v; want the file written, the attributes reported unsupported", info, err)
	}
	body, _, err := e.m.Files().Read(ctx, old.ID, "/root/f", "")
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	if b, _ := io.ReadAll(body); string(b) != "old" {
		t.Errorf("the file reads %q", b)
	}
}
