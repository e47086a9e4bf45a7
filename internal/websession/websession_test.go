package websession

import (
	"errors"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"corral/internal/errdefs"
)

const host = "corral.test:7070"

// signIn returns a store with one session and its two cookies.
func signIn(t *testing.T) (*Store, *http.Cookie, *http.Cookie) {
	t.Helper()
	s := New("tok")
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "http://"+host+"/console/login", nil)
	r.Header.Set("Origin", "http://"+host)
	if err := s.Login(w, r, "tok"); err != nil {
		t.Fatal(err)
	}
	var sess, csrf *http.Cookie
	for _, c := range w.Result().Cookies() {
		switch c.Name {
		case CookieName:
			sess = c
		case CSRFCookie:
			csrf = c
		}
	}
	if sess == nil || csrf == nil {
		t.Fatalf("cookies: %v", w.Result().Cookies())
	}
	if !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode || sess.Secure || sess.Value == "tok" {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, not Secure over http, not the token", sess)
	}
	if csrf.HttpOnly || csrf.SameSite != http.SameSiteStrictMode {
		t.Errorf("CSRF cookie %+v: want script-readable, SameSite=Strict", csrf)
	}
	return s, sess, csrf
}

func TestLogin(t *testing.T) {
	s := New("tok")
	for _, c := range []struct {
		name, origin, token string
		want                error
	}{
		{"wrong token", "http://" + host, "nope", errdefs.ErrUnauthenticated},
		{"empty token", "http://" + host, "", errdefs.ErrUnauthenticated},
		{"another site", "http://evil.test", "tok", errdefs.ErrPermissionDenied},
		{"no origin", "", "tok", errdefs.ErrPermissionDenied},
		{"https origin for an http daemon", "https://" + host, "tok", errdefs.ErrPermissionDenied},
		{"right", "http://" + host, "tok", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest("POST", "http://"+host+"/console/login", nil)
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			err := s.Login(w, r, c.token)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("Login: %v, want %v", err, c.want)
			}
			if got := len(w.Result().Cookies()); (err == nil) != (got == 2) {
				t.Errorf("%d cookies set", got)
			}
		})
	}
}

// TestCookiesOverTLS: over TLS the cookies are __Host- cookies (Secure,
// Path /, no Domain), and only those names are read: a plain-named cookie
// (which a sibling host could have set) is no session, and neither is a
// __Host- one over plain HTTP.
func TestCookiesOverTLS(t *testing.T) {
	s := New("tok")
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "https://"+host+"/console/login", nil)
	r.Header.Set("Origin", "https://"+host)
	if err := s.Login(w, r, "tok"); err != nil {
		t.Fatal(err)
	}
	got := map[string]*http.Cookie{}
	for _, c := range w.Result().Cookies() {
		got[c.Name] = c
		if !c.Secure || c.Path != "/" || c.Domain != "" || c.SameSite != http.SameSiteStrictMode {
			t.Errorf("%s over TLS: %+v, want Secure, Path /, no Domain, SameSite=Strict", c.Name, c)
		}
	}
	sess, csrf := got["__Host-corral_session"], got["__Host-corral_csrf"]
	if len(got) != 2 || sess == nil || csrf == nil || !sess.HttpOnly || csrf.HttpOnly {
		t.Fatalf("cookies over TLS: %v, want __Host-corral_session (HttpOnly) and __Host-corral_csrf", w.Result().Cookies())
	}
	check := func(scheme, name, csrfValue string) error {
		r := httptest.NewRequest("POST", scheme+"://"+host+"/v1/sandboxes/x/pause", nil)
		r.AddCookie(&http.Cookie{Name: name, Value: sess.Value})
		r.Header.Set("Origin", scheme+"://"+host)
		r.Header.Set(CSRFHeader, csrfValue)
		return s.Check(r)
	}
	if err := check("https", sess.Name, csrf.Value); err != nil {
		t.Errorf("the __Host- session over TLS: %v", err)
	}
	if err := check("https", sess.Name, "x"+csrf.Value); !errors.Is(err, errdefs.ErrPermissionDenied) || !strings.Contains(err.Error(), "__Host-corral_csrf") {
		t.Errorf("a wrong CSRF header over TLS: %v, want permission denied naming __Host-corral_csrf", err)
	}
	if err := check("https", CookieName, csrf.Value); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("the session id under the plain name over TLS: %v, want unauthenticated", err)
	}
	if err := check("http", sess.Name, csrf.Value); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("a __Host- cookie over plain HTTP: %v, want unauthenticated", err)
	}
	plain := httptest.NewRequest("GET", "https://"+host+"/v1/sandboxes", nil)
	plain.AddCookie(&http.Cookie{Name: CookieName, Value: sess.Value})
	if HasCookie(plain) {
		t.Error("HasCookie takes the plain name over TLS")
	}
}

// TestTLSServerRoundTrip: a client with a cookie jar signs in to a TLS
// server, changes something with the CSRF cookie's value echoed, and
// signs out, which clears both __Host- cookies.
func TestTLSServerRoundTrip(t *testing.T) {
	s := New("tok")
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		switch r.URL.Path {
		case "/console/login":
			err = s.Login(w, r, "tok")
		case "/console/logout":
			err = s.Logout(w, r)
		default:
			err = s.Check(r)
		}
		if err != nil {
			http.Error(w, err.Error(), errdefs.HTTPStatus(err))
		}
	}))
	defer srv.Close()
	c := srv.Client()
	c.Jar, _ = cookiejar.New(nil)
	u, _ := url.Parse(srv.URL)
	csrf := ""
	do := func(path string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+path, nil)
		req.Header.Set("Origin", srv.URL)
		req.Header.Set(CSRFHeader, csrf)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := do("/console/login"); st != http.StatusOK {
		t.Fatalf("sign-in: %d", st)
	}
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "__Host-corral_csrf" {
			csrf = ck.Value
		}
	}
	if csrf == "" {
		t.Fatalf("no __Host-corral_csrf in the jar: %v", c.Jar.Cookies(u))
	}
	if st := do("/v1/sandboxes/x/pause"); st != http.StatusOK {
		t.Errorf("a change with the session and the CSRF header: %d", st)
	}
	if st := do("/console/logout"); st != http.StatusOK {
		t.Errorf("sign-out: %d", st)
	}
	if left := c.Jar.Cookies(u); len(left) != 0 {
		t.Errorf("cookies left after sign-out: %v", left)
	}
	if st := do("/v1/sandboxes/x/pause"); st != http.StatusUnauthorized {
		t.Errorf("a change after sign-out: %d, want 401", st)
	}
}

func TestCheck(t *testing.T) {
	s, sess, csrf := signIn(t)
	origin := "http://" + host
	for _, c := range []struct {
		name, method string
		cookie       *http.Cookie
		headers      map[string]string
		want         error
	}{
		{"no cookie", "GET", nil, nil, errdefs.ErrUnauthenticated},
		{"unknown session", "GET", &http.Cookie{Name: CookieName, Value: "forged"}, nil, errdefs.ErrUnauthenticated},
		{"read", "GET", sess, nil, nil},
		{"change without origin", "POST", sess, map[string]string{CSRFHeader: csrf.Value}, errdefs.ErrPermissionDenied},
		{"change from another site", "POST", sess, map[string]string{"Origin": "http://evil.test", CSRFHeader: csrf.Value}, errdefs.ErrPermissionDenied},
		{"change from a look-alike host", "DELETE", sess, map[string]string{"Origin": "http://" + host + ".evil.test", CSRFHeader: csrf.Value}, errdefs.ErrPermissionDenied},
		{"change cross-site by fetch metadata", "PUT", sess, map[string]string{"Sec-Fetch-Site": "cross-site", CSRFHeader: csrf.Value}, errdefs.ErrPermissionDenied},
		{"change without CSRF header", "POST", sess, map[string]string{"Origin": origin}, errdefs.ErrPermissionDenied},
		{"change with a wrong CSRF header", "PATCH", sess, map[string]string{"Origin": origin, CSRFHeader: csrf.Value + "x"}, errdefs.ErrPermissionDenied},
		{"change", "POST", sess, map[string]string{"Origin": origin, CSRFHeader: csrf.Value}, nil},
		{"change by fetch metadata", "DELETE", sess, map[string]string{"Sec-Fetch-Site": "same-origin", CSRFHeader: csrf.Value}, nil},
		{"websocket from another site", "GET", sess, map[string]string{"Upgrade": "websocket", "Origin": "http://evil.test"}, errdefs.ErrPermissionDenied},
		{"websocket without origin", "GET", sess, map[string]string{"Upgrade": "websocket"}, errdefs.ErrPermissionDenied},
		{"websocket", "GET", sess, map[string]string{"Upgrade": "websocket", "Origin": origin}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, "http://"+host+"/v1/sandboxes", nil)
			if c.cookie != nil {
				r.AddCookie(c.cookie)
			}
			for k, v := range c.headers {
				r.Header.Set(k, v)
			}
			err := s.Check(r)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("Check: %v, want %v", err, c.want)
			}
		})
	}
}

func TestExpiryAndLogout(t *testing.T) {
	s, sess, _ := signIn(t)
	get := httptest.NewRequest("GET", "http://"+host+"/v1/sandboxes", nil)
	get.AddCookie(sess)
	now := time.Now()
	s.now = func() time.Time { return now.Add(Lifetime + time.Second) }
	if err := s.Check(get); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("an expired session: %v", err)
	}
	s, sess, csrf := signIn(t)
	out := httptest.NewRequest("POST", "http://"+host+"/console/logout", nil)
	out.AddCookie(sess)
	out.Header.Set("Origin", "http://"+host)
	if err := s.Logout(httptest.NewRecorder(), out); !errors.Is(err, errdefs.ErrPermissionDenied) {
		t.Errorf("a logout without the CSRF header: %v", err)
	}
	out.Header.Set(CSRFHeader, csrf.Value)
	w := httptest.NewRecorder()
	if err := s.Logout(w, out); err != nil {
		t.Fatal(err)
	}
	for _, c := range w.Result().Cookies() {
		if c.MaxAge >= 0 {
			t.Errorf("logout left cookie %s", c.Name)
		}
	}
	get = httptest.NewRequest("GET", "http://"+host+"/v1/sandboxes", nil)
	get.AddCookie(sess)
	if err := s.Check(get); !errors.Is(err, errdefs.ErrUnauthenticated) {
		t.Errorf("a session after logout: %v", err)
	}
}

func TestTableBounded(t *testing.T) {
	s := New("tok")
	for range maxSessions + 10 {
		r := httptest.NewRequest("POST", "http://"+host+"/console/login", nil)
		r.Header.Set("Origin", "http://"+host)
		if err := s.Login(httptest.NewRecorder(), r, "tok"); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.sessions); n > maxSessions {
		t.Errorf("%d sessions kept, at most %d", n, maxSessions)
	}
}
