package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"syscall"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// handlerFunc is one RPC. It writes its own success response; an error it
// returns is written as the protocol's JSON error body (when no response
// has been started yet).
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// wrap turns a handlerFunc into an http.Handler that writes errors and
// survives panics: the agent is PID 1 and must not die on a bad request.
func (s *Server) wrap(fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panic", "op", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				s.writeError(w, r, fmt.Errorf("internal error in %s", r.URL.Path))
			}
		}()
		if err := fn(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		// The caller is gone (or the connection): nobody reads an answer.
		s.log.Debug("caller went away", "op", r.URL.Path, "err", err)
		return
	}
	status := errdefs.HTTPStatus(err)
	if status >= 500 {
		s.log.Error("request failed", "op", r.URL.Path, "err", err)
	} else {
		s.log.Debug("request refused", "op", r.URL.Path, "err", err)
	}
	writeJSON(w, status, errdefs.ToWire(err))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errdefs.ToWire(fmt.Errorf("encoding response: %w", err)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func notFound(_ http.ResponseWriter, r *http.Request) error {
	return fmt.Errorf("%w: no route for %s %s", errdefs.ErrNotFound, r.Method, r.URL.Path)
}

// decodeJSON reads a JSON body of at most agentapi.MaxJSONBody bytes into v.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, agentapi.MaxJSONBody)
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fmt.Errorf("%w: request body larger than %d bytes", errdefs.ErrInvalidArgument, agentapi.MaxJSONBody)
		}
		return fmt.Errorf("%w: decoding request body: %v", errdefs.ErrInvalidArgument, err)
	}
	// Drain the rest, so that a valid object followed by megabytes of
	// padding is refused too.
	if _, err := io.Copy(io.Discard, body); err != nil {
		return fmt.Errorf("%w: request body larger than %d bytes", errdefs.ErrInvalidArgument, agentapi.MaxJSONBody)
	}
	return nil
}

// fsError classifies a filesystem error into an errdefs kind, naming the
// sandbox path rather than the host path.
func fsError(op, path string, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		err = le.Err
	}
	if kind := errnoKind(err); kind != nil {
		return fmt.Errorf("%s %s: %w: %v", op, path, kind, err)
	}
	return fmt.Errorf("%s %s: %w", op, path, err)
}

func errnoKind(err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return nil
	}
	switch errno {
	case syscall.ENOENT:
		return errdefs.ErrNotFound
	case syscall.EEXIST:
		return errdefs.ErrAlreadyExists
	case syscall.EACCES, syscall.EPERM, syscall.EROFS:
		return errdefs.ErrPermissionDenied
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EFBIG:
		return errdefs.ErrResourceExhausted
	case syscall.ENOTDIR, syscall.EISDIR, syscall.EINVAL, syscall.ENAMETOOLONG, syscall.ELOOP:
		return errdefs.ErrInvalidArgument
	case syscall.ENOTEMPTY, syscall.EBUSY, syscall.EXDEV, syscall.ETXTBSY:
		return errdefs.ErrFailedPrecondition
	}
	return nil
}
