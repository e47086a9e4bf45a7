package mcp

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestHandlerTransport: a response streams through the in-process
// transport as the handler writes it (the first line arrives while the
// handler still runs), with its status and headers, and the handler sees
// the caller go away.
func TestHandlerTransport(t *testing.T) {
	next, gone := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Header().Set("X-Test", "yes")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "first\n")
		<-next
		_, _ = io.WriteString(w, "second\n")
		<-r.Context().Done()
		close(gone)
	})
	c := &http.Client{Transport: handlerTransport{h}}
	resp, err := c.Get("http://x/")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusUnauthorized || string(b) != "no\n" {
		t.Fatalf("without a token: %d %q", resp.StatusCode, b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://x/", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-Test") != "yes" {
		t.Fatalf("status %d headers %v", resp.StatusCode, resp.Header)
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first\n" {
		t.Fatalf("first line %q %v", buf, err)
	}
	close(next)
	second := make([]byte, 7)
	if _, err := io.ReadFull(resp.Body, second); err != nil || string(second) != "second\n" {
		t.Fatalf("second line %q %v", second, err)
	}
	resp.Body.Close() // as a closed connection: the handler's context ends
	defer cancel()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never saw its caller go")
	}
}

// A handler that aborts (as a reverse proxy does when its caller left
// mid-copy) cuts the body short: the caller reads an error, and the
// process lives.
func TestHandlerTransportAbort(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "partial")
		panic(http.ErrAbortHandler)
	})
	resp, err := (&http.Client{Transport: handlerTransport{h}}).Get("http://x/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, err := io.ReadAll(resp.Body); err == nil || string(b) != "partial" {
		t.Fatalf("an aborted body: %q, %v; want the part written and an error", b, err)
	}
}
