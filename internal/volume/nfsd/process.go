package nfsd

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"corral/internal/oomscore"
)

// Server is one export, served by a child process of the daemon
// (child.go) that is started again if it died: a guest that crashes its
// export gets a reset connection, which its NFS client redials.
type Server struct {
	exe, root string
	readOnly  bool

	mu     sync.Mutex
	closed bool
	cmd    *exec.Cmd
	ctl    *os.File      // the daemon's end of the control socket
	exited chan struct{} // closed when cmd has been waited for
}

// NewServer starts serving root (a volume's host mount) in a child
// running exe (the corral binary: "exe nfsd ROOT ro|rw").
func NewServer(exe, root string, readOnly bool) (*Server, error) {
	s := &Server{exe: exe, root: root, readOnly: readOnly}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.startLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) startLocked() error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "nfsd-ctl"), os.NewFile(uintptr(fds[1]), "nfsd-ctl")
	defer theirs.Close()
	mode := "rw"
	if s.readOnly {
		mode = "ro"
	}
	cmd := exec.Command(s.exe, "nfsd", s.root, mode)
	cmd.ExtraFiles = []*os.File{theirs} // fd 3
	// Its stderr is dropped: a guest that crashes its export again and
	// again must not fill the daemon's log with the stack traces.
	// Its stderr is dropped: a guest that crashes its export again and
	// again must not fill the daemon's log with the stack traces.
	cmd.Stderr = nil
	cmd.Env = []string{"GOMAXPROCS=2"}
	// The export dies with the daemon: nothing holds the volume open then.
	// (Pdeathsig follows the thread that started it; should the runtime
	// retire that thread, the child is killed early and Serve starts it
	// again.)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		ours.Close()
		return fmt.Errorf("starting the nfs server of %s: %w", s.root, err)
	}
	// It inherits the daemon's low OOM score; a guest drives it, and it is
	// started again if it dies, so the host's OOM killer takes it first.
	if err := oomscore.Set(cmd.Process.Pid, oomscore.Above()); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		ours.Close()
		return fmt.Errorf("starting the nfs server of %s: %w", s.root, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.ctl, s.exited = cmd, ours, exited
	return nil
}

// alive reports whether the child still runs. The caller holds s.mu.
func (s *Server) aliveLocked() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// Serve hands one relayed connection to the export, starting its child
// again if it died; the connection is the export's from then on.
func (s *Server) Serve(c net.Conn) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if !s.aliveLocked() {
		s.ctl.Close()
		if err := s.startLocked(); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	ctl := s.ctl
	s.mu.Unlock()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	err = unix.Sendmsg(int(ctl.Fd()), []byte{0}, unix.UnixRights(fds[1]), nil, 0)
	unix.Close(fds[1])
	if err != nil {
		unix.Close(fds[0])
		return fmt.Errorf("handing a connection to the nfs server: %w", err)
	}
	f := os.NewFile(uintptr(fds[0]), "nfs-conn")
	local, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return err
	}
	go splice(c, local)
	return nil
}

// splice copies both ways until either side ends, then closes both.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	a.Close()
	b.Close()
	<-done
}

// Close stops the export: its child is killed and waited for, so the
// volume's mount is no longer held open when Close returns.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.ctl.Close()
	_ = s.cmd.Process.Kill()
	<-s.exited
	return nil
}
