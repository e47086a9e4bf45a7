package manager

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/sandbox"
	"corral/internal/secrets"
)

// A sandbox's secrets reach its processes as env, by name in the record
// only; a process's own secrets reach it alone; a missing secret or key is
// not found; a restarted manager's sandbox still has them; rotation does
// not change a running sandbox's env.
func TestSecretEnv(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const v1, v2 = "sk-create-4f1c", "sk-exec-9a7d"
	if _, err := e.m.CreateSecret(ctx, "envsec", map[string]string{"TOKEN": v1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.CreateSecret(ctx, "execsec", map[string]string{"EXEC_TOKEN": v2}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Create(ctx, sandbox.Spec{User: selfUser(), Secrets: []string{"missing"}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a missing secret: %v, want not found", err)
	}
	_, err := e.m.Create(ctx, sandbox.Spec{User: selfUser(), SecretHeaders: []secrets.HeaderRule{{Secret: "envsec", Key: "NOPE", Host: "api.example.com", Header: "Authorization"}}})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "no network") {
		t.Errorf("header rules without a network: %v, want invalid", err)
	}
	sb := e.create(sandbox.Spec{Secrets: []string{"envsec"}})
	if out, _ := e.run(sb.ID, "printenv", "TOKEN"); out != v1+"\n" {
		t.Errorf("TOKEN: %q", out)
	}
	rec, err := e.store.GetSandbox(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(rec.Spec)
	if strings.Contains(string(spec), v1) || !strings.Contains(string(spec), `"secrets":["envsec"]`) {
		t.Errorf("the spec as encoded: %s", spec)
	}
	p, err := e.m.Processes().Exec(ctx, sb.ID, ExecParams{Args: []string{"printenv", "EXEC_TOKEN"}, Secrets: []string{"execsec"}})
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for {
		ev, err := p.Recv()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev.Data...)
		if ev.Type == agentapi.EventEnd {
			break
		}
	}
	p.Close()
	if string(out) != v2+"\n" {
		t.Errorf("exec --secret: EXEC_TOKEN %q", out)
	}
	if _, err := e.m.Processes().Exec(ctx, sb.ID, ExecParams{Args: []string{"true"}, Secrets: []string{"missing"}}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("exec with a missing secret: %v, want not found", err)
	}
	if _, code := e.run(sb.ID, "printenv", "EXEC_TOKEN"); code == 0 {
		t.Error("a later process has the exec's secret")
	}
	if _, err := e.m.RotateSecret(ctx, "envsec", map[string]string{"TOKEN": "rotated"}); err != nil {
		t.Fatal(err)
	}
	e.m.Close()
	e.m = e.open()
	if out, _ := e.run(sb.ID, "printenv", "TOKEN"); out != v1+"\n" {
		t.Errorf("after rotation and a restart, TOKEN: %q", out)
	}
	if err := e.m.DeleteSecret(ctx, "../x"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("rm ../x: %v, want invalid", err)
	}
}
