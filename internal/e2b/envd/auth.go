package envd

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"corral/internal/sandbox"
)

// Signed /files URLs (the e2b SDK's uploadUrl/downloadUrl): signature is
// "v1_" + unpadded standard base64 of sha256("<path>:<operation>:<user>:
// <token>:<expiration>"), operation "read" for GET and "write" for POST,
// expiration a unix time in seconds. The SDK makes the string, so its
// encoding cannot change; what makes it unambiguous here is what is
// accepted: the expiration is required (an unexpiring URL is a credential
// for ever) and canonical digits, the token is hex and the user has no
// colon, so read from the right the string splits one way only (see
// signedString's test) and no signature stands for two requests.
const (
	signatureQuery  = "signature"
	expirationQuery = "signature_expiration"
	signaturePrefix = "v1_"
	// MaxSignatureTTL is how far ahead a signed URL may expire.
	MaxSignatureTTL = 7 * 24 * time.Hour
)

// Messages the e2b SDK's tests expect verbatim (code 401).
const (
	msgExpired          = "signature is already expired"
	msgInvalidSignature = "invalid signature"
	msgInvalidToken     = "invalid access token"
	msgMissing          = "missing access token or file signature"
	msgBadExpiration    = "invalid signature_expiration"
	// Corral's own: E2B's envd accepts what these refuse.
	msgNoExpiration = "signature_expiration is required: a signed URL that never expires is refused (pass useSignatureExpiration, at most 7 days)"
	msgTooFar       = "signature_expiration is more than 7 days ahead"
)

// expirationRE is a unix time in canonical decimal: no sign, no leading
// zero, so one expiry has one spelling.
var expirationRE = regexp.MustCompile(`^[1-9][0-9]{0,17}$`)

// authorized checks the envd access token, or a /files request's URL
// signature, and answers 401 (or 502 for a sandbox that is not running
// and does not resume on a call) itself when neither holds.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request, id string) bool {
	sb, err := s.record(r.Context(), id)
	// A paused sandbox that resumes on the next call (E2B's autoResume)
	// is let through: the manager resumes it for the call.
	if err != nil || sb.State != sandbox.Running && !(sb.State == sandbox.Paused && sb.Spec.ResumesOnCall()) {
		writeError(w, errBadGateway)
		return false
	}
	token := s.m.AccessToken(sb)
	if got := r.Header.Get(accessTokenHeader); got != "" {
		if subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1 {
			return true
		}
		unauthorized(w, msgInvalidToken)
		return false
	}
	q := r.URL.Query()
	if r.URL.Path != "/files" || !q.Has(signatureQuery) {
		unauthorized(w, msgMissing)
		return false
	}
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	if msg := checkSignature(q.Get("path"), op, q.Get("username"), token, q.Get(signatureQuery), q.Get(expirationQuery), time.Now()); msg != "" {
		unauthorized(w, msg)
		return false
	}
	return true
}

// checkSignature returns "" for a good signature, or why it is refused:
// the signature is checked before the expiration's value, so a forger
// never learns whether the expiry was the problem.
func checkSignature(path, op, user, token, sig, expiration string, now time.Time) string {
	if expiration == "" {
		return msgNoExpiration
	}
	raw, ok := signedString(path, op, user, token, expiration)
	if !ok {
		if !expirationRE.MatchString(expiration) {
			return msgBadExpiration
		}
		return msgInvalidSignature
	}
	if subtle.ConstantTimeCompare([]byte(sig), []byte(Sign(raw))) != 1 {
		return msgInvalidSignature
	}
	exp, _ := strconv.ParseInt(expiration, 10, 64)
	switch {
	case exp < now.Unix():
		return msgExpired
	case exp > now.Add(MaxSignatureTTL).Unix():
		return msgTooFar
	}
	return ""
}

// signedString is the string a signed URL's signature covers, or false
// when its fields could be read more than one way: a user with a colon, a
// token that is not hex, an expiration not in canonical digits, an
// operation not read or write.
func signedString(path, op, user, token, expiration string) (string, bool) {
	if op != "read" && op != "write" || strings.Contains(user, ":") || !expirationRE.MatchString(expiration) ||
		token == "" || strings.IndexFunc(token, func(r rune) bool { return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') }) >= 0 {
		return "", false
	}
	return path + ":" + op + ":" + user + ":" + token + ":" + expiration, true
}

// Sign is the v1 signature of raw.
func Sign(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return signaturePrefix + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
}

func unauthorized(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusUnauthorized, envdError{Code: http.StatusUnauthorized, Message: msg})
}

// userOf is the user an RPC asks for: envd's "Authorization: Basic
// base64(<user>:)", or "" (the sandbox's default user).
func userOf(h http.Header) (string, error) {
	v, ok := strings.CutPrefix(h.Get("Authorization"), "Basic ")
	if !ok {
		return "", nil
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
	if err != nil {
		return "", invalid("Authorization", "not base64")
	}
	user, _, _ := strings.Cut(string(b), ":")
	if len(user) > 64 {
		return "", invalid("Authorization", "user longer than 64 bytes")
	}
	return user, nil
}
