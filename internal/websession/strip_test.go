package websession

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

func TestStripCookies(t *testing.T) {
	h := http.Header{}
	h.Add("Cookie", "corral_session=s1; app=1; corral_csrf=c1")
	h.Add("Cookie", "__Host-corral_session=s2; CORRAL_PORT_TOKEN=p; other=2")
	h.Add("Cookie", "__Host-corral_csrf=c2; __host-CORRAL_SESSION=s3; __Secure-corral_port_token=p2")
	StripCookies(h)
	if got := h.Values("Cookie"); !reflect.DeepEqual(got, []string{"app=1; other=2"}) {
		t.Fatalf("Cookie = %q", got)
	}
	h = http.Header{"Cookie": {"corral_session=s1"}}
	StripCookies(h)
	if _, ok := h["Cookie"]; ok {
		t.Fatalf("a Cookie header of Corral's alone is left: %q", h)
	}
}

func TestDropSetCookies(t *testing.T) {
	h := http.Header{"Set-Cookie": {"app=1; Path=/", "corral_session=evil; Path=/", " __Secure-corral_csrf=x", "corral_port_token=t",
		"__Host-corral_session=evil; Path=/; Secure", "__Host-corral_csrf=evil; Path=/; Secure"}}
	DropSetCookies(h, false)
	if got := h.Values("Set-Cookie"); !reflect.DeepEqual(got, []string{"app=1; Path=/"}) {
		t.Fatalf("Set-Cookie = %q", got)
	}
	DropSetCookies(h, true)
	if len(h.Values("Set-Cookie")) != 0 {
		t.Fatalf("all: %q", h)
	}
}

func TestFromBrowser(t *testing.T) {
	r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	if FromBrowser(r) {
		t.Fatal("a bare request is a browser's")
	}
	r.Header.Set("Sec-Fetch-Mode", "cors") // a script's fetch, or Node's
	if FromBrowser(r) {
		t.Fatal("a fetch is taken for a page load")
	}
	r.Header.Set("Sec-Fetch-Dest", "document")
	if !FromBrowser(r) {
		t.Fatal("Sec-Fetch-Dest document is not a browser's")
	}
	r, _ = http.NewRequest(http.MethodGet, "http://x/", nil)
	r.AddCookie(&http.Cookie{Name: CookieName, Value: "s"})
	if !FromBrowser(r) {
		t.Fatal("the console's cookie is not a browser's")
	}
	// Over TLS as over plain HTTP, either name says a browser sent it.
	r = httptest.NewRequest(http.MethodGet, "https://x/", nil)
	r.AddCookie(&http.Cookie{Name: HostPrefix + CookieName, Value: "s"})
	if !FromBrowser(r) {
		t.Fatal("the console's __Host- cookie is not a browser's")
	}
}
