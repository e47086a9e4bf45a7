package agentapi

// Watch event types (GET /v<N>/fs/watch, N >= WatchSince). A watch stream
// is NDJSON: a start event naming the watched directory, then change
// events, overflow reports and keepalives, until an end event (the
// watched directory went away) or until either side closes it.
const (
	WatchStart    = "start"    // the watch is set up: Path is the watched directory
	WatchCreate   = "create"   // an entry was created, or moved in (the new name)
	WatchWrite    = "write"    // a file's contents changed
	WatchRemove   = "remove"   // an entry was removed
	WatchRename   = "rename"   // an entry was moved away (the old name)
	WatchChmod    = "chmod"    // an entry's mode, owner or times changed
	WatchOverflow = "overflow" // events were lost: Dropped counts them (0: unknown)
	WatchEnd      = "end"      // the watch ended: Error says why
)

// Bounds of file watching.
const (
	// MaxWatchQueue bounds the events one watch holds for a slow reader;
	// more are dropped and reported by an overflow event.
	MaxWatchQueue = 4096
	// MaxWatchDirs bounds the directories one recursive watch follows.
	MaxWatchDirs = 8192
	// MaxWatches bounds the watch streams an agent serves at once.
	MaxWatches = 64
)

// WatchEvent is one line of a watch stream. Path is the entry's absolute
// path inside the sandbox; Name is the same path relative to the watched
// directory ("" for the directory itself); Dir says the entry is a
// directory.
type WatchEvent struct {
	Type    string `json:"type"`
	Path    string `json:"path,omitempty"`
	Name    string `json:"name,omitempty"`
	Dir     bool   `json:"dir,omitempty"`
	Dropped int    `json:"dropped,omitempty"`
	Error   string `json:"error,omitempty"`
}
