package envd

import (
	"errors"
	"fmt"
	"io"

	"corral/internal/errdefs"
)

// inputError is a failure reading the client's body (a gzip error, a bomb,
// a broken multipart part), kept apart from the agent's own errors.
type inputError struct{ err error }

func (e *inputError) Error() string { return e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

// countingReader counts the compressed bytes read.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// bombGuard fails a gzip stream that expands more than maxGzipExpand times
// past its first gzipFreeBytes.
type bombGuard struct {
	r   io.Reader
	in  *countingReader
	out int64
}

func (b *bombGuard) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.out += int64(n)
	if b.out > gzipFreeBytes && b.out > maxGzipExpand*b.in.n {
		return 0, &inputError{fmt.Errorf("%w: body: the gzip stream expands more than %d times (a gzip bomb?)", errdefs.ErrInvalidArgument, maxGzipExpand)}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return n, &inputError{fmt.Errorf("%w: body: %v", errdefs.ErrInvalidArgument, err)}
	}
	return n, err
}

// limitReader fails past n bytes and remembers that it did, and the
// first error of the reader under it.
type limitReader struct {
	r    io.Reader
	n    int64
	over bool
	err  error
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		var one [1]byte
		if k, _ := l.r.Read(one[:]); k > 0 {
			l.over = true
			return 0, &inputError{fmt.Errorf("%w: a file over the size limit", errdefs.ErrResourceExhausted)}
		}
		return 0, io.EOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	if err != nil && !errors.Is(err, io.EOF) && l.err == nil {
		l.err = err
	}
	return n, err
}
