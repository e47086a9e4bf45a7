package envd

import (
	"path"
	"strings"

	"corral/internal/agentapi"
)

// uploadFold makes a watch see an upload by an agent that writes only
// atomically (older than in-place writes) as envd's in-place write does:
// the temporary file's events (uploadTempPrefix, watch.go) are dropped,
// and the target's arrival by rename (a CREATE) is followed by a WRITE on
// it. One per watch stream.
type uploadFold struct {
	renamed map[string]bool // directories where a temporary file was just renamed away
}

// fold returns the events ev stands for: none, itself, or itself and a
// WRITE.
func (u *uploadFold) fold(ev agentapi.WatchEvent) []agentapi.WatchEvent {
	dir, base := path.Split(ev.Name)
	if strings.HasPrefix(base, uploadTempPrefix) {
		if ev.Type == agentapi.WatchRename {
			if u.renamed == nil {
				u.renamed = map[string]bool{}
			}
			u.renamed[dir] = true
		}
		return nil
	}
	if ev.Type == agentapi.WatchCreate && u.renamed[dir] {
		delete(u.renamed, dir)
		w := ev
		w.Type = agentapi.WatchWrite
		return []agentapi.WatchEvent{ev, w}
	}
	return []agentapi.WatchEvent{ev}
}
