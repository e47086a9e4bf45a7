package e2e

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// bindInto bind-mounts each source (a file or directory) read-only at its
// path under dir, as a production state dir holds runsc, the base rootfs
// and the guest kernel, and returns the paths. The mounts go when the
// test ends, after the daemon's teardown (which the read-only mounts
// protect: its RemoveAll cannot delete what they show), and the rest of
// dir with them.
func bindInto(t *testing.T, dir string, sources map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var mounted []string
	t.Cleanup(func() {
		for _, p := range mounted {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmounting %s: %v", p, err)
				return // never remove a tree a source may still show through
			}
		}
		os.RemoveAll(dir)
	})
	for rel, src := range sources {
		target := filepath.Join(dir, rel)
		out[rel] = target
		fi, err := os.Stat(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		if fi.IsDir() {
			err = os.Mkdir(target, 0o755)
		} else {
			err = os.WriteFile(target, nil, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
			t.Fatalf("binding %s: %v", src, err)
		}
		mounted = append(mounted, target)
		if err := syscall.Mount("", target, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
			t.Fatalf("making %s read-only: %v", target, err)
		}
		var st syscall.Statfs_t
		if err := syscall.Statfs(target, &st); err != nil || st.Flags&stRdonly == 0 {
			t.Fatalf("the bind mount at %s is not read-only (flags %#x, %v)", target, st.Flags, err)
		}
	}
	return out
}

// stRdonly is statfs's ST_RDONLY flag: a read-only mount.
const stRdonly = 1

// entry is one path to probe: its kind (d directory, f regular file, o
// anything else) and path.
type entry struct {
	kind byte
	path string
}

// walkState lists everything under dir, as root.
func walkState(t *testing.T, dir string) []entry {
	t.Helper()
	var out []entry
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case e.IsDir():
			out = append(out, entry{'d', p})
		case e.Type().IsRegular():
			out = append(out, entry{'f', p})
		default:
			out = append(out, entry{'o', p})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// probeScript runs as the unprivileged user over "kind<TAB>path" lines
// and prints each path it could list, read or reach. Builtins only (no
// fork per path): a redirection opens a file for reading (on true: a
// failed redirection on a special builtin would end the shell), a glob lists a
// directory (".*" always matches "." where the directory can be read),
// and test -r/-w asks the kernel about anything else (a socket).
const probeScript = `
while IFS='	' read -r kind p; do
	case $kind in
	d) set -- "$p"/.*; [ "$1" != "$p/.*" ] && echo "$p";;
	f) { true <"$p"; } 2>/dev/null && echo "$p";;
	*) { [ -r "$p" ] || [ -w "$p" ]; } && echo "$p";;
	esac
done
exit 0
`

// probeAsNobody tries every entry as the user nobody (a child process
// with that uid and gid, no groups) and returns those it could list,
// read or reach. A control file and directory, open to all, must be
// reached: a probe that reaches nothing proves nothing.
func probeAsNobody(t *testing.T, entries []entry) []string {
	t.Helper()
	uid, gid := 65534, 65534
	if u, err := user.Lookup("nobody"); err == nil {
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
	}
	ctl, err := os.MkdirTemp("", "corral-e2e-ctl-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(ctl)
	ctlFile := filepath.Join(ctl, "open")
	if err := os.Chmod(ctl, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ctlFile, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	for _, e := range append(entries, entry{'d', ctl}, entry{'f', ctlFile}) {
		in.WriteString(string(e.kind) + "\t" + e.path + "\n")
	}
	cmd := exec.Command("/bin/sh", "-c", probeScript)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Stdin = &in
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the probe as nobody: %v", err)
	}
	var reached []string
	sawCtl := 0
	for _, p := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		switch p {
		case "":
		case ctl, ctlFile:
			sawCtl++
		default:
			reached = append(reached, p)
		}
	}
	if sawCtl != 2 {
		t.Fatalf("the probe as nobody did not reach its open control file and directory: it proves nothing")
	}
	t.Logf("probed %d paths as uid %d", len(entries), uid)
	return reached
}

// assertPrivateModes checks, as root, the modes the daemon keeps in its
// state dir, one by one (each would keep a secret from other users even
// if the state dir were opened).
func assertPrivateModes(t *testing.T, state string) {
	t.Helper()
	want := map[string]os.FileMode{"": 0o700, "token": 0o600, "seal.key": 0o600, "daemon.lock": 0o600,
		"corral.db": 0o600, "corral.db-wal": 0o600, "corral.db-shm": 0o600, "runsc": 0o700}
	for _, d := range []string{"logs", "sandboxes", "snapshots", "net/slots"} {
		want[d] = 0o700
		ents, err := os.ReadDir(filepath.Join(state, d))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			switch {
			case e.IsDir():
				want[filepath.Join(d, e.Name())] = 0o700
			case e.Type().IsRegular():
				want[filepath.Join(d, e.Name())] = 0o600
			}
		}
	}
	for p, m := range want {
		fi, err := os.Lstat(filepath.Join(state, p))
		if errors.Is(err, fs.ErrNotExist) && strings.HasPrefix(p, "corral.db-") {
			continue // the WAL's files exist while the database is open
		}
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if got := fi.Mode().Perm(); got&0o077 != 0 || got&0o600 != 0o600 {
			t.Errorf("%s/%s has mode %v, want %v", filepath.Base(state), p, got, m)
		}
	}
}
