package agent

import (
	"io"
	"net/http"
	"os"
	"strconv"

	"corral/internal/errdefs"
)

// fsRead is GET /v1/files?path=P[&user=U]: the file's bytes, streamed, with
// Content-Length. Only regular files can be read: a FIFO or a device would
// block or never end.
func (s *Server) fsRead(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	sandbox, host, err := s.hostPath(q.Get("path"), q.Get("user"), true)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(host, os.O_RDONLY|nonBlockNoFollow, 0)
	if err != nil {
		return fsError("opening", sandbox, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fsError("stat", sandbox, err)
	}
	if fi.IsDir() {
		return errdefs.Invalid("path", "%s is a directory", sandbox)
	}
	if !fi.Mode().IsRegular() {
		return errdefs.Invalid("path", "%s is not a regular file", sandbox)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w.WriteHeader(http.StatusOK)
	// Large chunks: each write is one hand-off to the HTTP/2 connection.
	buf := make([]byte, copyChunk)
	if n, err := io.CopyBuffer(w, io.LimitReader(onlyReader{f}, fi.Size()), buf); err != nil {
		// The status is sent; the short body tells the client.
		s.log.Debug("file read cut short", "op", "fs_read", "path", sandbox, "sent", n, "err", err)
	}
	return nil
}

// copyChunk is the buffer size of file streams: big enough that the HTTP/2
// hand-off per chunk is not what limits throughput.
const copyChunk = 256 << 10

// onlyReader hides a file's WriterTo, which would copy through a 32 KiB
// buffer instead of ours.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }
