package envd

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"corral/internal/agentapi"
	"corral/internal/e2b/envd/gen/filesystem"
	"corral/internal/errdefs"
)

// filesystemService is filesystem.Filesystem over the manager's file
// service: paths resolve inside the sandbox (relative ones against its
// workdir, or the user's home), as the requesting user.
type filesystemService struct{ s *Server }

// maxListedLinks bounds the symlinks one ListDir follows (each costs the
// agent a stat per link on its chain); later ones are listed as links,
// their target as read.
const maxListedLinks = 256

// maxPath bounds a path in any request.
const maxPath = 4096

func checkPath(field, p string) error {
	if p == "" {
		return invalid(field, "is required")
	}
	if len(p) > maxPath {
		return invalid(field, "longer than %d bytes", maxPath)
	}
	for i := 0; i < len(p); i++ {
		if p[i] == 0 {
			return invalid(field, "contains a NUL byte")
		}
	}
	return nil
}

// call is the sandbox id and user of an RPC, its path checked.
func call(h map[string][]string, field, p string) (string, string, error) {
	if err := checkPath(field, p); err != nil {
		return "", "", err
	}
	user, err := userOf(h)
	return sandboxID(h), user, err
}

func (f *filesystemService) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	id, user, err := call(req.Header(), "path", req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	e, err := f.s.files().StatXattrs(ctx, id, req.Msg.GetPath(), user, metadataXattr)
	if err != nil {
		return nil, f.s.connectErr(err)
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: f.s.followLink(ctx, id, user, entryInfo(e))}), nil
}

// MakeDir creates a directory and its parents; an existing one is
// AlreadyExists, as envd answers.
func (f *filesystemService) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	id, user, err := call(req.Header(), "path", req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if e, err := f.s.files().Stat(ctx, id, req.Msg.GetPath(), user); err == nil {
		return nil, connect.NewError(connect.CodeAlreadyExists, errAlreadyExists(e.Path))
	}
	e, err := f.s.files().MakeDir(ctx, id, req.Msg.GetPath(), 0o755, user)
	if err != nil {
		return nil, f.s.connectErr(err)
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: entryInfo(e)}), nil
}

func (f *filesystemService) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	id, user, err := call(req.Header(), "source", req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	if err := checkPath("destination", req.Msg.GetDestination()); err != nil {
		return nil, err
	}
	e, err := f.s.files().Rename(ctx, id, req.Msg.GetSource(), req.Msg.GetDestination(), user)
	if err != nil {
		return nil, f.s.connectErr(err)
	}
	// The renamed entry as Stat describes it: its metadata and a
	// symlink's target (the rename itself is done; a failed look is the
	// rename's own answer).
	if full, err := f.s.files().StatXattrs(ctx, id, e.Path, user, metadataXattr); err == nil {
		e = full
	}
	return connect.NewResponse(&filesystem.MoveResponse{Entry: entryInfo(e)}), nil
}

// ListDir lists a directory to depth levels (0 and 1: its entries only),
// in the order of a walk that visits names in byte order, as envd does.
func (f *filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	id, user, err := call(req.Header(), "path", req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	depth := int(max(req.Msg.GetDepth(), 1))
	if depth > agentapi.MaxListDepth {
		return nil, invalid("depth", "at most %d", agentapi.MaxListDepth)
	}
	es, err := f.s.files().ListXattrs(ctx, id, req.Msg.GetPath(), depth, user, metadataXattr)
	if err != nil {
		return nil, f.s.connectErr(err)
	}
	out := &filesystem.ListDirResponse{Entries: make([]*filesystem.EntryInfo, 0, len(es))}
	sortWalkOrder(es)
	links := 0
	for _, e := range es {
		ei := entryInfo(e)
		if e.Type == agentapi.EntrySymlink && links < maxListedLinks {
			links++
			ei = f.s.followLink(ctx, id, user, ei)
		}
		out.Entries = append(out.Entries, ei)
	}
	return connect.NewResponse(out), nil
}

// Remove removes a file or a directory tree; a path that is not there is
// removed already (envd's answer too), in a sandbox that is.
func (f *filesystemService) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	id, user, err := call(req.Header(), "path", req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	err = f.s.files().Remove(ctx, id, req.Msg.GetPath(), true, user)
	if errors.Is(err, errdefs.ErrNotFound) {
		if _, gone := f.s.record(ctx, id); gone == nil {
			err = nil
		}
	}
	if err != nil {
		return nil, f.s.connectErr(err)
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}

// entryInfo translates an agent entry; its user.e2b.* attributes (Stat
// and ListDir ask for them) are envd's metadata.
func entryInfo(e agentapi.EntryInfo) *filesystem.EntryInfo {
	out := &filesystem.EntryInfo{
		Name: e.Name, Path: e.Path, Size: e.Size, Mode: e.Mode, Permissions: e.Permissions,
		Owner: e.Owner, Group: e.Group, ModifiedTime: timestamppb.New(e.ModifiedAt), Metadata: e.Xattrs,
	}
	switch e.Type {
	case agentapi.EntryFile:
		out.Type = filesystem.FileType_FILE_TYPE_FILE
	case agentapi.EntryDir:
		out.Type = filesystem.FileType_FILE_TYPE_DIRECTORY
	case agentapi.EntrySymlink:
		out.Type = filesystem.FileType_FILE_TYPE_SYMLINK
	}
	if e.SymlinkTarget != "" {
		t := e.SymlinkTarget
		out.SymlinkTarget = &t
	}
	return out
}
