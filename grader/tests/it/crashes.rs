//! A crash is failing work, never tampering (issue #48). A Go panic ends
//! the whole test binary (inside a `t.Run` subtest too), so does a
//! deadlock, the framework's `-test.timeout`, an `os.Exit` mid-test, a
//! panic in a goroutine; a Node test process dies of an unhandled
//! rejection, a signal or an exit; a Python C extension segfaults the
//! interpreter. Each is graded here on real packets, run by the real
//! grader: every test the run did not report fails, saying which test the
//! crash happened in and why, the scorecard's run names the crash, and no
//! accusing finding is drawn. Forgeries that imitate a crash (forged passes,
//! then a fake `panic:` banner or a real panic) are still caught: a crash
//! only turns unreported tests into failures.
//!
//! Go is graded on `retry-ticket-go` and on `grains-go`, an Exercism-shaped
//! fixture (a starter whose functions panic, table tests in subtests);
//! TypeScript and Python on small packets made of `token-bucket-ts`'s and
//! `token-bucket`'s hidden tests (one grading, one run per step).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use grader::evidence::{TestOutcome, TestStatus};
use grader::grade::{GradeOptions, Scorecard};
use grader::packet::Packet;
use grader::tree::copy_path;

use crate::detectors::fixture;
use crate::grader;

fn load(dir: &Path) -> Packet {
    Packet::load(dir).unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()))
}

fn packets_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../packets")
}

/// `base` with `files` written over it (`None` removes one), zipped and
/// graded on `packet`.
fn grade(packet: &Packet, base: &Path, files: &[(&str, Option<&str>)]) -> Scorecard {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sub");
    copy_path(base, &dir).unwrap();
    crate::lay(&dir, files);
    let zip = tmp.path().join("sub.zip");
    crate::zip_dir(&dir, &zip);
    grader().grade_zip(packet, &zip, &GradeOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn describe(card: &Scorecard) -> String {
    let runs: Vec<String> = card
        .receipt
        .runs
        .iter()
        .map(|r| {
            let tests: Vec<String> = (r.tests.iter().flatten())
                .map(|t| format!("  {}::{} {:?} {:?}", t.classname, t.name, t.status, t.message))
                .collect();
            format!(
                "{} {:?} crash {:?}\n{}\nstdout: {}\nstderr: {}",
                r.id,
                r.exit,
                r.crash,
                tests.join("\n"),
                r.stdout_tail
                    .chars()
                    .rev()
                    .take(1500)
                    .collect::<String>()
                    .chars()
                    .rev()
                    .collect::<String>(),
                r.stderr_tail
                    .chars()
                    .rev()
                    .take(1500)
                    .collect::<String>()
                    .chars()
                    .rev()
                    .collect::<String>()
            )
        })
        .collect();
    format!(
        "decision {} score {:?}\nfindings: {:#?}\nruns:\n{}",
        card.scoring.decision,
        card.scoring.score,
        card.findings.iter().map(|f| (&f.id, &f.evidence)).collect::<Vec<_>>(),
        runs.join("\n")
    )
}

fn step_tests<'a>(card: &'a Scorecard, step: &str) -> &'a [TestOutcome] {
    let run = card.receipt.runs.iter().find(|r| r.id == format!("step:{step}"));
    run.and_then(|r| r.tests.as_deref()).unwrap_or_else(|| panic!("no tests of step {step}"))
}

fn test<'a>(card: &'a Scorecard, step: &str, name: &str) -> &'a TestOutcome {
    step_tests(card, step)
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no test {name} in step {step}:\n{}", describe(card)))
}

/// A crash graded as what it is: the run's crash line holds each of
/// `crash`, no `evidence-tampering`, the decision is `lowest`, and the
/// test `unreported` (when given) failed saying `not run: ` and `crash[0]`
/// (or, when the crash happened in it, `crashed: ` and where).
fn assert_crash(
    card: &Scorecard,
    step: &str,
    crash: &[&str],
    unreported: Option<&str>,
    lowest: &str,
) {
    let what = describe(card);
    assert!(card.findings.iter().all(|f| f.id != "evidence-tampering"), "accused: {what}");
    assert_eq!(card.scoring.decision, lowest, "{what}");
    let run = card.receipt.runs.iter().find(|r| r.id == format!("step:{step}")).unwrap();
    let line = run.crash.as_deref().unwrap_or_else(|| panic!("no crash named: {what}"));
    for part in crash {
        assert!(line.contains(part), "the crash line lacks {part:?}: {line}\n{what}");
    }
    if let Some(name) = unreported {
        let t = test(card, step, name);
        let message = t.message.as_deref().unwrap_or_default();
        let said = (message.starts_with("not run: ") && message.contains(crash[0]))
            || (message.starts_with("crashed: ") && message.contains(" in this test"));
        assert!(
            matches!(t.status, TestStatus::Error | TestStatus::Failed) && said,
            "{name}: {:?} {message}\n{what}",
            t.status
        );
    }
    // Nothing the crash left unreported passed.
    assert!(
        step_tests(card, step).iter().all(|t| t.status != TestStatus::Passed
            || !t.message.as_deref().unwrap_or_default().contains("not run")),
        "{what}"
    );
}

// ------------------------------------------------------------------ Go

/// The grains packet declaring `judge = "shared"`: the test binary holds
/// the candidate's code, so each crash kind is the test binary's own
/// (judged apart, the host's crash fails the calls it was serving:
/// `retry_ticket_go_crashes_fail_without_accusation`, `judge_go.rs`).
fn grains() -> &'static Packet {
    static P: OnceLock<(tempfile::TempDir, Packet)> = OnceLock::new();
    &P.get_or_init(|| crate::shared_copy(&fixture("grains-go"))).1
}

fn retry_go() -> &'static Packet {
    static P: OnceLock<Packet> = OnceLock::new();
    P.get_or_init(|| load(&packets_dir().join("retry-ticket-go")))
}

fn grains_go(body: &str) -> String {
    format!(
        "// Package grains counts the grains of wheat on a chessboard.\npackage grains\n\n{body}\n"
    )
}

/// The sample's Square or Total, for a submission that breaks the other.
const SQUARE_OK: &str = "func Square(number int) (uint64, error) {\n\tif number < 1 || number > 64 {\n\t\treturn 0, errors.New(\"square must be between 1 and 64\")\n\t}\n\treturn 1 << uint(number-1), nil\n}\n";
const TOTAL_OK: &str = "func Total() uint64 {\n\treturn 1<<64 - 1\n}\n";

#[test]
fn grains_the_sample_grades_clean_and_the_untouched_stub_fails_without_accusation() {
    let p = grains();
    let card = grade(p, &p.sample_dir(), &[]);
    assert_eq!(card.scoring.decision, "advance", "{}", describe(&card));
    assert!(card.findings.is_empty(), "{}", describe(&card));
    assert!(card.receipt.runs.iter().all(|r| r.crash.is_none()), "{}", describe(&card));
    // The stub as a candidate receives it: every function panics, first
    // inside a t.Run subtest of TestSquare (before issue #48, graded
    // evidence-tampering: the panic was never seen).
    let card = grade(p, &p.root.join("starter"), &[]);
    assert_crash(
        &card,
        "hidden",
        &[
            "the test binary panicked in TestSquare: Please implement the Square function",
            "(at grains.go:7 in grains.Square)",
        ],
        Some("TestTotal"),
        "close",
    );
    let square = test(&card, "hidden", "TestSquare");
    assert_eq!(
        square.message.as_deref(),
        Some(
            "crashed: the test binary panicked in this test: Please implement the Square function (at grains.go:7 in grains.Square)"
        ),
        "{}",
        describe(&card)
    );
    assert!(card.findings.iter().any(|f| f.id == "hidden-fails"), "{}", describe(&card));
}

/// Each way a Go test binary crashes, on the grains packet: failing, no
/// accusation, the crash named with the test, the message and the first
/// frame in the candidate's code.
#[test]
fn grains_each_go_crash_fails_without_accusation() {
    let p = grains();
    let cases: Vec<(&str, String, Vec<&str>, Option<&str>)> = vec![
        (
            "an honest off-by-one index, panicking in a subtest",
            grains_go(&format!(
                "import \"errors\"\n\nvar board = func() (b [64]uint64) {{\n\tfor i := range b {{\n\t\tb[i] = 1 << uint(i)\n\t}}\n\treturn\n}}()\n\nfunc Square(number int) (uint64, error) {{\n\tif number < 1 || number > 64 {{\n\t\treturn 0, errors.New(\"off the board\")\n\t}}\n\treturn board[number], nil\n}}\n\n{TOTAL_OK}"
            )),
            vec![
                "panicked in TestSquare: runtime error: index out of range [64] with length 64",
                "(at grains.go:17 in grains.Square)",
            ],
            Some("TestTotal"),
        ),
        (
            "a helper goroutine's t.Errorf after its test ended (a slow, wrong Total)",
            grains_go(&format!(
                "import (\n\t\"errors\"\n\t\"time\"\n)\n\n{SQUARE_OK}\nfunc Total() uint64 {{\n\ttime.Sleep(1500 * time.Millisecond)\n\treturn 0\n}}\n"
            )),
            vec![
                "panicked in TestTotal: Fail in goroutine after TestTotalIsQuick has completed",
                "(at grains_hidden_test.go:",
                "in grains.TestTotalIsQuick.func1)",
            ],
            None,
        ),
        (
            "a deadlock while the package initialises",
            grains_go(&format!(
                "import (\n\t\"errors\"\n\t\"sync\"\n)\n\nvar mu sync.Mutex\n\nvar total = func() uint64 {{\n\tmu.Lock()\n\tdefer mu.Unlock()\n\treturn sum()\n}}()\n\nfunc sum() uint64 {{\n\tmu.Lock()\n\tdefer mu.Unlock()\n\treturn 1<<64 - 1\n}}\n\n{SQUARE_OK}\nfunc Total() uint64 {{ return total }}\n"
            )),
            vec![
                "the test binary stopped with a fatal error: all goroutines are asleep - deadlock!",
                "(at grains.go:18 in grains.sum)",
            ],
            Some("TestTotal"),
        ),
        (
            "the framework's -test.timeout (a loop that never ends for square 0)",
            grains_go(&format!(
                "func Square(number int) (uint64, error) {{\n\tn := uint64(1)\n\tfor i := 1; i != number; i++ {{\n\t\tn *= 2\n\t}}\n\treturn n, nil\n}}\n\n{TOTAL_OK}"
            )),
            vec![
                "the test binary timed out in TestSquare: test timed out after 10s",
                "in grains.Square)",
            ],
            Some("TestTotal"),
        ),
        (
            "an os.Exit in the middle of a test",
            grains_go(&format!(
                "import \"os\"\n\nfunc Square(number int) (uint64, error) {{\n\tif number < 1 || number > 64 {{\n\t\tos.Exit(3)\n\t}}\n\treturn 1 << uint(number-1), nil\n}}\n\n{TOTAL_OK}"
            )),
            vec!["the test binary exited in TestSquare: it ended without a report"],
            Some("TestTotal"),
        ),
        (
            "a build failure",
            grains_go(&format!(
                "import \"errors\"\n\n{SQUARE_OK}\nfunc Total() uint64 {{\n\treturn \"all of them\"\n}}\n"
            )),
            vec!["the test binary did not build: grains.go:", "cannot use \"all of them\""],
            Some("TestTotal"),
        ),
    ];
    for (what, source, crash, unreported) in cases {
        let card = grade(p, &p.sample_dir(), &[("grains.go", Some(&source))]);
        eprintln!("{what}: {:?}", card.receipt.runs.iter().map(|r| &r.crash).collect::<Vec<_>>());
        assert_crash(&card, "hidden", &crash, unreported, "close");
    }
}

/// The client of retry-ticket-go, with `find` replaced by `with`.
fn client(find: &str, with: &str) -> String {
    let sample = fs::read_to_string(retry_go().sample_dir().join("client.go")).unwrap();
    assert!(sample.contains(find), "{find}");
    sample.replacen(find, with, 1)
}

/// Crash kinds on retry-ticket-go, judged apart (its tests are top-level
/// functions sharing a loopback partner): a panic in the call the test
/// made is raised again in the test binary, named with the candidate's
/// frame; every hidden step fails where the client crashes, and none is
/// tampering. (A deadlock while the package
/// initialises is no runtime "fatal error" here: with `net/http` linked
/// the binary hangs, and the step's wall limit stops it, which is failing
/// too; the grains packet has the fatal error.)
#[test]
fn retry_ticket_go_crashes_fail_without_accusation() {
    let p = retry_go();
    let fetch = "\tdelay := firstDelay\n";
    let all = ["contract", "retry", "backoff", "url"];
    let cases: Vec<(&str, String, Vec<&str>, &[&str])> = vec![(
        "a nil map written on every fetch",
        client(fetch, "\tvar seen map[string]int\n\tseen[url]++\n\tdelay := firstDelay\n"),
        vec!["the test binary panicked in ", ": assignment to entry in nil map", "(at client.go:"],
        &all,
    )];
    // Judged apart, a crash that ends the host (a goroutine's panic, an
    // os.Exit) fails the calls it was serving, saying so, and the next
    // call starts a new host; a package that does not compile is refused
    // before any test, naming the error.
    let ended: Vec<(&str, String, Vec<&str>, &[&str])> = vec![
        (
            "a panic in a goroutine the client starts",
            client(
                fetch,
                "\tgo func() { panic(\"background refresh failed\") }()\n\ttime.Sleep(50 * time.Millisecond)\n\tdelay := firstDelay\n",
            ),
            vec!["the host ended during the call", "background refresh failed"],
            &["contract", "retry", "backoff"],
        ),
        (
            "an os.Exit on a 404",
            client(
                "\tif resp.StatusCode < 200 || resp.StatusCode > 299 {\n",
                "\tif resp.StatusCode == http.StatusNotFound {\n\t\tos.Exit(1)\n\t}\n\tif resp.StatusCode < 200 || resp.StatusCode > 299 {\n",
            )
            .replace("\t\"io\"\n", "\t\"io\"\n\t\"os\"\n"),
            vec!["the host ended during the call"],
            &["contract", "retry"],
        ),
        (
            "a build failure",
            client("\tdelay := firstDelay\n", "\tdelay := firstDelay\n\tunused := 1\n"),
            vec!["client.go:", "unused"],
            &all,
        ),
    ];
    for (what, source, said, steps) in ended {
        let card = grade(p, &p.sample_dir(), &[("client.go", Some(&source))]);
        let described = describe(&card);
        assert!(
            card.findings.iter().all(|f| f.id != "evidence-tampering"),
            "{what}: accused\n{described}"
        );
        assert_eq!(card.scoring.decision, "close", "{what}\n{described}");
        for step in steps {
            let run = card.receipt.runs.iter().find(|r| r.id == format!("step:{step}")).unwrap();
            let text = format!(
                "{:?} {} {} {:?}",
                run.crash,
                run.stdout_tail,
                run.stderr_tail,
                run.tests.iter().flatten().map(|t| t.message.clone()).collect::<Vec<_>>()
            );
            assert!(
                said.iter().all(|s| text.contains(s)),
                "{what}: step {step}: {said:?}\n{described}"
            );
            assert!(
                run.tests.iter().flatten().any(|t| t.status != TestStatus::Passed),
                "{what}: step {step}\n{described}"
            );
        }
    }
    for (what, source, crash, steps) in cases {
        let card = grade(p, &p.sample_dir(), &[("client.go", Some(&source))]);
        eprintln!("{what}: {:?}", card.receipt.runs.iter().map(|r| &r.crash).collect::<Vec<_>>());
        assert!(
            card.findings.iter().all(|f| f.id != "evidence-tampering"),
            "{what}: accused\n{}",
            describe(&card)
        );
        assert_eq!(card.scoring.decision, "close", "{what}\n{}", describe(&card));
        // Every hidden step that reaches the crash crashed and said so.
        for step in steps {
            let run = card.receipt.runs.iter().find(|r| r.id == format!("step:{step}")).unwrap();
            let line = run.crash.as_deref().unwrap_or_default();
            assert!(
                crash.iter().all(|c| line.contains(c)),
                "{what}: step {step}: {line:?}\n{}",
                describe(&card)
            );
            assert!(
                (run.tests.iter().flatten()).any(|t| t.status == TestStatus::Error
                    && t.message
                        .as_deref()
                        .is_some_and(|m| m.starts_with("not run: the test binary"))),
                "{what}: step {step}: no unreported test says why\n{}",
                describe(&card)
            );
        }
    }
}

/// Forged passes, then a crash: the client that does not retry prints a
/// pass for every test function the package's test files define (the
/// planted names included, read from the files the runner copied in),
/// then "crashes", with a fake panic banner or a real panic. A crash only
/// turns unreported tests into failures: what was forged is still judged
/// (a twin passed beside its test, the canary that cannot pass passed),
/// so the forgery is caught and gains nothing.
#[test]
fn forged_passes_then_a_crash_are_still_tampering() {
    // Shared (judged apart, the candidate's output never reaches the
    // runner as results: `judge_go.rs`).
    let (_keep, shared) = crate::shared_copy(&retry_go().root);
    let p = &shared;
    let no_retry = fs::read_to_string(p.root.join("starter/client.go")).unwrap();
    for (what, end) in [
        (
            "a fake panic banner and exit 2",
            "\tfmt.Print(\"panic: Please implement the FetchJSON function\\n\\ngoroutine 1 [running]:\\nmain.main()\\n\")\n\tos.Exit(2)\n",
        ),
        ("a real panic", "\tpanic(\"Please implement the FetchJSON function\")\n"),
    ] {
        let forge = format!(
            "package ticket\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"regexp\"\n\t\"path/filepath\"\n)\n\nfunc init() {{\n\tfiles, _ := filepath.Glob(\"*_test.go\")\n\tfor _, f := range files {{\n\t\ttext, _ := os.ReadFile(f)\n\t\tfor _, m := range regexp.MustCompile(`(?m)^func (Test\\w+)\\(`).FindAllSubmatch(text, -1) {{\n\t\t\tfmt.Printf(\"=== RUN   %s\\n--- PASS: %s (0.00s)\\n\", m[1], m[1])\n\t\t}}\n\t}}\n{end}}}\n"
        );
        let card = grade(
            p,
            &p.sample_dir(),
            &[("client.go", Some(&no_retry)), ("zz_forge.go", Some(&forge))],
        );
        let what_card = describe(&card);
        assert_eq!(card.scoring.decision, "close", "{what}\n{what_card}");
        let tampering = card.findings.iter().find(|f| f.id == "evidence-tampering");
        let evidence = tampering.map(|f| f.evidence.join("\n")).unwrap_or_default();
        assert!(
            evidence.contains("canary:"),
            "{what}: the forged passes were not caught\n{what_card}"
        );
        // Nothing forged counted: every hidden test failed.
        for step in ["contract", "retry", "backoff", "url"] {
            assert!(
                step_tests(&card, step).iter().all(|t| t.status != TestStatus::Passed),
                "{what}: step {step}\n{what_card}"
            );
        }
    }
}

// ------------------------------------------------------------ TypeScript

/// lang_node.rs's small packet under a slug of its own.
fn node_mini_manifest() -> String {
    crate::lang_node::MINI
        .replacen("slug = \"node-mini\"", "slug = \"node-crash-mini\"", 1)
        .replacen("The forgery tests' packet.", "The crash tests' packet.", 1)
}

const PY_MINI: &str = r#"
[packet]
slug = "py-crash-mini"
version = "1.0.0"
title = "token-bucket, its hidden tests only"
summary = "The crash tests' packet."

[limits]
wall_secs = 60

[commands]
test = "python3 -m unittest -q test_bucket"

[[step]]
id = "hidden"
title = "hidden checks, through pytest"
run = "python3 -m pytest -q -p no:cacheprovider --noconftest -o addopts= --junitxml=.gatehouse/hidden.xml test_hidden_bucket.py"
lay = ["test_hidden_bucket.py"]
junit = ".gatehouse/hidden.xml"

[[step]]
id = "hidden-unittest"
title = "hidden checks, through unittest"
run = "python3 -m unittest -q test_hidden_bucket"
lay = ["test_hidden_bucket.py"]

[[criterion]]
id = "correctness"
title = "Correctness"
max = 1
mode = "auto"
from = { tests = "hidden" }
levels = ["a held-out check fails", "all held-out checks pass"]

[[band]]
min = 1
decision = "keep"

[[band]]
min = 0
decision = "drop"
"#;

/// A packet `name` of `slug`'s starter, sample and hidden tests with
/// `manifest`, written once per test binary.
fn mini(slug: &str, name: &str, manifest: &str) -> (tempfile::TempDir, Packet) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(name);
    for part in ["starter", "sample", "hidden"] {
        copy_path(&packets_dir().join(slug).join(part), &dir.join(part)).unwrap();
    }
    fs::write(dir.join("prompt.md"), "# The crash tests' packet\n").unwrap();
    fs::write(dir.join("packet.toml"), manifest).unwrap();
    let packet = load(&dir);
    (tmp, packet)
}

fn node_mini() -> &'static Packet {
    static P: OnceLock<(tempfile::TempDir, Packet)> = OnceLock::new();
    &P.get_or_init(|| mini("token-bucket-ts", "node-crash-mini", &node_mini_manifest())).1
}

fn py_mini() -> &'static Packet {
    static P: OnceLock<(tempfile::TempDir, Packet)> = OnceLock::new();
    &P.get_or_init(|| mini("token-bucket", "py-crash-mini", PY_MINI)).1
}

/// The sample's bucket.ts with `line` first in `allow()`, or `top` after it.
fn bucket_ts(line: &str, top: &str) -> String {
    let sample = fs::read_to_string(node_mini().sample_dir().join("src/bucket.ts")).unwrap();
    let marker = "  allow(n = 1): boolean {\n";
    assert!(sample.contains(marker));
    format!("{}\n{top}\n", sample.replacen(marker, &format!("{marker}    {line}\n"), 1))
}

#[test]
fn typescript_crashes_fail_without_accusation() {
    let p = node_mini();
    let card = grade(p, &p.sample_dir(), &[]);
    assert_eq!(card.scoring.decision, "keep", "{}", describe(&card));
    assert!(
        card.findings.is_empty() && card.receipt.runs[0].crash.is_none(),
        "{}",
        describe(&card)
    );
    let unreported = "burst_one_at_a_time";
    for (what, source, crash) in [
        (
            "an unhandled rejection at import",
            bucket_ts("", "Promise.reject(new Error(\"rejected at import\"));"),
            vec![
                "the test process died of an uncaught exception",
                "Error: rejected at import",
                "(at src/bucket.ts in its top level)",
            ],
        ),
        (
            "an exit in the middle of a test",
            bucket_ts("if (n === 3) process.exit(1);", ""),
            vec!["the test process exited: exit status 1"],
        ),
        (
            "killed by a signal",
            bucket_ts("process.kill(process.pid, \"SIGKILL\");", ""),
            vec!["the test process was killed: killed by SIGKILL"],
        ),
        (
            "an abort",
            bucket_ts("process.abort();", ""),
            vec!["the test process was killed", "killed by SIGABRT", "(at src/bucket.ts in allow)"],
        ),
    ] {
        let card = grade(p, &p.sample_dir(), &[("src/bucket.ts", Some(&source))]);
        eprintln!("{what}: {:?}", card.receipt.runs.iter().map(|r| &r.crash).collect::<Vec<_>>());
        assert_crash(&card, "hidden", &crash, Some(unreported), "drop");
    }
    // An exception thrown at import and a compile error stop the test
    // file from loading: its tests fail, "collection failed", no crash of
    // the process and no accusation.
    for (what, source, why) in [
        (
            "a throw at import",
            bucket_ts("", "throw new Error(\"boom at import\");"),
            "Error: boom at import",
        ),
        ("a compile error", bucket_ts("", "export class {"), "does not compile"),
    ] {
        let card = grade(p, &p.sample_dir(), &[("src/bucket.ts", Some(&source))]);
        let what_card = describe(&card);
        assert!(card.findings.iter().all(|f| f.id != "evidence-tampering"), "{what}: {what_card}");
        assert_eq!(card.scoring.decision, "drop", "{what}: {what_card}");
        let t = test(&card, "hidden", unreported);
        let message = t.message.as_deref().unwrap_or_default();
        assert!(
            message.starts_with("not run: collection failed") && message.contains(why),
            "{what}: {message}"
        );
    }
}

// ---------------------------------------------------------------- Python

/// The sample's bucket.py with `line` first in `allow()` (after its
/// docstring), or `top` after the module.
fn bucket_py(line: &str, top: &str) -> String {
    let sample = fs::read_to_string(py_mini().sample_dir().join("bucket.py")).unwrap();
    let marker =
        "        \"\"\"Take n tokens and return True, or return False and take nothing.\"\"\"\n";
    assert!(sample.contains(marker));
    format!("{}\n{top}\n", sample.replacen(marker, &format!("{marker}        {line}\n"), 1))
}

/// Judged apart (issue #44), the candidate's code runs in a host process:
/// its crash ends the host, never the test process. Every test that called
/// into it fails, named with how the host ended and where; the next call
/// starts a fresh host; the run's crash line names it for the reviewer.
#[test]
fn python_crashes_fail_without_accusation() {
    let p = py_mini();
    let card = grade(p, &p.sample_dir(), &[]);
    assert_eq!(card.scoring.decision, "keep", "{}", describe(&card));
    assert!(card.findings.is_empty(), "{}", describe(&card));
    for (what, source, crash) in [
        (
            "a segfault in a C extension",
            bucket_py("import ctypes; ctypes.string_at(0)", ""),
            vec![
                "the candidate's process was killed by SIGSEGV during TokenBucket.allow()",
                "(at bucket.py:",
            ],
        ),
        (
            "a process that kills itself",
            bucket_py("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", ""),
            vec!["the candidate's process was killed by SIGKILL during TokenBucket.allow()"],
        ),
        (
            "an exit in the middle of a test",
            bucket_py("import os; os._exit(3)", ""),
            vec!["the candidate's process exited with status 3 during TokenBucket.allow()"],
        ),
    ] {
        let card = grade(p, &p.sample_dir(), &[("bucket.py", Some(&source))]);
        let shown = describe(&card);
        assert!(
            card.findings.iter().all(|f| f.id != "evidence-tampering"),
            "{what}: accused: {shown}"
        );
        assert_eq!(card.scoring.decision, "drop", "{what}: {shown}");
        for step in ["hidden", "hidden-unittest"] {
            let run = card.receipt.runs.iter().find(|r| r.id == format!("step:{step}")).unwrap();
            assert_eq!(
                card.receipt.judged.get(&run.id).map(String::as_str),
                Some("apart"),
                "{what}: {shown}"
            );
            let line = run
                .crash
                .as_deref()
                .unwrap_or_else(|| panic!("{what}: {step}: no crash named: {shown}"));
            for part in &crash {
                assert!(
                    line.contains(part),
                    "{what}: {step}: the crash line lacks {part:?}: {line}"
                );
            }
            let t = test(&card, step, "test_fractional_quarters_accumulate");
            let message = t.message.as_deref().unwrap_or_default();
            assert!(
                matches!(t.status, TestStatus::Failed | TestStatus::Error)
                    && message.contains(crash[0]),
                "{what}: {step}: {:?} {message}",
                t.status
            );
            assert!(
                step_tests(&card, step).iter().all(|t| t.status != TestStatus::Passed
                    || !t.message.as_deref().unwrap_or_default().contains("not run")),
                "{what}: {shown}"
            );
        }
    }
    // RecursionError at import: the module does not load; its tests fail.
    let source = bucket_py("", "def _deeper(n):\n    return _deeper(n + 1)\n\n\n_deeper(0)");
    let card = grade(p, &p.sample_dir(), &[("bucket.py", Some(&source))]);
    let what = describe(&card);
    assert!(card.findings.iter().all(|f| f.id != "evidence-tampering"), "{what}");
    assert_eq!(card.scoring.decision, "drop", "{what}");
    let t = test(&card, "hidden", "test_fractional_quarters_accumulate");
    let message = t.message.as_deref().unwrap_or_default();
    assert!(
        message.starts_with("not run: collection failed") && message.contains("RecursionError"),
        "{message}\n{what}"
    );
}
