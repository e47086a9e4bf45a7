package selftest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// leakSignedForever: a signed E2B /files URL that never expires, or
// expires past the daemon's maximum, must not open a file; one that
// expires in a minute (the control) must.
func leakSignedForever(ctx context.Context, s *session) Result {
	tried := "read /etc/hostname of the attacker through the envd face with URLs signed by its access token: without expiry, 30 days ahead, and (the control) a minute ahead"
	if s.cfg.EnvdURL == "" {
		return inconclusive(tried, fmt.Errorf("no envd face given (--envd)"))
	}
	tok := s.a.rec.EnvdAccessToken
	if tok == "" {
		return inconclusive(tried, fmt.Errorf("the attacker's record has no envd access token"))
	}
	try := func(exp string) (int, error) {
		raw := "/etc/hostname:read:root:" + tok
		q := url.Values{"path": {"/etc/hostname"}, "username": {"root"}}
		if exp != "" {
			raw += ":" + exp
			q.Set("signature_expiration", exp)
		}
		sum := sha256.Sum256([]byte(raw))
		q.Set("signature", "v1_"+strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "="))
		st, _, err := s.get(ctx, strings.TrimSuffix(s.cfg.EnvdURL, "/")+"/files?"+q.Encode(), "", map[string]string{"E2b-Sandbox-Id": s.a.id})
		return st, err
	}
	forever, err := try("")
	if err != nil {
		return inconclusive(tried, err)
	}
	far, err := try(fmt.Sprint(time.Now().Add(30 * 24 * time.Hour).Unix()))
	if err != nil {
		return inconclusive(tried, err)
	}
	soon, err := try(fmt.Sprint(time.Now().Add(time.Minute).Unix()))
	if err != nil {
		return inconclusive(tried, err)
	}
	if soon != http.StatusOK {
		return inconclusive(tried, fmt.Errorf("the control (a minute ahead) got %d: the signature is not made as the face expects", soon))
	}
	return verdict(forever == http.StatusUnauthorized && far == http.StatusUnauthorized, tried,
		"without expiry: %d; 30 days ahead: %d; a minute ahead: %d", forever, far, soon)
}
