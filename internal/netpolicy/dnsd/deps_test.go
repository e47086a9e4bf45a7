package dnsd

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps dnsd a leaf of the network layer: it imports the
// policy contract, errdefs, the standard library and github.com/miekg/dns, nothing
// else (the daemon wires it to the kernel layer and the event log).
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			stdlib := !strings.Contains(strings.Split(path, "/")[0], ".") && !strings.HasPrefix(path, "corral/")
			ok := stdlib || path == "corral/internal/errdefs" || path == "corral/internal/netpolicy/policy" || path == "github.com/miekg/dns"
			if !ok {
				t.Errorf("%s imports %s", f, path)
			}
		}
	}
}
