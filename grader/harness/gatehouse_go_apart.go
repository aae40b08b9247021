// Gatehouse's generator for the Go judge apart (JUDGE.md,
// grader/src/lang/go.rs): from the candidate package's go/types
// information, a STUB package for the judge and a SERVER file for the host.
//
// Run by the trusted runner under the judge's uid, in GOPATH mode so no
// go.mod is read:
//
//	GO111MODULE=off go run /gatehouse/gatehouse_go_apart.go CONFIG.json OUT.json
//
// It never runs the candidate's code: it parses the package's files (those
// `go list` compiles), type-checks them with the export data of their
// imports, and type-checks the hidden test files against them to learn
// which of the package's names the tests use. It writes:
//
//   - the stub (StubFile): a package with the same name and the same
//     package-level names, exported and not: every type declared as in the
//     package (fields, tags, embedding, so reflection and literals in the
//     tests see the same types), every method and function with the same
//     signature and a body that calls the host, every variable initialised
//     from the host's value and mirrored with every call, every constant
//     with its value; and the tables gatehouse_go_wire.go reads (types,
//     interfaces with their proxies, variables);
//   - the hidden test files, each with `gatehouse_track_.Track(t)` at the
//     start of every function taking a *testing.T (on the line of its
//     brace, so line numbers stay), in TestsDir;
//   - the server file (ServerFile), in the candidate's package: the tables
//     of its functions, method expressions and variables, and
//     GatehouseServe_; and for a package that is not `main`, a main package
//     (MainFile) that calls it.
//
// What the tests use that cannot cross (a channel, a pointer to a standard
// struct with unexported fields, a generic function, a type from another
// package of the submission's module) is refused here, with the name, the
// type and why, in OUT.json's "errors": the runner reports them as the
// run's collection error, so `packet check` shows them for the packet's
// own tests. Names the tests do not use and that cannot cross are left
// out of the stub or declared without a mirror, and listed in "notes".
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
)

type source struct {
	Dir   string   `json:"dir"`
	Files []string `json:"files"`
}

type config struct {
	Dir        string   `json:"dir"`
	ImportPath string   `json:"import_path"`
	Name       string   `json:"name"`
	Files      []string `json:"files"`
	// The packages of the build that are not the standard library's,
	// read from source; the standard library's come from GOROOT's export
	// data.
	Sources     map[string]source `json:"sources"`
	Tests       []string          `json:"tests"`
	StubFile    string            `json:"stub_file"`
	TestsDir    string            `json:"tests_dir"`
	ServerFile  string            `json:"server_file"`
	MainFile    string            `json:"main_file"`
	WireImport  string            `json:"wire_import"`
	JudgeImport string            `json:"judge_import"`
}

type output struct {
	Errors []string `json:"errors"`
	Notes  []string `json:"notes"`
}

type gen struct {
	cfg  config
	fset *token.FileSet
	pkg  *types.Package
	own  map[string]bool // files of the package
	out  output
	used map[types.Object]bool
	// The receiver types of the fields and methods the tests select.
	usedOwners map[types.Type]bool
	imports    map[string]string // path → alias, per file being written
	// What the surface reaches.
	stdTypes map[string]*types.TypeName
	ifaces   map[string]types.Type
	ifaceIDs map[string]int
	skipped  map[types.Object]string
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gatehouse_go_apart.go CONFIG.json OUT.json")
		os.Exit(2)
	}
	var g gen
	data, err := os.ReadFile(os.Args[1])
	if err == nil {
		err = json.Unmarshal(data, &g.cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := g.run(); err != nil {
		g.out.Errors = append(g.out.Errors, err.Error())
	}
	data, _ = json.Marshal(g.out)
	if err := os.WriteFile(os.Args[2], data, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func (g *gen) run() error {
	g.fset = token.NewFileSet()
	g.own = map[string]bool{}
	var files []*ast.File
	for _, name := range g.cfg.Files {
		path := filepath.Join(g.cfg.Dir, name)
		f, err := parser.ParseFile(g.fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("the package does not parse: %v", err)
		}
		g.own[g.fset.File(f.Pos()).Name()] = true
		files = append(files, f)
	}
	gc := importer.ForCompiler(g.fset, "gc", func(path string) (io.ReadCloser, error) {
		return os.Open(stdArchive(path))
	})
	// Packages of the build outside the standard library, from source.
	fromSource := map[string]*types.Package{}
	var imp types.Importer
	imp = importerFunc(func(path string) (*types.Package, error) {
		src, ok := g.cfg.Sources[path]
		if !ok {
			return gc.Import(path)
		}
		if p, ok := fromSource[path]; ok {
			if p == nil {
				return nil, fmt.Errorf("an import cycle through %s", path)
			}
			return p, nil
		}
		fromSource[path] = nil
		var fs []*ast.File
		for _, name := range src.Files {
			f, err := parser.ParseFile(g.fset, filepath.Join(src.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			fs = append(fs, f)
		}
		conf := types.Config{Importer: imp, Error: func(error) {}}
		p, _ := conf.Check(path, g.fset, fs, nil)
		fromSource[path] = p
		return p, nil
	})
	// The package alone must type-check: the stub is its declarations.
	var pkgErrs []string
	alone := types.Config{Importer: imp, Error: func(err error) {
		if len(pkgErrs) < 5 {
			pkgErrs = append(pkgErrs, err.Error())
		}
	}}
	if _, err := alone.Check(g.cfg.ImportPath, g.fset, files, nil); err != nil && len(pkgErrs) > 0 {
		return fmt.Errorf("the package does not type-check: %s", strings.Join(pkgErrs, "; "))
	}
	// Then with the hidden tests of the package: what they use.
	var internal, external []*ast.File
	tests := map[string]*ast.File{}
	for _, path := range g.cfg.Tests {
		f, err := parser.ParseFile(g.fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("a hidden test file does not parse: %v", err)
		}
		tests[path] = f
		if f.Name.Name == g.cfg.Name+"_test" {
			external = append(external, f)
		} else {
			internal = append(internal, f)
		}
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: imp, Error: func(error) {}}
	pkg, _ := conf.Check(g.cfg.ImportPath, g.fset, append(append([]*ast.File{}, files...), internal...), info)
	g.pkg = pkg
	if len(external) > 0 {
		xconf := types.Config{Importer: importerFunc(func(path string) (*types.Package, error) {
			if path == g.cfg.ImportPath {
				return pkg, nil
			}
			return imp.Import(path)
		}), Error: func(error) {}}
		_, _ = xconf.Check(g.cfg.ImportPath+"_test", g.fset, external, info)
	}
	// What the tests use: package-level names, methods and fields of the
	// package, named in a test file.
	g.used = map[types.Object]bool{}
	inTest := func(pos token.Pos) bool { return !g.own[g.fset.File(pos).Name()] }
	use := func(obj types.Object) {
		if obj == nil || obj.Pkg() != pkg || !g.declaredHere(obj) {
			return
		}
		if obj.Parent() == pkg.Scope() || obj.Parent() == nil {
			g.used[obj] = true
		}
	}
	for id, obj := range info.Uses {
		if inTest(id.Pos()) {
			use(obj)
		}
	}
	g.usedOwners = map[types.Type]bool{}
	for sel, s := range info.Selections {
		if inTest(sel.Pos()) {
			use(s.Obj())
			if s.Obj().Pkg() == pkg && g.declaredHere(s.Obj()) {
				g.usedOwners[s.Recv()] = true
			}
		}
	}
	g.collect()
	g.tablesFor(g.objects())
	for obj, why := range g.skipped {
		if g.used[obj] {
			g.out.Errors = append(g.out.Errors, fmt.Sprintf("the hidden tests use %s, which cannot cross between the judge and the candidate's code: %s", describe(obj), why))
		}
	}
	g.refuseUncrossable()
	sort.Strings(g.out.Errors)
	if len(g.out.Errors) > 0 {
		return nil
	}
	if err := g.writeStub(); err != nil {
		return err
	}
	if err := g.writeServer(); err != nil {
		return err
	}
	for path, f := range tests {
		if err := g.writeTest(path, f); err != nil {
			return err
		}
	}
	return nil
}

// stdArchive: where GOROOT keeps a standard package's export data.
func stdArchive(path string) string {
	return filepath.Join(runtime.GOROOT(), "pkg", runtime.GOOS+"_"+runtime.GOARCH, path+".a")
}

// isStd: whether a package is the standard library's.
func (g *gen) isStd(path string) bool {
	if _, ok := g.cfg.Sources[path]; ok {
		return false
	}
	_, err := os.Stat(stdArchive(path))
	return err == nil
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

func (g *gen) declaredHere(obj types.Object) bool {
	if !obj.Pos().IsValid() {
		return false
	}
	return g.own[g.fset.File(obj.Pos()).Name()]
}

func describe(obj types.Object) string {
	switch o := obj.(type) {
	case *types.Func:
		if sig, ok := o.Type().(*types.Signature); ok && sig.Recv() != nil {
			return fmt.Sprintf("the method %s", o.FullName())
		}
		return fmt.Sprintf("the function %s", o.Name())
	case *types.Var:
		if o.IsField() {
			return fmt.Sprintf("the field %s", o.Name())
		}
		return fmt.Sprintf("the variable %s", o.Name())
	case *types.TypeName:
		return fmt.Sprintf("the type %s", o.Name())
	case *types.Const:
		return fmt.Sprintf("the constant %s", o.Name())
	}
	return obj.Name()
}

// ---------------------------------------------------------------- the surface

// objects: the package's package-level declarations, in source order.
func (g *gen) objects() []types.Object {
	var out []types.Object
	scope := g.pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if g.declaredHere(obj) {
			out = append(out, obj)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pos() < out[j].Pos() })
	return out
}

// collect finds what cannot be written in the stub at all.
func (g *gen) collect() {
	g.skipped = map[types.Object]string{}
	for _, obj := range g.objects() {
		if why := g.inexpressible(obj); why != "" {
			g.skipped[obj] = why
		}
	}
}

// tablesFor walks what objs reach: the std named types and the interfaces
// of the tables.
func (g *gen) tablesFor(objs []types.Object) {
	g.stdTypes = map[string]*types.TypeName{}
	g.ifaces = map[string]types.Type{}
	g.ifaceIDs = map[string]int{}
	seen := map[types.Type]bool{}
	var walk func(t types.Type)
	walk = func(t types.Type) {
		if t == nil || seen[t] {
			return
		}
		seen[t] = true
		switch t := t.(type) {
		case *types.Named:
			obj := t.Obj()
			if obj.Pkg() == nil {
				return
			}
			if obj.Pkg() == g.pkg {
				// The package's own interface crosses under its name.
				if it, ok := t.Underlying().(*types.Interface); ok && it.NumMethods() > 0 {
					g.addIface(t)
					for i := 0; i < it.NumMethods(); i++ {
						walk(it.Method(i).Type())
					}
					return
				}
				walk(t.Underlying())
				for i := 0; i < t.NumMethods(); i++ {
					walk(t.Method(i).Type())
				}
				return
			}
			if !g.isStd(obj.Pkg().Path()) || t.TypeArgs().Len() > 0 {
				return
			}
			if _, ok := t.Underlying().(*types.Interface); ok {
				g.addIface(t)
				return
			}
			if obj.Exported() {
				g.stdTypes[obj.Pkg().Path()+"."+obj.Name()] = obj
			}
		case *types.Interface:
			if t.NumMethods() > 0 {
				g.addIface(t)
			}
		default:
			for _, e := range elements(t) {
				walk(e)
			}
		}
	}
	for _, obj := range objs {
		if _, skipped := g.skipped[obj]; skipped {
			continue
		}
		walk(obj.Type())
	}
}

// ifaceName: the name both sides give an interface type in their tables.
func (g *gen) ifaceName(t types.Type) string {
	if n, ok := t.(*types.Named); ok {
		if n.Obj().Pkg() == g.pkg {
			return n.Obj().Name()
		}
		return n.Obj().Pkg().Path() + "." + n.Obj().Name()
	}
	return "anon:" + types.TypeString(t, func(p *types.Package) string { return p.Path() })
}

func (g *gen) addIface(t types.Type) {
	name := g.ifaceName(t)
	if name == "error" || name == "context.Context" {
		return
	}
	if _, ok := g.ifaces[name]; ok {
		return
	}
	it := t.Underlying().(*types.Interface)
	// A proxy must implement every method: not one another package keeps
	// unexported, and every type in its methods must be writable here.
	ms := types.NewMethodSet(t)
	for i := 0; i < ms.Len(); i++ {
		m := ms.At(i).Obj()
		if !m.Exported() && m.Pkg() != g.pkg {
			return
		}
		if _, err := g.typeExpr(m.Type(), map[string]string{}); err != nil {
			return
		}
	}
	if it.IsComparable() && !it.IsMethodSet() {
		return
	}
	g.ifaces[name] = t
	g.ifaceIDs[name] = len(g.ifaceIDs)
}

// inexpressible: why a declaration cannot be written in the stub ("" if it
// can).
func (g *gen) inexpressible(obj types.Object) string {
	switch o := obj.(type) {
	case *types.TypeName:
		if n, ok := o.Type().(*types.Named); ok && n.TypeParams().Len() > 0 {
			return fmt.Sprintf("%s is generic (a generic type does not cross)", o.Name())
		}
		if o.IsAlias() {
			if _, err := g.typeExpr(o.Type(), map[string]string{}); err != nil {
				return err.Error()
			}
			return ""
		}
		if _, err := g.typeExpr(o.Type().Underlying(), map[string]string{}); err != nil {
			return err.Error()
		}
		if n, ok := o.Type().(*types.Named); ok {
			for i := 0; i < n.NumMethods(); i++ {
				if _, err := g.typeExpr(n.Method(i).Type(), map[string]string{}); err != nil {
					return fmt.Sprintf("its method %s: %v", n.Method(i).Name(), err)
				}
			}
		}
	case *types.Func:
		sig := o.Type().(*types.Signature)
		if sig.TypeParams().Len() > 0 {
			return fmt.Sprintf("%s is generic (a generic function does not cross)", o.Name())
		}
		if _, err := g.typeExpr(sig, map[string]string{}); err != nil {
			return err.Error()
		}
	case *types.Var:
		if _, err := g.typeExpr(o.Type(), map[string]string{}); err != nil {
			return err.Error()
		}
	case *types.Const:
		if _, err := g.typeExpr(o.Type(), map[string]string{}); err != nil {
			return err.Error()
		}
	}
	return ""
}

// crossWhy: why values of t cannot cross ("" when they can).
func (g *gen) crossWhy(t types.Type, seen map[types.Type]bool) string {
	if seen[t] {
		return ""
	}
	seen[t] = true
	switch t := t.(type) {
	case *types.Basic:
		if t.Kind() == types.UnsafePointer {
			return "unsafe.Pointer does not cross"
		}
	case *types.Named:
		obj := t.Obj()
		if obj.Pkg() == nil || obj.Pkg() == g.pkg {
			if obj.Pkg() == g.pkg {
				if it, ok := t.Underlying().(*types.Interface); ok && it.NumMethods() > 0 {
					if _, ok := g.ifaces[g.ifaceName(t)]; !ok {
						return fmt.Sprintf("%s has methods no proxy can implement", obj.Name())
					}
					return g.methodsWhy(t, seen)
				}
				if _, ok := t.Underlying().(*types.Struct); ok {
					// A value of the package's struct crosses by its fields;
					// a field that cannot is refused when it is set.
					return ""
				}
				if why := g.crossWhy(t.Underlying(), seen); why != "" {
					return fmt.Sprintf("%s: %s", obj.Name(), why)
				}
			}
			return ""
		}
		path := obj.Pkg().Path() + "." + obj.Name()
		if path == "context.Context" {
			return ""
		}
		switch u := t.Underlying().(type) {
		case *types.Interface:
			if u.NumMethods() == 0 {
				return ""
			}
			if _, ok := g.ifaces[g.ifaceName(t)]; !ok {
				return fmt.Sprintf("%s has methods no proxy can implement", path)
			}
			return g.methodsWhy(t, seen)
		case *types.Struct:
			if g.hasMethod(t, "MarshalBinary") && g.hasMethod(types.NewPointer(t), "UnmarshalBinary") {
				return ""
			}
			for i := 0; i < u.NumFields(); i++ {
				f := u.Field(i)
				if !f.Exported() {
					return fmt.Sprintf("%s is a struct with unexported fields", path)
				}
				if why := g.crossWhy(f.Type(), seen); why != "" {
					return fmt.Sprintf("%s.%s: %s", path, f.Name(), why)
				}
			}
		default:
			if why := g.crossWhy(u, seen); why != "" {
				return fmt.Sprintf("%s: %s", path, why)
			}
		}
	case *types.Pointer:
		if n, ok := t.Elem().(*types.Named); ok && n.Obj().Pkg() == g.pkg {
			if _, ok := n.Underlying().(*types.Struct); ok {
				return ""
			}
		}
		return g.crossWhy(t.Elem(), seen)
	case *types.Slice:
		return g.crossWhy(t.Elem(), seen)
	case *types.Array:
		return g.crossWhy(t.Elem(), seen)
	case *types.Map:
		if why := g.crossWhy(t.Key(), seen); why != "" {
			return why
		}
		return g.crossWhy(t.Elem(), seen)
	case *types.Chan:
		return fmt.Sprintf("%s is a channel (a channel does not cross)", types.TypeString(t, nil))
	case *types.Signature:
		for _, tup := range []*types.Tuple{t.Params(), t.Results()} {
			for i := 0; i < tup.Len(); i++ {
				if why := g.crossWhy(tup.At(i).Type(), seen); why != "" {
					return why
				}
			}
		}
	case *types.Struct:
		for i := 0; i < t.NumFields(); i++ {
			if why := g.crossWhy(t.Field(i).Type(), seen); why != "" {
				return why
			}
		}
	case *types.Interface:
		if t.NumMethods() == 0 {
			return ""
		}
		if _, ok := g.ifaces[g.ifaceName(t)]; !ok {
			return fmt.Sprintf("%s has methods no proxy can implement", types.TypeString(t, nil))
		}
		return g.methodsWhy(t, seen)
	case *types.TypeParam:
		return "a type parameter does not cross"
	}
	return ""
}

func (g *gen) methodsWhy(t types.Type, seen map[types.Type]bool) string {
	ms := types.NewMethodSet(t)
	for i := 0; i < ms.Len(); i++ {
		m := ms.At(i).Obj()
		if why := g.crossWhy(m.Type(), seen); why != "" {
			return fmt.Sprintf("its method %s: %s", m.Name(), why)
		}
	}
	return ""
}

func (g *gen) hasMethod(t types.Type, name string) bool {
	ms := types.NewMethodSet(t)
	for i := 0; i < ms.Len(); i++ {
		if ms.At(i).Obj().Name() == name {
			return true
		}
	}
	return false
}

// refuseUncrossable: what the tests call, read or assign must be able to
// cross.
func (g *gen) refuseUncrossable() {
	for obj := range g.used {
		if _, skipped := g.skipped[obj]; skipped {
			continue
		}
		var why string
		switch o := obj.(type) {
		case *types.Func:
			why = g.crossWhy(o.Type(), map[types.Type]bool{})
		case *types.Var:
			if o.IsField() {
				continue
			}
			why = g.crossWhy(o.Type(), map[types.Type]bool{})
		default:
			continue
		}
		if why != "" {
			g.out.Errors = append(g.out.Errors, fmt.Sprintf("the hidden tests use %s, which cannot cross between the judge and the candidate's code: %s", describe(obj), why))
		}
	}
}

// ---------------------------------------------------------------- writing types

// typeExpr writes t as Go source in the package, recording the imports it
// needs (path → alias) in imps.
func (g *gen) typeExpr(t types.Type, imps map[string]string) (string, error) {
	var bad error
	s := types.TypeString(t, func(p *types.Package) string {
		if p == g.pkg {
			return ""
		}
		if !g.isStd(p.Path()) {
			if bad == nil {
				bad = fmt.Errorf("it uses %s, a package of the submission other than the one tested (only the standard library crosses)", p.Path())
			}
			return "x"
		}
		alias, ok := imps[p.Path()]
		if !ok {
			alias = fmt.Sprintf("gatehouse_i%d_", len(imps))
			imps[p.Path()] = alias
		}
		return alias
	})
	return s, bad
}

type writer struct {
	g    *gen
	buf  bytes.Buffer
	imps map[string]string
}

func (w *writer) p(format string, a ...any) { fmt.Fprintf(&w.buf, format, a...) }

func (w *writer) typ(t types.Type) string {
	s, err := w.g.typeExpr(t, w.imps)
	if err != nil {
		panic(err)
	}
	return s
}

// sig writes a function's parameters and results with generated names;
// args: the argument pointers, results: declared result variables.
func (w *writer) sig(sig *types.Signature) (params string, results string, args []string, decls string, rets []string) {
	var ps []string
	for i := 0; i < sig.Params().Len(); i++ {
		t := sig.Params().At(i).Type()
		name := fmt.Sprintf("gh_a%d", i)
		if sig.Variadic() && i == sig.Params().Len()-1 {
			ps = append(ps, name+" ..."+w.typ(t.(*types.Slice).Elem()))
		} else {
			ps = append(ps, name+" "+w.typ(t))
		}
		args = append(args, "&"+name)
	}
	var rs []string
	var ds []string
	for i := 0; i < sig.Results().Len(); i++ {
		t := w.typ(sig.Results().At(i).Type())
		rs = append(rs, t)
		name := fmt.Sprintf("gh_r%d", i)
		ds = append(ds, fmt.Sprintf("var %s %s", name, t))
		rets = append(rets, name)
	}
	params = strings.Join(ps, ", ")
	switch len(rs) {
	case 0:
	case 1:
		results = " " + rs[0]
	default:
		results = " (" + strings.Join(rs, ", ") + ")"
	}
	decls = strings.Join(ds, "; ")
	return
}

func anyList(xs []string) string { return "[]any{" + strings.Join(xs, ", ") + "}" }

func (w *writer) imports() string {
	var b strings.Builder
	paths := make([]string, 0, len(w.imps))
	for p := range w.imps {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	b.WriteString("import (\n")
	for _, p := range paths {
		fmt.Fprintf(&b, "\t%s %q\n", w.imps[p], p)
	}
	b.WriteString(")\n\n")
	return b.String()
}

func constExpr(c *types.Const, typ string) string {
	v := c.Val()
	basic, _ := c.Type().Underlying().(*types.Basic)
	untyped := basic != nil && basic.Info()&types.IsUntyped != 0
	var lit string
	switch v.Kind() {
	case constant.Bool:
		lit = strconv.FormatBool(constant.BoolVal(v))
	case constant.String:
		lit = strconv.Quote(constant.StringVal(v))
	case constant.Int:
		lit = v.ExactString()
		if untyped && basic.Kind() == types.UntypedRune {
			if n, ok := constant.Int64Val(v); ok && n >= 0 && n <= 0x10FFFF {
				lit = strconv.QuoteRune(rune(n))
			}
		}
	case constant.Float:
		num := constant.Num(v)
		den := constant.Denom(v)
		if den.ExactString() == "1" {
			lit = "(" + num.ExactString() + ".0)"
		} else {
			lit = "(" + num.ExactString() + ".0 / " + den.ExactString() + ")"
		}
	case constant.Complex:
		re := constExprVal(constant.Real(v))
		im := constExprVal(constant.Imag(v))
		lit = "(" + re + " + " + im + "*1i)"
	default:
		lit = v.ExactString()
	}
	if untyped {
		return lit
	}
	return typ + "(" + lit + ")"
}

func constExprVal(v constant.Value) string {
	if v.Kind() == constant.Int {
		return v.ExactString() + ".0"
	}
	num := constant.Num(v)
	den := constant.Denom(v)
	return "(" + num.ExactString() + ".0 / " + den.ExactString() + ")"
}

// ---------------------------------------------------------------- tables

const reg = "gatehouse_judge_registry_"

// tables writes the Registry fields both sides share: the package's types,
// the std types, and the interfaces with their proxies.
func (w *writer) tables(regName string, ownTypes []*types.TypeName) {
	w.p("\tOwn: map[string]gatehouse_reflect_.Type{\n")
	for _, tn := range ownTypes {
		w.p("\t\t%q: gatehouse_reflect_.TypeOf((*%s)(nil)).Elem(),\n", tn.Name(), tn.Name())
	}
	w.p("\t},\n\tStd: map[string]gatehouse_reflect_.Type{\n")
	names := make([]string, 0, len(w.g.stdTypes))
	for n := range w.g.stdTypes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		w.p("\t\t%q: gatehouse_reflect_.TypeOf((*%s)(nil)).Elem(),\n", n, w.typ(w.g.stdTypes[n].Type()))
	}
	w.p("\t},\n\tIfaces: map[string]*gatehouse_wire_.Iface{\n")
	inames := make([]string, 0, len(w.g.ifaces))
	for n := range w.g.ifaces {
		inames = append(inames, n)
	}
	sort.Strings(inames)
	for _, n := range inames {
		t := w.g.ifaces[n]
		texpr := w.typ(t)
		w.p("\t\t%q: {\n\t\t\tType: gatehouse_reflect_.TypeOf((*%s)(nil)).Elem(),\n", n, texpr)
		w.p("\t\t\tNew: func(r *gatehouse_wire_.Ref) any { return gatehouseProxy%d_{r} },\n", w.g.ifaceIDs[n])
		w.p("\t\t\tMethods: map[string]func(o any) any{\n")
		ms := types.NewMethodSet(t)
		for i := 0; i < ms.Len(); i++ {
			m := ms.At(i).Obj()
			w.p("\t\t\t\t%q: func(o any) any { return o.(%s).%s },\n", m.Name(), texpr, m.Name())
		}
		w.p("\t\t\t},\n\t\t},\n")
	}
	w.p("\t},\n")
}

func (w *writer) proxies() {
	inames := make([]string, 0, len(w.g.ifaces))
	for n := range w.g.ifaces {
		inames = append(inames, n)
	}
	sort.Strings(inames)
	for _, n := range inames {
		t := w.g.ifaces[n]
		id := w.g.ifaceIDs[n]
		w.p("type gatehouseProxy%d_ struct{ r *gatehouse_wire_.Ref }\n\n", id)
		ms := types.NewMethodSet(t)
		for i := 0; i < ms.Len(); i++ {
			m := ms.At(i).Obj()
			sig := m.Type().(*types.Signature)
			params, results, args, decls, rets := w.sig(sig)
			w.p("func (p gatehouseProxy%d_) %s(%s)%s {\n", id, m.Name(), params, results)
			if decls != "" {
				w.p("\t%s\n", decls)
			}
			w.p("\tp.r.Call(%q, %s, %s)\n", m.Name(), anyList(args), anyList(amp(rets)))
			if len(rets) > 0 {
				w.p("\treturn %s\n", strings.Join(rets, ", "))
			}
			w.p("}\n\n")
		}
	}
}

func sortedMethods(n *types.Named) []*types.Func {
	out := make([]*types.Func, n.NumMethods())
	for i := range out {
		out[i] = n.Method(i)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

func amp(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = "&" + x
	}
	return out
}

// ---------------------------------------------------------------- the stub

func (g *gen) mirrored(v *types.Var) bool {
	return g.crossWhy(v.Type(), map[types.Type]bool{}) == ""
}

// stubbed: what the stub declares: every package-level name the tests
// use, with every type of the package those reach (each with all its
// methods, so it implements what it implements in the package), sorted by
// name, so that two submissions whose used declarations agree get the same
// stub (and the same test binary).
func (g *gen) stubbed() []types.Object {
	keep := map[types.Object]bool{}
	var queue []types.Object
	add := func(obj types.Object) {
		if obj == nil || keep[obj] || obj.Pkg() != g.pkg || obj.Parent() != g.pkg.Scope() || !g.declaredHere(obj) {
			return
		}
		keep[obj] = true
		queue = append(queue, obj)
	}
	seen := map[types.Type]bool{}
	var walk func(t types.Type)
	walk = func(t types.Type) {
		if t == nil || seen[t] {
			return
		}
		seen[t] = true
		switch t := t.(type) {
		case *types.Named:
			if t.Obj().Pkg() == g.pkg {
				add(t.Obj())
			}
		case *types.Interface:
			for i := 0; i < t.NumEmbeddeds(); i++ {
				walk(t.EmbeddedType(i))
			}
			for i := 0; i < t.NumExplicitMethods(); i++ {
				walk(t.ExplicitMethod(i).Type())
			}
		default:
			for _, e := range elements(t) {
				walk(e)
			}
		}
	}
	for obj := range g.used {
		if obj.Parent() == g.pkg.Scope() {
			add(obj)
			continue
		}
		// A method or a field: its type's declaration.
		if f, ok := obj.(*types.Func); ok {
			if sig, ok := f.Type().(*types.Signature); ok && sig.Recv() != nil {
				walk(sig.Recv().Type())
			}
		}
	}
	for sel := range g.usedOwners {
		walk(sel)
	}
	for i := 0; i < len(queue); i++ {
		obj := queue[i]
		switch o := obj.(type) {
		case *types.TypeName:
			if o.IsAlias() {
				walk(o.Type())
				continue
			}
			if n, ok := o.Type().(*types.Named); ok {
				walk(n.Underlying())
				for j := 0; j < n.NumMethods(); j++ {
					walk(n.Method(j).Type())
				}
			}
		default:
			walk(obj.Type())
		}
	}
	var out []types.Object
	for obj := range keep {
		out = append(out, obj)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

func (g *gen) writeStub() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("writing the stub: %v", r)
		}
	}()
	w := &writer{g: g, imps: map[string]string{}}
	var ownTypes []*types.TypeName
	var vars []string
	objs := g.stubbed()
	g.tablesFor(objs)
	for _, obj := range objs {
		if why, skipped := g.skipped[obj]; skipped {
			g.out.Notes = append(g.out.Notes, fmt.Sprintf("%s is not in the judge's stub: %s", describe(obj), why))
			continue
		}
		switch o := obj.(type) {
		case *types.TypeName:
			if o.IsAlias() {
				w.p("type %s = %s\n\n", o.Name(), w.typ(o.Type()))
				continue
			}
			n := o.Type().(*types.Named)
			ownTypes = append(ownTypes, o)
			w.p("type %s %s\n\n", o.Name(), w.typ(n.Underlying()))
			for _, m := range sortedMethods(n) {
				sig := m.Type().(*types.Signature)
				recv := o.Name()
				mx := recv + "." + m.Name()
				if _, ptr := sig.Recv().Type().(*types.Pointer); ptr {
					recv = "*" + recv
					mx = "(*" + o.Name() + ")." + m.Name()
				}
				params, results, args, decls, rets := w.sig(sig)
				w.p("func (gh_recv %s) %s(%s)%s {\n", recv, m.Name(), params, results)
				if decls != "" {
					w.p("\t%s\n", decls)
				}
				w.p("\tgatehouse_judge_.Method(%s, %q, &gh_recv, %s, %s)\n", reg, mx, anyList(args), anyList(amp(rets)))
				if len(rets) > 0 {
					w.p("\treturn %s\n", strings.Join(rets, ", "))
				}
				w.p("}\n\n")
			}
		case *types.Func:
			sig := o.Type().(*types.Signature)
			params, results, args, decls, rets := w.sig(sig)
			w.p("func %s(%s)%s {\n", o.Name(), params, results)
			if decls != "" {
				w.p("\t%s\n", decls)
			}
			w.p("\tgatehouse_judge_.Call(%s, %q, %s, %s)\n", reg, o.Name(), anyList(args), anyList(amp(rets)))
			if len(rets) > 0 {
				w.p("\treturn %s\n", strings.Join(rets, ", "))
			}
			w.p("}\n\n")
		case *types.Var:
			if o.Name() == "_" {
				continue
			}
			t := w.typ(o.Type())
			if g.mirrored(o) {
				w.p("var %s %s = gatehouse_judge_.InitVar[%s](%s, %q)\n\n", o.Name(), t, t, reg, o.Name())
				vars = append(vars, o.Name())
			} else {
				g.out.Notes = append(g.out.Notes, fmt.Sprintf("%s is declared in the judge's stub but not mirrored: %s", describe(obj), g.crossWhy(o.Type(), map[types.Type]bool{})))
				w.p("var %s %s\n\n", o.Name(), t)
			}
		case *types.Const:
			if o.Name() == "_" {
				continue
			}
			t := w.typ(o.Type())
			w.p("const %s = %s\n\n", o.Name(), constExpr(o, t))
		}
	}
	w.proxies()
	w.p("var %s = &gatehouse_wire_.Registry{\n", reg)
	w.tables(reg, ownTypes)
	w.p("}\n\n")
	w.p("func init() {\n\t%s.Vars = map[string]any{\n", reg)
	for _, v := range vars {
		w.p("\t\t%q: &%s,\n", v, v)
	}
	w.p("\t}\n}\n")
	w.imps["reflect"] = "gatehouse_reflect_"
	w.imps[g.cfg.WireImport] = "gatehouse_wire_"
	w.imps[g.cfg.JudgeImport] = "gatehouse_judge_"
	var out bytes.Buffer
	fmt.Fprintf(&out, "// Code generated by gatehouse_go_apart.go for the judge apart. DO NOT EDIT.\n\npackage %s\n\n", g.cfg.Name)
	out.WriteString(w.imports())
	out.Write(w.buf.Bytes())
	return os.WriteFile(g.cfg.StubFile, out.Bytes(), 0o600)
}

// ---------------------------------------------------------------- the server

func (g *gen) writeServer() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("writing the server: %v", r)
		}
	}()
	w := &writer{g: g, imps: map[string]string{}}
	var ownTypes []*types.TypeName
	var funcs, methods, vars []string
	g.tablesFor(g.objects())
	for _, obj := range g.objects() {
		if _, skipped := g.skipped[obj]; skipped {
			continue
		}
		switch o := obj.(type) {
		case *types.TypeName:
			if o.IsAlias() {
				continue
			}
			n := o.Type().(*types.Named)
			ownTypes = append(ownTypes, o)
			for i := 0; i < n.NumMethods(); i++ {
				m := n.Method(i)
				sig := m.Type().(*types.Signature)
				mx := o.Name() + "." + m.Name()
				if _, ptr := sig.Recv().Type().(*types.Pointer); ptr {
					mx = "(*" + o.Name() + ")." + m.Name()
				}
				methods = append(methods, fmt.Sprintf("%q: %s", mx, mx))
			}
		case *types.Func:
			funcs = append(funcs, fmt.Sprintf("%q: %s", o.Name(), o.Name()))
		case *types.Var:
			if o.Name() != "_" && g.mirrored(o) {
				vars = append(vars, fmt.Sprintf("%q: &%s", o.Name(), o.Name()))
			}
		}
	}
	w.proxies()
	w.p("// GatehouseServe_ serves the judge (gatehouse_go_wire_host.go).\nfunc GatehouseServe_() {\n\tgatehouse_wire_.Serve(&gatehouse_wire_.Registry{\n")
	w.tables("", ownTypes)
	w.p("\tFuncs: map[string]any{\n")
	for _, f := range funcs {
		w.p("\t\t%s,\n", f)
	}
	w.p("\t},\n\tMethods: map[string]any{\n")
	for _, m := range methods {
		w.p("\t\t%s,\n", m)
	}
	w.p("\t},\n\tVars: map[string]any{\n")
	for _, v := range vars {
		w.p("\t\t%s,\n", v)
	}
	w.p("\t},\n\t})\n}\n")
	if g.cfg.Name == "main" {
		w.p("\nfunc init() { GatehouseServe_() }\n")
	}
	w.imps["reflect"] = "gatehouse_reflect_"
	w.imps[g.cfg.WireImport] = "gatehouse_wire_"
	var out bytes.Buffer
	fmt.Fprintf(&out, "// Code generated by gatehouse_go_apart.go for the judge apart's host. DO NOT EDIT.\n\npackage %s\n\n", g.cfg.Name)
	out.WriteString(w.imports())
	out.Write(w.buf.Bytes())
	if err := os.WriteFile(g.cfg.ServerFile, out.Bytes(), 0o600); err != nil {
		return err
	}
	if g.cfg.Name != "main" && g.cfg.MainFile != "" {
		main := fmt.Sprintf("// Code generated by gatehouse_go_apart.go. DO NOT EDIT.\n\npackage main\n\nimport gatehouse_pkg_ %q\n\nfunc main() { gatehouse_pkg_.GatehouseServe_() }\n", g.cfg.ImportPath)
		return os.WriteFile(g.cfg.MainFile, []byte(main), 0o600)
	}
	return nil
}

// ---------------------------------------------------------------- the tests

// writeTest copies a hidden test file with Track(t) at the start of every
// function that takes a *testing.T, on the line of its brace.
func (g *gen) writeTest(path string, f *ast.File) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	testing := map[string]bool{}
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		if p != "testing" {
			continue
		}
		if im.Name == nil {
			testing["testing"] = true
		} else if im.Name.Name != "_" && im.Name.Name != "." {
			testing[im.Name.Name] = true
		}
	}
	type ins struct {
		at   int
		text string
	}
	var edits []ins
	visit := func(ft *ast.FuncType, body *ast.BlockStmt) {
		if body == nil || ft.Params == nil {
			return
		}
		for _, field := range ft.Params.List {
			star, ok := field.Type.(*ast.StarExpr)
			if !ok {
				continue
			}
			sel, ok := star.X.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "T" {
				continue
			}
			x, ok := sel.X.(*ast.Ident)
			if !ok || !testing[x.Name] {
				continue
			}
			for _, name := range field.Names {
				if name.Name != "_" {
					at := g.fset.Position(body.Lbrace).Offset + 1
					edits = append(edits, ins{at, " gatehouse_track_.Track(" + name.Name + ");"})
					return
				}
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			visit(n.Type, n.Body)
		case *ast.FuncLit:
			visit(n.Type, n.Body)
		}
		return true
	})
	if len(edits) > 0 {
		at := g.fset.Position(f.Name.End()).Offset
		edits = append(edits, ins{at, fmt.Sprintf("; import gatehouse_track_ %q", g.cfg.JudgeImport)})
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].at > edits[j].at })
	out := string(src)
	for _, e := range edits {
		out = out[:e.at] + e.text + out[e.at:]
	}
	return os.WriteFile(filepath.Join(g.cfg.TestsDir, filepath.Base(path)), []byte(out), 0o600)
}

// elements: the types a composite type is made of (a pointer's, slice's,
// array's or channel's element, a map's key and value, a signature's
// parameters and results, a struct's fields); nil for any other type.
func elements(t types.Type) []types.Type {
	switch t := t.(type) {
	case *types.Pointer:
		return []types.Type{t.Elem()}
	case *types.Slice:
		return []types.Type{t.Elem()}
	case *types.Array:
		return []types.Type{t.Elem()}
	case *types.Chan:
		return []types.Type{t.Elem()}
	case *types.Map:
		return []types.Type{t.Key(), t.Elem()}
	case *types.Signature:
		var out []types.Type
		for _, tup := range []*types.Tuple{t.Params(), t.Results()} {
			for i := 0; i < tup.Len(); i++ {
				out = append(out, tup.At(i).Type())
			}
		}
		return out
	case *types.Struct:
		out := make([]types.Type, t.NumFields())
		for i := range out {
			out[i] = t.Field(i).Type()
		}
		return out
	}
	return nil
}
