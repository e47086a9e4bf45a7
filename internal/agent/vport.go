package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// vportListener serves the agent protocol on a virtio-serial port (the vm
// runtime's channel): one byte stream, one host at a time. Accept opens the
// port once the previous connection has closed and the host is connected;
// the connection ends (reads return EOF) when the host disconnects, after
// which the next Accept waits for the host to come back (a daemon restart).
type vportListener struct {
	name   string
	free   chan struct{} // holds a token while no connection is open
	closed chan struct{}
	once   sync.Once
}

// listenVport finds the port named name under /sys/class/virtio-ports.
func listenVport(name string) (net.Listener, error) {
	if _, err := findVport(name); err != nil {
		return nil, err
	}
	l := &vportListener{name: name, free: make(chan struct{}, 1), closed: make(chan struct{})}
	l.free <- struct{}{}
	return l, nil
}

// findVport returns the device of the port named name. It is looked up
// anew for each connection: the host may replug the port (after a vm is
// resumed), and the new one has another device node.
func findVport(name string) (string, error) {
	ports, _ := filepath.Glob("/sys/class/virtio-ports/*/name")
	for _, p := range ports {
		b, err := os.ReadFile(p)
		if err == nil && strings.TrimSpace(string(b)) == name {
			return "/dev/" + filepath.Base(filepath.Dir(p)), nil
		}
	}
	return "", fmt.Errorf("no virtio-serial port named %q", name)
}

// hostPoll is how often Accept checks whether the host has connected.
const hostPoll = 20 * time.Millisecond

func (l *vportListener) Accept() (net.Conn, error) {
	select {
	case <-l.free:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	for {
		// The port may be away for a moment while the host replugs it.
		path, err := findVport(l.name)
		var f *os.File
		if err == nil {
			f, err = os.OpenFile(path, os.O_RDWR|unix.O_NONBLOCK, 0)
		}
		if err == nil && hostConnected(f) {
			return &vportConn{File: f, release: func() { l.free <- struct{}{} }}, nil
		}
		if f != nil {
			f.Close()
		}
		select {
		case <-time.After(hostPoll):
		case <-l.closed:
			l.free <- struct{}{}
			return nil, net.ErrClosed
		}
	}
}

// hostConnected: the port reports POLLHUP while no host is connected.
func hostConnected(f *os.File) bool {
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLIN | unix.POLLOUT}}
	if _, err := unix.Poll(fds, 0); err != nil {
		return false
	}
	return fds[0].Revents&unix.POLLHUP == 0
}

func (l *vportListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *vportListener) Addr() net.Addr { return vportAddr(l.name) }

// vportConn is an open port as a net.Conn.
type vportConn struct {
	*os.File
	once    sync.Once
	release func()
}

func (c *vportConn) Read(p []byte) (int, error) {
	n, err := c.File.Read(p)
	if err == nil && n == 0 {
		return 0, errors.New("virtio-serial: host disconnected")
	}
	return n, err
}

func (c *vportConn) Close() error {
	var err error
	c.once.Do(func() {
		err = c.File.Close()
		c.release()
	})
	return err
}

func (c *vportConn) LocalAddr() net.Addr  { return vportAddr(c.Name()) }
func (c *vportConn) RemoteAddr() net.Addr { return vportAddr("host") }

type vportAddr string

func (a vportAddr) Network() string { return "virtio-serial" }
func (a vportAddr) String() string  { return string(a) }
