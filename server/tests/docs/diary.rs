//! Figures without a diary: user-facing docs name no commit of the
//! repository (a measurement says what was measured, where and when;
//! which tree it was is git's to remember), and the two entry points stay
//! short: the README a newcomer reads in five minutes, ARCHITECTURE.md a
//! map. The working notes under `notes/` are the lead's, not checked here.

use crate::Doc;
use crate::markdown;

/// The longest the README may grow, in lines.
pub const README_LINES: usize = 150;
/// The longest ARCHITECTURE.md may grow, in lines.
pub const ARCHITECTURE_LINES: usize = 400;

/// Words that could be abbreviated commit names: 7 to 40 hex digits with
/// a letter and a digit among them, with their byte offsets.
pub fn hex_words(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_alphanumeric() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        let word = &text[start..i];
        let hex = word.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        let mixed = word.bytes().any(|b| b.is_ascii_digit())
            && word.bytes().any(|b| b.is_ascii_alphabetic());
        if hex && mixed && (7..=40).contains(&word.len()) {
            out.push((start, word));
        }
    }
    out
}

/// Whether the doc at `path` is one the diary rule reads.
pub fn user_facing(path: &str) -> bool {
    !path.starts_with("notes/")
}

pub fn check(docs: &[Doc], is_commit: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    for doc in docs.iter().filter(|d| user_facing(&d.path)) {
        for (at, word) in hex_words(&doc.text) {
            if is_commit(word) {
                out.push(format!(
                    "{}:{}: {word} names a commit: say what was measured, on what machine and when, and leave which tree it was to git",
                    doc.path,
                    markdown::line_of(&doc.text, at)
                ));
            }
        }
        let limit = match doc.path.as_str() {
            "README.md" => README_LINES,
            "ARCHITECTURE.md" => ARCHITECTURE_LINES,
            _ => continue,
        };
        let lines = doc.text.lines().count();
        if lines > limit {
            out.push(format!(
                "{}: {lines} lines, over its {limit}: move the detail into docs/ (or, for ARCHITECTURE.md, into doc comments beside the code)",
                doc.path
            ));
        }
    }
    out
}

#[test]
fn a_commit_name_or_an_overgrown_entry_point_is_named() {
    let commits = ["873bb4e", "e23040c9f1"];
    let is_commit = |w: &str| commits.contains(&w);
    let check = |files: &[(&str, &str)], expect: &[&str]| {
        let (docs, _) = crate::fixture(files);
        assert_eq!(check(&docs, &is_commit), expect, "{files:?}");
    };
    // Quiet: digests, hex that names no commit, words, the lead's notes.
    check(
        &[
            (
                "docs/benchmarks.md",
                "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, 1deadbeef, decade, cafe123",
            ),
            ("notes/i47-docs.md", "measured on 873bb4e"),
            ("README.md", &"line\n".repeat(README_LINES)),
        ],
        &[],
    );
    check(
        &[
            (
                "docs/tests.md",
                "# Tests\n\nThe clean clone of 873bb4e took 1,518.8 s (e23040c9f1 before).\n",
            ),
            ("README.md", &"line\n".repeat(README_LINES + 1)),
            ("ARCHITECTURE.md", &"line\n".repeat(ARCHITECTURE_LINES + 1)),
        ],
        &[
            "docs/tests.md:3: 873bb4e names a commit: say what was measured, on what machine and when, and leave which tree it was to git",
            "docs/tests.md:3: e23040c9f1 names a commit: say what was measured, on what machine and when, and leave which tree it was to git",
            "README.md: 151 lines, over its 150: move the detail into docs/ (or, for ARCHITECTURE.md, into doc comments beside the code)",
            "ARCHITECTURE.md: 401 lines, over its 400: move the detail into docs/ (or, for ARCHITECTURE.md, into doc comments beside the code)",
        ],
    );
}

#[test]
fn the_repository_docs_keep_no_diary() {
    let repo = crate::repo();
    let problems = check(&repo.docs, &|w| repo.commits.contains(w));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(repo.docs.iter().any(|d| d.path == "README.md"), "the README was not read");
}
