package dnsd

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/miekg/dns"

	"corral/internal/netpolicy/policy"
)

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func packed(t testing.TB, m *dns.Msg) []byte {
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzHandle feeds raw bytes to the query path as a query from a sandbox
// in domain mode, with the upstream answering raw bytes of its own (given
// the query's ID and question). Nothing may panic, and no always-denied
// address may reach the sandbox or OnResolved.
func FuzzHandle(f *testing.F) {
	q := new(dns.Msg)
	q.SetQuestion("allowed.test.", dns.TypeA)
	q.SetEdns0(1232, true)
	a := new(dns.Msg)
	a.SetReply(q)
	for _, s := range []string{
		"allowed.test. 60 IN CNAME x.test.", "x.test. 60 IN A 10.0.0.1", "x.test. 60 IN A 198.51.100.1",
		`allowed.test. 60 IN HTTPS 1 . ipv6hint="::1"`, "allowed.test. 60 IN AAAA ::ffff:127.0.0.1",
	} {
		rr, _ := dns.NewRR(s)
		a.Answer = append(a.Answer, rr)
	}
	f.Add(packed(f, q), packed(f, a))
	q2 := new(dns.Msg)
	q2.SetQuestion("denied.test.", dns.TypeANY)
	f.Add(packed(f, q2), []byte{})
	f.Add([]byte{0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0}, []byte{1, 2, 3})
	f.Add([]byte{}, []byte{})

	f.Fuzz(func(t *testing.T, query, answer []byte) {
		s, err := New(Config{
			Upstream: []string{"127.0.0.1:9"},
			Lookup: func(netip.Addr) (string, policy.Policy, bool) {
				return "sb", policy.Policy{DomainAllowlist: []string{"allowed.test", "*.test"}}, true
			},
			OnResolved: func(_, _ string, addrs []netip.Addr, _ time.Duration) {
				for _, a := range addrs {
					if policy.Denied(a, nil) {
						t.Fatalf("OnResolved got %v", a)
					}
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.exchange = func(_ context.Context, q *dns.Msg) (*dns.Msg, error) {
			r := new(dns.Msg)
			if err := r.Unpack(answer); err != nil {
				return nil, errors.New("bad answer")
			}
			r.Id, r.Response, r.Question = q.Id, true, q.Question
			return r, nil
		}
		for _, tcp := range []bool{false, true} {
			out := s.handle(context.Background(), netip.MustParseAddr("10.0.0.2"), query, tcp)
			if out == nil {
				continue
			}
			if !tcp && len(out) > maxUDPReply {
				t.Fatalf("UDP reply of %d bytes", len(out))
			}
			r := new(dns.Msg)
			if err := r.Unpack(out); err != nil {
				continue // a reply we could not fully build is still a reply
			}
			for _, sec := range [][]dns.RR{r.Answer, r.Ns, r.Extra} {
				for _, rr := range sec {
					if a, ok := rrAddr(rr); ok && policy.Denied(a, nil) {
						t.Fatalf("denied address %v in reply", a)
					}
				}
			}
		}
	})
}
