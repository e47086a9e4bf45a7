package nfsd

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The export runs in a child process of the daemon ("corral nfsd ROOT
// ro|rw"): the NFS library recovers no panic, and its XDR decoder
// allocates whatever length a request claims, so a hostile guest that
// finds either takes down its own export only. The child's address space
// is bounded (RLIMIT_AS: what the Go runtime reserved at start, about
// 1.5 GiB of it untouched, plus childHeadroom), so a claimed opaque of
// more than that is a failed allocation there and the export ends; the
// heap is kept small (childHeap) so what a smaller claim allocated goes
// back soon. Connections reach it as file descriptors over the control
// socket at fd 3, one per message.

// childHeadroom is the address space the child may take beyond its start.
const childHeadroom = 512 << 20

// childHeap is the child's soft heap limit (debug.SetMemoryLimit).
const childHeap = 128 << 20

// ctlFD is the control socket's descriptor in the child.
const ctlFD = 3

// ChildMain serves args[0] (read-only when args[1] is "ro") until the
// control socket closes; it returns the exit code.
func ChildMain(args []string) int {
	if len(args) != 2 || (args[1] != "ro" && args[1] != "rw") {
		fmt.Fprintln(os.Stderr, "usage: corral nfsd ROOT ro|rw (run by the daemon)")
		return 2
	}
	if err := childServe(args[0], args[1] == "ro"); err != nil {
		fmt.Fprintln(os.Stderr, "corral nfsd:", err)
		return 1
	}
	return 0
}

func childServe(root string, readOnly bool) error {
	vm, err := vmSize()
	if err != nil {
		return fmt.Errorf("bounding memory: %w", err)
	}
	lim := unix.Rlimit{Cur: vm + childHeadroom, Max: vm + childHeadroom}
	if err := unix.Setrlimit(unix.RLIMIT_AS, &lim); err != nil {
		return fmt.Errorf("bounding memory: %w", err)
	}
	debug.SetMemoryLimit(childHeap)
	srv, err := newLocalServer(root, readOnly)
	if err != nil {
		return err
	}
	defer srv.Close()
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(ctlFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return err
		}
		if n == 0 && oobn == 0 {
			return nil // the daemon closed the control socket
		}
		fd, ok := oneRight(oob[:oobn])
		if !ok {
			continue
		}
		f := os.NewFile(uintptr(fd), "nfs-conn")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			continue
		}
		if err := srv.serve(c); err != nil {
			c.Close()
		}
	}
}

// vmSize is this process's address space now, in bytes.
func vmSize() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmSize:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmSize in /proc/self/status")
}

// oneRight returns the one descriptor a control message carries.
func oneRight(oob []byte) (int, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil || len(msgs) != 1 {
		return -1, false
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return -1, false
	}
	return fds[0], true
}
