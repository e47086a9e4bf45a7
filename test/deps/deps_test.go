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
		"corral/internal/manager", "corral/internal/api", "corral/internal/store", "corral/internal/daemon",
		"corral/internal/runtime", "corral/internal/sandbox", "corral/pkg/apiv1", "modernc.org/sqlite",
	},
	"corral/internal/agentapi": {"corral/internal/agent", "corral/internal/manager", "corral/internal/runtime"},
	"corral/internal/runtime":  {"corral/internal/runtime/gvisor", "corral/internal/manager", "corral/internal/api"},
	"corral/internal/sandbox":  {"corral/internal/runtime", "corral/internal/store", "corral/internal/manager", "corral/internal/api"},
	"corral/internal/manager":  {"corral/internal/runtime/gvisor", "corral/internal/api", "corral/internal/daemon"},
	"corral/internal/api":      {"corral/internal/runtime/gvisor", "corral/internal/daemon"},
	"corral/internal/runtime/gvisor": {
		"corral/internal/manager", "corral/internal/api", "corral/internal/store", "corral/internal/agent",
	},
	"corral/internal/runtime/runtimetest": {"corral/internal/runtime/gvisor", "corral/internal/manager", "corral/internal/api"},
	"corral/pkg/apiv1":                    {"corral/internal/"},
	"corral/sdk/go/corral":                {"corral/internal/"},
	"corral/internal/store":               {"corral/internal/manager", "corral/internal/runtime"},
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
