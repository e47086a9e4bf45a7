package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"strconv"
)

// Digest counts and hashes what is read through it (a file written
// through the API), so the trail names its size and SHA-256 without a
// second read.
type Digest struct {
	r io.Reader
	h hash.Hash
	n int64
}

// NewDigest reads through r.
func NewDigest(r io.Reader) *Digest { return &Digest{r: r, h: sha256.New()} }

func (d *Digest) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	d.h.Write(p[:n])
	d.n += int64(n)
	return n, err
}

// Fields are the size and hash of what was read so far.
func (d *Digest) Fields() map[string]string {
	return map[string]string{"size": strconv.FormatInt(d.n, 10), "sha256": hex.EncodeToString(d.h.Sum(nil))}
}
