// Package deps keeps Corral's imports one-way: contracts import no backend,
// the guest agent imports nothing from the daemon, and only the daemon
// package wires runtime backends in.
package deps

import (
	"os/exec"
	"strings"
	"testing"
)

// forbidden maps a package to the corral packages it must never depend on,
// directly or not.
var forbidden = map[string][]string{
	"corral/internal/agent": {
		"corral/internal/manager", "corral/internal/api", "corral/internal/records", "corral/internal/daemon",
		"corral/internal/runtime", "corral/internal/sandbox", "corral/pkg/apiv1", "modernc.org/sqlite",
	},
	"corral/internal/agentapi": {"corral/internal/agent", "corral/internal/manager", "corral/internal/runtime"},
	"corral/internal/runtime":  {"corral/internal/runtime/gvisor", "corral/internal/runtime/vm", "corral/internal/manager", "corral/internal/api"},
	"corral/internal/sandbox":  {"corral/internal/runtime", "corral/internal/records", "corral/internal/manager", "corral/internal/api"},
	"corral/internal/manager":  {"corral/internal/runtime/gvisor", "corral/internal/runtime/vm", "corral/internal/api", "corral/internal/daemon"},
	"corral/internal/api":      {"corral/internal/runtime/gvisor", "corral/internal/daemon"},
	"corral/internal/build":    {"corral/internal/runtime/gvisor", "corral/internal/api", "corral/internal/daemon"},
	"corral/internal/runtime/gvisor": {
		"corral/internal/manager", "corral/internal/api", "corral/internal/records", "corral/internal/agent",
	},
	"corral/internal/runtime/runtimetest": {"corral/internal/runtime/gvisor", "corral/internal/runtime/vm", "corral/internal/manager", "corral/internal/api"},
	"corral/internal/runtime/vm": {
		"corral/internal/manager", "corral/internal/api", "corral/internal/records", "corral/internal/agent", "corral/internal/runtime/gvisor",
	},
	"corral/pkg/apiv1":      {"corral/internal/"},
	"corral/sdk/go/corral":  {"corral/internal/"},
	"corral/internal/records": {"corral/internal/manager", "corral/internal/runtime"},
}

func TestImportsGoOneWay(t *testing.T) {
	for pkg, bad := range forbidden {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range bad {
				if dep != pkg && (dep == b || strings.HasSuffix(b, "/") && strings.HasPrefix(dep, b)) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}

// onlyImports lists, for the leaf packages, every non-standard import they
// may make directly (an entry ending in "/" admits a whole tree).
var onlyImports = map[string][]string{
	"corral/internal/agent":               {"corral/internal/agentapi", "corral/internal/errdefs", "corral/internal/fspath", "corral/internal/image/dirtar", "golang.org/x/", "github.com/creack/pty", "github.com/vishvananda/"},
	"corral/internal/agentapi":            {"corral/internal/errdefs", "golang.org/x/net/"},
	"corral/internal/netpolicy":           {"corral/internal/errdefs", "corral/internal/ids", "corral/internal/cleanup", "corral/internal/mountinfo", "corral/internal/netpolicy/policy", "golang.org/x/sys/", "github.com/google/nftables", "github.com/vishvananda/", "github.com/mdlayher/netlink"},
	"corral/internal/netpolicy/dnsd":      {"corral/internal/errdefs", "corral/internal/keylimit", "corral/internal/netpolicy/policy", "github.com/miekg/dns"},
	"corral/internal/netpolicy/egress":    {"corral/internal/errdefs", "corral/internal/keylimit", "corral/internal/netpolicy/policy", "golang.org/x/sys/unix"},
	"corral/internal/netpolicy/policy":    {"corral/internal/errdefs"},
	"corral/internal/runtime/runtimetest": {"corral/internal/runtime", "corral/internal/agentapi", "corral/internal/ids"},
	"corral/internal/image/tarx":          {"corral/internal/errdefs", "golang.org/x/sys/unix"},
	"corral/internal/image/dirtar":        {"corral/internal/errdefs", "golang.org/x/sys/unix"},
	"corral/internal/image/overlaytar":    {"corral/internal/errdefs"},
	"corral/internal/vminit":              {"golang.org/x/sys/unix", "github.com/vishvananda/netlink"},
	"corral/internal/image/oci":           {"corral/internal/errdefs", "corral/internal/image/store", "github.com/google/go-containerregistry/"},
	"corral/internal/image/store":         {"corral/internal/errdefs", "corral/internal/ids", "corral/internal/cleanup", "corral/internal/mountinfo", "corral/internal/keylimit", "corral/internal/image/tarx", "golang.org/x/sys/unix"},
}

// TestLeafImports: the guest agent, the protocol and the network layer's
// parts import only what their package docs promise.
func TestLeafImports(t *testing.T) {
	for pkg, allowed := range onlyImports {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, imp := range strings.Fields(string(out)) {
			if !strings.Contains(strings.Split(imp, "/")[0], ".") && !strings.HasPrefix(imp, "corral/") {
				continue // standard library
			}
			ok := false
			for _, a := range allowed {
				if imp == a || strings.HasSuffix(a, "/") && strings.HasPrefix(imp, a) || strings.HasPrefix(imp, a+"/") {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s imports %s", pkg, imp)
			}
		}
	}
}
