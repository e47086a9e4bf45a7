package reqid

import (
	"context"
	"log/slog"
)

// Key is the log attribute that carries the request id.
const Key = "request_id"

// Handler wraps a slog.Handler so that a record logged with a context
// carrying a request id (InfoContext, Log) gets it as request_id.
type Handler struct{ slog.Handler }

// NewHandler returns h with request ids added.
func NewHandler(h slog.Handler) Handler { return Handler{h} }

// Handle implements slog.Handler.
func (h Handler) Handle(ctx context.Context, r slog.Record) error {
	if id := FromContext(ctx); id != "" {
		r = r.Clone()
		r.AddAttrs(slog.String(Key, id))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return Handler{h.Handler.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h Handler) WithGroup(name string) slog.Handler {
	return Handler{h.Handler.WithGroup(name)}
}
