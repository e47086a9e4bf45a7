package sandboxlog

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"corral/internal/netpolicy/policy"
)

// maxFoldDest bounds a destination's text in a fold key.
const maxFoldDest = 96

// decisionRecord is the record of a network decision: an egress_allowed
// or egress_denied event (audited), or, for a fair-share refusal, its
// limit_reached event. protected tells a denial toward a protected
// destination, which is evidence, as a refusal by a bound is.
func decisionRecord(d policy.Decision, protected func(netip.Addr) bool) record {
	if d.Limit != "" {
		msg, f := LimitEvent(resourceOf(d.Via), d.Limit, d.LimitMax, d.Refused)
		return record{id: d.SandboxID, kind: "limit_reached", msg: msg, fields: f, event: true,
			key: "limit_reached " + f["resource"] + " " + d.Limit, class: evidence}
	}
	kind := "egress_denied"
	if d.Allowed {
		kind = "egress_allowed"
	}
	f := map[string]string{"proto": d.Proto, "via": d.Via}
	if d.Dst.IsValid() {
		f["dst"] = d.Dst.String()
		f["port"] = strconv.Itoa(int(d.Port))
	}
	if d.Domain != "" {
		f["domain"] = d.Domain
	}
	if d.Reason != "" {
		f["reason"] = d.Reason
	}
	if d.Rcode != "" {
		f["rcode"] = d.Rcode
	}
	r := record{id: d.SandboxID, kind: kind, msg: d.String(), fields: f, event: true, key: decisionKey(d)}
	if !d.Allowed && d.Dst.IsValid() && (policy.Denied(d.Dst, nil) || (protected != nil && protected(d.Dst.Unmap()))) {
		r.class = evidence
	}
	return r
}

// decisionKey is what a folded decision is counted under: verdict,
// protocol, destination (a DNS name by its last two labels, so a flood of
// made-up subdomains is one destination) and reason.
func decisionKey(d policy.Decision) string {
	verdict := "denied"
	if d.Allowed {
		verdict = "allowed"
	}
	var dest []string
	if d.Dst.IsValid() {
		dest = append(dest, netip.AddrPortFrom(d.Dst, d.Port).String())
	}
	if d.Domain != "" {
		dest = append(dest, foldDomain(d.Domain))
	}
	s := cut(strings.Join(dest, " "), maxFoldDest)
	reason := d.Reason
	if d.Rcode != "" {
		reason = d.Rcode
	}
	key := verdict + " " + d.Proto + " " + s
	if reason != "" {
		key += " (" + cut(reason, maxFoldDest) + ")"
	}
	return key
}

// foldDomain is a DNS name as folds count it: its last two labels.
func foldDomain(name string) string {
	labels := strings.Split(strings.TrimSuffix(name, "."), ".")
	if len(labels) <= 2 {
		return name
	}
	return "*." + strings.Join(labels[len(labels)-2:], ".")
}

// resourceOf names what a decision's enforcement point bounds.
func resourceOf(via string) string {
	switch via {
	case "proxy":
		return "egress_connections"
	case "dns":
		return "dns_queries"
	}
	return via
}

// LimitEvent is the limit_reached event telling a sandbox that a
// fair-share bound refused it: which resource, which bound ("per_sandbox"
// or "shared"), its size, and how many refusals it stands for.
func LimitEvent(resource, limit string, max, refused int) (string, map[string]string) {
	what := "this sandbox's limit"
	if limit == "shared" {
		what = "the host-wide ceiling"
	}
	return fmt.Sprintf("%s refused: %s of %d reached (%d refused)", resource, what, max, refused),
		map[string]string{"resource": resource, "limit": limit, "max": strconv.Itoa(max), "refused": strconv.Itoa(refused)}
}
