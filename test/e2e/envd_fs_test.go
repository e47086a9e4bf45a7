package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"corral/internal/e2b/envd/gen/filesystem"
)

// envdFile is one entry of a /files upload's answer.
type envdFile struct {
	Path, Name, Type string
}

// upload posts a multipart body of files (path → content) to /files.
func (c *envdClient) upload(t *testing.T, query url.Values, files map[string][]byte) (int, []byte) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		w, err := mw.CreateFormFile("file", n)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(files[n])
	}
	mw.Close()
	return c.do(t, http.MethodPost, query, mw.FormDataContentType(), "", &body, nil)
}

// do sends one /files request and returns its status and body (gunzipped
// when the answer is gzip: the raw Content-Encoding is in hdr).
func (c *envdClient) do(t *testing.T, method string, query url.Values, ctype, cenc string, body io.Reader, hdr http.Header) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, c.base+"/files?"+query.Encode(), body)
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if cenc != "" {
		req.Header.Set("Content-Encoding", cenc)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		if hdr != nil {
			hdr.Set("X-Got-Encoding", "gzip")
		}
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func gz(b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
}

func TestEnvdFilesystem(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	id := d.create("--timeout", "10m")
	c := newEnvd(t, d, id, accessToken(t, d, id), true)

	mk, err := c.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: "/root/d/e"}))
	if err != nil || mk.Msg.GetEntry().GetType() != filesystem.FileType_FILE_TYPE_DIRECTORY || mk.Msg.GetEntry().GetPath() != "/root/d/e" {
		t.Fatalf("MakeDir: %v %v", mk, err)
	}
	if _, err := c.fs.MakeDir(ctx, connect.NewRequest(&filesystem.MakeDirRequest{Path: "/root/d/e"})); connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Errorf("MakeDir of an existing directory: %v", err)
	}

	// A multipart upload of two files, each to the path in its file name.
	status, body := c.upload(t, url.Values{}, map[string][]byte{"/root/d/a.txt": []byte("alpha"), "/root/d/e/b.txt": []byte("beta!")})
	var entries []envdFile
	if err := json.Unmarshal(body, &entries); status != http.StatusOK || err != nil || len(entries) != 2 || entries[0].Path != "/root/d/a.txt" || entries[0].Type != "file" {
		t.Fatalf("upload: %d %s", status, body)
	}
	st, err := c.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/root/d/a.txt"}))
	if err != nil || st.Msg.GetEntry().GetSize() != 5 || st.Msg.GetEntry().GetType() != filesystem.FileType_FILE_TYPE_FILE || st.Msg.GetEntry().GetName() != "a.txt" {
		t.Fatalf("Stat: %v %v", st, err)
	}
	for depth, want := range map[uint32][]string{1: {"/root/d/a.txt", "/root/d/e"}, 2: {"/root/d/a.txt", "/root/d/e", "/root/d/e/b.txt"}} {
		ls, err := c.fs.ListDir(ctx, connect.NewRequest(&filesystem.ListDirRequest{Path: "/root/d", Depth: depth}))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range ls.Msg.GetEntries() {
			got = append(got, e.GetPath())
		}
		sort.Strings(got)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("ListDir depth %d: %v, want %v", depth, got, want)
		}
	}
	mv, err := c.fs.Move(ctx, connect.NewRequest(&filesystem.MoveRequest{Source: "/root/d/a.txt", Destination: "/root/d/c.txt"}))
	if err != nil || mv.Msg.GetEntry().GetPath() != "/root/d/c.txt" {
		t.Fatalf("Move: %v %v", mv, err)
	}
	if _, err := c.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/root/d/a.txt"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("Stat of a moved file: %v", err)
	}
	if _, err := c.fs.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: "/root/d/e"})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.fs.Stat(ctx, connect.NewRequest(&filesystem.StatRequest{Path: "/root/d/e/b.txt"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("Stat in a removed tree: %v", err)
	}
	// As with envd, removing what is not there (or whose parent is not)
	// succeeds.
	for _, p := range []string{"/root/d/e", "/root/d/e/x/y"} {
		if _, err := c.fs.Remove(ctx, connect.NewRequest(&filesystem.RemoveRequest{Path: p})); err != nil {
			t.Errorf("Remove of missing %s: %v", p, err)
		}
	}

	testEnvdLargeFile(t, c)
	testEnvdWatch(ctx, t, d, c, id)
	testEnvdPathEscape(t, d, c, id)
}

// testEnvdLargeFile: 48 MiB up and down byte-identical, plain and gzipped
// both ways.
func testEnvdLargeFile(t *testing.T, c *envdClient) {
	big := make([]byte, 48<<20)
	rand.Read(big)
	want := sha256.Sum256(big)
	q := url.Values{"path": {"/root/big.bin"}}
	if status, body := c.do(t, http.MethodPost, q, "application/octet-stream", "", bytes.NewReader(big), nil); status != http.StatusOK {
		t.Fatalf("octet-stream upload: %d %s", status, body)
	}
	status, got := c.do(t, http.MethodGet, q, "", "", nil, nil)
	if status != http.StatusOK || sha256.Sum256(got) != want {
		t.Fatalf("download: %d, %d bytes, identical %v", status, len(got), sha256.Sum256(got) == want)
	}
	hdr := http.Header{"Accept-Encoding": {"gzip"}}
	status, got = c.do(t, http.MethodGet, q, "", "", nil, hdr)
	if status != http.StatusOK || hdr.Get("X-Got-Encoding") != "gzip" || sha256.Sum256(got) != want {
		t.Fatalf("gzip download: %d, encoding %q, identical %v", status, hdr.Get("X-Got-Encoding"), sha256.Sum256(got) == want)
	}
	q2 := url.Values{"path": {"/root/big2.bin"}}
	if status, body := c.do(t, http.MethodPost, q2, "application/octet-stream", "gzip", bytes.NewReader(gz(big)), nil); status != http.StatusOK {
		t.Fatalf("gzip upload: %d %s", status, body)
	}
	if status, got = c.do(t, http.MethodGet, q2, "", "", nil, nil); status != http.StatusOK || sha256.Sum256(got) != want {
		t.Fatalf("gzip upload read back: %d, identical %v", status, sha256.Sum256(got) == want)
	}
}

// testEnvdWatch: WatchDir streams a change made through /files and one
// made by a process; a polled watcher collects them too.
func testEnvdWatch(ctx context.Context, t *testing.T, d *daemon, c *envdClient, id string) {
	d.mustCLI("exec", id, "--", "mkdir", "-p", "/root/w")
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	stream, err := c.fs.WatchDir(wctx, connect.NewRequest(&filesystem.WatchDirRequest{Path: "/root/w"}))
	if err != nil {
		t.Fatal(err)
	}
	if !stream.Receive() || stream.Msg().GetStart() == nil {
		t.Fatalf("WatchDir: no start event: %v", stream.Err())
	}
	cw, err := c.fs.CreateWatcher(ctx, connect.NewRequest(&filesystem.CreateWatcherRequest{Path: "/root/w"}))
	if err != nil {
		t.Fatal(err)
	}
	if status, body := c.upload(t, url.Values{"path": {"/root/w/up.txt"}}, map[string][]byte{"up.txt": []byte("x")}); status != http.StatusOK {
		t.Fatalf("upload: %d %s", status, body)
	}
	d.mustCLI("exec", id, "--", "sh", "-c", "echo y > /root/w/ex.txt")
	seen := map[string]bool{}
	// The upload is written in place, as envd does: a watcher sees it
	// created and written.
	for !seen["create:up.txt"] || !seen["write:up.txt"] || !seen["create:ex.txt"] {
		if !stream.Receive() {
			t.Fatalf("WatchDir ended (%v) having seen %v", stream.Err(), seen)
		}
		if fe := stream.Msg().GetFilesystem(); fe != nil && strings.Contains(fe.GetName(), ".corral-upload-") {
			t.Errorf("the watcher saw the agent's upload file: %v", fe)
		}
		if fe := stream.Msg().GetFilesystem(); fe != nil {
			seen[strings.ToLower(strings.TrimPrefix(fe.GetType().String(), "EVENT_TYPE_"))+":"+fe.GetName()] = true
		}
	}
	polled := map[string]bool{}
	for i := 0; i < 50 && (!polled["up.txt"] || !polled["ex.txt"]); i++ {
		evs, err := c.fs.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: cw.Msg.GetWatcherId()}))
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs.Msg.GetEvents() {
			polled[ev.GetName()] = true
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !polled["up.txt"] || !polled["ex.txt"] {
		t.Errorf("the polled watcher saw %v", polled)
	}
	if _, err := c.fs.RemoveWatcher(ctx, connect.NewRequest(&filesystem.RemoveWatcherRequest{WatcherId: cw.Msg.GetWatcherId()})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.fs.GetWatcherEvents(ctx, connect.NewRequest(&filesystem.GetWatcherEventsRequest{WatcherId: cw.Msg.GetWatcherId()})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("a removed watcher: %v", err)
	}
}

// testEnvdPathEscape: a path climbing out of the root stays in the
// sandbox, both ways.
func testEnvdPathEscape(t *testing.T, d *daemon, c *envdClient, id string) {
	name := fmt.Sprintf("corral-envd-escape-%d", time.Now().UnixNano())
	q := url.Values{"path": {"../../../../../../../../tmp/" + name}}
	if status, body := c.do(t, http.MethodPost, q, "application/octet-stream", "", strings.NewReader("inside"), nil); status != http.StatusOK {
		t.Fatalf("upload: %d %s", status, body)
	}
	if _, err := os.Stat("/tmp/" + name); err == nil {
		os.Remove("/tmp/" + name)
		t.Fatal("an envd upload escaped to the host's /tmp")
	}
	if got := d.mustCLI("exec", id, "--", "cat", "/tmp/"+name); got != "inside" {
		t.Errorf("the climbing upload landed elsewhere: %q", got)
	}
	status, got := c.do(t, http.MethodGet, url.Values{"path": {"../../../../../../../../etc/hostname"}}, "", "", nil, nil)
	if want := d.mustCLI("exec", id, "--", "cat", "/etc/hostname"); status != http.StatusOK || string(got) != want {
		t.Errorf("a climbing download: %d %q, want the sandbox's %q", status, got, want)
	}
}
