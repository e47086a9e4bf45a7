package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMCP runs the npm project test/mcp-js (the official TypeScript MCP
// client, pinned, under node --test) against `corral mcp`: over stdio (the
// client spawns the binary under test with CORRAL_URL and CORRAL_TOKEN) and
// over streamable HTTP: the daemon's /mcp, and a `corral mcp --http` this
// test starts. Each
// lists the tools, creates a sandbox, runs python3, writes and reads a
// file, times out a loop, bounds a huge output, checks tool errors and
// terminates; snapshots (memory and filesystem) and forks; every server
// bounds a sandbox's timeout at 30m (the daemon's by --mcp-max-timeout);
// over HTTP a bad token is refused with 401; a sandbox with a volume and
// a secret reads the volume's file and has the secret as env.
func TestMCP(t *testing.T) {
	t.Parallel()
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("needs node and npm (the MCP client's tests are an npm project)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("needs node")
	}
	proj, err := filepath.Abs("../mcp-js")
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "--mcp-max-timeout", "30m")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	env := npmEnviron("CORRAL_URL=http://"+d.addr, "CORRAL_TOKEN="+d.token, "CORRAL_BIN="+binary, "NO_COLOR=1")
	// A volume with a file and a secret for create_sandbox's volumes and
	// secrets (MCP has no tools to make them: the operator does).
	d.mustCLI("volume", "create", "mcpvol", "--size", "1")
	if _, errs, code := d.cli("from the volume\n", "volume", "put", "mcpvol", "-", "/seed.txt"); code != 0 {
		t.Fatalf("volume put: %s", errs)
	}
	secretVal := randomValue("mcp-")
	d.mustCLI("secret", "create", "mcpsec", "--from-literal", "MCP_TOKEN="+secretVal)
	env = append(env, "MCP_VOLUME=mcpvol", "MCP_SECRET=mcpsec", "MCP_SECRET_VALUE="+secretVal)
	npmCI(ctx, t, npm, proj, env)
	t.Run("stdio", func(t *testing.T) { nodeTest(ctx, t, node, proj, append(env, "MCP_TRANSPORT=stdio")) })
	t.Run("daemon-http", func(t *testing.T) {
		nodeTest(ctx, t, node, proj, append(env, "MCP_TRANSPORT=http", "MCP_HTTP_URL=http://"+d.addr+"/mcp"))
	})
	t.Run("standalone-http", func(t *testing.T) {
		url := startMCPHTTP(ctx, t, env)
		nodeTest(ctx, t, node, proj, append(env, "MCP_TRANSPORT=http", "MCP_HTTP_URL="+url))
	})
}

// nodeTest runs node --test in proj; it fails with node's output.
func nodeTest(ctx context.Context, t *testing.T, node, proj string, env []string) {
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "mcp.test.mjs")
	cmd.Dir, cmd.Env = proj, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// startMCPHTTP starts `corral mcp --http` on a free loopback port and
// returns its URL; it is stopped when the test ends.
func startMCPHTTP(ctx context.Context, t *testing.T, env []string) string {
	cmd := exec.CommandContext(ctx, binary, "mcp", "--http", "127.0.0.1:0", "--max-timeout", "30m")
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
			go func() { // keep draining its log (to stderr: it may outlive t)
				for sc.Scan() {
					fmt.Fprintln(os.Stderr, "corral mcp:", sc.Text())
				}
			}()
			return addr
		}
	}
	t.Fatalf("corral mcp --http ended without saying where it listens: %v", sc.Err())
	return ""
}
