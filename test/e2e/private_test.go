package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The must-show for secrets at rest: a real daemon, on a state dir
// an older version left open (0755, a 0644 database and log) and laid out
// as in production (runsc, the base rootfs and the guest kernel inside
// it), runs sandboxes of both runtimes with a secret in their env and an
// exposed port, a memory snapshot, and a restart. Then an unprivileged
// local user (nobody) can read no file, list no directory and reach no
// socket of the state dir, nor read the daemon's log; as root, neither
// the secret nor a port token is in the database's files, the log or the
// events; and the modes are private one by one.
func TestPrivateAtRest(t *testing.T) {
	t.Parallel()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	const secret = "sk-corral-e2e-5e3c7a91d2f04b68"
	state := olderStateDir(t)
	logDir, err := os.MkdirTemp("", "corral-e2e-log-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(logDir) })
	if err := os.Chmod(logDir, 0o755); err != nil { // as /var/log
		t.Fatal(err)
	}
	logFile := filepath.Join(logDir, "corral.log")
	if err := os.WriteFile(logFile, []byte("a line from before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inside := bindInto(t, state, map[string]string{"bin/runsc": runscBin, "rootfs/debian-bookworm": rootfs, "vm/kernel/current": vmKernel})
	d := newDaemon(t, state, "--runsc", inside["bin/runsc"],
		"--base-rootfs", inside["rootfs/debian-bookworm"], "--vm-kernel", inside["vm/kernel/current"], "--log-file", logFile)
	d.start()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("daemon log file:\n%s", b)
		}
		d.teardown()
	})

	tokens := map[string]string{}
	var ids []string
	for _, rt := range runtimes {
		id := d.create("--runtime", rt, "--env", "API_KEY="+secret, "--expose", "8080",
			"--entrypoint", `echo "key is $API_KEY"; exec python3 -m http.server 8080 --bind 127.0.0.1`)
		ids = append(ids, id)
		tokens[id] = portToken(t, d, id)
		if got := d.mustCLI("exec", id, "--", "sh", "-c", `echo "$API_KEY"`); got != secret+"\n" {
			t.Fatalf("%s: the env reads %q", id, got)
		}
		assertPortToken(t, d, id, tokens[id])
	}
	snap := strings.TrimSpace(d.mustCLI("snapshot", "mem", ids[0]))
	t.Cleanup(func() { d.cli("", "snapshot", "rm", snap) })

	// After a restart the env opens and the tokens are the same.
	d.stop()
	d.start()
	for _, id := range ids {
		if got := portToken(t, d, id); got != tokens[id] {
			t.Errorf("%s: the port token changed across a restart", id)
		}
		assertPortToken(t, d, id, tokens[id])
		if got := d.mustCLI("exec", id, "--", "sh", "-c", `echo "$API_KEY"`); got != secret+"\n" {
			t.Errorf("%s after a restart: the env reads %q", id, got)
		}
	}

	assertPrivateModes(t, state)
	readable := probeAsNobody(t, append(walkState(t, state), entry{'f', logFile}))
	for _, p := range readable {
		t.Errorf("nobody can reach %s", p)
	}
	needles := []string{secret}
	for _, tok := range tokens {
		needles = append(needles, tok)
	}
	for _, f := range []string{"corral.db", "corral.db-wal", "corral.db-shm"} {
		assertAbsent(t, filepath.Join(state, f), needles)
	}
	assertAbsent(t, logFile, needles)
	if b, _ := os.ReadFile(logFile); !bytes.HasPrefix(b, []byte("a line from before\n")) || !bytes.Contains(b, []byte("corral daemon serving")) {
		t.Errorf("the daemon did not append its log to %s", logFile)
	}
	for _, id := range ids {
		status, body := d.api("GET", "/v1/sandboxes/"+id+"/events", d.token, "")
		if status != http.StatusOK || !strings.Contains(body, "port_connection") {
			t.Fatalf("events of %s: %d %s", id, status, body)
		}
		for _, n := range needles {
			if strings.Contains(body, n) {
				t.Errorf("the events of %s hold a secret or a port token", id)
			}
		}
	}
}

// olderStateDir makes a state dir as an older version left it: 0755, a
// 0644 database (an empty file is an empty SQLite database) and a 0644
// entrypoint log in a 0755 logs dir.
func olderStateDir(t *testing.T) string {
	state := newStateDir(t)
	for _, d := range []string{"", "logs", "net/slots"} {
		if err := os.MkdirAll(filepath.Join(state, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(state, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"corral.db", "logs/sb-older.log"} {
		if err := os.WriteFile(filepath.Join(state, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return state
}

// portToken is the sandbox's port token as the API gives it.
func portToken(t *testing.T, d *daemon, id string) string {
	t.Helper()
	var sb struct {
		PortToken string `json:"port_token"`
	}
	if err := json.Unmarshal([]byte(d.mustCLI("inspect", id)), &sb); err != nil || len(sb.PortToken) < 32 {
		t.Fatalf("inspect %s: %q %v", id, sb.PortToken, err)
	}
	return sb.PortToken
}

// assertPortToken checks that token opens the sandbox's port 8080 and a
// wrong one does not.
func assertPortToken(t *testing.T, d *daemon, id, token string) {
	t.Helper()
	u := "http://" + d.addr + "/v1/sandboxes/" + id + "/ports/8080/"
	get := func(tok string) int {
		deadline := time.Now().Add(30 * time.Second)
		for {
			req, _ := http.NewRequest("GET", u, nil)
			req.Header.Set("X-Corral-Port-Token", tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusBadRequest && strings.Contains(string(b), "nothing listens") && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond) // the server is starting
				continue
			}
			return resp.StatusCode
		}
	}
	if status := get(token); status != http.StatusOK {
		t.Errorf("%s: its port token gets %d", id, status)
	}
	if status := get(strings.Repeat("0", len(token))); status != http.StatusUnauthorized {
		t.Errorf("%s: a wrong port token gets %d", id, status)
	}
}

// assertAbsent fails if the file at path (absent: nothing to check)
// holds any needle.
func assertAbsent(t *testing.T, path string, needles []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range needles {
		if bytes.Contains(b, []byte(n)) {
			t.Errorf("%s holds a secret or a port token (%d bytes in)", path, bytes.Index(b, []byte(n)))
		}
	}
}
