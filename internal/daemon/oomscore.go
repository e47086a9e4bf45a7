package daemon

import (
	"log/slog"
	"os"

	"corral/internal/oomscore"
)

// protectFromOOM puts the daemon below every sandbox process for the
// host's OOM killer (oomscore.Daemon, not -1000: a daemon that leaks must
// still be killable). Sandboxes' memory is overcommitted, so the host can
// run short while each is within its limit; the kernel must then end a
// sandbox, not the process that keeps them all. Without CAP_SYS_RESOURCE
// the score stays as it is, said once here; the runtimes score what they
// start above it either way.
func protectFromOOM(log *slog.Logger) {
	if err := oomscore.LowerSelf(); err != nil {
		adj, _ := oomscore.Get(os.Getpid())
		log.Warn("cannot lower the daemon's OOM score (it needs CAP_SYS_RESOURCE); sandboxes' processes are still scored above it",
			"oom_score_adj", adj, "want", oomscore.Daemon, "err", err)
		return
	}
	log.Info("daemon OOM score lowered below every sandbox's", "oom_score_adj", oomscore.Daemon)
}
