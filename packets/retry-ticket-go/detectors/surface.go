// surface: gift-signature and gift-dependency, read with Go's own parser.
//
// Parses every non-test .go file of the workspace's root package (never
// compiling or running them) and prints one JSON line per finding:
//   - gift-signature: the package's exported surface is not exactly the
//     starter's (FetchJSON, FetchError and its Error method), FetchJSON's
//     signature is not func(context.Context, string) (map[string]any,
//     error), or FetchError's fields are not exactly Message string and
//     Status int;
//   - gift-dependency: a file imports a package outside the standard
//     library (an import path whose first element has a dot).
//
// Run as `GO111MODULE=off go run .gatehouse/surface.go` (GOPATH mode: the
// submission's go.mod is never read). Exits 0; a file that does not parse
// is reported on stderr and skipped (the build says what is wrong).
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

func emit(id, evidence string) {
	line, _ := json.Marshal(map[string]string{"id": id, "evidence": evidence})
	fmt.Println(string(line))
}

func text(fset *token.FileSet, n ast.Node) string {
	var b bytes.Buffer
	_ = printer.Fprint(&b, fset, n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// types lists a field list's types, one per name (names do not matter).
func types(fset *token.FileSet, fl *ast.FieldList) string {
	if fl == nil {
		return ""
	}
	var out []string
	for _, f := range fl.List {
		t := strings.ReplaceAll(text(fset, f.Type), "interface{}", "any")
		for i := 0; i < len(f.Names) || i == 0; i++ {
			out = append(out, t)
		}
	}
	return strings.Join(out, ", ")
}

// signature spells a function type by its types alone.
func signature(fset *token.FileSet, ft *ast.FuncType) string {
	return fmt.Sprintf("func(%s) (%s)", types(fset, ft.Params), types(fset, ft.Results))
}

func main() {
	files, _ := filepath.Glob("*.go")
	sort.Strings(files)
	fset := token.NewFileSet()
	exported := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		if info, err := os.Lstat(name); err != nil || !info.Mode().IsRegular() {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			fmt.Fprintf(os.Stderr, "surface: %s does not parse: %v\n", name, err)
			continue
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if first := strings.SplitN(path, "/", 2)[0]; strings.Contains(first, ".") {
				emit("gift-dependency", fmt.Sprintf("%s:%d imports %q, which is not in the standard library", name, fset.Position(imp.Pos()).Line, path))
			}
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				key := d.Name.Name
				if d.Recv != nil && len(d.Recv.List) == 1 {
					key = text(fset, d.Recv.List[0].Type) + "." + key
				}
				exported[key] = fmt.Sprintf("%s:%d", name, fset.Position(d.Pos()).Line)
				if key == "FetchJSON" {
					got := signature(fset, d.Type)
					want := "func(context.Context, string) (map[string]any, error)"
					if got != want {
						emit("gift-signature", fmt.Sprintf("%s:%d: FetchJSON is %s, not %s", name, fset.Position(d.Pos()).Line, got, want))
					}
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						exported[s.Name.Name] = fmt.Sprintf("%s:%d", name, fset.Position(s.Pos()).Line)
						if s.Name.Name == "FetchError" {
							got := text(fset, s.Type)
							if got != "struct { Message string Status int }" {
								emit("gift-signature", fmt.Sprintf("%s:%d: FetchError is %s, not struct { Message string; Status int }", name, fset.Position(s.Pos()).Line, got))
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								exported[n.Name] = fmt.Sprintf("%s:%d", name, fset.Position(n.Pos()).Line)
							}
						}
					}
				}
			}
		}
	}
	allowed := map[string]bool{"FetchJSON": true, "FetchError": true, "*FetchError.Error": true}
	var extra []string
	for k := range exported {
		if !allowed[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		emit("gift-signature", fmt.Sprintf("%s: %s is new on the package's exported surface", exported[k], k))
	}
	for _, k := range []string{"FetchJSON", "FetchError"} {
		if _, ok := exported[k]; !ok && len(files) > 0 {
			emit("gift-signature", fmt.Sprintf("%s is gone from the package's exported surface", k))
		}
	}
}
