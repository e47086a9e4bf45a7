package gvisor

import (
	"context"
	"regexp"
	"time"

	"corral/internal/errdefs"
	"corral/internal/runtime"
)

var _ runtime.BootIDSetter = (*Runtime)(nil)

var bootIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// bootIDTimeout bounds the one-shot exec (≈ 0.1 s here).
const bootIDTimeout = 30 * time.Second

// SetBootID gives a copy of a memory snapshot its own boot_id. gVisor's
// /proc/sys/kernel/random/boot_id is a random value per procfs instance
// (pkg/sentry/fsimpl/proc, newSysDir), saved by a checkpoint and restored
// as it was, so every copy would read its snapshot's. The agent cannot
// mount over it (no CAP_SYS_ADMIN among the Docker default capabilities),
// so the runtime runs the agent binary's one-shot `agent boot-id` in the
// sandbox with CAP_SYS_ADMIN added for that process alone (`runsc exec
// --cap`): it bind-mounts a file holding id over the kernel's file and
// exits. The sandbox's own processes cannot trace it (gVisor's ptrace
// check wants CAP_SYS_PTRACE or a superset of its capabilities).
func (r *Runtime) SetBootID(ctx context.Context, ref runtime.Ref, id string) error {
	if err := ref.Check(); err != nil {
		return err
	}
	if !bootIDPattern.MatchString(id) {
		return errdefs.Invalid("boot_id", "want a lowercase UUID")
	}
	_, err := r.runsc(ctx, bootIDTimeout, ref.Dir, "exec", "--user", "0:0", "--cap", "CAP_SYS_ADMIN", "--cwd", "/",
		ref.ID, guestAgentPath, "agent", "boot-id", id)
	return err
}
