package e2e

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTypeScriptSDK runs the TypeScript SDK's own tests (node --test over
// sdk/typescript/test, which need no npm install: the SDK has no
// dependencies) against a daemon it starts, handed over as CORRAL_URL and
// CORRAL_TOKEN; CORRAL_TS_VM adds the vm create and exec test when the
// guest kernel is installed. It fails with node's output. Then the
// example program examples/typescript/agent.mjs runs against the daemon.
// CORRAL_TS_TESTS (files under sdk/typescript) runs only those.
func TestTypeScriptSDK(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("needs node (>= 20) to run the TypeScript SDK's tests")
	}
	dir, err := filepath.Abs("../../sdk/typescript")
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	env := append(os.Environ(), "CORRAL_URL=http://"+d.addr, "CORRAL_TOKEN="+d.token, "NO_COLOR=1")
	if exists(vmKernel) {
		env = append(env, "CORRAL_TS_VM=1")
	}
	var out bytes.Buffer
	tests := strings.Fields(os.Getenv("CORRAL_TS_TESTS")) // for a developer's run of a few files
	if len(tests) == 0 {
		tests = []string{"test/"}
	}
	cmd := exec.CommandContext(ctx, node, append([]string{"--test", "--test-reporter=spec"}, tests...)...)
	var w io.Writer = &out
	if testing.Verbose() { // as it comes: a test that hangs shows where
		w = io.MultiWriter(&out, os.Stdout)
	}
	cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.Env = dir, w, w, env
	err = cmd.Run()
	if !testing.Verbose() {
		t.Logf("node --test:\n%s", out.String())
	}
	if err != nil {
		t.Fatalf("node --test sdk/typescript/test: %v (its output above)", err)
	}
	// The README's example program runs as written.
	ex := exec.CommandContext(ctx, node, "agent.mjs")
	ex.Dir, ex.Env = filepath.Join(dir, "..", "..", "examples", "typescript"), env
	exOut, err := ex.CombinedOutput()
	t.Logf("examples/typescript/agent.mjs:\n%s", exOut)
	if err != nil || !bytes.Contains(exOut, []byte(`stdout: {"answer": 42}`)) || !bytes.Contains(exOut, []byte("out.txt: done")) {
		t.Fatalf("examples/typescript/agent.mjs: %v (its output above)", err)
	}
}

// TestTypeScriptTypes checks the SDK's hand-written index.d.ts with tsc
// --strict against the usage sample sdk/typescript/typecheck/sample.ts
// (typescript and @types/node pinned there; the SDK itself has no
// dependencies). It needs no daemon.
func TestTypeScriptTypes(t *testing.T) {
	t.Parallel()
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("needs node and npm (tsc comes from npm)")
	}
	dir, err := filepath.Abs("../../sdk/typescript/typecheck")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := npmEnviron("NO_COLOR=1")
	npmCI(ctx, t, npm, dir, env)
	tsc := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "tsc"), "-p", ".")
	tsc.Dir, tsc.Env = dir, env
	if out, err := tsc.CombinedOutput(); err != nil {
		t.Fatalf("tsc --strict over index.d.ts and typecheck/sample.ts: %v\n%s", err, out)
	}
}
