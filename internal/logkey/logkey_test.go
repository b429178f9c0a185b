package logkey

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// keys is every constant of this package, by value.
var keys = []string{
	DeliveryID, Event, Action, InstallationID, Repo, PR, HeadSHA, JobID, JobState, Rerun, Attempt,
	RunID, CheckRunID, ReviewID, Executor, SandboxID, Step, Outcome, RefusalCode,
	Err, Reason, Status, Detail, Count, Wait, DurationMS, Host, Port, Dir, Key, Manager, Version,
}

// synonyms are keys spelled otherwise than the constant for the same thing.
var synonyms = map[string]string{"error": Err, "delivery": DeliveryID, "repository": Repo}

// firstKV is, per slog.Logger method (and slog function of the same
// name), the index of its first key-value argument.
var firstKV = map[string]int{
	"Debug": 1, "Info": 1, "Warn": 1, "Error": 1,
	"DebugContext": 2, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2,
	"Log": 3, "LogAttrs": 3, "With": 0,
}

// attrFuncs are slog's Attr constructors: their first argument is a key.
var attrFuncs = []string{"String", "Int", "Int64", "Uint64", "Float64", "Bool", "Time", "Duration", "Any", "Group"}

// literalKeys reports the string literals of f, in the argument lists of
// log calls, that spell a key this package names, or a synonym of one.
func literalKeys(fset *token.FileSet, f *ast.File) []string {
	var out []string
	check := func(e ast.Expr) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return
		}
		v, err := strconv.Unquote(lit.Value)
		if err != nil {
			return
		}
		if slices.Contains(keys, v) {
			out = append(out, fset.Position(lit.Pos()).String()+": "+lit.Value+" is a logkey constant")
		} else if c, ok := synonyms[v]; ok {
			out = append(out, fset.Position(lit.Pos()).String()+": "+lit.Value+" is spelled "+strconv.Quote(c))
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		recv, _ := sel.X.(*ast.Ident)
		if recv != nil && recv.Name == "slog" && slices.Contains(attrFuncs, sel.Sel.Name) && len(call.Args) > 0 {
			check(call.Args[0])
			return true
		}
		i, ok := firstKV[sel.Sel.Name]
		if !ok || (recv != nil && isPackage(recv.Name)) {
			return true
		}
		// Keys are every other argument; an Attr in between shifts them,
		// so every literal after the message is checked: a value that
		// spells a key is as suspect.
		for _, a := range call.Args[min(i, len(call.Args)):] {
			check(a)
		}
		return true
	})
	return out
}

// isPackage tells a package's name (http.Error) from a logger's.
func isPackage(name string) bool {
	return slices.Contains([]string{"http", "fmt", "errors", "strings", "bytes", "os", "t", "b"}, name)
}

func TestLiteralKeysFindsThem(t *testing.T) {
	src := `package p
func f() {
	log.Info("job done", "job_id", 1, "outcome", "passed")
	log.With(slog.String("repo", "o/r")).Warn("m", "count", 2)
	l.LogAttrs(ctx, slog.LevelWarn, "m", slog.String("error", e))
	log.Info("m", "delivery", "d", "tier", "strong")
	http.Error(w, "status", 500)
	log.Info("err")
}`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := literalKeys(fset, f)
	var lits []string
	for _, g := range got {
		lits = append(lits, g[strings.Index(g, ": ")+2:])
	}
	want := []string{
		`"job_id" is a logkey constant`, `"outcome" is a logkey constant`, `"count" is a logkey constant`,
		`"repo" is a logkey constant`, `"error" is spelled "err"`, `"delivery" is spelled "delivery_id"`,
	}
	if !slices.Equal(lits, want) {
		t.Errorf("literalKeys:\n got %q\nwant %q", lits, want)
	}
}

// TestKeysAreConstants: no log call of the module's production code
// spells a key this package names, or a synonym of one.
func TestKeysAreConstants(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "node_modules", "vendor":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files++
		for _, l := range literalKeys(fset, f) {
			t.Error(l)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files under %s; the walk missed the module", files, root)
	}
}
