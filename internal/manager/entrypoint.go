package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"corral/internal/agentapi"
	"corral/internal/manager/handle"
	"corral/internal/sandbox"
)

// maxLogBytes bounds the stored output of one sandbox's entrypoint.
const maxLogBytes = 16 << 20

// startEntrypoint starts the sandbox's entrypoint and follows it: its output
// goes to the sandbox log, and its exit ends the sandbox with its code.
func (m *Manager) startEntrypoint(ctx context.Context, h *handle.Handle, client *agentapi.Client) error {
	spec := h.Record().Spec
	stream, err := client.Start(m.ctx, agentapi.StartRequest{
		Args: spec.Entrypoint, Env: mergeEnvMap(spec.Env, spec.SecretEnv), Cwd: spec.Workdir, User: spec.User, Tag: entrypointTag,
	})
	if err != nil {
		return fmt.Errorf("starting entrypoint: %w", err)
	}
	m.followEntrypoint(h, stream)
	return nil
}

// followEntrypoint copies an entrypoint stream to the log until it ends.
func (m *Manager) followEntrypoint(h *handle.Handle, stream *agentapi.Stream) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer stream.Close()
		ev, err := m.copyLog(h.ID(), stream)
		if err != nil {
			// The connection went away; watchLoop decides what that means.
			return
		}
		code := ev.ExitCode
		h.Event("entrypoint_exited", "entrypoint exited", map[string]string{"exit_code": fmt.Sprint(code)})
		m.terminateAsync(h.ID(), sandbox.EndExited, &code)
	}()
}

// copyLog appends stdout/stderr events to the log file and returns the end
// event.
func (m *Manager) copyLog(id string, stream *agentapi.Stream) (agentapi.Event, error) {
	f, err := os.OpenFile(m.cfg.logPath(id), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		m.log.Error("opening sandbox log", "sandbox", id, "err", err)
		f = nil
	}
	var written int64
	if f != nil {
		defer f.Close()
		if st, err := f.Stat(); err == nil {
			written = st.Size()
		}
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return agentapi.Event{}, err
		}
		switch ev.Type {
		case agentapi.EventStdout, agentapi.EventStderr, agentapi.EventPTY:
			if f != nil && written < maxLogBytes {
				n, _ := f.Write(ev.Data[:min(len(ev.Data), int(maxLogBytes-written))])
				written += int64(n)
			}
		case agentapi.EventEnd:
			return ev, nil
		}
	}
}

// LogPath returns the host path of a sandbox's entrypoint log, which may not
// exist yet.
func (m *Manager) LogPath(ctx context.Context, id string) (string, error) {
	if _, err := m.Get(ctx, id); err != nil {
		return "", err
	}
	return m.cfg.logPath(id), nil
}
