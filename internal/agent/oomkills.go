package agent

import (
	"bytes"
	"os"
	"strconv"
)

// oomKills is the kernel's count of OOM kills since boot (the oom_kill
// line of /proc/vmstat; 0 where the kernel has none, as gVisor). A
// process that ends killed while it grew was killed for memory, or
// waited for one that was (agentapi.Event.OOMKilled).
func oomKills() uint64 {
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("oom_kill ")); ok {
			n, _ := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			return n
		}
	}
	return 0
}
