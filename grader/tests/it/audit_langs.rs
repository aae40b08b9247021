//! `packet audit` for TypeScript and Go (issue #45): the rules of each
//! language read by its own parser (the grader's TypeScript compiler;
//! `go/ast` and `go/types`), data-driven (a definition in, the exact set of
//! mutants out), validation refusing each kind of invalid mutant, and both
//! languages' packets audited end to end through their hidden steps.

use std::collections::BTreeMap;
use std::path::PathBuf;

use grader::audit::parser::{Context, Language, Parser};
use grader::audit::{Audit, Outcome, Proposal};
use grader::packet::Packet;

use crate::grader;

/// A mutant as its change: the family (the id's last part) and the lines
/// it changes, `-old` and `+new`, between the definition and the mutant.
fn change(id: &str, old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail =
        a[head..].iter().rev().zip(b[head..].iter().rev()).take_while(|(x, y)| x == y).count();
    let mut out = vec![id.rsplit('-').next().unwrap_or_default().to_string() + ":"];
    out.extend(a[head..a.len() - tail].iter().map(|l| format!("-{}", l.trim())));
    out.extend(b[head..b.len() - tail].iter().map(|l| format!("+{}", l.trim())));
    out.join(" ")
}

/// Every rule mutant of `source`, by definition, as its changes (sorted),
/// and each one applied back through the parser's validation.
fn rule_changes(parser: &Parser, source: &str, path: &str) -> BTreeMap<String, Vec<String>> {
    let defs = parser.defs(source, path).unwrap();
    let lines: Vec<&str> = source.lines().collect();
    let text = |name: &str| {
        let d = defs.iter().find(|d| d.name == name).unwrap();
        lines[d.line - 1..d.end_line].join("\n") + "\n"
    };
    let mutants = parser.rules(source, path, &Context::default(), &[], 0).unwrap();
    let applied = parser.apply(source, path, &Context::default(), &mutants).unwrap();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (m, a) in mutants.iter().zip(applied) {
        let name = m.id.strip_prefix("rule-").unwrap().rsplitn(3, '-').nth(2).unwrap().to_string();
        let a = a.unwrap_or_else(|e| panic!("rule mutant {} is invalid: {e}", m.id));
        assert_eq!(grader::diff::apply_diff(source, &a.diff).unwrap(), a.source, "{}", m.id);
        assert_eq!(a.diff.matches("\n@@").count(), 1, "{}: one change: {}", m.id, a.diff);
        out.entry(name.clone()).or_default().push(change(&m.id, &text(&name), &m.code));
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

fn expect(cases: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
    cases
        .iter()
        .map(|(name, changes)| {
            let mut v: Vec<String> = changes.iter().map(|s| s.to_string()).collect();
            v.sort();
            (name.to_string(), v)
        })
        .collect()
}

/// One definition per rule (and a few where a rule must stay quiet).
const TS_RULES: &str = r#"export interface Clock {
  now(): number;
}

export function arith(a: number, b: number): number {
  let t = a * b;
  t -= 1;
  return t;
}

export function label(a: string, b: string): string {
  return a + b;
}

export function cmp(a: number, b: number): boolean {
  return a < b;
}

export function same(a: string, b: string): boolean {
  return a === "x" && b !== "";
}

export function guard(a: number): number {
  if (a > 2) {
    throw new RangeError(`bad ${a}`);
  }
  return a;
}

export class Counter {
  private hits = 0;

  hit(): void {
    this.hits++;
  }

  get(): number {
    return this.hits;
  }
}

export const twice = (n: number): number => n * 2;
"#;

#[test]
fn typescript_rules_are_read_by_the_compiler_and_give_exactly_these_mutants() {
    let parser = Parser::new(Language::TypeScript, grader().sandbox()).unwrap();
    let defs = parser.defs(TS_RULES, "src/m.ts").unwrap();
    let listed: Vec<(&str, &str, usize, usize)> =
        defs.iter().map(|d| (d.name.as_str(), d.kind.as_str(), d.line, d.end_line)).collect();
    assert_eq!(
        listed,
        [
            ("arith", "function", 5, 9),
            ("label", "function", 11, 13),
            ("cmp", "function", 15, 17),
            ("same", "function", 19, 21),
            ("guard", "function", 23, 28),
            ("Counter", "class", 30, 40),
            ("twice", "variable", 42, 42),
        ],
        "an interface has no behaviour: it is no definition"
    );
    assert_eq!(defs[5].signature, "export class Counter: hit(): void; get(): number");
    assert_eq!(
        rule_changes(&parser, TS_RULES, "src/m.ts"),
        expect(&[
            (
                "arith",
                &[
                    "arithmetic: -let t = a * b; +let t = a / b;",
                    "arithmetic: -t -= 1; +t += 1;",
                    "constant: -t -= 1; +t -= 2;",
                    "statement: -t -= 1;",
                    "return: -return t; +return 0;",
                    "return: +return 0;",
                ],
            ),
            // `+` of strings is left alone; a string returned becomes "".
            ("label", &["return: -return a + b; +return \"\";"]),
            (
                "cmp",
                &[
                    "boundary: -return a < b; +return a <= b;",
                    "comparison: -return a < b; +return a > b;",
                    "return: -return a < b; +return false;",
                ],
            ),
            (
                "same",
                &[
                    "comparison: -return a === \"x\" && b !== \"\"; +return a !== \"x\" && b !== \"\";",
                    "comparison: -return a === \"x\" && b !== \"\"; +return a === \"x\" && b === \"\";",
                    "condition: -return a === \"x\" && b !== \"\"; +return a === \"x\" || b !== \"\";",
                    "constant: -return a === \"x\" && b !== \"\"; +return a === \"\" && b !== \"\";",
                    "constant: -return a === \"x\" && b !== \"\"; +return a === \"x\" && b !== \"gatehouse\";",
                    "return: -return a === \"x\" && b !== \"\"; +return false;",
                ],
            ),
            (
                "guard",
                &[
                    "boundary: -if (a > 2) { +if (a >= 2) {",
                    "comparison: -if (a > 2) { +if (a < 2) {",
                    "condition: -if (a > 2) { +if (false) {",
                    "condition: -if (a > 2) { +if (true) {",
                    "constant: -if (a > 2) { +if (a > 3) {",
                    "negated: -if (a > 2) { +if (!(a > 2)) {",
                    "return: +return 0;",
                    "return: -return a; +return 0;",
                    "statement: -if (a > 2) { -throw new RangeError(`bad ${a}`); -}",
                    "statement: -throw new RangeError(`bad ${a}`);",
                ],
            ),
            (
                "Counter",
                &[
                    "arithmetic: -this.hits++; +this.hits--;",
                    "constant: -private hits = 0; +private hits = 1;",
                    "return: -return this.hits; +return 0;",
                    "return: +return;",
                    "statement: -this.hits++;",
                ],
            ),
            (
                "twice",
                &[
                    "arithmetic: -export const twice = (n: number): number => n * 2; +export const twice = (n: number): number => n / 2;",
                    "constant: -export const twice = (n: number): number => n * 2; +export const twice = (n: number): number => n * 3;",
                ],
            ),
        ])
    );
}

const GO_RULES: &str = r#"package m

import (
	"errors"
	"time"
)

const (
	limit = 3
	pause = 200 * time.Millisecond
)

type Box struct{ n int }

var errFull = errors.New("full")

func (b *Box) Add(k int) error {
	if b.n+k > limit {
		return errFull
	}
	b.n += k
	return nil
}

func label(a, b string) string {
	return a + b
}

func ok(s string, on bool) bool {
	return s == "go" || !on
}

func loop(n int) int {
	total := 0
	for i := 0; i < n; i++ {
		total++
	}
	return total
}
"#;

#[test]
fn go_rules_are_read_by_go_ast_and_give_exactly_these_mutants() {
    let parser = Parser::new(Language::Go, grader().sandbox()).unwrap();
    let defs = parser.defs(GO_RULES, "m.go").unwrap();
    let listed: Vec<(&str, &str, usize, usize)> =
        defs.iter().map(|d| (d.name.as_str(), d.kind.as_str(), d.line, d.end_line)).collect();
    assert_eq!(
        listed,
        [
            ("limit", "const", 8, 11),
            ("errFull", "var", 15, 15),
            ("Box.Add", "method", 17, 23),
            ("label", "function", 25, 27),
            ("ok", "function", 29, 31),
            ("loop", "function", 33, 39),
        ],
        "a type has no behaviour: it is no definition"
    );
    assert_eq!(defs[2].signature, "func (b *Box) Add(k int) error");
    assert_eq!(defs[0].signature, "const (limit; pause)");
    assert_eq!(
        rule_changes(&parser, GO_RULES, "m.go"),
        expect(&[
            (
                "limit",
                &[
                    "constant: -limit = 3 +limit = 4",
                    "constant: -pause = 200 * time.Millisecond +pause = 201 * time.Millisecond",
                    "arithmetic: -pause = 200 * time.Millisecond +pause = 200 / time.Millisecond",
                ],
            ),
            (
                "Box.Add",
                &[
                    "arithmetic: -if b.n+k > limit { +if b.n-k > limit {",
                    "arithmetic: -b.n += k +b.n -= k",
                    "boundary: -if b.n+k > limit { +if b.n+k >= limit {",
                    "comparison: -if b.n+k > limit { +if b.n+k < limit {",
                    "condition: -if b.n+k > limit { +if false {",
                    "condition: -if b.n+k > limit { +if true {",
                    "negated: -if b.n+k > limit { +if !(b.n+k > limit) {",
                    "return: +return nil",
                    "return: -return errFull +return nil",
                    "statement: -b.n += k",
                    "statement: -if b.n+k > limit { -return errFull -}",
                ],
            ),
            // `+` of strings is left alone; a string returned becomes "".
            ("label", &["return: -return a + b +return \"\""]),
            (
                "ok",
                &[
                    "comparison: -return s == \"go\" || !on +return s != \"go\" || !on",
                    "condition: -return s == \"go\" || !on +return s == \"go\" && !on",
                    "constant: -return s == \"go\" || !on +return s == \"\" || !on",
                    "negated: -return s == \"go\" || !on +return s == \"go\" || on",
                    "return: -return s == \"go\" || !on +return false",
                ],
            ),
            (
                "loop",
                &[
                    "arithmetic: -total++ +total--",
                    "arithmetic: -for i := 0; i < n; i++ { +for i := 0; i < n; i-- {",
                    "boundary: -for i := 0; i < n; i++ { +for i := 0; i <= n; i++ {",
                    "comparison: -for i := 0; i < n; i++ { +for i := 0; i > n; i++ {",
                    "constant: -total := 0 +total := 1",
                    "constant: -for i := 0; i < n; i++ { +for i := 1; i < n; i++ {",
                    "negated: -for i := 0; i < n; i++ { +for i := 0; !(i < n); i++ {",
                    "return: +return 0",
                    "return: -return total +return 0",
                    "statement: -total++",
                ],
            ),
        ])
    );
}

/// Each kind of invalid proposal, and a valid one, through `apply`.
fn check_validation(
    lang: Language,
    source: &str,
    path: &str,
    cases: &[(&str, Result<&str, &str>)],
) {
    let parser = Parser::new(lang, grader().sandbox()).unwrap();
    let proposals: Vec<Proposal> = cases
        .iter()
        .enumerate()
        .map(|(i, (code, _))| Proposal {
            id: format!("p{i}"),
            code: code.to_string(),
            fault: "f".into(),
        })
        .collect();
    let got = parser.apply(source, path, &Context::default(), &proposals).unwrap();
    for ((code, want), got) in cases.iter().zip(got) {
        match (got, want) {
            (Ok(a), Ok(line)) => {
                assert!(a.diff.contains(line), "{code}: {}", a.diff);
                assert!(a.diff.starts_with(&format!("--- a/{path}\n+++ b/{path}\n")), "{}", a.diff);
                assert_eq!(grader::diff::apply_diff(source, &a.diff).unwrap(), a.source);
            }
            (Err(why), Err(want)) => assert!(why.contains(want), "{code}: {why}"),
            (got, want) => panic!("{code}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn typescript_validation_refuses_every_invalid_mutant_by_name() {
    let f = |body: &str| format!("export function guard(a: number): number {{\n{body}}}\n");
    check_validation(
        Language::TypeScript,
        TS_RULES,
        "src/m.ts",
        &[
            (&f("  return a + 1;\n"), Ok("+  return a + 1;")),
            (&f("  return (\n"), Err("the replacement does not parse")),
            (
                &f("  return b;\n"),
                Err("the mutated file does not compile: line 24: TS2304: Cannot find name 'b'"),
            ),
            (&f("  const x: string = a;\n  return a;\n"), Err("does not compile")),
            (
                "export function guard(a: number, b = 1): number {\n  return a;\n}\n",
                Err("changes the signature of 'guard'"),
            ),
            ("function guard(a: number): number {\n  return a;\n}\n", Err("changes the signature")),
            (
                "export function nope(): number {\n  return 1;\n}\n",
                Err("defines 'nope', which is not a top-level definition of src/m.ts"),
            ),
            ("export class guard {}\n", Err("turns 'guard' from a function into a class")),
            (
                "const a = 1;\nconst b = 2;\n",
                Err(
                    "not one function, class or variable definition (it holds VariableStatement, VariableStatement)",
                ),
            ),
            (
                "export class Counter {\n  private hits = 0;\n  hit(): void {}\n  get(): number { return 0; }\n  reset(): void {}\n}\n",
                Err("changes the signature of 'Counter'"),
            ),
            // A private member may change: it is not the class's surface.
            (
                "export class Counter {\n  private hits = 0;\n  private other = 1;\n  hit(): void {\n    this.hits += this.other;\n  }\n  get(): number {\n    return this.hits;\n  }\n}\n",
                Ok("+  private other = 1;"),
            ),
            (
                &f(
                    "  // the same code, spaced and commented otherwise\n  if (a>2) { throw new RangeError(`bad ${a}`); }\n  return a;\n",
                ),
                Err("identical to the sample's 'guard' after normalisation"),
            ),
            ("", Err("the replacement is empty")),
        ],
    );
}

#[test]
fn go_validation_refuses_every_invalid_mutant_by_name() {
    let f = |body: &str| format!("func label(a, b string) string {{\n{body}}}\n");
    check_validation(
        Language::Go,
        GO_RULES,
        "m.go",
        &[
            (&f("\treturn b + a\n"), Ok("+\treturn b + a")),
            (&f("\treturn (\n"), Err("the replacement does not parse")),
            (
                &f("\treturn c\n"),
                Err("the mutated file does not compile: line 26: undeclared name: c"),
            ),
            (
                &f("\tx := 1\n\treturn a\n"),
                Err("does not compile: line 26: x declared but not used"),
            ),
            (
                "func label(a, b string, c int) string {\n\treturn a\n}\n",
                Err("changes the signature of 'label'"),
            ),
            (
                "func (b *Box) label(a string) string {\n\treturn a\n}\n",
                Err("defines 'Box.label', which is not a top-level definition of m.go"),
            ),
            (
                "import \"fmt\"\n\nfunc label(a, b string) string {\n\treturn fmt.Sprint(a)\n}\n",
                Err(
                    "not one function, method, const or var declaration (it holds import, func label)",
                ),
            ),
            ("var label = 1\n", Err("turns 'label' from a function into a var")),
            ("const (\n\tlimit = 4\n)\n", Err("changes the signature of 'limit'")),
            ("const (\n\tlimit = 4\n\tpause = 200 * time.Millisecond\n)\n", Ok("+\tlimit = 4")),
            (
                "const (\n\tlimit = 3\n\tpause = 200 * time.Millisecond\n)\n",
                Err("identical to the sample's 'limit' after normalisation"),
            ),
            (
                &f("\t// the same, commented\n\treturn a+b\n"),
                Err("identical to the sample's 'label'"),
            ),
            ("", Err("the replacement is empty")),
        ],
    );
}

fn packet(slug: &str) -> Packet {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../packets").join(slug);
    Packet::load(&dir).unwrap_or_else(|e| panic!("loading {slug}: {e}"))
}

/// `packet audit` of a built-in packet with a few rule mutants and two
/// proposals of a model's: every mutant judged through the hidden steps,
/// the canary noticed, diffs that apply to the sample.
fn audit_end_to_end(
    slug: &str,
    target: &str,
    functions: &[&str],
    valid: &str,
    invalid: (&str, &str),
) {
    let p = packet(slug);
    let audit = Audit::prepare(grader(), &p, None, &[]).unwrap_or_else(|e| panic!("{slug}: {e}"));
    assert_eq!(audit.target, target);
    assert!(audit.warnings.is_empty(), "the canary must be noticed: {:?}", audit.warnings);
    let functions: Vec<String> = functions.iter().map(|s| s.to_string()).collect();
    let mut proposals = audit.rule_proposals(&functions, 3).unwrap();
    assert!(!proposals.is_empty());
    proposals.push(Proposal {
        id: "model-1".into(),
        code: valid.into(),
        fault: "a model's".into(),
    });
    proposals.push(Proposal {
        id: "model-2".into(),
        code: invalid.0.into(),
        fault: "broken".into(),
    });
    let report = audit.report("rules", audit.judge(&proposals).unwrap(), Vec::new(), Vec::new());
    let last = report.mutants.last().unwrap();
    assert_eq!(last.outcome, Outcome::Invalid, "{last:?}");
    assert!(last.reason.contains(invalid.1), "{}", last.reason);
    for m in &report.mutants[..report.mutants.len() - 1] {
        assert_ne!(m.outcome, Outcome::Invalid, "{m:?}");
        let mutated = grader::diff::apply_diff(&audit.source, &m.diff).unwrap();
        assert_ne!(mutated, audit.source);
        if m.outcome == Outcome::Killed {
            assert!(
                !m.killed_by.is_empty()
                    || m.reason.contains("exits non-zero")
                    || m.reason.contains("before the hidden tests passed"),
                "{m:?}"
            );
        }
    }
    let model = &report.mutants[report.mutants.len() - 2];
    assert_eq!(model.outcome, Outcome::Killed, "{model:?}");
    assert!(report.counts.killed >= 1, "{:?}", report.counts);
}

#[test]
fn a_typescript_packet_is_audited_end_to_end() {
    audit_end_to_end(
        "token-bucket-ts",
        "src/bucket.ts",
        &["TokenBucket"],
        "export class TokenBucket {\n  private readonly rate: number;\n  private readonly capacity: number;\n  private tokens: number;\n\n  constructor(ratePerSec: number, capacity: number, private readonly clock: Clock) {\n    this.rate = checked(\"ratePerSec\", ratePerSec);\n    this.capacity = checked(\"capacity\", capacity, false);\n    this.tokens = this.capacity;\n  }\n\n  allow(n = 1): boolean {\n    checked(\"n\", n);\n    if (n <= this.tokens) {\n      this.tokens -= n;\n      return true;\n    }\n    return false;\n  }\n}\n",
        (
            "export class TokenBucket {\n  allow(n = 1): boolean {\n    return tru;\n  }\n}\n",
            "changes the signature of 'TokenBucket'",
        ),
    );
}

#[test]
fn a_go_packet_is_audited_end_to_end() {
    audit_end_to_end(
        "retry-ticket-go",
        "client.go",
        &["FetchJSON"],
        "func FetchJSON(ctx context.Context, url string) (map[string]any, error) {\n\treturn fetchOnce(ctx, url)\n}\n",
        (
            "func FetchJSON(ctx context.Context, url string) (map[string]any, error) {\n\treturn fetchOnce(ctx, uri)\n}\n",
            "does not compile: line 38: undeclared name: uri",
        ),
    );
}
