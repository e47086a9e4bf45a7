package records

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/internal/errdefs"
	"corral/internal/ids"
	"corral/internal/sandbox"
	"corral/internal/seal"
)

var testKey = seal.Generate()

const secret = "sk-test-9f8e7d6c5b4a3f2e1d0c"

// assertNotInFiles fails if any of the database's files holds needle.
func assertNotInFiles(t *testing.T, path string, needles ...string) {
	t.Helper()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range needles {
			if bytes.Contains(b, []byte(n)) {
				t.Errorf("%s holds %q", filepath.Base(p), n)
			}
		}
	}
}

// A spec's env is stored sealed: the values come back, the database's
// files never hold them, the files are 0600, and another key opens
// nothing (failed_precondition, the value not in the error).
func TestEnvSealedAtRest(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	s, err := Open(ctx, path, testKey)
	if err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{Runtime: "gvisor", Image: "base", Env: map[string]string{"API_KEY": secret, "PLAIN": "x"}}
	sb := &sandbox.Sandbox{ID: ids.NewSandbox(), Spec: spec, State: sandbox.Running, CreatedAt: time.Now().UTC()}
	sn := &sandbox.Snapshot{ID: ids.NewSnapshot(), SandboxID: sb.ID, Spec: spec, Runtime: "gvisor", CreatedAt: time.Now().UTC()}
	if err := s.PutSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSnapshot(ctx, sn); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSandbox(ctx, sb.ID)
	if err != nil || got.Spec.Env["API_KEY"] != secret || got.Spec.Env["PLAIN"] != "x" {
		t.Fatalf("sandbox env: %v %v", got, err)
	}
	gotSn, err := s.GetSnapshot(ctx, sn.ID)
	if err != nil || gotSn.Spec.Env["API_KEY"] != secret {
		t.Fatalf("snapshot env: %v %v", gotSn, err)
	}
	var rawSpec, rawEnv string
	if err := s.db.QueryRowContext(ctx, `SELECT spec, env_sealed FROM sandboxes WHERE id = ?`, sb.ID).Scan(&rawSpec, &rawEnv); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rawSpec, "API_KEY") || !seal.IsSealedString(rawEnv) {
		t.Errorf("stored spec %q, env %q", rawSpec, rawEnv)
	}
	assertNotInFiles(t, path, secret)
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", filepath.Base(p), fi.Mode())
		}
	}
	s.Close()
	assertNotInFiles(t, path, secret)

	other, err := Open(ctx, path, seal.Generate())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	_, err = other.GetSandbox(ctx, sb.ID)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || strings.Contains(err.Error(), secret) {
		t.Errorf("another key: %v", err)
	}
	if _, err := other.ListSnapshots(ctx); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("another key, snapshots: %v", err)
	}
}

// A database an older daemon wrote (version 6: env in the spec, port
// tokens stored, the file 0644) is migrated on open: the env sealed, the
// tokens gone, the files 0600, and neither left anywhere in the files.
func TestLegacyEnvSealed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	s, err := Open(ctx, path, testKey)
	if err != nil {
		t.Fatal(err)
	}
	const token = "c0ffee0123456789abcdef0123456789abcdef0123456789"
	for _, q := range []string{
		`ALTER TABLE sandboxes DROP COLUMN env_sealed`, `ALTER TABLE snapshots DROP COLUMN env_sealed`,
		`ALTER TABLE sandboxes DROP COLUMN pause_kind`, `ALTER TABLE sandboxes DROP COLUMN fs_image`, // added by 15
		`ALTER TABLE sandboxes DROP COLUMN lifetime`, `PRAGMA user_version = 6`,
		`INSERT INTO sandboxes (id, state, spec, created_at, port_token) VALUES ('sb-old', 'running', '{"runtime":"gvisor","env":{"API_KEY":"` + secret + `"},"tags":{"t":"v"}}', 1, '` + token + `')`,
		`INSERT INTO snapshots (id, sandbox_id, spec, runtime, runtime_version, agent_protocol, agent_version, created_at, dir)
			VALUES ('snap-old', 'sb-old', '{"env":{"API_KEY":"` + secret + `"}}', 'gvisor', 'v', 1, 'a', 1, '/x')`,
	} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	s.Close()
	if b, err := os.ReadFile(path); err != nil || !bytes.Contains(b, []byte(secret)) {
		t.Fatalf("the old database does not hold the secret in the clear (%v): the test would prove nothing", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path, testKey)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSandbox(ctx, "sb-old")
	if err != nil || got.Spec.Env["API_KEY"] != secret || got.Spec.Tags["t"] != "v" || got.Spec.Runtime != "gvisor" {
		t.Fatalf("migrated sandbox: %+v %v", got, err)
	}
	if sn, err := s.GetSnapshot(ctx, "snap-old"); err != nil || sn.Spec.Env["API_KEY"] != secret {
		t.Fatalf("migrated snapshot: %+v %v", sn, err)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sandboxes WHERE port_token != ''`).Scan(&n); err != nil || n != 0 {
		t.Errorf("port tokens left: %d %v", n, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("database mode after open: %v %v", fi.Mode(), err)
	}
	assertNotInFiles(t, path, secret, token)
	s.Close()
	assertNotInFiles(t, path, secret, token)
}
