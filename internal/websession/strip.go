package websession

import (
	"net/http"
	"strings"
)

// PortCookie keeps a private exposed port's token for a browser on that
// port's own origin (the ports origin, internal/api origin.go) after one
// visit with ?corral_token=. Like the session's cookies, it never reaches
// a sandbox.
const PortCookie = "corral_port_token"

// FromBrowser says whether r is a browser loading a page (or a frame, or
// a worker) that would run as the origin it was sent to, or carries the
// console's session cookie (by either name: the question is who sent
// it, not whether the session is good). A script's fetch (Sec-Fetch-Mode cors, which
// Node's fetch sends too) runs as the origin of the page that made it,
// so it is not one; programs (curl, the SDKs, the CLI, a control plane)
// send none of this.
func FromBrowser(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Mode") == "navigate" {
		return true
	}
	switch r.Header.Get("Sec-Fetch-Dest") {
	case "document", "iframe", "frame", "embed", "object", "worker", "sharedworker", "serviceworker":
		return true
	}
	for _, c := range r.Cookies() {
		if c.Value != "" && (c.Name == CookieName || c.Name == HostPrefix+CookieName) {
			return true
		}
	}
	return false
}

// StripCookies removes Corral's own cookies from the Cookie headers of h
// (a request on its way to a sandbox), keeping the application's.
func StripCookies(h http.Header) {
	lines := h.Values("Cookie")
	if len(lines) == 0 {
		return
	}
	h.Del("Cookie")
	var kept []string
	for _, line := range lines {
		for _, part := range strings.Split(line, ";") {
			part = strings.TrimSpace(part)
			name, _, _ := strings.Cut(part, "=")
			if name == "" || IsCorralCookie(name) {
				continue
			}
			kept = append(kept, part)
		}
	}
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}

// DropSetCookies removes from h (a sandbox's response) every Set-Cookie
// when all is set, else those that would set one of Corral's cookies.
func DropSetCookies(h http.Header, all bool) {
	lines := h.Values("Set-Cookie")
	h.Del("Set-Cookie")
	if all {
		return
	}
	for _, line := range lines {
		name, _, _ := strings.Cut(line, "=")
		if !IsCorralCookie(strings.TrimSpace(name)) {
			h.Add("Set-Cookie", line)
		}
	}
}

// IsCorralCookie matches Corral's cookie names, with or without the
// __Host- and __Secure- prefixes, in any case.
func IsCorralCookie(name string) bool {
	n := strings.ToLower(strings.TrimSpace(name))
	n = strings.TrimPrefix(strings.TrimPrefix(n, "__host-"), "__secure-")
	return n == CookieName || n == CSRFCookie || n == PortCookie
}
