package netpolicy

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/errdefs"
	"corral/internal/netpolicy/policy"
)

// Bounds of the NFLOG reader.
const (
	// nflogCopyRange is how much of each denied packet the kernel copies:
	// an IPv4 header with the longest options (60 bytes) and the ports.
	nflogCopyRange = 64
	// nflogBufSize is the one receive buffer. With one packet per message
	// and 64 bytes of it, a message is a few hundred bytes; a longer
	// datagram is read truncated and its cut message skipped.
	nflogBufSize = 16 << 10
	// nflogRcvBuf is the socket's receive buffer (the kernel caps it at
	// net.core.rmem_max): thousands of messages, more than the rate
	// limits of many sandboxes produce while Decide catches up.
	nflogRcvBuf = 1 << 20
	// nflogErrPause is how long the reader waits after an unexpected
	// receive error, so a persistent one does not spin.
	nflogErrPause = 100 * time.Millisecond
)

// nflogReader reads the denials the rules log to one NFLOG group and
// turns them into decisions.
type nflogReader struct {
	group   uint16
	f       *os.File
	rc      syscall.RawConn
	resolve func(prefix string, src netip.Addr) (id, reason string, ok bool)
	decide  func(policy.Decision)
	log     *slog.Logger
	pending []nflogPacket // read while waiting for the bind's ack

	stop, done chan struct{}
	closeOnce  sync.Once
	started    atomic.Bool

	lost      atomic.Uint64 // messages the kernel could not deliver (sequence gaps)
	nextSeq   uint32
	haveSeq   bool
	warned    time.Time // last loss warning
	unwarned  uint64    // lost since then
	overflows uint64    // ENOBUFS since then
}

// openNFLOG binds group on a new NFNETLINK_LOG socket. It fails when
// another socket has the group (errdefs.ErrFailedPrecondition) or the
// kernel has no nfnetlink_log (errdefs.ErrNotSupported).
func openNFLOG(group uint16, rcvbuf int, log *slog.Logger) (*nflogReader, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if errors.Is(err, unix.EPROTONOSUPPORT) {
		return nil, fmt.Errorf("opening nflog socket: kernel without nfnetlink (%v): %w", err, errdefs.ErrNotSupported)
	}
	if err != nil {
		return nil, fmt.Errorf("opening nflog socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("binding nflog socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sizing nflog socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), "nflog") // non-blocking: the runtime poller serves it
	r := &nflogReader{group: group, f: f, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	if r.rc, err = f.SyscallConn(); err == nil {
		err = r.bind()
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

// bind sends the group's configuration and waits for the kernel's ack.
func (r *nflogReader) bind() error {
	const seq = 1
	msg := nflogConfigMsg(r.group, nflogCopyRange, seq)
	var serr error
	if err := r.rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return serr != unix.EAGAIN
	}); err != nil || serr != nil {
		return fmt.Errorf("configuring nflog group %d: %w", r.group, errors.Join(err, serr))
	}
	if err := r.f.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return fmt.Errorf("configuring nflog group %d: %w", r.group, err)
	}
	defer r.f.SetReadDeadline(time.Time{})
	buf := make([]byte, nflogBufSize)
	for {
		n, err := r.recv(buf)
		if err != nil {
			return fmt.Errorf("configuring nflog group %d: %w", r.group, err)
		}
		found, err := parseAck(buf[:n], seq)
		switch {
		case errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EPERM):
			return fmt.Errorf("nflog group %d is bound by another socket (another daemon or NFLOG reader; choose another LogGroup): %v: %w",
				r.group, err, errdefs.ErrFailedPrecondition)
		case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP):
			return fmt.Errorf("nflog group %d: kernel without nfnetlink_log (%v): %w", r.group, err, errdefs.ErrNotSupported)
		case err != nil:
			return fmt.Errorf("binding nflog group %d: %w", r.group, err)
		case found:
			return nil
		}
		// A denial logged before the ack: keep it for run.
		pkts, _ := parseNFLOG(buf[:n], r.group)
		for _, p := range pkts {
			p.Payload = append([]byte(nil), p.Payload...)
			r.pending = append(r.pending, p)
		}
	}
}

// recv reads one datagram from the kernel into buf. A datagram longer
// than buf is cut to it (its last message then fails to parse).
func (r *nflogReader) recv(buf []byte) (int, error) {
	var n int
	var from unix.Sockaddr
	var rerr error
	err := r.rc.Read(func(fd uintptr) bool {
		n, from, rerr = unix.Recvfrom(int(fd), buf, 0)
		return rerr != unix.EAGAIN
	})
	if err != nil {
		return 0, err
	}
	if rerr != nil {
		return 0, rerr
	}
	if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != 0 {
		return 0, nil // not from the kernel: ignored
	}
	return n, nil
}

// start runs the reader until close.
func (r *nflogReader) start(resolve func(string, netip.Addr) (string, string, bool), decide func(policy.Decision)) {
	r.resolve, r.decide = resolve, decide
	r.started.Store(true)
	go r.run()
}

func (r *nflogReader) run() {
	defer close(r.done)
	r.handle(r.pending)
	r.pending = nil
	buf := make([]byte, nflogBufSize)
	for {
		n, err := r.recv(buf)
		select {
		case <-r.stop:
			return
		default:
		}
		switch {
		case errors.Is(err, unix.ENOBUFS):
			// The socket overflowed; the next sequence number says by how
			// much.
			r.overflows++
			r.warnLost(false)
			continue
		case err != nil:
			r.log.Warn("reading nflog", "op", "nflog", "group", r.group, "err", err)
			select {
			case <-r.stop:
				return
			case <-time.After(nflogErrPause):
			}
			continue
		}
		pkts, bad := parseNFLOG(buf[:n], r.group)
		if bad > 0 {
			r.log.Warn("malformed nflog messages skipped", "op", "nflog", "group", r.group, "count", bad)
		}
		r.handle(pkts)
	}
}

// handle turns logged packets into decisions.
func (r *nflogReader) handle(pkts []nflogPacket) {
	for _, p := range pkts {
		r.countSeq(p)
		ip, err := parseIPv4(p.Payload)
		if err != nil {
			r.log.Debug("unreadable logged packet", "op", "nflog", "prefix", p.Prefix, "err", err)
			continue
		}
		id, reason, ok := r.resolve(p.Prefix, ip.Src)
		if !ok {
			r.log.Debug("logged denial of no known sandbox", "op", "nflog", "prefix", p.Prefix, "src", ip.Src.String())
			continue
		}
		d := policy.Decision{Time: time.Now(), SandboxID: id, Proto: protoName(ip.Proto),
			Dst: ip.Dst, Port: ip.Port, Reason: reason, Via: "nftables"}
		switch reason {
		case AllowedFlow:
			d.Allowed, d.Reason = true, ""
		case DeniedSpoofed:
			d.Reason = DeniedSpoofed + " source " + ip.Src.String()
		}
		r.decide(d)
	}
}

// countSeq counts the messages lost before p: the kernel numbers every
// message of the group, delivered or not.
func (r *nflogReader) countSeq(p nflogPacket) {
	if !p.HasSeq {
		return
	}
	if gap := p.Seq - r.nextSeq; r.haveSeq && gap != 0 && gap < 1<<31 {
		r.lost.Add(uint64(gap))
		r.unwarned += uint64(gap)
		r.warnLost(false)
	}
	r.nextSeq, r.haveSeq = p.Seq+1, true
}

// warnLost logs losses at most once a second (always when final), so an
// overflowing socket does not flood the daemon's log either.
func (r *nflogReader) warnLost(final bool) {
	if r.unwarned == 0 && r.overflows == 0 || !final && time.Since(r.warned) < time.Second {
		return
	}
	r.log.Warn("denials not logged: the nflog socket overflowed (Decide too slow?)", "op", "nflog", "group", r.group,
		"lost", r.unwarned, "overflows", r.overflows, "lost_total", r.lost.Load())
	r.warned, r.unwarned, r.overflows = time.Now(), 0, 0
}

// close stops the reader and waits for it: no Decide call runs after it
// returns. Safe to call more than once.
func (r *nflogReader) close() {
	r.closeOnce.Do(func() {
		close(r.stop)
		r.f.Close() // wakes the pending read
		if r.started.Load() {
			<-r.done
		}
		r.warnLost(true)
	})
}
