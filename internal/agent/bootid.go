package agent

import (
	"fmt"
	"os"
)

// BootIDMain is `corral agent boot-id UUID`: a one-shot that shows UUID at
// /proc/sys/kernel/random/boot_id and exits (0 on success). The gvisor
// runtime runs it in a copy of a memory snapshot with `runsc exec --cap
// CAP_SYS_ADMIN`, since the agent (PID 1) has no CAP_SYS_ADMIN to mount.
func BootIDMain(args []string) int {
	if len(args) != 1 || !uuidPattern.MatchString(args[0]) {
		fmt.Fprintln(os.Stderr, "usage: corral agent boot-id UUID (lowercase)")
		return 2
	}
	s := &Server{root: "/"}
	if err := s.mountBootID(args[0]); err != nil {
		fmt.Fprintf(os.Stderr, "mounting boot_id: %v\n", err)
		return 1
	}
	return 0
}
