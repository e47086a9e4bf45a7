// Package seal encrypts small values the daemon keeps at rest (a
// sandbox's env in its record, and later any secret) with a key of the
// daemon's own, and derives purpose-bound subkeys from it (the HMAC key of
// exposed ports' tokens).
//
// The key is 32 random bytes in a file of mode 0600 (Load creates it on
// first use and tightens an existing file's mode). A sealed value is
// AES-256-GCM in a versioned format:
//
//	byte 0      format version (1)
//	bytes 1-4   key id: the first 4 bytes of SHA-256 of the key
//	bytes 5-16  a random 96-bit nonce
//	bytes 17-   ciphertext and the 16-byte tag
//
// The caller's associated data (for example the record's id) is
// authenticated, not stored: a value moved to another record does not
// open. The text form (SealString) is "sealed:" and the format in
// unpadded standard base64. The package imports only the standard library.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the length of a key in bytes (AES-256).
const KeySize = 32

// Version is the format version Seal writes.
const Version = 1

const (
	idSize     = 4
	nonceSize  = 12
	headerSize = 1 + idSize + nonceSize
	textPrefix = "sealed:"
)

var (
	// ErrWrongKey is returned by Open for a value sealed with another key.
	ErrWrongKey = errors.New("sealed with another key")
	// ErrCorrupt is returned by Open for a value that is not a sealed value
	// of a known version, or that fails authentication.
	ErrCorrupt = errors.New("not a valid sealed value")
)

// Key seals and opens values, and derives subkeys. It is safe for
// concurrent use.
type Key struct {
	raw  [KeySize]byte
	id   [idSize]byte
	aead cipher.AEAD
}

// New makes a Key of raw (KeySize bytes).
func New(raw []byte) (*Key, error) {
	if len(raw) != KeySize {
		return nil, fmt.Errorf("a seal key is %d bytes, got %d", KeySize, len(raw))
	}
	k := &Key{}
	copy(k.raw[:], raw)
	sum := sha256.Sum256(k.raw[:])
	copy(k.id[:], sum[:idSize])
	block, err := aes.NewCipher(k.raw[:])
	if err != nil {
		return nil, err
	}
	if k.aead, err = cipher.NewGCM(block); err != nil {
		return nil, err
	}
	return k, nil
}

// Generate makes a Key of fresh random bytes (held in memory only).
func Generate() *Key {
	var raw [KeySize]byte
	if _, err := rand.Read(raw[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	k, err := New(raw[:])
	if err != nil {
		panic(err) // the size is right
	}
	return k
}

// Seal encrypts plaintext, authenticating ad with it.
func (k *Key) Seal(plaintext, ad []byte) []byte {
	out := make([]byte, headerSize, headerSize+len(plaintext)+k.aead.Overhead())
	out[0] = Version
	copy(out[1:], k.id[:])
	if _, err := rand.Read(out[1+idSize : headerSize]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return k.aead.Seal(out, out[1+idSize:headerSize], plaintext, ad)
}

// Open decrypts what Seal made with the same ad. The error never carries
// any of the value.
func (k *Key) Open(sealed, ad []byte) ([]byte, error) {
	if len(sealed) < headerSize+k.aead.Overhead() || sealed[0] != Version {
		return nil, ErrCorrupt
	}
	if !hmac.Equal(sealed[1:1+idSize], k.id[:]) {
		return nil, ErrWrongKey
	}
	out, err := k.aead.Open(nil, sealed[1+idSize:headerSize], sealed[headerSize:], ad)
	if err != nil {
		return nil, ErrCorrupt
	}
	return out, nil
}

// SealString is Seal in text form, for a text column or a JSON string.
func (k *Key) SealString(plaintext, ad []byte) string {
	return textPrefix + base64.RawStdEncoding.EncodeToString(k.Seal(plaintext, ad))
}

// OpenString opens what SealString made.
func (k *Key) OpenString(sealed string, ad []byte) ([]byte, error) {
	b64, ok := strings.CutPrefix(sealed, textPrefix)
	if !ok {
		return nil, ErrCorrupt
	}
	b, err := base64.RawStdEncoding.DecodeString(b64)
	if err != nil {
		return nil, ErrCorrupt
	}
	return k.Open(b, ad)
}

// IsSealedString reports whether s has the text form's prefix (a value
// written before sealing began does not).
func IsSealedString(s string) bool { return strings.HasPrefix(s, textPrefix) }

// Derive returns a 32-byte subkey for one purpose (a label such as
// "port-token"): HMAC-SHA-256 of the label under the key. Subkeys of
// different labels are independent, and none reveals the key.
func (k *Key) Derive(label string) []byte {
	m := hmac.New(sha256.New, k.raw[:])
	m.Write([]byte("corral seal subkey\x00"))
	m.Write([]byte(label))
	return m.Sum(nil)
}
