package deps

import (
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// allowed lists, for every package of the module, the Corral packages it
// may import directly: an allowlist, so a new import (or a new package)
// is a decision made here, in review, and not an accident. An entry
// ending in "/" admits a whole tree.
//
// The shape it keeps: contracts (sandbox, runtime, agentapi, records,
// errdefs, ids, policy) import no backend; backends import contracts; the
// guest agent imports nothing from the daemon; the daemon package is the
// one that wires runtime backends in, with two exceptions that are tools,
// not paths a sandbox takes: cmd/corral (which builds everything into one
// binary) and internal/bench, whose raw QEMU baseline boots the very
// kernel, initramfs and disks the vm backend builds; inproc (a runtime for
// tests) is imported by tests only.
var allowed = map[string][]string{
	"corral/cmd/corral": {"corral/internal/agent", "corral/internal/audit", "corral/internal/bench", "corral/internal/cluster/control", "corral/internal/daemon",
		"corral/internal/image/dirtar", "corral/internal/manager", "corral/internal/mcp", "corral/internal/secrets", "corral/internal/selftest", "corral/internal/selftest/probe", "corral/internal/vminit", "corral/internal/volume/nfsd",
		"corral/pkg/apiv1", "corral/sdk/go/corral"},
	"corral/internal/agent":             {"corral/internal/agentapi", "corral/internal/errdefs", "corral/internal/fspath", "corral/internal/image/dirtar"},
	"corral/internal/agentapi":          {"corral/internal/errdefs"},
	"corral/internal/agentapi/wiretest": {},
	"corral/internal/api": {"corral/internal/agentapi", "corral/internal/audit", "corral/internal/build", "corral/internal/errdefs", "corral/internal/hostpath", "corral/internal/image/oci",
		"corral/internal/image/store", "corral/internal/manager", "corral/internal/netpolicy/policy", "corral/internal/sandbox", "corral/pkg/apiv1",
		"corral/internal/reqid", "corral/internal/volume", "corral/internal/secrets", "corral/internal/usage", "corral/internal/websession"},
	"corral/internal/audit": {"corral/internal/records", "corral/internal/reqid"},
	"corral/internal/bench": {"corral/internal/cgroups", "corral/internal/mountinfo", "corral/internal/runtime/vm", "corral/pkg/apiv1", "corral/sdk/go/corral"},
	"corral/internal/build": {"corral/internal/agentapi", "corral/internal/errdefs", "corral/internal/image/", "corral/internal/keylimit",
		"corral/internal/manager", "corral/internal/runtime", "corral/internal/sandbox", "corral/pkg/apiv1"},
	"corral/internal/boundfs": {},
	"corral/internal/cgroups": {"corral/internal/mountinfo"},
	"corral/internal/cleanup": {},
	"corral/internal/cluster/control": {"corral/internal/readyfile", "corral/internal/audit", "corral/internal/cluster/nodeauth", "corral/internal/cluster/nodetls", "corral/internal/cluster/store", "corral/internal/errdefs", "corral/internal/mcp", "corral/internal/reqid", "corral/internal/seal", "corral/internal/secrets", "corral/internal/volume",
		"corral/internal/sandbox", "corral/internal/usage", "corral/internal/websession", "corral/pkg/apiv1"},
	"corral/internal/cluster/scalebench": {"corral/internal/cluster/store",
		"corral/internal/errdefs", "corral/internal/usage", "corral/pkg/apiv1"},
	"corral/internal/cluster/node":     {"corral/internal/audit", "corral/internal/cluster/nodeauth", "corral/internal/cluster/nodetls", "corral/internal/cluster/store", "corral/internal/e2b/envd", "corral/internal/errdefs", "corral/internal/image/store", "corral/internal/manager", "corral/internal/sandbox", "corral/internal/seal", "corral/internal/usage", "corral/pkg/apiv1"},
	"corral/internal/cluster/nodeauth": {},
	"corral/internal/cluster/nodetls":  {},
	"corral/internal/cluster/pgtest":   {},
	"corral/internal/cluster/store":    {"corral/internal/errdefs", "corral/internal/seal", "corral/internal/usage"},
	"corral/internal/mcp":              {"corral/pkg/apiv1", "corral/sdk/go/corral"},
	"corral/internal/daemon": {"corral/internal/sandboxlog", "corral/internal/readyfile", "corral/internal/api", "corral/internal/audit", "corral/internal/build", "corral/internal/cluster/node", "corral/internal/e2b", "corral/internal/e2b/envd", "corral/internal/errdefs", "corral/internal/image/store", "corral/internal/manager", "corral/internal/mcp",
		"corral/internal/netpolicy/", "corral/internal/netpolicy", "corral/internal/records", "corral/internal/runtime", "corral/internal/sandbox",
		"corral/internal/runtime/gvisor", "corral/internal/runtime/vm", "corral/internal/seal", "corral/internal/reqid", "corral/internal/telemetry", "corral/internal/volume", "corral/internal/console", "corral/internal/websession", "corral/internal/oomscore"},
	"corral/internal/console":    {"corral/internal/errdefs", "corral/internal/websession"},
	"corral/internal/websession": {"corral/internal/errdefs"},
	"corral/internal/e2b": {"corral/internal/build", "corral/internal/errdefs", "corral/internal/hostpath", "corral/internal/manager",
		"corral/internal/metrics", "corral/internal/netpolicy/policy", "corral/internal/sandbox", "corral/pkg/apiv1"},
	"corral/internal/e2b/envd": {"corral/internal/agentapi", "corral/internal/e2b/envd/gen/filesystem", "corral/internal/e2b/envd/gen/filesystem/filesystemconnect",
		"corral/internal/e2b/envd/gen/process", "corral/internal/e2b/envd/gen/process/processconnect", "corral/internal/errdefs", "corral/internal/hostpath",
		"corral/internal/manager", "corral/internal/sandbox", "corral/internal/websession"},
	"corral/internal/e2b/envd/gen/filesystem":                   {},
	"corral/internal/e2b/envd/gen/filesystem/filesystemconnect": {"corral/internal/e2b/envd/gen/filesystem"},
	"corral/internal/e2b/envd/gen/process":                      {},
	"corral/internal/e2b/envd/gen/process/processconnect":       {"corral/internal/e2b/envd/gen/process"},
	"corral/internal/errdefs":                                   {},
	"corral/internal/fspath":                                    {},
	"corral/internal/hostpath":                                  {},
	"corral/internal/ids":                                       {"corral/internal/errdefs"},
	"corral/internal/image/dirtar":                              {"corral/internal/errdefs"},
	"corral/internal/image/oci":                                 {"corral/internal/errdefs", "corral/internal/hostpath", "corral/internal/image/store", "corral/internal/sandbox"},
	"corral/internal/image/overlaytar":                          {"corral/internal/errdefs"},
	"corral/internal/image/store": {"corral/internal/cleanup", "corral/internal/errdefs", "corral/internal/ids", "corral/internal/image/dirtar", "corral/internal/image/overlaytar", "corral/internal/image/tarx",
		"corral/internal/keylimit", "corral/internal/mountinfo"},
	"corral/internal/image/tarx":    {"corral/internal/errdefs"},
	"corral/internal/image/tartest": {},
	"corral/internal/keylimit":      {},
	"corral/internal/manager": {"corral/internal/sandboxlog", "corral/internal/agentapi", "corral/internal/audit", "corral/internal/errdefs", "corral/internal/fspath", "corral/internal/ids",
		"corral/internal/image/oci", "corral/internal/image/overlaytar", "corral/internal/image/store", "corral/internal/keylimit", "corral/internal/manager/handle",
		"corral/internal/metrics", "corral/internal/netpolicy", "corral/internal/netpolicy/policy", "corral/internal/records", "corral/internal/runtime",
		"corral/internal/sandbox", "corral/internal/telemetry", "corral/internal/volume", "corral/internal/volume/nfsd", "corral/internal/secrets", "corral/internal/usage"},
	"corral/internal/manager/handle": {"corral/internal/sandboxlog", "corral/internal/agentapi", "corral/internal/errdefs", "corral/internal/image/store", "corral/internal/netpolicy",
		"corral/internal/records", "corral/internal/runtime", "corral/internal/sandbox"},
	"corral/internal/metrics":          {},
	"corral/internal/oomscore":         {},
	"corral/internal/mountinfo":        {},
	"corral/internal/netpolicy":        {"corral/internal/cleanup", "corral/internal/errdefs", "corral/internal/ids", "corral/internal/mountinfo", "corral/internal/netpolicy/policy"},
	"corral/internal/netpolicy/dnsd":   {"corral/internal/errdefs", "corral/internal/keylimit", "corral/internal/netpolicy/policy"},
	"corral/internal/netpolicy/egress": {"corral/internal/errdefs", "corral/internal/keylimit", "corral/internal/netpolicy/policy"},
	"corral/internal/netpolicy/policy": {"corral/internal/errdefs"},
	"corral/internal/readyfile":        {},
	"corral/internal/records":          {"corral/internal/errdefs", "corral/internal/sandbox", "corral/internal/seal", "corral/internal/usage"},
	"corral/internal/usage":            {},
	"corral/internal/reqid":            {},
	"corral/internal/telemetry":        {},
	"corral/internal/runtime":          {"corral/internal/agentapi", "corral/internal/errdefs", "corral/internal/ids"},
	"corral/internal/runtime/gvisor": {"corral/internal/agentapi", "corral/internal/boundfs", "corral/internal/cgroups", "corral/internal/cleanup", "corral/internal/errdefs",
		"corral/internal/image/overlaytar", "corral/internal/mountinfo", "corral/internal/runtime", "corral/internal/oomscore"},
	"corral/internal/runtime/inproc":      {"corral/internal/agent", "corral/internal/errdefs", "corral/internal/runtime"},
	"corral/internal/runtime/runtimetest": {"corral/internal/agentapi", "corral/internal/cgroups", "corral/internal/ids", "corral/internal/mountinfo", "corral/internal/runtime"},
	"corral/internal/runtime/vm": {"corral/internal/agentapi", "corral/internal/boundfs", "corral/internal/cgroups", "corral/internal/cleanup", "corral/internal/errdefs",
		"corral/internal/image/overlaytar", "corral/internal/keylimit", "corral/internal/runtime", "corral/internal/vminit", "corral/internal/oomscore"},
	"corral/internal/sandbox":        {"corral/internal/errdefs", "corral/internal/ids", "corral/internal/netpolicy/policy", "corral/internal/secrets"},
	"corral/internal/sandboxlog":     {"corral/internal/audit", "corral/internal/netpolicy/policy", "corral/internal/records"},
	"corral/internal/secrets":        {"corral/internal/errdefs"},
	"corral/internal/seal":           {},
	"corral/internal/selftest":       {"corral/internal/selftest/probe", "corral/pkg/apiv1", "corral/sdk/go/corral"},
	"corral/internal/selftest/probe": {},
	"corral/internal/testwait":       {},
	"corral/internal/vminit":         {},
	"corral/internal/volume":         {"corral/internal/errdefs", "corral/internal/sandbox"},
	"corral/internal/volume/nfsd":    {"corral/internal/oomscore"},
	"corral/pkg/apiv1":               {},
	"corral/sdk/go/corral":           {"corral/pkg/apiv1"},
	"corral/test/deploy":             {"corral/internal/cluster/pgtest"},
	"corral/test/deps":               {},
	"corral/test/e2e":                {},
	"corral/test/testlog":            {},
}

// pkg is one package as go list describes it.
type pkg struct {
	path, doc string
	imports   []string // direct, non-test
}

// listPackages describes every package of the module.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{.Doc}}", "corral/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 {
			t.Fatalf("go list line %q", line)
		}
		pkgs = append(pkgs, pkg{path: f[0], imports: strings.Fields(f[1]), doc: f[2]})
	}
	return pkgs
}

// admits reports whether an allowlist entry admits imp: the package
// itself, or a tree ("x/") it lies in.
func admits(entries []string, imp string) bool {
	for _, a := range entries {
		if imp == a || strings.HasSuffix(a, "/") && strings.HasPrefix(imp, a) {
			return true
		}
	}
	return false
}

// admitsModule is admits where an entry also admits the packages below it
// (a module path names its packages).
func admitsModule(entries []string, imp string) bool {
	for _, a := range entries {
		if strings.HasPrefix(imp, strings.TrimSuffix(a, "/")+"/") {
			return true
		}
	}
	return admits(entries, imp)
}

func TestImportsAllowed(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range listPackages(t) {
		seen[p.path] = true
		entries, ok := allowed[p.path]
		if !ok {
			t.Errorf("%s is not in the allowlist: add it with the Corral packages it may import", p.path)
			continue
		}
		for _, imp := range p.imports {
			if strings.HasPrefix(imp, "corral/") && !admits(entries, imp) {
				t.Errorf("%s imports %s, which its allowlist does not admit", p.path, imp)
			}
		}
	}
	var gone []string
	for p := range allowed {
		if !seen[p] {
			gone = append(gone, p)
		}
	}
	sort.Strings(gone)
	for _, p := range gone {
		t.Errorf("the allowlist names %s, which no longer exists", p)
	}
}

// TestTestRuntimeNotInTheBinary: the test runtime (which isolates
// nothing), the conformance suite, the hand-made tars and the tests' wait
// helper are never part of the binary.
func TestTestRuntimeNotInTheBinary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "corral/cmd/corral").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "corral/internal/runtime/inproc" || dep == "corral/internal/runtime/runtimetest" || dep == "corral/internal/image/tartest" ||
			dep == "corral/internal/agentapi/wiretest" || dep == "corral/internal/testwait" {
			t.Errorf("the corral binary depends on %s", dep)
		}
	}
}

// TestPackageDocs: every package says what it owns (a package comment).
func TestPackageDocs(t *testing.T) {
	for _, p := range listPackages(t) {
		if strings.TrimSpace(p.doc) == "" {
			t.Errorf("%s has no package doc comment", p.path)
		}
	}
}

// onlyImports lists, for the leaf packages, every non-standard import they
// may make directly (an entry ending in "/" admits a whole tree): their
// package docs promise these.
var onlyImports = map[string][]string{
	"corral/internal/agent":               {"corral/internal/", "golang.org/x/", "github.com/creack/pty", "github.com/vishvananda/"},
	"corral/internal/agentapi":            {"corral/internal/"},
	"corral/internal/boundfs":             {"golang.org/x/sys/unix"},
	"corral/internal/netpolicy":           {"corral/internal/", "golang.org/x/sys/", "github.com/google/nftables", "github.com/vishvananda/", "github.com/mdlayher/netlink"},
	"corral/internal/netpolicy/dnsd":      {"corral/internal/", "github.com/miekg/dns"},
	"corral/internal/netpolicy/egress":    {"corral/internal/", "golang.org/x/sys/unix"},
	"corral/internal/netpolicy/policy":    {"corral/internal/"},
	"corral/internal/runtime/runtimetest": {"corral/internal/"},
	"corral/internal/image/tarx":          {"corral/internal/", "golang.org/x/sys/unix"},
	"corral/internal/image/dirtar":        {"corral/internal/", "golang.org/x/sys/unix"},
	"corral/internal/image/overlaytar":    {"corral/internal/"},
	"corral/internal/vminit":              {"golang.org/x/sys/unix", "github.com/vishvananda/netlink"},
	"corral/internal/image/oci":           {"corral/internal/", "github.com/google/go-containerregistry/"},
	"corral/internal/image/store":         {"corral/internal/", "golang.org/x/sys/unix"},
	"corral/internal/ids":                 {"corral/internal/"},
	"corral/internal/sandbox":             {"corral/internal/"},
	"corral/internal/runtime":             {"corral/internal/"},
	"corral/internal/seal":                {},
	"corral/internal/mcp":                 {"corral/", "github.com/modelcontextprotocol/go-sdk/"},
	"corral/internal/hostpath":            {},
	"corral/pkg/apiv1":                    {},
	"corral/internal/reqid":               {},
	"corral/internal/websession":          {"corral/internal/"},
	"corral/internal/console":             {"corral/internal/"},
	"corral/internal/volume/nfsd":         {"corral/internal/oomscore", "golang.org/x/sys/unix", "github.com/willscott/go-nfs", "github.com/go-git/go-billy/v5"},
	"corral/internal/oomscore":            {},
	"corral/internal/telemetry":           {"github.com/prometheus/client_golang/", "github.com/prometheus/client_model/"},
}

// TestLeafImports: the guest agent, the contracts and the network layer's
// parts import only the third-party modules their package docs promise.
func TestLeafImports(t *testing.T) {
	for _, p := range listPackages(t) {
		entries, ok := onlyImports[p.path]
		if !ok {
			continue
		}
		for _, imp := range p.imports {
			if !strings.Contains(strings.Split(imp, "/")[0], ".") && !strings.HasPrefix(imp, "corral/") {
				continue // standard library
			}
			if !admitsModule(entries, imp) {
				t.Errorf("%s imports %s", p.path, imp)
			}
		}
	}
}
