package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ReadLimit bounds the bytes read_file returns.
const ReadLimit = 1 << 20

// WriteLimit bounds the content write_file takes (decoded).
const WriteLimit = 16 << 20

// ReadInput is read_file's arguments.
type ReadInput struct {
	Sandbox string `json:"sandbox" jsonschema:"the sandbox's id or name"`
	Path    string `json:"path" jsonschema:"path of the file in the sandbox (relative: to its workdir)"`
}

// ReadOutput is read_file's result.
type ReadOutput struct {
	Content   string `json:"content"`
	Encoding  string `json:"encoding" jsonschema:"utf-8, or base64 when the file is not text"`
	Size      int64  `json:"size"`
	Truncated bool   `json:"truncated,omitempty"`
}

// WriteInput is write_file's arguments.
type WriteInput struct {
	Sandbox  string `json:"sandbox" jsonschema:"the sandbox's id or name"`
	Path     string `json:"path" jsonschema:"absolute path of the file in the sandbox; missing parent directories are created"`
	Content  string `json:"content" jsonschema:"the file's new content"`
	Encoding string `json:"encoding,omitempty" jsonschema:"utf-8 (default) or base64"`
	Mode     string `json:"mode,omitempty" jsonschema:"octal permissions, e.g. 755 (default 644)"`
}

// ListFilesInput is list_files's arguments.
type ListFilesInput struct {
	Sandbox string `json:"sandbox" jsonschema:"the sandbox's id or name"`
	Path    string `json:"path" jsonschema:"absolute path of a directory in the sandbox"`
	Depth   int    `json:"depth,omitempty" jsonschema:"levels to descend (default 1: the directory's own entries)"`
}

// FileEntry is one file list_files and write_file report.
type FileEntry struct {
	Path       string    `json:"path"`
	Type       string    `json:"type"`
	Size       int64     `json:"size"`
	Mode       string    `json:"permissions"`
	ModifiedAt time.Time `json:"modified_at"`
}

// ListFilesOutput is list_files's result.
type ListFilesOutput struct {
	Entries []FileEntry `json:"entries"`
}

func (t *tools) registerFileTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "read_file", Description: "Read a file from a sandbox. Text comes back as utf-8, " +
		"anything else as base64; at most 1 MiB is returned (truncated is set beyond)."}, t.readFile)
	mcp.AddTool(s, &mcp.Tool{Name: "write_file", Description: "Write a file in a sandbox, replacing it if present (at most 16 MiB)."}, t.writeFile)
	mcp.AddTool(s, &mcp.Tool{Name: "list_files", Description: "List a directory of a sandbox: each entry's path, type, size, permissions and modification time."}, t.listFiles)
}

func needPath(sandbox, path string) error {
	if sandbox == "" {
		return fmt.Errorf("sandbox: required")
	}
	if path == "" {
		return fmt.Errorf("path: required")
	}
	return nil
}

func (t *tools) readFile(ctx context.Context, _ *mcp.CallToolRequest, in ReadInput) (*mcp.CallToolResult, ReadOutput, error) {
	if err := needPath(in.Sandbox, in.Path); err != nil {
		return nil, ReadOutput{}, err
	}
	rc, size, err := t.c.ReadFile(ctx, in.Sandbox, in.Path)
	if err != nil {
		return nil, ReadOutput{}, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, ReadLimit+1))
	if err != nil {
		return nil, ReadOutput{}, fmt.Errorf("reading %s: %w", in.Path, err)
	}
	truncated := len(b) > ReadLimit
	if truncated {
		b = b[:ReadLimit]
	}
	if size < 0 { // the daemon did not say; what was read, at least
		size = int64(len(b))
	}
	out := ReadOutput{Size: size, Truncated: truncated, Content: string(b), Encoding: "utf-8"}
	if !utf8.Valid(b) {
		out.Content, out.Encoding = base64.StdEncoding.EncodeToString(b), "base64"
	}
	return nil, out, nil
}

// writeContent validates in and returns the bytes and mode to write.
func writeContent(in WriteInput) ([]byte, os.FileMode, error) {
	if err := needPath(in.Sandbox, in.Path); err != nil {
		return nil, 0, err
	}
	data := []byte(in.Content)
	switch in.Encoding {
	case "", "utf-8":
	case "base64":
		var err error
		if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			return nil, 0, fmt.Errorf("content: not base64: %v", err)
		}
	default:
		return nil, 0, fmt.Errorf("encoding %q: want utf-8 or base64", in.Encoding)
	}
	if len(data) > WriteLimit {
		return nil, 0, fmt.Errorf("content: %d bytes, at most %d", len(data), WriteLimit)
	}
	mode := os.FileMode(0o644)
	if in.Mode != "" {
		var m uint32
		if _, err := fmt.Sscanf(in.Mode, "%o", &m); err != nil || m > 0o7777 || fmt.Sprintf("%o", m) != trimZeros(in.Mode) {
			return nil, 0, fmt.Errorf("mode %q: want octal permissions such as 644", in.Mode)
		}
		mode = os.FileMode(m)
	}
	return data, mode, nil
}

// trimZeros drops leading zeros ("0755" is "755"; "0" stays).
func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}

func (t *tools) writeFile(ctx context.Context, _ *mcp.CallToolRequest, in WriteInput) (*mcp.CallToolResult, FileEntry, error) {
	data, mode, err := writeContent(in)
	if err != nil {
		return nil, FileEntry{}, err
	}
	e, err := t.c.WriteFile(ctx, in.Sandbox, in.Path, bytes.NewReader(data), mode)
	if err != nil {
		return nil, FileEntry{}, err
	}
	return nil, FileEntry{Path: e.Path, Type: e.Type, Size: e.Size, Mode: e.Permissions, ModifiedAt: e.ModifiedAt}, nil
}

func (t *tools) listFiles(ctx context.Context, _ *mcp.CallToolRequest, in ListFilesInput) (*mcp.CallToolResult, ListFilesOutput, error) {
	if err := needPath(in.Sandbox, in.Path); err != nil {
		return nil, ListFilesOutput{}, err
	}
	if in.Depth < 0 || in.Depth > 10 {
		return nil, ListFilesOutput{}, fmt.Errorf("depth %d: want 1 to 10", in.Depth)
	}
	if in.Depth == 0 {
		in.Depth = 1
	}
	es, err := t.c.ListDir(ctx, in.Sandbox, in.Path, in.Depth)
	if err != nil {
		return nil, ListFilesOutput{}, err
	}
	out := ListFilesOutput{Entries: []FileEntry{}}
	for _, e := range es {
		out.Entries = append(out.Entries, FileEntry{Path: e.Path, Type: e.Type, Size: e.Size, Mode: e.Permissions, ModifiedAt: e.ModifiedAt})
	}
	return nil, out, nil
}
