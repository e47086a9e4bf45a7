// Package websession signs browsers in with the API token and checks the
// requests they make afterwards: a session id in an HttpOnly,
// SameSite=Strict cookie (over TLS a Secure __Host- cookie, which no
// other host can set) that maps, in memory, to a CSRF token the page
// sends back in a header on every state-changing request, which must
// also come from the daemon's own origin. The raw API token never
// reaches the page's script.
//
// Sessions live in the daemon's memory: a restart signs every browser
// out. It imports only errdefs; the API and the console import it.
package websession

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"corral/internal/errdefs"
)

const (
	// CookieName carries the session id (HttpOnly: scripts never see it);
	// over TLS its name has HostPrefix (SessionCookie).
	CookieName = "corral_session"
	// CSRFCookie carries the session's CSRF token, readable by the page's
	// script so it can echo it in CSRFHeader (the double submit); over TLS
	// its name has HostPrefix (CSRFCookieFor).
	CSRFCookie = "corral_csrf"
	// HostPrefix starts the cookies' names over TLS. A browser keeps a
	// __Host- cookie only when it comes from a secure origin, Secure, with
	// Path=/ and no Domain: a page of a sibling host (an exposed port
	// under a ports domain that shares the console's parent domain)
	// cannot set one to shadow the console's, as it can a plain name.
	HostPrefix = "__Host-"
	// CSRFHeader is where the page echoes the CSRF token.
	CSRFHeader = "X-Corral-CSRF"
	// Lifetime is how long a session lasts after sign-in.
	Lifetime = 12 * time.Hour
	// maxSessions bounds the table: the oldest goes when it is full.
	maxSessions = 1024
)

type session struct {
	csrf    string
	expires time.Time
}

// Store is the table of signed-in browsers for one API token.
type Store struct {
	token string
	now   func() time.Time

	mu       sync.Mutex
	sessions map[string]session
}

// SessionCookie is the name of the session cookie on r's connection:
// HostPrefix+CookieName over TLS, CookieName over plain HTTP. Each
// connection accepts its own name alone.
func SessionCookie(r *http.Request) string { return cookieName(r, CookieName) }

// CSRFCookieFor is the name of the CSRF cookie on r's connection, as
// SessionCookie's.
func CSRFCookieFor(r *http.Request) string { return cookieName(r, CSRFCookie) }

func cookieName(r *http.Request, base string) string {
	if r.TLS != nil {
		return HostPrefix + base
	}
	return base
}

// New returns a store that signs in with token.
func New(token string) *Store {
	return &Store{token: token, now: time.Now, sessions: map[string]session{}}
}

// Login checks token and, when it is the API token, starts a session
// and sets its two cookies on w. The request must come from the daemon's
// own origin (no signing a browser in from another site).
func (s *Store) Login(w http.ResponseWriter, r *http.Request, token string) error {
	if err := SameOrigin(r); err != nil {
		return err
	}
	if token == "" {
		return fmt.Errorf("%w: enter the daemon's API token", errdefs.ErrUnauthenticated)
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.token)) != 1 {
		return fmt.Errorf("%w: that is not this daemon's API token (see corral serve's --token or its token file)", errdefs.ErrUnauthenticated)
	}
	id, csrf := random(), random()
	exp := s.now().Add(Lifetime)
	s.mu.Lock()
	s.expire()
	s.sessions[id] = session{csrf: csrf, expires: exp}
	s.mu.Unlock()
	// Path / and no Domain, as a __Host- cookie must have.
	secure := r.TLS != nil
	http.SetCookie(w, &http.Cookie{Name: SessionCookie(r), Value: id, Path: "/", Expires: exp, HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
	http.SetCookie(w, &http.Cookie{Name: CSRFCookieFor(r), Value: csrf, Path: "/", Expires: exp, Secure: secure, SameSite: http.SameSiteStrictMode})
	return nil
}

// Logout ends r's session, if any, and clears its cookies on w.
func (s *Store) Logout(w http.ResponseWriter, r *http.Request) error {
	if err := s.Check(r); err != nil {
		return err
	}
	if c, err := r.Cookie(SessionCookie(r)); err == nil {
		s.mu.Lock()
		delete(s.sessions, c.Value)
		s.mu.Unlock()
	}
	for _, n := range []string{SessionCookie(r), CSRFCookieFor(r)} {
		http.SetCookie(w, &http.Cookie{Name: n, Value: "", Path: "/", MaxAge: -1, HttpOnly: n == SessionCookie(r), Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	}
	return nil
}

// HasCookie says whether r carries a session cookie of its connection's
// name (SessionCookie) at all (the API falls back to asking for a bearer
// token when it does not).
func HasCookie(r *http.Request) bool {
	c, err := r.Cookie(SessionCookie(r))
	return err == nil && c.Value != ""
}

// Check authorises a cookie-authenticated request: a live session, and,
// for a method that changes state or a connection upgrade (a WebSocket),
// the daemon's own origin and the session's CSRF token in CSRFHeader.
// Unauthenticated or permission denied otherwise, saying why.
func (s *Store) Check(r *http.Request) error {
	c, err := r.Cookie(SessionCookie(r))
	if err != nil || c.Value == "" {
		return fmt.Errorf("%w: not signed in", errdefs.ErrUnauthenticated)
	}
	s.mu.Lock()
	sess, ok := s.sessions[c.Value]
	if ok && !s.now().Before(sess.expires) {
		delete(s.sessions, c.Value)
		ok = false
	}
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: the console session expired or the daemon restarted; sign in again", errdefs.ErrUnauthenticated)
	}
	upgrade := r.Header.Get("Upgrade") != ""
	if safe(r.Method) && !upgrade {
		return nil
	}
	if err := SameOrigin(r); err != nil {
		return err
	}
	if upgrade {
		// A browser cannot set headers on a WebSocket; the origin check
		// and SameSite=Strict are what stop another site from opening one.
		return nil
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(sess.csrf)) != 1 {
		return fmt.Errorf("%w: missing or wrong %s header (the console sends the %s cookie's value)", errdefs.ErrPermissionDenied, CSRFHeader, CSRFCookieFor(r))
	}
	return nil
}

// SameOrigin requires the request to come from a page of the host it
// was sent to: Sec-Fetch-Site same-origin, or an Origin whose host is the
// request's Host. A request with neither is refused.
func SameOrigin(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return fmt.Errorf("%w: cross-origin request from %q refused (Origin must be this daemon's own)", errdefs.ErrPermissionDenied, o)
		}
		if want := scheme(r); u.Scheme != want {
			return fmt.Errorf("%w: cross-origin request from %q refused (this daemon is served over %s)", errdefs.ErrPermissionDenied, o, want)
		}
		return nil
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		if site != "same-origin" {
			return fmt.Errorf("%w: %s request refused (Sec-Fetch-Site must be same-origin)", errdefs.ErrPermissionDenied, site)
		}
		return nil
	}
	return fmt.Errorf("%w: request without an Origin or Sec-Fetch-Site header refused", errdefs.ErrPermissionDenied)
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

func safe(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// expire drops ended sessions and, when the table is full, the one that
// ends first. Called with mu held.
func (s *Store) expire() {
	now := s.now()
	oldest, first := "", time.Time{}
	for id, sess := range s.sessions {
		if !now.Before(sess.expires) {
			delete(s.sessions, id)
			continue
		}
		if oldest == "" || sess.expires.Before(first) {
			oldest, first = id, sess.expires
		}
	}
	if len(s.sessions) >= maxSessions {
		delete(s.sessions, oldest)
	}
}

func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
