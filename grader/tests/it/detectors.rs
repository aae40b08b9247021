//! Every detector kind of `packets/FORMAT.md`, through the real pipeline:
//! `Grader::for_host()`, real sandbox runs, `Grader::grade_zip`.
//!
//! Data-driven: the fixture packet `tests/fixtures/detect-demo` has one
//! `[[failure]]` per detector case. Each case lays a few files over the
//! packet's sample (a clean submission), zips the result, grades it and
//! compares the exact set of finding ids. Every grading replays the packet's
//! two steps, its detector script and its mutant, so cases are grouped: one
//! submission often makes several detectors fire (or stay quiet) at once.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use grader::evidence::Provenance;
use grader::grade::{GradeError, GradeOptions, Grader, Scorecard};
use grader::manifest::TIME_BASE;
use grader::packet::Packet;
use grader::tree::copy_path;

/// One grader per test binary: probing the host and the interpreter happens
/// once, and the grader is shared by every test thread.
pub fn grader() -> &'static Grader {
    crate::grader()
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// The `detect-demo` packet, loaded once.
pub fn demo() -> &'static Packet {
    static PACKET: OnceLock<Packet> = OnceLock::new();
    PACKET.get_or_init(|| {
        Packet::load(&fixture("detect-demo")).unwrap_or_else(|e| panic!("loading detect-demo: {e}"))
    })
}

/// File content that removes the path from the submission instead.
pub const REMOVE: &str = "\u{0}remove\u{0}";

/// Zip entry times of the sample, in seconds after `TIME_BASE`: the red log
/// comes before the green one.
const SAMPLE_TIMES: &[(&str, i64)] = &[("artifacts/red.log", 0), ("artifacts/green.log", 60)];

/// Writes the sample of `packet` overlaid by `files` into `dir`.
pub fn write_submission(packet: &Packet, dir: &Path, files: &[(&str, &str)]) {
    copy_path(&packet.sample_dir(), dir).expect("copying the sample");
    for (path, text) in files {
        let target = dir.join(path);
        if *text == REMOVE {
            fs::remove_file(&target).unwrap_or_else(|e| panic!("removing {path}: {e}"));
        } else {
            fs::create_dir_all(target.parent().expect("a parent")).expect("creating folders");
            fs::write(&target, text).unwrap_or_else(|e| panic!("writing {path}: {e}"));
        }
    }
}

/// Zips the sample overlaid by `files` with `times` (seconds after
/// `TIME_BASE`, over the sample's), with `grader::ingest::write_zip_from_dir`.
/// Returns the temp dir holding it and the zip's path.
pub fn zip_submission(
    packet: &Packet,
    files: &[(&str, &str)],
    times: &[(&str, i64)],
) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("submission");
    write_submission(packet, &dir, files);
    let mut offsets: BTreeMap<String, i64> =
        SAMPLE_TIMES.iter().map(|(p, t)| (p.to_string(), *t)).collect();
    offsets.extend(times.iter().map(|(p, t)| (p.to_string(), *t)));
    let absolute: BTreeMap<String, i64> =
        offsets.into_iter().map(|(p, t)| (p, TIME_BASE + t)).collect();
    let zip = tmp.path().join("submission.zip");
    grader::ingest::write_zip_from_dir(&dir, &zip, &absolute, TIME_BASE)
        .expect("zipping the submission");
    (tmp, zip)
}

pub fn grade_with(
    packet: &Packet,
    files: &[(&str, &str)],
    times: &[(&str, i64)],
    opts: &GradeOptions,
) -> Result<Scorecard, GradeError> {
    let (_tmp, zip) = zip_submission(packet, files, times);
    grader().grade_zip(packet, &zip, opts)
}

fn render(card: &Scorecard) -> String {
    card.findings
        .iter()
        .map(|f| format!("  {} ({:?}): {}\n", f.id, f.provenance, f.evidence.join(" | ")))
        .collect()
}

/// Grades the sample overlaid by `files`, zipped with `times`, and asserts
/// that exactly the failures `expect` were found.
fn check_at(files: &[(&str, &str)], times: &[(&str, i64)], expect: &[&str]) -> Scorecard {
    let card = grade_with(demo(), files, times, &GradeOptions::default())
        .unwrap_or_else(|e| panic!("grading failed: {e:?}"));
    let got: BTreeSet<&str> = card.findings.iter().map(|f| f.id.as_str()).collect();
    let want: BTreeSet<&str> = expect.iter().copied().collect();
    assert_eq!(
        got,
        want,
        "files {:?}: findings were\n{}",
        files.iter().map(|f| f.0).collect::<Vec<_>>(),
        render(&card)
    );
    card
}

fn check(files: &[(&str, &str)], expect: &[&str]) -> Scorecard {
    check_at(files, &[], expect)
}

/// The evidence of finding `id`, joined; panics when `id` was not found.
fn evidence(card: &Scorecard, id: &str) -> String {
    let f = card
        .findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("{id} was not found:\n{}", render(card)));
    f.evidence.join(" | ")
}

fn provenance(card: &Scorecard, id: &str) -> Provenance {
    card.findings
        .iter()
        .find(|f| f.id == id)
        .map(|f| f.provenance)
        .unwrap_or_else(|| panic!("{id} was not found"))
}

fn assert_has(text: &str, needle: &str) {
    assert!(text.contains(needle), "{needle:?} not in {text:?}");
}

const STARTER_CALC: &str = "def add(a, b):\n    return a - b\n";
const PASSED_LOG: &str = "============================= test session starts ==============================\ncollected 2 items\n\ntest_calc.py ..\n\n============================== 2 passed in 0.01s ===============================\n";

fn ledger(rows: &[(u32, &str, u32)]) -> String {
    rows.iter()
        .map(|(id, tool, tokens)| {
            format!("{{\"id\": {id}, \"tool\": \"{tool}\", \"tokens\": {tokens}}}\n")
        })
        .collect()
}

// --- quiet on good input ---------------------------------------------------

#[test]
fn sample_grades_clean() {
    let card = check(&[], &[]);
    assert_eq!(
        card.scoring.criteria.iter().find(|c| c.id == "correct").and_then(|c| c.level),
        Some(2)
    );
}

/// Inputs next to each detector's trigger that must not fire it.
#[test]
fn near_misses_stay_quiet() {
    check_at(
        &[
            // frozen: an unchanged copy of the frozen file.
            ("frozen.txt", "Do not edit this file.\n"),
            // outside-allowlist / present: `.gatehouse/` is dropped from a submission.
            (".gatehouse/.env", "SECRET=1\n"),
            // pattern: a commented-out print does not match `^\s*print\(`.
            (
                "helpers/util.py",
                "import functools\n\n\ndef identity(x):\n    # print(x)\n    return x\n",
            ),
            // all: only one of the two files says HACK.
            (
                "calc.py",
                "# HACK: one of two\nfrom helpers.util import identity\n\n\ndef add(a, b):\n    return identity(a + b)\n",
            ),
            // order by stamp: Unix seconds and RFC 3339 with an offset, equal times.
            ("artifacts/red.stamp", "red at=1767603600\n"),
            ("artifacts/green.stamp", "green at=2026-01-05T10:00:00+01:00\n"),
            // ledger: 3 rows (not over 3), 1000 tokens (not over 1000), two in a row (not over 2).
            ("ledger.jsonl", &ledger(&[(1, "a", 400), (2, "a", 400), (3, "b", 200)])),
        ],
        // order by zip time: equal times.
        &[("artifacts/red.log", 60), ("artifacts/green.log", 60)],
        &[],
    );
}

// --- missing, present, outside-allowlist ------------------------------------

#[test]
fn missing_fires_when_a_path_matches_nothing() {
    let card = check(&[("NOTES.md", REMOVE)], &["missing-notes", "notes-no-risk"]);
    assert_eq!(evidence(&card, "missing-notes"), "NOTES.md: no such file in the submission");
    assert_eq!(provenance(&card, "missing-notes"), Provenance::Claimed);
    // pattern with absent = true fires when no file matches at all.
    assert_has(&evidence(&card, "notes-no-risk"), "no line of NOTES.md matches");
}

#[test]
fn present_by_scope_and_outside_allowlist() {
    // The starter's `.env.example` is in every workspace; `present-env` looks
    // at the submission only, so the sample stays quiet (sample_grades_clean).
    let card = check(
        &[(".env", "API_KEY=x\n"), ("vendor/fast.py", "X = 1\n")],
        &["present-env", "present-vendor-py", "outside-allow"],
    );
    assert_eq!(evidence(&card, "present-env"), ".env: present");
    assert_eq!(evidence(&card, "present-vendor-py"), "vendor/fast.py: present");
    assert_eq!(
        evidence(&card, "outside-allow"),
        ".env: not on the allowlist | vendor/fast.py: not on the allowlist"
    );
}

// --- pattern, frozen ------------------------------------------------------------

#[test]
fn pattern_and_absent_pattern() {
    let calc = "from helpers.util import identity\n\n\ndef add(a, b):\n    print(\"adding\", a, b)\n    return identity(a + b)\n";
    let card = check(
        &[("calc.py", calc), ("NOTES.md", "Nothing to add.\n")],
        &["debug-print", "notes-no-risk"],
    );
    assert_eq!(evidence(&card, "debug-print"), "calc.py:5: print(\"adding\", a, b)");
    assert_eq!(evidence(&card, "notes-no-risk"), "no line of NOTES.md matches /(?i)\\brisk/");
}

#[test]
fn frozen_fires_on_an_edited_file() {
    let card = check(&[("frozen.txt", "Edited anyway.\n")], &["frozen-edited"]);
    assert_has(&evidence(&card, "frozen-edited"), "frozen.txt: sha256 ");
    assert_has(&evidence(&card, "frozen-edited"), "differs from the starter's");
    assert_eq!(provenance(&card, "frozen-edited"), Provenance::Replayed);
}

// --- test-failing, exit, output ---------------------------------------------------

#[test]
fn wrong_sum_fails_tests_exit_and_output() {
    let card = check(
        &[("calc.py", STARTER_CALC)],
        &[
            "hidden-fails",
            "negative-fails",
            "small-fails",
            "exit-three",
            "exit-nonzero",
            "output-no-sum",
            "output-no-sum-line",
        ],
    );
    let hidden = evidence(&card, "hidden-fails");
    assert_has(&hidden, "test_hidden::test_add_small failed");
    assert_has(&hidden, "test_hidden::test_add_negative failed");
    assert_eq!(evidence(&card, "exit-three"), "step shell: exit code 3");
    assert_eq!(evidence(&card, "output-no-sum"), "step shell: output never matches /sum 5\\b/");
    assert_eq!(
        card.scoring.criteria.iter().find(|c| c.id == "correct").and_then(|c| c.level),
        Some(0)
    );
}

#[test]
fn test_failing_selects_tests_by_pattern() {
    // Wrong only for negative numbers: the small-numbers test passes, so
    // `small-fails` (a classname::name glob) stays quiet.
    let card = check(
        &[("calc.py", "def add(a, b):\n    return abs(a) + abs(b)\n")],
        &["hidden-fails", "negative-fails"],
    );
    assert_has(&evidence(&card, "negative-fails"), "test_hidden::test_add_negative failed");
    assert!(!evidence(&card, "hidden-fails").contains("test_add_small"));
    assert_eq!(
        card.scoring.criteria.iter().find(|c| c.id == "correct").and_then(|c| c.level),
        Some(1)
    );
}

#[test]
fn test_failing_fires_for_the_test_whose_call_ended_the_candidates_process() {
    // The candidate's code ends its process mid-call, claiming success.
    // Judged apart, that process is the host, not the test runner: the test
    // whose call it ended fails, naming how, the next test runs on a new
    // host, and nothing is accused (the candidate's code cannot reach the
    // runner, so a cut-off run is failing work).
    let calc = "import os\n\nfrom helpers.util import identity\n\n\ndef add(a, b):\n    if a < 0 or b < 0:\n        os._exit(0)\n    return identity(a + b)\n";
    let card = check(&[("calc.py", calc)], &["hidden-fails", "negative-fails"]);
    let e = evidence(&card, "negative-fails");
    assert_has(&e, "test_hidden::test_add_negative failed");
    assert_has(&e, "the candidate's process exited with status 0 during calc.add()");
    assert!(!evidence(&card, "hidden-fails").contains("test_add_small"), "{card:#?}");
}

#[test]
fn a_conftest_that_deselects_hidden_tests_never_loads() {
    // The hidden step runs with --noconftest: a workspace conftest that
    // would deselect a hidden test is never imported, so the sample with it
    // grades clean.
    let conftest = "def pytest_collection_modifyitems(items):\n    items[:] = [i for i in items if \"negative\" not in i.name]\n";
    check(&[("conftest.py", conftest)], &[]);
}

#[test]
fn test_failing_fires_when_the_step_crashed_without_junit() {
    // Every hidden test counts as not run and says how the run ended (the
    // module ends every process that imports it, the shell step's too).
    let card = check(
        &[("calc.py", "import os\n\nos._exit(3)\n")],
        &[
            "hidden-fails",
            "negative-fails",
            "small-fails",
            "exit-three",
            "exit-nonzero",
            "output-no-sum",
            "output-no-sum-line",
        ],
    );
    // Judged apart, the import happens in the candidate's process (the
    // host): the hidden module's collection fails, naming how that process
    // ended.
    for id in ["hidden-fails", "negative-fails", "small-fails"] {
        let e = evidence(&card, id);
        assert_has(&e, "not run: collection failed");
        assert_has(&e, "the candidate's process exited with status 3 during import calc");
    }
}

#[test]
fn output_contains_and_exit_not_equals() {
    let calc = "def add(a, b):\n    if (a, b) == (2, 3):\n        raise ValueError(\"no\")\n    return a + b\n";
    let card = check(
        &[("calc.py", calc)],
        &["exit-nonzero", "output-traceback", "output-no-sum", "output-no-sum-line"],
    );
    assert_eq!(
        evidence(&card, "output-traceback"),
        "step shell: Traceback (most recent call last):"
    );
    assert_eq!(evidence(&card, "exit-nonzero"), "step shell: exit code 1");
}

#[test]
fn exit_timed_out() {
    let card = check(
        &[("flags/slow", "")],
        &["exit-timeout", "exit-nonzero", "output-no-sum", "output-no-sum-line"],
    );
    assert_has(&evidence(&card, "exit-timeout"), "timed out");
}

// --- pytest-log ---------------------------------------------------------------------

#[test]
fn pytest_log_names_a_test_the_starter_lacks_and_a_red_green_log() {
    let red = fs::read_to_string(demo().sample_dir().join("artifacts/red.log")).expect("red.log");
    let card = check(
        &[
            (
                "artifacts/red.log",
                &red.replace("test_calc.py::test_add", "test_calc.py::test_ghost"),
            ),
            ("artifacts/green.log", &red),
        ],
        &["red-log-forged", "green-log-bad"],
    );
    assert_eq!(
        evidence(&card, "red-log-forged"),
        "artifacts/red.log: names test_calc.py::test_ghost, which the starter does not define"
    );
    assert_eq!(
        evidence(&card, "green-log-bad"),
        "artifacts/green.log: the summary `1 failed` is not a clean pass"
    );
}

/// A real log of a failing test method names `file::Class::method`; the
/// starter defines `TestAdd.test_add_pair` but no `TestGhost` and no
/// `TestAdd.test_ghost`.
#[test]
fn pytest_log_nodes_of_test_classes() {
    let red = fs::read_to_string(demo().sample_dir().join("artifacts/red.log")).expect("red.log");
    check(
        &[(
            "artifacts/red.log",
            &red.replace("test_calc.py::test_add", "test_calc.py::TestAdd::test_add_pair"),
        )],
        &[],
    );
    let card = check(
        &[(
            "artifacts/red.log",
            &format!(
                "{red}FAILED test_calc.py::TestGhost::test_add_pair\nFAILED test_calc.py::TestAdd::test_ghost\n"
            ),
        )],
        &["red-log-forged"],
    );
    let e = evidence(&card, "red-log-forged");
    assert_has(&e, "test_calc.py::TestGhost::test_add_pair, which the starter does not define");
    assert_has(&e, "test_calc.py::TestAdd::test_ghost, which the starter does not define");
}

#[test]
fn pytest_log_hand_written_and_missing() {
    let card = check(
        &[
            ("artifacts/red.log", "FAILED test_calc.py::test_add\n1 failed\n"),
            ("artifacts/green.log", REMOVE),
        ],
        &["red-log-forged", "green-log-bad"],
    );
    assert_has(&evidence(&card, "red-log-forged"), "no `test session starts` header");
    assert_has(&evidence(&card, "red-log-forged"), "no closing summary line");
    assert_eq!(evidence(&card, "green-log-bad"), "artifacts/green.log: missing");
    // A green log alone is fine as long as it is a clean pass.
    check(&[("artifacts/green.log", PASSED_LOG)], &[]);
}

// --- order ---------------------------------------------------------------------

#[test]
fn order_by_zip_time_and_by_stamp_fire_when_reversed() {
    // The sample has the right order for both (red first): quiet in
    // sample_grades_clean. Here both are reversed.
    let card = check_at(
        &[
            ("artifacts/red.stamp", "red at=2026-01-05T09:05:00Z\n"),
            ("artifacts/green.stamp", "green at=1767603700\n"),
        ],
        &[("artifacts/red.log", 120), ("artifacts/green.log", 60)],
        &["green-before-red", "stamp-before-red"],
    );
    assert_eq!(
        evidence(&card, "green-before-red"),
        "artifacts/green.log (2026-01-05T09:01:00Z) is 60 s earlier than artifacts/red.log (2026-01-05T09:02:00Z)"
    );
    assert_eq!(
        evidence(&card, "stamp-before-red"),
        "artifacts/green.stamp (2026-01-05T09:01:40Z) is 200 s earlier than artifacts/red.stamp (2026-01-05T09:05:00Z)"
    );
}

// --- diff-allowlist, diff-invalid ---------------------------------------------------

const TEST_DIFF: &str = "--- a/test_calc.py\n+++ b/test_calc.py\n@@ -3,2 +3,2 @@\n def test_add():\n-    assert add(2, 3) == 5\n+    assert add(2, 3) == 5  # checked\n";

#[test]
fn diff_allowlist_by_list_and_by_file() {
    // test_calc.py is allowed by allowed.txt (`test_*.py`) but not by `allow`.
    let card = check(&[("change.diff", TEST_DIFF)], &["diff-outside"]);
    assert_eq!(
        evidence(&card, "diff-outside"),
        "change.diff touches test_calc.py, which is not on the allowlist"
    );
}

#[test]
fn diff_allowlist_both_fire_outside_both_lists() {
    let diff = format!(
        "{}--- a/frozen.txt\n+++ b/frozen.txt\n@@ -1 +1 @@\n-Do not edit this file.\n+Edited.\n",
        demo_diff()
    );
    let card = check(&[("change.diff", &diff)], &["diff-outside", "diff-outside-file"]);
    assert_eq!(
        evidence(&card, "diff-outside-file"),
        "change.diff touches frozen.txt, which is not on the allowlist"
    );
}

fn demo_diff() -> String {
    fs::read_to_string(demo().sample_dir().join("change.diff")).expect("change.diff")
}

#[test]
fn diff_invalid_prose() {
    let card = check(&[("change.diff", "I changed the minus to a plus.\n")], &["diff-invalid"]);
    assert_has(&evidence(&card, "diff-invalid"), "is not part of a unified diff");
}

#[test]
fn diff_invalid_missing() {
    let card = check(&[("change.diff", REMOVE)], &["diff-invalid"]);
    assert_eq!(evidence(&card, "diff-invalid"), "change.diff: missing");
}

// --- stdlib-only ---------------------------------------------------------------------

#[test]
fn stdlib_only_fires_on_a_third_party_import() {
    // The sample imports json, os, math (stdlib) and helpers.util (local),
    // and stays quiet. The import here sits in a function, so calc.py still
    // runs where `requests` is not installed.
    let calc = "from helpers.util import identity\n\n\ndef fetch():\n    import requests\n\n\ndef add(a, b):\n    return identity(a + b)\n";
    let card = check(&[("calc.py", calc)], &["third-party"]);
    assert_eq!(
        evidence(&card, "third-party"),
        "calc.py:5: imports requests, which is not in the standard library"
    );
}

// --- ledger ---------------------------------------------------------------------------

#[test]
fn ledger_invalid_lines() {
    let text = format!("{}not json\n[1, 2]\n{{\"tool\": \"a\"}}\n", ledger(&[(1, "a", 1)]));
    let card = check(&[("ledger.jsonl", &text)], &["ledger-invalid"]);
    let e = evidence(&card, "ledger-invalid");
    assert_has(&e, "line 2: not JSON");
    assert_has(&e, "line 3: not a JSON object");
    assert_has(&e, "line 4: missing tokens");
}

#[test]
fn ledger_rows_over_a_budget_but_not_the_number() {
    // Four rows: over budget.model_calls (3), not over 5; "a" twice in a row
    // is not over 2.
    check(
        &[("ledger.jsonl", &ledger(&[(1, "a", 10), (2, "a", 10), (3, "b", 10), (4, "a", 10)]))],
        &["ledger-rows-budget"],
    );
}

#[test]
fn ledger_rows_over_the_number() {
    let rows = ledger(&[
        (1, "a", 10),
        (2, "b", 10),
        (3, "a", 10),
        (4, "b", 10),
        (5, "a", 10),
        (6, "b", 10),
    ]);
    let card = check(&[("ledger.jsonl", &rows)], &["ledger-rows", "ledger-rows-budget"]);
    assert_eq!(evidence(&card, "ledger-rows"), "ledger.jsonl: 6 rows, over the limit of 5");
}

#[test]
fn ledger_sum_and_duplicates() {
    let card = check(
        &[("ledger.jsonl", &ledger(&[(1, "a", 600), (1, "b", 600)]))],
        &["ledger-sum", "ledger-dupes"],
    );
    assert_eq!(
        evidence(&card, "ledger-sum"),
        "ledger.jsonl: sum of tokens is 1200, over the limit of 1000"
    );
    assert_eq!(evidence(&card, "ledger-dupes"), "ledger.jsonl: row 2 repeats row 1 (id=1)");
}

#[test]
fn ledger_consecutive() {
    let card = check(
        &[("ledger.jsonl", &ledger(&[(1, "a", 10), (2, "a", 10), (3, "a", 10)]))],
        &["ledger-streak"],
    );
    assert_has(&evidence(&card, "ledger-streak"), "3 identical rows in a row ending at row 3");
}

// --- mutants-survive, script -------------------------------------------------------------

#[test]
fn mutants_survive_weak_tests() {
    // Only positive numbers: the abs() mutant survives. The sample's tests
    // kill it (sample_grades_clean).
    let card = check(
        &[(
            "test_calc.py",
            "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
        )],
        &["weak-tests"],
    );
    assert_eq!(evidence(&card, "weak-tests"), "mutant abs_add survived the candidate's tests");
    let mutation = card.receipt.mutation.as_ref().expect("a mutation outcome");
    assert_eq!(mutation.killed(), 0);
}

#[test]
fn script_fires_by_id() {
    // One script run serves both failures; only the id it printed fires.
    let calc = "from helpers.util import identity\n\n\ndef add(a, b):\n    # TODO: tidy up\n    return identity(a + b)\n";
    let card = check(&[("calc.py", calc)], &["script-todo"]);
    assert_eq!(evidence(&card, "script-todo"), "calc.py has a TODO");
    assert_eq!(card.receipt.runs.iter().filter(|r| r.id.starts_with("script:")).count(), 1);
}

#[test]
fn a_crashing_script_leaves_its_failures_unevaluated() {
    // A submission can make a packet's script crash; grading goes on, the
    // script's failures are listed as unevaluated and no decision is final.
    let card = grade_with(demo(), &[("flags/crash", "")], &[], &GradeOptions::default())
        .expect("grading goes on");
    assert!(!card.unevaluated.is_empty());
    for u in &card.unevaluated {
        assert_has(&u.reason, "python3 .gatehouse/scan.py");
        assert_has(&u.reason, "refusing to scan");
    }
    assert_eq!(card.scoring.decision, "pending");
    assert_eq!(card.receipt.unevaluated, card.unevaluated);
}

// --- all, any, not ------------------------------------------------------------------

#[test]
fn all_and_any() {
    // near_misses_stay_quiet has HACK in one file only.
    let calc = "# HACK\nfrom helpers.util import identity\n\n\ndef add(a, b):\n    return identity(a + b)\n";
    let tests = format!(
        "# HACK\n{}",
        fs::read_to_string(demo().sample_dir().join("test_calc.py")).expect("test_calc.py")
    );
    let card = check(
        &[("calc.py", calc), ("test_calc.py", &tests), ("scratch.md", "notes to self\n")],
        &["all-hack", "any-scratch"],
    );
    assert_eq!(evidence(&card, "all-hack"), "calc.py:1: # HACK | test_calc.py:1: # HACK");
    assert_eq!(evidence(&card, "any-scratch"), "scratch.md: present");
}

#[test]
fn not_fires_when_its_detector_does_not() {
    // No test at all: pytest exits 5 on the mutant, which counts as killed.
    let card = check(&[("test_calc.py", "# tests will go here\n")], &["not-tests"]);
    assert_has(&evidence(&card, "not-tests"), "expected evidence absent");
}
