package manager

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/sandbox"
	"corral/internal/testwait"
)

// TestAgentChannelLost: a sandbox that silences its agent (a stopped PID
// 1) or hijacks its channel (its agent's socket replaced) while it runs on
// ends as agent_channel_lost, with an event saying what was seen; one
// whose runtime stopped is still a crash (TestEndings).
func TestAgentChannelLost(t *testing.T) {
	after, timeout, reconnect := agentapi.PingAfter, agentapi.PingTimeout, reconnectTimeout
	agentapi.PingAfter, agentapi.PingTimeout, reconnectTimeout = 100*time.Millisecond, 100*time.Millisecond, time.Second
	t.Cleanup(func() { agentapi.PingAfter, agentapi.PingTimeout, reconnectTimeout = after, timeout, reconnect })

	e := newEnv(t)
	for _, tt := range []struct {
		name string
		act  func(id string)
		seen string
	}{
		{"silenced", e.rt.Silence, "no answer to a health check"},
		{"hijacked", e.rt.Hijack, "replaced"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sb := e.create(sandbox.Spec{})
			if out, code := e.run(sb.ID, "echo", "ok"); out != "ok\n" || code != 0 {
				t.Fatalf("exec before: %q %d", out, code)
			}
			tt.act(sb.ID)
			if code, reason := e.wait(sb.ID); code != 137 || reason != sandbox.EndAgentChannelLost {
				t.Fatalf("wait: %d %s, want 137 %s", code, reason, sandbox.EndAgentChannelLost)
			}
			evs, err := e.m.Events(context.Background(), sb.ID, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			var found bool
			for _, ev := range evs {
				if ev.Kind == sandbox.EndAgentChannelLost {
					found = true
					if !strings.Contains(ev.Fields["seen"], tt.seen) || ev.Fields["runtime_state"] != "running" {
						t.Errorf("event fields %v, want seen ~ %q", ev.Fields, tt.seen)
					}
				}
			}
			if !found {
				t.Errorf("no %s event in %v", sandbox.EndAgentChannelLost, evs)
			}
			if !e.rt.Destroyed(sb.ID) {
				t.Error("not destroyed")
			}
		})
	}
}

// TestAgentReconnected: an agent connection that drops while the sandbox
// and its agent run on (a vm's port reset) is redialed, and the event log
// says so; the sandbox works on.
func TestAgentReconnected(t *testing.T) {
	e := newEnv(t)
	sb := e.create(sandbox.Spec{})
	e.rt.Drop(sb.ID)
	testwait.For(t, 10*time.Second, "an agent_reconnected event saying when the agent was last seen", func() bool {
		evs, err := e.m.Events(context.Background(), sb.ID, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, ev := range evs {
			found = found || ev.Kind == "agent_reconnected" && ev.Fields["seen"] != ""
		}
		return found
	})
	if out, code := e.run(sb.ID, "echo", "ok"); out != "ok\n" || code != 0 {
		t.Fatalf("exec after the reconnect: %q %d", out, code)
	}
}

// TestKillTreeNeedsAgent3: an exec with KillTree in a sandbox whose agent
// speaks protocol 2 (an older image or snapshot) is refused as a failed
// precondition, not run with its descendants left to survive; without
// KillTree it runs.
func TestKillTreeNeedsAgent3(t *testing.T) {
	e := newEnv(t)
	e.rt.AgentProtocols(1, 2)
	sb := e.create(sandbox.Spec{})
	_, err := e.m.Processes().Exec(context.Background(), sb.ID, ExecParams{Args: []string{"true"}, KillTree: true})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "kill_tree needs an agent of protocol 3") {
		t.Errorf("kill_tree on a protocol 2 agent: %v; want failed precondition", err)
	}
	if out, code := e.run(sb.ID, "echo", "ok"); out != "ok\n" || code != 0 {
		t.Errorf("exec without kill_tree: %q %d", out, code)
	}
}
