package apiv1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// BuildRequest is the body of POST /v1/images/build.
type BuildRequest struct {
	Spec BuildSpec `json:"spec"`
	// Tag names the built image (name:tag); empty leaves it untagged.
	Tag string `json:"tag,omitempty"`
	// NoCache runs every step even when its result is cached.
	NoCache bool `json:"no_cache,omitempty"`
}

// BuildSpec is an image recipe: a base, steps run in order (each one a
// cached layer), and the image's run configuration.
type BuildSpec struct {
	Base  BuildBase   `json:"base"`
	Steps []BuildStep `json:"steps,omitempty"`
	// Cmd, Env, Workdir and User are the image's defaults; Env is merged
	// over the env steps' values, the others replace them.
	Cmd     []string          `json:"cmd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Workdir string            `json:"workdir,omitempty"`
	User    string            `json:"user,omitempty"`
	// Resources of each build sandbox (defaults: 2 CPUs, 2048 MB).
	CPU      float64 `json:"cpu,omitempty"`
	MemoryMB int64   `json:"memory_mb,omitempty"`
	// StepTimeout bounds each step, in seconds (default 1800).
	StepTimeout float64 `json:"step_timeout,omitempty"`
}

// BuildBase is where an image starts: exactly one of Debian or Image.
// In a spec file it may also be a string: "debian:SUITE" or an image
// reference.
type BuildBase struct {
	// Debian is a Debian suite ("bookworm") built with mmdebstrap.
	Debian string `json:"debian,omitempty"`
	// Packages are extra Debian packages installed into the base.
	Packages []string `json:"packages,omitempty"`
	// Image is a Corral image (name:tag or sha256:...) or, when the
	// daemon has no such image, a registry reference it pulls.
	Image string `json:"image,omitempty"`
	// Insecure allows a plain-HTTP registry for Image.
	Insecure bool `json:"insecure,omitempty"`
}

// UnmarshalJSON accepts the object form and the string shorthand.
func (b *BuildBase) UnmarshalJSON(data []byte) error {
	var s string
	if json.Unmarshal(data, &s) == nil {
		*b = ParseBaseShorthand(s)
		return nil
	}
	type plain BuildBase
	return strictUnmarshal(data, (*plain)(b))
}

// ParseBaseShorthand turns "debian:SUITE" or an image reference into a base.
func ParseBaseShorthand(s string) BuildBase {
	if suite, ok := strings.CutPrefix(s, "debian:"); ok {
		return BuildBase{Debian: suite}
	}
	return BuildBase{Image: s}
}

// BuildStep is one step: exactly one field is set.
type BuildStep struct {
	// AptInstall installs Debian packages (as root).
	AptInstall []string `json:"apt_install,omitempty"`
	// PipInstall installs Python packages with python3 -m pip.
	PipInstall *PipInstall `json:"pip_install,omitempty"`
	// NpmInstall installs npm packages globally.
	NpmInstall *NpmInstall `json:"npm_install,omitempty"`
	// Run runs shell commands (/bin/sh -ec, one script).
	Run StringList `json:"run,omitempty"`
	// Copy adds a client's file or directory, uploaded as a layer.
	Copy *CopyStep `json:"copy,omitempty"`
	// Env sets variables for later steps and the image.
	Env map[string]string `json:"env,omitempty"`
	// Workdir sets the directory later steps (and the image) run in; it is
	// created if missing.
	Workdir string `json:"workdir,omitempty"`
	// User sets who later run, pip_install and npm_install steps (and the
	// image's processes) run as.
	User string `json:"user,omitempty"`
}

// PipInstall is a pip_install step. In a spec file it may also be a list
// of packages.
type PipInstall struct {
	Packages      []string `json:"packages"`
	IndexURL      string   `json:"index_url,omitempty"`
	ExtraIndexURL []string `json:"extra_index_url,omitempty"`
	FindLinks     []string `json:"find_links,omitempty"`
	NoIndex       bool     `json:"no_index,omitempty"`
}

// UnmarshalJSON accepts the object form and a list of packages.
func (p *PipInstall) UnmarshalJSON(data []byte) error {
	var pkgs []string
	if json.Unmarshal(data, &pkgs) == nil {
		*p = PipInstall{Packages: pkgs}
		return nil
	}
	type plain PipInstall
	return strictUnmarshal(data, (*plain)(p))
}

// NpmInstall is an npm_install step. In a spec file it may also be a list
// of packages.
type NpmInstall struct {
	Packages []string `json:"packages"`
	Registry string   `json:"registry,omitempty"`
}

// UnmarshalJSON accepts the object form and a list of packages.
func (n *NpmInstall) UnmarshalJSON(data []byte) error {
	var pkgs []string
	if json.Unmarshal(data, &pkgs) == nil {
		*n = NpmInstall{Packages: pkgs}
		return nil
	}
	type plain NpmInstall
	return strictUnmarshal(data, (*plain)(n))
}

// CopyStep adds files. The client tars Src (a path on its machine) into a
// layer whose entries sit at Dst, uploads it with POST /v1/images/layers
// and sends its digest as Layer; the daemon never reads Src.
type CopyStep struct {
	Src   string `json:"src"`
	Dst   string `json:"dst"`
	Layer string `json:"layer,omitempty"`
}

// StringList is a list of strings that a spec file may also give as one
// string.
type StringList []string

// UnmarshalJSON accepts a string or a list of strings.
func (l *StringList) UnmarshalJSON(data []byte) error {
	var s string
	if json.Unmarshal(data, &s) == nil {
		*l = StringList{s}
		return nil
	}
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		return fmt.Errorf("want a string or a list of strings")
	}
	*l = list
	return nil
}

// LayerInfo is the body of POST /v1/images/layers and
// GET /v1/images/layers/{digest}.
type LayerInfo struct {
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// Build event types.
const (
	BuildEventStep   = "step"   // a step started, was cached, finished or failed
	BuildEventOutput = "output" // output of a running step
	BuildEventDone   = "done"   // the build finished; Image is set
	BuildEventError  = "error"  // the build failed; Error is set
)

// Build step states.
const (
	StepRunning = "running"
	StepCached  = "cached"
	StepDone    = "done"
	StepFailed  = "failed"
)

// BuildEvent is one line of the NDJSON stream POST /v1/images/build answers
// with. Step 0 is the base; steps count from 1.
type BuildEvent struct {
	Type   string `json:"type"`
	Step   int    `json:"step"`
	Steps  int    `json:"steps,omitempty"`
	Name   string `json:"name,omitempty"`
	Status string `json:"status,omitempty"`
	// Stream ("stdout" or "stderr") and Data are set on output events.
	Stream string `json:"stream,omitempty"`
	Data   []byte `json:"data,omitempty"`
	// ExitCode is set when a step's command failed.
	ExitCode *int `json:"exit_code,omitempty"`
	// Seconds is how long a finished step took.
	Seconds float64 `json:"seconds,omitempty"`
	// Layer is the step's layer digest, when it made one.
	Layer string       `json:"layer,omitempty"`
	Image *Image       `json:"image,omitempty"`
	Error *ErrorDetail `json:"error,omitempty"`
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// SnapshotFSRequest is the body of POST /v1/sandboxes/{id}/snapshots/fs.
type SnapshotFSRequest struct {
	// Tag names the image (name:tag); empty leaves it untagged.
	Tag string `json:"tag,omitempty"`
}

// SnapshotFSResult answers POST /v1/sandboxes/{id}/snapshots/fs: the image,
// and the entries the sandbox had made that an image cannot hold (device
// nodes, FIFOs, sockets), left out of it.
type SnapshotFSResult struct {
	Image
	// LeftOut names the entries left out (absolute paths, at most 20);
	// LeftOutCount counts them all.
	LeftOut      []string `json:"left_out"`
	LeftOutCount int      `json:"left_out_count"`
}
