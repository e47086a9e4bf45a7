package control

import (
	"context"
	"net/http"

	"corral/internal/cluster/nodetls"
	"corral/internal/cluster/store"
)

// nodeTransport is the transport of every call to a node: TLS only, the
// node's certificate checked against the fingerprint it registered in
// st (read at each new connection), or against the operator's CAs
// (--cluster-ca) and the node's host when cfg has them.
func nodeTransport(st *store.Store, cfg Config) *http.Transport {
	if cfg.roots != nil {
		return (&nodetls.Dialer{Roots: cfg.roots}).Transport()
	}
	return (&nodetls.Dialer{Pins: func(ctx context.Context, hostport string) ([]nodetls.Pin, error) {
		pins, err := st.TLSPins(ctx, nodetls.URLCandidates(hostport))
		out := make([]nodetls.Pin, len(pins))
		for i, p := range pins {
			out[i] = nodetls.Pin{Node: p.Node, Fingerprint: p.Fingerprint}
		}
		return out, err
	}}).Transport()
}
