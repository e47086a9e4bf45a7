package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
	"corral/internal/image/store"
	"corral/internal/manager"
	"corral/internal/runtime"
	"corral/internal/sandbox"
	"corral/pkg/apiv1"
)

// sandboxGrace is how much longer than a step a build sandbox may live,
// a backstop should the step's own timeout fail to end it.
const sandboxGrace = 2 * time.Minute

// stepFailed is a step whose command ended unsuccessfully.
type stepFailed struct {
	code     int
	timedOut bool
	signal   string
}

func (e *stepFailed) Error() string {
	switch {
	case e.timedOut:
		return "the step's command timed out"
	case e.signal != "":
		return "the step's command was killed by " + e.signal
	}
	return fmt.Sprintf("the step's command exited with code %d", e.code)
}

// Unwrap classifies a failed step: the spec's command failed, not the
// daemon.
func (e *stepFailed) Unwrap() error { return errdefs.ErrFailedPrecondition }

func asStepFailed(err error, target **stepFailed) bool { return errors.As(err, target) }

// inSandbox runs a step's command in a build sandbox started from st and,
// when it succeeds, stores what it changed as a layer. It returns the
// layer's digest, or "" when the step changed nothing.
func (r *run) inSandbox(ctx context.Context, n int, s step, st state) (store.Digest, error) {
	m := r.b.cfg.Manager
	img, err := r.b.cfg.Store.PutImage(st.layers, st.config)
	if err != nil {
		return "", err
	}
	sb, err := m.Create(ctx, sandbox.Spec{
		Image: string(img.Digest), CPU: r.p.cpu, MemoryMB: r.p.memoryMB, MemoryLimitMB: r.p.memoryMB,
		Timeout: r.p.stepTimeout + sandboxGrace,
		Tags:    map[string]string{manager.BuildStepTag: strconv.Itoa(n), manager.ReservedTagPrefix + "build/kind": string(s.kind)},
	})
	if err != nil {
		return "", fmt.Errorf("starting the build sandbox: %w", err)
	}
	defer func() {
		if _, err := m.Terminate(context.WithoutCancel(ctx), sb.ID, "build step finished", nil); err != nil {
			r.b.log.Error("terminating a build sandbox", "sandbox", sb.ID, "err", err)
		}
	}()
	if err := r.runCommand(ctx, n, sb.ID, command(s, st.config)); err != nil {
		return "", err
	}
	return r.exportLayer(ctx, sb.ID)
}

// runCommand runs cmd to its end, streaming its output as events.
func (r *run) runCommand(ctx context.Context, n int, id string, cmd stepCommand) error {
	proc, err := r.b.cfg.Manager.Processes().Exec(ctx, id, manager.ExecParams{
		Args: cmd.args, Env: cmd.env, Cwd: cmd.cwd, User: cmd.user, Timeout: r.p.stepTimeout, Tag: "corral-build",
	})
	if err != nil {
		return fmt.Errorf("starting the step's command: %w", err)
	}
	defer proc.Close()
	for {
		ev, err := proc.Recv()
		if errors.Is(err, io.EOF) {
			return errors.New("the step's command stream ended without an exit status")
		}
		if err != nil {
			return fmt.Errorf("the step's command: %w", err)
		}
		switch ev.Type {
		case agentapi.EventStdout, agentapi.EventStderr:
			r.emit(apiv1.BuildEvent{Type: apiv1.BuildEventOutput, Step: n, Stream: ev.Type, Data: ev.Data})
		case agentapi.EventEnd:
			if ev.ExitCode == 0 && !ev.TimedOut && ev.Signal == "" && ev.Error == "" {
				return nil
			}
			if ev.Error != "" && ev.ExitCode < 0 {
				return fmt.Errorf("the step's command: %s", ev.Error)
			}
			return &stepFailed{code: ev.ExitCode, timedOut: ev.TimedOut, signal: ev.Signal}
		}
	}
}

// exportLayer streams the sandbox's changes into the store.
func (r *run) exportLayer(ctx context.Context, id string) (store.Digest, error) {
	d, _, err := r.exportLayerStats(ctx, id)
	return d, err
}

// leftOut is what an export left out: entries a layer cannot hold (device
// nodes, FIFOs, sockets), the first names and how many in all.
type leftOut struct {
	names []string
	count int
}

// exportLayerStats is exportLayer that also says what the export left
// out.
func (r *run) exportLayerStats(ctx context.Context, id string) (store.Digest, leftOut, error) {
	return r.exportWith(ctx, func(w io.Writer) (runtime.ExportStats, error) {
		return r.b.cfg.Manager.Files().ExportChanges(ctx, id, w)
	})
}

// exportWith stores what export writes as a layer: its digest ("" when
// the export holds nothing) and what it left out.
func (r *run) exportWith(ctx context.Context, export manager.Export) (store.Digest, leftOut, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	var st leftOut
	go func() {
		xs, err := export(pw)
		st = leftOut{names: xs.Skipped, count: xs.SkippedCount}
		pw.CloseWithError(err)
		done <- err
	}()
	layer, err := r.b.cfg.Store.AddLayer(ctx, pr, "")
	pr.CloseWithError(errors.New("layer store stopped reading"))
	if xerr := <-done; xerr != nil {
		return "", st, fmt.Errorf("exporting the step's changes: %w", xerr)
	}
	if err != nil {
		return "", st, fmt.Errorf("storing the step's layer: %w", err)
	}
	if layer.Entries == 0 {
		return "", st, nil
	}
	return layer.Digest, st, nil
}
