package boundfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// previous is the suffix of a log's previous part.
const previous = ".1"

// Rotate starts the log at path afresh once it holds more than
// LogRotateBytes (in size or in allocated blocks): its last LogRotateBytes
// become path.1 (replacing the one before) and path is truncated to
// nothing. Its writers append (O_APPEND), so their next write lands at the
// new end; one that writes at an offset of its own (a guest process that
// reopened its PID 1's output) leaves a hole, which costs no space and is
// cut off at the next rotation. Only the log's tail is read, so a sparse
// log of any apparent size costs one bounded read. It reports whether it
// rotated; a missing log is not an error.
func Rotate(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("rotating %s: %w", path, err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return false, fmt.Errorf("rotating %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, fmt.Errorf("rotating %s: not a regular file", path)
	}
	if st.Size <= LogRotateBytes && st.Blocks*512 <= LogRotateBytes {
		return false, nil
	}
	tail := make([]byte, LogRotateBytes)
	n, err := f.ReadAt(tail, max(0, st.Size-LogRotateBytes))
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("rotating %s: %w", path, err)
	}
	// Truncate before writing the previous part: on a full mount (no
	// daemon rotated for a while) that write needs the room.
	if err := f.Truncate(0); err != nil {
		return false, fmt.Errorf("rotating %s: %w", path, err)
	}
	if err := writeAtomic(path+previous, tail[:n]); err != nil {
		return true, fmt.Errorf("rotating %s: keeping its previous part: %w", path, err)
	}
	return true, nil
}

// writeAtomic replaces path with b (through a temporary file beside it).
func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// Tail returns up to n trailing bytes of the log at path, its previous
// part included, or nil.
func Tail(path string, n int64) []byte {
	cur := readTail(path, n)
	if int64(len(cur)) >= n {
		return cur
	}
	return append(readTail(path+previous, n-int64(len(cur))), cur...)
}

// readTail reads up to n trailing bytes of path, without following a
// symlink.
func readTail(path string, n int64) []byte {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	off := max(0, fi.Size()-n)
	b := make([]byte, fi.Size()-off)
	k, _ := f.ReadAt(b, off)
	return b[:k]
}

// TailLines returns the last non-empty lines of the log at path (at most
// lines of them, read from its last 8 KiB), joined by sep, or "".
func TailLines(path string, lines int, sep string) string {
	var out []string
	for _, l := range strings.Split(string(Tail(path, 8<<10)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	if len(out) > lines {
		out = out[len(out)-lines:]
	}
	return strings.Join(out, sep)
}
