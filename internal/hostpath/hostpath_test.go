package hostpath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"
)

func TestRedactor(t *testing.T) {
	r := NewRedactor("/var/lib/corral", "/var/lib/corral/rootfs/debian-bookworm", "", "relative", "/", "/srv/base/")
	tests := []struct{ in, want string }{
		{"importing /var/lib/corral/images/tmp/import-123.tar: open /var/lib/corral/images/tmp/oci-import-9/index.json: no such file or directory",
			"importing <host path>: open <host path>: no such file or directory"},
		{`entry "a": opening "/var/lib/corral/x y"`, `entry "a": opening "<host path> y"`},
		{"stat /var/lib/corral: permission denied", "stat <host path>: permission denied"},
		{"corrupt record /var/lib/corral/images/sha256/ab.json, and (/srv/base/etc)", "corrupt record <host path>, and (<host path>)"},
		{"/srv/base", "<host path>"},
		// The sandbox's paths, and paths that only share a prefix, stay.
		{"workdir /tmp/x: no such file", "workdir /tmp/x: no such file"},
		{"/var/lib/corralx/y and /home/var/lib/corral/z", "/var/lib/corralx/y and /home/var/lib/corral/z"},
		{"./var/lib/corral", "./var/lib/corral"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := r.String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	var none *Redactor
	if got := none.String("/var/lib/corral/x"); got != "/var/lib/corral/x" {
		t.Errorf("nil Redactor changed the message: %q", got)
	}
}

func FuzzRedactor(f *testing.F) {
	f.Add("open /var/lib/corral/a/b: x", "/var/lib/corral")
	f.Fuzz(func(t *testing.T, msg, root string) {
		r := NewRedactor(root)
		out := r.String(msg)
		if len(r.roots) == 1 && indexPath(out, r.roots[0]) >= 0 {
			t.Fatalf("String(%q) with root %q = %q, still naming it", msg, root, out)
		}
	})
}

func TestRedactorError(t *testing.T) {
	r := NewRedactor("/srv/state")
	base := &os.PathError{Op: "open", Path: "/srv/state/tmp/x.tar", Err: fs.ErrNotExist}
	err := r.Error(fmt.Errorf("%w: importing: %w", errInvalid, base))
	if got, want := err.Error(), "invalid: importing: open <host path>: file does not exist"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if !errors.Is(err, errInvalid) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the chain is lost: %v", err)
	}
	var pe *os.PathError
	if !errors.As(err, &pe) {
		t.Error("errors.As does not find the *os.PathError")
	}
	if r.Error(nil) != nil {
		t.Error("Error(nil) is not nil")
	}
	if plain := errors.New("nothing to hide"); r.Error(plain) != plain {
		t.Error("an error without paths was wrapped")
	}
}

var errInvalid = errors.New("invalid")

func TestRelative(t *testing.T) {
	err := Relative(fmt.Errorf("reading: %w", &os.PathError{Op: "lstat", Path: "/srv/x/layout/blobs/sha256/ab", Err: fs.ErrNotExist}), "/srv/x/layout/")
	if got, want := err.Error(), "reading: lstat blobs/sha256/ab: file does not exist"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Error("the chain is lost")
	}
}
