package main

import (
	"fmt"
	"io"
	"log/slog"
)

// newLogger is the daemon's logger: JSON lines (the default, for log
// collectors) or slog's key=value text, at level lv.
func newLogger(out io.Writer, format string, lv slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(out, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(out, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want json or text", format)
}
