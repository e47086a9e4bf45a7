package tarx

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"corral/internal/errdefs"
	"corral/internal/image/tartest"

	"golang.org/x/sys/unix"
)

func TestRefused(t *testing.T) {
	withWalk(t, func(t *testing.T) {
		cases := []struct {
			name  string
			ents  func(s sandbox) []ent
			lim   Limits
			entry string // the entry the error must name
		}{
			{name: "dotdot", entry: "../../../x", ents: func(sandbox) []ent {
				return []ent{file("../../../x", "pwned")}
			}},
			{name: "dotdot in the middle", entry: "a/../../sentinel", ents: func(sandbox) []ent {
				return []ent{file("a/../../sentinel", "pwned")}
			}},
			{name: "dotdot dir", entry: "../evil/", ents: func(sandbox) []ent {
				return []ent{dir("../evil/")}
			}},
			{name: "symlink to outside then file under it", entry: "evil/sentinel", ents: func(s sandbox) []ent {
				return []ent{symlink("evil", s.outside), file("evil/sentinel", "pwned")}
			}},
			{name: "relative symlink up then file under it", entry: "evil/in/sentinel", ents: func(sandbox) []ent {
				return []ent{symlink("evil", "../.."), file("evil/in/sentinel", "pwned")}
			}},
			{name: "symlink then dir under it", entry: "evil/newdir/", ents: func(s sandbox) []ent {
				return []ent{symlink("evil", s.outside), dir("evil/newdir/")}
			}},
			{name: "nested symlink in parent", entry: "a/evil/b/c", ents: func(s sandbox) []ent {
				return []ent{dir("a/"), symlink("a/evil", s.outside), file("a/evil/b/c", "pwned")}
			}},
			{name: "symlink then symlink under it", entry: "evil/link", ents: func(s sandbox) []ent {
				return []ent{symlink("evil", s.outside), symlink("evil/link", "/etc/passwd")}
			}},
			{name: "hard link to /etc/passwd", entry: "pw", ents: func(sandbox) []ent {
				return []ent{hardlink("pw", "/etc/passwd")}
			}},
			{name: "hard link to a path outside", entry: "s", ents: func(sandbox) []ent {
				return []ent{hardlink("s", "../../sentinel")}
			}},
			{name: "hard link to an absolute host path", entry: "s", ents: func(s sandbox) []ent {
				return []ent{hardlink("s", filepath.Join(s.outside, "sentinel"))}
			}},
			{name: "hard link through a symlink", entry: "h", ents: func(s sandbox) []ent {
				return []ent{symlink("l", s.outside), hardlink("h", "l/sentinel")}
			}},
			{name: "hard link to a symlink", entry: "h", ents: func(sandbox) []ent {
				return []ent{symlink("s", "/etc/passwd"), hardlink("h", "s")}
			}},
			{name: "hard link to a file replaced by a symlink", entry: "h", ents: func(s sandbox) []ent {
				return []ent{file("f", "x"), symlink("f", filepath.Join(s.outside, "sentinel")), hardlink("h", "f")}
			}},
			{name: "hard link to itself", entry: "f", ents: func(sandbox) []ent {
				return []ent{file("f", "x"), hardlink("f", "/f")}
			}},
			{name: "hard link to a directory", entry: "h", ents: func(sandbox) []ent {
				return []ent{dir("d/"), hardlink("h", "d")}
			}},
			{name: "hard link to a later file", entry: "h", ents: func(sandbox) []ent {
				return []ent{hardlink("h", "f"), file("f", "x")}
			}},
			{name: "char device", entry: "dev/mem", ents: func(sandbox) []ent {
				return []ent{node("dev/mem", tar.TypeChar)}
			}},
			{name: "block device", entry: "dev/sda", ents: func(sandbox) []ent {
				return []ent{node("dev/sda", tar.TypeBlock)}
			}},
			{name: "fifo", entry: "fifo", ents: func(sandbox) []ent {
				return []ent{node("fifo", tar.TypeFifo)}
			}},
			{name: "unknown type", entry: "odd", ents: func(sandbox) []ent {
				return []ent{node("odd", 'Z')}
			}},
			{name: "whiteout through a symlink", entry: "l/.wh.sentinel", ents: func(s sandbox) []ent {
				return []ent{symlink("l", s.outside), file("l/.wh.sentinel", "")}
			}},
			{name: "opaque marker through a symlink", entry: "l/.wh..wh..opq", ents: func(s sandbox) []ent {
				return []ent{symlink("l", s.outside), file("l/.wh..wh..opq", "")}
			}},
			{name: "whiteout of dot", entry: ".wh..", ents: func(sandbox) []ent {
				return []ent{file(".wh..", "")}
			}},
			{name: "whiteout of dotdot", entry: "a/.wh...", ents: func(sandbox) []ent {
				return []ent{file("a/.wh...", "")}
			}},
			{name: "whiteout prefix in a directory", entry: ".wh.a/b", ents: func(sandbox) []ent {
				return []ent{file(".wh.a/b", "")}
			}},
			{name: "file replacing a non-empty directory", entry: "d", ents: func(sandbox) []ent {
				return []ent{dir("d/"), file("d/x", "x"), file("d", "y")}
			}},
			{name: "root entry not a directory", entry: "./", ents: func(sandbox) []ent {
				return []ent{symlink("./", "/")}
			}},
			{name: "name too long", entry: strings.Repeat("a/", 40) + "f", lim: Limits{MaxPathLen: 64}, ents: func(sandbox) []ent {
				return []ent{file(strings.Repeat("a/", 40)+"f", "x")}
			}},
			{name: "symlink target too long", entry: "l", lim: Limits{MaxPathLen: 64}, ents: func(sandbox) []ent {
				return []ent{symlink("l", strings.Repeat("x", 65))}
			}},
			{name: "too many entries", entry: "f3", lim: Limits{MaxEntries: 3}, ents: func(sandbox) []ent {
				return []ent{file("f0", ""), file("f1", ""), file("f2", ""), file("f3", "")}
			}},
			{name: "too many bytes", entry: "big2", lim: Limits{MaxBytes: 1000}, ents: func(sandbox) []ent {
				return []ent{file("big1", strings.Repeat("x", 600)), file("big2", strings.Repeat("x", 600))}
			}},
			{name: "negative owner", entry: "f", ents: func(sandbox) []ent {
				e := file("f", "")
				e.uid = -1
				return []ent{e}
			}},
			// What the kernel refuses is the layer's fault, not the host's.
			{name: "name component longer than the filesystem takes", entry: ("d/" + strings.Repeat("n", 300))[:maxNameInError] + "...", ents: func(sandbox) []ent {
				return []ent{file("d/"+strings.Repeat("n", 300), "x")}
			}},
			{name: "directory component longer than the filesystem takes", entry: strings.Repeat("d", maxNameInError) + "...", ents: func(sandbox) []ent {
				return []ent{file(strings.Repeat("d", 300)+"/f", "x")}
			}},
			{name: "xattr value too large", entry: "f", ents: func(sandbox) []ent {
				return []ent{xattrFile("f", "SCHILY.xattr.user.big", strings.Repeat("v", 70000))}
			}},
			{name: "xattr name too long", entry: "f", ents: func(sandbox) []ent {
				return []ent{xattrFile("f", "SCHILY.xattr.user."+strings.Repeat("a", 300), "v")}
			}},
			{name: "xattr with an empty name", entry: "d/", ents: func(sandbox) []ent {
				e := dir("d/")
				e.pax = map[string]string{"SCHILY.xattr.user.": "v"}
				return []ent{e}
			}},
		}
		if os.Geteuid() == 0 { // security.capability is applied only as root
			for _, v := range []string{"abc", strings.Repeat("\x00", 20), "\x00\x00\x00\x01" + strings.Repeat("\x00", 8)} {
				cases = append(cases, struct {
					name  string
					ents  func(s sandbox) []ent
					lim   Limits
					entry string
				}{name: fmt.Sprintf("malformed security.capability of %d bytes", len(v)), entry: "bin/ping", ents: func(sandbox) []ent {
					return []ent{xattrFile("bin/ping", "SCHILY.xattr.security.capability", v)}
				}})
			}
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				s := newSandbox(t)
				layer := mkTar(t, c.ents(s)...)
				for _, compressed := range []bool{false, true} {
					in := layer
					if compressed {
						in = gz(t, layer)
						os.RemoveAll(s.dst)
						os.Mkdir(s.dst, 0o755)
					}
					before := s.snapshot(t)
					_, err := Extract(context.Background(), bytes.NewReader(in), s.dst, c.lim)
					if !errors.Is(err, errdefs.ErrInvalidArgument) {
						t.Fatalf("gzip=%v: err = %v, want invalid argument", compressed, err)
					}
					if !strings.Contains(err.Error(), strconv.Quote(c.entry)) {
						t.Errorf("gzip=%v: error %q does not name entry %q", compressed, err, c.entry)
					}
					s.checkOutside(t, before)
					if !compressed {
						t.Log(err)
					}
				}
			})
		}
	})
}

// A later entry named like an earlier symlink replaces the link; nothing is
// written through it.
func TestSymlinkReplacedByLaterEntry(t *testing.T) {
	withWalk(t, func(t *testing.T) {
		s := newSandbox(t)
		sentinel := filepath.Join(s.outside, "sentinel")
		ents := []ent{
			symlink("f", sentinel), file("f", "inside"),
			symlink("d", s.outside), dir("d/"), file("d/sentinel", "inside"),
		}
		if os.Geteuid() == 0 { // whiteouts need CAP_MKNOD
			ents = append(ents, symlink("w", sentinel), file(".wh.w", ""))
		}
		before := s.snapshot(t)
		if _, err := Extract(context.Background(), bytes.NewReader(mkTar(t, ents...)), s.dst, Limits{}); err != nil {
			t.Fatal(err)
		}
		s.checkOutside(t, before)
		for _, p := range []string{"f", "d/sentinel"} {
			fi, err := os.Lstat(filepath.Join(s.dst, p))
			if err != nil || !fi.Mode().IsRegular() {
				t.Errorf("%s: %v, %v; want a regular file inside dst", p, fi, err)
			}
		}
	})
}

func TestValidLayer(t *testing.T) {
	root := os.Geteuid() == 0
	caps := make([]byte, 20) // vfs_cap_data v2: CAP_NET_RAW, effective
	binary.LittleEndian.PutUint32(caps[0:], 0x02000001)
	binary.LittleEndian.PutUint32(caps[4:], 1<<13)

	ents := []ent{
		dir("./"),
		dir("/etc/"),
		{name: "/etc/hostname", typ: tar.TypeReg, body: "corral\n", mode: 0o640, uid: 1000, gid: 1001},
		{name: "usr/bin/passwd", typ: tar.TypeReg, body: "ELF", mode: 0o4755},
		{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
		{name: "bin/sh", typ: tar.TypeReg, body: "#!sh", mode: 0o755},
		hardlink("bin/ln", "bin/sh"),
		hardlink("/bin/ln2", "/bin/ln"),
		symlink("lib", "usr/lib"),
		{name: "abs", typ: tar.TypeSymlink, link: "/etc/passwd", mode: 0o777, uid: 7, gid: 8},
		{name: "ro/", typ: tar.TypeDir, mode: 0o555},
		file("ro/file", "x"),
		{name: "attrs", typ: tar.TypeReg, body: "a", mode: 0o755, pax: map[string]string{
			"SCHILY.xattr.user.corral":              "yes",
			"SCHILY.xattr.trusted.overlay.opaque":   "y",
			"SCHILY.xattr.security.selinux":         "x",
			"SCHILY.xattr.security.capability":      string(caps),
			"SCHILY.xattr.trusted.overlay.redirect": "/etc",
		}},
		dir("old/"),
		file("old/keep", "k"),
		file("old/.wh.gone", ""),
		file("old/.wh.keep", ""), // a whiteout replaces an earlier entry
		dir("opq/"),
		file("opq/.wh..wh..opq", ""),
		file("opq/new", "n"),
	}
	if !root {
		t.Log("not root: skipping whiteouts, the opaque marker and ownership (they need CAP_MKNOD, CAP_SYS_ADMIN, CAP_CHOWN)")
		var kept []ent
		for _, e := range ents {
			if !strings.Contains(e.name, ".wh.") {
				kept = append(kept, e)
			}
		}
		ents = kept
	}
	layer := mkTar(t, ents...)
	for _, compressed := range []bool{false, true} {
		t.Run("gzip="+strconv.FormatBool(compressed), func(t *testing.T) {
			withWalk(t, func(t *testing.T) {
				s := newSandbox(t)
				in := layer
				if compressed {
					in = gz(t, layer)
				}
				before := s.snapshot(t)
				st, err := Extract(context.Background(), bytes.NewReader(in), s.dst, Limits{})
				if err != nil {
					t.Fatal(err)
				}
				s.checkOutside(t, before)
				if st.Entries != len(ents) {
					t.Errorf("Entries = %d, want %d", st.Entries, len(ents))
				}
				if want := int64(len("corral\n" + "ELF" + "#!sh" + "x" + "a" + "k" + "n")); st.Bytes != want {
					t.Errorf("Bytes = %d, want %d", st.Bytes, want)
				}
				checkValidLayer(t, s.dst, root, caps)
			})
		})
	}
}

func checkValidLayer(t *testing.T, dst string, root bool, caps []byte) {
	at := func(p string) string { return filepath.Join(dst, p) }
	lstat := func(p string) *unix.Stat_t {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(at(p), &st); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return &st
	}
	modes := map[string]uint32{
		".":              unix.S_IFDIR | 0o755,
		"etc":            unix.S_IFDIR | 0o755,
		"etc/hostname":   unix.S_IFREG | 0o640,
		"usr":            unix.S_IFDIR | 0o755, // implicit parent
		"usr/bin/passwd": unix.S_IFREG | 0o4755,
		"tmp":            unix.S_IFDIR | 0o1777,
		"bin/sh":         unix.S_IFREG | 0o755,
		"lib":            unix.S_IFLNK | 0o777,
		"ro":             unix.S_IFDIR | 0o555,
		"ro/file":        unix.S_IFREG | 0o644,
		"attrs":          unix.S_IFREG | 0o755,
	}
	for p, want := range modes {
		if got := lstat(p).Mode; got != want {
			t.Errorf("%s: mode %o, want %o", p, got, want)
		}
	}
	for p, want := range map[string]string{"etc/hostname": "corral\n", "bin/ln2": "#!sh", "ro/file": "x"} {
		if b, err := os.ReadFile(at(p)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", p, b, err, want)
		}
	}
	for p, want := range map[string]string{"lib": "usr/lib", "abs": "/etc/passwd"} {
		if got, err := os.Readlink(at(p)); err != nil || got != want {
			t.Errorf("%s -> %q, %v; want %q", p, got, err, want)
		}
	}
	sh, ln, ln2 := lstat("bin/sh"), lstat("bin/ln"), lstat("bin/ln2")
	if sh.Ino != ln.Ino || sh.Ino != ln2.Ino || sh.Nlink != 3 {
		t.Errorf("hard links: inodes %d %d %d, nlink %d; want one inode, 3 links", sh.Ino, ln.Ino, ln2.Ino, sh.Nlink)
	}
	for _, p := range []string{"etc", "ro", "etc/hostname", "abs"} {
		if got := lstat(p).Mtim; got.Sec != epoch.Unix() {
			t.Errorf("%s: mtime %d, want %d", p, got.Sec, epoch.Unix())
		}
	}
	buf := make([]byte, 64)
	if n, err := unix.Lgetxattr(at("attrs"), "user.corral", buf); err != nil || string(buf[:n]) != "yes" {
		t.Errorf("attrs: user.corral = %q, %v; want yes", buf[:n], err)
	}
	for _, x := range []string{"trusted.overlay.opaque", "trusted.overlay.redirect", "security.selinux"} {
		if _, err := unix.Lgetxattr(at("attrs"), x, buf); err == nil {
			t.Errorf("attrs: %s was set from the archive", x)
		}
	}
	if !root {
		return
	}
	if st := lstat("etc/hostname"); st.Uid != 1000 || st.Gid != 1001 {
		t.Errorf("etc/hostname: owner %d:%d, want 1000:1001", st.Uid, st.Gid)
	}
	if st := lstat("abs"); st.Uid != 7 || st.Gid != 8 {
		t.Errorf("abs: owner %d:%d, want 7:8 (lchown)", st.Uid, st.Gid)
	}
	if n, err := unix.Lgetxattr(at("attrs"), "security.capability", buf); err != nil || !bytes.Equal(buf[:n], caps) {
		t.Errorf("attrs: security.capability = %x, %v; want %x", buf[:n], err, caps)
	}
	for _, p := range []string{"old/gone", "old/keep"} {
		if st := lstat(p); st.Mode != unix.S_IFCHR || st.Rdev != 0 {
			t.Errorf("%s: mode %o rdev %d, want a 0/0 char device whiteout", p, st.Mode, st.Rdev)
		}
	}
	for _, p := range []string{"old/.wh.gone", "opq/.wh..wh..opq"} {
		if _, err := os.Lstat(at(p)); !os.IsNotExist(err) {
			t.Errorf("%s: the OCI marker itself was extracted (%v)", p, err)
		}
	}
	if n, err := unix.Lgetxattr(at("opq"), "trusted.overlay.opaque", buf); err != nil || string(buf[:n]) != "y" {
		t.Errorf("opq: trusted.overlay.opaque = %q, %v; want y", buf[:n], err)
	}
	if _, err := os.Stat(at("opq/new")); err != nil {
		t.Errorf("opq/new: %v", err)
	}
}

// zeroBomb is a gzip stream of a tar holding one 1 GiB file of zeros, built
// from repeated gzip members without ever holding the gigabyte.
func zeroBomb(t *testing.T) (io.Reader, int64) {
	const size = 1 << 30
	var hdr bytes.Buffer
	tw := tar.NewWriter(&hdr)
	if err := tw.WriteHeader(&tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Size: size, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	tw.Flush()
	chunk := gz(t, make([]byte, 1<<20))
	parts := []io.Reader{bytes.NewReader(gz(t, hdr.Bytes()))}
	total := int64(len(gz(t, hdr.Bytes())))
	for range size >> 20 {
		parts = append(parts, bytes.NewReader(chunk))
		total += int64(len(chunk))
	}
	end := gz(t, make([]byte, 1024))
	parts = append(parts, bytes.NewReader(end))
	return io.MultiReader(parts...), total + int64(len(end))
}

func TestGzipBomb(t *testing.T) {
	s := newSandbox(t)
	bomb, total := zeroBomb(t)
	src := &countReader{r: bomb}
	before := s.snapshot(t)
	_, err := Extract(context.Background(), src, s.dst, Limits{MaxRatio: 200})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), `"zeros"`) {
		t.Fatalf("err = %v, want invalid argument naming \"zeros\"", err)
	}
	s.checkOutside(t, before)
	if src.n > 1<<20 {
		t.Errorf("read %d of %d compressed bytes before refusing, want under 1 MiB", src.n, total)
	}
	if n := duSize(t, s.dst); n > 256<<20 {
		t.Errorf("wrote %d bytes before refusing, want under 256 MiB", n)
	}
	t.Logf("refused after %d of %d compressed bytes, %d bytes written", src.n, total, duSize(t, s.dst))
}

func TestNotEmptyDestination(t *testing.T) {
	s := newSandbox(t)
	os.WriteFile(filepath.Join(s.dst, "x"), nil, 0o644)
	_, err := Extract(context.Background(), bytes.NewReader(mkTar(t, file("f", "x"))), s.dst, Limits{})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("err = %v, want failed precondition", err)
	}
}

func TestZstdNotSupported(t *testing.T) {
	s := newSandbox(t)
	_, err := Extract(context.Background(), bytes.NewReader([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0}), s.dst, Limits{})
	if !errors.Is(err, errdefs.ErrNotSupported) {
		t.Fatalf("err = %v, want not supported", err)
	}
}

func TestMalformed(t *testing.T) {
	layer := mkTar(t, file("a", strings.Repeat("x", 2000)))
	for name, in := range map[string][]byte{
		"garbage":        []byte(strings.Repeat("not a tar ", 100)),
		"truncated":      layer[:1024],
		"truncated gzip": gz(t, layer)[:40],
	} {
		t.Run(name, func(t *testing.T) {
			s := newSandbox(t)
			_, err := Extract(context.Background(), bytes.NewReader(in), s.dst, Limits{})
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("err = %v, want invalid argument", err)
			}
		})
	}
}

// A failing source is reported as itself, not as a malformed archive.
func TestSourceError(t *testing.T) {
	s := newSandbox(t)
	boom := errors.New("connection reset")
	layer := mkTar(t, file("a", strings.Repeat("x", 4000)))
	r := io.MultiReader(bytes.NewReader(layer[:1500]), iotestErr{boom})
	_, err := Extract(context.Background(), r, s.dst, Limits{})
	if !errors.Is(err, boom) || errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("err = %v, want the source's error", err)
	}
}

type iotestErr struct{ err error }

func (r iotestErr) Read([]byte) (int, error) { return 0, r.err }

func TestCancelled(t *testing.T) {
	s := newSandbox(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Extract(ctx, bytes.NewReader(mkTar(t, file("f", "x"))), s.dst, Limits{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestCleanName(t *testing.T) {
	x := &extractor{lim: Limits{}.withDefaults()}
	for in, want := range map[string]string{
		"a/b": "a/b", "/etc/x": "etc/x", "./a/": "a", "a/../b": "b", "//x//y/": "x/y",
		"./": ".", "/": ".", "a/..": ".",
		"..": "", "../x": "", "a/../../x": "", "/../x": "", "a\x00b": "", "": "",
	} {
		got, err := x.cleanName(in, in)
		if want == "" {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("cleanName(%q) = %q, %v; want refused", in, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("cleanName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// A GNU sparse file, which 3 KiB of layer can make into any size on disk,
// is refused before anything is written.
func TestSparseRefused(t *testing.T) {
	dst := t.TempDir()
	_, err := Extract(context.Background(), bytes.NewReader(tartest.Sparse("big", 32<<20)), dst, Limits{})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "sparse") {
		t.Fatalf("a sparse file: %v, want invalid argument naming it", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "big")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the sparse file was written: %v", err)
	}
}
