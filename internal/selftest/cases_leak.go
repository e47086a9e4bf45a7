package selftest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"corral/internal/selftest/probe"
)

func secretOf(name, value string) probe.Secret {
	h := sha256.Sum256([]byte(value))
	return probe.Secret{Name: name, SHA256: hex.EncodeToString(h[:]), Len: len(value)}
}

// secrets are what no sandbox and no other local user may read: the API
// token, the attacker's port token, and the secret in its env (its own
// to read, nobody else's).
func (s *session) secrets(withCanary bool) []probe.Secret {
	out := []probe.Secret{secretOf("the API token", s.c.Token)}
	if t := s.a.rec.PortToken; t != "" {
		out = append(out, secretOf("the attacker's port token", t))
	}
	if withCanary {
		out = append(out, secretOf("the secret in the attacker's env", s.canary))
	}
	return out
}

func leakTokensInside(ctx context.Context, s *session) Result {
	tried := "search every process's env and command line, and every file up to 1 MiB outside /usr, for the API token and the sandbox's port token (by hash)"
	var r probe.TokensResult
	// Everything but /usr (the image's programs): what the daemon or the
	// agent could leave behind lives in these.
	roots := []string{"/etc", "/root", "/home", "/tmp", "/var", "/run", "/opt", "/srv", "/mnt", "/.corral"}
	args := probe.TokensArgs{Secrets: s.secrets(false), Roots: roots, MaxFileBytes: 1 << 20, MaxFiles: 150000}
	if err := s.probeFor(ctx, s.a, "tokens", args, &r, 5*time.Minute); err != nil {
		return inconclusive(tried, err)
	}
	return verdict(len(r.Found) == 0, tried, "scanned the processes and %d files; found %d (%s)", r.ScannedFiles, len(r.Found), joinMax(r.Found, 3))
}

// atRestSkips are the state-dir trees that hold sandboxes' own data
// (images, writable layers, memory snapshots: a sandbox's memory holds its
// env by design) rather than the daemon's records.
var atRestSkips = []string{"images", "rootfs", "bin", "vm", "snapshots", "runsc"}

func leakSecretAtRest(ctx context.Context, s *session) Result {
	tried := "look for the attacker's env secret and its port token in plain text in the daemon's records, logs and state files, and in its events"
	needles := map[string]string{"env secret": s.canary}
	if t := s.a.rec.PortToken; t != "" {
		needles["port token"] = t
	}
	var found []string
	files := 0
	scan := func(p string) {
		b, err := os.ReadFile(p)
		if err != nil {
			return
		}
		files++
		for name, v := range needles {
			if bytes.Contains(b, []byte(v)) {
				found = append(found, name+" in "+p)
			}
		}
	}
	_ = filepath.WalkDir(s.cfg.StateDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(s.cfg.StateDir, p)
		if d.IsDir() && (skipTop(rel) || strings.HasSuffix(p, "/upper") || strings.HasSuffix(p, "/checkpoint")) {
			return filepath.SkipDir
		}
		if fi, err := d.Info(); err == nil && d.Type().IsRegular() && fi.Size() <= 512<<20 {
			scan(p)
		}
		return nil
	})
	if s.cfg.DaemonLog != "" {
		scan(s.cfg.DaemonLog)
	}
	evs, err := s.c.Events(ctx, s.a.id)
	if err != nil {
		return inconclusive(tried, err)
	}
	js, _ := json.Marshal(evs)
	if bytes.Contains(js, []byte(s.canary)) {
		found = append(found, "env secret in the attacker's events")
	}
	return verdict(len(found) == 0, tried, "scanned %d files under %s%s and %d events; found %d (%s)",
		files, s.cfg.StateDir, logNote(s.cfg.DaemonLog), len(evs), len(found), joinMax(found, 3))
}

func skipTop(rel string) bool {
	for _, s := range atRestSkips {
		if rel == s {
			return true
		}
	}
	return false
}

func logNote(p string) string {
	if p == "" {
		return ""
	}
	return " and " + p
}

func leakFilesAtRest(ctx context.Context, s *session) Result {
	tried := "as the unprivileged user nobody, list and read everything under the state directory and the daemon's log"
	bin, cleanup, err := worldExecutable(s.cfg.ProbeBin)
	if err != nil {
		return inconclusive(tried, err)
	}
	defer cleanup()
	roots := []string{s.cfg.StateDir}
	if s.cfg.DaemonLog != "" {
		roots = append(roots, s.cfg.DaemonLog)
	}
	args, _ := json.Marshal(probe.ReadableArgs{Roots: roots, Secrets: s.secrets(true)})
	cmd := exec.CommandContext(ctx, bin, probe.Cmd, "readable", string(args))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	cmd.Dir = "/"
	out, err := cmd.Output()
	if err != nil {
		return inconclusive(tried, fmt.Errorf("running the probe as nobody: %w", err))
	}
	var r probe.ReadableResult
	if err := decodeProbe("readable", out, "", 0, &r); err != nil {
		return inconclusive(tried, err)
	}
	mode := "missing"
	if fi, err := os.Stat(s.cfg.StateDir); err == nil {
		mode = fmt.Sprintf("%04o", fi.Mode().Perm())
	}
	ok := len(r.Found) == 0 && len(r.Readable) == 0 && len(r.Listable) == 0
	return verdict(ok, tried, "state dir mode %s; nobody could list %d directories (%s), read %d files (%s), and found %d secrets (%s)",
		mode, len(r.Listable), joinMax(r.Listable, 2), len(r.Readable), joinMax(r.Readable, 3), len(r.Found), joinMax(r.Found, 2))
}

// worldExecutable copies bin where an unprivileged user can run it.
func worldExecutable(bin string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "corral-selftest-bin-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	dst := filepath.Join(dir, "corral")
	b, err := os.ReadFile(bin)
	if err == nil {
		err = os.WriteFile(dst, b, 0o755)
	}
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		cleanup()
		return "", nil, err
	}
	return dst, cleanup, nil
}
