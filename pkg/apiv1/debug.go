package apiv1

// DebugRuntime is the body of GET /v1/debug/runtime: the daemon process's
// own resources, for finding leaks (corral's soak test reads it).
type DebugRuntime struct {
	// GC is true when the call ran a garbage collection and returned
	// freed memory to the OS before measuring (?gc=true).
	GC         bool `json:"gc"`
	Goroutines int  `json:"goroutines"`
	// HeapAllocBytes is the bytes of live (and not yet collected) heap
	// objects; HeapSysBytes what the heap holds from the OS.
	HeapAllocBytes uint64 `json:"heap_alloc_bytes"`
	HeapSysBytes   uint64 `json:"heap_sys_bytes"`
	// SysBytes is everything the Go runtime holds from the OS.
	SysBytes uint64 `json:"sys_bytes"`
	NumGC    uint32 `json:"num_gc"`
	// RSSBytes is the process's resident set (VmRSS); OpenFDs its open
	// file descriptors; Threads its OS threads.
	RSSBytes int64 `json:"rss_bytes"`
	OpenFDs  int   `json:"open_fds"`
	Threads  int   `json:"threads"`
}
