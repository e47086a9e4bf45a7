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

// TestPythonSDK runs the Python SDK's unittest suite (sdk/python/tests)
// against a daemon of its own: CORRAL_URL and CORRAL_TOKEN name it, and
// the tests create their sandboxes there (gVisor; one on a QEMU guest).
// It fails with the suite's output.
func TestPythonSDK(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3 (the SDK's tests are a unittest suite)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	// CORRAL_PYTHON_TESTS narrows the suite to the test files matching a
	// pattern (e.g. "test_aio*.py"), for a developer's quicker run.
	pattern := os.Getenv("CORRAL_PYTHON_TESTS")
	if pattern == "" {
		pattern = "test*.py"
	}
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "discover", "-s", "sdk/python/tests", "-p", pattern, "-v")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CORRAL_URL=http://"+d.addr, "CORRAL_TOKEN="+d.token,
		"PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	// The suite's output also goes to stderr as it comes, so a run cut off
	// by a timeout still shows where it was.
	var buf bytes.Buffer
	cmd.Stdout = io.MultiWriter(&buf, os.Stderr)
	cmd.Stderr = cmd.Stdout
	err = cmd.Run()
	out := buf.Bytes()
	if err != nil {
		t.Fatalf("python3 -m unittest discover -s sdk/python/tests: %v\n%s\ndaemon log:\n%s", err, out, tail(d.log.String(), 8000))
	}
	// The README's example agent runs as a user would run it.
	ex := exec.CommandContext(ctx, py, "examples/python/agent.py")
	ex.Dir = root
	ex.Env = append(cmd.Env, "PYTHONPATH="+filepath.Join(root, "sdk/python"))
	out, err = ex.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "7 squared is 49") || !strings.Contains(string(out), "memory snapshot") {
		t.Fatalf("examples/python/agent.py: %v\n%s", err, out)
	}
	ex = exec.CommandContext(ctx, py, "examples/python/async_agent.py")
	ex.Dir, ex.Env = root, append(cmd.Env, "PYTHONPATH="+filepath.Join(root, "sdk/python"))
	if out, err = ex.CombinedOutput(); err != nil || !strings.Contains(string(out), "results: 8, 27, 64") {
		t.Fatalf("examples/python/async_agent.py: %v\n%s", err, out)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...\n" + s[len(s)-n:]
}
