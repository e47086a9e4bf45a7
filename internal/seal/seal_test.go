package seal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A sealed value opens with its key and associated data, and with
// nothing else; it carries neither the plaintext nor the key.
func TestSealOpen(t *testing.T) {
	k, other := Generate(), Generate()
	secret := []byte("sk-live-0123456789abcdef")
	ad := []byte("sandbox/sb-1")
	s := k.Seal(secret, ad)
	if s[0] != Version || bytes.Contains(s, secret) || bytes.Contains(s, k.raw[:]) {
		t.Fatalf("sealed value %x", s)
	}
	if got, err := k.Open(s, ad); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("open: %q %v", got, err)
	}
	if bytes.Equal(k.Seal(secret, ad), s) {
		t.Error("two seals of one value are equal (nonce reused)")
	}
	tampered := append([]byte(nil), s...)
	tampered[len(tampered)-1] ^= 1
	v2 := append([]byte(nil), s...)
	v2[0] = 2
	for name, tc := range map[string]struct {
		key    *Key
		sealed []byte
		ad     []byte
		want   error
	}{
		"another record":  {k, s, []byte("sandbox/sb-2"), ErrCorrupt},
		"another key":     {other, s, ad, ErrWrongKey},
		"tampered":        {k, tampered, ad, ErrCorrupt},
		"unknown version": {k, v2, ad, ErrCorrupt},
		"short":           {k, s[:20], ad, ErrCorrupt},
		"empty":           {k, nil, ad, ErrCorrupt},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := tc.key.Open(tc.sealed, tc.ad)
			if !errors.Is(err, tc.want) || got != nil {
				t.Fatalf("open: %q %v, want %v", got, err, tc.want)
			}
			if strings.Contains(err.Error(), string(secret)) {
				t.Fatalf("the error names the value: %v", err)
			}
		})
	}
}

func TestSealString(t *testing.T) {
	k := Generate()
	s := k.SealString([]byte(`{"A":"b"}`), nil)
	if !IsSealedString(s) || IsSealedString(`{"A":"b"}`) {
		t.Fatalf("IsSealedString(%q)", s)
	}
	if got, err := k.OpenString(s, nil); err != nil || string(got) != `{"A":"b"}` {
		t.Fatalf("open: %q %v", got, err)
	}
	for _, bad := range []string{"", "plain", "sealed:!!!", "sealed:" + strings.Repeat("A", 10)} {
		if _, err := k.OpenString(bad, nil); !errors.Is(err, ErrCorrupt) {
			t.Errorf("OpenString(%q): %v", bad, err)
		}
	}
}

// Subkeys differ by label and from the key, and are stable for a key.
func TestDerive(t *testing.T) {
	k := Generate()
	a, b := k.Derive("port-token"), k.Derive("other")
	if len(a) != 32 || bytes.Equal(a, b) || bytes.Equal(a, k.raw[:]) || !bytes.Equal(a, k.Derive("port-token")) {
		t.Fatalf("subkeys %x %x", a, b)
	}
	if bytes.Equal(a, Generate().Derive("port-token")) {
		t.Fatal("two keys derive the same subkey")
	}
}

// The key file is created 0600 whatever the umask, read back as the same
// key, tightened when it was left open, and refused when it is not a key.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "seal.key")
	k1, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != KeyFileMode || fi.Size() != KeySize {
		t.Fatalf("key file: %v %v", fi.Mode(), err)
	}
	k2, err := Load(path)
	if err != nil || k2.raw != k1.raw {
		t.Fatalf("reloaded key differs: %v", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != KeyFileMode {
		t.Errorf("an open key file stays %v", fi.Mode())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".seal-key-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(short, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	long := filepath.Join(dir, "long.key")
	if err := os.WriteFile(long, make([]byte, KeySize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.key")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{short, long, link, dir} {
		if _, err := Load(p); err == nil {
			t.Errorf("Load(%s) took it for a key", filepath.Base(p))
		}
	}
}
