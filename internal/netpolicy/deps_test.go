package netpolicy

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the package doc's promise: of Corral, netpolicy imports
// only the contracts it builds on, never the manager, API, runtimes, or
// the resolver and proxy that call it.
func TestImports(t *testing.T) {
	allowed := map[string]bool{
		"corral/internal/errdefs":          true,
		"corral/internal/cleanup":          true,
		"corral/internal/netpolicy/policy": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "corral/") && !allowed[path] {
				t.Errorf("%s imports %s", f, path)
			}
		}
	}
}
