package api

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	imagestore "corral/internal/image/store"
	"corral/internal/manager"
	"corral/pkg/apiv1"
)

// TestAPIOversizedBody: a body far over the limit gets its 400 naming the
// body, whole, whatever the client does: send a length, send chunks, or
// wait for 100-continue; and so does an error answered before the body
// was read (an unknown sandbox's 404). (The server used to answer after
// the first MiB and close, so a client still sending met a broken pipe,
// not the answer.)
func TestAPIOversizedBody(t *testing.T) {
	e := newAPIEnv(t)
	big := bytes.Repeat([]byte(" "), 50<<20)
	copy(big, `{"name": "x", "tags": {"a": "`)
	cases := []struct {
		name   string
		body   func() io.Reader
		expect bool
	}{
		{"with a length", func() io.Reader { return bytes.NewReader(big) }, false},
		{"chunked", func() io.Reader { return struct{ io.Reader }{bytes.NewReader(big)} }, false},
		{"expect 100-continue", func() io.Reader { return bytes.NewReader(big) }, true},
		{"malformed early, under the limit", func() io.Reader {
			return bytes.NewReader(append([]byte(`{"name": ]`), bytes.Repeat([]byte(" "), 900<<10)...))
		}, false},
	}
	want := map[string]string{ // path -> error code; invalid_argument names the body
		"/v1/sandboxes":   "invalid_argument",
		"/v1/images/pull": "invalid_argument",
		"/v1/sandboxes/sb-00000000000000000000/processes": "not_found",
	}
	for path, code := range want {
		for _, c := range cases {
			t.Run(path+"/"+c.name, func(t *testing.T) {
				req, err := http.NewRequest("POST", e.srv.URL+path, c.body())
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+testToken)
				req.Header.Set("Content-Type", "application/json")
				if c.expect {
					req.Header.Set("Expect", "100-continue")
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("no answer: %v", err)
				}
				defer resp.Body.Close()
				var out apiv1.Error
				if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
					t.Fatalf("status %d, body not an error: %v", resp.StatusCode, err)
				}
				if out.Error.Code != code || (code == "invalid_argument" && (resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(out.Error.Message, "invalid argument: body"))) {
					t.Fatalf("status %d, error %+v; want %s (invalid_argument: a 400 naming the body)", resp.StatusCode, out.Error, code)
				}
			})
		}
	}
	// A client that sends its whole body before it reads (as curl does
	// once the server said 100 Continue) must be able to send it.
	for path, status := range map[string]int{"/v1/sandboxes": http.StatusBadRequest, "/v1/sandboxes/sb-00000000000000000000/processes": http.StatusNotFound} {
		t.Run(path+"/sends all, then reads", func(t *testing.T) {
			resp := sendThenRead(t, e.srv.Listener.Addr().String(), path, big)
			if resp.StatusCode != status {
				t.Fatalf("status %d, want %d", resp.StatusCode, status)
			}
		})
	}
	// The server is still there for the next caller.
	if code, body := e.raw("GET", "/v1/sandboxes", ""); code != http.StatusOK {
		t.Fatalf("after: %d %s", code, body)
	}
}

// sendThenRead writes a POST of body to path on addr, all of it, and only
// then reads the answer.
func sendThenRead(t *testing.T, addr, path string, body []byte) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: corral\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		path, testToken, len(body))
	if _, err := conn.Write(append([]byte(head), body...)); err != nil {
		t.Fatalf("sending the body: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	t.Logf("%d %s", resp.StatusCode, b)
	return resp
}

// newImageEnv is an API env whose manager has an image store.
func newImageEnv(t *testing.T) *apiEnv {
	t.Helper()
	return newAPIEnvWith(t, func(c *manager.Config) {
		st, err := imagestore.Open(filepath.Join(c.StateDir, "images"), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		c.Images = st
	})
}

// layerTar is a one-file layer whose file has the given name and PAX
// records.
func layerTar(t *testing.T, name string, pax map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: 1, PAXRecords: pax, Format: tar.FormatPAX}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte("x"))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestAPIMalformedLayer: a layer the kernel would refuse to write (a name
// the filesystem cannot hold, a malformed file capability) is the
// uploader's fault: 400 naming the entry, never 500.
func TestAPIMalformedLayer(t *testing.T) {
	e := newImageEnv(t)
	long := "bin/" + strings.Repeat("n", 300)
	cases := map[string][]byte{
		"a name component over 255 bytes": layerTar(t, long, nil),
		"an xattr value over 64 KiB":      layerTar(t, "bin/x", map[string]string{"SCHILY.xattr.user.big": strings.Repeat("v", 70000)}),
	}
	if os.Geteuid() == 0 { // security.capability is only applied as root
		cases["a malformed security.capability"] = layerTar(t, "bin/ping", map[string]string{"SCHILY.xattr.security.capability": "\x01\x00\x00\x02"})
	} else {
		t.Log("not root: the malformed security.capability case needs root (the store ignores capabilities otherwise)")
	}
	for name, layer := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := e.c.UploadLayer(context.Background(), bytes.NewReader(layer))
			if !isCode(err, "invalid_argument") || !strings.Contains(err.Error(), "entry ") {
				t.Fatalf("err = %v, want invalid_argument naming the entry", err)
			}
			if strings.Contains(err.Error(), e.stateDir()) {
				t.Errorf("error names the state dir: %v", err)
			}
			t.Log(err)
		})
	}
}

// stateDir is the manager's state directory.
func (e *apiEnv) stateDir() string { return e.m.HostPaths()[0] }

// TestAPIImportErrors: a broken archive and an image whose config no
// sandbox could use are 400s, naming what is wrong and no host path.
func TestAPIImportErrors(t *testing.T) {
	e := newImageEnv(t)
	var layout bytes.Buffer
	tw := tar.NewWriter(&layout)
	body := `{"imageLayoutVersion":"1.0.0"}`
	tw.WriteHeader(&tar.Header{Name: "oci-layout", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
	tw.Write([]byte(body))
	tw.Close()

	img, err := mutate.AppendLayers(empty.Image, static.NewLayer(layerTar(t, "bin/app", nil), types.DockerLayer))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.WorkingDir = "app"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := tarball.Write(name.MustParseReference("corral/bad:1"), img, &archive); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, want string
		body       []byte
	}{
		{"a layout without its index", "index.json is missing", layout.Bytes()},
		{"a relative WorkingDir", "config.WorkingDir: must be an absolute path", archive.Bytes()},
		{"not an archive", "not a tar", bytes.Repeat([]byte("junk"), 1000)},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.c.ImportImage(context.Background(), bytes.NewReader(c.body), "corral/x:1")
			if !isCode(err, "invalid_argument") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want invalid_argument saying %q", err, c.want)
			}
			for _, host := range []string{e.stateDir(), "import-", "/tmp/"} {
				if strings.Contains(err.Error(), host) {
					t.Errorf("error names %q: %v", host, err)
				}
			}
			t.Log(err)
		})
	}
}

// TestAPIRedactsHostPaths: an error from deep in the daemon that names a
// file under the state directory (here a corrupt image record) reaches
// the caller without the path.
func TestAPIRedactsHostPaths(t *testing.T) {
	e := newImageEnv(t)
	bad := filepath.Join(e.stateDir(), "images", "images", "sha256", strings.Repeat("a", 64)+".json")
	if err := os.WriteFile(bad, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, body := e.raw("GET", "/v1/images", "")
	var out apiv1.Error
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("%d %s: %v", code, body, err)
	}
	if msg := out.Error.Message; code != http.StatusInternalServerError || !strings.Contains(msg, "corrupt record <host path>") || strings.Contains(msg, e.stateDir()) {
		t.Fatalf("%d %q: want a 500 whose message has the path redacted", code, msg)
	}
	t.Log(out.Error.Message)
}
