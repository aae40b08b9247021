// Gatehouse's mutation-audit helper for Go: the Go counterpart of
// gatehouse_audit.py (see grader/src/audit), read with Go's own parser
// (go/parser, go/ast) and type checker (go/types, the standard library's
// export data). It never builds or runs the code it is given.
//
// Run in the sandbox, in GOPATH mode so no go.mod is read:
//
//	GO111MODULE=off go run /gatehouse/gatehouse_audit_go.go COMMAND REQUEST.json ANSWER.json
//
// Commands (the request and answer are JSON files):
//
//	defs    {source, path} -> {defs: [{name, kind, line, end_line, signature}]}
//	imports {source} -> {modules: [import paths, in order]}
//	rules   {source, path, context, functions, per_function}
//	        -> {mutants: [{id, name, code, fault}]}
//	apply   {source, path, context, proposals: [{id, code}]}
//	        -> {results: [{ok: true, name, source} | {ok: false, reason}]}
//
// `context` maps the paths of the package's other non-test files to their
// text, so the target type-checks as it would in place. A definition is a
// top-level function or method with a body (a method is named
// `Type.Method`), or a `const` or `var` declaration with a value (named by
// its first name); type declarations have no behaviour. A mutant replaces
// one definition (its whole lines); it is valid when it parses as one
// definition of the same kind and name with no imports, keeps its
// signature (a function's receiver, name, parameters and results; a
// declaration's names and types), differs from the sample after
// normalisation (comments and layout do not count), and the package
// type-checks with no error the sample's package does not have (an unused
// variable included, as the compiler reports it). Rule mutants edit one
// node of the parser's tree, by its position, and only valid ones are
// returned. Any error in the request itself is {"error": "..."}.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/printer"
	"go/scanner"
	"go/token"
	"go/types"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

type proposal struct {
	ID   string `json:"id"`
	Code string `json:"code"`
}

type request struct {
	Source      string            `json:"source"`
	Path        string            `json:"path"`
	Context     map[string]string `json:"context"`
	Functions   []string          `json:"functions"`
	PerFunction int               `json:"per_function"`
	Proposals   []proposal        `json:"proposals"`
}

type refusal struct{ msg string }

func refuse(format string, a ...any) {
	panic(refusal{fmt.Sprintf(format, a...)})
}

var fset = token.NewFileSet()
var imp = importer.ForCompiler(fset, "gc", nil)

func main() {
	if len(os.Args) != 4 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: gatehouse_audit_go.go defs|imports|rules|apply REQUEST.json ANSWER.json")
		os.Exit(2)
	}
	answer := run(os.Args[1], os.Args[2])
	out, err := json.Marshal(answer)
	if err == nil {
		err = os.WriteFile(os.Args[3], out, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(command, reqPath string) (answer any) {
	defer func() {
		if r := recover(); r != nil {
			if ref, ok := r.(refusal); ok {
				answer = map[string]any{"error": ref.msg}
				return
			}
			answer = map[string]any{"error": fmt.Sprintf("bad request: %v", r)}
		}
	}()
	data, err := os.ReadFile(reqPath)
	if err != nil {
		refuse("reading the request: %v", err)
	}
	var req request
	if err := json.Unmarshal(data, &req); err != nil {
		refuse("bad request: %v", err)
	}
	if req.Path == "" {
		req.Path = "target.go"
	}
	return commands[command](req)
}

var commands = map[string]func(request) any{
	"defs": cmdDefs, "imports": cmdImports, "rules": cmdRules, "apply": cmdApply,
}

// ---------------------------------------------------------------- parsing

func parse(name, src, what string) *ast.File {
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		if list, ok := err.(scanner.ErrorList); ok && len(list) > 0 {
			refuse("%s does not parse: %s (line %d)", what, list[0].Msg, list[0].Pos.Line)
		}
		refuse("%s does not parse: %v", what, err)
	}
	return f
}

type def struct {
	decl ast.Decl
	name string
	kind string
}

func recvName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return "?"
		}
	}
}

func topDefs(f *ast.File) []def {
	var out []def
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Body == nil {
				continue
			}
			if d.Recv != nil && len(d.Recv.List) == 1 {
				out = append(out, def{d, recvName(d.Recv.List[0].Type) + "." + d.Name.Name, "method"})
			} else {
				out = append(out, def{d, d.Name.Name, "function"})
			}
		case *ast.GenDecl:
			if d.Tok != token.CONST && d.Tok != token.VAR {
				continue
			}
			first, value := "", false
			for _, s := range d.Specs {
				vs := s.(*ast.ValueSpec)
				if len(vs.Values) > 0 {
					value = true
				}
				if first == "" && len(vs.Names) > 0 {
					first = vs.Names[0].Name
				}
			}
			if value && first != "" && first != "_" {
				out = append(out, def{d, first, d.Tok.String()})
			}
		}
	}
	return out
}

// Every top-level name the file declares (its surface), sorted.
func topNames(f *ast.File) []string {
	var names []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv != nil && len(d.Recv.List) == 1 {
				names = append(names, recvName(d.Recv.List[0].Type)+"."+d.Name.Name)
			} else {
				names = append(names, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names = append(names, n.Name)
					}
				case *ast.TypeSpec:
					names = append(names, s.Name.Name)
				}
			}
		}
	}
	sort.Strings(names)
	return names
}

func printed(n any) string {
	var b bytes.Buffer
	(&printer.Config{Mode: printer.RawFormat}).Fprint(&b, fset, n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// A definition's public shape: what its callers see.
func signature(d def) string {
	switch x := d.decl.(type) {
	case *ast.FuncDecl:
		return printed(&ast.FuncDecl{Recv: x.Recv, Name: x.Name, Type: x.Type})
	case *ast.GenDecl:
		var specs []string
		for _, s := range x.Specs {
			vs := s.(*ast.ValueSpec)
			var names []string
			for _, n := range vs.Names {
				names = append(names, n.Name)
			}
			spec := strings.Join(names, ", ")
			if vs.Type != nil {
				spec += " " + printed(vs.Type)
			}
			specs = append(specs, spec)
		}
		return x.Tok.String() + " (" + strings.Join(specs, "; ") + ")"
	}
	return ""
}

var (
	posType     = reflect.TypeOf(token.Pos(0))
	commentType = reflect.TypeOf((*ast.CommentGroup)(nil))
	objectType  = reflect.TypeOf((*ast.Object)(nil))
	scopeType   = reflect.TypeOf((*ast.Scope)(nil))
)

// The tree without positions, comments or layout: equal dumps are the
// same code.
func dump(n any) string {
	var b strings.Builder
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Interface:
			if v.IsNil() {
				b.WriteString("nil")
				return
			}
			walk(v.Elem())
		case reflect.Ptr:
			if t := v.Type(); t == commentType || t == objectType || t == scopeType {
				return
			}
			if v.IsNil() {
				b.WriteString("nil")
				return
			}
			walk(v.Elem())
		case reflect.Struct:
			b.WriteString(v.Type().Name())
			b.WriteString("{")
			for i := 0; i < v.NumField(); i++ {
				f := v.Type().Field(i)
				if !f.IsExported() || f.Type == posType {
					continue
				}
				b.WriteString(f.Name)
				b.WriteString(":")
				walk(v.Field(i))
				b.WriteString(",")
			}
			b.WriteString("}")
		case reflect.Slice:
			b.WriteString("[")
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
				b.WriteString(",")
			}
			b.WriteString("]")
		default:
			fmt.Fprintf(&b, "%v", v.Interface())
		}
	}
	walk(reflect.ValueOf(n))
	return b.String()
}

// ---------------------------------------------------------------- type checking

type typeErr struct {
	msg  string
	line int
	file string
}

type checked struct {
	info   *types.Info
	pkg    *types.Package
	errors []typeErr
}

func typecheck(files []*ast.File) checked {
	info := &types.Info{
		Types: map[ast.Expr]types.TypeAndValue{},
		Defs:  map[*ast.Ident]types.Object{},
		Uses:  map[*ast.Ident]types.Object{},
	}
	var errs []typeErr
	conf := types.Config{
		Importer: imp,
		Error: func(err error) {
			if te, ok := err.(types.Error); ok {
				p := fset.Position(te.Pos)
				errs = append(errs, typeErr{te.Msg, p.Line, p.Filename})
			}
		},
	}
	name := "p"
	if len(files) > 0 {
		name = files[0].Name.Name
	}
	pkg, _ := conf.Check(name, fset, files, info)
	return checked{info, pkg, errs}
}

// The errors of `after` that `before` does not have (as a multiset).
func newErrors(before, after []typeErr) []typeErr {
	left := map[string]int{}
	for _, e := range before {
		left[e.msg]++
	}
	var out []typeErr
	for _, e := range after {
		if left[e.msg] > 0 {
			left[e.msg]--
		} else {
			out = append(out, e)
		}
	}
	return out
}

// ---------------------------------------------------------------- a session over one target

type session struct {
	req     request
	file    *ast.File
	context []*ast.File
	typed   checked
	before  []typeErr
	defs    []def
	byName  map[string]def
	lines   []string
	tf      *token.File
}

func newSession(req request) *session {
	s := &session{req: req}
	s.file = parse(req.Path, req.Source, "the target file")
	s.tf = fset.File(s.file.Pos())
	var paths []string
	for p := range req.Context {
		if p != req.Path {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, req.Context[p], parser.ParseComments)
		if err == nil && f.Name.Name == s.file.Name.Name {
			s.context = append(s.context, f)
		}
	}
	s.typed = typecheck(append([]*ast.File{s.file}, s.context...))
	s.before = s.typed.errors
	s.defs = topDefs(s.file)
	s.byName = map[string]def{}
	for _, d := range s.defs {
		s.byName[d.name] = d
	}
	s.lines = strings.SplitAfter(req.Source, "\n")
	if n := len(s.lines); n > 0 && s.lines[n-1] == "" {
		s.lines = s.lines[:n-1]
	}
	if n := len(s.lines); n > 0 && !strings.HasSuffix(s.lines[n-1], "\n") {
		s.lines[n-1] += "\n"
	}
	return s
}

func (s *session) line(p token.Pos) int   { return fset.Position(p).Line }
func (s *session) offset(p token.Pos) int { return fset.Position(p).Offset }

func (s *session) span(d def) (int, int) {
	return s.line(d.decl.Pos()), s.line(d.decl.End())
}

func describe(d ast.Decl) string {
	switch d := d.(type) {
	case *ast.FuncDecl:
		return "func " + d.Name.Name
	case *ast.GenDecl:
		return d.Tok.String()
	}
	return "?"
}

type applied struct {
	OK     bool   `json:"ok"`
	Name   string `json:"name,omitempty"`
	Source string `json:"source,omitempty"`
	Reason string `json:"reason,omitempty"`
}

func (s *session) apply(code string) (out applied) {
	defer func() {
		if r := recover(); r != nil {
			ref, ok := r.(refusal)
			if !ok {
				panic(r)
			}
			out = applied{OK: false, Reason: ref.msg}
		}
	}()
	if strings.TrimSpace(code) == "" {
		refuse("the replacement is empty")
	}
	body := strings.Trim(code, "\n") + "\n"
	header := "package " + s.file.Name.Name + "\n"
	repl, err := parser.ParseFile(fset, "replacement.go", header+body, parser.ParseComments)
	if err != nil {
		if list, ok := err.(scanner.ErrorList); ok && len(list) > 0 {
			refuse("the replacement does not parse: %s (line %d)", list[0].Msg, list[0].Pos.Line-1)
		}
		refuse("the replacement does not parse: %v", err)
	}
	defs := topDefs(repl)
	if len(repl.Decls) != 1 || len(defs) != 1 {
		var kinds []string
		for _, d := range repl.Decls {
			kinds = append(kinds, describe(d))
		}
		what := strings.Join(kinds, ", ")
		if what == "" {
			what = "nothing"
		}
		refuse("the replacement is not one function, method, const or var declaration (it holds %s)", what)
	}
	r := defs[0]
	old, ok := s.byName[r.name]
	if !ok {
		var names []string
		for _, d := range s.defs {
			names = append(names, d.name)
		}
		sort.Strings(names)
		have := strings.Join(names, ", ")
		if have == "" {
			have = "none"
		}
		refuse("the replacement defines '%s', which is not a top-level definition of %s (it has %s)", r.name, s.req.Path, have)
	}
	if old.kind != r.kind {
		refuse("the replacement turns '%s' from a %s into a %s", r.name, old.kind, r.kind)
	}
	if was, now := signature(old), signature(r); was != now {
		refuse("the replacement changes the signature of '%s': `%s` became `%s`", r.name, was, now)
	}
	if dump(old.decl) == dump(r.decl) {
		refuse("the replacement is identical to the sample's '%s' after normalisation", r.name)
	}
	start, end := s.span(old)
	mutated := strings.Join(s.lines[:start-1], "") + body + strings.Join(s.lines[end:], "")
	after := parse(s.req.Path, mutated, "the mutated file")
	if a, b := strings.Join(topNames(s.file), ", "), strings.Join(topNames(after), ", "); a != b {
		refuse("the replacement changes the top-level names of %s: %s became %s", s.req.Path, a, b)
	}
	c := typecheck(append([]*ast.File{after}, s.context...))
	if fresh := newErrors(s.before, c.errors); len(fresh) > 0 {
		e := fresh[0]
		where := fmt.Sprintf("line %d", e.line)
		if e.file != s.req.Path {
			where = fmt.Sprintf("%s:%d", e.file, e.line)
		}
		refuse("the mutated file does not compile: %s: %s", where, e.msg)
	}
	return applied{OK: true, Name: r.name, Source: mutated}
}

// ---------------------------------------------------------------- commands

type defOut struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Line      int    `json:"line"`
	EndLine   int    `json:"end_line"`
	Signature string `json:"signature"`
}

func cmdDefs(req request) any {
	f := parse(req.Path, req.Source, "the target file")
	out := []defOut{}
	for _, d := range topDefs(f) {
		out = append(out, defOut{d.name, d.kind, fset.Position(d.decl.Pos()).Line, fset.Position(d.decl.End()).Line, signature(d)})
	}
	return map[string]any{"defs": out}
}

func cmdImports(req request) any {
	f, err := parser.ParseFile(fset, req.Path, req.Source, parser.ImportsOnly)
	if err != nil {
		refuse("the file does not parse: %v", err)
	}
	out := []string{}
	for _, i := range f.Imports {
		p, _ := strconv.Unquote(i.Path.Value)
		out = append(out, p)
	}
	return map[string]any{"modules": out}
}

func cmdApply(req request) any {
	s := newSession(req)
	results := []applied{}
	for _, p := range req.Proposals {
		results = append(results, s.apply(p.Code))
	}
	return map[string]any{"results": results}
}

// ---------------------------------------------------------------- rule mutants

type edit struct {
	from, to int
	text     string
}

type site struct {
	at     int
	edits  []edit
	family string
	fault  string
}

var arith = map[token.Token]token.Token{
	token.ADD: token.SUB, token.SUB: token.ADD, token.MUL: token.QUO, token.QUO: token.MUL, token.REM: token.QUO,
	token.ADD_ASSIGN: token.SUB_ASSIGN, token.SUB_ASSIGN: token.ADD_ASSIGN,
	token.MUL_ASSIGN: token.QUO_ASSIGN, token.QUO_ASSIGN: token.MUL_ASSIGN,
}
var boundary = map[token.Token]token.Token{token.LSS: token.LEQ, token.LEQ: token.LSS, token.GTR: token.GEQ, token.GEQ: token.GTR}
var flip = map[token.Token]token.Token{token.LSS: token.GTR, token.LEQ: token.GEQ, token.GTR: token.LSS, token.GEQ: token.LEQ}
var equality = map[token.Token]token.Token{token.EQL: token.NEQ, token.NEQ: token.EQL}
var logical = map[token.Token]token.Token{token.LAND: token.LOR, token.LOR: token.LAND}

func (s *session) isString(e ast.Expr) bool {
	tv, ok := s.typed.info.Types[e]
	if !ok || tv.Type == nil {
		return false
	}
	b, ok := tv.Type.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsString != 0
}

// The zero value of `t` as source text ("" when there is none to write).
func (s *session) zero(t types.Type) string {
	switch u := t.Underlying().(type) {
	case *types.Basic:
		switch {
		case u.Info()&types.IsBoolean != 0:
			return "false"
		case u.Info()&types.IsString != 0:
			return `""`
		case u.Info()&types.IsNumeric != 0:
			return "0"
		case u.Kind() == types.UnsafePointer:
			return "nil"
		}
	case *types.Pointer, *types.Slice, *types.Map, *types.Chan, *types.Signature, *types.Interface:
		return "nil"
	case *types.Struct, *types.Array:
		if _, isParam := t.(*types.TypeParam); !isParam {
			return types.TypeString(t, types.RelativeTo(s.typed.pkg)) + "{}"
		}
	}
	return ""
}

func isZeroText(text string) bool {
	switch text {
	case "nil", "0", `""`, "false", "0.0":
		return true
	}
	return strings.HasSuffix(text, "{}")
}

func (s *session) text(n ast.Node) string {
	return s.req.Source[s.offset(n.Pos()):s.offset(n.End())]
}

func short(text string) string {
	first := strings.TrimSpace(strings.SplitN(text, "\n", 2)[0])
	if len(first) > 60 {
		return first[:57] + "..."
	}
	if strings.Contains(text, "\n") {
		return first + " ..."
	}
	return first
}

func negation(s *session, e ast.Expr) string {
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.NOT {
		return s.text(u.X)
	}
	switch e.(type) {
	case *ast.Ident, *ast.CallExpr, *ast.SelectorExpr, *ast.ParenExpr, *ast.IndexExpr:
		return "!" + s.text(e)
	}
	return "!(" + s.text(e) + ")"
}

// The edit that removes statement `st`: its whole lines when it has them
// to itself (a trailing `//` comment goes with it), else its span.
func (s *session) removal(st ast.Stmt) edit {
	src := s.req.Source
	start, end := s.offset(st.Pos()), s.offset(st.End())
	lineStart := strings.LastIndex(src[:start], "\n") + 1
	eol := strings.Index(src[end:], "\n")
	if eol == -1 {
		eol = len(src)
	} else {
		eol += end
	}
	before, after := src[lineStart:start], strings.TrimSpace(src[end:eol])
	if strings.TrimSpace(before) == "" && (after == "" || strings.HasPrefix(after, "//")) {
		to := eol + 1
		if to > len(src) {
			to = len(src)
		}
		return edit{lineStart, to, ""}
	}
	return edit{start, end, ""}
}

// Where the rules apply in `d`, in source order. A function's receiver,
// parameters and results are its signature and are left alone, as are
// type expressions.
func (s *session) sites(d def) []site {
	var out []site
	where := func(p token.Pos) string { return fmt.Sprintf("line %d", s.line(p)) }
	add := func(p token.Pos, edits []edit, family, what string) {
		out = append(out, site{s.offset(p), edits, family, fmt.Sprintf("%s: %s in %s", where(p), what, d.name)})
	}
	replace := func(n ast.Node, text string) edit { return edit{s.offset(n.Pos()), s.offset(n.End()), text} }
	tok := func(p token.Pos, old token.Token, text string) []edit {
		o := s.offset(p)
		return []edit{{o, o + len(old.String()), text}}
	}
	trueObj, falseObj := types.Universe.Lookup("true"), types.Universe.Lookup("false")
	var stack []ast.Node
	enclosing := func() *types.Signature {
		for i := len(stack) - 1; i >= 0; i-- {
			switch f := stack[i].(type) {
			case *ast.FuncLit:
				if tv, ok := s.typed.info.Types[f]; ok {
					sig, _ := tv.Type.(*types.Signature)
					return sig
				}
				return nil
			case *ast.FuncDecl:
				if obj, ok := s.typed.info.Defs[f.Name]; ok && obj != nil {
					sig, _ := obj.Type().(*types.Signature)
					return sig
				}
				return nil
			}
		}
		return nil
	}
	visit := func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		switch n.(type) {
		case *ast.FuncType, *ast.ArrayType, *ast.MapType, *ast.ChanType, *ast.StructType, *ast.InterfaceType:
			// Returning false skips the node and its closing nil call.
			return false
		}
		parent := ast.Node(nil)
		if len(stack) > 0 {
			parent = stack[len(stack)-1]
		}
		stack = append(stack, n)
		switch x := n.(type) {
		case *ast.BinaryExpr:
			if to, ok := arith[x.Op]; ok && !(x.Op == token.ADD && s.isString(x)) {
				add(x.OpPos, tok(x.OpPos, x.Op, to.String()), "arithmetic", fmt.Sprintf("`%s` became `%s`", x.Op, to))
			}
			if to, ok := boundary[x.Op]; ok {
				add(x.OpPos, tok(x.OpPos, x.Op, to.String()), "boundary", fmt.Sprintf("`%s` became `%s`", x.Op, to))
			}
			if to, ok := flip[x.Op]; ok {
				add(x.OpPos, tok(x.OpPos, x.Op, to.String()), "comparison", fmt.Sprintf("`%s` flipped to `%s`", x.Op, to))
			}
			if to, ok := equality[x.Op]; ok {
				add(x.OpPos, tok(x.OpPos, x.Op, to.String()), "comparison", fmt.Sprintf("`%s` became `%s`", x.Op, to))
			}
			if to, ok := logical[x.Op]; ok {
				add(x.OpPos, tok(x.OpPos, x.Op, to.String()), "condition", fmt.Sprintf("`%s` became `%s`", x.Op, to))
			}
		case *ast.AssignStmt:
			if to, ok := arith[x.Tok]; ok && !(x.Tok == token.ADD_ASSIGN && len(x.Lhs) == 1 && s.isString(x.Lhs[0])) {
				add(x.TokPos, tok(x.TokPos, x.Tok, to.String()), "arithmetic", fmt.Sprintf("`%s` became `%s`", x.Tok, to))
			}
		case *ast.IncDecStmt:
			to := token.DEC
			if x.Tok == token.DEC {
				to = token.INC
			}
			add(x.TokPos, tok(x.TokPos, x.Tok, to.String()), "arithmetic", fmt.Sprintf("`%s` became `%s`", x.Tok, to))
		case *ast.UnaryExpr:
			if x.Op == token.NOT {
				o := s.offset(x.OpPos)
				add(x.OpPos, []edit{{o, o + 1, ""}}, "negated", fmt.Sprintf("the `!` of `%s` is dropped", short(s.text(x))))
			}
		case *ast.BasicLit:
			switch x.Kind {
			case token.INT:
				if v, err := strconv.ParseInt(x.Value, 0, 64); err == nil {
					to := strconv.FormatInt(v+1, 10)
					add(x.Pos(), []edit{replace(x, to)}, "constant", fmt.Sprintf("constant `%s` nudged to `%s`", x.Value, to))
				}
			case token.FLOAT:
				if v, err := strconv.ParseFloat(strings.ReplaceAll(x.Value, "_", ""), 64); err == nil {
					nv := 1.0
					if v != 0 {
						nv = v * 2
					}
					to := strconv.FormatFloat(nv, 'g', -1, 64)
					if !strings.ContainsAny(to, ".eE") {
						to += ".0"
					}
					add(x.Pos(), []edit{replace(x, to)}, "constant", fmt.Sprintf("constant `%s` nudged to `%s`", x.Value, to))
				}
			case token.STRING:
				if meaningfulString(x, parent) {
					to := `""`
					if v, err := strconv.Unquote(x.Value); err == nil && v == "" {
						to = `"gatehouse"`
					}
					add(x.Pos(), []edit{replace(x, to)}, "constant", fmt.Sprintf("string `%s` became `%s`", short(x.Value), to))
				}
			}
		case *ast.Ident:
			if obj := s.typed.info.Uses[x]; obj != nil && (obj == trueObj || obj == falseObj) {
				to := "true"
				if obj == trueObj {
					to = "false"
				}
				add(x.Pos(), []edit{replace(x, to)}, "constant", fmt.Sprintf("constant `%s` became `%s`", x.Name, to))
			}
		case *ast.IfStmt:
			c := x.Cond
			add(c.Pos(), []edit{replace(c, negation(s, c))}, "negated", "the if condition is negated")
			for _, b := range []string{"true", "false"} {
				if s.text(c) != b {
					add(c.Pos(), []edit{replace(c, b)}, "condition", fmt.Sprintf("the if condition `%s` became `%s`", short(s.text(c)), b))
				}
			}
		case *ast.ForStmt:
			if x.Cond != nil {
				add(x.Cond.Pos(), []edit{replace(x.Cond, negation(s, x.Cond))}, "negated", "the for condition is negated")
			}
		case *ast.ReturnStmt:
			sig := enclosing()
			if sig != nil && sig.Results().Len() == len(x.Results) {
				for i, r := range x.Results {
					text := s.text(r)
					z := s.zero(sig.Results().At(i).Type())
					if z == "" || isZeroText(text) || z == text {
						continue
					}
					what := fmt.Sprintf("returns `%s` instead of `%s`", z, short(text))
					if len(x.Results) > 1 {
						what += fmt.Sprintf(" (result %d)", i+1)
					}
					add(r.Pos(), []edit{replace(r, z)}, "return", what)
				}
			}
		}
		var list []ast.Stmt
		switch x := n.(type) {
		case *ast.BlockStmt:
			list = x.List
		case *ast.CaseClause:
			list = x.Body
		case *ast.CommClause:
			list = x.Body
		}
		for _, st := range list {
			removable := false
			switch st := st.(type) {
			case *ast.ExprStmt, *ast.IncDecStmt, *ast.DeferStmt, *ast.GoStmt, *ast.SendStmt:
				removable = true
			case *ast.AssignStmt:
				removable = st.Tok != token.DEFINE
			case *ast.IfStmt:
				removable = st.Else == nil
			}
			if removable {
				add(st.Pos(), []edit{s.removal(st)}, "statement", fmt.Sprintf("the statement `%s` is removed", short(s.text(st))))
			}
		}
		return true
	}
	switch x := d.decl.(type) {
	case *ast.FuncDecl:
		stack = append(stack, x)
		ast.Inspect(x.Body, visit)
		// Return early: the function returns at once, with zero values.
		if sig := enclosing(); sig != nil && len(x.Body.List) > 0 {
			if _, already := x.Body.List[0].(*ast.ReturnStmt); !already {
				var zeros []string
				for i := 0; i < sig.Results().Len(); i++ {
					zeros = append(zeros, s.zero(sig.Results().At(i).Type()))
				}
				ret := strings.TrimSpace("return " + strings.Join(zeros, ", "))
				complete := true
				for _, z := range zeros {
					complete = complete && z != ""
				}
				if complete {
					first := x.Body.List[0]
					at := s.offset(first.Pos())
					text := ret + "; "
					if s.line(first.Pos()) != s.line(x.Body.Lbrace) {
						src := s.req.Source
						lineStart := strings.LastIndex(src[:at], "\n") + 1
						text = ret + "\n" + src[lineStart:at]
					}
					out = append(out, site{at, []edit{{at, at, text}}, "return", fmt.Sprintf("%s: `%s` returns early (`%s`) in %s", where(first.Pos()), x.Name.Name, ret, d.name)})
				}
			}
		}
	case *ast.GenDecl:
		for _, sp := range x.Specs {
			for _, v := range sp.(*ast.ValueSpec).Values {
				stack = stack[:0]
				ast.Inspect(v, visit)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at < out[j].at })
	return out
}

// A string literal whose value decides something: compared, a `case`, or
// returned (messages are not behaviour a brief asks for).
func meaningfulString(lit *ast.BasicLit, parent ast.Node) bool {
	switch p := parent.(type) {
	case *ast.BinaryExpr:
		return p.Op == token.EQL || p.Op == token.NEQ || p.Op == token.LSS || p.Op == token.GTR
	case *ast.CaseClause:
		for _, e := range p.List {
			if e == lit {
				return true
			}
		}
	case *ast.ReturnStmt:
		return true
	}
	return false
}

func spread[T any](items []T, n int) []T {
	if n <= 0 || len(items) <= n {
		return items
	}
	step := float64(len(items)) / float64(n)
	var out []T
	for k := 0; k < n; k++ {
		out = append(out, items[int(float64(k)*step)])
	}
	return out
}

type mutant struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Code  string `json:"code"`
	Fault string `json:"fault"`
}

func cmdRules(req request) any {
	s := newSession(req)
	var unknown []string
	for _, w := range req.Functions {
		if _, ok := s.byName[w]; !ok {
			unknown = append(unknown, w)
		}
	}
	if len(unknown) > 0 {
		var names []string
		for _, d := range s.defs {
			names = append(names, d.name)
		}
		have := strings.Join(names, ", ")
		if have == "" {
			have = "none"
		}
		refuse("no top-level definition named %s (the file defines %s)", strings.Join(unknown, ", "), have)
	}
	wanted := map[string]bool{}
	for _, w := range req.Functions {
		wanted[w] = true
	}
	var chosen []def
	found := map[string][]site{}
	for _, d := range s.defs {
		if len(wanted) == 0 || wanted[d.name] {
			chosen = append(chosen, d)
			found[d.name] = s.sites(d)
		}
	}
	out := []mutant{}
	for _, d := range chosen {
		start, end := s.span(d)
		from := len(strings.Join(s.lines[:start-1], ""))
		text := strings.Join(s.lines[start-1:end], "")
		type made struct{ family, fault, code string }
		var all []made
		seen := map[string]bool{}
		for _, st := range found[d.name] {
			edits := append([]edit(nil), st.edits...)
			sort.Slice(edits, func(i, j int) bool { return edits[i].from > edits[j].from })
			code := text
			for _, e := range edits {
				a, b := e.from-from, e.to-from
				if b > len(code) {
					b = len(code)
				}
				code = code[:a] + e.text + code[b:]
			}
			r := s.apply(code)
			if !r.OK {
				continue // not valid: no rule mutant
			}
			f, err := parser.ParseFile(fset, req.Path, r.Source, 0)
			if err != nil {
				continue
			}
			key := dump(f.Decls)
			if seen[key] {
				continue
			}
			seen[key] = true
			all = append(all, made{st.family, st.fault, code})
		}
		for i, m := range spread(all, req.PerFunction) {
			out = append(out, mutant{fmt.Sprintf("rule-%s-%d-%s", d.name, i+1, m.family), d.name, m.code, m.fault})
		}
	}
	return map[string]any{"mutants": out}
}
