package agent

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"corral/internal/errdefs"
)

func TestPortConnect(t *testing.T) {
	env := newEnv(t, "")
	ctx := testCtx(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				// Echo upper-cased lines until the client half-closes.
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					io.WriteString(c, strings.ToUpper(sc.Text())+"\n")
				}
				io.WriteString(c, "bye\n")
			}()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port

	// Two streams at once over the one agent connection, interleaved.
	a, err := env.c.DialPort(ctx, port)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := env.c.DialPort(ctx, port)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ra, rb := bufio.NewReader(a), bufio.NewReader(b)
	for _, msg := range []string{"one", "two"} {
		io.WriteString(a, msg+"\n")
		io.WriteString(b, msg+"-b\n")
		if got, _ := ra.ReadString('\n'); got != strings.ToUpper(msg)+"\n" {
			t.Fatalf("stream a: %q", got)
		}
		if got, _ := rb.ReadString('\n'); got != strings.ToUpper(msg)+"-B\n" {
			t.Fatalf("stream b: %q", got)
		}
	}
	// Half-close reaches the server, whose last words still come back.
	if err := a.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(ra); string(rest) != "bye\n" {
		t.Fatalf("after half-close: %q", rest)
	}

	// A server that answers and closes ends the stream, though the caller
	// never half-closed (an HTTP/1.0 server's way).
	l3, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Close()
	go func() {
		if c, err := l3.Accept(); err == nil {
			io.WriteString(c, "answer and close\n")
			c.Close()
		}
	}()
	c, err := env.c.DialPort(ctx, l3.Addr().(*net.TCPAddr).Port)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if rest, err := io.ReadAll(c); err != nil || string(rest) != "answer and close\n" {
		t.Fatalf("a server's close: %q, %v", rest, err)
	}

	// Nothing listening, and a bad port, are invalid_argument.
	l2, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := l2.Addr().(*net.TCPAddr).Port
	l2.Close()
	for _, p := range []int{closed, 0, 70000} {
		if _, err := env.c.DialPort(ctx, p); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("DialPort(%d) = %v; want invalid_argument", p, err)
		}
	}
}
