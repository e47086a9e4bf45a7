package envd

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"corral/internal/errdefs"
)

// envdError is envd's error body: {"code": <HTTP status>, "message": "..."}.
type envdError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// statusError is an error with the HTTP status it is answered with, for
// the statuses errdefs has no kind for (502, 507).
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

var errBadGateway = &statusError{http.StatusBadGateway, "the sandbox is not running"}

// httpStatus is the status envd answers err with.
func httpStatus(err error) int {
	var se *statusError
	if errors.As(err, &se) {
		return se.status
	}
	// The agent reports a disk filled while it received the body as the
	// body's failure (unavailable); its message still says what it was.
	if isNoSpace(err) {
		return http.StatusInsufficientStorage
	}
	return errdefs.HTTPStatus(err)
}

// writeError answers err in envd's error shape.
func writeError(w http.ResponseWriter, err error) {
	status := httpStatus(err)
	writeJSON(w, status, envdError{Code: status, Message: err.Error()})
}

// fail answers err in envd's shape, host paths redacted; server errors
// are logged.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	err = s.red.Error(err)
	if st := httpStatus(err); st >= 500 && st != http.StatusBadGateway && st != http.StatusInsufficientStorage {
		s.log.Warn("envd request failed", "op", "envd", "sandbox", sandboxID(r.Header), "path", r.URL.Path, "err", err)
	}
	writeError(w, err)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// connectErr translates a manager error to a Connect error, host paths
// redacted.
func (s *Server) connectErr(err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return err
	}
	err = s.red.Error(err)
	code := connect.CodeInternal
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		code = connect.CodeNotFound
	case errors.Is(err, errdefs.ErrInvalidArgument):
		code = connect.CodeInvalidArgument
	case errors.Is(err, errdefs.ErrAlreadyExists):
		code = connect.CodeAlreadyExists
	case errors.Is(err, errdefs.ErrFailedPrecondition):
		code = connect.CodeFailedPrecondition
	case errors.Is(err, errdefs.ErrUnavailable):
		code = connect.CodeUnavailable
	case errors.Is(err, errdefs.ErrNotSupported):
		code = connect.CodeUnimplemented
	case errors.Is(err, errdefs.ErrPermissionDenied):
		code = connect.CodePermissionDenied
	case errors.Is(err, errdefs.ErrUnauthenticated):
		code = connect.CodeUnauthenticated
	case errors.Is(err, errdefs.ErrResourceExhausted):
		code = connect.CodeResourceExhausted
	case errors.Is(err, errdefs.ErrDeadlineExceeded):
		code = connect.CodeDeadlineExceeded
	}
	return connect.NewError(code, err)
}

// invalid is a Connect InvalidArgument naming field.
func invalid(field, format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
}

// isNoSpace tells a full disk or quota (507) from the other exhaustions.
func isNoSpace(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "no space left") || strings.Contains(msg, "quota exceeded") || strings.Contains(msg, "file too large")
}
