package envd

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// Bounds of /files: one file's size (after decompression), the files of
// one multipart upload, and how far a gzip body may expand past its first
// 16 MiB (a gzip bomb is refused long before it fills anything).
const (
	maxFileSize     = 4 << 30
	maxUploadFiles  = 1000
	gzipFreeBytes   = 16 << 20
	maxGzipExpand   = 200
	maxQueryUserLen = 64
)

// fileEntry is envd's /files entry: {"path", "name", "type"}, and the
// file's metadata as read back after the write (metadata.go).
type fileEntry struct {
	Path     string            `json:"path"`
	Name     string            `json:"name"`
	Type     string            `json:"type"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// fileQuery is a /files request's path and user (username; "" is the
// sandbox's default user).
func fileQuery(r *http.Request, pathRequired bool) (string, string, error) {
	q := r.URL.Query()
	p, user := q.Get("path"), q.Get("username")
	if p == "" && pathRequired {
		return "", "", errdefs.Invalid("path", "is required")
	}
	if p != "" {
		if err := checkPathHTTP(p); err != nil {
			return "", "", err
		}
	}
	if len(user) > maxQueryUserLen || strings.ContainsAny(user, ":/\x00") {
		return "", "", errdefs.Invalid("username", "not a user name")
	}
	return p, user, nil
}

func checkPathHTTP(p string) error {
	if len(p) > maxPath || strings.IndexByte(p, 0) >= 0 {
		return errdefs.Invalid("path", "longer than %d bytes or contains a NUL byte", maxPath)
	}
	return nil
}

// downloadFile is GET /files?path=&username=: the file's bytes, gzipped
// when the client accepts gzip.
func (s *Server) downloadFile(w http.ResponseWriter, r *http.Request) {
	p, user, err := fileQuery(r, true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	body, size, err := s.files().Read(r.Context(), sandboxID(r.Header), p, user)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer body.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	if !acceptsGzip(r) {
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		_, _ = io.Copy(w, body)
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	w.Header().Add("Vary", "Accept-Encoding")
	// The compressed stream goes out in large chunks: node's fetch (the
	// e2b SDK's, which always accepts gzip) spends per chunk, and took
	// 100 s over 100 MB in the 4 KiB ones the response writer makes.
	bw := bufio.NewWriterSize(w, gzipChunk)
	zw := gzip.NewWriter(bw)
	if _, err := io.Copy(zw, body); err == nil && zw.Close() == nil {
		_ = bw.Flush()
	}
}

// gzipChunk is the size of the chunks a gzipped download is sent in.
const gzipChunk = 1 << 20

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

// uploadFile is POST /files: a multipart body (each "file" part written to
// the path query, or with several parts to its filename), or with
// Content-Type application/octet-stream the body itself to path. Either
// may be gzipped (Content-Encoding: gzip). Parent directories are made.
func (s *Server) uploadFile(w http.ResponseWriter, r *http.Request) {
	p, user, err := fileQuery(r, false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	md, err := uploadMetadata(r.Header)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	body, err := requestBody(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var out []fileEntry
	switch ct {
	case "multipart/form-data":
		out, err = s.uploadParts(r, multipart.NewReader(body, params["boundary"]), p, user, md)
	case "application/octet-stream":
		if p == "" {
			err = errdefs.Invalid("path", "is required for an application/octet-stream upload")
			break
		}
		var e fileEntry
		e, err = s.write(r, p, user, body, md)
		out = []fileEntry{e}
	default:
		err = errdefs.Invalid("Content-Type", "multipart/form-data or application/octet-stream, got %q", ct)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// requestBody is the request's body, gunzipped and bounded as it is read.
func requestBody(r *http.Request) (io.Reader, error) {
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		return r.Body, nil
	case "gzip":
		in := &countingReader{r: r.Body}
		zr, err := gzip.NewReader(in)
		if err != nil {
			return nil, errdefs.Invalid("body", "not gzip: %v", err)
		}
		return &bombGuard{r: zr, in: in}, nil
	default:
		return nil, errdefs.Invalid("Content-Encoding", "gzip or none, got %q", enc)
	}
}

// uploadParts writes each "file" part of a multipart upload.
func (s *Server) uploadParts(r *http.Request, mr *multipart.Reader, p, user string, md *agentapi.XattrSet) ([]fileEntry, error) {
	var out []fileEntry
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, errdefs.Invalid("body", "malformed multipart body: %v", err)
		}
		if part.FormName() != "file" {
			part.Close()
			continue
		}
		if len(out) >= maxUploadFiles {
			return nil, errdefs.Invalid("body", "more than %d files", maxUploadFiles)
		}
		dest := p
		if dest == "" || len(out) > 0 {
			dest = rawFileName(part)
		}
		if dest == "" {
			return nil, errdefs.Invalid("path", "a file part without a path or file name")
		}
		if err := checkPathHTTP(dest); err != nil {
			return nil, err
		}
		e, err := s.write(r, dest, user, part, md)
		part.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, errdefs.Invalid("body", "no \"file\" part")
	}
	return out, nil
}

// rawFileName is a part's filename as sent (multipart.Part.FileName keeps
// only its base name; the e2b SDK sends the whole path there).
func rawFileName(part *multipart.Part) string {
	_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

// write writes one file in place (a watcher sees it written, as with
// envd; a new file is 0644, an existing one keeps its mode), bounded to
// maxFileSize, its metadata replaced by md.
func (s *Server) write(r *http.Request, p, user string, body io.Reader, md *agentapi.XattrSet) (fileEntry, error) {
	lr := &limitReader{r: body, n: maxFileSize}
	e, err := s.files().WriteWith(r.Context(), sandboxID(r.Header), p, lr, 0, user, agentapi.WriteOptions{InPlace: true, Xattrs: md})
	if lr.over {
		return fileEntry{}, fmt.Errorf("%w: a file over %d bytes", errdefs.ErrResourceExhausted, int64(maxFileSize))
	}
	if lr.err != nil {
		// The client's body failed (bad gzip, a bomb, a cut upload): that,
		// not what the agent made of the cut stream, is the answer.
		var ie *inputError
		if errors.As(lr.err, &ie) {
			return fileEntry{}, ie.err
		}
		return fileEntry{}, errdefs.Invalid("body", "reading the upload: %v", lr.err)
	}
	if err != nil {
		return fileEntry{}, err
	}
	t := "file"
	if e.Type == agentapi.EntryDir {
		t = "directory"
	}
	if e.XattrsUnsupported && len(md.Values) > 0 {
		s.log.Info("upload metadata not kept: the sandbox's filesystem or agent has no user.* extended attributes",
			"op", "envd", "sandbox", sandboxID(r.Header), "path", e.Path)
	}
	return fileEntry{Path: e.Path, Name: e.Name, Type: t, Metadata: e.Xattrs}, nil
}
