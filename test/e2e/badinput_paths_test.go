package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The real daemon answers what the adopter met with the right 400s: a
// 50 MB body to a client that sends it all before reading, a layer with a
// malformed file capability, an archive missing its index, and an image
// whose WorkingDir no sandbox could use; none of the answers names a path
// of the host, and the image's config is refused at import, not at the
// first exec.
func TestBadInputAdopter(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	big := bytes.Repeat([]byte(" "), 50<<20)
	copy(big, `{"name": "`)
	status, body := sendAllThenRead(t, d, "/v1/sandboxes", big)
	if status != 400 || !strings.Contains(body, "body: larger than") {
		t.Errorf("50 MB body: %d %s", status, body)
	}

	img := testImage(t)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config.WorkingDir = "data"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "bad.tar")
	if err := tarball.WriteToFile(archive, name.MustParseReference("test/bad:1"), img); err != nil {
		t.Fatal(err)
	}
	_, errs, code := d.cli("", "image", "import", archive, "-t", "test/bad:1")
	if code == 0 || !strings.Contains(errs, "config.WorkingDir") || strings.Contains(errs, d.state) {
		t.Errorf("import of a relative WorkingDir: exit %d, %q", code, errs)
	}

	for _, c := range []struct{ name, path, body, mention string }{
		{"malformed security.capability", "/v1/images/layers",
			tarOf(t, "bin/ping", map[string]string{"SCHILY.xattr.security.capability": "\x01\x00\x00\x02"}), "security.capability"},
		{"name too long for the filesystem", "/v1/images/layers", tarOf(t, "bin/"+strings.Repeat("n", 300), nil), "file name too long"},
		{"layout without index.json", "/v1/images/import?ref=test/x:1", tarOf(t, "oci-layout", nil), "index.json is missing"},
	} {
		status, body := d.api("POST", c.path, d.token, c.body)
		var e struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || status != 400 || e.Error.Code != "invalid_argument" ||
			!strings.Contains(e.Error.Message, c.mention) || strings.Contains(e.Error.Message, d.state) {
			t.Errorf("%s: %d %s; want a 400 mentioning %q and no host path", c.name, status, body, c.mention)
		}
	}
	if out := d.mustCLI("image", "ls"); strings.Contains(out, "test/") {
		t.Errorf("a refused image was stored:\n%s", out)
	}
}

// tarOf is a tar holding one file name (its content "x" unless the name
// is oci-layout) with the given PAX records.
func tarOf(t *testing.T, name string, pax map[string]string) string {
	t.Helper()
	data := "x"
	if name == "oci-layout" {
		data = `{"imageLayoutVersion":"1.0.0"}`
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data)), PAXRecords: pax, Format: tar.FormatPAX}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(data))
	tw.Close()
	return buf.String()
}

// sendAllThenRead POSTs body to the daemon, writing all of it before
// reading the answer, as curl does once it has sent its headers.
func sendAllThenRead(t *testing.T, d *daemon, path string, body []byte) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", d.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Minute))
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: corral\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, d.token, len(body))
	if _, err := conn.Write(append([]byte(head), body...)); err != nil {
		t.Fatalf("sending the body: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return resp.StatusCode, string(b)
}
