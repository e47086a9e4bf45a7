package overlaytar

import (
	"archive/tar"
	"bytes"
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
	f.Add(slices.Concat(rawEntry(tar.TypeXGlobalHeader, "g", paxRecords("path", "../x")), full))
	f.Add(sparseUpper())
	f.Fuzz(func(t *testing.T, data []byte) {
		data = fixChecksums(data)
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
func sparseUpper() []byte {
	return slices.Concat(
		rawEntry(tar.TypeXHeader, "PaxHeaders/big", paxRecords("GNU.sparse.size", "1099511627776", "GNU.sparse.numblocks", "1", "GNU.sparse.map", "0,1")),
		rawEntry(tar.TypeReg, "big", []byte("x")),
		make([]byte, 1024))
}

// rawEntry is a USTAR header block and its padded body, built by hand for
// what tar.Writer refuses to write (extended headers, sparse maps).
func rawEntry(typ byte, name string, body []byte) []byte {
	blk := make([]byte, 512)
	copy(blk[0:100], name)
	copy(blk[100:108], "0000644\x00")
	copy(blk[108:116], "0000000\x00")
	copy(blk[116:124], "0000000\x00")
	copy(blk[124:136], fmt.Sprintf("%011o\x00", len(body)))
	copy(blk[136:148], "00000000000\x00")
	blk[156] = typ
	copy(blk[257:265], "ustar\x0000")
	setChecksum(blk)
	padded := make([]byte, (len(body)+511)/512*512)
	copy(padded, body)
	return append(blk, padded...)
}

// fixChecksums returns b with the checksum of every 512-byte block that
// carries the ustar magic recomputed, so that a mutated header field
// reaches Convert instead of failing archive/tar's checksum test. (A data
// block with the magic in it changes too, which does no harm.)
func fixChecksums(b []byte) []byte {
	b = slices.Clone(b)
	for off := 0; off+512 <= len(b); off += 512 {
		if blk := b[off : off+512]; string(blk[257:262]) == "ustar" {
			setChecksum(blk)
		}
	}
	return b
}

// setChecksum writes the checksum of the header block blk: the sum of its
// bytes with the checksum field read as spaces, in octal.
func setChecksum(blk []byte) {
	copy(blk[148:156], "        ")
	sum := 0
	for _, c := range blk {
		sum += int(c)
	}
	copy(blk[148:156], fmt.Sprintf("%06o\x00 ", sum))
}

// paxRecords encodes key, value pairs as PAX extended header records
// ("<len> key=value\n", where len counts the whole record).
func paxRecords(kv ...string) []byte {
	var b []byte
	for i := 0; i+1 < len(kv); i += 2 {
		rec := " " + kv[i] + "=" + kv[i+1] + "\n"
		n := len(rec) + 1
		for len(fmt.Sprint(n))+len(rec) != n {
			n++
		}
		b = fmt.Appendf(b, "%d%s", n, rec)
	}
	return b
}
