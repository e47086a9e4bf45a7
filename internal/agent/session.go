package agent

import (
	"net/http"
	"time"
)

// endSessionKey holds, in a connection's context, the func that ends it.
type endSessionKey struct{}

// endSessionDelay lets the answer reach the host before the connection
// closes.
const endSessionDelay = 20 * time.Millisecond

// endSession is POST /v1/session/end: the agent closes this connection
// right after answering and waits for the next one. The host calls it
// before saving a sandbox's state (a vm's memory snapshot), so that the
// saved agent holds no session a restored copy would resume in the middle
// of: whoever connects to the copy starts afresh. An agent listening on a
// host socket (gvisor) also closes that socket, which a snapshot cannot
// hold, until SIGUSR2 (hostListener); the host waits for the socket file
// to go before it saves.
func (s *Server) endSession(w http.ResponseWriter, r *http.Request) error {
	end, _ := r.Context().Value(endSessionKey{}).(func())
	w.WriteHeader(http.StatusNoContent)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	time.AfterFunc(endSessionDelay, func() {
		if end != nil {
			end()
		}
		if s.onEnd != nil {
			s.onEnd()
		}
	})
	s.log.Debug("session ended by the host", "op", "end_session")
	return nil
}
