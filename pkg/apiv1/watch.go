package apiv1

// WatchEvent is one line of the NDJSON stream of GET
// /v1/sandboxes/{id}/files/watch: first a start event naming the watched
// directory, then changes, overflow reports and keepalives, until an end
// event (the watched directory went away, or the sandbox did) or until the
// caller closes the stream.
type WatchEvent struct {
	// Type is one of the Watch* constants.
	Type string `json:"type"`
	// Path is the entry's absolute path inside the sandbox.
	Path string `json:"path,omitempty"`
	// Name is Path relative to the watched directory ("" for the
	// directory itself).
	Name string `json:"name,omitempty"`
	// Dir says the entry is a directory.
	Dir bool `json:"dir,omitempty"`
	// Dropped counts the events an overflow lost (0: unknown).
	Dropped int `json:"dropped,omitempty"`
	// Error says why an overflow or the end happened.
	Error string `json:"error,omitempty"`
}

// Watch event types. A move within the watch is a rename of the old name
// and a create of the new one; a move out of it is a rename only, a move
// into it a create only.
const (
	WatchStart     = "start"
	WatchCreate    = "create"
	WatchWrite     = "write"
	WatchRemove    = "remove"
	WatchRename    = "rename"
	WatchChmod     = "chmod"
	WatchOverflow  = "overflow"
	WatchKeepalive = "keepalive"
	WatchEnd       = "end"
)
