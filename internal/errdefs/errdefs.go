// Package errdefs defines the small set of error kinds Corral uses across
// package boundaries, and their translation to and from HTTP status codes.
//
// Errors are wrapped with %w and classified with errors.Is against the
// sentinel kinds below. Each boundary (HTTP API, agent protocol, SDK)
// translates once: kind -> status on the way out, status -> kind on the way
// in. This package imports nothing from Corral.
package errdefs

import (
	"errors"
	"fmt"
	"net/http"
)

// The error kinds. Wrap them, never compare messages.
var (
	ErrNotFound           = errors.New("not found")
	ErrAlreadyExists      = errors.New("already exists")
	ErrInvalidArgument    = errors.New("invalid argument")
	ErrFailedPrecondition = errors.New("failed precondition")
	ErrUnavailable        = errors.New("unavailable")
	ErrNotSupported       = errors.New("not supported")
	ErrPermissionDenied   = errors.New("permission denied")
	ErrUnauthenticated    = errors.New("unauthenticated")
	ErrResourceExhausted  = errors.New("resource exhausted")
	ErrDeadlineExceeded   = errors.New("deadline exceeded")
)

type kind struct {
	err    error
	code   string
	status int
}

var kinds = []kind{
	{ErrNotFound, "not_found", http.StatusNotFound},
	{ErrAlreadyExists, "already_exists", http.StatusConflict},
	{ErrInvalidArgument, "invalid_argument", http.StatusBadRequest},
	{ErrFailedPrecondition, "failed_precondition", http.StatusConflict},
	{ErrUnavailable, "unavailable", http.StatusServiceUnavailable},
	{ErrNotSupported, "not_supported", http.StatusBadRequest},
	{ErrPermissionDenied, "permission_denied", http.StatusForbidden},
	{ErrUnauthenticated, "unauthenticated", http.StatusUnauthorized},
	{ErrResourceExhausted, "resource_exhausted", http.StatusTooManyRequests},
	{ErrDeadlineExceeded, "deadline_exceeded", http.StatusGatewayTimeout},
}

// Code returns the stable wire code for err ("internal" when unclassified).
func Code(err error) string {
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.code
		}
	}
	return "internal"
}

// HTTPStatus returns the HTTP status for err (500 when unclassified).
func HTTPStatus(err error) int {
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.status
		}
	}
	return http.StatusInternalServerError
}

// FromCode rebuilds an error of the right kind from a wire code and message.
func FromCode(code, msg string) error {
	for _, k := range kinds {
		if k.code == code {
			return &wireError{kind: k.err, msg: msg}
		}
	}
	return errors.New(msg)
}

// wireError keeps the remote message verbatim while still matching its kind.
type wireError struct {
	kind error
	msg  string
}

func (e *wireError) Error() string { return e.msg }
func (e *wireError) Unwrap() error { return e.kind }

// Invalid returns an ErrInvalidArgument naming the offending field.
func Invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidArgument, field, fmt.Sprintf(format, args...))
}

// Wire is the JSON error body used by the daemon's API and by the agent.
type Wire struct {
	Error WireDetail `json:"error"`
}

// WireDetail is the inner object of Wire.
type WireDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ToWire converts err to its JSON body.
func ToWire(err error) Wire {
	return Wire{Error: WireDetail{Code: Code(err), Message: err.Error()}}
}
