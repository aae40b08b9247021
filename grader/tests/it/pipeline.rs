//! The grading pipeline end to end, on the `detect-demo` fixture packet:
//! deterministic receipts, refusals that leave nothing behind, what a receipt
//! records, frozen files, pending human criteria, witnessed runs and their
//! wall limits, evidence kept with or without Landlock, and the linter of
//! unconfined launches (`packet check` itself: `check.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::OnceLock;

use grader::grade::{FrozenEntry, GradeError, GradeOptions, Grader, Scorecard, receipt_digest};
use grader::manifest::TIME_BASE;
use grader::packet::Packet;
use grader::sandbox::Exit;
use grader::score::{HumanScore, Status};
use grader::tree::sha256_hex;

use crate::check::{append_to_manifest, check_demo_copy, fixture_copy, replace_in_manifest, write};
use crate::detectors::{demo, grade_with, grader, zip_submission};

/// The sample, graded once and shared.
fn sample_card() -> &'static Scorecard {
    static CARD: OnceLock<Scorecard> = OnceLock::new();
    CARD.get_or_init(|| {
        grade_with(demo(), &[], &[], &GradeOptions::default())
            .unwrap_or_else(|e| panic!("grading the sample: {e}"))
    })
}

const EDITED_FROZEN: &str = "Edited anyway.\n";

/// The starter's wrong `add` and an edited frozen file, graded once and
/// shared: every auto criterion is at 0.
fn bad_card() -> &'static Scorecard {
    static CARD: OnceLock<Scorecard> = OnceLock::new();
    CARD.get_or_init(|| {
        let files =
            [("calc.py", "def add(a, b):\n    return a - b\n"), ("frozen.txt", EDITED_FROZEN)];
        grade_with(demo(), &files, &[], &GradeOptions::default())
            .unwrap_or_else(|e| panic!("grading: {e}"))
    })
}

fn without_timings(card: &Scorecard) -> serde_json::Value {
    let mut v = serde_json::to_value(&card.receipt).expect("receipt to JSON");
    v.as_object_mut().expect("an object").remove("timings");
    v
}

fn ids(card: &Scorecard) -> BTreeSet<&str> {
    card.findings.iter().map(|f| f.id.as_str()).collect()
}

// --- (1) determinism -----------------------------------------------------------

#[test]
fn same_zip_same_receipt() {
    let first = sample_card();
    let (_tmp, zip) = zip_submission(demo(), &[], &[]);
    let second = grader().grade_zip(demo(), &zip, &GradeOptions::default()).expect("grading again");
    assert_eq!(without_timings(first), without_timings(&second));
    assert_eq!(first.receipt.digest, second.receipt.digest);
    assert_eq!(first.receipt.digest, receipt_digest(&first.receipt));
    assert_eq!(first.receipt.digest.len(), 64);
    // The timings are there, outside the digest.
    assert_eq!(second.receipt.timings.runs.len(), second.receipt.runs.len());
}

// --- (2) refusals ------------------------------------------------------------------

const REFUSED_ZIP: &str = "GATEHOUSE_TEST_REFUSED_ZIP";

/// Grades a zip with a `../evil` entry in a child process whose TMPDIR is a
/// fresh folder, so no other test's work folder can be mistaken for a
/// leftover; the folder must be empty afterwards.
#[test]
fn refused_archive_leaves_no_work_folder() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let zip = tmp.path().join("evil.zip");
    let mut w = zip::ZipWriter::new(fs::File::create(&zip).expect("creating the zip"));
    let opts = zip::write::SimpleFileOptions::default();
    w.start_file("calc.py", opts).expect("entry");
    w.write_all(b"def add(a, b):\n    return a + b\n").expect("write");
    w.start_file("../evil", opts).expect("entry");
    w.write_all(b"escaped\n").expect("write");
    w.finish().expect("finishing the zip");

    let fresh = tmp.path().join("tmpdir");
    fs::create_dir(&fresh).expect("creating TMPDIR");
    let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "pipeline::refused_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TMPDIR", &fresh)
        .env(REFUSED_ZIP, &zip)
        .output()
        .expect("running the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("refused:"), "the child did not grade:\n{stdout}");
    let left: Vec<String> = fs::read_dir(&fresh)
        .expect("reading TMPDIR")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "left behind in TMPDIR: {left:?}");
    assert!(!tmp.path().join("evil").exists() && !fresh.join("evil").exists());
}

#[test]
#[ignore = "run by refused_archive_leaves_no_work_folder, in a child process with its own TMPDIR"]
fn refused_child() {
    let Some(zip) = std::env::var_os(REFUSED_ZIP) else { return };
    let grader = Grader::for_host().expect("Grader::for_host");
    match grader.grade_zip(demo(), Path::new(&zip), &GradeOptions::default()) {
        Err(GradeError::Refused(e)) => {
            let message = e.to_string();
            assert!(message.contains("../evil") && message.contains("`..`"), "{message}");
            println!("refused: {message}");
        }
        other => panic!("expected GradeError::Refused, got {:?}", other.map(|c| c.findings)),
    }
}

// --- (3) what a receipt records ------------------------------------------------------

#[test]
fn receipt_records_runs_digests_files_environment_and_sandbox() {
    // A copy of the packet pinned to a python the host does not have.
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = fixture_copy(tmp.path(), "detect-demo");
    replace_in_manifest(&root, "python = \"3\"\n", "python = \"2.7\"\n");
    let packet = Packet::load(&root).expect("loading the copy");

    let (_zip_tmp, zip) = zip_submission(&packet, &[], &[]);
    let card = grader().grade_zip(&packet, &zip, &GradeOptions::default()).expect("grading");
    let r = &card.receipt;
    assert!(card.findings.is_empty(), "{:?}", card.findings);

    // The packet and the submission.
    assert_eq!((r.packet.slug.as_str(), r.packet.version.as_str()), ("detect-demo", "0.1.0"));
    assert_eq!(r.packet.digest, packet.digest);
    assert_ne!(r.packet.digest, demo().digest, "the pin is part of the packet digest");
    assert_eq!(r.submission.archive_sha256, sha256_hex(&fs::read(&zip).expect("zip bytes")));
    let paths: Vec<&str> = r.submission.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "NOTES.md",
            "artifacts/green.log",
            "artifacts/green.stamp",
            "artifacts/red.log",
            "artifacts/red.stamp",
            "calc.py",
            "change.diff",
            "helpers/__init__.py",
            "helpers/util.py",
            "ledger.jsonl",
            "test_calc.py",
        ]
    );
    let calc = r.submission.files.iter().find(|f| f.path == "calc.py").expect("calc.py");
    assert_eq!(
        calc.sha256,
        sha256_hex(&fs::read(packet.sample_dir().join("calc.py")).expect("calc.py"))
    );
    assert_eq!(calc.mtime, Some(TIME_BASE));
    let green =
        r.submission.files.iter().find(|f| f.path == "artifacts/green.log").expect("green.log");
    assert_eq!(green.mtime, Some(TIME_BASE + 60));
    assert_eq!(r.submission.workspace_digest.len(), 64);

    // Every run, with its limits and how it ended.
    let runs: Vec<&str> = r.runs.iter().map(|run| run.id.as_str()).collect();
    assert_eq!(runs, ["step:hidden", "step:shell", "script:1", "mutant:abs_add"]);
    for run in &r.runs {
        let wall = if run.id == "step:shell" { 2.0 } else { 30.0 };
        assert_eq!(
            (run.limits.wall_secs, run.limits.cpu_secs, run.limits.memory_mb),
            (wall, 20, 256),
            "{}",
            run.id
        );
        assert!(
            !run.timed_out && run.limit_hit.is_none() && run.leftovers.is_empty(),
            "{}: {run:?}",
            run.id
        );
        let expect = if run.id == "mutant:abs_add" { Exit::Code(1) } else { Exit::Code(0) };
        assert_eq!(run.exit, expect, "{}: {}", run.id, run.stderr_tail);
    }
    assert!(r.runs[0].command.contains("--junitxml=.gatehouse/hidden.xml"));
    let tests = r.runs[0].tests.as_ref().expect("the hidden step's tests");
    let names: Vec<(&str, &str)> =
        tests.iter().map(|t| (t.name.as_str(), t.status.word())).collect();
    assert_eq!(names, [("test_add_small", "passed"), ("test_add_negative", "passed")]);
    assert!(r.runs[1].tests.is_none());
    assert_eq!(r.runs[1].stdout_tail, "sum 5\n");
    // Plain test commands and packet scripts run through the trusted runner.
    assert_eq!(
        r.runs[2].command,
        "python3 -I -B --check-hash-based-pycs always /gatehouse/gatehouse_runner.py script .gatehouse/scan.py"
    );
    assert_eq!(
        r.runs[3].command,
        "python3 -I -B --check-hash-based-pycs always /gatehouse/gatehouse_runner.py pytest -q -p no:cacheprovider test_calc.py"
    );
    let mutation = r.mutation.as_ref().expect("mutation");
    assert_eq!((mutation.killed(), mutation.mutants.len()), (1, 1));
    assert_eq!(r.timings.runs.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), runs);

    // The environment: pins against the probe, the mismatch said.
    let python = r.environment.tools.iter().find(|t| t.name == "python").expect("python");
    assert_eq!(python.pin.as_deref(), Some("2.7"));
    let probed = python.probed.clone().expect("a probed python");
    assert!(probed.starts_with("3."), "{probed}");
    assert!(!python.matches);
    let pytest = r.environment.tools.iter().find(|t| t.name == "pytest").expect("pytest");
    assert_eq!(pytest.pin.as_deref(), Some("9"));
    assert!(
        pytest.probed.as_deref().is_some_and(|v| v.starts_with("9.")) && pytest.matches,
        "{pytest:?}"
    );
    assert_eq!(
        r.environment.mismatches,
        [format!("python is pinned to 2.7 but the sandbox has {probed}")]
    );
    assert_eq!(card.environment, r.environment);

    // The sandbox's features, as probed.
    assert_eq!(&r.sandbox, grader().sandbox().features());
    assert!(r.sandbox.pid_namespace && r.sandbox.mount_namespace && r.sandbox.uid_drop);

    assert_eq!(r.digest, receipt_digest(r));
}

// --- (4) frozen files -------------------------------------------------------------------

#[test]
fn frozen_file_left_out_is_not_changed_and_edited_is() {
    let starter_sha =
        sha256_hex(&fs::read(demo().starter_dir().join("frozen.txt")).expect("frozen.txt"));
    let left_out = sample_card();
    assert_eq!(
        left_out.receipt.frozen,
        [FrozenEntry {
            path: "frozen.txt".into(),
            starter_sha256: starter_sha.clone(),
            submitted_sha256: None,
            changed: false
        }]
    );
    assert!(!ids(left_out).contains("frozen-edited"));

    let edited = bad_card();
    assert_eq!(
        edited.receipt.frozen,
        [FrozenEntry {
            path: "frozen.txt".into(),
            starter_sha256: starter_sha,
            submitted_sha256: Some(sha256_hex(EDITED_FROZEN.as_bytes())),
            changed: true,
        }]
    );
    assert!(ids(edited).contains("frozen-edited"), "{:?}", ids(edited));
}

// --- (5) human criteria -----------------------------------------------------------------

fn review(level: u32) -> GradeOptions {
    let score =
        HumanScore { level, reason: "read the diff".into(), by: "reviewer@example.com".into() };
    GradeOptions { human: BTreeMap::from([("review".to_string(), score)]), ..Default::default() }
}

#[test]
fn pending_human_criterion_decides_only_when_the_band_depends_on_it() {
    // The sample: correct 2 + hygiene 1 + review 0..=2 spans revise..merge.
    let card = sample_card();
    assert_eq!(card.scoring.decision, "pending");
    assert_eq!(card.scoring.pending, ["review"]);
    let r = card.scoring.criteria.iter().find(|c| c.id == "review").expect("review");
    assert_eq!((r.status, r.level), (Status::Pending, None));
    assert_eq!((card.scoring.score, card.scoring.max_score), (Some(3), 5));
    assert_eq!(card.receipt.scoring.decision, "pending");

    // correct 0 + hygiene 0 + review 0..=2 is `close` whatever the reviewer says.
    let bad = bad_card();
    assert_eq!(bad.scoring.pending, ["review"]);
    assert_eq!(bad.scoring.decision, "close");
    assert_eq!(bad.scoring.score, Some(0));
}

#[test]
fn human_levels_resolve_the_decision() {
    let top = grade_with(demo(), &[], &[], &review(2)).expect("grading");
    assert_eq!((top.scoring.decision.as_str(), top.scoring.score), ("merge", Some(5)));
    assert!(top.scoring.pending.is_empty());
    let r = top.scoring.criteria.iter().find(|c| c.id == "review").expect("review");
    assert_eq!(
        (r.status, r.level, r.level_text.as_deref()),
        (Status::Scored, Some(2), Some("good"))
    );
    assert!(r.basis.iter().any(|b| b.contains("reviewer@example.com")), "{:?}", r.basis);

    let low = grade_with(demo(), &[], &[], &review(0)).expect("grading");
    assert_eq!((low.scoring.decision.as_str(), low.scoring.score), ("revise", Some(3)));
    // The reviewer's level is part of the receipt.
    assert_ne!(top.receipt.digest, low.receipt.digest);
}

// --- (6) packet check ---------------------------------------------------------------------

#[test]
fn a_witnessed_run_sets_aside_the_platform_files_a_tree_hands_back() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = check_demo_copy(tmp.path());
    // A starter test that fails when any file of the tree holds the marker.
    let check = "import os\n\nMARK = 'FOR' + 'GED'\n\n\ndef test_no_marked_file():\n    for name in os.listdir('.'):\n        if os.path.isfile(name):\n            assert MARK not in open(name, errors='replace').read(), name\n";
    write(&root, "starter/test_tree.py", check);
    let packet = Packet::load(&root).expect("loading the packet");
    let (_a, plain) = zip_submission(&packet, &[], &[]);
    let (_b, handed_back) = zip_submission(
        &packet,
        &[("GATEHOUSE_PIN.toml", "FORGED pin\n"), ("PROMPT.md", "FORGED brief\n")],
        &[],
    );
    let honest = grader().witness_run(&packet, &plain).expect("a witnessed run");
    assert!(honest.passed, "{}", honest.log);
    let run = grader().witness_run(&packet, &handed_back).expect("a witnessed run");
    assert!(run.passed, "the platform files the tree handed back were not set aside: {}", run.log);
    assert_eq!(run.tree_sha256, honest.tree_sha256, "the same tree as grading would assemble");
    // A file of the candidate's own with the marker still counts.
    let (_c, own) = zip_submission(&packet, &[("mine.txt", "FORGED\n")], &[]);
    let run = grader().witness_run(&packet, &own).expect("a witnessed run");
    assert!(!run.passed && run.log.contains("mine.txt"), "{}", run.log);
}

/// `check-demo` at `<tmp>/check-demo` with a 90 s packet wall limit, so
/// that a sample-derived limit (at least 30 s) is the lower one.
fn check_demo_90(tmp: &Path) -> Packet {
    let root = check_demo_copy(tmp);
    replace_in_manifest(&root, "wall_secs = 30", "wall_secs = 90");
    Packet::load(&root).expect("loading the packet")
}

#[test]
fn a_witnessed_run_that_loops_forever_stops_at_its_derived_wall_limit() {
    use grader::grade::{Calibration, WALL_FLOOR, WITNESS_RUN_ID};
    let tmp = tempfile::tempdir().expect("tempdir");
    let packet = check_demo_90(tmp.path());
    // The sample's witnessed run took 0.2 s: ten times that is below the
    // floor, so the derived limit is the floor, below the packet's 90 s.
    let calibration = std::sync::Arc::new(Calibration {
        digest: packet.digest.clone(),
        run_ms: [(WITNESS_RUN_ID.to_string(), 200)].into(),
        ..Calibration::default()
    });
    let forever = "import time\n\n\ndef test_forever():\n    while True:\n        time.sleep(1)\n";
    let (_a, zip) = zip_submission(&packet, &[("test_forever.py", forever)], &[]);
    let run = grader().witness_run_with(&packet, &zip, Some(calibration)).expect("a witnessed run");
    assert!(!run.passed, "a run stopped at its limit is never a pass: {}", run.log);
    assert!(run.timed_out, "{}", run.log);
    assert!(run.derived_wall);
    assert_eq!(run.wall_limit_secs, WALL_FLOOR.as_secs());
    assert!(
        run.log.contains(&format!(
            "stopped after the wall-clock limit of {} s, derived from the sample",
            WALL_FLOOR.as_secs()
        )),
        "{}",
        run.log
    );
    // The packet's own limit (90 s) was not what stopped it.
    assert!(run.wall_ms < 90_000, "{} ms", run.wall_ms);
}

#[test]
fn a_witnessed_run_of_honest_work_is_not_cut_by_its_derived_wall_limit() {
    use grader::grade::{Calibration, WALL_FLOOR, WITNESS_RUN_ID};
    let tmp = tempfile::tempdir().expect("tempdir");
    let packet = check_demo_90(tmp.path());
    // The grader's own calibration times the sample's witnessed run.
    let measured = grader().calibration(&packet);
    assert!(measured.run_ms.contains_key(WITNESS_RUN_ID), "{measured:?}");
    let (_a, zip) = zip_submission(&packet, &[], &[]);
    let run = grader().witness_run(&packet, &zip).expect("a witnessed run");
    assert!(run.passed && !run.timed_out, "{}", run.log);
    // Ten times the sample's witnessed run, at least the floor; below the
    // packet's 90 s unless this host ran the sample's run very slowly.
    let (derived, _) = measured.derived_wall(WITNESS_RUN_ID).expect("a derived limit");
    assert!(derived >= WALL_FLOOR);
    assert_eq!(run.derived_wall, derived.as_secs() < 90, "{run:?}");
    assert_eq!(run.wall_limit_secs, derived.as_secs().min(90));
    assert!(!run.log.contains("stopped after"), "{}", run.log);
    // A calibration without the witnessed run's time leaves the packet's
    // limit in place.
    let bare = std::sync::Arc::new(Calibration {
        digest: packet.digest.clone(),
        ..Calibration::default()
    });
    let run = grader().witness_run_with(&packet, &zip, Some(bare)).expect("a witnessed run");
    assert!(run.passed && !run.derived_wall, "{run:?}");
    assert_eq!(run.wall_limit_secs, 90);
}

/// `check-demo` with a step whose packet code writes `/evidence/note.txt`
/// and keeps it.
fn check_demo_keeping_evidence(tmp: &Path) -> Packet {
    let root = check_demo_copy(tmp);
    write(
        &root,
        "hidden/test_evidence.py",
        "import os\n\n\ndef test_writes_evidence():\n    base = os.environ.get('GATEHOUSE_EVIDENCE') or '/evidence'\n    with open(os.path.join(base, 'note.txt'), 'w') as f:\n        f.write('written by packet code\\n')\n",
    );
    append_to_manifest(
        &root,
        "\n[[step]]\nid = \"evidence\"\nrun = \"python3 -m pytest -q -p no:cacheprovider test_evidence.py\"\nlay = [\"test_evidence.py\"]\nkeep = [\".gatehouse/evidence/note.txt\"]\n",
    );
    Packet::load(&root).expect("loading the packet")
}

#[test]
fn without_landlock_kept_evidence_is_marked_untrusted() {
    use grader::sandbox::{LANDLOCK_UNAVAILABLE, landlock_fallback};
    assert_eq!(landlock_fallback(0).as_deref(), Some(LANDLOCK_UNAVAILABLE));
    assert_eq!(landlock_fallback(6), None);
    let tmp = tempfile::tempdir().expect("tempdir");
    let packet = check_demo_keeping_evidence(tmp.path());
    let (_a, zip) = zip_submission(&packet, &[], &[]);
    let no_landlock = Grader::for_host().expect("the host sandbox works").assume_landlock_abi(0);
    let card = no_landlock.grade_zip(&packet, &zip, &GradeOptions::default()).expect("grading");
    let r = &card.receipt;
    assert_eq!(r.sandbox.landlock_abi, 0);
    assert!(
        r.sandbox.fallbacks.iter().any(|f| f == LANDLOCK_UNAVAILABLE),
        "{:?}",
        r.sandbox.fallbacks
    );
    assert_eq!(r.untrusted_evidence.len(), 1, "{:?}", r.untrusted_evidence);
    assert!(
        r.untrusted_evidence[0]
            .starts_with("step:evidence: .gatehouse/evidence/note.txt: not trusted"),
        "{:?}",
        r.untrusted_evidence
    );
    // The step ran and kept its file: the warning is about real evidence.
    assert!(
        r.runs.iter().any(|run| run.id == "step:evidence" && run.exit == Exit::Code(0)),
        "{:?}",
        r.runs
    );
    // And it is part of what the receipt's digest covers.
    let mut stripped = r.clone();
    stripped.untrusted_evidence.clear();
    assert_ne!(receipt_digest(&stripped), receipt_digest(r));
}

#[test]
fn with_landlock_kept_evidence_carries_no_warning() {
    use grader::sandbox::LANDLOCK_UNAVAILABLE;
    let tmp = tempfile::tempdir().expect("tempdir");
    let packet = check_demo_keeping_evidence(tmp.path());
    let (_a, zip) = zip_submission(&packet, &[], &[]);
    let card = grader().grade_zip(&packet, &zip, &GradeOptions::default()).expect("grading");
    let r = &card.receipt;
    assert!(r.sandbox.landlock_abi > 0, "this host has Landlock");
    assert!(
        !r.sandbox.fallbacks.iter().any(|f| f == LANDLOCK_UNAVAILABLE),
        "{:?}",
        r.sandbox.fallbacks
    );
    assert!(r.untrusted_evidence.is_empty(), "{:?}", r.untrusted_evidence);
    assert!(
        r.runs.iter().any(|run| run.id == "step:evidence" && run.exit == Exit::Code(0)),
        "{:?}",
        r.runs
    );
    // The field is left out of the JSON when empty (older receipts keep
    // their digests).
    assert!(!serde_json::to_string(r).expect("json").contains("untrusted_evidence"));
}

/// The linter lists a plain `subprocess` launch in any Python file a step
/// or a detector script of a packet judged shared lays (not only in steps
/// that keep evidence), and is quiet once the launch goes through the
/// harness, and for a packet judged apart.
#[test]
fn the_linter_lists_unconfined_launches_of_every_step_and_detector_script() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = check_demo_copy(tmp.path());
    let launch = |call: &str| {
        format!(
            "import subprocess\nimport sys\n\n{call}([sys.executable, 'calc.py'], capture_output=True)\n"
        )
    };
    write(&root, "detectors/probe.py", &launch("subprocess.run"));
    write(
        &root,
        "hidden/test_cli.py",
        &format!("{}\ndef test_cli():\n    pass\n", launch("subprocess.Popen")),
    );
    append_to_manifest(
        &root,
        "\n[[step]]\nid = \"cli\"\nrun = \"python3 -m pytest -q -p no:cacheprovider test_cli.py\"\nlay = [\"test_cli.py\"]\n",
    );
    append_to_manifest(
        &root,
        "\n[[failure]]\nid = \"probe\"\ntitle = \"Probe\"\ndescription = \"probe\"\ndetect = { kind = \"script\", run = \"python3 .gatehouse/probe.py\", lay = [{ from = \"detectors/probe.py\", to = \".gatehouse/probe.py\" }] }\n",
    );
    let warned = |root: &Path| -> Vec<(String, String)> {
        let packet = Packet::load(root).expect("loading the packet");
        grader::lint::lint(&packet)
            .into_iter()
            .filter(|(n, _)| n.contains("starts the candidate's code confined"))
            .collect()
    };
    // Judged apart (the default), every program a step or a detector
    // script starts runs under the candidate's uid through the host, never
    // beside the packet's runner: nothing to list.
    assert_eq!(warned(&root), Vec::<(String, String)>::new());
    // Shared, the same launches run beside the runner and are listed.
    let toml = std::fs::read_to_string(root.join("packet.toml")).expect("packet.toml");
    let shared = toml.replacen(
        "\n[packet]\n",
        "\n[packet]\njudge = \"shared\"\njudge_reason = \"the linter's test\"\n",
        1,
    );
    assert_ne!(shared, toml, "a [packet] table");
    write(&root, "packet.toml", &shared);
    let found = warned(&root);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_eq!(found[0].0, "step cli starts the candidate's code confined");
    assert!(
        found[0].1.contains("hidden/test_cli.py:4 starts a process with `subprocess.Popen(`"),
        "{}",
        found[0].1
    );
    assert_eq!(
        found[1].0,
        "detector script `python3 .gatehouse/probe.py` starts the candidate's code confined"
    );
    assert!(
        found[1].1.contains("detectors/probe.py:4 starts a process with `subprocess.run(`"),
        "{}",
        found[1].1
    );
    // Through the harness, or marked as the packet's own code: quiet.
    write(
        &root,
        "detectors/probe.py",
        "from gatehouse_harness import run_confined\nimport sys\n\nrun_confined([sys.executable, 'calc.py'], capture_output=True)\n",
    );
    write(
        &root,
        "hidden/test_cli.py",
        &format!(
            "{}\ndef test_cli():\n    pass\n",
            launch("subprocess.Popen").replace("True)\n", "True)  # gatehouse: packet-code\n")
        ),
    );
    assert_eq!(warned(&root), Vec::<(String, String)>::new());
}
