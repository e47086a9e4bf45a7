package daemon

import (
	"fmt"
	"os"
	"sync"
)

// LogFile is the daemon's --log-file, rotated by size: when a write would
// take it past MaxBytes it is renamed to <path>.1 (the older ones moving
// up to <path>.<Keep>, the oldest removed) and a fresh one opened, 0600
// like the first (OpenLog). Reopen (on SIGHUP) starts a new file at path
// for an outside rotator such as logrotate. Safe for concurrent writes.
type LogFile struct {
	path     string
	maxBytes int64
	keep     int

	mu   sync.Mutex
	f    *os.File
	size int64
}

// OpenLogFile opens path for the log, rotating past maxBytes (0: never)
// and keeping keep rotated files.
func OpenLogFile(path string, maxBytes int64, keep int) (*LogFile, error) {
	if maxBytes < 0 || keep < 0 || maxBytes > 0 && keep == 0 {
		return nil, fmt.Errorf("log rotation: want a size of at least 0 and, with a size, at least 1 file kept")
	}
	l := &LogFile{path: path, maxBytes: maxBytes, keep: keep}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *LogFile) open() error {
	f, err := OpenLog(l.path)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.size = f, st.Size()
	return nil
}

// Write appends p, rotating first when p would take the file past its size.
func (l *LogFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.maxBytes > 0 && l.size > 0 && l.size+int64(len(p)) > l.maxBytes {
		if err := l.rotate(); err != nil {
			// Keep logging to the file we have rather than lose lines.
			fmt.Fprintf(os.Stderr, "corral: rotating the log: %v\n", err)
		}
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	return n, err
}

// rotate shifts <path>.i to <path>.i+1 (dropping the last), the current
// file to <path>.1, and opens a new one.
func (l *LogFile) rotate() error {
	_ = os.Remove(fmt.Sprintf("%s.%d", l.path, l.keep))
	for i := l.keep - 1; i >= 1; i-- {
		_ = os.Rename(fmt.Sprintf("%s.%d", l.path, i), fmt.Sprintf("%s.%d", l.path, i+1))
	}
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return err
	}
	old := l.f
	if err := l.open(); err != nil {
		return err
	}
	old.Close()
	return nil
}

// Reopen closes the file and opens path again (a rotator moved it).
func (l *LogFile) Reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.f
	if err := l.open(); err != nil {
		return err
	}
	old.Close()
	return nil
}

// Close closes the file.
func (l *LogFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}
