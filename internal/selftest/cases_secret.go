package selftest

import (
	"context"
	"errors"
	"strings"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

// leakSecretTrace: the attacker asks for a secret-header rule that covers
// TRACE, TRACK or CONNECT. A TRACE is answered with the request itself, so
// a server (or anything the sandbox reaches through the proxy) would echo
// the injected secret back into the sandbox: such rules must be refused.
// (That a TRACE never gets the header whatever a stored rule says, end to
// end, is TestSecrets': the selftest cannot make the daemon's resolver
// name a host of its own world.)
func leakSecretTrace(ctx context.Context, s *session) Result {
	tried := "create a sandbox whose secret-header rule names TRACE, then TRACK, then CONNECT"
	name := "selftest-" + s.nonce + "-trace"
	if _, err := s.c.CreateSecret(ctx, name, map[string]string{"TOKEN": s.canary}); err != nil {
		return inconclusive(tried, err)
	}
	defer s.c.RemoveSecret(context.WithoutCancel(ctx), name)
	var accepted, refused []string
	for _, m := range []string{"TRACE", "track", "CONNECT"} {
		req := apiv1.CreateSandboxRequest{Runtime: s.rt, Timeout: 60, Tags: map[string]string{"selftest": s.nonce},
			SecretHeaders: []apiv1.SecretHeader{{Secret: name, Key: "TOKEN", Host: "api.example.com",
				Header: "Authorization", Methods: []string{"GET", m}}}}
		rec, err := s.c.Create(ctx, req)
		var ae *corral.Error
		switch {
		case err == nil:
			s.track(rec.ID)
			accepted = append(accepted, m)
		case errors.As(err, &ae) && ae.Code == "invalid_argument" && strings.Contains(strings.ToUpper(ae.Message), strings.ToUpper(m)):
			refused = append(refused, m)
		default:
			return inconclusive(tried, err)
		}
	}
	return verdict(len(accepted) == 0, tried, "refused %v (invalid_argument, naming the method); accepted %v", refused, accepted)
}
