package dnsd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/miekg/dns"

	"corral/internal/errdefs"
)

// upstreamFromResolvConf returns the nameservers of a resolv.conf file as
// host:port.
func upstreamFromResolvConf(path string) ([]string, error) {
	conf, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading upstream resolvers from %s: %w", path, err)
	}
	var out []string
	for _, s := range conf.Servers {
		out = append(out, net.JoinHostPort(s, conf.Port))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no nameserver in %s: %w", path, errdefs.ErrFailedPrecondition)
	}
	return out, nil
}

// forward sends q to the upstreams in turn until one answers, within
// cfg.Timeout overall; each upstream gets an equal share of what is left.
// An answer truncated over UDP is asked again over TCP.
func (s *Server) forward(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	var errs []error
	for i, up := range s.upstream {
		deadline, _ := ctx.Deadline()
		share := time.Until(deadline) / time.Duration(len(s.upstream)-i)
		actx, acancel := context.WithTimeout(ctx, share)
		resp, err := exchange(actx, "udp", up, q)
		if err == nil && resp.Truncated {
			resp, err = exchange(actx, "tcp", up, q)
		}
		acancel()
		if err == nil {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", up, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("forwarding %s query for %s: %w", dns.TypeToString[q.Question[0].Qtype], q.Question[0].Name, errors.Join(errs...))
}

// exchange sends q to one upstream and waits for the matching answer:
// same ID and question. Over UDP, stray or malformed packets are skipped
// until the deadline. Reads are bounded (maxUDPReply over UDP, the 64 KiB
// message limit over TCP).
func exchange(ctx context.Context, network, addr string, q *dns.Msg) (*dns.Msg, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	co := &dns.Conn{Conn: c, UDPSize: maxUDPReply}
	if err := co.WriteMsg(q); err != nil {
		return nil, fmt.Errorf("sending query: %w", err)
	}
	for {
		r, err := co.ReadMsg()
		if err != nil {
			var ne net.Error
			if network == "udp" && !errors.As(err, &ne) && ctx.Err() == nil {
				continue // a packet that is not a DNS message
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("waiting for answer: %w", errdefs.ErrDeadlineExceeded)
			}
			return nil, fmt.Errorf("reading answer: %w", err)
		}
		if r.Id == q.Id && r.Response && sameQuestion(r, q) {
			return r, nil
		}
		if network != "udp" {
			return nil, errors.New("answer does not match the query")
		}
	}
}

func sameQuestion(r, q *dns.Msg) bool {
	if len(r.Question) != 1 || len(q.Question) != 1 {
		return false
	}
	a, b := r.Question[0], q.Question[0]
	return a.Qtype == b.Qtype && a.Qclass == b.Qclass && strings.EqualFold(a.Name, b.Name)
}
