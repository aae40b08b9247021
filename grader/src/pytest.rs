//! Reading pytest's console output: whether a claimed log has the shape of
//! a real run, which nodes it reports failed, and which nodes it names that
//! a starter does not define.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

use crate::manifest::LogExpect;

static HEADER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?m)^=+ test session starts =+\s*$").expect("static regex"));
static SUMMARY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^=+ (.*\b(?:passed|failed|error|errors|skipped|no tests ran)\b.*) in [0-9.]+s(?: \([0-9:]+\))? =+\s*$").expect("static regex")
});
static COUNT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(\d+) (passed|failed|errors|error|skipped)\b").expect("static regex"));
static FAILED_LINE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?m)^FAILED \S+::\S+").expect("static regex"));
static NODE_LINE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?m)^(?:FAILED|ERROR) (\S+::\S+)").expect("static regex"));
// `path::name`, or `path::Class::name` for a test method.
static NODE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"([\w/.-]+\.py)((?:::\w+)+)").expect("static regex"));

/// What is wrong with a claimed pytest log; empty when it has the shape of a
/// real run with the expected result.
pub fn pytest_log_problems(text: &str, expect: LogExpect) -> Vec<String> {
    let mut p = Vec::new();
    if !HEADER.is_match(text) {
        p.push("no `test session starts` header".to_string());
    }
    let Some(line) = SUMMARY.captures_iter(text).last().map(|c| c[1].to_string()) else {
        p.push("no closing summary line (`=== N failed in Xs ===`)".to_string());
        return p;
    };
    // The first count given for each word, as `(\d+) word\b` found it.
    let count = |word: &str| -> u64 {
        COUNT.captures_iter(&line).find(|c| &c[2] == word).map(|c| c[1].parse().unwrap_or(0)).unwrap_or(0)
    };
    match expect {
        LogExpect::Failed => {
            if count("failed") == 0 {
                p.push(format!("the summary `{line}` reports no failure"));
            }
            if !FAILED_LINE.is_match(text) {
                p.push("no `FAILED path::test` line".to_string());
            }
        }
        LogExpect::Passed => {
            if count("passed") == 0 || count("failed") > 0 || count("error") > 0 || count("errors") > 0 {
                p.push(format!("the summary `{line}` is not a clean pass"));
            }
        }
    }
    p
}

/// The test nodes a pytest log reports as failed or errored (`FAILED
/// path::name` and `ERROR path::name` lines of the short summary).
pub fn failed_nodes(text: &str) -> BTreeSet<String> {
    NODE_LINE.captures_iter(text).map(|c| c[1].to_string()).collect()
}

/// Test nodes named in a log that the starter does not define.
pub(crate) fn unknown_nodes(text: &str, starter: &Path) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut problems = Vec::new();
    for c in NODE.captures_iter(text) {
        let (file, rest) = (c[1].to_string(), c[2].to_string());
        if !seen.insert((file.clone(), rest.clone())) {
            continue;
        }
        let parts: Vec<&str> = rest.split("::").filter(|p| !p.is_empty()).collect();
        let Some((name, classes)) = parts.split_last() else { continue };
        let defines = |src: &str, keyword: &str, name: &str| {
            Regex::new(&format!(r"(?m)^\s*{keyword}\s+{}\s*[(:]", regex::escape(name))).expect("escaped").is_match(src)
        };
        let defined = crate::tree::is_safe_relative(&file)
            && fs::read_to_string(starter.join(&file))
                .map(|src| defines(&src, "(?:async\\s+)?def", name) && classes.iter().all(|k| defines(&src, "class", k)))
                .unwrap_or(false);
        if !defined {
            problems.push(format!("names {file}{rest}, which the starter does not define"));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_log(text: &str, expect: LogExpect, want: &[&str]) {
        let got = pytest_log_problems(text, expect);
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (g, w) in got.iter().zip(want) {
            assert!(g.contains(w), "{g:?} lacks {w:?}");
        }
    }

    const RED: &str = "============================= test session starts ==============================\nplatform linux -- Python 3.11.7, pytest-9.2.0\ncollected 1 item\n\ntest_invoices.py F\n\n=========================== short test summary info ============================\nFAILED test_invoices.py::test_total - assert 1700 == 1500\n============================== 1 failed in 0.03s ===============================\n";

    #[test]
    fn pytest_logs() {
        check_log(RED, LogExpect::Failed, &[]);
        check_log("1 failed\n", LogExpect::Failed, &["header", "summary"]);
        check_log(&RED.replace("FAILED test", "PASSED test"), LogExpect::Failed, &["FAILED"]);
        check_log(&RED.replace("1 failed", "1 passed"), LogExpect::Failed, &["reports no failure"]);
        check_log(&RED.replace("1 failed", "1 passed"), LogExpect::Passed, &[]);
        check_log(RED, LogExpect::Passed, &["not a clean pass"]);
    }
}
