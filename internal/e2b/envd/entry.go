package envd

import (
	"cmp"
	"context"
	"path"
	"slices"

	"corral/internal/agentapi"
	"corral/internal/e2b/envd/gen/filesystem"
)

// maxLinkHops bounds the symlinks followed to one target, as the kernel's
// MAXSYMLINKS does; a longer chain is reported unresolved.
const maxLinkHops = 40

// followLink completes a symlink's entry as envd reports one: its target
// is the absolute path the chain of links ends at (every link on the way
// followed, the agent resolving directory links in each path), and its
// type and mode are that target's. A dangling, looping or unreadable
// chain leaves the target as read and the type unspecified. Other entries
// are returned unchanged.
func (s *Server) followLink(ctx context.Context, id, user string, e *filesystem.EntryInfo) *filesystem.EntryInfo {
	if e.Type != filesystem.FileType_FILE_TYPE_SYMLINK {
		return e
	}
	e.Type = filesystem.FileType_FILE_TYPE_UNSPECIFIED
	cur, target := e.Path, e.GetSymlinkTarget()
	for range maxLinkHops {
		if target == "" {
			return e
		}
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(cur), target)
		}
		t, err := s.files().Stat(ctx, id, target, user)
		if err != nil {
			return e
		}
		if t.Type != agentapi.EntrySymlink {
			resolved := t.Path
			e.SymlinkTarget = &resolved
			e.Type, e.Mode = entryInfo(t).Type, t.Mode
			return e
		}
		cur, target = t.Path, t.SymlinkTarget
	}
	return e
}

// sortWalkOrder sorts entries as a walk that reads each directory's names
// in byte order lists them: a directory, then what is below it, then its
// next sibling (so "a", "a/x", "a-b", not "a", "a-b", "a/x").
func sortWalkOrder(es []agentapi.EntryInfo) {
	slices.SortStableFunc(es, func(a, b agentapi.EntryInfo) int { return comparePaths(a.Path, b.Path) })
}

// comparePaths orders two slash-separated paths component by component:
// byte order with the slash below every other byte.
func comparePaths(a, b string) int {
	for i := range min(len(a), len(b)) {
		ca, cb := a[i], b[i]
		if ca == cb {
			continue
		}
		switch {
		case ca == '/':
			return -1
		case cb == '/':
			return 1
		case ca < cb:
			return -1
		default:
			return 1
		}
	}
	return cmp.Compare(len(a), len(b))
}
