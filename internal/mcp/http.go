package mcp

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"corral/sdk/go/corral"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPHandler serves the tools over MCP's streamable HTTP transport (one
// server; each MCP session its own tag) to requests that carry token as
// "Authorization: Bearer <token>"; others get 401.
func HTTPHandler(c *corral.Client, o Options, token string) http.Handler {
	srv := New(c, o)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !bearerOK(r, token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="corral"`)
			http.Error(w, "missing or wrong API token (Authorization: Bearer)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// bearerOK reports whether r carries token as its bearer token.
func bearerOK(r *http.Request, token string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}
