package dirtar

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"corral/internal/errdefs"
)

func TestEntries(t *testing.T) {
	tree := sampleTree(t)
	file := filepath.Join(t.TempDir(), "conf.ini")
	mkFile(t, file, "x=1", 0o600)
	cases := []struct {
		name     string
		src, dst string
		want     []ent
	}{
		{"dir under a path", tree, "/opt/app", append([]ent{dirEnt("opt/", 0o755), dirEnt("opt/app/", 0o750)}, sampleEntries("opt/app/")...)},
		{"dir at the root", tree, "/", sampleEntries("")},
		{"dir at an unclean path", tree, "/opt//x/../app/", append([]ent{dirEnt("opt/", 0o755), dirEnt("opt/app/", 0o750)}, sampleEntries("opt/app/")...)},
		{"file at a name", file, "/etc/app/app.ini", []ent{dirEnt("etc/", 0o755), dirEnt("etc/app/", 0o755), regEnt("etc/app/app.ini", 0o600, "x=1")}},
		{"file into a dir", file, "/etc/app/", []ent{dirEnt("etc/", 0o755), dirEnt("etc/app/", 0o755), regEnt("etc/app/conf.ini", 0o600, "x=1")}},
		{"file into the root", file, "/", []ent{regEnt("conf.ini", 0o600, "x=1")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data, st := writeTar(t, tc.src, tc.dst, Options{Normalize: true})
			got, _ := readTar(t, data)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("entries:\n got %v\nwant %v", got, tc.want)
			}
			if st.Entries != len(tc.want) {
				t.Errorf("Stats.Entries = %d, want %d", st.Entries, len(tc.want))
			}
			var bytes int64
			for _, e := range tc.want {
				bytes += int64(len(e.body))
			}
			if st.Bytes != bytes {
				t.Errorf("Stats.Bytes = %d, want %d", st.Bytes, bytes)
			}
		})
	}
}

func TestNormalizedHeaders(t *testing.T) {
	data, _ := writeTar(t, sampleTree(t), "/app", Options{Normalize: true})
	_, hdrs := readTar(t, data)
	for _, h := range hdrs {
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: owner %d:%d %q:%q, want 0:0 and no names", h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		if !h.ModTime.Equal(NormalTime) || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() {
			t.Errorf("%s: times %v %v %v, want only mtime %v", h.Name, h.ModTime, h.AccessTime, h.ChangeTime, NormalTime)
		}
		if len(h.PAXRecords) != 0 {
			t.Errorf("%s: PAX records %v, want none", h.Name, h.PAXRecords)
		}
	}
}

// TestNormalizeStable: the bytes depend on content, not on times or owners.
func TestNormalizeStable(t *testing.T) {
	tree := sampleTree(t)
	before, _ := writeTar(t, tree, "/app", Options{Normalize: true})

	later := time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.UTC)
	err := filepath.Walk(tree, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.Mode()&os.ModeSymlink != 0 {
			return err
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(p, 1234, 5678); err != nil {
				return err
			}
		}
		return os.Chtimes(p, later, later)
	})
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// Lchown clears setuid; put it back so only owners and times differ.
		if err := os.Chmod(filepath.Join(tree, "bin", "tool"), 0o755|os.ModeSetuid); err != nil {
			t.Fatal(err)
		}
	}
	touched, _ := writeTar(t, tree, "/app", Options{Normalize: true})
	if !bytes.Equal(before, touched) {
		t.Error("new times (and owners, as root) changed the normalized tar")
	}

	mkFile(t, filepath.Join(tree, "a.txt"), "B", 0o644)
	changed, _ := writeTar(t, tree, "/app", Options{Normalize: true})
	if bytes.Equal(before, changed) {
		t.Error("a content change left the normalized tar the same")
	}
}

// TestPreserve: without Normalize, owners, times (in seconds) and the kept
// extended attributes are written.
func TestPreserve(t *testing.T) {
	tree := sampleTree(t)
	when := time.Date(2021, 3, 4, 5, 6, 7, 890, time.UTC)
	a := filepath.Join(tree, "a.txt")
	if err := os.Chtimes(a, when, when); err != nil {
		t.Fatal(err)
	}
	xattrs := true
	if err := unix.Lsetxattr(a, "user.corral.test", []byte("v"), 0); err != nil {
		t.Logf("no user xattrs on %s (%v): not checking them", tree, err)
		xattrs = false
	}
	data, _ := writeTar(t, tree, "/", Options{})
	_, hdrs := readTar(t, data)
	h := hdrs[0]
	if h.Name != "a.txt" {
		t.Fatalf("first entry %q, want a.txt", h.Name)
	}
	if !h.ModTime.Equal(when.Truncate(time.Second)) {
		t.Errorf("mtime %v, want %v", h.ModTime, when.Truncate(time.Second))
	}
	if h.Uid != os.Getuid() || h.Gid != os.Getgid() {
		t.Errorf("owner %d:%d, want %d:%d", h.Uid, h.Gid, os.Getuid(), os.Getgid())
	}
	if _, ok := h.PAXRecords["mtime"]; ok {
		t.Errorf("PAX mtime record %q written for a whole second", h.PAXRecords["mtime"])
	}
	if want := "v"; xattrs && h.PAXRecords["SCHILY.xattr.user.corral.test"] != want {
		t.Errorf("PAX records %v, want SCHILY.xattr.user.corral.test=%q", h.PAXRecords, want)
	}
}

func TestKeepXattr(t *testing.T) {
	for name, want := range map[string]bool{
		"security.capability": true, "user.mime_type": true,
		"security.selinux": false, "trusted.overlay.opaque": false, "system.posix_acl_access": false,
	} {
		if got := keepXattr(name, false); got != want {
			t.Errorf("keepXattr(%q) = %v, want %v", name, got, want)
		}
	}
	if !keepXattr("trusted.overlay.opaque", true) || keepXattr("trusted.overlay.redirect", true) {
		t.Error("an overlay upper keeps trusted.overlay.opaque, and no other trusted attribute")
	}
}

// An overlay upper directory keeps its whiteouts and opaque directories
// (needs root: mknod and trusted xattrs).
func TestOverlayUpper(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make whiteouts and trusted xattrs")
	}
	root := t.TempDir()
	if err := unix.Mknod(filepath.Join(root, "gone"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "opaque"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(root, "opaque"), "trusted.overlay.opaque", []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(root, "null"), unix.S_IFCHR, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(root, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock, err := net.Listen("unix", filepath.Join(root, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	var buf bytes.Buffer
	st, err := Write(&buf, root, "/", Options{Overlay: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*tar.Header{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		got[h.Name] = h
	}
	if h := got["gone"]; h == nil || h.Typeflag != tar.TypeChar || h.Devmajor != 0 || h.Devminor != 0 {
		t.Errorf("the whiteout: %+v", h)
	}
	if h := got["opaque/"]; h == nil || h.PAXRecords["SCHILY.xattr.trusted.overlay.opaque"] != "y" {
		t.Errorf("the opaque directory: %+v", h)
	}
	// Device nodes and FIFOs go as headers, for overlaytar to name what it
	// leaves out; a socket, which a tar cannot hold, is skipped.
	if h := got["null"]; h == nil || h.Typeflag != tar.TypeChar || h.Devmajor != 1 || h.Devminor != 3 {
		t.Errorf("the device node: %+v", h)
	}
	if h := got["fifo"]; h == nil || h.Typeflag != tar.TypeFifo || h.Size != 0 {
		t.Errorf("the FIFO: %+v", h)
	}
	if got["sock"] != nil || st.SkippedCount != 1 || st.Skipped[0] != "sock" {
		t.Errorf("the socket was not skipped: %+v, %+v", got["sock"], st)
	}
}

func TestSkipsSpecialFiles(t *testing.T) {
	root := t.TempDir()
	mkFile(t, filepath.Join(root, "keep"), "k", 0o644)
	const fifos = MaxSkippedNames + 2
	for i := range fifos {
		if err := unix.Mkfifo(filepath.Join(root, fmt.Sprintf("fifo%02d", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mkDir(t, root, 0o755) // TempDir makes it 0700
	data, st := writeTar(t, root, "/d", Options{Normalize: true})
	got, _ := readTar(t, data)
	want := []ent{dirEnt("d/", 0o755), regEnt("d/keep", 0o644, "k")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries:\n got %v\nwant %v", got, want)
	}
	if st.SkippedCount != fifos || len(st.Skipped) != MaxSkippedNames || st.Skipped[0] != "d/fifo00" {
		t.Errorf("Stats: %d skipped, listed %v; want %d, the first %d listed from d/fifo00", st.SkippedCount, st.Skipped, fifos, MaxSkippedNames)
	}
}

func TestRefused(t *testing.T) {
	dir := t.TempDir()
	mkFile(t, filepath.Join(dir, "f"), "f", 0o644)
	if err := os.Symlink("f", filepath.Join(dir, "sym")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, src, dst string
		kind           error
		msg            string
	}{
		{"symlink src", filepath.Join(dir, "sym"), "/x", errdefs.ErrInvalidArgument, "is a symlink"},
		{"fifo src", filepath.Join(dir, "fifo"), "/x", errdefs.ErrInvalidArgument, "not a regular file"},
		{"relative dst", filepath.Join(dir, "f"), "x", errdefs.ErrInvalidArgument, "not an absolute path"},
		{"missing src", filepath.Join(dir, "none"), "/x", os.ErrNotExist, "none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			_, err := Write(&buf, tc.src, tc.dst, Options{})
			if !errors.Is(err, tc.kind) || !strings.Contains(fmt.Sprint(err), tc.msg) {
				t.Errorf("Write: %v, want %v naming %q", err, tc.kind, tc.msg)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes before refusing", buf.Len())
			}
		})
	}
}

func TestLongNames(t *testing.T) {
	root := t.TempDir()
	long := strings.Repeat("d", 90) + "/" + strings.Repeat("f", 120)
	mkFile(t, filepath.Join(root, long), "L", 0o644)
	data, _ := writeTar(t, root, "/"+strings.Repeat("p", 80), Options{Normalize: true})
	got, _ := readTar(t, data)
	if last := got[len(got)-1]; last.name != strings.Repeat("p", 80)+"/"+long || last.body != "L" {
		t.Errorf("last entry %q %q, want the long name", last.name, last.body)
	}
}
