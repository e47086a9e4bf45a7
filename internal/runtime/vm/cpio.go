package vm

import (
	"fmt"
	"io"
	"strings"
)

// cpioWriter writes a "newc" cpio archive, the format the kernel unpacks
// as an initramfs.
type cpioWriter struct {
	w   io.Writer
	n   int64
	ino int
}

const (
	cpioDir     = 0o040000
	cpioReg     = 0o100000
	cpioCharDev = 0o020000
)

func (c *cpioWriter) write(b []byte) error {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return err
}

func (c *cpioWriter) pad() error {
	if r := c.n % 4; r != 0 {
		return c.write(make([]byte, 4-r))
	}
	return nil
}

// header writes one entry's header and name; data must follow (size
// bytes) and then pad.
func (c *cpioWriter) header(name string, mode uint32, size int64, rdevMajor, rdevMinor int) error {
	if strings.ContainsRune(name, 0) {
		return fmt.Errorf("cpio: name %q holds a NUL", name)
	}
	c.ino++
	nlink := 1
	if mode&cpioDir != 0 {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, size, 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	if err := c.write([]byte(hdr)); err != nil {
		return err
	}
	if err := c.write(append([]byte(name), 0)); err != nil {
		return err
	}
	return c.pad()
}

func (c *cpioWriter) dir(name string) error {
	return c.header(name, cpioDir|0o755, 0, 0, 0)
}

func (c *cpioWriter) charDev(name string, perm uint32, major, minor int) error {
	return c.header(name, cpioCharDev|perm, 0, major, minor)
}

// file writes a regular file of size bytes read from r.
func (c *cpioWriter) file(name string, perm uint32, size int64, r io.Reader) error {
	if err := c.header(name, cpioReg|perm, size, 0, 0); err != nil {
		return err
	}
	n, err := io.Copy(c.w, io.LimitReader(r, size))
	c.n += n
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("cpio: %s: %d bytes, expected %d", name, n, size)
	}
	return c.pad()
}

// close writes the trailer.
func (c *cpioWriter) close() error {
	return c.header("TRAILER!!!", 0, 0, 0, 0)
}
