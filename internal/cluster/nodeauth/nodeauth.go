// Package nodeauth is how a control plane proves itself to a node, with
// no user token: the operator's join token (a cluster secret that control
// instances and nodes are given, never the API token) and a node's public
// nonce, chosen at its first join, derive that node's own credential.
// The cluster database keeps the nonce and the credential's hash only, so
// reading it gives no way into a node, and one node's credential opens
// no other.
//
// It imports nothing from Corral.
package nodeauth

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// Header carries the credential on a control plane's request to a node.
const Header = "X-Corral-Node-Credential"

// minJoinToken is the shortest join token accepted, in bytes.
const minJoinToken = 16

// NewNonce is a fresh nonce for a node's first join.
func NewNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Credential is node id's credential for nonce under the join token.
func Credential(joinToken, nodeID, nonce string) string {
	mac := hmac.New(sha256.New, []byte(joinToken))
	fmt.Fprintf(mac, "corral node credential\x00%s\x00%s", nodeID, nonce)
	return hex.EncodeToString(mac.Sum(nil))
}

// Hash is what the database keeps of a credential.
func Hash(cred string) string {
	h := sha256.Sum256([]byte(cred))
	return hex.EncodeToString(h[:])
}

// Equal compares credentials in constant time.
func Equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// ReadJoinToken reads the join token from path (its first line).
func ReadJoinToken(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("--join-token-file is required with --cluster-db")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the join token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < minJoinToken {
		return "", fmt.Errorf("the join token in %s is %d bytes; it must be at least %d", path, len(tok), minJoinToken)
	}
	return tok, nil
}

// ImagesPath is where a node serves its images to the rest of the
// cluster, among its node-internal endpoints (the credential only,
// never the API token): GET {digest}
// is the image's record, GET {digest}/layers/{layer} one of its layers
// as a tar, and POST {digest}/fetch (a FetchRequest) makes the node
// fetch the image from a node that holds it.
const ImagesPath = "/v1/cluster/node/images/"

// FetchRequest is the body of POST ImagesPath{digest}/fetch: the tags to
// point at the image once fetched.
type FetchRequest struct {
	Tags []string `json:"tags,omitempty"`
}

// LayersPath is where a node serves the layers uploaded to it (a build's
// copy steps) to the rest of the cluster, among its node-internal
// endpoints: GET {digest} is the layer as a tar, and POST {digest}/fetch
// makes the node fetch it from a node that holds it.
const LayersPath = "/v1/cluster/node/layers/"

// secretKeyInfo binds SecretKey's output to its one purpose.
const secretKeyInfo = "corral cluster secrets v1"

// SecretKey is the 32-byte key the cluster's secrets are sealed with in
// the database: HKDF-SHA256 of the join token, for that purpose alone.
// Control planes (which seal) and nodes (which open, at a sandbox's
// create) derive the same key; the database holds only what it sealed,
// and the key is independent of every node's credential.
func SecretKey(joinToken string) []byte {
	k, err := hkdf.Key(sha256.New, []byte(joinToken), nil, secretKeyInfo, 32)
	if err != nil {
		panic(err) // 32 bytes of SHA-256's HKDF are always available
	}
	return k
}
