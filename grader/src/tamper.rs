//! The platform-wide failure `evidence-tampering`: a submission that
//! interferes with the grader's own evidence. Reported for every packet,
//! whether or not its manifest lists the id, with provenance `replayed`.
//!
//! Two kinds of signs:
//! - static, read from the submitted files ([`scan`]): a file that shadows
//!   a module the test runner itself loads (`pytest.py`, `_pytest/`,
//!   `sitecustomize.py`, `*.pth`, a standard-library module the runner
//!   imports, ...), code outside the candidate's own tests that reaches into
//!   the runner's internals or the grader's result files, and a
//!   `conftest.py` hook that rewrites test outcomes;
//! - dynamic, from the trusted runner's channel (`trusted::RunnerResult::
//!   cross_check`): results that disagree with themselves.
//!
//! Precision comes first: every static rule names a thing an honest
//! submission has no reason to contain. Tests that `import pytest`, use
//! fixtures, `monkeypatch`, `tmp_path` or `unittest.mock` draw nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

/// The failure id, fixed by `PACKETS.md`.
pub const ID: &str = "evidence-tampering";
pub const TITLE: &str =
    "Evidence tampering: the submission interferes with the grader's own evidence";

/// Modules of the test tooling itself; a submission file of this name
/// anywhere is a stand-in for the runner.
const TOOL_MODULES: &[&str] = &[
    "pytest",
    "_pytest",
    "pluggy",
    "unittest",
    "sitecustomize",
    "usercustomize",
    "gatehouse_harness",
    "gatehouse_runner",
    "py",
    "iniconfig",
];

/// Largest file the scan reads.
const MAX_SCAN_BYTES: u64 = 1 << 20;

struct Rule {
    re: Regex,
    what: &'static str,
    /// Applies inside the candidate's own tests too.
    in_tests: bool,
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    let r = |re: &str, what: &'static str, in_tests: bool| Rule {
        re: Regex::new(re).expect("static regex"),
        what,
        in_tests,
    };
    vec![
        r(
            r"\.gatehouse\b|gatehouse_runner|GATEHOUSE_NONCE",
            "refers to the grader's own folder, runner or nonce",
            true,
        ),
        r(
            r"/proc/self/fd|/proc/\d+/fd|os\.write\(\s*3\s*,|os\.fdopen\(\s*3\b",
            "writes to the grader's result channel",
            true,
        ),
        r(r"\b_pytest\b|\bpluggy\b", "reaches into the test framework's internals", false),
        r(
            r"\bpytest\.hookimpl\b|\bdef\s+pytest_[a-z_]+\s*\(",
            "installs test-runner hooks outside the candidate's own tests",
            false,
        ),
        r(
            r"junit(?:xml|_xml|\.xml)|\.xml['\x22]\s*,\s*['\x22][wa]",
            "rewrites the test runner's result files",
            false,
        ),
        r(
            r"\bunittest\.(?:TestResult|TextTestResult|TextTestRunner)\.\w+\s*=|\bunittest\.main\s*=",
            "rewrites the unittest runner's results",
            false,
        ),
        r(
            r#"sys\.modules\[\s*['"](?:pytest|_pytest|unittest)"#,
            "replaces the test runner's modules",
            false,
        ),
        r(
            r"\bgc\.get_(?:objects|referrers|referents)\b",
            "walks the interpreter's objects (the runner's memory)",
            false,
        ),
    ]
});

/// A `conftest.py` hook that changes test outcomes after the fact.
static OUTCOME_HOOKS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\bdef\s+(pytest_(?:runtest_makereport|runtest_logreport|report_teststatus|runtest_protocol|pyfunc_call|sessionfinish|collectreport|terminal_summary))\s*\(").expect("static regex")
});
static EXIT_AT_EXIT: LazyLock<(Regex, Regex)> = LazyLock::new(|| {
    (
        Regex::new(r"\batexit\.register\b|@atexit\.register").expect("static regex"),
        Regex::new(r"\bos\._exit\s*\(").expect("static regex"),
    )
});

/// Whether `path` is one of the candidate's own test files.
pub fn is_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let in_test_dir = path.split('/').rev().skip(1).any(|d| d == "tests" || d == "test");
    name == "conftest.py"
        || (name.starts_with("test_") && name.ends_with(".py"))
        || name.ends_with("_test.py")
        || in_test_dir
}

/// The static signs in the submitted files `changed` (paths relative to
/// `workspace`: added or changed against the starter, platform files left
/// out). `runner_modules` are the top-level modules the trusted runner
/// loads, from the environment probe; a file at the workspace's top that
/// shares such a name would shadow it in a plain `python -m pytest`.
pub fn scan(
    workspace: &Path,
    changed: &BTreeSet<String>,
    runner_modules: &BTreeSet<String>,
) -> Vec<String> {
    let mut signs = Vec::new();
    for path in changed {
        let parts: Vec<&str> = path.split('/').collect();
        let name = parts.last().copied().unwrap_or_default();
        let module = name.strip_suffix(".py").unwrap_or(name);
        if name.ends_with(".pth") {
            signs.push(format!("{path}: a `.pth` file runs code when the interpreter starts"));
            continue;
        }
        if name == "entry_points.txt"
            && parts.len() >= 2
            && (parts[parts.len() - 2].ends_with(".dist-info")
                || parts[parts.len() - 2].ends_with(".egg-info"))
        {
            if let Some(text) = read_small(&workspace.join(path))
                && let Some(plugins) = pytest_plugins(&text)
            {
                signs.push(format!("{path}: packaging metadata declaring the pytest plugin(s) {plugins}, which pytest would load into every run of the tests (grading runs never autoload plugins)"));
            }
            continue;
        }
        // A package directory of a tool's name, anywhere.
        if let Some(dir) =
            parts[..parts.len().saturating_sub(1)].iter().find(|d| TOOL_MODULES.contains(d))
            && name.ends_with(".py")
        {
            signs.push(format!("{path}: a `{dir}` package shadows the test runner's own module"));
            continue;
        }
        if name.ends_with(".py") && TOOL_MODULES.contains(&module) {
            signs.push(format!("{path}: shadows the test runner's own module `{module}`"));
            continue;
        }
        if parts.len() == 1
            && name.ends_with(".py")
            && runner_modules.contains(module)
            && !TOOL_MODULES.contains(&module)
        {
            signs.push(format!("{path}: shadows the standard-library module `{module}` that the test runner imports"));
            continue;
        }
        if parts.len() == 2 && name == "__init__.py" && runner_modules.contains(parts[0]) {
            signs.push(format!("{path}: the package `{}` shadows a standard-library module the test runner imports", parts[0]));
            continue;
        }
        if !name.ends_with(".py") {
            continue;
        }
        let Some(text) = read_small(&workspace.join(path)) else { continue };
        signs.extend(scan_source(path, &text));
    }
    signs
}

/// The entries of an `entry_points.txt`'s `[pytest11]` section, or `None`
/// when it has none.
pub fn pytest_plugins(text: &str) -> Option<String> {
    let mut in_section = false;
    let mut names = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            in_section = t.trim_matches(|c| c == '[' || c == ']').trim() == "pytest11";
            continue;
        }
        if in_section && !t.is_empty() && !t.starts_with('#') && !t.starts_with(';') {
            names.push(format!("`{}`", t.chars().take(80).collect::<String>()));
        }
    }
    (!names.is_empty()).then(|| names.join(", "))
}

/// The signs in one Python source file.
pub fn scan_source(path: &str, text: &str) -> Vec<String> {
    let mut signs = Vec::new();
    let test = is_test_file(path);
    let code: Vec<(usize, &str)> =
        text.lines().enumerate().map(|(i, l)| (i + 1, strip_comment(l))).collect();
    for rule in RULES.iter().filter(|r| r.in_tests || !test) {
        if let Some((n, line)) = code.iter().find(|(_, l)| rule.re.is_match(l)) {
            signs.push(format!(
                "{path}:{n}: {} (`{}`)",
                rule.what,
                line.trim().chars().take(100).collect::<String>()
            ));
        }
    }
    if path.rsplit('/').next() == Some("conftest.py")
        && let Some((n, caps)) =
            code.iter().find_map(|(n, l)| OUTCOME_HOOKS.captures(l).map(|c| (*n, c)))
    {
        signs.push(format!(
            "{path}:{n}: the hook `{}` rewrites test outcomes after the tests ran",
            &caps[1]
        ));
    }
    let (atexit, exit) = &*EXIT_AT_EXIT;
    if !test {
        let at = code.iter().find(|(_, l)| atexit.is_match(l));
        let ex = code.iter().find(|(_, l)| exit.is_match(l));
        if let (Some((a, _)), Some((e, _))) = (at, ex) {
            signs.push(format!("{path}:{a}: registers an exit hook and ends the process with os._exit (line {e}): the run would end before the runner reports"));
        }
    }
    signs
}

fn strip_comment(line: &str) -> &str {
    // Good enough for the rules above: a `#` outside a string starts a
    // comment; a `#` inside a string only shortens what is matched.
    let t = line.trim_start();
    if t.starts_with('#') { "" } else { line }
}

fn read_small(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_SCAN_BYTES {
        return None;
    }
    std::fs::read(path).ok().map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The evidence of one finding: static signs, then each run's.
pub fn evidence(static_signs: Vec<String>, runs: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    let mut out = static_signs;
    for (run, signs) in runs {
        for s in signs {
            out.push(format!("{run}: {s}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(path: &str, text: &str, expect: &str) {
        let signs = scan_source(path, text).join(" | ");
        if expect.is_empty() {
            assert!(signs.is_empty(), "{path}: expected nothing, got {signs}");
        } else {
            assert!(signs.contains(expect), "{path}: expected {expect:?} in {signs:?}");
        }
    }

    #[test]
    fn honest_code_and_tests_are_quiet() {
        check(
            "test_bucket.py",
            "import pytest\nfrom unittest import mock\n\n@pytest.fixture\ndef clock(monkeypatch, tmp_path):\n    return 1\n\ndef test_x(clock):\n    with pytest.raises(ValueError):\n        raise ValueError\n",
            "",
        );
        check(
            "tests/helpers.py",
            "import pytest\nfrom _pytest.monkeypatch import MonkeyPatch\n",
            "",
        );
        check(
            "conftest.py",
            "import pytest\n\n@pytest.fixture\ndef srv():\n    yield 1\n\ndef pytest_configure(config):\n    config.addinivalue_line('markers', 'slow')\n",
            "",
        );
        check("server.py", "import os\npid = os.fork()\nif pid == 0:\n    os._exit(0)\n", "");
        check("bucket.py", "# writes nothing to .gatehouse\nclass TokenBucket:\n    pass\n", "");
        check("report.py", "import xml.etree.ElementTree as ET\n", "");
    }

    #[test]
    fn reaching_into_the_runner_fires() {
        check(
            "bucket.py",
            "import atexit, os\natexit.register(lambda: os._exit(0))\n",
            "registers an exit hook",
        );
        check(
            "bucket.py",
            "open('.gatehouse/hidden.xml', 'w').write('<testsuite/>')\n",
            "grader's own folder",
        );
        check("bucket.py", "import _pytest.junitxml\n", "framework's internals");
        check(
            "bucket.py",
            "import sys\nsys.modules['pytest'] = None\n",
            "replaces the test runner's modules",
        );
        check(
            "helper.py",
            "import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    yield\n",
            "installs test-runner hooks",
        );
        check("test_mine.py", "import os\nos.write(3, b'{}')\n", "result channel");
        check(
            "conftest.py",
            "def pytest_runtest_makereport(item, call):\n    pass\n",
            "rewrites test outcomes",
        );
        check(
            "bucket.py",
            "import unittest\nunittest.TextTestResult.wasSuccessful = lambda self: True\n",
            "unittest runner's results",
        );
    }

    #[test]
    fn shadowing_files_fire_and_ordinary_names_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let runner: BTreeSet<String> =
            ["json", "tokenize", "token", "os"].iter().map(|s| s.to_string()).collect();
        let paths = |ps: &[&str]| ps.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let signs = |ps: &[&str]| scan(dir.path(), &paths(ps), &runner).join(" | ");
        assert!(signs(&["pytest.py"]).contains("shadows the test runner's own module `pytest`"));
        assert!(signs(&["pytest/__init__.py"]).contains("`pytest` package"));
        assert!(signs(&["_pytest/main.py"]).contains("`_pytest` package"));
        assert!(signs(&["sitecustomize.py"]).contains("sitecustomize"));
        assert!(signs(&["lib/evil.pth"]).contains(".pth"));
        std::fs::create_dir_all(dir.path().join("x-1.0.dist-info")).unwrap();
        std::fs::write(
            dir.path().join("x-1.0.dist-info/entry_points.txt"),
            "[console_scripts]\nx = x:main\n\n[pytest11]\nquiet = quiet_plugin\n",
        )
        .unwrap();
        assert!(
            signs(&["x-1.0.dist-info/entry_points.txt"])
                .contains("declaring the pytest plugin(s) `quiet = quiet_plugin`")
        );
        std::fs::create_dir_all(dir.path().join("y.egg-info")).unwrap();
        std::fs::write(
            dir.path().join("y.egg-info/entry_points.txt"),
            "[console_scripts]\ny = y:main\n",
        )
        .unwrap();
        assert_eq!(signs(&["y.egg-info/entry_points.txt"]), "");
        assert!(signs(&["unittest.py"]).contains("unittest"));
        assert!(signs(&["json.py"]).contains("standard-library module `json`"));
        assert!(signs(&["token/__init__.py"]).contains("package `token`"));
        // Names the runner does not load, or below the top, are fine.
        assert_eq!(
            signs(&[
                "bucket.py",
                "test_bucket.py",
                "NOTES.md",
                "test/test_x.py",
                "tests/conftest.py",
                "pkg/json.py",
                "calendar.py"
            ]),
            ""
        );
    }

    #[test]
    fn test_files_are_recognised() {
        for p in ["test_x.py", "x_test.py", "conftest.py", "tests/helpers.py", "a/test/b.py"] {
            assert!(is_test_file(p), "{p}");
        }
        for p in ["bucket.py", "testing.py", "contest.py", "src/tests.py"] {
            assert!(!is_test_file(p), "{p}");
        }
    }
}
