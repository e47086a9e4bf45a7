// Package probe is the attacker's side of `corral selftest`: small,
// self-contained attempts that run inside a sandbox (as `corral
// selftest-probe NAME JSON`) and report what they achieved as one JSON
// object on stdout. Each probe only tries and reports; whether what it
// achieved means the sandbox was contained is judged on the host, with the
// host's own evidence (internal/selftest).
//
// It runs in any image the sandbox has (the corral binary is static), so
// it imports only the standard library and x/sys, and nothing of Corral.
package probe

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
)

// Cmd is the hidden subcommand that runs a probe.
const Cmd = "selftest-probe"

// A probe takes its JSON arguments and returns its JSON-encodable result.
type probeFunc func(args json.RawMessage) (any, error)

var probes = map[string]probeFunc{
	"info":     info,
	"connect":  connect,
	"listen":   listen,
	"rawsock":  rawSocket,
	"conns":    holdConns,
	"procs":    procs,
	"findfile": findFile,
	"devices":  devices,
	"mounts":   mounts,
	"procsys":  procSys,
	"ptrace":   ptraceAll,
	"syscalls": syscalls,
	"fork":     forkUntil,
	"alloc":    alloc,
	"fill":     fill,
	"files":    manyFiles,
	"fds":      manyFDs,
	"output":   output,
	"burn":     burn,
	"tokens":   tokens,
	"readable": readable,
	"outlive":  outlive,
	"linger":   linger,
	"hijack":   hijack,
	"plant":    plant,
}

// Names lists the probes, for help text and tests.
func Names() []string {
	n := make([]string, 0, len(probes))
	for k := range probes {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Result is what every probe prints: its own result under "result", or
// the error that stopped it.
type Result struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// Main runs the probe args[0] with the JSON arguments args[1] (optional)
// and writes its Result to out. It returns the exit code: 0 when the probe
// ran (whatever it found), 2 for a usage error.
func Main(args []string, out io.Writer) int {
	if len(args) == 0 || len(args) > 2 {
		fmt.Fprintf(os.Stderr, "usage: corral %s NAME [JSON]; probes: %v\n", Cmd, Names())
		return 2
	}
	p, ok := probes[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "corral %s: no probe %q; probes: %v\n", Cmd, args[0], Names())
		return 2
	}
	raw := json.RawMessage("{}")
	if len(args) == 2 {
		raw = json.RawMessage(args[1])
	}
	res, err := p(raw)
	var r Result
	if err != nil {
		r.Error = err.Error()
	}
	if res != nil {
		b, merr := json.Marshal(res)
		if merr != nil {
			r.Error = merr.Error()
		}
		r.Result = b
	}
	if err := json.NewEncoder(out).Encode(r); err != nil {
		return 1
	}
	return 0
}

// decode reads a probe's arguments into v.
func decode(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("arguments: %w", err)
	}
	return nil
}

// errString is err's text, or "" for nil: results carry errors as text.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
