package mcp

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"

	"corral/sdk/go/corral"
)

// InProcessClient returns an API client that calls api (the daemon's
// native API handler) in this process, without a socket: what the MCP
// tools mounted on the daemon's listener use. token is the API's token.
func InProcessClient(api http.Handler, token string) *corral.Client {
	c := corral.New("http://corral.in-process", token)
	c.HTTP = &http.Client{Transport: handlerTransport{api}}
	return c
}

// handlerTransport is an http.RoundTripper that serves each request with
// h, streaming the response body as h writes it.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// Closing the body ends the handler's request, as a closed connection
	// does over a socket.
	ctx, cancel := context.WithCancel(req.Context())
	req = req.WithContext(ctx)
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	if req.Body == nil {
		req.Body = http.NoBody
	}
	req.RemoteAddr = "127.0.0.1:0" // the daemon itself
	go func() {
		defer func() {
			// A handler that aborts (http.ErrAbortHandler: a reverse
			// proxy whose copy failed, its caller gone) cuts the body
			// short, as net/http's server does; this goroutine has no
			// server to recover it, and the process would die.
			if p := recover(); p != nil {
				if p != http.ErrAbortHandler {
					panic(p)
				}
				w.WriteHeader(http.StatusBadGateway) // no-op when already sent
				pw.CloseWithError(io.ErrUnexpectedEOF)
				return
			}
			w.WriteHeader(http.StatusOK) // no-op when already sent
			pw.Close()
		}()
		t.h.ServeHTTP(w, req)
	}()
	select {
	case <-w.ready:
	case <-ctx.Done():
		cancel()
		pr.CloseWithError(ctx.Err())
		return nil, ctx.Err()
	}
	size, err := strconv.ParseInt(w.sent.Get("Content-Length"), 10, 64)
	if err != nil {
		size = -1
	}
	return &http.Response{
		Status: http.StatusText(w.status), StatusCode: w.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: cancelBody{pr, cancel}, ContentLength: size, Request: req,
	}, nil
}

// cancelBody is a response body whose Close also cancels the request.
type cancelBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b cancelBody) Close() error {
	b.cancel()
	return b.PipeReader.Close()
}

// pipeWriter is the http.ResponseWriter handlerTransport gives a handler:
// the status and headers go out at the first write, the body into a pipe.
type pipeWriter struct {
	header http.Header
	sent   http.Header
	status int
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.status, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(p)
}

// Flush is a no-op: every write already reaches the reader.
func (w *pipeWriter) Flush() {}
