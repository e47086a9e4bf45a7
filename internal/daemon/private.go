package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// The state directory holds the API token, the seal key, the records
// (sandboxes' env, sealed), the entrypoint logs and the runtimes' files:
// nothing in it is for other local users. The daemon and everything it
// runs that opens a path there run as root (runsc's gofer and sandbox,
// mkfs, QEMU until it drops to its own uid, after which it opens nothing
// by path), so the directory is its owner's alone.

// Modes of the state directory and of what it holds.
const (
	privateDir  = 0o700
	privateFile = 0o600
)

// privateSubdirs are the directories holding records of sandboxes and
// their output, whose entries are made private too (one level down); the
// rest of the tree is reachable only through the state directory.
var privateSubdirs = []string{"logs", "sandboxes", "snapshots", filepath.Join("net", "slots"), "runsc"}

// tightenState makes the state directory 0700 and every file directly in
// it 0600 (a directory made by an older version, or by scripts/setup.sh,
// was 0755 and its corral.db 0644), its first-level directories and
// privateSubdirs 0700, and what these hold directly: directories 0700,
// files 0600. Symlinks are left alone.
func tightenState(dir string) error {
	// The state directory itself may be a symlink (to another disk).
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("making the state directory private: %w", err)
	}
	if err := chmodNoFollow(dir, privateDir); err != nil {
		return fmt.Errorf("making the state directory private: %w", err)
	}
	if err := tightenEntries(dir); err != nil {
		return err
	}
	for _, sub := range privateSubdirs {
		p := filepath.Join(dir, sub)
		if err := chmodNoFollow(p, privateDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("making %s private: %w", p, err)
		}
		if err := tightenEntries(p); err != nil {
			return err
		}
	}
	return nil
}

// tightenEntries takes group and other bits off the entries of dir
// (absent: nothing to do).
func tightenEntries(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("making %s private: %w", dir, err)
	}
	for _, e := range ents {
		mode := os.FileMode(privateFile)
		switch {
		case e.IsDir():
			mode = privateDir
		case !e.Type().IsRegular():
			continue // sockets, links: their directory guards them
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // gone meanwhile
		}
		if err != nil {
			return fmt.Errorf("making %s private: %w", dir, err)
		}
		if info.Mode().Perm()&0o077 == 0 {
			continue
		}
		// Keep the owner's bits (an executable stays executable). A mount
		// point whose filesystem refuses a chmod (runsc's null-netns, an
		// nsfs file) is left as it is, guarded by its directory.
		err = chmodNoFollow(filepath.Join(dir, e.Name()), info.Mode().Perm()&^0o077|mode&0o700)
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EROFS) {
			return fmt.Errorf("making %s private: %w", dir, err)
		}
	}
	return nil
}

// chmodNoFollow changes the mode of path itself; a symlink is left as it
// is, and so is its target.
func chmodNoFollow(path string, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Chmod(mode)
}

// OpenLog opens the daemon's log file for appending, creating it 0600 or
// tightening an existing one to 0600: log lines name sandboxes and
// clients, which other local users have no business reading.
func OpenLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, privateFile)
	if err != nil {
		return nil, fmt.Errorf("opening the log file: %w", err)
	}
	if err := f.Chmod(privateFile); err != nil {
		f.Close()
		return nil, fmt.Errorf("opening the log file: %w", err)
	}
	return f, nil
}
