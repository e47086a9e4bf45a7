package envd

import (
	"context"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"corral/internal/agentapi"
	"corral/internal/e2b/envd/gen/filesystem"
)

// filesystemService is filesystem.Filesystem over the manager's file
// service: paths resolve inside the sandbox (relative ones against its
// workdir, or the user's home), as the requesting user.
type filesystemService struct{ s *Server }

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
	e, err := f.s.m.Files().StatXattrs(ctx, id, req.Msg.GetPath(), user, metadataXattr)
	if err != nil {
		return nil, f.s.connectErr(err)
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: entryInfo(e)}), nil
}

// MakeDir creates a directory and its parents; an existing one is
// AlreadyExists, as envd answers.
func (f *filesystemService) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	id, user, err := call(req.Header(), "path", req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if e, err := f.s.m.Files().Stat(ctx, id, req.Msg.GetPath(), user); err == nil {
		return nil, connect.NewError(connect.CodeAlreadyExists, errAlreadyExists(e.Path))
	}
	e, err := f.s.m.Files().MakeDir(ctx, id, req.Msg.GetPath(), 0o755, user)
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
	e, err := f.s.m.Files().Rename(ctx, id, req.Msg.GetSource(), req.Msg.GetDestination(), user)
	if err != nil {
		return nil, f.s.connectErr(err)
	}
	return connect.NewResponse(&filesystem.MoveResponse{Entry: entryInfo(e)}), nil
}

// ListDir lists a directory to depth levels (0 and 1: its entries only).
func (f *filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	id, user, err := call(req.Header(), "path", req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	depth := int(max(req.Msg.GetDepth(), 1))
	if depth > agentapi.MaxListDepth {
		return nil, invalid("depth", "at most %d", agentapi.MaxListDepth)
	}
	es, err := f.s.m.Files().ListXattrs(ctx, id, req.Msg.GetPath(), depth, user, metadataXattr)
	if err != nil {
		return nil, f.s.connectErr(err)
	}
	out := &filesystem.ListDirResponse{Entries: make([]*filesystem.EntryInfo, 0, len(es))}
	for _, e := range es {
		out.Entries = append(out.Entries, entryInfo(e))
	}
	return connect.NewResponse(out), nil
}

// Remove removes a file or a directory tree.
func (f *filesystemService) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	id, user, err := call(req.Header(), "path", req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if err := f.s.m.Files().Remove(ctx, id, req.Msg.GetPath(), true, user); err != nil {
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
