package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"corral/internal/errdefs"
)

// maxJSONBody bounds every JSON request body.
const maxJSONBody = 1 << 20

// Bounds on reading what a handler left of a request body (drain).
const (
	maxDrain     = 128 << 20
	drainTimeout = 30 * time.Second
)

// errBodyTooLarge is a JSON body's reader's error past its limit.
type errBodyTooLarge struct{ limit int64 }

func (e errBodyTooLarge) Error() string { return "request body too large" }

// decodeJSON reads a bounded, strictly typed JSON body into v; its errors
// name the offending field.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeJSONLimit(w, r, v, maxJSONBody)
}

// decodeJSONLimit is decodeJSON with a body limit of its own. A body over
// the limit is refused without reading more of it than the limit; what is
// left is the server's to drain (ServeHTTP), so the caller gets the
// answer rather than a connection closed under its upload.
func decodeJSONLimit(_ http.ResponseWriter, r *http.Request, v any, limit int64) error {
	if r.ContentLength > limit {
		return errdefs.Invalid("body", "larger than %d bytes", limit)
	}
	dec := json.NewDecoder(&limitReader{r: r.Body, left: limit})
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return errdefs.Invalid("body", "trailing data after the JSON object")
	}
	return nil
}

// limitReader reads at most left bytes of r, then fails with
// errBodyTooLarge if r has more.
type limitReader struct {
	r     io.Reader
	left  int64
	limit int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.limit == 0 {
		l.limit = l.left
	}
	if l.left <= 0 {
		var one [1]byte
		if n, _ := io.ReadFull(l.r, one[:]); n > 0 {
			return 0, errBodyTooLarge{limit: l.limit}
		}
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

func jsonError(err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		tooBig errBodyTooLarge
	)
	switch {
	case errors.As(err, &tooBig):
		return errdefs.Invalid("body", "larger than %d bytes", tooBig.limit)
	case errors.As(err, &syntax):
		return errdefs.Invalid("body", "malformed JSON at byte %d: %v", syntax.Offset, err)
	case errors.As(err, &typ):
		return errdefs.Invalid(typ.Field, "expected %s, got JSON %s", typ.Type, typ.Value)
	case errors.Is(err, io.EOF):
		return errdefs.Invalid("body", "empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errdefs.Invalid("body", "truncated JSON")
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return errdefs.Invalid(strings.Trim(f, `"`), "unknown field")
	}
	return errdefs.Invalid("body", "%v", err)
}

// trackedBody is a request body that knows whether its handler read from
// it and whether it reached its end.
type trackedBody struct {
	io.ReadCloser
	read, eof bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	b.read = true
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// trackBody returns a shallow copy of r reading its body through a
// trackedBody. r itself keeps its body: net/http looks at its type after
// the handler (a body the client is waiting to send on 100 Continue).
func trackBody(r *http.Request) (*trackedBody, *http.Request) {
	b := &trackedBody{ReadCloser: r.Body}
	r2 := new(http.Request)
	*r2 = *r
	r2.Body = b
	return b, r2
}

// drain reads and discards what the handler left of the body (at most
// maxDrain bytes, for at most drainTimeout), so that a client that sends
// its whole body before it reads the answer (a 400 for a body too large
// or malformed, an error before the body mattered) can send it and read
// the answer, instead of meeting a connection reset. Beyond the bounds the
// server closes the connection, as net/http does. Not for a connection a
// handler took over (an upgrade), nor for a client that waits for 100
// Continue before sending a body the handler never asked for (net/http
// answers it and closes).
func (b *trackedBody) drain(w http.ResponseWriter, r *http.Request) {
	if b.eof || b.ReadCloser == http.NoBody || r.Header.Get("Upgrade") != "" {
		return
	}
	if !b.read && strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		return
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(drainTimeout))
	_, _ = io.CopyN(io.Discard, b.ReadCloser, maxDrain)
}
