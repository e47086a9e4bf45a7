package agent

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the agent free of the daemon: besides the standard
// library and golang.org/x and creack/pty, it may import only the protocol,
// the path resolver and the error kinds.
func TestImports(t *testing.T) {
	allowed := map[string]bool{
		"corral/internal/agentapi": true,
		"corral/internal/errdefs":  true,
		"corral/internal/fspath":   true,
	}
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
			if strings.HasPrefix(path, "corral/") && !allowed[path] {
				t.Errorf("%s imports %s; the agent must not depend on the daemon", f, path)
			}
			if strings.Contains(strings.Split(path, "/")[0], ".") &&
				!strings.HasPrefix(path, "golang.org/x/") && path != "github.com/creack/pty" {
				t.Errorf("%s imports %s; keep the agent's dependencies minimal", f, path)
			}
		}
	}
}
