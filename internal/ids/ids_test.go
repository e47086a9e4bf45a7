package ids

import (
	"errors"
	"strings"
	"testing"

	"corral/internal/errdefs"
)

func TestShapes(t *testing.T) {
	for range 100 {
		if id := NewSandbox(); !Sandbox(id) || Snapshot(id) || CheckSandbox(id) != nil {
			t.Fatalf("NewSandbox() = %q does not check as a sandbox id only", id)
		}
		if id := NewSnapshot(); !Snapshot(id) || Sandbox(id) {
			t.Fatalf("NewSnapshot() = %q does not check as a snapshot id only", id)
		}
	}
	for _, bad := range []string{
		"", "sb-", "sb-abc", "sb-aaaaaaaaaaaaaaa", "sb-aaaaaaaaaaaaaaaaa", "SB-aaaaaaaaaaaaaaaa",
		"sb-AAAAAAAAAAAAAAAA", "sb-aaaaaaaaaaaaaaa1", "sb-aaaaaaaaaaaaaa/a", "sb-aaaaaaaaaaaaaa..",
		"../aaaaaaaaaaaaaaaaa", "sb-aaaaaaaaaaaaaaa\x00", "snap-aaaaaaaaaaaaaaaa", strings.Repeat("a", 300),
	} {
		if Sandbox(bad) {
			t.Errorf("Sandbox(%q) = true", bad)
		}
		if err := CheckSandbox(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("CheckSandbox(%q) = %v, want invalid_argument", bad, err)
		}
	}
	if len(CheckSandbox(strings.Repeat("x", 300)).Error()) > 200 {
		t.Error("the error for a long id is not truncated")
	}
}

func FuzzSandbox(f *testing.F) {
	f.Add("sb-abcdefghijklmnop")
	f.Add("../../etc/passwd")
	f.Fuzz(func(t *testing.T, id string) {
		if Sandbox(id) && (strings.ContainsAny(id, "/.\x00") || len(id) != 19) {
			t.Fatalf("Sandbox(%q) = true", id)
		}
	})
}
