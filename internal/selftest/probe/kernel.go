package probe

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Node is a device node the devices probe makes and reads.
type Node struct {
	Name  string `json:"name"`
	Block bool   `json:"block"`
	Major uint32 `json:"major"`
	Minor uint32 `json:"minor"`
}

// DevicesArgs ask the probe to make each node in a scratch directory and read its first
// Read bytes.
type DevicesArgs struct {
	Nodes []Node `json:"nodes"`
	Read  int    `json:"read,omitempty"`
}

// NodeResult is what happened to one node; SHA256 is the hash of what was
// read.
type NodeResult struct {
	Node     Node   `json:"node"`
	MknodErr string `json:"mknod_err,omitempty"`
	OpenErr  string `json:"open_err,omitempty"`
	ReadErr  string `json:"read_err,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
}

func devices(raw json.RawMessage) (any, error) {
	a := DevicesArgs{Read: 4096}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "corral-selftest-dev-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var out []NodeResult
	for _, n := range a.Nodes {
		r := NodeResult{Node: n}
		p := filepath.Join(dir, filepath.Base(n.Name))
		mode := uint32(unix.S_IFCHR)
		if n.Block {
			mode = unix.S_IFBLK
		}
		if err := unix.Mknod(p, mode|0o600, int(unix.Mkdev(n.Major, n.Minor))); err != nil {
			r.MknodErr = errnoName(err)
			out = append(out, r)
			continue
		}
		r.OpenErr, r.ReadErr, r.SHA256 = readHead(p, a.Read)
		out = append(out, r)
	}
	return out, nil
}

// readHead opens p and hashes its first n bytes, with raw reads under a
// deadline (a character device may never answer).
func readHead(p string, n int) (openErr, readErr, sum string) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return errnoName(err), "", ""
	}
	defer unix.Close(fd)
	buf := make([]byte, n)
	got := 0
	deadline := time.Now().Add(time.Second)
	for got < n && time.Now().Before(deadline) {
		m, err := unix.Read(fd, buf[got:])
		if err == unix.EAGAIN {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil || m <= 0 {
			if got == 0 {
				if err == nil {
					err = io.EOF
				}
				return "", errnoName(err), ""
			}
			break
		}
		got += m
	}
	if got == 0 {
		return "", "EAGAIN", ""
	}
	h := sha256.Sum256(buf[:got])
	return "", "", hex.EncodeToString(h[:])
}

// MountsArgs name the marker file to look for through every mount made.
type MountsArgs struct {
	Marker     string `json:"marker"`
	MaxEntries int    `json:"max_entries,omitempty"`
}

// Try is one attempt and its outcome ("" for success).
type Try struct {
	What string `json:"what"`
	Err  string `json:"err,omitempty"`
}

// MountsResult lists the attempts and where the marker was seen.
type MountsResult struct {
	Tries []Try    `json:"tries"`
	Found []string `json:"found,omitempty"`
}

// mounts mounts what a sandbox could use to reach the host's files (a
// devtmpfs and the block devices in it, a new proc, a bind of /) and looks
// for the host's marker file through each; then tries open_by_handle_at
// on the root's inode, the "shocker" escape.
func mounts(raw json.RawMessage) (any, error) {
	a := MountsArgs{MaxEntries: 200000}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	base, err := os.MkdirTemp("", "corral-selftest-mnt-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(base)
	var r MountsResult
	try := func(what string, err error) bool {
		r.Tries = append(r.Tries, Try{What: what, Err: errString(err)})
		return err == nil
	}
	mnt := func(src, fstype string, flags uintptr, name string) (string, bool) {
		p := filepath.Join(base, name)
		_ = os.MkdirAll(p, 0o700)
		ok := try("mount "+fstype+" "+src, unix.Mount(src, p, fstype, flags, ""))
		return p, ok
	}
	look := func(root string) {
		found, _ := findFile(mustJSON(FindArgs{Roots: []string{root}, Name: a.Marker, MaxEntries: a.MaxEntries}))
		r.Found = append(r.Found, found.(FindResult).Found...)
	}
	if p, ok := mnt("devtmpfs", "devtmpfs", 0, "dev"); ok {
		for _, dev := range blockDevices(p) {
			for _, fstype := range []string{"ext4", "xfs", "btrfs"} {
				if q, ok := mnt(dev, fstype, unix.MS_RDONLY, "blk-"+filepath.Base(dev)+"-"+fstype); ok {
					look(q)
					_ = unix.Unmount(q, unix.MNT_DETACH)
					break
				}
			}
		}
		_ = unix.Unmount(p, unix.MNT_DETACH)
	}
	if p, ok := mnt("/", "", unix.MS_BIND|unix.MS_REC, "bind-root"); ok {
		_ = unix.Unmount(p, unix.MNT_DETACH)
	}
	if p, ok := mnt("proc", "proc", 0, "proc"); ok {
		_ = unix.Unmount(p, unix.MNT_DETACH)
	}
	try("open_by_handle_at(root inode 2)", shocker())
	return r, nil
}

// blockDevices lists the block devices in a devtmpfs.
func blockDevices(dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&fs.ModeDevice != 0 && d.Type()&fs.ModeCharDevice == 0 {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// shocker asks for the file with inode 2 (a filesystem's root) by handle,
// relative to "/": a host kernel that honoured it would hand out the
// host's root directory.
func shocker() error {
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	h := unix.NewFileHandle(1, []byte{2, 0, 0, 0, 0, 0, 0, 0}) // FILEID_INO32_GEN: ino 2, gen 0
	got, err := unix.OpenByHandleAt(fd, h, unix.O_RDONLY)
	if err == nil {
		unix.Close(got)
	}
	return err
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// ProcSysArgs are the values the probe writes into the kernel's settings.
type ProcSysArgs struct {
	Hostname    string `json:"hostname"`
	CorePattern string `json:"core_pattern"`
	Marker      string `json:"marker"` // looked for in the kernel log
}

// procSys writes kernel settings a host shares with its containers when
// isolation fails (core_pattern runs a program as root on the host), sets
// the hostname, and reads the kernel log looking for the host's marker.
func procSys(raw json.RawMessage) (any, error) {
	var a ProcSysArgs
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	var tries []Try
	write := func(p, v string) {
		tries = append(tries, Try{What: "write " + p, Err: errString(os.WriteFile(p, []byte(v), 0o644))})
	}
	write("/proc/sys/kernel/core_pattern", a.CorePattern)
	write("/proc/sys/kernel/hostname", a.Hostname)
	tries = append(tries, Try{What: "sethostname", Err: errString(unix.Sethostname([]byte(a.Hostname)))})
	logText := ""
	buf := make([]byte, 1<<20)
	if n, err := unix.Klogctl(3, buf); err == nil { // SYSLOG_ACTION_READ_ALL
		logText = string(buf[:n])
		tries = append(tries, Try{What: "syslog(READ_ALL)"})
	} else {
		tries = append(tries, Try{What: "syslog(READ_ALL)", Err: errnoName(err)})
	}
	if b, err := readKmsg(); err == nil {
		logText += b
		tries = append(tries, Try{What: "read /dev/kmsg"})
	} else {
		tries = append(tries, Try{What: "read /dev/kmsg", Err: errnoName(err)})
	}
	return map[string]any{"tries": tries, "marker_in_kernel_log": a.Marker != "" && strings.Contains(logText, a.Marker)}, nil
}

func readKmsg() (string, error) {
	// Raw reads: an os.File of a non-blocking descriptor would wait in
	// Go's poller instead of returning EAGAIN at the end of the log.
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	var sb strings.Builder
	buf := make([]byte, 8192)
	for i := 0; i < 100000; i++ {
		n, err := unix.Read(fd, buf)
		if err == unix.EPIPE || err == unix.EINTR {
			continue // a record was overwritten while reading
		}
		if err != nil || n <= 0 {
			break
		}
		sb.Write(buf[:n])
	}
	return sb.String(), nil
}

// syscalls tries the calls that reach a kernel's most exposed surface and
// reports each one's errno ("" for success).
func syscalls(json.RawMessage) (any, error) {
	res := map[string]string{}
	call := func(name string, trap uintptr, a ...uintptr) {
		args := make([]uintptr, 6)
		copy(args, a)
		r, _, e := unix.Syscall6(trap, args[0], args[1], args[2], args[3], args[4], args[5])
		if e != 0 {
			res[name] = unix.ErrnoName(e)
			return
		}
		res[name] = ""
		if name == "userfaultfd" || name == "io_uring_setup" || name == "perf_event_open" || name == "bpf" {
			unix.Close(int(r))
		}
	}
	image := []byte("\x7fELF not a module")
	params := []byte{0}
	call("init_module", unix.SYS_INIT_MODULE, uintptr(unsafe.Pointer(&image[0])), uintptr(len(image)), uintptr(unsafe.Pointer(&params[0])))
	if f, err := os.Open("/proc/self/exe"); err == nil {
		call("finit_module", unix.SYS_FINIT_MODULE, f.Fd(), uintptr(unsafe.Pointer(&params[0])), 0)
		f.Close()
	}
	call("kexec_load", unix.SYS_KEXEC_LOAD, 0, 0, 0, 0)
	call("userfaultfd", unix.SYS_USERFAULTFD, unix.O_CLOEXEC)
	var ring [120]byte
	call("io_uring_setup", unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&ring[0])))
	pe := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK, Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{}))}
	call("perf_event_open", unix.SYS_PERF_EVENT_OPEN, uintptr(unsafe.Pointer(&pe)), 0, ^uintptr(0), ^uintptr(0), 0)
	call("bpf", unix.SYS_BPF, 5 /* BPF_PROG_LOAD */, uintptr(unsafe.Pointer(bpfProgLoad())), 128)
	call("iopl", unix.SYS_IOPL, 3)
	call("ioperm", unix.SYS_IOPERM, 0x80, 1, 1)
	return res, nil
}

// The program bpfProgLoad loads: a socket filter that returns 0 (r0 = 0;
// exit). Package variables, so that the addresses the attribute holds as
// integers stay valid.
var (
	bpfInsns   = []uint64{0x00000000000000b7, 0x0000000000000095}
	bpfLicense = []byte("GPL\x00")
)

// bpfProgLoad builds a BPF_PROG_LOAD attribute for bpfInsns.
func bpfProgLoad() *[128]byte {
	insns, license := bpfInsns, bpfLicense
	var attr [128]byte
	*(*uint32)(unsafe.Pointer(&attr[0])) = 1 // BPF_PROG_TYPE_SOCKET_FILTER
	*(*uint32)(unsafe.Pointer(&attr[4])) = uint32(len(insns))
	*(*uint64)(unsafe.Pointer(&attr[8])) = uint64(uintptr(unsafe.Pointer(&insns[0])))
	*(*uint64)(unsafe.Pointer(&attr[16])) = uint64(uintptr(unsafe.Pointer(&license[0])))
	return &attr
}

// HijackArgs say where the agent's channel is, and how long to hold it.
type HijackArgs struct {
	Socket  string `json:"socket"` // the agent's socket (gVisor)
	Seconds int    `json:"seconds,omitempty"`
}

// hijack replaces the agent's socket with a listener of its own that
// answers every connection with garbage, tries to open a vm agent's
// virtio port, and tries to stop the agent (PID 1); then holds the fake
// socket for Seconds.
func hijack(raw json.RawMessage) (any, error) {
	a := HijackArgs{Seconds: 20}
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	var tries []Try
	var l net.Listener
	if a.Socket != "" {
		err := os.Remove(a.Socket)
		tries = append(tries, Try{What: "remove " + a.Socket, Err: errString(err)})
		if err == nil {
			l, err = net.Listen("unix", a.Socket)
			tries = append(tries, Try{What: "listen on " + a.Socket, Err: errString(err)})
		}
	}
	ports, _ := filepath.Glob("/dev/vport*")
	for _, p := range ports {
		f, err := os.OpenFile(p, os.O_RDWR|unix.O_NONBLOCK, 0)
		tries = append(tries, Try{What: "open " + p, Err: errString(err)})
		if err == nil {
			_, _ = f.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\ncorral selftest garbage"))
			f.Close()
		}
	}
	tries = append(tries, Try{What: "kill(1, SIGSTOP)", Err: errString(unix.Kill(1, unix.SIGSTOP))})
	if l != nil {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\n\r\nnot your agent\n"))
				c.Close()
			}
		}()
		time.Sleep(time.Duration(a.Seconds) * time.Second)
		l.Close()
	}
	return map[string]any{"tries": tries}, nil
}

// PlantArgs name the directory to plant host-usable files in.
type PlantArgs struct {
	Dir string `json:"dir"`
}

// plant tries to leave, in a directory that lands on the host, what would
// be usable there: device nodes of a disk and of memory, and a setuid-root
// copy of a binary.
func plant(raw json.RawMessage) (any, error) {
	var a PlantArgs
	if err := decode(raw, &a); err != nil {
		return nil, err
	}
	var tries []Try
	for _, n := range []Node{{Name: "blk", Block: true, Major: 8, Minor: 0}, {Name: "blk-virtio", Block: true, Major: 254, Minor: 0}, {Name: "mem", Major: 1, Minor: 1}} {
		mode := uint32(unix.S_IFCHR)
		if n.Block {
			mode = unix.S_IFBLK
		}
		err := unix.Mknod(filepath.Join(a.Dir, n.Name), mode|0o666, int(unix.Mkdev(n.Major, n.Minor)))
		tries = append(tries, Try{What: "mknod " + n.Name, Err: errString(err)})
	}
	dst := filepath.Join(a.Dir, "suid")
	b, err := os.ReadFile("/proc/self/exe")
	if err == nil {
		err = os.WriteFile(dst, b, 0o755)
	}
	if err == nil {
		err = os.Chmod(dst, 0o755|os.ModeSetuid)
	}
	tries = append(tries, Try{What: "setuid copy", Err: errString(err)})
	return map[string]any{"tries": tries}, nil
}
