package deps

import (
	"go/ast"
	"go/types"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// writers are the only packages that may write a sandbox's events and
// audit entries: the records store and the audit trail themselves, and
// sandboxlog, which holds every sandbox to its budget. Anything else that
// wrote them would bypass the budget (issue 30: a kind of record added
// later must not open a new door).
var writers = map[string]bool{
	"corral/internal/records":    true,
	"corral/internal/audit":      true,
	"corral/internal/sandboxlog": true,
}

// guarded are the methods that write a sandbox's trail, by receiver type.
var guarded = map[string][]string{
	"corral/internal/records.Store": {"AppendEvent"},
	"corral/internal/audit.Trail":   {"Record"},
}

// TestOneWriterOfSandboxRecords: outside the writers, no package calls
// records.Store.AppendEvent or audit.Trail.Record (through a value or a
// method value). The API's calls reach the trail through audit.Recorder,
// which the daemon gives sandboxlog's writer.
func TestOneWriterOfSandboxRecords(t *testing.T) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedSyntax | packages.NeedTypesInfo | packages.NeedFiles}
	pkgs, err := packages.Load(cfg, "corral/...")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range pkgs {
		if writers[p.PkgPath] || p.TypesInfo == nil {
			continue
		}
		checked++
		for _, f := range p.Syntax {
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				s := p.TypesInfo.Selections[sel]
				if s == nil || s.Kind() == types.FieldVal {
					return true
				}
				recv := s.Recv()
				if ptr, ok := recv.(*types.Pointer); ok {
					recv = ptr.Elem()
				}
				named, ok := recv.(*types.Named)
				if !ok || named.Obj().Pkg() == nil {
					return true
				}
				name := named.Obj().Pkg().Path() + "." + named.Obj().Name()
				for _, m := range guarded[name] {
					if sel.Sel.Name == m {
						t.Errorf("%s: %s calls %s.%s: a sandbox's events and audit entries go through sandboxlog's writer", p.Fset.Position(sel.Pos()), p.PkgPath, strings.TrimPrefix(name, "corral/internal/"), m)
					}
				}
				return true
			})
		}
	}
	if checked < 20 {
		t.Fatalf("only %d packages checked", checked)
	}
}
