package secrets

import (
	"net/textproto"
	"regexp"
	"slices"
	"strings"

	"corral/internal/errdefs"
)

// Placeholder is where a header template takes the secret's value.
const Placeholder = "{value}"

// MaxHeaderRules bounds a sandbox's header rules.
const MaxHeaderRules = 16

// HeaderRule makes the egress proxy set Header on the requests the
// sandbox sends to Host over TLS (terminated with the proxy's per-sandbox
// CA, the real certificate verified upstream), on one of Ports (default
// 443) and with one of Methods (default DefaultMethods): Template with
// Placeholder replaced by the value of Key in secret Secret, read from the
// store at each request (so a rotation applies to the next request).
// Never over plain HTTP, where anything on the path would read it, and
// never with a method of NeverMethod. The sandbox never holds the value.
type HeaderRule struct {
	Secret   string   `json:"secret"`
	Key      string   `json:"key"`
	Host     string   `json:"host"`
	Header   string   `json:"header"`
	Template string   `json:"template,omitempty"` // default Placeholder
	Ports    []int    `json:"ports,omitempty"`    // default DefaultPorts
	Methods  []string `json:"methods,omitempty"`  // default DefaultMethods
}

// DefaultPorts are the ports a rule without Ports applies on.
var DefaultPorts = []int{443}

// DefaultMethods are the methods a rule without Methods applies to: the
// ordinary ones, none of NeverMethod's.
var DefaultMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// neverMethods are the methods no rule may name, with why. The egress
// proxy keeps its own copy (netpolicy/egress imports no secrets), so a
// record stored before this check cannot send one either.
var neverMethods = map[string]string{
	"TRACE":   "a TRACE is answered with the request itself, so the server would echo the secret back to the sandbox",
	"TRACK":   "a TRACK (IIS's TRACE) is answered with the request itself, so the server would echo the secret back to the sandbox",
	"CONNECT": "a CONNECT opens a tunnel to another destination, not a request to the rule's host",
}

// NeverMethod says whether method (in any case) is one no rule applies
// to, and why.
func NeverMethod(method string) (string, bool) {
	why, ok := neverMethods[strings.ToUpper(method)]
	return why, ok
}

// maxRuleList bounds a rule's ports and methods.
const maxRuleList = 16

// methodRE is an HTTP method token, upper case.
var methodRE = regexp.MustCompile("^[A-Z]{1,16}$")

// Allows says whether r applies to a request on port with method. A
// method of NeverMethod is never allowed, whatever r names.
func (r HeaderRule) Allows(port int, method string) bool {
	if _, never := NeverMethod(method); never {
		return false
	}
	ports, methods := r.Ports, r.Methods
	if len(ports) == 0 {
		ports = DefaultPorts
	}
	if len(methods) == 0 {
		methods = DefaultMethods
	}
	return slices.Contains(ports, port) && slices.Contains(methods, method)
}

// normalizeScope checks and orders r's ports and methods.
func (r *HeaderRule) normalizeScope(field string) error {
	if len(r.Ports) > maxRuleList {
		return errdefs.Invalid(field+".ports", "at most %d ports", maxRuleList)
	}
	for _, p := range r.Ports {
		if p < 1 || p > 65535 {
			return errdefs.Invalid(field+".ports", "%d is not a TCP port", p)
		}
	}
	if len(r.Methods) > maxRuleList {
		return errdefs.Invalid(field+".methods", "at most %d methods", maxRuleList)
	}
	for i, m := range r.Methods {
		r.Methods[i] = strings.ToUpper(m)
		if !methodRE.MatchString(r.Methods[i]) {
			return errdefs.Invalid(field+".methods", "%q is not an HTTP method", m)
		}
		if why, never := NeverMethod(r.Methods[i]); never {
			return errdefs.Invalid(field+".methods", "%s is never given a secret header: %s", r.Methods[i], why)
		}
	}
	slices.Sort(r.Ports)
	r.Ports = slices.Compact(r.Ports)
	slices.Sort(r.Methods)
	r.Methods = slices.Compact(r.Methods)
	return nil
}

var (
	hostRE   = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	headerRE = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")
)

// hopHeaders are headers a rule may not set: the proxy's framing and the
// connection's own.
var hopHeaders = map[string]bool{
	"Host": true, "Connection": true, "Content-Length": true, "Transfer-Encoding": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Keep-Alive": true, "Proxy-Connection": true,
}

// Normalize validates r, lowercases its host and canonicalizes its header
// name, and fills in the default template. field names the rule in errors.
func (r *HeaderRule) Normalize(field string) error {
	if err := ValidateName(field+".secret", r.Secret); err != nil {
		return err
	}
	if !keyRE.MatchString(r.Key) {
		return errdefs.Invalid(field+".key", "not a secret key (an environment variable name)")
	}
	r.Host = strings.TrimSuffix(strings.ToLower(r.Host), ".")
	if len(r.Host) > 253 || !hostRE.MatchString(r.Host) || !strings.Contains(r.Host, ".") && r.Host != "localhost" {
		return errdefs.Invalid(field+".host", "not a DNS name (letters, digits, hyphens and dots)")
	}
	if !headerRE.MatchString(r.Header) {
		return errdefs.Invalid(field+".header", "not an HTTP header name")
	}
	r.Header = textproto.CanonicalMIMEHeaderKey(r.Header)
	if hopHeaders[r.Header] {
		return errdefs.Invalid(field+".header", "%s is the connection's own, not a rule's", r.Header)
	}
	if err := r.normalizeScope(field); err != nil {
		return err
	}
	if r.Template == "" {
		r.Template = Placeholder
	}
	if strings.Count(r.Template, Placeholder) != 1 {
		return errdefs.Invalid(field+".template", "must hold %s once", Placeholder)
	}
	if len(r.Template) > 1024 || strings.ContainsAny(r.Template, "\r\n\x00") {
		return errdefs.Invalid(field+".template", "at most 1024 bytes, no CR, LF or NUL")
	}
	return nil
}

// NormalizeRules checks a sandbox's header rules: each valid, at most
// MaxHeaderRules, and no two setting one header on one host.
func NormalizeRules(field string, rules []HeaderRule) error {
	if len(rules) > MaxHeaderRules {
		return errdefs.Invalid(field, "at most %d rules, got %d", MaxHeaderRules, len(rules))
	}
	seen := map[[2]string]bool{}
	for i := range rules {
		if err := rules[i].Normalize(field); err != nil {
			return err
		}
		k := [2]string{rules[i].Host, rules[i].Header}
		if seen[k] {
			return errdefs.Invalid(field, "two rules set %s for %s", k[1], k[0])
		}
		seen[k] = true
	}
	return nil
}

// Value is the header value of r for a secret value v. A value with CR,
// LF or NUL (which would split the request) is refused.
func (r HeaderRule) Value(v string) (string, bool) {
	if strings.ContainsAny(v, "\r\n\x00") {
		return "", false
	}
	return strings.Replace(r.Template, Placeholder, v, 1), true
}

// ParseHeaderRule parses the CLI form
//
//	SECRET:KEY@HOST:HEADER[=TEMPLATE]
//
// for example "openai:API_KEY@api.openai.com:Authorization=Bearer {value}".
// Its errors say which part is wrong without echoing the flag (a value
// typed in the wrong place would be).
func ParseHeaderRule(s string) (HeaderRule, error) {
	const form = "want SECRET:KEY@HOST:HEADER[=TEMPLATE]"
	ref, rest, ok := strings.Cut(s, "@")
	if !ok {
		return HeaderRule{}, errdefs.Invalid("secret-header", "no '@' (%s)", form)
	}
	name, key, ok := strings.Cut(ref, ":")
	if !ok {
		return HeaderRule{}, errdefs.Invalid("secret-header", "no ':' between secret and key (%s)", form)
	}
	host, hdr, ok := strings.Cut(rest, ":")
	if !ok {
		return HeaderRule{}, errdefs.Invalid("secret-header", "no ':' after the host (%s)", form)
	}
	header, tmpl, _ := strings.Cut(hdr, "=")
	r := HeaderRule{Secret: name, Key: key, Host: host, Header: header, Template: tmpl}
	if !nameRE.MatchString(name) || strings.Contains(name, "..") {
		return HeaderRule{}, errdefs.Invalid("secret-header", "the secret part is not a secret name (%s)", form)
	}
	if err := r.Normalize("secret-header"); err != nil {
		return HeaderRule{}, err
	}
	return r, nil
}
