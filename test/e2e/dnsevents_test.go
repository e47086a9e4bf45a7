package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A name that does not resolve is shown as such in the event log: the
// daemon's resolver (its upstream a fake on loopback) answers NXDOMAIN or
// SERVFAIL, and the event says so, with an rcode field, instead of a
// plain "allowed dns (NAME)". Both runtimes.
func TestDNSEventsNameErrors(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "--dns-upstream", fakeDNS(t))
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			id := d.create("--runtime", rt)
			for _, name := range []string{"nowhere.test", "servfail.test", "allowed.test"} {
				d.cli("", "exec", id, "--", "getent", "hosts", name)
			}
			want := map[string]string{"nowhere.test": "NXDOMAIN, the name does not exist",
				"servfail.test": "SERVFAIL, the name could not be resolved", "allowed.test": ""}
			var missing string
			var seen map[string]string
			ok := poll(10*time.Second, func() bool {
				evs, err := d.client.Events(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				seen = map[string]string{}
				for _, e := range evs {
					if e.Kind == "egress_allowed" && e.Fields["proto"] == "dns" {
						msg := e.Message
						if rc := e.Fields["rcode"]; rc != "" && !strings.Contains(msg, rc) {
							t.Errorf("event %q has rcode %s but does not say it", msg, rc)
						}
						if _, ok := seen[e.Fields["domain"]]; !ok || seen[e.Fields["domain"]] == "" {
							seen[e.Fields["domain"]] = msg
						}
					}
				}
				missing = ""
				for name, says := range want {
					msg, ok := seen[name]
					if !ok || says != "" && !strings.Contains(msg, says) || says == "" && strings.Contains(msg, "NXDOMAIN") {
						missing += name + " "
					}
				}
				return missing == ""
			})
			if !ok {
				t.Fatalf("DNS events for %s missing or wrong: %v", missing, seen)
			}
		})
	}
}
