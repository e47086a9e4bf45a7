// Package mcp serves Corral as Model Context Protocol tools: an agent
// (an LLM client such as Claude Desktop or an IDE) creates sandboxes, runs
// commands in them and reads and writes their files. The tools call the
// daemon's HTTP API through the Go SDK (sdk/go/corral), so the same server
// runs as its own process (`corral mcp`, over stdio) or beside the daemon.
package mcp

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"corral/sdk/go/corral"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TagKey is the tag every sandbox an MCP session creates carries; its
// value is the session's id.
const TagKey = "mcp"

// Options configure a server.
type Options struct {
	// MaxTimeout bounds the lifetime of a sandbox the session creates
	// (DefaultMaxTimeout when zero).
	MaxTimeout time.Duration
	// Version is reported to clients as the server's version.
	Version string
}

// DefaultMaxTimeout is Options.MaxTimeout's default.
const DefaultMaxTimeout = time.Hour

// defaultTimeout is a created sandbox's lifetime when the tool call does
// not say (bounded by MaxTimeout).
const defaultTimeout = 15 * time.Minute

// tools holds what every tool handler needs.
type tools struct {
	c *corral.Client
	// session tags the sandboxes of a session without an id of its own
	// (stdio's: one per process).
	session    string
	maxTimeout time.Duration
}

// sessionTag is the value of the TagKey tag of the sandboxes r's session
// creates: a digest of its MCP session id (streamable HTTP's, which is
// the session's credential and stays out of tags), or the server's own
// id for a session without one (stdio).
func (t *tools) sessionTag(r *mcp.CallToolRequest) string {
	if r == nil || r.Session == nil || r.Session.ID() == "" {
		return t.session
	}
	sum := sha256.Sum256([]byte(r.Session.ID()))
	return hex.EncodeToString(sum[:8])
}

// New returns an MCP server with Corral's tools over c. The sandboxes a
// session creates carry the tag mcp=<an id of the session>.
func New(c *corral.Client, o Options) *mcp.Server {
	if o.MaxTimeout <= 0 {
		o.MaxTimeout = DefaultMaxTimeout
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	t := &tools{c: c, session: newSessionID(), maxTimeout: o.MaxTimeout}
	s := mcp.NewServer(&mcp.Implementation{Name: "corral", Title: "Corral sandboxes", Version: o.Version},
		&mcp.ServerOptions{Instructions: instructions})
	t.register(s)
	return s
}

const instructions = "Corral runs code in isolated sandboxes (gVisor containers or microVMs). " +
	"Create a sandbox with create_sandbox, then run_command, write_file, read_file and list_files in it by its id; " +
	"terminate it when done (it also ends by itself at its timeout)."

// newSessionID returns a random id for a session's tag.
func newSessionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// register adds every tool to s.
func (t *tools) register(s *mcp.Server) {
	t.registerSandboxTools(s)
	t.registerExecTool(s)
	t.registerFileTools(s)
}
