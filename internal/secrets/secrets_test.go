package secrets

import (
	"crypto/x509"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"corral/internal/errdefs"
)

const value = "sk-live-0123456789abcdef"

func TestValidateName(t *testing.T) {
	for _, n := range []string{"api", "a.b", "A_1-x"} {
		if err := ValidateName("name", n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	for _, n := range []string{"", "..", "a..b", "a/b", "../x", ".hidden", strings.Repeat("a", 64), "a b"} {
		if err := ValidateName("name", n); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%q: %v, want invalid", n, err)
		}
	}
}

func TestValidateValuesNeverEchoes(t *testing.T) {
	for _, v := range []map[string]string{
		{},
		{"BAD KEY " + value: "x"},
		{value + "=": "x"},
		{"K": value + "\x00"},
		{"K": strings.Repeat(value, MaxValueBytes/len(value)+1)},
	} {
		err := ValidateValues("values", v)
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%d keys: %v, want invalid", len(v), err)
		}
		if err != nil && strings.Contains(err.Error(), value) {
			t.Errorf("error echoes the value: %v", err)
		}
	}
	if err := ValidateValues("values", map[string]string{"TOKEN": value}); err != nil {
		t.Error(err)
	}
}

func TestParseHeaderRule(t *testing.T) {
	r, err := ParseHeaderRule("api:TOKEN@API.Example.com.:authorization=Bearer {value}")
	if err != nil {
		t.Fatal(err)
	}
	want := HeaderRule{Secret: "api", Key: "TOKEN", Host: "api.example.com", Header: "Authorization", Template: "Bearer {value}"}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got %+v, want %+v", r, want)
	}
	if v, ok := r.Value(value); !ok || v != "Bearer "+value {
		t.Errorf("Value: %q", v)
	}
	if _, ok := r.Value("a\r\nX-Evil: 1"); ok {
		t.Error("a value with CRLF makes a header")
	}
	r, err = ParseHeaderRule("api:TOKEN@h.example:X-Api-Key")
	if err != nil || r.Template != Placeholder {
		t.Errorf("default template: %+v, %v", r, err)
	}
	// Malformed flags, some with the value where a part should be: a 400
	// that never echoes it.
	for _, f := range []string{
		value, "api:" + value, "api:TOKEN@" + value, "api:" + value + "@h.example:H",
		"api:TOKEN@h.example:" + value + " x", "api:TOKEN@h.example:Host", "api:TOKEN@h.example:H=no placeholder " + value,
		"../x:TOKEN@h.example:H", "a/b:TOKEN@h.example:H",
	} {
		_, err := ParseHeaderRule(f)
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%q: %v, want invalid", f, err)
			continue
		}
		if strings.Contains(err.Error(), value) {
			t.Errorf("%q: error echoes the value: %v", f, err)
		}
	}
}

// A CA derived twice from one seed and id has one key (a restarted daemon
// signs what the sandbox trusts); its leaves verify for their host only.
func TestCA(t *testing.T) {
	created := time.Now().Add(-time.Hour)
	a, err := NewCA([]byte("seed"), "sb-1", created)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewCA([]byte("seed"), "sb-1", created)
	c, _ := NewCA([]byte("seed"), "sb-2", created)
	if !a.key.Equal(b.key) || a.key.Equal(c.key) {
		t.Error("the CA key is not derived from seed and id alone")
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(a.PEM()))
	leaf, err := b.Leaf("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "api.example.com"}); err != nil {
		t.Errorf("a leaf of the re-derived CA: %v", err)
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "other.example.com"}); err == nil {
		t.Error("the leaf verifies for another host")
	}
	other := x509.NewCertPool()
	other.AppendCertsFromPEM([]byte(c.PEM()))
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: other, DNSName: "api.example.com"}); err == nil {
		t.Error("another sandbox's CA verifies the leaf")
	}
}

// FuzzParseHeaderRule: no input panics; an accepted rule is normalized
// (parsing its own form gives it back) and its template makes one header
// line.
func FuzzParseHeaderRule(f *testing.F) {
	for _, s := range []string{"api:TOKEN@api.example.com:Authorization=Bearer {value}", "a:B@h.x:H", "@:=", "a:b@c:d={value}{value}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseHeaderRule(s)
		if err != nil {
			return
		}
		again, err := ParseHeaderRule(r.Secret + ":" + r.Key + "@" + r.Host + ":" + r.Header + "=" + r.Template)
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("%q: %+v, reparsed %+v, %v", s, r, again, err)
		}
		if v, ok := r.Value("v"); !ok || strings.ContainsAny(v, "\r\n\x00") {
			t.Fatalf("%q: header value %q", s, v)
		}
	})
}

func TestHeaderRuleScope(t *testing.T) {
	r := HeaderRule{Secret: "s", Key: "K", Host: "api.example.com", Header: "Authorization", Ports: []int{8443, 443, 443}, Methods: []string{"post", "GET"}}
	if err := r.Normalize("rule"); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(r.Ports, r.Methods) != "[443 8443] [GET POST]" {
		t.Fatalf("normalized to %v %v", r.Ports, r.Methods)
	}
	for _, c := range []struct {
		port   int
		method string
		want   bool
	}{{443, "GET", true}, {8443, "POST", true}, {80, "GET", false}, {443, "DELETE", false}} {
		if got := r.Allows(c.port, c.method); got != c.want {
			t.Errorf("Allows(%d, %s) = %v", c.port, c.method, got)
		}
	}
	def := HeaderRule{}
	for _, m := range DefaultMethods {
		if !def.Allows(443, m) {
			t.Errorf("the default scope refuses %s on 443", m)
		}
	}
	if def.Allows(80, "GET") || def.Allows(8443, "GET") || def.Allows(443, "PROPFIND") || def.Allows(443, "get") {
		t.Error("the default scope is not 443 with the default methods")
	}
	// A rule stored before such methods were refused allows them no more.
	stored := HeaderRule{Methods: []string{"TRACE", "TRACK", "CONNECT", "GET"}}
	for _, m := range []string{"TRACE", "trace", "TRACK", "CONNECT"} {
		if def.Allows(443, m) || stored.Allows(443, m) {
			t.Errorf("%s is allowed", m)
		}
	}
	for _, m := range []string{"TRACE", "trace", "Track", "CONNECT"} {
		r := HeaderRule{Secret: "s", Key: "K", Host: "api.example.com", Header: "X-Key", Methods: []string{"GET", m}}
		err := r.Normalize("rule")
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), strings.ToUpper(m)) || !strings.Contains(err.Error(), "never") {
			t.Errorf("a rule naming %s: %v, want invalid_argument naming it and why", m, err)
		}
	}
	for _, bad := range []HeaderRule{
		{Ports: []int{0}}, {Ports: []int{70000}}, {Methods: []string{"GE T"}}, {Methods: []string{"G\r\nX"}},
		{Ports: make([]int, 17)}, {Methods: make([]string, 17)},
	} {
		bad.Secret, bad.Key, bad.Host, bad.Header = "s", "K", "api.example.com", "X-Key"
		if err := bad.Normalize("rule"); err == nil {
			t.Errorf("%v %v accepted", bad.Ports, bad.Methods)
		}
	}
}
