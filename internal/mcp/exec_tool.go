package mcp

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"corral/pkg/apiv1"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// OutputLimit bounds the stdout and the stderr run_command returns (each).
const OutputLimit = 64 << 10

const (
	defaultExecTimeout = 60 * time.Second
	maxExecTimeout     = 30 * time.Minute
)

// RunInput is run_command's arguments.
type RunInput struct {
	Sandbox string            `json:"sandbox" jsonschema:"the sandbox's id or name"`
	Command string            `json:"command,omitempty" jsonschema:"a shell command line, run with /bin/sh -c (give this or argv)"`
	Argv    []string          `json:"argv,omitempty" jsonschema:"the program and its arguments, run without a shell (give this or command)"`
	Timeout float64           `json:"timeout,omitempty" jsonschema:"seconds before the command is killed (default 60, at most 1800)"`
	Workdir string            `json:"workdir,omitempty" jsonschema:"working directory"`
	Env     map[string]string `json:"env,omitempty" jsonschema:"extra environment variables"`
}

// RunOutput is run_command's result.
type RunOutput struct {
	ExitCode        int    `json:"exit_code"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
	TimedOut        bool   `json:"timed_out,omitempty"`
	Signal          string `json:"signal,omitempty"`
	Message         string `json:"message,omitempty"`
}

func (t *tools) registerExecTool(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "run_command", Description: "Run a command in a sandbox and wait for it to end. " +
		"Returns exit_code, stdout and stderr (each cut to 64 KiB, with *_truncated set and the full size in *_bytes). " +
		"A command that runs past its timeout is killed and timed_out is set. Give either command (a shell line) or argv."}, t.run)
}

// execRequest validates in and turns it into the API's request.
func execRequest(in RunInput) (apiv1.ExecRequest, error) {
	if in.Sandbox == "" {
		return apiv1.ExecRequest{}, fmt.Errorf("sandbox: required")
	}
	var cmd []string
	switch {
	case in.Command != "" && len(in.Argv) > 0:
		return apiv1.ExecRequest{}, fmt.Errorf("command and argv: give one")
	case in.Command != "":
		cmd = []string{"/bin/sh", "-c", in.Command}
	case len(in.Argv) > 0 && in.Argv[0] != "":
		cmd = in.Argv
	default:
		return apiv1.ExecRequest{}, fmt.Errorf("command or argv: required")
	}
	if in.Timeout < 0 {
		return apiv1.ExecRequest{}, fmt.Errorf("timeout %v: must be positive seconds", in.Timeout)
	}
	timeout := time.Duration(in.Timeout * float64(time.Second))
	if timeout > maxExecTimeout {
		return apiv1.ExecRequest{}, fmt.Errorf("timeout %gs: at most %gs", in.Timeout, maxExecTimeout.Seconds())
	}
	if timeout == 0 {
		timeout = defaultExecTimeout
	}
	return apiv1.ExecRequest{Cmd: cmd, Cwd: in.Workdir, Env: in.Env, Timeout: timeout.Seconds()}, nil
}

func (t *tools) run(ctx context.Context, _ *mcp.CallToolRequest, in RunInput) (*mcp.CallToolResult, RunOutput, error) {
	req, err := execRequest(in)
	if err != nil {
		return nil, RunOutput{}, err
	}
	// The daemon kills the process at its timeout; this bounds a stream
	// that never ends for another reason.
	ctx, cancel := context.WithTimeout(ctx, time.Duration(req.Timeout*float64(time.Second))+time.Minute)
	defer cancel()
	stdout, stderr := &capWriter{max: OutputLimit}, &capWriter{max: OutputLimit}
	res, err := t.c.Run(ctx, in.Sandbox, req, nil, stdout, stderr)
	if err != nil {
		return nil, RunOutput{}, err
	}
	out := RunOutput{
		ExitCode: res.ExitCode, TimedOut: res.TimedOut, Signal: res.Signal, Message: res.Error,
		Stdout: stdout.text(), StdoutTruncated: stdout.cut(), StdoutBytes: stdout.total,
		Stderr: stderr.text(), StderrTruncated: stderr.cut(), StderrBytes: stderr.total,
	}
	if res.TimedOut {
		out.Message = fmt.Sprintf("the command ran past its timeout of %gs and was killed", req.Timeout)
	}
	return nil, out, nil
}

// capWriter keeps the first max bytes written to it and counts them all.
type capWriter struct {
	max   int
	buf   []byte
	total int64
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.total += int64(len(p))
	if room := w.max - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (w *capWriter) cut() bool { return w.total > int64(len(w.buf)) }

// text is the kept bytes as UTF-8 (a rune split by the cut dropped, other
// invalid bytes replaced), marked at its end when cut.
func (w *capWriter) text() string {
	b := w.buf
	if w.cut() {
		for i := 0; i < utf8.UTFMax-1 && len(b) > 0; i++ {
			if r, size := utf8.DecodeLastRune(b); r != utf8.RuneError || size != 1 {
				break
			}
			b = b[:len(b)-1]
		}
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if w.cut() {
		s += fmt.Sprintf("\n[output cut: %d of %d bytes shown]", len(w.buf), w.total)
	}
	return s
}
