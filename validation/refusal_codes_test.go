package validation

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Every declared refusal code is produced by a control: some non-test
// source of the module uses it besides its declaration. A code no control
// produces is decoration (seed 001), and this test fails on it.
func TestEveryRefusalCodeIsProduced(t *testing.T) {
	fset := token.NewFileSet()
	decl, err := parser.ParseFile(fset, "refusal.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, d := range decl.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
				continue
			}
			for _, n := range vs.Names {
				declared[n.Name] = true
			}
		}
	}
	if len(declared) < 10 {
		t.Fatalf("found only %d declared codes: the parse is wrong", len(declared))
	}
	used := map[string]int{}
	err = filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		// A const declaration is not a use.
		declaring := map[token.Pos]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for _, id := range vs.Names {
					declaring[id.Pos()] = true
				}
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok || declaring[id.Pos()] {
				return true
			}
			if _, ok := declared[id.Name]; ok {
				used[id.Name]++
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range declared {
		if used[name] == 0 {
			t.Errorf("refusal code %s is declared but no control produces it", name)
		}
	}
}
