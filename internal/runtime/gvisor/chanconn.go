package gvisor

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// chanConn is a connection to the agent's socket that knows which socket
// file it came through. The channel directory is the guest's to write: a
// root guest process can remove the agent's socket and bind one of its
// own in its place, which the daemon would dial next (after a restart, a
// pause or a snapshot). CheckChannel sees that at once.
type chanConn struct {
	net.Conn
	path     string
	dev, ino uint64
}

// CheckChannel reports an error when the socket file the connection came
// through is gone or is another file (agentapi.ChannelChecker).
func (c *chanConn) CheckChannel() error {
	var st unix.Stat_t
	if err := unix.Lstat(c.path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("the agent's socket %s was removed", guestChanDir+"/"+agentSocket)
		}
		return fmt.Errorf("checking the agent's socket: %w", err)
	}
	if st.Dev != c.dev || st.Ino != c.ino {
		return fmt.Errorf("the agent's socket %s was replaced by another file", guestChanDir+"/"+agentSocket)
	}
	return nil
}

// identify wraps conn, dialed through the socket file whose stat is st.
func identify(conn net.Conn, path string, st *unix.Stat_t) net.Conn {
	return &chanConn{Conn: conn, path: path, dev: st.Dev, ino: st.Ino}
}
