package agent

import "testing"

// The one-shot refuses anything but one lowercase UUID before it touches
// a mount.
func TestBootIDMainArgs(t *testing.T) {
	for _, args := range [][]string{nil, {}, {"not-a-uuid"}, {"0000000A-1111-2222-3333-444444444444"},
		{"00000000-1111-2222-3333-444444444444", "extra"}, {"../../etc/passwd"}} {
		if code := BootIDMain(args); code != 2 {
			t.Errorf("BootIDMain(%q) = %d, want 2", args, code)
		}
	}
}
