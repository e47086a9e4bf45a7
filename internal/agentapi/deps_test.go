package agentapi

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the protocol package a contract: it imports errdefs,
// the standard library and golang.org/x/net, nothing else.
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
			if !stdlib && path != "corral/internal/errdefs" && !strings.HasPrefix(path, "golang.org/x/net/") {
				t.Errorf("%s imports %s", f, path)
			}
		}
	}
}
