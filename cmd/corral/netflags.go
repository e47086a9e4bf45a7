package main

import (
	"net/netip"
	"strings"
)

// prefixValue is a pflag.Value for one CIDR range.
type prefixValue struct{ p *netip.Prefix }

func (v prefixValue) String() string {
	if v.p == nil || !v.p.IsValid() {
		return ""
	}
	return v.p.String()
}

func (v prefixValue) Set(s string) error {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return err
	}
	*v.p = p
	return nil
}

func (v prefixValue) Type() string { return "cidr" }

// prefixesValue is a repeatable pflag.Value of CIDR ranges.
type prefixesValue struct{ ps *[]netip.Prefix }

func (v prefixesValue) String() string {
	if v.ps == nil {
		return ""
	}
	var ss []string
	for _, p := range *v.ps {
		ss = append(ss, p.String())
	}
	return strings.Join(ss, ",")
}

func (v prefixesValue) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(part))
		if err != nil {
			return err
		}
		*v.ps = append(*v.ps, p)
	}
	return nil
}

func (v prefixesValue) Type() string { return "cidrs" }
