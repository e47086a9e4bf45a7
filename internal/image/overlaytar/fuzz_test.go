package overlaytar

import (
	"archive/tar"
	"bytes"
	"corral/internal/image/tartest"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"testing"
)

// FuzzConvert feeds arbitrary bytes to Convert as an upper layer tar. An
// error is fine; otherwise it must not panic, must not write much more than
// it read (an input that expands without bound would hang the export), and
// what it wrote must be a tar whose entries have clean relative names, only
// the types a layer holds and no trusted. xattrs. On success the output is
// a complete tar with as many entries as Stats counts. Header checksums are
// recomputed first, so that mutated headers get past archive/tar.
func FuzzConvert(f *testing.F) {
	long := strings.Repeat("d", 120) + "/" + strings.Repeat("f", 99)
	seeds := [][]entry{
		runscUpper,
		{{name: "./etc/.wh.passwd", typ: tar.TypeReg}},
		{{name: "a/.wh..wh..opq", typ: tar.TypeReg}},
		{{name: "./etc/resolv.conf", typ: tar.TypeReg}, {name: "./x", typ: tar.TypeLink, link: "etc/resolv.conf"}},
		{{name: "w", typ: tar.TypeChar}, {name: "w2", typ: tar.TypeLink, link: "w"}, {name: "w3", typ: tar.TypeLink, link: "./w2"}},
		{{name: long + "/", typ: tar.TypeDir, pax: map[string]string{opaqueXattr: "y", paxXattr + "user.a": "b"}},
			{name: long + "/x", typ: tar.TypeChar}},
		{{name: "/abs/../../x", typ: tar.TypeReg, body: "x"}, {name: "h", typ: tar.TypeLink, link: "../../../abs"}},
		{{name: "b", typ: tar.TypeBlock, major: 8}, {name: "p", typ: tar.TypeFifo}},
	}
	for _, s := range seeds {
		f.Add(upperTar(f, s).Bytes())
	}
	full := upperTar(f, runscUpper).Bytes()
	f.Add(full[:1024])
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte("not a tar "), 60))
	f.Add(slices.Concat(tartest.Entry(tar.TypeXGlobalHeader, "g", tartest.PAXRecords("path", "../x")), full))
	f.Add(sparseUpper())
	f.Fuzz(func(t *testing.T, data []byte) {
		data = tartest.FixChecksums(data)
		// Each input header (512 bytes or more) becomes at most two
		// entries of at most three blocks each; file data is copied once.
		out := &cappedBuffer{max: 8*int64(len(data)) + 4096}
		st, err := Convert(bytes.NewReader(data), out, Options{Exclude: runtimeExclude})
		if out.over {
			t.Fatalf("%d input bytes made more than %d bytes of output (err %v)", len(data), out.max, err)
		}
		n := checkLayer(t, out.Bytes(), err == nil)
		if err == nil && n != st.Entries {
			t.Fatalf("stats count %d entries, the layer holds %d", st.Entries, n)
		}
	})
}

// checkLayer reads what Convert wrote and checks every entry; complete
// says it must be a whole tar. It returns how many entries it read.
func checkLayer(t *testing.T, b []byte, complete bool) int {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			if complete {
				t.Fatalf("entry %d: the layer is not a well-formed tar: %v", n, err)
			}
			return n
		}
		name := hdr.Name
		switch hdr.Typeflag {
		case tar.TypeDir:
			var ok bool
			if name, ok = strings.CutSuffix(name, "/"); !ok {
				t.Fatalf("directory %q without a trailing slash", hdr.Name)
			}
		case tar.TypeLink:
			if err := cleanRelative(hdr.Linkname); err != nil {
				t.Fatalf("hard link %q: target: %v", hdr.Name, err)
			}
		case tar.TypeReg, tar.TypeSymlink:
		default:
			t.Fatalf("entry %q has type %q, which a layer does not hold", hdr.Name, hdr.Typeflag)
		}
		if err := cleanRelative(name); err != nil {
			t.Fatalf("entry %d: %v", n, err)
		}
		for k := range hdr.PAXRecords {
			if strings.HasPrefix(k, paxXattr+"trusted.") {
				t.Fatalf("entry %q carries %s", hdr.Name, k)
			}
		}
		if _, err := io.Copy(io.Discard, tr); err != nil && complete {
			t.Fatalf("entry %q: reading its data: %v", hdr.Name, err)
		}
	}
}

func cleanRelative(name string) error {
	if name == "" || strings.HasPrefix(name, "/") || path.Clean(name) != name || slices.Contains(strings.Split(name, "/"), "..") {
		return fmt.Errorf("name %q is not a clean relative path", name)
	}
	return nil
}

// cappedBuffer refuses writes past max, which ends the conversion with an
// error and records that it happened.
type cappedBuffer struct {
	bytes.Buffer
	max  int64
	over bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if int64(c.Len())+int64(len(p)) > c.max {
		c.over = true
		return 0, errors.New("output cap reached")
	}
	return c.Buffer.Write(p)
}

// sparseUpper is a tar of one GNU sparse file (PAX format 0.1) that says
// it holds 1 TiB in its one data byte.
func sparseUpper() []byte { return tartest.Sparse("big", 1<<40) }
