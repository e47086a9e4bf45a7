package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
)

type callerKey struct{}

// WithCaller returns ctx carrying the caller that entries recorded under
// it name. The caller travels in the context because it crosses every
// manager call of a request, which have no other use for it.
func WithCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

// CallerFrom is the caller ctx carries ("" for the daemon itself).
func CallerFrom(ctx context.Context) string {
	c, _ := ctx.Value(callerKey{}).(string)
	return c
}

// TokenCaller names the holder of a bearer token without revealing it:
// "token:" and the first 12 hex digits of its SHA-256.
func TokenCaller(token string) string {
	if token == "" {
		return "anonymous"
	}
	sum := sha256.Sum256([]byte(token))
	return "token:" + hex.EncodeToString(sum[:6])
}
