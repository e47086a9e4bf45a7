package runtimetest

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"corral/internal/agentapi"
	"corral/internal/runtime"
)

// testExportChanges: what a sandbox changed comes back as an OCI layer: new
// files with their content, deletions as whiteouts, a replaced directory as
// opaque, and nothing of what the agent writes at start. The sandbox keeps
// running.
func testExportChanges(t *testing.T, e Env) {
	ex, ok := e.Runtime.(runtime.ChangeExporter)
	if !ok {
		t.Fatalf("runtime %s cannot export a sandbox's changes", e.Runtime.Name())
	}
	s := start(t, e, runtime.Resources{MemoryLimitMB: 512})
	script := `set -e
mkdir -p /opt/new && echo content > /opt/new/file && ln -s file /opt/new/link
rm /etc/debian_version
rm -rf /usr/share/doc && mkdir /usr/share/doc && echo x > /usr/share/doc/only`
	if got := run(t, s, agentapi.StartRequest{Args: []string{"/bin/sh", "-c", script}}, ""); got.code != 0 {
		t.Fatalf("changing the sandbox: %+v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var buf bytes.Buffer
	if _, err := ex.ExportChanges(ctx, s.ref, s.client, &buf); err != nil {
		t.Fatal(err)
	}
	entries := map[string]string{}
	tr := tar.NewReader(&buf)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		entries[hdr.Name] = string(hdr.Typeflag) + ":" + hdr.Linkname + string(b)
	}
	want := map[string]string{
		"opt/new/file":               "0:content\n",
		"opt/new/link":               "2:file",
		"etc/.wh.debian_version":     "0:",
		"usr/share/doc/.wh..wh..opq": "0:",
		"usr/share/doc/only":         "0:x\n",
	}
	for name, v := range want {
		if entries[name] != v {
			t.Errorf("entry %s = %q, want %q", name, entries[name], v)
		}
	}
	for name := range entries {
		if slices.Contains([]string{"etc/resolv.conf", "etc/.resolv.conf.corral", "etc/.wh..resolv.conf.corral"}, name) {
			t.Errorf("the export holds %s, which the agent writes", name)
		}
	}
	if got := run(t, s, agentapi.StartRequest{Args: []string{"cat", "/opt/new/file"}}, ""); got.stdout != "content\n" {
		t.Errorf("the sandbox lost its state after the export: %+v", got)
	}
}
