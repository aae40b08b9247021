//! Reading pytest's console output: whether a claimed log has the shape of
//! a real run, which nodes it reports failed, and which nodes it names that
//! a starter does not define.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

use crate::manifest::LogExpect;

static HEADER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^=+ test session starts =+\s*$").expect("static regex"));
static SUMMARY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^=+ (.*\b(?:passed|failed|error|errors|skipped|no tests ran)\b.*) in [0-9.]+s(?: \([0-9:]+\))? =+\s*$").expect("static regex")
});
static COUNT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(\d+) (passed|failed|errors|error|skipped)\b").expect("static regex")
});
static FAILED_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^FAILED \S+::\S+").expect("static regex"));
static NODE_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^(?:FAILED|ERROR) (\S+::\S+)").expect("static regex"));
static DEF: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^\s*(?:async\s+)?def\s+(\w+)\s*[(:]").expect("static regex"));
static CLASS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^\s*class\s+(\w+)\s*[(:]").expect("static regex"));
// `path::name`, or `path::Class::name` for a test method.
static NODE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"([\w/.-]+\.py)((?:::\w+)+)").expect("static regex"));

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
        COUNT
            .captures_iter(&line)
            .find(|c| &c[2] == word)
            .map(|c| c[1].parse().unwrap_or(0))
            .unwrap_or(0)
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
            if count("passed") == 0
                || count("failed") > 0
                || count("error") > 0
                || count("errors") > 0
            {
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

/// Test nodes named in a log that the starter does not define. Each
/// starter file is read and scanned once, however many nodes a (claimed,
/// so untrusted) log names.
pub(crate) fn unknown_nodes(text: &str, starter: &Path) -> Vec<String> {
    // Per file: the functions and the classes it defines (None: no such file).
    type Names = Option<(BTreeSet<String>, BTreeSet<String>)>;
    let mut defined: BTreeMap<String, Names> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    let mut problems = Vec::new();
    for c in NODE.captures_iter(text) {
        let (file, rest) = (c[1].to_string(), c[2].to_string());
        if !seen.insert((file.clone(), rest.clone())) {
            continue;
        }
        let parts: Vec<&str> = rest.split("::").filter(|p| !p.is_empty()).collect();
        let Some((name, classes)) = parts.split_last() else { continue };
        let names = defined.entry(file.clone()).or_insert_with(|| {
            let src = crate::tree::is_safe_relative(&file)
                .then(|| fs::read_to_string(starter.join(&file)).ok())
                .flatten()?;
            let all = |re: &Regex| {
                re.captures_iter(&src).map(|c| c[1].to_string()).collect::<BTreeSet<String>>()
            };
            Some((all(&DEF), all(&CLASS)))
        });
        let known = names.as_ref().is_some_and(|(defs, kinds)| {
            defs.contains(*name) && classes.iter().all(|k| kinds.contains(*k))
        });
        if !known {
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

    #[test]
    fn nodes_the_starter_does_not_define() {
        let starter = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            starter.path().join("test_x.py"),
            "def test_a():\n    pass\n\nclass TestK:\n    async def test_m(self):\n        pass\n",
        )
        .expect("write");
        let log = "test_x.py::test_a PASSED\ntest_x.py::TestK::test_m PASSED\nFAILED test_x.py::test_zz\nother.py::test_a\n../up.py::test_a\ntest_x.py::TestZ::test_m\n";
        let got = unknown_nodes(log, starter.path());
        assert_eq!(
            got,
            [
                "names test_x.py::test_zz, which the starter does not define",
                "names other.py::test_a, which the starter does not define",
                "names ../up.py::test_a, which the starter does not define",
                "names test_x.py::TestZ::test_m, which the starter does not define",
            ],
            "{got:?}"
        );
        assert!(
            unknown_nodes("test_x.py::test_a\ntest_x.py::TestK::test_m\n", starter.path())
                .is_empty()
        );
    }
}
