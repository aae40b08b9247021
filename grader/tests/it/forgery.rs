//! Submissions that try to forge their own test results (issue #9, part 1),
//! on the real `token-bucket` packet: a bucket whose `allow()` always says
//! yes, plus a forgery that tries to make the held-out tests look green.
//! Each is contained (the decision stays `drop`, correctness 0); the honest
//! controls draw nothing. Since the judge apart (issue #44) the hidden tests
//! run where the candidate's code cannot reach, so the forgeries aimed at
//! the test process find no runner, plugin manager, channel or result file
//! of the judge's to change, and need no finding to be contained; a finding
//! they still draw (a static hint, a process left running) must name what
//! it saw.

use std::fs;
use std::path::PathBuf;
use std::sync::OnceLock;

use grader::evidence::Provenance;
use grader::grade::{GradeOptions, Scorecard};
use grader::packet::Packet;
use grader::score::HumanScore;
use grader::tree::copy_path;

use crate::grader;

/// A module that never returns: what a wall limit must cut. It sleeps
/// rather than spins, so the three gradings that are cut at 30 s and more
/// do not burn the suite's CPU (the CPU cap has its own test,
/// `sandbox::limits::sandbox_cpu_limit_is_enforced`).
const SLEEPS_FOREVER: &str = "import time\n\nwhile True:\n    time.sleep(1)\n";

fn packet(slug: &str) -> &'static Packet {
    static PACKETS: OnceLock<
        std::sync::Mutex<std::collections::BTreeMap<String, &'static Packet>>,
    > = OnceLock::new();
    let map = PACKETS.get_or_init(Default::default);
    let mut map = map.lock().unwrap();
    map.entry(slug.to_string()).or_insert_with(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../packets").join(slug);
        Box::leak(Box::new(Packet::load(&dir).unwrap_or_else(|e| panic!("loading {slug}: {e}"))))
    })
}

/// The sample of `slug` with `files` written over it (a `None` content
/// removes the file), zipped and graded.
fn grade(slug: &str, files: &[(&str, Option<&str>)], opts: &GradeOptions) -> Scorecard {
    let p = packet(slug);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sub");
    copy_path(&p.sample_dir(), &dir).unwrap();
    crate::lay(&dir, files);
    let zip = tmp.path().join("sub.zip");
    let times = p
        .manifest
        .sample
        .times
        .iter()
        .map(|(k, v)| (k.clone(), grader::manifest::TIME_BASE + v))
        .collect();
    grader::ingest::write_zip_from_dir(&dir, &zip, &times, grader::manifest::TIME_BASE).unwrap();
    grader().grade_zip(p, &zip, opts).unwrap_or_else(|e| panic!("grading: {e}"))
}

/// `allow()` says yes to everything.
fn broken_bucket() -> String {
    let sample = fs::read_to_string(packet("token-bucket").sample_dir().join("bucket.py")).unwrap();
    format!("{sample}\n\nTokenBucket.allow = lambda self, n=1.0: True\n")
}

fn level(card: &Scorecard, criterion: &str) -> Option<u32> {
    card.scoring.criteria.iter().find(|c| c.id == criterion).and_then(|c| c.level)
}

fn tampering(card: &Scorecard) -> Option<&grader::score::Finding> {
    card.findings.iter().find(|f| f.id == "evidence-tampering")
}

fn describe(card: &Scorecard) -> String {
    let runs: Vec<String> = card
        .receipt
        .runs
        .iter()
        .map(|r| {
            format!("{} {:?}: {}", r.id, r.exit, r.stderr_tail.lines().last().unwrap_or_default())
        })
        .collect();
    format!(
        "decision {} score {:?}\nfindings: {:#?}\ncaps: {:?}\nruns: {:#?}",
        card.scoring.decision,
        card.scoring.score,
        card.findings.iter().map(|f| (&f.id, &f.evidence)).collect::<Vec<_>>(),
        card.scoring.caps,
        runs
    )
}

/// A forgery is contained: no score gained over the plain broken bucket
/// (the decision `drop`, correctness 0). `_evidence` is what flagged it
/// while the tests shared the candidate's process; apart, nothing needs to.
fn assert_forgery(files: &[(&str, Option<&str>)], _evidence: &str) {
    let bucket = broken_bucket();
    let mut all: Vec<(&str, Option<&str>)> = vec![("bucket.py", Some(bucket.as_str()))];
    all.extend_from_slice(files);
    let card = grade("token-bucket", &all, &GradeOptions::default());
    assert_eq!(card.scoring.decision, "drop", "{}", describe(&card));
    assert_eq!(level(&card, "correctness"), Some(0), "{}", describe(&card));
    if let Some(f) = tampering(&card) {
        assert_eq!(f.provenance, Provenance::Replayed);
    }
}

const SHIM: &str = r#"
import os, re, sys
names = re.findall(r"def (test_\w+)", open("test_hidden_bucket.py").read())
os.makedirs(".gatehouse", exist_ok=True)
with open(".gatehouse/hidden.xml", "w") as f:
    f.write('<testsuites><testsuite name="pytest" tests="%d">' % len(names))
    for n in names:
        f.write('<testcase classname="test_hidden_bucket" name="%s"/>' % n)
    f.write("</testsuite></testsuites>")
sys.exit(0)
"#;

#[test]
fn forgery_a_pytest_py_shim_is_never_run() {
    assert_forgery(
        &[("pytest.py", Some(SHIM))],
        "pytest.py: shadows the test runner's own module `pytest`",
    );
}

#[test]
fn forgery_a_pytest_package_is_never_run() {
    assert_forgery(
        &[("pytest/__init__.py", Some(SHIM)), ("pytest/__main__.py", Some(SHIM))],
        "`pytest` package shadows",
    );
}

#[test]
fn forgery_sitecustomize_and_pth_are_never_loaded() {
    let hook = "import os\nos._exit(0)\n";
    assert_forgery(
        &[
            ("sitecustomize.py", Some(hook)),
            ("usercustomize.py", Some(hook)),
            ("zz.pth", Some("import os; os._exit(0)\n")),
        ],
        ".pth",
    );
}

#[test]
fn forgery_an_atexit_hook_that_rewrites_results_and_exits_early() {
    let bucket = broken_bucket();
    let forged = format!(
        "{bucket}\nimport atexit, glob, os\n\ndef _forge():\n    for p in glob.glob('.gatehouse/*.xml'):\n        open(p, 'w').write('<testsuites><testsuite name=\"x\" tests=\"1\"><testcase classname=\"t\" name=\"ok\"/></testsuite></testsuites>')\n    os._exit(0)\n\natexit.register(_forge)\n"
    );
    assert_forgery(&[("bucket.py", Some(&forged))], "registers an exit hook");
}

/// The same trick written so that no static rule sees it: the channel's
/// cross-checks alone must catch it.
#[test]
fn forgery_an_obfuscated_early_exit_at_import_is_caught_by_the_channel() {
    let bucket = broken_bucket();
    let forged = format!("{bucket}\ngetattr(__import__('o' + 's'), '_' + 'exit')(0)\n");
    assert_forgery(&[("bucket.py", Some(&forged))], "exited 0 before the runner finished");
}

/// A process left behind rewrites the result file after the runner
/// finished: the file disagrees with the stream.
#[test]
fn forgery_a_result_file_rewritten_after_the_run_is_caught() {
    let bucket = broken_bucket();
    let forged = format!(
        r#"{bucket}
import os as _o, time as _t
_d = '.gate' + 'house'
if _o.fork() == 0:
    _o.setsid()
    for _ in range(200):
        _t.sleep(0.02)
        for _n in _o.listdir(_d):
            if _n.endswith('.xml'):
                _p = _o.path.join(_d, _n)
                _x = open(_p).read()
                if 'FORGED' not in _x:
                    _x = _x.replace('<failure', '<skipped').replace('</failure>', '</skipped>')
                    open(_p, 'w').write(_x + '<!-- FORGED -->')
    _o._exit(0)
"#
    );
    let card = grade("token-bucket", &[("bucket.py", Some(&forged))], &GradeOptions::default());
    assert_eq!(card.scoring.decision, "drop", "{}", describe(&card));
    assert_eq!(level(&card, "correctness"), Some(0), "{}", describe(&card));
}

/// Records written straight to the result channel without the nonce.
#[test]
fn forgery_records_written_to_the_result_channel_are_foreign() {
    let bucket = broken_bucket();
    let forged = format!(
        "{bucket}\nimport json as _j, os as _o\ntry:\n    _w = getattr(_o, 'wr' + 'ite')\n    _w(int('3'), (_j.dumps({{'t': 'end', 'nonce': 'guess', 'exit': 0}}) + '\\n').encode())\nexcept OSError:\n    pass\n"
    );
    assert_forgery(&[("bucket.py", Some(&forged))], "not written by the runner");
}

/// Candidate code that, when the hidden tests import it, registers a
/// collection hook with the running pytest (spelled so that no static rule
/// sees it) whose body `edit` changes the collected items. Only the set of
/// test ids the packet's hidden tests define can tell.
fn collection_forgery(edit: &str) -> String {
    let bucket = broken_bucket();
    format!(
        r#"{bucket}
import sys as _s
def _cfg():
    _f = _s._getframe()
    while _f is not None:
        for _v in list(_f.f_locals.values()):
            _c = getattr(_v, 'config', None)
            if getattr(_c, 'plugin' + 'manager', None) is not None:
                return _c
        _f = _f.f_back
class _P:
    pass
def _edit(session, config, items):
{edit}
setattr(_P, 'py' + 'test_collection_modifyitems', staticmethod(_edit))
_c = _cfg()
if _c is not None:
    getattr(_c, 'plugin' + 'manager').register(_P())
"#
    )
}

#[test]
fn forgery_a_collection_hook_that_drops_hidden_tests() {
    assert_forgery(
        &[("bucket.py", Some(&collection_forgery("    items[:] = items[:2]")))],
        "that the packet's hidden tests define were never reported",
    );
}

#[test]
fn forgery_a_collection_hook_that_runs_no_hidden_test() {
    assert_forgery(
        &[("bucket.py", Some(&collection_forgery("    items.clear()")))],
        "that the packet's hidden tests define were never reported",
    );
}

/// Renaming the collected items (pytest's own reporting then fails
/// internally): the defined ids are never reported.
#[test]
fn forgery_a_collection_hook_that_renames_hidden_tests() {
    let edit =
        "    for _i in items:\n        _i._nodeid = _i._nodeid.replace('::test_', '::test_ok_')";
    assert_forgery(
        &[("bucket.py", Some(&collection_forgery(edit)))],
        "that the packet's hidden tests define were never reported",
    );
}

#[test]
fn forgery_a_collection_hook_that_adds_passing_tests() {
    let edit = "    _t = items[0]\n    for _k in range(50):\n        items.append(type(_t).from_parent(_t.parent, name='test_free_%d' % _k, callobj=lambda: None))";
    assert_forgery(
        &[("bucket.py", Some(&collection_forgery(edit)))],
        "that the packet's hidden tests do not define",
    );
}

/// The ids a grading expects are the ones recorded when the packet was
/// checked (handed in as `GradeOptions::calibration`), not a fresh
/// collection: an id the record names that the run never reports counts
/// as a failed test ("not run"), even on the honest sample. Judged apart,
/// the candidate's code cannot have dropped it, so it is no accusation.
/// A record made for another digest is not used.
#[test]
fn the_recorded_test_ids_are_the_ones_a_grading_enforces() {
    let p = packet("token-bucket");
    let mut recorded = (*grader().calibration(p)).clone();
    assert_eq!(recorded.digest, p.digest);
    let hidden = recorded.expected.get_mut("hidden").expect("the hidden step's ids are recorded");
    assert!(hidden.len() > 5, "{hidden:?}");
    hidden.insert("test_hidden_bucket.py::TestRecorded::test_only_in_the_record".into());
    let with = |c: grader::grade::Calibration| GradeOptions {
        calibration: Some(std::sync::Arc::new(c)),
        ..Default::default()
    };
    let not_run = |card: &Scorecard| {
        card.receipt
            .runs
            .iter()
            .filter(|r| r.id == "step:hidden")
            .flat_map(|r| r.tests.iter().flatten())
            .any(|t| {
                t.name == "test_only_in_the_record"
                    && matches!(t.status, grader::evidence::TestStatus::Error)
            })
    };
    // The record as measured: the sample keeps at full marks.
    let honest = grade("token-bucket", &[], &with((*grader().calibration(p)).clone()));
    assert!(!not_run(&honest) && tampering(&honest).is_none(), "{}", describe(&honest));
    assert_eq!(honest.scoring.decision, "keep", "{}", describe(&honest));
    let card = grade("token-bucket", &[], &with(recorded.clone()));
    assert!(not_run(&card), "{}", describe(&card));
    assert!(tampering(&card).is_none(), "{}", describe(&card));
    assert!(
        card.scoring.score < honest.scoring.score,
        "a test of the record that never ran costs the sample: {:?} against {:?}\n{}",
        card.scoring.score,
        honest.scoring.score,
        describe(&card)
    );
    // A record of another digest is not used.
    recorded.digest = "another".into();
    let card = grade("token-bucket", &[], &with(recorded));
    assert!(!not_run(&card) && tampering(&card).is_none(), "{}", describe(&card));
}

/// A conftest.py that turns every failure into a pass: hidden steps run
/// without it, and its hook is flagged.
#[test]
fn forgery_a_conftest_that_rewrites_outcomes() {
    let conftest = "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    outcome = yield\n    outcome.get_result().outcome = 'passed'\n";
    assert_forgery(&[("conftest.py", Some(conftest))], "pytest_runtest_makereport");
}

/// The broken bucket alone, without any forgery: dropped, not accused.
#[test]
fn control_the_broken_bucket_alone_is_dropped_but_not_accused() {
    let bucket = broken_bucket();
    let card = grade("token-bucket", &[("bucket.py", Some(&bucket))], &GradeOptions::default());
    assert_eq!(card.scoring.decision, "drop", "{}", describe(&card));
    assert!(tampering(&card).is_none(), "{}", describe(&card));
    // Its failures are reported in full, the failing line shown in its
    // source (the runner shares parsed modules across reports).
    let run = card.receipt.runs.iter().find(|r| r.id == "step:hidden").unwrap();
    let shown = run.stdout_tail.lines().any(|l| l.starts_with(">  ") && l.contains("self.assert"));
    let told = run.stdout_tail.lines().any(|l| l.starts_with("E  ") && l.contains("Error"));
    assert!(shown && told, "{}", run.stdout_tail);
}

/// Honest tests that import pytest, use fixtures, monkeypatch, tmp_path,
/// parametrize and unittest.mock, with a conftest.py of fixtures and
/// markers: nothing is accused, and the grade is the sample's.
#[test]
fn control_honest_pytest_style_tests_are_never_accused() {
    // The sample's own tests, then pytest-style ones.
    let sample_tests =
        std::fs::read_to_string(packet("refund-invoices").sample_dir().join("test_invoices.py"))
            .expect("the sample's tests");
    let tests = format!("from unittest import mock\n\nimport pytest\n\n{sample_tests}\n\n")
        + r#"@pytest.mark.parametrize("rows, expected", [(["100", "-100"], 0), (["-1"], -1)])
def test_parametrized_totals(tmp_path, rows, expected, csv_writer):
    assert invoices.total(csv_writer(tmp_path, rows)) == expected


def test_monkeypatch_and_mock(monkeypatch, tmp_path):
    monkeypatch.setenv("LANG", "C")
    with mock.patch("builtins.print") as p:
        path = tmp_path / "x.csv"
        path.write_text("cents\n5\n", encoding="utf-8")
        assert invoices.total(str(path)) == 5
    assert not p.called
"#;
    let conftest = r#"import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a slow test")


@pytest.fixture
def csv_writer():
    def write(folder, rows):
        path = folder / "rows.csv"
        path.write_text("cents\n" + "\n".join(rows) + "\n", encoding="utf-8")
        return str(path)

    return write
"#;
    let sample = grade("refund-invoices", &[], &GradeOptions::default());
    let card = grade(
        "refund-invoices",
        &[("test_invoices.py", Some(&tests)), ("conftest.py", Some(conftest))],
        &GradeOptions::default(),
    );
    assert!(tampering(&card).is_none(), "{}", describe(&card));
    assert!(tampering(&sample).is_none(), "{}", describe(&sample));
    assert_eq!(card.scoring.decision, sample.scoring.decision, "{}", describe(&card));
}

/// The veto is the rubric's lowest decision, and a reviewer can override
/// it with a written reason (the override is kept in the caps).
#[test]
fn the_tampering_veto_can_be_overridden_with_a_reason() {
    // The sample itself, plus a harmless-looking pytest.py: the bucket is
    // right, yet the veto holds until a reviewer says otherwise.
    let files: &[(&str, Option<&str>)] = &[("pytest.py", Some("# my notes on pytest\n"))];
    let vetoed = grade("token-bucket", files, &GradeOptions::default());
    assert!(tampering(&vetoed).is_some(), "{}", describe(&vetoed));
    assert_eq!(vetoed.scoring.decision, "drop", "{}", describe(&vetoed));
    let m = &packet("token-bucket").manifest;
    let mut human = std::collections::BTreeMap::new();
    human.insert(
        "evidence-tampering".to_string(),
        HumanScore {
            level: 1,
            reason: "a notes file named badly, never imported".into(),
            by: "rev".into(),
        },
    );
    let overridden = grader::grade::rescore(m, &vetoed, &human);
    assert_eq!(overridden.scoring.decision, "keep", "{}", describe(&overridden));
    assert!(
        overridden.scoring.caps.iter().any(|c| c.contains("overridden by rev")),
        "{:?}",
        overridden.scoring.caps
    );
    // Without a reason the override does not count.
    human.insert(
        "evidence-tampering".to_string(),
        HumanScore { level: 1, reason: " ".into(), by: "rev".into() },
    );
    assert_eq!(grader::grade::rescore(m, &vetoed, &human).scoring.decision, "drop");
}

/// A submission that loops forever costs the grading budget, not every
/// command's wall limit in turn: what the budget left out is listed, the
/// failures it would have judged stay unevaluated, and the decision is
/// pending, never a pass.
#[test]
fn a_submission_that_loops_forever_is_graded_within_its_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("token-bucket");
    copy_path(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../packets/token-bucket"), &dir)
        .unwrap();
    let manifest = fs::read_to_string(dir.join("packet.toml")).unwrap();
    fs::write(
        dir.join("packet.toml"),
        manifest.replacen("[limits]\n", "[limits]\ngrading_secs = 12\n", 1),
    )
    .unwrap();
    let p = Packet::load(&dir).unwrap();
    let sub = tmp.path().join("sub");
    copy_path(&p.sample_dir(), &sub).unwrap();
    // Its code and its tests loop: judged apart, the hidden step gives up
    // on the hung import at its call limit; the candidate's own test runs
    // are what outlast the budget.
    fs::write(sub.join("bucket.py"), SLEEPS_FOREVER).unwrap();
    fs::write(sub.join("test_bucket.py"), SLEEPS_FOREVER).unwrap();
    let zip = tmp.path().join("sub.zip");
    crate::zip_dir(&sub, &zip);
    let started = std::time::Instant::now();
    let card = grader().grade_zip(&p, &zip, &GradeOptions::default()).unwrap();
    let took = started.elapsed();
    // The calibration (grading the sample once) is included in `took`.
    assert!(took < std::time::Duration::from_secs(45), "took {took:?}");
    assert_eq!(card.receipt.timings.budget_secs, 12);
    assert!(!card.skipped.is_empty(), "{}", describe(&card));
    assert!(
        card.skipped.iter().any(|s| s.reason.contains("grading budget of 12 s")),
        "{:?}",
        card.skipped
    );
    assert!(
        card.skipped.iter().all(|s| s.reason.contains("grading budget of 12 s")
            || s.reason.starts_with("cut: ")
            || s.reason.contains("already incomplete")),
        "{:?}",
        card.skipped
    );
    assert_eq!(card.scoring.decision, "pending", "{}", describe(&card));
    assert_eq!(card.skipped, card.receipt.skipped);
}

/// A token-bucket submission whose code and tests loop forever: every
/// command the manifest gives no wall limit of its own has the limit
/// derived from the sample (ten times its time, at least 30 s), below the
/// packet's 60 s; the candidate's own runs stop there, each cut listed (the
/// hidden step, judged apart, gives up on the hung import sooner), the mutation run is incomplete (the
/// rest of the mutants are not run), and the decision is pending, never a
/// pass.
#[test]
fn a_looping_submission_is_stopped_at_its_derived_wall_limits() {
    let loops = SLEEPS_FOREVER;
    let p = packet("token-bucket");
    let calibration = grader().calibration(p);
    let started = std::time::Instant::now();
    let card = grade(
        "token-bucket",
        &[("bucket.py", Some(loops)), ("test_bucket.py", Some(loops))],
        &GradeOptions::default(),
    );
    let took = started.elapsed();
    eprintln!(
        "looping token-bucket graded in {took:?} (budget {} s); derived walls: {:?}",
        card.receipt.timings.budget_secs,
        card.receipt
            .runs
            .iter()
            .map(|r| (&r.id, r.limits.wall_secs, r.timed_out))
            .collect::<Vec<_>>()
    );
    for id in ["step:hidden", "step:reference-tests"] {
        let run = card
            .receipt
            .runs
            .iter()
            .find(|r| r.id == id)
            .unwrap_or_else(|| panic!("no {id}: {}", describe(&card)));
        let (derived, _) = calibration.derived_wall(id).expect("the sample timed the step");
        assert!(derived.as_secs() < 60, "{id}: {derived:?}");
        assert_eq!(run.limits.wall_secs, derived.as_secs_f64(), "{id}");
        if id == "step:hidden" {
            // Judged apart, the import that never returns is a call the
            // judge gives up on after a third of the wall: the host is
            // ended, the hidden tests fail naming the hang, and the run
            // ends before its limit.
            assert!(!run.timed_out, "{id}: {}", describe(&card));
            let tests: Vec<_> = run.tests.iter().flatten().collect();
            assert!(
                !tests.is_empty()
                    && tests.iter().all(|t| t.status != grader::evidence::TestStatus::Passed),
                "{id}: {}",
                describe(&card)
            );
            assert!(
                tests
                    .iter()
                    .any(|t| t.message.as_deref().is_some_and(
                        |m| m.contains("did not answer") && m.contains("import bucket")
                    )),
                "{id}: {tests:#?}"
            );
            continue;
        }
        assert!(run.timed_out, "{id} was not stopped: {}", describe(&card));
        assert!(
            card.skipped.iter().any(|s| s.id == id
                && s.reason.starts_with(&format!(
                    "cut: stopped at its wall limit of {} s",
                    derived.as_secs()
                ))),
            "{:?}",
            card.skipped
        );
    }
    // One mutant run is cut; the others are not run; no mutation outcome.
    let mutants: Vec<_> =
        card.receipt.runs.iter().filter(|r| r.id.starts_with("mutant:")).collect();
    assert_eq!(mutants.len(), 1, "{}", describe(&card));
    assert!(card.receipt.mutation.is_none());
    assert!(
        card.skipped.iter().any(|s| s.reason.contains("mutation run is already incomplete")),
        "{:?}",
        card.skipped
    );
    assert_eq!(card.scoring.decision, "pending", "{}", describe(&card));
    assert_eq!(level(&card, "correctness"), Some(0), "{}", describe(&card));
    // Two cut commands and a hang given up on, each well under the
    // packet's 60 s.
    assert!(took < std::time::Duration::from_secs(150), "took {took:?}");
}

/// The same looping submission graded without derived wall limits (a
/// calibration with no command times: every command gets the packet's
/// 60 s), for the figure before them: `cargo test --workspace --test it --
/// --ignored figures_looping`.
#[test]
#[ignore]
fn figures_looping_token_bucket_without_derived_limits() {
    let loops = SLEEPS_FOREVER;
    let p = packet("token-bucket");
    let mut c = (*grader().calibration(p)).clone();
    c.run_ms.clear();
    let started = std::time::Instant::now();
    let card = grade(
        "token-bucket",
        &[("bucket.py", Some(loops)), ("test_bucket.py", Some(loops))],
        &GradeOptions { calibration: Some(std::sync::Arc::new(c)), ..Default::default() },
    );
    eprintln!(
        "without derived limits: graded in {:?} (budget {} s), runs {:?}",
        started.elapsed(),
        card.receipt.timings.budget_secs,
        card.receipt
            .runs
            .iter()
            .map(|r| (&r.id, r.limits.wall_secs, r.timed_out))
            .collect::<Vec<_>>()
    );
    assert_ne!(card.scoring.decision, "keep");
}

/// Kept evidence packet code writes (issue #9): on `issue-receipt` the
/// packet's model writes the recomputed ledger while the candidate's
/// `agent.py` runs as a child of the hidden tests. This agent under-reports
/// its prompt tokens by half (in the submitted usage.jsonl and in the one it
/// writes during the replay), then rewrites the model-side ledger to agree:
/// where it used to be (`.gatehouse/recomputed.jsonl`) and where it is now
/// (`$GATEHOUSE_EVIDENCE`). When the ledger was kept from `.gatehouse/` the
/// rewrite made `budget-dishonest` quiet; now the agent runs confined, its
/// write to the evidence folder fails, the ledger is the model's, and
/// `budget-dishonest` fires. (Before the evidence folder this graded 100
/// out of 100 with `budget-dishonest` quiet.)
#[test]
fn forgery_an_agent_that_rewrites_the_recomputed_ledger_is_contained() {
    const FORGE: &str = r#"

def _forge(code):
    import json, os
    rows = [json.loads(l) for l in open("usage.jsonl") if l.strip()]
    for r in rows:
        r["prompt_tokens"] = r["prompt_tokens"] // 2
    with open("usage.jsonl", "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    ledger = "".join(json.dumps({"n": i + 1, "status": 200, "prompt_tokens": r["prompt_tokens"],
                                 "completion_tokens": r["completion_tokens"],
                                 "total_tokens": r["prompt_tokens"] + r["completion_tokens"]}) + "\n"
                     for i, r in enumerate(rows))
    wrote = []
    # Spelled so that the static scan does not see the grader's folder: the
    # containment, not the scan, must stop this.
    for d in ("." + "gate" + "house", os.environ.get("GATE" + "HOUSE_EVIDENCE", "/evidence")):
        try:
            with open(os.path.join(d, "recomputed.jsonl"), "w") as f:
                f.write(ledger)
            wrote.append(d)
        except OSError as e:
            print("forge refused:", d, e, file=sys.stderr)
    print("forged ledger in", wrote, file=sys.stderr)
    return code
"#;
    let p = packet("issue-receipt");
    let sample = fs::read_to_string(p.sample_dir().join("agent.py")).unwrap();
    assert!(sample.contains("sys.exit(main())"), "the sample's entry point moved");
    let agent = sample.replace("sys.exit(main())", "sys.exit(_forge(main()))").replace(
        "\nif __name__ == \"__main__\":",
        &format!("{FORGE}\n\nif __name__ == \"__main__\":"),
    );
    let digest = grader::tree::sha256_hex(agent.as_bytes());
    let usage: String = fs::read_to_string(p.sample_dir().join("usage.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut row: serde_json::Value = serde_json::from_str(l).unwrap();
            let pt = row["prompt_tokens"].as_u64().unwrap();
            row["prompt_tokens"] = (pt / 2).into();
            row["code_sha256"] = digest.clone().into();
            format!("{row}\n")
        })
        .collect();
    let card = grade(
        "issue-receipt",
        &[("agent.py", Some(&agent)), ("usage.jsonl", Some(&usage))],
        &GradeOptions::default(),
    );
    let f = card
        .findings
        .iter()
        .find(|f| f.id == "budget-dishonest")
        .unwrap_or_else(|| panic!("budget-dishonest is quiet:\n{}", describe(&card)));
    assert!(
        f.evidence
            .iter()
            .any(|e| e.contains("prompt_tokens claims") && e.contains("step replay recomputed")),
        "{:#?}",
        f.evidence
    );
    assert_eq!(level(&card, "budget_honesty"), Some(0), "{}", describe(&card));
}

/// The honest control for the kept-evidence forgery: the sample of each
/// packet whose hidden code now starts the candidate's processes confined
/// and keeps its evidence from the evidence folder grades without a
/// finding (room-holds here; the others are covered by their `packet
/// check` in `packets.rs`).
#[test]
fn control_room_holds_sample_keeps_its_service_log_and_draws_nothing() {
    let card = grade("room-holds", &[], &GradeOptions::default());
    assert!(card.findings.is_empty(), "{}", describe(&card));
    assert!(card.receipt.runs.iter().any(|r| r.id == "step:replay"), "{}", describe(&card));
}
