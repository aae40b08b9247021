//! Unified diffs: a strict parser (the paths a diff touches), splitting a
//! multi-file diff, and an exact applier (no fuzz, no offsets). A leaf.
//!
//! Mutants and variants use the same applier, so a packet stores a near-copy of
//! its sample as the few lines that differ; one hunk-header grammar serves the
//! parser and the applier.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

/// A hunk header: old start, old length, new start, new length.
static HUNK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@").expect("static regex")
});

/// A line shortened to 160 characters for evidence and error messages.
pub(crate) fn excerpt(line: &str) -> String {
    let t = line.trim();
    if t.chars().count() > 160 {
        format!("{}…", t.chars().take(160).collect::<String>())
    } else {
        t.to_string()
    }
}

/// Parses a unified diff strictly and returns the paths it touches (old and
/// new sides, without `a/` `b/` prefixes, `/dev/null` left out).
pub fn parse_unified_diff(text: &str) -> Result<Vec<String>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut paths = BTreeSet::new();
    let mut files = 0;
    let mut i = 0;
    let strip = |p: &str| -> Option<String> {
        let p = p.split('\t').next().unwrap_or(p).trim();
        if p == "/dev/null" {
            return None;
        }
        let p = p.strip_prefix("a/").or_else(|| p.strip_prefix("b/")).unwrap_or(p);
        Some(p.to_string())
    };
    while i < lines.len() {
        let line = lines[i];
        if let Some(old) = line.strip_prefix("--- ") {
            let new = lines.get(i + 1).and_then(|l| l.strip_prefix("+++ ")).ok_or_else(|| {
                format!("line {}: `---` header without a `+++` line after it", i + 1)
            })?;
            paths.extend(strip(old));
            paths.extend(strip(new));
            files += 1;
            i += 2;
            let mut hunks = 0;
            while let Some(c) = lines.get(i).and_then(|l| HUNK.captures(l)) {
                let count =
                    |g: usize| c.get(g).map_or(Ok(1), |m| m.as_str().parse::<usize>()).unwrap_or(0);
                let (mut old_left, mut new_left) = (count(2), count(4));
                i += 1;
                while old_left > 0 || new_left > 0 {
                    let body = lines
                        .get(i)
                        .ok_or_else(|| format!("line {}: the hunk ends early", i + 1))?;
                    match body.chars().next() {
                        Some(' ') | None => {
                            old_left = old_left.checked_sub(1).ok_or_else(|| {
                                format!("line {}: hunk longer than its header says", i + 1)
                            })?;
                            new_left = new_left.checked_sub(1).ok_or_else(|| {
                                format!("line {}: hunk longer than its header says", i + 1)
                            })?;
                        }
                        Some('-') => {
                            old_left = old_left
                                .checked_sub(1)
                                .ok_or_else(|| format!("line {}: too many removed lines", i + 1))?
                        }
                        Some('+') => {
                            new_left = new_left
                                .checked_sub(1)
                                .ok_or_else(|| format!("line {}: too many added lines", i + 1))?
                        }
                        Some('\\') => {}
                        Some(_) => {
                            return Err(format!(
                                "line {}: `{}` is not a hunk line",
                                i + 1,
                                excerpt(body)
                            ));
                        }
                    }
                    i += 1;
                }
                while lines.get(i).is_some_and(|l| l.starts_with('\\')) {
                    i += 1;
                }
                hunks += 1;
            }
            if hunks == 0 {
                return Err(format!("line {}: a file header with no `@@` hunk", i));
            }
            continue;
        }
        let header_like = line.starts_with("diff ")
            || line.starts_with("index ")
            || line.starts_with("new file mode")
            || line.starts_with("deleted file mode")
            || line.starts_with("old mode")
            || line.starts_with("new mode")
            || line.starts_with("similarity index")
            || line.starts_with("rename from")
            || line.starts_with("rename to")
            || line.trim().is_empty();
        if let Some(rest) = line.strip_prefix("diff --git ") {
            for part in rest.split_whitespace() {
                paths.extend(strip(part));
            }
        } else if !header_like {
            if files == 0 {
                return Err(format!(
                    "line {}: `{}` is not part of a unified diff",
                    i + 1,
                    excerpt(line)
                ));
            }
            return Err(format!("line {}: unexpected `{}` between files", i + 1, excerpt(line)));
        }
        i += 1;
    }
    if files == 0 {
        return Err("no `---`/`+++` file header".to_string());
    }
    Ok(paths.into_iter().collect())
}

/// Splits a multi-file unified diff into (path, single-file diff) parts,
/// the path taken from each `+++` line without its `b/` prefix.
pub fn split_diff(text: &str) -> Result<Vec<(String, String)>, String> {
    parse_unified_diff(text)?;
    let mut parts: Vec<(String, String)> = Vec::new();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].starts_with("--- ") && lines.get(i + 1).is_some_and(|l| l.starts_with("+++ ")) {
            let new = lines[i + 1][4..].split('\t').next().unwrap_or_default().trim();
            let path = new.strip_prefix("b/").unwrap_or(new).to_string();
            if !crate::tree::is_safe_relative(&path) {
                return Err(format!("`{new}` is not a relative path inside the tree"));
            }
            parts.push((path, format!("{}{}", lines[i], lines[i + 1])));
            i += 2;
        } else {
            if let Some((_, part)) = parts.last_mut()
                && !lines[i].starts_with("diff ")
            {
                part.push_str(lines[i]);
            }
            i += 1;
        }
    }
    Ok(parts)
}

/// Applies a single-file unified diff to `original`, requiring every
/// context and removed line to match exactly (no fuzz, no offsets).
pub fn apply_diff(original: &str, diff: &str) -> Result<String, String> {
    parse_unified_diff(diff)?;
    let old: Vec<&str> = original.split_inclusive('\n').collect();
    let mut out = String::new();
    let mut at = 0usize;
    let lines: Vec<&str> = diff.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let Some(c) = HUNK.captures(lines[i]) else {
            i += 1;
            continue;
        };
        let start: usize = c[1].parse().map_err(|_| format!("bad hunk header `{}`", lines[i]))?;
        let len: usize = c
            .get(2)
            .map_or(Ok(1), |m| m.as_str().parse())
            .map_err(|_| format!("bad hunk header `{}`", lines[i]))?;
        // A hunk of zero old lines inserts after line `start`.
        let begin = if len == 0 { start } else { start.saturating_sub(1) };
        if begin < at || begin > old.len() {
            return Err(format!("hunk `{}` is out of order or past the end", lines[i]));
        }
        out.extend(old[at..begin].iter().copied());
        at = begin;
        i += 1;
        while i < lines.len() && !lines[i].starts_with("@@") && !lines[i].starts_with("--- ") {
            let line = lines[i];
            // The first character, not byte: a line the parser lets through
            // between hunks (`\u{3000}` is blank to `trim`) may start with a
            // multi-byte one.
            let (kind, text) = line.split_at(line.chars().next().map_or(0, char::len_utf8));
            match kind {
                " " | "-" => {
                    let have = old
                        .get(at)
                        .map(|l| l.trim_end_matches('\n'))
                        .ok_or("the diff runs past the end of the file")?;
                    if have != text {
                        return Err(format!("line {}: expected `{text}`, found `{have}`", at + 1));
                    }
                    if kind == " " {
                        out.push_str(old[at]);
                    }
                    at += 1;
                }
                "+" => {
                    out.push_str(text);
                    out.push('\n');
                }
                "" if line.is_empty() => {
                    // An empty context line whose leading space was trimmed.
                    let have = old
                        .get(at)
                        .map(|l| l.trim_end_matches('\n'))
                        .ok_or("the diff runs past the end of the file")?;
                    if !have.is_empty() {
                        return Err(format!(
                            "line {}: expected an empty line, found `{have}`",
                            at + 1
                        ));
                    }
                    out.push_str(old[at]);
                    at += 1;
                }
                _ => {}
            }
            i += 1;
        }
    }
    out.extend(old[at..].iter().copied());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(original: &str, diff: &str, expect: Result<&str, &str>) {
        match (apply_diff(original, diff), expect) {
            (Ok(got), Ok(want)) => assert_eq!(got, want),
            (Err(e), Err(want)) => assert!(e.contains(want), "{e:?} lacks {want:?}"),
            (got, want) => panic!("got {got:?}, want {want:?}"),
        }
    }

    const SRC: &str =
        "def total(rows):\n    s = 0\n    for r in rows:\n        s += r\n\n    return s\n";

    #[test]
    fn applies_exact_hunks() {
        let diff = "--- a/t.py\n+++ b/t.py\n@@ -3,2 +3,2 @@\n     for r in rows:\n-        s += r\n+        s += abs(r)\n";
        check(
            SRC,
            diff,
            Ok(
                "def total(rows):\n    s = 0\n    for r in rows:\n        s += abs(r)\n\n    return s\n",
            ),
        );
        // Two hunks, one across an empty context line, one inserting.
        let diff = "--- a/t.py\n+++ b/t.py\n@@ -1 +1,2 @@\n def total(rows):\n+    rows = list(rows)\n@@ -4,3 +5,3 @@\n         s += r\n\n-    return s\n+    return -s\n";
        check(
            SRC,
            diff,
            Ok(
                "def total(rows):\n    rows = list(rows)\n    s = 0\n    for r in rows:\n        s += r\n\n    return -s\n",
            ),
        );
    }

    #[test]
    fn refuses_what_does_not_match() {
        let diff = "--- a/t.py\n+++ b/t.py\n@@ -2 +2 @@\n-    s = 1\n+    s = 2\n";
        check(SRC, diff, Err("line 2: expected `    s = 1`, found `    s = 0`"));
        check(SRC, "just prose\n", Err("not part of a unified diff"));
        let past = "--- a/t.py\n+++ b/t.py\n@@ -9 +9 @@\n-x\n+y\n";
        check(SRC, past, Err("past the end"));
    }

    #[test]
    fn a_multibyte_line_between_hunks_is_not_a_crash() {
        // Found by tests/it/fuzz.rs: this panicked slicing inside `\u{3000}`.
        check("\n", "--- a/a\n+++ b/a\n@@ -1,0 +1,0 @@\n\u{3000}", Ok("\n"));
        check(
            "x\n",
            "--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+\u{e9}\n\u{a0}\u{2003}\n",
            Ok("\u{e9}\n"),
        );
    }

    #[test]
    fn splits_multi_file_diffs() {
        let diff = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n--- /dev/null\n+++ b/new/b.py\n@@ -0,0 +1 @@\n+z\n";
        let parts = split_diff(diff).unwrap();
        let paths: Vec<&str> = parts.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["a.py", "new/b.py"]);
        assert_eq!(apply_diff("x\n", &parts[0].1).unwrap(), "y\n");
        assert_eq!(apply_diff("", &parts[1].1).unwrap(), "z\n");
        assert!(
            split_diff("--- a/x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n")
                .unwrap_err()
                .contains("not a relative path")
        );
    }

    fn check_diff(text: &str, expect: Result<&[&str], &str>) {
        match (parse_unified_diff(text), expect) {
            (Ok(paths), Ok(want)) => assert_eq!(paths, want),
            (Err(e), Err(want)) => assert!(e.contains(want), "{e:?} lacks {want:?}"),
            (got, want) => panic!("got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn diffs() {
        let ok = "--- a/taxlib/compute.py\n+++ b/taxlib/compute.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2\n";
        check_diff(ok, Ok(&["taxlib/compute.py"]));
        let git = format!(
            "diff --git a/x.py b/x.py\nindex 1..2 100644\n{}",
            ok.replace("taxlib/compute.py", "x.py")
        );
        check_diff(&git, Ok(&["x.py"]));
        check_diff("I changed the rounding to half up.\n", Err("not part of a unified diff"));
        check_diff(
            "```diff\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n```\n",
            Err("not part of a unified diff"),
        );
        check_diff("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n", Err("hunk ends early"));
        check_diff("--- a/x\n+++ b/x\n", Err("no `@@` hunk"));
        check_diff("", Err("no `---`/`+++` file header"));
        check_diff("--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+x = 1\n", Ok(&["new.py"]));
        check_diff(
            "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n\\ No newline at end of file\n",
            Ok(&["x"]),
        );
    }
}
