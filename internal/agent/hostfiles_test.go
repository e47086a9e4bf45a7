package agent

import (
	"os"
	"path/filepath"
	"testing"
)

func TestHostsContent(t *testing.T) {
	const name = "sb-abc"
	for _, tt := range []struct{ name, old, want string }{
		{"none", "", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tsb-abc\t" + hostsMark + "\n"},
		{"image entries kept", "127.0.0.1 localhost\n\n10.1.2.3 db\n", "127.0.0.1 localhost\n\n10.1.2.3 db\n127.0.1.1\tsb-abc\t" + hostsMark + "\n"},
		{"previous identity replaced", "127.0.0.1 localhost\n127.0.1.1\tsb-old\t" + hostsMark + "\n", "127.0.0.1 localhost\n127.0.1.1\tsb-abc\t" + hostsMark + "\n"},
		{"commented localhost does not count", "# 127.0.0.1 localhost\n", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n# 127.0.0.1 localhost\n127.0.1.1\tsb-abc\t" + hostsMark + "\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := hostsContent([]byte(tt.old), name); got != tt.want {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestWriteHostFiles(t *testing.T) {
	root := t.TempDir()
	// A symlinked /etc/hosts pointing out of the root is replaced, not
	// followed.
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "etc/hosts")); err != nil {
		t.Fatal(err)
	}
	if err := writeHostFiles(root, "sb-x"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/hostname")); string(b) != "sb-x\n" {
		t.Errorf("hostname %q", b)
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep\n" {
		t.Errorf("the file outside the root was changed: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/hosts")); len(b) == 0 {
		t.Error("no /etc/hosts")
	}
}
