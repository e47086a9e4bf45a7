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

// readmeBlock returns the first ```sh block of the README section titled
// heading.
func readmeBlock(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## "+heading+"\n")
	if !ok {
		t.Fatalf("README has no section %q", heading)
	}
	_, block, ok := strings.Cut(sec, "```sh\n")
	if !ok {
		t.Fatalf("README section %q has no sh block", heading)
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatalf("README section %q: unterminated sh block", heading)
	}
	return block
}

// The README's "Your first hour", run as written with the built corral
// against a test daemon (gVisor, the default runtime): a wheel built and
// installed from a local index over HTTPS behind a custom CA, 1 GiB into
// /tmp with 512 MiB of memory, and a program that outgrows its memory.
func TestAdopterWalkthrough(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("the walkthrough makes its demo CA with openssl, which is not installed")
	}
	d := startDaemon(t)
	script := readmeBlock(t, "Your first hour")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(binary)+":"+os.Getenv("PATH"),
		"CORRAL_URL=http://"+d.addr, "CORRAL_TOKEN="+d.token)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	if err != nil {
		t.Fatalf("the walkthrough failed: %v", err)
	}
	// What the README says it prints, in order.
	want := []string{"200\n", "hi from a local index\n", "1024\t/tmp/big\n", "ended: exit 137\n"}
	rest := out.String()
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("the walkthrough did not print %q (in order); stdout:\n%s", w, out.String())
		}
		rest = rest[i+len(w):]
	}
	// The program is killed for memory, and that is said, as the README
	// says.
	if e := errb.String(); !strings.Contains(e, "killed: out of memory (the sandbox's memory limit is 128 MiB)") {
		t.Errorf("the walkthrough's OOM is not named as one; stderr:\n%s", e)
	}
}
