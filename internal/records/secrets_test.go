package records

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"corral/internal/errdefs"
	"corral/internal/ids"
	"corral/internal/sandbox"
	"corral/internal/seal"
)

// Secrets are sealed at rest: the values open again (after a reopen),
// the database's files never hold them, listing shows keys only, rotate
// and delete act on the row, and another key opens nothing.
func TestSecretsSealedAtRest(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corral.db")
	s, err := Open(ctx, path, testKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSecret(ctx, "api", []string{"TOKEN"}, map[string]string{"TOKEN": secret}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSecret(ctx, "api", []string{"TOKEN"}, map[string]string{"TOKEN": "x"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("create twice: %v, want already exists", err)
	}
	if _, err := s.RotateSecret(ctx, "nope", []string{"A"}, map[string]string{"A": "b"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("rotate missing: %v, want not found", err)
	}
	// A sandbox's secret env is sealed with its env.
	spec := sandbox.Spec{Runtime: "gvisor", Image: "base", Secrets: []string{"api"}, SecretEnv: map[string]string{"TOKEN": secret}}
	sb := &sandbox.Sandbox{ID: ids.NewSandbox(), Spec: spec, State: sandbox.Running, CreatedAt: time.Now().UTC()}
	if err := s.PutSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	s.Close()
	assertNotInFiles(t, path, secret)

	s, err = Open(ctx, path, testKey)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, err := s.SecretValues(ctx, "api")
	if err != nil || v["TOKEN"] != secret {
		t.Fatalf("values after reopen: %v", err)
	}
	got, err := s.GetSandbox(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.SecretEnv["TOKEN"] != secret || len(got.Spec.Env) != 0 || !reflect.DeepEqual(got.Spec.Secrets, []string{"api"}) {
		t.Errorf("sandbox spec after reopen: env %v, secrets %v, secret env has TOKEN: %v", got.Spec.Env, got.Spec.Secrets, got.Spec.SecretEnv["TOKEN"] == secret)
	}
	list, err := s.ListSecrets(ctx)
	if err != nil || len(list) != 1 || !reflect.DeepEqual(list[0].Keys, []string{"TOKEN"}) {
		t.Errorf("list: %+v, %v", list, err)
	}
	if _, err := s.RotateSecret(ctx, "api", []string{"NEW"}, map[string]string{"NEW": "rotated"}); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.SecretValues(ctx, "api"); !reflect.DeepEqual(v, map[string]string{"NEW": "rotated"}) {
		t.Errorf("after rotate: keys %v", len(v))
	}

	other, err := Open(ctx, path, seal.Generate())
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.SecretValues(ctx, "api")
	other.Close()
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || strings.Contains(err.Error(), "rotated") {
		t.Errorf("another key: %v, want failed precondition", err)
	}
	if err := s.DeleteSecret(ctx, "api"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SecretValues(ctx, "api"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("after delete: %v, want not found", err)
	}
	if err := s.DeleteSecret(ctx, "api"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("delete twice: %v, want not found", err)
	}
}
