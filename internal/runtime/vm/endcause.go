package vm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"corral/internal/runtime"
)

// lastWordsBytes is how much of the console's end EndCause reads: the
// kernel's last words are its last lines.
const lastWordsBytes = 16 << 10

// EndCause names why a vm ended by itself from the guest kernel's last
// words on its console: a panic ("Kernel panic - not syncing: ...", which
// with panic=-1 and -no-reboot ends QEMU at once), out of memory when
// that panic was the OOM killer's (nothing left to kill), or a power-off
// or reboot the guest asked for ("reboot: Power down", "reboot:
// Restarting system"). The kernel prints these at emergency level, which
// the quiet console still shows. A guest's root can write such a line
// itself; it changes only the name of its own sandbox's end.
func (r *Runtime) EndCause(ctx context.Context, ref runtime.Ref) (string, string) {
	if ref.Check() != nil {
		return "", ""
	}
	tail, err := readTail(consolePath(ref.Dir), lastWordsBytes)
	if err != nil {
		return "", ""
	}
	ram := int64(0)
	if info, err := ReadInfo(ref.Dir); err == nil {
		ram = info.RAMMB
	}
	return causeFromConsole(tail, ram)
}

// causeFromConsole reads the last terminal kernel message in tail.
func causeFromConsole(tail []byte, ramMB int64) (string, string) {
	lines := strings.Split(string(bytes.ToValidUTF8(tail, nil)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		line := strings.TrimSpace(lines[i])
		if _, msg, ok := strings.Cut(line, "Kernel panic - not syncing:"); ok {
			msg = strings.TrimSpace(msg)
			if len(msg) > 200 {
				msg = msg[:200]
			}
			if isOOMPanic(msg) {
				return runtime.CauseOOM, fmt.Sprintf("out of memory (the vm's memory is %d MiB): the guest kernel panicked: %s", ramMB, msg)
			}
			return runtime.CausePanic, "the guest kernel panicked: " + msg
		}
		switch {
		case strings.Contains(line, "reboot: Power down"):
			return runtime.CausePowerOff, "the guest powered itself off"
		case strings.Contains(line, "reboot: Restarting system"):
			return runtime.CausePowerOff, "the guest rebooted itself (a vm ends when it reboots)"
		}
	}
	return "", ""
}

// isOOMPanic reports whether a panic message is the OOM killer's.
func isOOMPanic(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "out of memory") || strings.Contains(m, "deadlocked on memory") ||
		strings.Contains(m, "oom")
}

// readTail reads at most n bytes from the end of path.
func readTail(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(st.Size()-n, 0)
	return io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
}
