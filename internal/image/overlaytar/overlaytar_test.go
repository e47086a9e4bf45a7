package overlaytar

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"corral/internal/errdefs"
)

type entry struct {
	name, link string
	typ        byte
	major      int64
	body       string
	pax        map[string]string
}

func upperTar(t testing.TB, entries []entry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Devmajor: e.major,
			Size: int64(len(e.body)), PAXRecords: e.pax}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// listing renders a tar as "name type [-> link] [xattrs] [body]" lines.
func listing(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		line := hdr.Name + " " + string(hdr.Typeflag)
		if hdr.Linkname != "" {
			line += " -> " + hdr.Linkname
		}
		var keys []string
		for k := range hdr.PAXRecords {
			if strings.HasPrefix(k, paxXattr) {
				keys = append(keys, strings.TrimPrefix(k, paxXattr))
			}
		}
		slices.Sort(keys)
		if len(keys) > 0 {
			line += " [" + strings.Join(keys, ",") + "]"
		}
		b, _ := io.ReadAll(tr)
		if len(b) > 0 {
			line += " " + string(b)
		}
		out = append(out, line)
	}
}

// runscUpper is what runsc tar rootfs-upper wrote for: rm
// /etc/debian_version; rm -rf /usr/share/doc && mkdir /usr/share/doc; a new
// file, a hard link, a symlink and a FIFO under a new /app; the agent's
// resolv.conf. (And one hostile name.)
var runscUpper = []entry{
	{name: "./", typ: tar.TypeDir},
	{name: "./app/", typ: tar.TypeDir, pax: map[string]string{opaqueXattr: "y"}},
	{name: "./app/hardlink", typ: tar.TypeReg, body: "hi\n", pax: map[string]string{paxXattr + "user.k": "v", paxXattr + "trusted.x": "y"}},
	{name: "./app/sym", typ: tar.TypeSymlink, link: "a"},
	{name: "./app/fifo", typ: tar.TypeFifo},
	{name: "./app/a", typ: tar.TypeLink, link: "./app/hardlink"},
	{name: "./etc/", typ: tar.TypeDir},
	{name: "./etc/.resolv.conf.corral", typ: tar.TypeChar},
	{name: "./etc/debian_version", typ: tar.TypeLink, link: "./etc/.resolv.conf.corral"},
	{name: "./etc/resolv.conf", typ: tar.TypeReg, body: "nameserver 10.0.0.1\n"},
	{name: "./etc/gone", typ: tar.TypeLink, link: "./etc/debian_version"},
	{name: "./dev/null2", typ: tar.TypeChar, major: 1},
	{name: "./usr/share/doc/", typ: tar.TypeDir, pax: map[string]string{opaqueXattr: "y"}},
	{name: "./usr/share/doc/new", typ: tar.TypeReg, body: "x"},
	{name: "../../../escape", typ: tar.TypeReg, body: "e"},
}

// runtimeExclude is what the runtimes leave out: the files the agent
// writes at start (agentapi.RuntimeWrittenFiles, not imported here).
var runtimeExclude = []string{"/etc/resolv.conf", "/etc/.resolv.conf.corral"}

func TestConvert(t *testing.T) {
	in := upperTar(t, runscUpper)
	var out bytes.Buffer
	st, err := Convert(in, &out, Options{Exclude: runtimeExclude})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"app/ 5",
		"app/.wh..wh..opq 0",
		"app/hardlink 0 [user.k] hi\n",
		"app/sym 2 -> a",
		"app/a 1 -> app/hardlink",
		"etc/ 5",
		"etc/.wh.debian_version 0",
		"etc/.wh.gone 0",
		"usr/share/doc/ 5",
		"usr/share/doc/.wh..wh..opq 0",
		"usr/share/doc/new 0 x",
		"escape 0 e",
	}
	if got := listing(t, &out); !slices.Equal(got, want) {
		t.Errorf("converted layer:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if st.Whiteouts != 2 || st.Opaque != 2 || st.SkippedCount != 2 || !slices.Equal(st.Skipped, []string{"app/fifo", "dev/null2"}) {
		t.Errorf("stats = %+v", st)
	}
}

func TestConvertRefuses(t *testing.T) {
	for name, entries := range map[string][]entry{
		"a file named like a whiteout":   {{name: "./etc/.wh.passwd", typ: tar.TypeReg}},
		"a file named like the opaque":   {{name: "./a/.wh..wh..opq", typ: tar.TypeReg}},
		"a hard link to an excluded one": {{name: "./etc/resolv.conf", typ: tar.TypeReg}, {name: "./x", typ: tar.TypeLink, link: "etc/resolv.conf"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Convert(upperTar(t, entries), io.Discard, Options{Exclude: []string{"/etc/resolv.conf"}})
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("err = %v, want invalid argument", err)
			}
		})
	}
}

func TestConvertTruncatedInput(t *testing.T) {
	in := upperTar(t, []entry{{name: "a", typ: tar.TypeReg, body: strings.Repeat("x", 4096)}})
	_, err := Convert(bytes.NewReader(in.Bytes()[:1024]), io.Discard, Options{})
	if err == nil || errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("err = %v, want a read error", err)
	}
}

func TestDropStaleWhiteouts(t *testing.T) {
	in := upperTar(t, []entry{
		{name: "etc/", typ: tar.TypeDir},
		{name: "etc/.wh.passwd", typ: tar.TypeReg},
		{name: "etc/.wh.never-existed", typ: tar.TypeReg},
		{name: "etc/.wh..wh..opq", typ: tar.TypeReg},
		{name: "etc/new", typ: tar.TypeReg, body: "n"},
	})
	var out bytes.Buffer
	n, err := DropStaleWhiteouts(in, &out, func(name string) bool { return name == "etc/passwd" })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"etc/ 5", "etc/.wh.passwd 0", "etc/.wh..wh..opq 0", "etc/new 0 n"}
	if got := listing(t, &out); n != 1 || !slices.Equal(got, want) {
		t.Errorf("dropped %d, kept %v; want 1 and %v", n, got, want)
	}
}

// A sparse file is refused rather than copied out with its holes filled:
// sparseUpper's 1 TiB comes from 3 KiB of input.
func TestConvertRefusesSparse(t *testing.T) {
	_, err := Convert(bytes.NewReader(sparseUpper()), io.Discard, Options{})
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("err = %v, want invalid argument", err)
	}
}

// TestConvertMaxBytes: files up to MaxBytes pass; the header of the one
// that goes past it is refused before its data is read, so an export of a
// huge sparse file stops at once.
func TestConvertMaxBytes(t *testing.T) {
	in := upperTar(t, []entry{
		{name: "a", typ: tar.TypeReg, body: strings.Repeat("x", 600)},
		{name: "b", typ: tar.TypeLink, link: "a"},
		{name: "c", typ: tar.TypeReg, body: strings.Repeat("y", 400)},
	})
	if _, err := Convert(bytes.NewReader(in.Bytes()), io.Discard, Options{MaxBytes: 1000}); err != nil {
		t.Fatalf("files of 1000 bytes within MaxBytes 1000: %v", err)
	}
	_, err := Convert(bytes.NewReader(in.Bytes()), io.Discard, Options{MaxBytes: 999})
	if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), `"c"`) {
		t.Fatalf("files of 1000 bytes within MaxBytes 999: %v, want resource exhausted at c", err)
	}
	// A header claiming a terabyte, with no data behind it: refused at
	// the header (reading its data would fail otherwise).
	var huge bytes.Buffer
	tw := tar.NewWriter(&huge)
	if err := tw.WriteHeader(&tar.Header{Name: "sparse", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 40}); err != nil {
		t.Fatal(err)
	}
	_, err = Convert(&huge, io.Discard, Options{MaxBytes: 10 << 20})
	if !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("a 1 TiB file within MaxBytes 10 MiB: %v, want resource exhausted", err)
	}
}
