package agent

import (
	"net/http"
	"strconv"

	"corral/internal/errdefs"
)

// processStdin is POST /v1/process/stdin?pid=N[&close=1]: the raw body is
// streamed into the process's stdin (or terminal) as it arrives.
func (s *Server) processStdin(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	pid, err := strconv.Atoi(q.Get("pid"))
	if err != nil || pid <= 0 {
		return errdefs.Invalid("pid", "%q is not a pid", q.Get("pid"))
	}
	closeAfter := q.Get("close") == "1" || q.Get("close") == "true"
	p, err := s.procs.getRunning(pid)
	if err != nil {
		return err
	}
	if err := p.writeStdin(r.Context(), r.Body); err != nil {
		return err
	}
	// A process may read its last input and exit before the close: its
	// stdin is then closed already, and the call did all it was asked.
	if closeAfter {
		if err := closeInput(p); err != nil && p.running() {
			return err
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// closeInput closes a pipe stdin, or sends end-of-file to a terminal.
func closeInput(p *process) error {
	if p.ptmx != nil {
		return p.sendEOF()
	}
	if _, err := p.stdinFile(); err != nil {
		return err
	}
	p.closeStdin()
	return nil
}
