package build

import (
	"crypto/sha256"
	"encoding/hex"

	"corral/internal/image/store"
)

// keyVersion changes whenever what a step does for the same definition
// changes (its commands, the layer export), so old cache entries stop
// matching.
const keyVersion = "corral-build-v1"

// baseKey is the cache key of a base, from its identity.
func baseKey(identity string) store.Digest {
	return chainKey("", []byte("base\n"+identity))
}

// chainKey is the key of a step whose parent has key parent.
func chainKey(parent store.Digest, canon []byte) store.Digest {
	h := sha256.New()
	h.Write([]byte(keyVersion + "\n" + string(parent) + "\n"))
	h.Write(canon)
	return store.Digest("sha256:" + hex.EncodeToString(h.Sum(nil)))
}
