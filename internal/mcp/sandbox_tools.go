package mcp

import (
	"context"
	"fmt"
	"time"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CreateInput is create_sandbox's arguments.
type CreateInput struct {
	Image           string            `json:"image,omitempty" jsonschema:"image reference to start from (the daemon's default image, a Debian with python3, when empty)"`
	Runtime         string            `json:"runtime,omitempty" jsonschema:"isolation: gvisor (a gVisor container, the default) or vm (a microVM)"`
	Timeout         float64           `json:"timeout,omitempty" jsonschema:"seconds the sandbox lives before it is ended (default 900; at most the server's maximum)"`
	Name            string            `json:"name,omitempty" jsonschema:"optional unique name for the sandbox"`
	CPU             float64           `json:"cpu,omitempty" jsonschema:"CPU cores (default 1)"`
	MemoryMB        int64             `json:"memory_mb,omitempty" jsonschema:"memory in MiB (default 512)"`
	Env             map[string]string `json:"env,omitempty" jsonschema:"environment variables of every command"`
	Workdir         string            `json:"workdir,omitempty" jsonschema:"working directory of commands"`
	BlockNetwork    bool              `json:"block_network,omitempty" jsonschema:"true: no network at all"`
	CIDRAllowlist   []string          `json:"cidr_allowlist,omitempty" jsonschema:"allow only these CIDRs (e.g. 1.1.1.0/24); empty with no domain allowlist: the public internet"`
	DomainAllowlist []string          `json:"domain_allowlist,omitempty" jsonschema:"allow only these domains (e.g. pypi.org)"`
	Tags            map[string]string `json:"tags,omitempty" jsonschema:"labels to find it by later (the key mcp is set by the server)"`
	Volumes         []VolumeInput     `json:"volumes,omitempty" jsonschema:"named volumes (made with corral volume create) to mount; their files outlive the sandbox"`
	Secrets         []string          `json:"secrets,omitempty" jsonschema:"names of stored secrets (corral secret create) whose keys and values every command gets as environment variables"`
	SecretHeaders   []HeaderInput     `json:"secret_headers,omitempty" jsonschema:"egress header rules: the network proxy sets a header from a stored secret on requests to a host, so the sandbox never holds the value"`
}

// VolumeInput is one volume mount of create_sandbox.
type VolumeInput struct {
	Name     string `json:"name" jsonschema:"the volume's name"`
	Path     string `json:"path" jsonschema:"absolute path inside the sandbox to mount it at"`
	ReadOnly bool   `json:"read_only,omitempty" jsonschema:"true: mount it read-only"`
}

// HeaderInput is one egress header rule of create_sandbox.
type HeaderInput struct {
	Secret   string `json:"secret" jsonschema:"the stored secret's name"`
	Key      string `json:"key" jsonschema:"the key within the secret whose value is used"`
	Host     string `json:"host" jsonschema:"the host whose TLS requests get the header (e.g. api.example.com; port 443, the ordinary methods; never plain HTTP)"`
	Header   string `json:"header" jsonschema:"the header's name (e.g. Authorization)"`
	Template string `json:"template,omitempty" jsonschema:"the header's value with {value} for the secret (default {value}), e.g. Bearer {value}"`
}

// SandboxInfo is what the tools report about a sandbox.
type SandboxInfo struct {
	ID        string            `json:"id"`
	Name      string            `json:"name,omitempty"`
	State     string            `json:"state"`
	Runtime   string            `json:"runtime"`
	Image     string            `json:"image"`
	Tags      map[string]string `json:"tags,omitempty"`
	ExpiresAt *time.Time        `json:"expires_at,omitempty"`
	EndReason string            `json:"end_reason,omitempty"`
	Error     string            `json:"error,omitempty"`
	Volumes   []VolumeInput     `json:"volumes,omitempty"`
	// Secrets are the names of its secrets, never their values.
	Secrets []string `json:"secrets,omitempty"`
}

func info(s *apiv1.Sandbox) SandboxInfo {
	out := SandboxInfo{ID: s.ID, Name: s.Name, State: s.State, Runtime: s.Runtime, Image: s.Image,
		Tags: s.Tags, ExpiresAt: s.ExpiresAt, EndReason: s.EndReason, Error: s.Error, Secrets: s.Secrets}
	for _, v := range s.Volumes {
		out.Volumes = append(out.Volumes, VolumeInput{Name: v.Name, Path: v.Path, ReadOnly: v.ReadOnly})
	}
	return out
}

// IDInput names a sandbox.
type IDInput struct {
	Sandbox string `json:"sandbox" jsonschema:"the sandbox's id or name"`
}

// PauseInput is pause's arguments.
type PauseInput struct {
	Sandbox        string `json:"sandbox" jsonschema:"the sandbox's id or name"`
	FilesystemOnly bool   `json:"filesystem_only,omitempty" jsonschema:"keep only the files: processes end, and resume boots the sandbox afresh"`
}

// ListInput is list_sandboxes's arguments.
type ListInput struct {
	State       string `json:"state,omitempty" jsonschema:"only sandboxes in this state (e.g. running, paused, ended)"`
	SessionOnly bool   `json:"session_only,omitempty" jsonschema:"true: only sandboxes this MCP session created"`
}

// ListOutput is list_sandboxes's result.
type ListOutput struct {
	Sandboxes []SandboxInfo `json:"sandboxes"`
}

// SnapshotInput is snapshot's arguments.
type SnapshotInput struct {
	Sandbox string `json:"sandbox" jsonschema:"the sandbox's id or name"`
	Kind    string `json:"kind,omitempty" jsonschema:"memory (default: the running state, processes included; create_sandbox cannot start from it here, use fork) or filesystem (an image of its files, usable as create_sandbox's image)"`
	Name    string `json:"name,omitempty" jsonschema:"memory: the snapshot's name; filesystem: the image tag"`
}

// SnapshotOutput is snapshot's result.
type SnapshotOutput struct {
	Kind  string `json:"kind"`
	ID    string `json:"id,omitempty"`
	Name  string `json:"name,omitempty"`
	Image string `json:"image,omitempty"`
}

// ForkInput is fork's arguments.
type ForkInput struct {
	Sandbox string `json:"sandbox" jsonschema:"the sandbox's id or name"`
	Count   int    `json:"count,omitempty" jsonschema:"how many copies (default 1, at most 100)"`
}

func (t *tools) registerSandboxTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "create_sandbox", Description: "Create and start an isolated Linux sandbox and return its id. " +
		"Use the id with run_command, write_file, read_file and list_files. The sandbox ends at its timeout; terminate it when done."}, t.create)
	mcp.AddTool(s, &mcp.Tool{Name: "list_sandboxes", Description: "List sandboxes with their id, state, runtime, image, tags and expiry."}, t.list)
	mcp.AddTool(s, &mcp.Tool{Name: "pause", Description: "Pause a running sandbox: its processes freeze until resume " +
		"(with filesystem_only, only its files are kept and resume boots it afresh)."}, t.pause)
	mcp.AddTool(s, &mcp.Tool{Name: "resume", Description: "Resume a paused sandbox."}, t.resume)
	mcp.AddTool(s, &mcp.Tool{Name: "terminate", Description: "End a sandbox and free what it holds. Its files are lost unless snapshotted."}, t.terminate)
	mcp.AddTool(s, &mcp.Tool{Name: "snapshot", Description: "Snapshot a sandbox: its memory and processes (kind memory) or its files as an image (kind filesystem)."}, t.snapshot)
	mcp.AddTool(s, &mcp.Tool{Name: "fork", Description: "Copy a running sandbox, processes and files included, into count new sandboxes; returns them."}, t.fork)
}

// createRequest validates in and turns it into the API's request.
func (t *tools) createRequest(in CreateInput, session string) (apiv1.CreateSandboxRequest, error) {
	if in.Runtime != "" && in.Runtime != "gvisor" && in.Runtime != "vm" {
		return apiv1.CreateSandboxRequest{}, fmt.Errorf("runtime %q: want gvisor or vm", in.Runtime)
	}
	if in.Timeout < 0 {
		return apiv1.CreateSandboxRequest{}, fmt.Errorf("timeout %v: must be positive seconds", in.Timeout)
	}
	timeout := time.Duration(in.Timeout * float64(time.Second))
	if timeout > t.maxTimeout {
		return apiv1.CreateSandboxRequest{}, fmt.Errorf("timeout %gs: this server allows at most %gs", in.Timeout, t.maxTimeout.Seconds())
	}
	if timeout == 0 {
		timeout = min(defaultTimeout, t.maxTimeout)
	}
	if in.BlockNetwork && (len(in.CIDRAllowlist) > 0 || len(in.DomainAllowlist) > 0) {
		return apiv1.CreateSandboxRequest{}, fmt.Errorf("block_network and an allowlist: choose one")
	}
	if _, ok := in.Tags[TagKey]; ok {
		return apiv1.CreateSandboxRequest{}, fmt.Errorf("tag %q is set by the server", TagKey)
	}
	tags := map[string]string{TagKey: session}
	for k, v := range in.Tags {
		tags[k] = v
	}
	req := apiv1.CreateSandboxRequest{
		Runtime: in.Runtime, Image: in.Image, Timeout: timeout.Seconds(), Name: in.Name,
		CPU: in.CPU, MemoryMB: in.MemoryMB, Env: in.Env, Workdir: in.Workdir, Tags: tags,
		NetworkPolicy: apiv1.NetworkPolicy{BlockNetwork: in.BlockNetwork, CIDRAllowlist: in.CIDRAllowlist, DomainAllowlist: in.DomainAllowlist},
		Secrets:       in.Secrets,
	}
	// The daemon validates names, paths and rules and says which is wrong.
	for _, v := range in.Volumes {
		req.Volumes = append(req.Volumes, apiv1.VolumeMount{Name: v.Name, Path: v.Path, ReadOnly: v.ReadOnly})
	}
	for _, h := range in.SecretHeaders {
		req.SecretHeaders = append(req.SecretHeaders, apiv1.SecretHeader{Secret: h.Secret, Key: h.Key, Host: h.Host, Header: h.Header, Template: h.Template})
	}
	return req, nil
}

func (t *tools) create(ctx context.Context, r *mcp.CallToolRequest, in CreateInput) (*mcp.CallToolResult, SandboxInfo, error) {
	req, err := t.createRequest(in, t.sessionTag(r))
	if err != nil {
		return nil, SandboxInfo{}, err
	}
	sb, err := t.c.Create(ctx, req)
	if err != nil {
		return nil, SandboxInfo{}, err
	}
	return nil, info(sb), nil
}

func (t *tools) list(ctx context.Context, r *mcp.CallToolRequest, in ListInput) (*mcp.CallToolResult, ListOutput, error) {
	o := corral.ListOptions{}
	if in.State != "" {
		o.States = []string{in.State}
	}
	if in.SessionOnly {
		o.Tags = map[string]string{TagKey: t.sessionTag(r)}
	}
	all, err := t.c.ListAll(ctx, o)
	if err != nil {
		return nil, ListOutput{}, err
	}
	out := ListOutput{Sandboxes: []SandboxInfo{}}
	for i := range all {
		out.Sandboxes = append(out.Sandboxes, info(&all[i]))
	}
	return nil, out, nil
}

// sandboxCall adapts one of the client's sandbox methods into a handler.
func sandboxCall(f func(context.Context, string) (*apiv1.Sandbox, error)) mcp.ToolHandlerFor[IDInput, SandboxInfo] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in IDInput) (*mcp.CallToolResult, SandboxInfo, error) {
		if in.Sandbox == "" {
			return nil, SandboxInfo{}, fmt.Errorf("sandbox: required")
		}
		sb, err := f(ctx, in.Sandbox)
		if err != nil {
			return nil, SandboxInfo{}, err
		}
		return nil, info(sb), nil
	}
}

func (t *tools) pause(ctx context.Context, r *mcp.CallToolRequest, in PauseInput) (*mcp.CallToolResult, SandboxInfo, error) {
	pause := t.c.Pause
	if in.FilesystemOnly {
		pause = t.c.PauseFilesystem
	}
	return sandboxCall(pause)(ctx, r, IDInput{Sandbox: in.Sandbox})
}

func (t *tools) resume(ctx context.Context, r *mcp.CallToolRequest, in IDInput) (*mcp.CallToolResult, SandboxInfo, error) {
	return sandboxCall(t.c.Resume)(ctx, r, in)
}

func (t *tools) terminate(ctx context.Context, r *mcp.CallToolRequest, in IDInput) (*mcp.CallToolResult, SandboxInfo, error) {
	return sandboxCall(t.c.Terminate)(ctx, r, in)
}

func (t *tools) snapshot(ctx context.Context, _ *mcp.CallToolRequest, in SnapshotInput) (*mcp.CallToolResult, SnapshotOutput, error) {
	if in.Sandbox == "" {
		return nil, SnapshotOutput{}, fmt.Errorf("sandbox: required")
	}
	switch in.Kind {
	case "", "memory":
		snap, err := t.c.SnapshotMemory(ctx, in.Sandbox, in.Name)
		if err != nil {
			return nil, SnapshotOutput{}, err
		}
		return nil, SnapshotOutput{Kind: "memory", ID: snap.ID, Name: snap.Name}, nil
	case "filesystem":
		res, err := t.c.SnapshotFS(ctx, in.Sandbox, in.Name)
		if err != nil {
			return nil, SnapshotOutput{}, err
		}
		img := res.Digest
		if len(res.Tags) > 0 {
			img = res.Tags[0]
		}
		return nil, SnapshotOutput{Kind: "filesystem", Image: img}, nil
	}
	return nil, SnapshotOutput{}, fmt.Errorf("kind %q: want memory or filesystem", in.Kind)
}

func (t *tools) fork(ctx context.Context, _ *mcp.CallToolRequest, in ForkInput) (*mcp.CallToolResult, ListOutput, error) {
	if in.Sandbox == "" {
		return nil, ListOutput{}, fmt.Errorf("sandbox: required")
	}
	if in.Count == 0 {
		in.Count = 1
	}
	if in.Count < 1 || in.Count > 100 {
		return nil, ListOutput{}, fmt.Errorf("count %d: want 1 to 100", in.Count)
	}
	sbs, err := t.c.Fork(ctx, in.Sandbox, in.Count)
	if err != nil {
		return nil, ListOutput{}, err
	}
	out := ListOutput{Sandboxes: []SandboxInfo{}}
	for i := range sbs {
		out.Sandboxes = append(out.Sandboxes, info(&sbs[i]))
	}
	return nil, out, nil
}
