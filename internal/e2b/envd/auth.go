package envd

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"corral/internal/sandbox"
)

// Signed /files URLs (the e2b SDK's uploadUrl/downloadUrl): signature is
// "v1_" + unpadded standard base64 of sha256("<path>:<operation>:<user>:
// <token>[:<expiration>]"), operation "read" for GET and "write" for POST,
// expiration a unix time in seconds.
const (
	signatureQuery  = "signature"
	expirationQuery = "signature_expiration"
	signaturePrefix = "v1_"
)

// Messages the e2b SDK's tests expect verbatim (code 401).
const (
	msgExpired          = "signature is already expired"
	msgInvalidSignature = "invalid signature"
	msgInvalidToken     = "invalid access token"
	msgMissing          = "missing access token or file signature"
	msgBadExpiration    = "invalid signature_expiration"
)

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
// the signature is checked before the expiration, so a forger never learns
// whether the expiry was the problem.
func checkSignature(path, op, user, token, sig, expiration string, now time.Time) string {
	raw := path + ":" + op + ":" + user + ":" + token
	var exp int64
	if expiration != "" {
		var err error
		if exp, err = strconv.ParseInt(expiration, 10, 64); err != nil {
			return msgBadExpiration
		}
		raw += ":" + expiration
	}
	if subtle.ConstantTimeCompare([]byte(sig), []byte(Sign(raw))) != 1 {
		return msgInvalidSignature
	}
	if expiration != "" && exp < now.Unix() {
		return msgExpired
	}
	return ""
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
