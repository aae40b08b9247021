// Gatehouse's canary generator for Go test files (see grader/src/canary
// and grader/src/lang_go.rs): the Go counterpart of gatehouse_twins.py,
// read with Go's own parser.
//
// Run in the sandbox, in GOPATH mode so no go.mod is read:
//
//	GO111MODULE=off go run /gatehouse/gatehouse_go_twins.go OUT.json FILE...
//
// For each FILE it writes a template: its text, with every top-level test
// function (`func TestX(t *testing.T)`, no receiver) as a slot holding the
// function (its name replaced by __GH_NAME__) and up to two twins, each the
// same function with one check changed to contradict the original. A check
// is an `if` whose body fails the test (t.Fatal, t.Fatalf, t.Error,
// t.Errorf, t.Fail, t.FailNow): a twin that expects another value changes
// the literal a `!=` condition compares with (in the condition, or assigned
// in the `if`'s own init); a negation wraps the condition in `!( )`. On an
// implementation that passes the test, the twin's changed check fails.
// Calibration keeps only the twins that do.
//
// Output (JSON), as gatehouse_twins.py's: for each FILE, its parts in order:
// {"text": ...} (kept verbatim) or {"slot": N, "indent": "", "name": ...,
// "code": ..., "twins": [{"code": ..., "what": ...}]}; or {"error": ...}
// when the file does not parse. A test whose name appears elsewhere in its
// file, or that does not start and end a line, stays text.
package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

const name = "__GH_NAME__"

// The twin's mark that its changed check ran.
const reached = "ghReached_"
const maxTwins = 2

var testName = regexp.MustCompile(`^Test([^a-z].*)?$`)

var failCalls = map[string]bool{
	"Fatal": true, "Fatalf": true, "Error": true, "Errorf": true, "Fail": true, "FailNow": true,
}

type twin struct {
	Code string `json:"code"`
	What string `json:"what"`
}

type part struct {
	Text   *string `json:"text,omitempty"`
	Slot   *int    `json:"slot,omitempty"`
	Indent *string `json:"indent,omitempty"`
	Name   string  `json:"name,omitempty"`
	Code   string  `json:"code,omitempty"`
	Twins  []twin  `json:"twins,omitempty"`
}

type template struct {
	Parts []part `json:"parts"`
	Error string `json:"error,omitempty"`
}

// An edit of the function's source: replace [from, to) with text.
type edit struct {
	from, to int
	text     string
}

// isTest: a top-level `func TestX(t *testing.T)` with no receiver; and
// the name of its parameter ("" when it has none, or `_`).
func isTest(fn *ast.FuncDecl) (bool, string) {
	if fn.Recv != nil || fn.Body == nil || !testName.MatchString(fn.Name.Name) {
		return false, ""
	}
	params := fn.Type.Params.List
	if len(params) != 1 || len(params[0].Names) > 1 || fn.Type.Results != nil {
		return false, ""
	}
	star, ok := params[0].Type.(*ast.StarExpr)
	if !ok {
		return false, ""
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok {
		return false, ""
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok || pkg.Name != "testing" || sel.Sel.Name != "T" {
		return false, ""
	}
	if len(params[0].Names) == 0 || params[0].Names[0].Name == "_" {
		return true, ""
	}
	return true, params[0].Names[0].Name
}

// fails: whether the block calls X.Fatal/Error/Fail... (not inside a
// function literal of its own).
func fails(b *ast.BlockStmt) bool {
	found := false
	ast.Inspect(b, func(n ast.Node) bool {
		if found {
			return false
		}
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && failCalls[sel.Sel.Name] {
				if _, ok := sel.X.(*ast.Ident); ok {
					found = true
				}
			}
		}
		return true
	})
	return found
}

// A check: an `if` whose body fails the test, and whether it is a
// statement of the function's own body (it runs whenever the test gets
// that far) rather than nested in a loop or another block.
type site struct {
	stmt *ast.IfStmt
	top  bool
}

func sites(fn *ast.FuncDecl) []site {
	top := map[ast.Stmt]bool{}
	for _, s := range fn.Body.List {
		top[s] = true
	}
	// An `else if` or a labelled `if` has no place for the mark before it.
	placeless := map[ast.Node]bool{}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt:
			if n.Else != nil {
				placeless[n.Else] = true
			}
		case *ast.LabeledStmt:
			placeless[n.Stmt] = true
		}
		return true
	})
	var out []site
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if s, ok := n.(*ast.IfStmt); ok && !placeless[s] && fails(s.Body) {
			out = append(out, site{s, top[s]})
		}
		return true
	})
	return out
}

// other: a literal of the same kind that differs from lit.
func other(lit *ast.BasicLit) (string, bool) {
	switch lit.Kind {
	case token.INT:
		// One less (one more for 0): never out of the compared type's range.
		v, err := strconv.ParseInt(strings.ReplaceAll(lit.Value, "_", ""), 0, 64)
		if err != nil {
			return "", false
		}
		if v > 0 {
			return strconv.FormatInt(v-1, 10), true
		}
		return "1", true
	case token.FLOAT:
		return "(" + lit.Value + " + 1)", true
	case token.STRING:
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			return "", false
		}
		return strconv.Quote(s + "~"), true
	}
	return "", false
}

// valueEdit: the edit that makes a `!=` check expect another value.
func valueEdit(fs *token.FileSet, s *ast.IfStmt) (edit, bool) {
	cond, ok := s.Cond.(*ast.BinaryExpr)
	if !ok || cond.Op != token.NEQ {
		return edit{}, false
	}
	for _, side := range []ast.Expr{cond.Y, cond.X} {
		if lit, ok := side.(*ast.BasicLit); ok {
			if v, ok := other(lit); ok {
				return edit{fs.Position(lit.Pos()).Offset, fs.Position(lit.End()).Offset, v}, true
			}
		}
		id, ok := side.(*ast.Ident)
		if !ok {
			continue
		}
		// `if got, want := f(), 3; got != want`
		as, ok := s.Init.(*ast.AssignStmt)
		if !ok || len(as.Lhs) != len(as.Rhs) {
			continue
		}
		for i, l := range as.Lhs {
			if li, ok := l.(*ast.Ident); ok && li.Name == id.Name {
				if lit, ok := as.Rhs[i].(*ast.BasicLit); ok {
					if v, ok := other(lit); ok {
						return edit{fs.Position(lit.Pos()).Offset, fs.Position(lit.End()).Offset, v}, true
					}
				}
			}
		}
	}
	return edit{}, false
}

func apply(src []byte, start int, edits []edit) string {
	sort.Slice(edits, func(i, j int) bool { return edits[i].from > edits[j].from })
	out := string(src)
	for _, e := range edits {
		out = out[:e.from-start] + e.text + out[e.to-start:]
	}
	return out
}

func generate(path string) template {
	src, err := os.ReadFile(path)
	if err != nil {
		return template{Error: err.Error()}
	}
	fs := token.NewFileSet()
	f, err := parser.ParseFile(fs, path, src, parser.ParseComments)
	if err != nil {
		return template{Error: err.Error()}
	}
	// How often each identifier appears: a test named elsewhere in the
	// file (a table, t.Run, another call) keeps its name.
	uses := map[string]int{}
	ast.Inspect(f, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			uses[id.Name]++
		}
		return true
	})
	var t template
	cursor, slot := 0, 0
	text := func(to int) {
		if to > cursor {
			s := string(src[cursor:to])
			t.Parts = append(t.Parts, part{Text: &s})
		}
	}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		test, param := isTest(fn)
		if !test || uses[fn.Name.Name] != 1 || strings.Contains(string(src), name) {
			continue
		}
		start, end := fs.Position(fn.Pos()).Offset, fs.Position(fn.End()).Offset
		if (start > 0 && src[start-1] != '\n') || (end < len(src) && src[end] != '\n') {
			continue
		}
		at := fs.Position(fn.Name.Pos()).Offset
		rename := edit{at, at + len(fn.Name.Name), name}
		body := src[start:end]
		var value, negate []twin
		all := sites(fn)
		if param == "" || strings.Contains(string(src), reached) {
			all = nil
		}
		open := fs.Position(fn.Body.Lbrace).Offset + 1
		// A twin fails unless its changed check ran (an empty loop or a
		// branch not taken is no contradiction): a mark set just before
		// the check, tested when the function returns.
		guard := func(s *ast.IfStmt) []edit {
			at := fs.Position(s.Pos()).Offset
			return []edit{
				{open, open, fmt.Sprintf(" var %s bool; defer func() { if !%s { %s.Error(\"gatehouse canary: not reached\") } }();", reached, reached, param)},
				{at, at, reached + " = true; "},
			}
		}
		// The last check first, then the first, then the rest; checks of
		// the function's own body before nested ones.
		order := []int{}
		for _, top := range []bool{true, false} {
			var idx []int
			for i, s := range all {
				if s.top == top {
					idx = append(idx, i)
				}
			}
			if len(idx) > 0 {
				order = append(order, idx[len(idx)-1])
				if len(idx) > 1 {
					order = append(order, idx[0])
				}
				for _, i := range idx[1 : len(idx)-1+boolInt(len(idx) == 1)] {
					order = append(order, i)
				}
			}
		}
		for _, i := range order {
			s := all[i].stmt
			line := fs.Position(s.Pos()).Line
			if e, ok := valueEdit(fs, s); ok {
				edits := append([]edit{rename, e}, guard(s)...)
				value = append(value, twin{apply(body, start, edits), fmt.Sprintf("line %d: expects another value", line)})
			}
			c0, c1 := fs.Position(s.Cond.Pos()).Offset, fs.Position(s.Cond.End()).Offset
			edits := append([]edit{rename, {c0, c1, "!(" + string(src[c0:c1]) + ")"}}, guard(s)...)
			negate = append(negate, twin{apply(body, start, edits), fmt.Sprintf("line %d: the check negated", line)})
		}
		twins := append(value, negate...)
		if len(all) == 0 && param != "" && len(fn.Body.List) > 0 {
			// Checks in helpers: the twin fails after the body, however it
			// ends (a deferred call runs after t.Fatal too).
			last := fs.Position(fn.Body.List[len(fn.Body.List)-1].End()).Line
			tail := edit{open, open, fmt.Sprintf(" defer %s.Error(\"gatehouse canary: after the last statement\");", param)}
			twins = append(twins, twin{apply(body, start, []edit{rename, tail}), fmt.Sprintf("line %d: fails after the test's last statement", last)})
		}
		if len(twins) > maxTwins {
			twins = twins[:maxTwins]
		}
		text(start)
		n, empty := slot, ""
		t.Parts = append(t.Parts, part{Slot: &n, Indent: &empty, Name: fn.Name.Name, Code: apply(body, start, []edit{rename}), Twins: twins})
		slot++
		cursor = end
		if cursor < len(src) && src[cursor] == '\n' {
			cursor++
		}
	}
	text(len(src))
	return t
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gatehouse_go_twins.go OUT.json FILE...")
		os.Exit(2)
	}
	out := map[string]template{}
	for _, p := range os.Args[2:] {
		out[p] = generate(p)
	}
	data, err := json.Marshal(out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(os.Args[1], data, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
