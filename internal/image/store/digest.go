package store

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"corral/internal/errdefs"
)

// Digest names content: "sha256:" followed by 64 lowercase hex digits.
type Digest string

const digestPrefix = "sha256:"

// ParseDigest validates s as a Digest. It accepts nothing else: the string
// comes from users, registries and files on disk.
func ParseDigest(s string) (Digest, error) {
	if len(s) != len(digestPrefix)+64 || !strings.HasPrefix(s, digestPrefix) {
		return "", errdefs.Invalid("digest", "%q is not sha256:<64 hex>", truncate(s))
	}
	for _, c := range s[len(digestPrefix):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", errdefs.Invalid("digest", "%q is not sha256:<64 hex>", truncate(s))
		}
	}
	return Digest(s), nil
}

// Hex returns the 64 hex digits of d.
func (d Digest) Hex() string { return strings.TrimPrefix(string(d), digestPrefix) }

// String returns d as written.
func (d Digest) String() string { return string(d) }

func digestOf(b []byte) Digest {
	sum := sha256.Sum256(b)
	return Digest(digestPrefix + hex.EncodeToString(sum[:]))
}

// truncate keeps hostile strings short in error messages.
func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
