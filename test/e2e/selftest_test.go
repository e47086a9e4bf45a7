package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSelftest runs `corral selftest --runtime all` against a fresh
// daemon: every case must be contained on both runtimes. Its table is the
// test's log.
func TestSelftest(t *testing.T) {
	// Not parallel: its cases time a neighbour beside a burner (the quiet phase runs it alone).
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	// The daemon's log, in a file the selftest searches for secrets.
	logPath := filepath.Join(t.TempDir(), "daemon.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() }) // after the daemon's teardown, registered later
	// On failure, the cases that were not contained, after the daemon's
	// log (cleanups run last registered first): a CI log's tail names them.
	var out, progress bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("selftest: not contained:\n%s", notContained(out.String()))
		}
	})
	d := startDaemonTee(t, logFile)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "selftest", "--runtime", "all", "--state-dir", d.state, "--daemon-log", logPath, "--envd", "http://"+d.envd)
	cmd.Env = append(os.Environ(), "CORRAL_URL=http://"+d.addr, "CORRAL_TOKEN="+d.token)
	cmd.Stdout, cmd.Stderr = &out, &progress
	err = cmd.Run()
	// The progress gives each case's time (shown with -v or on failure).
	t.Logf("corral selftest --runtime all:\n%s\nprogress:\n%s", out.String(), progress.String())
	if err != nil {
		t.Errorf("selftest: %v", err)
	}
	if !bytes.Contains(out.Bytes(), []byte("runtime gvisor")) || !bytes.Contains(out.Bytes(), []byte("runtime vm")) {
		t.Errorf("the report does not cover both runtimes")
	}
}

// notContained is the report's runtime headers and the rows of cases that
// were not contained.
func notContained(report string) string {
	var rows []string
	for _, l := range strings.Split(report, "\n") {
		f := strings.Fields(l)
		if len(f) > 1 && (f[0] == "runtime" || f[0] != "CASE" && f[1] != "contained") {
			rows = append(rows, l)
		}
	}
	return strings.Join(rows, "\n")
}
