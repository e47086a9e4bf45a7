package api

import (
	"bufio"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"corral/internal/errdefs"
	"corral/pkg/apiv1"
)

// debugRuntime is GET /v1/debug/runtime: the daemon's goroutines, heap,
// resident memory, descriptors and threads; with gc=true measured right
// after a collection that returned freed memory to the OS, so that two
// readings compare what the daemon holds, not when the collector last ran.
func (s *Server) debugRuntime(w http.ResponseWriter, r *http.Request) {
	var gc bool
	if v := r.URL.Query().Get("gc"); v != "" {
		var err error
		if gc, err = strconv.ParseBool(v); err != nil {
			s.writeError(w, errdefs.Invalid("gc", "want true or false, got %q", v))
			return
		}
	}
	if gc {
		debug.FreeOSMemory() // collects first
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	out := apiv1.DebugRuntime{
		GC: gc, Goroutines: runtime.NumGoroutine(), HeapAllocBytes: ms.HeapAlloc, HeapSysBytes: ms.HeapSys,
		SysBytes: ms.Sys, NumGC: ms.NumGC, OpenFDs: countDir("/proc/self/fd"),
	}
	out.RSSBytes, out.Threads = procStatus()
	writeJSON(w, http.StatusOK, out)
}

// countDir is the number of entries in dir (-1 if it cannot be read).
func countDir(dir string) int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	return len(ents)
}

// procStatus reads VmRSS (in bytes) and Threads from /proc/self/status
// (-1 for what it cannot read).
func procStatus() (rss int64, threads int) {
	rss, threads = -1, -1
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return rss, threads
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "VmRSS":
			rss = n << 10 // kB
		case "Threads":
			threads = int(n)
		}
	}
	return rss, threads
}
