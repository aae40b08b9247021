//! `packet check`'s propositions on what the hidden tests cite: every hidden
//! test names the sentence of the brief it enforces, and every sentence it
//! names is in the brief.
//!
//! A hidden test that accuses a candidate must rest on something the
//! candidate was told, so a reviewer who doubts a finding can read why in
//! one place. Each hidden test cites the brief (`prompt.md`) in one of two
//! places:
//!
//! - its own text: a `brief:` quote in a Python test's docstring, or in the
//!   `//` comment lines right above (or opening the body of) a Go `func
//!   TestX` or a TypeScript `test("...")` / `it("...")`;
//! - the manifest: `[cites.<step id>]` maps a test-name pattern (a glob, as
//!   for `[proves]`) to one quote or a list of quotes.
//!
//! A quote is `brief: "..."` (or `“...”`, which may span lines) or, unquoted,
//! the rest of the line after `brief:`. It must occur in what the candidate
//! reads as the specification, `prompt.md` or a Markdown file of `starter/`
//! (token-bucket's sealed `TAKEHOME.md`), once both are normalised
//! ([`normalise`]: case, whitespace, Markdown emphasis and code marks, curly
//! quotes), and have at least [`MIN_WORDS`] words.
//!
//! Invariants: the hidden tests are the test files (`test_*.py`,
//! `*_test.py`, `*_test.go`, `*.test.ts`, `*.spec.ts`) a step lays from
//! `hidden/`, read as text (no candidate code, no sandbox); every problem
//! names the file and line (or the manifest table) and the test.

use std::collections::BTreeMap;

use crate::check::CheckItem;
use crate::manifest::{Cites, Manifest};
use crate::packet::Packet;

/// The fewest words a quote may have: "the" is no sentence.
pub const MIN_WORDS: usize = 3;

/// One hidden test found in a hidden file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HiddenTest {
    /// The packet path of the file (`hidden/...`).
    pub file: String,
    /// 1-based line of the definition.
    pub line: usize,
    pub name: String,
    /// The `brief:` quotes its own text carries, each with its line.
    pub quotes: Vec<(usize, String)>,
}

/// Lowercase, Markdown emphasis and code marks (`*`, `_`, `` ` ``) and
/// backslash escapes dropped, curly quotes straightened, whitespace
/// collapsed: a quote and the brief are compared in this form.
pub fn normalise(text: &str) -> String {
    let mapped: String = text
        .chars()
        .filter(|c| !matches!(c, '*' | '_' | '`' | '\\'))
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' => '\'',
            '\u{201c}' | '\u{201d}' => '"',
            '\u{2013}' | '\u{2014}' => '-',
            '\u{a0}' => ' ',
            c => c,
        })
        .flat_map(char::to_lowercase)
        .collect();
    mapped.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The `brief:` quotes in `lines` (a docstring or a comment block, already
/// stripped of comment marks), each with its index in `lines`.
fn quotes_in(lines: &[String]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        let Some(at) = line.find("brief:") else {
            i += 1;
            continue;
        };
        let rest = line[at + "brief:".len()..].trim_start();
        let close = match rest.chars().next() {
            Some('"') => Some('"'),
            Some('\u{201c}') => Some('\u{201d}'),
            _ => None,
        };
        match close {
            None => out.push((i, rest.trim_end().to_string())),
            Some(close) => {
                let open_len = rest.chars().next().map_or(0, char::len_utf8);
                let mut text = rest[open_len..].to_string();
                let start = i;
                loop {
                    if let Some(end) = text.find(close) {
                        text.truncate(end);
                        break;
                    }
                    i += 1;
                    match lines.get(i) {
                        Some(next) => {
                            text.push(' ');
                            text.push_str(next.trim());
                        }
                        // Never closed: the quote runs to the end.
                        None => break,
                    }
                }
                out.push((start, text));
            }
        }
        i += 1;
    }
    out
}

/// Whether a packet path names a hidden test file by its language's
/// convention.
pub fn is_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or_default();
    (name.starts_with("test_") && name.ends_with(".py"))
        || name.ends_with("_test.py")
        || name.ends_with("_test.go")
        || name.ends_with(".test.ts")
        || name.ends_with(".spec.ts")
}

/// The tests defined in one hidden file, with the quotes their own text
/// carries. `file` (a packet path) picks the language.
pub fn scan(file: &str, text: &str) -> Vec<HiddenTest> {
    let lines: Vec<&str> = text.lines().collect();
    if file.ends_with(".py") { scan_python(file, &lines) } else { scan_commented(file, &lines) }
}

fn scan_python(file: &str, lines: &[&str]) -> Vec<HiddenTest> {
    let def = regex::Regex::new(r"^(\s*)(?:async\s+)?def\s+(test\w*)\s*\(").expect("regex");
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(c) = def.captures(line) else { continue };
        let indent = c[1].len();
        let name = c[2].to_string();
        // The signature ends on the first line (from the def) whose code ends in ':'.
        let mut j = i;
        while j < lines.len() && !lines[j].split('#').next().unwrap_or("").trim_end().ends_with(':')
        {
            j += 1;
        }
        // The docstring: the first statement of the body, when it is a string.
        let mut k = j + 1;
        while k < lines.len() && lines[k].trim().is_empty() {
            k += 1;
        }
        let mut quotes = Vec::new();
        if let Some(first) = lines.get(k) {
            let body_indent = first.len() - first.trim_start().len();
            let t = first.trim_start().trim_start_matches(['r', 'R', 'u', 'U']);
            let delim = ["\"\"\"", "'''"].into_iter().find(|d| t.starts_with(d));
            if let (Some(d), true) = (delim, body_indent > indent) {
                let mut doc: Vec<String> = Vec::new();
                let mut rest = t[d.len()..].to_string();
                let mut at = k;
                loop {
                    if let Some(end) = rest.find(d) {
                        doc.push(rest[..end].to_string());
                        break;
                    }
                    doc.push(rest.clone());
                    at += 1;
                    match lines.get(at) {
                        Some(l) => rest = l.to_string(),
                        None => break,
                    }
                }
                quotes = quotes_in(&doc).into_iter().map(|(n, q)| (k + n + 1, q)).collect();
            }
        }
        out.push(HiddenTest { file: file.to_string(), line: i + 1, name, quotes });
    }
    out
}

/// Go (`func TestX(`) and TypeScript (`test("x"`, `it("x"`): the quotes
/// are in the `//` lines right above the definition or opening its body.
fn scan_commented(file: &str, lines: &[&str]) -> Vec<HiddenTest> {
    let go = regex::Regex::new(r"^func\s+(Test\w*)\s*\(").expect("regex");
    let ts = regex::Regex::new(r#"^\s*(?:test|it)(?:\.only|\.skip)?\s*\(\s*(["'`])(.*?)(["'`])"#)
        .expect("regex");
    let comment = |l: &str| l.trim_start().strip_prefix("//").map(|c| c.trim().to_string());
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let name = if file.ends_with(".go") {
            go.captures(line).map(|c| c[1].to_string())
        } else {
            ts.captures(line).filter(|c| c[1] == c[3]).map(|c| c[2].to_string())
        };
        let Some(name) = name else { continue };
        // Above: the contiguous comment lines ending right over the definition.
        let mut above = Vec::new();
        let mut j = i;
        while j > 0 {
            match comment(lines[j - 1]) {
                Some(c) => above.push((j - 1, c)),
                None => break,
            }
            j -= 1;
        }
        above.reverse();
        // Inside: the comment lines that open the body.
        let mut inside = Vec::new();
        let mut k = i + 1;
        while let Some(c) = lines.get(k).and_then(|l| comment(l)) {
            inside.push((k, c));
            k += 1;
        }
        let mut quotes = Vec::new();
        for block in [above, inside] {
            let text: Vec<String> = block.iter().map(|(_, c)| c.clone()).collect();
            quotes.extend(quotes_in(&text).into_iter().map(|(n, q)| (block[n].0 + 1, q)));
        }
        out.push(HiddenTest { file: file.to_string(), line: i + 1, name, quotes });
    }
    out
}

fn glob_matches(pattern: &str, name: &str) -> bool {
    name == pattern || globset::Glob::new(pattern).is_ok_and(|g| g.compile_matcher().is_match(name))
}

/// What is wrong with the citations: (tests that cite nothing, quotes the
/// brief does not hold). `files` are the hidden test files per step, as
/// `(step, packet path, text)`; `manifest_text` locates a manifest quote.
pub fn problems(
    briefs: &[String],
    files: &[(String, String, String)],
    cites: &BTreeMap<String, BTreeMap<String, Cites>>,
    manifest_text: &str,
) -> (Vec<String>, Vec<String>) {
    let briefs: Vec<String> = briefs.iter().map(|b| normalise(b)).collect();
    let mut uncited = Vec::new();
    let mut wrong = Vec::new();
    let judge = |q: &str| -> Option<String> {
        let n = normalise(q.trim().trim_matches('"'));
        let words = n.split_whitespace().count();
        if words < MIN_WORDS {
            Some(format!(
                "is {words} word{}; quote at least {MIN_WORDS} words of the sentence",
                if words == 1 { "" } else { "s" }
            ))
        } else if !briefs.iter().any(|b| b.contains(&n)) {
            Some("does not occur in prompt.md or a Markdown file of starter/ (compared with case, whitespace and Markdown emphasis normalised)".into())
        } else {
            None
        }
    };
    let mut used: BTreeMap<(String, String), bool> = BTreeMap::new();
    for (step, file, text) in files {
        let table = cites.get(step);
        for t in scan(file, text) {
            let patterns: Vec<(&String, &Cites)> = table
                .map(|m| m.iter().filter(|(p, _)| glob_matches(p, &t.name)).collect())
                .unwrap_or_default();
            for (p, _) in &patterns {
                used.insert((step.clone(), (*p).clone()), true);
            }
            if t.quotes.is_empty() && patterns.is_empty() {
                uncited.push(format!(
                    "{file}:{}: {} names no sentence of the brief: add `brief: \"...\"` (a quote of prompt.md) to its {}, or a pattern to [cites.{step}]",
                    t.line,
                    t.name,
                    if file.ends_with(".py") { "docstring" } else { "comment" }
                ));
            }
            for (line, q) in &t.quotes {
                if let Some(why) = judge(q) {
                    wrong.push(format!("{file}:{line}: {}'s quote {q:?} {why}", t.name));
                }
            }
        }
    }
    for (step, table) in cites {
        for (pattern, quotes) in table {
            let line = manifest_text
                .lines()
                .position(|l| l.trim_start().starts_with(&format!("{pattern:?}")))
                .map_or(String::new(), |n| format!(":{}", n + 1));
            if !used.contains_key(&(step.clone(), pattern.clone())) {
                wrong.push(format!(
                    "packet.toml{line}: [cites.{step}] pattern {pattern:?} names no hidden test of step {step}"
                ));
            }
            for q in quotes.all() {
                if let Some(why) = judge(q) {
                    wrong.push(format!(
                        "packet.toml{line}: [cites.{step}] {pattern:?}: quote {q:?} {why}"
                    ));
                }
            }
        }
    }
    (uncited, wrong)
}

/// The hidden test files each step lays, as `(step, packet path, text)`.
pub fn hidden_files(packet: &Packet) -> Result<Vec<(String, String, String)>, String> {
    let files = packet.files().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for step in &packet.manifest.steps {
        for lay in &step.lay {
            let (from, to) = lay.paths();
            if !from.starts_with("hidden/") || !is_test_file(&to) || !is_test_file(&from) {
                continue;
            }
            if !seen.insert((step.id.clone(), from.clone())) {
                continue;
            }
            let text = files.read_to_string(&from).map_err(|e| format!("{from}: {e}"))?;
            out.push((step.id.clone(), from, text));
        }
    }
    Ok(out)
}

/// The two propositions for `packet`.
pub fn check(packet: &Packet) -> Vec<CheckItem> {
    let item = |name: &str, ok: bool, detail: String| CheckItem {
        name: name.into(),
        ok,
        detail,
        warning: false,
    };
    let files = match hidden_files(packet) {
        Ok(f) => f,
        Err(e) => return vec![item("the hidden tests cite the brief", false, e)],
    };
    // What the candidate reads as the specification: the prompt, and the
    // starter's Markdown files.
    let mut briefs = vec![packet.prompt().unwrap_or_default()];
    let starter = packet.starter_dir();
    for rel in crate::tree::list_paths(&starter) {
        if rel.ends_with(".md")
            && let Ok(text) =
                packet.files().and_then(|f| f.read_to_string(&format!("starter/{rel}")))
        {
            briefs.push(text);
        }
    }
    let m: &Manifest = &packet.manifest;
    let manifest_text =
        packet.files().and_then(|f| f.read_to_string("packet.toml")).unwrap_or_default();
    let (uncited, wrong) = problems(&briefs, &files, &m.cites, &manifest_text);
    let tests: usize = files.iter().map(|(_, f, t)| scan(f, t).len()).sum();
    vec![
        item(
            "every hidden test names the sentence of the brief it enforces",
            uncited.is_empty(),
            if uncited.is_empty() {
                format!("{tests} hidden tests in {} files", files.len())
            } else {
                uncited.join("; ")
            },
        ),
        item(
            "every quote the hidden tests cite occurs in the brief",
            wrong.is_empty(),
            if wrong.is_empty() { "prompt.md holds every quote".into() } else { wrong.join("; ") },
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMPT: &str = "# Brief\n\nEvery path the diff names must be `src_path` or\n`test_path`, else **unsafe-path**.\n\nIt exits **0** when done.\n";

    fn run(file: &str, text: &str, cites: &str) -> (Vec<String>, Vec<String>) {
        let table: BTreeMap<String, BTreeMap<String, Cites>> = toml::from_str(cites).unwrap();
        let files = vec![("hidden".to_string(), file.to_string(), text.to_string())];
        problems(
            &[PROMPT.to_string(), "A second brief: the TAKEHOME file.".into()],
            &files,
            &table,
            cites,
        )
    }

    #[test]
    fn normalising_drops_emphasis_case_and_line_breaks() {
        assert_eq!(normalise("Every **path**\n  the `src_path`"), "every path the srcpath");
        assert_eq!(normalise("“quoted” – it’s"), "\"quoted\" - it's");
    }

    #[test]
    fn a_python_test_that_quotes_the_brief_is_quiet() {
        let text = "def test_a(tmp_path):\n    \"\"\"brief: \"Every path the diff names must be src_path or test_path, else unsafe-path\"\n\n    more\"\"\"\n    assert 1\n";
        assert_eq!(run("hidden/test_x.py", text, ""), (vec![], vec![]));
        // A starter's Markdown specification counts as the brief too.
        let text = "def test_a():\n    \"\"\"brief: a second brief\"\"\"\n";
        assert_eq!(run("hidden/test_x.py", text, ""), (vec![], vec![]));
    }

    #[test]
    fn a_quote_may_span_lines_and_be_unquoted() {
        let text = "class TestA:\n    def test_b(\n        self,\n    ) -> None:\n        '''Why.\n\n        brief: \"Every path the diff\n        names must be\"\n        '''\n\n\ndef test_c():\n    \"\"\"brief: it exits 0 when done\"\"\"\n";
        let tests = scan("hidden/test_x.py", text);
        assert_eq!(tests.len(), 2);
        assert_eq!(tests[0].quotes, vec![(7, "Every path the diff names must be".to_string())]);
        assert_eq!(run("hidden/test_x.py", text, ""), (vec![], vec![]));
    }

    #[test]
    fn a_python_test_that_names_nothing_fails_with_its_line() {
        let text = "import x\n\n\ndef test_a():\n    # brief: a comment is not the docstring\n    assert 1\n";
        let (uncited, wrong) = run("hidden/test_x.py", text, "");
        assert_eq!(uncited.len(), 1, "{uncited:?}");
        assert!(
            uncited[0].starts_with("hidden/test_x.py:4: test_a names no sentence"),
            "{uncited:?}"
        );
        assert!(wrong.is_empty());
    }

    #[test]
    fn a_quote_the_brief_does_not_hold_fails_with_its_line() {
        let text = "def test_a():\n    \"\"\"Why.\n\n    brief: \"it exits 1 when done\"\"\"\"\n";
        let (uncited, wrong) = run("hidden/test_x.py", text, "");
        assert!(uncited.is_empty());
        assert_eq!(wrong.len(), 1, "{wrong:?}");
        assert!(
            wrong[0].starts_with("hidden/test_x.py:4: test_a's quote \"it exits 1 when done\" does not occur in prompt.md"),
            "{wrong:?}"
        );
        let short = "def test_a():\n    \"\"\"brief: exits\"\"\"\n";
        let (_, wrong) = run("hidden/test_x.py", short, "");
        assert!(wrong[0].contains("is 1 word; quote at least 3 words"), "{wrong:?}");
    }

    #[test]
    fn the_manifest_may_cite_for_a_pattern_of_tests() {
        let text = "def test_hidden_escape_a():\n    assert 1\n\n\ndef test_hidden_escape_b():\n    assert 1\n";
        let cites = "[hidden]\n\"test_hidden_escape_*\" = \"else unsafe-path\"\n";
        let (uncited, wrong) = run("hidden/test_x.py", text, cites);
        assert!(uncited.is_empty(), "{uncited:?}");
        assert_eq!(wrong, vec!["packet.toml:2: [cites.hidden] \"test_hidden_escape_*\": quote \"else unsafe-path\" is 2 words; quote at least 3 words of the sentence".to_string()]);
        let cites = "[hidden]\n\"test_hidden_escape_*\" = [\"test_path, else unsafe-path\", \"It exits 0 when done\"]\n\"test_nothing_*\" = \"It exits 0 when done\"\n";
        let (uncited, wrong) = run("hidden/test_x.py", text, cites);
        assert!(uncited.is_empty());
        assert_eq!(wrong, vec!["packet.toml:3: [cites.hidden] pattern \"test_nothing_*\" names no hidden test of step hidden".to_string()]);
    }

    #[test]
    fn go_and_typescript_tests_cite_in_comments() {
        let go = "package x\n\n// brief: it exits 0 when done\nfunc TestDone(t *testing.T) {\n}\n\nfunc TestNone(t *testing.T) {\n\t// nothing here\n}\n\nfunc helper() {}\n";
        let (uncited, wrong) = run("hidden/x_test.go", go, "");
        assert_eq!(uncited.len(), 1, "{uncited:?}");
        assert!(
            uncited[0].starts_with("hidden/x_test.go:7: TestNone names no sentence"),
            "{uncited:?}"
        );
        assert!(wrong.is_empty(), "{wrong:?}");
        let ts = "describe(\"bucket\", () => {\n  test(\"refills\", () => {\n    // brief: \"it exits 2 when done\"\n  });\n  it('waits', () => {});\n});\n";
        let (uncited, wrong) = run("hidden/b.test.ts", ts, "");
        assert_eq!(uncited.len(), 1);
        assert!(
            uncited[0].starts_with("hidden/b.test.ts:5: waits names no sentence"),
            "{uncited:?}"
        );
        assert_eq!(wrong.len(), 1);
        assert!(wrong[0].starts_with("hidden/b.test.ts:3: refills's quote"), "{wrong:?}");
    }
}
