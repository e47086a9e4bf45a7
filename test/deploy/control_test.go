package deploy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/internal/cluster/pgtest"
)

// TestControlRunsAsTheManifestSays: the control plane, started with the
// Deployment's args as its container would be (user and group 65532, no
// capabilities, no new privileges, a read-only root, its tokens and the
// database's URL in files of root's readable by its group), migrates a real PostgreSQL and serves:
// /v1/health to the probes and /v1/cluster/nodes to a caller with the
// token. Only the paths (tokens in temporary directories) and the port
// (loopback, a free one) differ.
func TestControlRunsAsTheManifestSays(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("not root: cannot run the control plane as the manifest's user")
	}
	for _, tool := range []string{"setpriv", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	c := loadCluster(t)
	d := c.deployments[0]
	ct := d.Spec.Template.Spec.Containers[0]
	uid, gid := *d.Spec.Template.Spec.SecurityContext.RunAsUser, *d.Spec.Template.Spec.SecurityContext.FSGroup
	bin := corral(t)
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}

	db := pgtest.Start(t)
	// The socket's directory, the postgres user's, must let 65532 through.
	sock, _ := strings.CutPrefix(strings.Fields(db)[0], "host=")
	if err := os.Chmod(sock, 0o711); err != nil {
		t.Fatal(err)
	}

	// The Secrets' volumes: root's files in their defaultMode, group fsGroup.
	tokens, err := os.MkdirTemp("", "corral-deploy-tokens-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tokens) })
	if err := os.Chmod(tokens, 0o755); err != nil {
		t.Fatal(err)
	}
	remap := map[string]string{}
	for _, m := range ct.VolumeMounts {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			dir := filepath.Join(tokens, v.Name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			mode := os.FileMode(0o644) // Kubernetes' default
			if v.Secret.DefaultMode != nil {
				mode = os.FileMode(*v.Secret.DefaultMode)
			}
			for key := range c.secrets[v.Secret.SecretName].StringData {
				p := filepath.Join(dir, key)
				body := "test-token-" + v.Name + "-0123456789\n"
				if v.Secret.SecretName == "corral-cluster-db" {
					body = db + "\n" // the database's URL, read with --cluster-db-file
				}
				if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(p, 0, int(gid)); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(p, mode); err != nil {
					t.Fatal(err)
				}
			}
			remap[m.MountPath] = dir
		}
	}

	// The manifest's ports (8080, and the envd face's 49983, which an
	// installed daemon may hold on loopback) become free loopback ones.
	addr, envd := freeAddr(t), freeAddr(t)
	var args []string
	for _, a := range ct.Args {
		for from, to := range remap {
			a = strings.Replace(a, "="+from+"/", "="+to+"/", 1)
		}
		switch {
		case strings.HasPrefix(a, "--listen="):
			a = "--listen=" + addr
		case strings.HasPrefix(a, "--envd-listen="):
			a = "--envd-listen=" + envd
		}
		args = append(args, a)
	}

	// A mount namespace of its own whose root is read-only, then the
	// manifest's user with nothing else.
	priv := []string{"setpriv", fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", gid), "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", bin}
	script := `mount -o remount,bind,ro / || exit 1
		if touch /.corral-ro-probe 2>/dev/null; then rm -f /.corral-ro-probe; echo "/ is not read-only" >&2; exit 1; fi
		cd / && exec "$@"`
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", script, "sh"}, append(priv, args...)...)...)
	log, err := os.Create(filepath.Join(t.TempDir(), "control.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("the control plane's log:\n%s", b)
		}
	})

	get := func(path, token string) (int, error) {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		if code, err := get("/v1/health", ""); err == nil && code == 200 {
			break
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the control plane exited: %v", err)
		case <-ctx.Done():
			t.Fatal("no healthy control plane within a minute")
		case <-time.After(50 * time.Millisecond):
		}
	}
	token := "test-token-api-token-0123456789"
	if code, err := get("/v1/cluster/nodes", token); err != nil || code != 200 {
		t.Errorf("GET /v1/cluster/nodes with the token: %d %v", code, err)
	}
	if code, err := get("/v1/cluster/nodes", ""); err != nil || code != 401 {
		t.Errorf("GET /v1/cluster/nodes without a token: %d %v, want 401", code, err)
	}
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
