// Package pgtest starts a throwaway PostgreSQL for tests: its own cluster
// (initdb) in a temporary directory, listening on a unix socket there
// only, run as the postgres user when the test runs as root, stopped and
// removed when the test ends. It never uses a system service.
//
// It imports nothing from Corral.
package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
)

// binDir finds PostgreSQL's server binaries (Debian's postgresql package
// puts them in /usr/lib/postgresql/<major>/bin); the newest major wins.
func binDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return major(dirs[i]) > major(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

func major(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Start starts a PostgreSQL and returns a pgx connection string for it.
// Where its binaries are missing it skips the test, unless the test runs
// as root (CI), where that is a failure: scripts/deps.sh installs them.
// settings ("name=value") are server settings added to the defaults (the
// scaling benchmark loads pg_stat_statements this way).
func Start(t testing.TB, settings ...string) string {
	t.Helper()
	bin := binDir()
	if bin == "" {
		if os.Geteuid() == 0 {
			t.Fatal("PostgreSQL's initdb is not installed (scripts/deps.sh installs the postgresql package)")
		}
		t.Skip("PostgreSQL's initdb is not installed (apt-get install postgresql)")
	}
	dir, err := os.MkdirTemp("", "corral-pg-")
	if err != nil {
		t.Fatal(err)
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		// initdb refuses to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running PostgreSQL as root needs the postgres user (the postgresql package makes it): %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	// No TCP at all: the socket in dir is the only way in.
	opts := fmt.Sprintf("-k %s -c listen_addresses='' -c fsync=off -c max_connections=200", dir)
	for _, s := range settings {
		opts += " -c " + s
	}
	run("pg_ctl", "start", "-D", data, "-w", "-t", "60", "-l", filepath.Join(dir, "log"), "-o", opts)
	t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(bin, "pg_ctl"), "stop", "-D", data, "-m", "immediate", "-w")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("stopping PostgreSQL: %v\n%s", err, out)
		}
		_ = os.RemoveAll(dir)
	})
	return fmt.Sprintf("host=%s user=postgres dbname=postgres sslmode=disable", dir)
}
