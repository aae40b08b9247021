//! Trusted runners: how the grader runs the commands whose results it
//! scores, so that files of the submission cannot stand in for the test
//! runner, and how it reads and cross-checks what the runner reported.
//!
//! A packet command of the plain form `python3 -m pytest ARGS`, `python3 -m
//! unittest ARGS`, `pytest ARGS` or `python3 .gatehouse/SCRIPT.py ARGS`
//! (plain words, no shell syntax) is not handed to a shell as written: it
//! runs as `python3 -I -B --check-hash-based-pycs always /gatehouse/gatehouse_runner.py KIND ARGS`, where
//! `/gatehouse` is a read-only mount of the grader's own tools
//! (`harness/gatehouse_runner.py`, `harness/gatehouse_harness.py`, an empty
//! `pytest.ini`). `-I` keeps the workspace, `PYTHON*` variables and user
//! site-packages off `sys.path`; the runner appends the workspace at the end
//! of `sys.path` once pytest and the standard library are loaded. Any other
//! command is shell text and runs as written; `packet check` lints test
//! commands that are not in a trusted form.
//!
//! The runner streams one JSON record per result to file descriptor 3, a
//! pipe the sandbox reads from outside (`RunSpec::channel`). Records carry a
//! per-run nonce the runner erases from its environment before any
//! candidate code is imported. [`RunnerResult::cross_check`] compares the
//! stream with the process's exit status, the JUnit file the command names,
//! and the test ids the packet's hidden tests define; every disagreement is
//! a sign of tampering, reported as the platform-wide failure
//! `evidence-tampering`, and the run never counts as a pass. A test process
//! that crashed fails the tests it did not report and is no sign by
//! itself; how a run ended is decided in one place ([`ending`]).
//!
//! `plan` decides whether a command runs through a trusted runner and spells
//! its command; `RunnerResult` parses and cross-checks what the runner
//! streamed: cases (with xfail and xpass marks and where a skip was raised),
//! the audit hook's events and the framework changes it undid. Pure apart from
//! writing the tools folder.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::evidence::{TestOutcome, TestStatus};
use crate::sandbox::{Exit, RunReport};

mod command;
mod ending;
pub use command::{Plan, fail_fast, plan};
pub use ending::{Crash, CrashKind, Ending, ending, stopped};

/// The harness packet driver scripts import (`packets/FORMAT.md`).
pub const HARNESS: &str = include_str!("../../harness/gatehouse_harness.py");

/// Where the grader's tools are mounted, read-only, inside every run.
pub const TOOLS_MOUNT: &str = "/gatehouse";

/// The confining launcher the harness starts candidate commands through
/// (Landlock: no writes outside `/workspace` and `/tmp`, so never to
/// `/evidence`).
pub const CONFINE: &str = include_str!("../../harness/gatehouse_confine.py");

/// The trusted runner itself.
pub const RUNNER: &str = include_str!("../../harness/gatehouse_runner.py");
/// The interpreter's flags for the runner: isolated mode (no workspace,
/// `PYTHON*` variables or user site-packages on `sys.path`), no bytecode
/// written (`-B`), and every hash-based cache checked against its source.
/// With the submission's bytecode set aside at ingestion, the workspace
/// holds no cache but what the run itself writes: only the source runs.
/// (A `pycache_prefix` would make every run recompile the standard library
/// and pytest, three times the CPU of a run.)
pub const RUNNER_FLAGS: &str = "-I -B --check-hash-based-pycs always";

/// The judge apart (JUDGE.md): the judge's side, loaded by the runner in
/// judge mode; the host supervisor and server, started by the sandbox under
/// the candidate's uid; the wire both speak.
pub const JUDGE: &str = include_str!("../../harness/gatehouse_judge.py");
pub const HOST: &str = include_str!("../../harness/gatehouse_host.py");
pub const WIRE: &str = include_str!("../../harness/gatehouse_wire.py");

/// The canary twin generator (see `canary`).
pub const TWINS: &str = include_str!("../../harness/gatehouse_twins.py");
/// The bytecode checker (see `bytecode`).
pub const PYC_CHECK: &str = include_str!("../../harness/gatehouse_pyc.py");
/// The runner's pytest configuration (empty: the submission's ini files
/// never configure a grading run).
pub const RUNNER_INI: &str = include_str!("../../harness/pytest.ini");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunnerKind {
    Pytest,
    Unittest,
    Script,
    /// `node --test` / `npm test` of a TypeScript packet (`lang_node`).
    NodeTest,
    /// `go test ARGS` (see `lang_go`).
    GoTest,
}

impl RunnerKind {
    pub fn word(self) -> &'static str {
        match self {
            RunnerKind::Pytest => "pytest",
            RunnerKind::Unittest => "unittest",
            RunnerKind::Script => "script",
            RunnerKind::NodeTest => "node-test",
            RunnerKind::GoTest => "gotest",
        }
    }
}

/// Writes the tools mounted at [`TOOLS_MOUNT`] into `dir`.
pub fn write_tools(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (name, text) in [
        ("gatehouse_runner.py", RUNNER),
        ("pytest.ini", RUNNER_INI),
        ("gatehouse_harness.py", HARNESS),
        ("gatehouse_confine.py", CONFINE),
        ("gatehouse_judge.py", JUDGE),
        ("gatehouse_host.py", HOST),
        ("gatehouse_wire.py", WIRE),
        ("gatehouse_twins.py", TWINS),
        ("gatehouse_pyc.py", PYC_CHECK),
    ]
    .into_iter()
    .chain(crate::lang::node::TOOLS)
    .chain([
        (crate::lang::go::RUNNER_FILE, crate::lang::go::RUNNER),
        (crate::lang::go::TWINS_FILE, crate::lang::go::TWINS),
        (crate::lang::node::AUDIT_FILE, crate::lang::node::AUDIT),
        (crate::lang::go::AUDIT_FILE, crate::lang::go::AUDIT),
    ])
    .chain(crate::lang::go::APART_TOOLS)
    {
        std::fs::write(dir.join(name), text)?;
    }
    Ok(())
}

/// Compiles the Python tools in `dir` to bytecode with `python` (the
/// sandbox's interpreter), so that no run compiles them again: every run of
/// the trusted runner imports several of them, and a run judged apart
/// starts the host supervisor too. The bytecode is *checked* hash-based
/// (`__pycache__/NAME.cpython-XY.pyc`): the interpreter uses it only while
/// its recorded hash matches the source beside it (the runner's
/// `--check-hash-based-pycs always` and the supervisor's default both check
/// it), and an interpreter of another version ignores it. Written before
/// any run, in a folder runs cannot write. Best effort: without it the
/// tools compile from source at each import, as before.
pub fn compile_tools(python: &Path, dir: &Path) -> io::Result<()> {
    const COMPILE: &str = "import os, sys, py_compile\n\
        d = sys.argv[1]\n\
        for n in sorted(os.listdir(d)):\n    \
            if n.endswith('.py'):\n        \
                py_compile.compile(os.path.join(d, n), doraise=True, \
                invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)\n";
    let out = std::process::Command::new(python)
        .args(["-I", "-S", "-c", COMPILE])
        .arg(dir)
        .env_clear()
        .env("LANG", "C.UTF-8")
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{} could not compile the tools: {}",
            python.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// A fresh folder of tools for one grader; removed when dropped, and a
/// [`crate::workdir::WorkDir`], so a sweep removes it once its process is
/// gone, however it died.
pub fn tools_dir() -> io::Result<crate::workdir::WorkDir> {
    let dir = crate::workdir::WorkDir::new("gatehouse-tools-")?;
    write_tools(dir.path())?;
    // The run's uid reads and executes; nobody but root writes.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

/// What a test's status alone does not say: an expected failure or an
/// unexpected pass (pytest's xfail and xpass, unittest's expected failure
/// and unexpected success), and where a skip or an xfail was raised.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaseMark {
    /// `xfailed` or `xpassed`, when the runner said so.
    pub outcome: Option<String>,
    /// `file:line` of the innermost frame that raised the skip or xfail
    /// (not the framework's own), and whose file it is (`candidate`,
    /// `grader`, `library`).
    pub raised_in: Option<String>,
    pub raised_by: Option<String>,
    /// Whose file the test itself is in (`grader` for a file the grader
    /// laid, wherever a packet command copied it).
    pub test_by: Option<String>,
}

/// One event of the runner's audit hook (see `harness/gatehouse_runner.py`):
/// the candidate's code did something honest code has no reason to do while
/// tests run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEvent {
    /// `frames`, `gc`, `trace`, `code-swap`, `defaults-swap`, `code-new`,
    /// `class-patch`, `ctypes`, `audit-hook`, `open`, `open-via-library`.
    pub kind: String,
    pub detail: String,
    pub file: String,
    pub line: u32,
    /// `direct`: the candidate's own line did it; `library`: a library
    /// function its line called did.
    pub via: String,
    /// The test running at the time (empty during collection).
    pub test: String,
}

/// A callable of the test framework or the runner found replaced or
/// removed (and put back) after collection or a test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntegrityChange {
    pub what: String,
    pub change: String,
    pub test: String,
}

/// What the trusted runner reported on its channel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunnerResult {
    pub started: bool,
    /// The runner's own exit code, from its `end` record.
    pub end: Option<i32>,
    /// Test ids collected, when the runner reported its collection.
    pub collected: Option<Vec<String>>,
    /// Each finished test, in order, keyed by its id.
    pub cases: Vec<(String, TestOutcome)>,
    /// What each finished test cost in microseconds, from its start to its
    /// report (its failure report included), as the runner timed it. Only
    /// calibration reads it, on the packet's own sample: it weighs twins.
    pub cost_us: BTreeMap<String, u64>,
    /// Collection errors (a module that did not import): id and message.
    pub collect_errors: Vec<(String, String)>,
    /// The crash of the process that ran the tests, as the runner saw it
    /// (a `crash` record: Go's runner reads it from the test binary's
    /// output, Node's from how its test process ended). See [`ending`].
    pub crash: Option<Crash>,
    /// The test the runner started last and has not reported (its `run`
    /// records): the one a process that died with the runner died in.
    pub running: Option<String>,
    /// Modules skipped at collection, with where the skip was raised.
    pub collect_skips: Vec<String>,
    pub collect_skip_marks: BTreeMap<String, CaseMark>,
    /// Marks of cases whose status alone does not tell everything.
    pub marks: BTreeMap<String, CaseMark>,
    /// The audit hook's events.
    pub audit: Vec<AuditEvent>,
    /// Framework callables found changed.
    pub integrity: Vec<IntegrityChange>,
    /// The workspace's own pytest plugins that loaded (`conftest.py`
    /// files), with the hooks they implement.
    pub plugins: Vec<(String, Vec<String>)>,
    /// Lines on the channel that the runner did not write (wrong nonce,
    /// not JSON): someone else wrote to the result channel.
    pub foreign_lines: usize,
    /// The channel overflowed its cap.
    pub truncated: bool,
    /// The runner ran as the judge (JUDGE.md): the candidate's code only in
    /// the host process.
    pub judge: bool,
    /// What crossed between the judge and the host: calls, callbacks,
    /// hosts started, programs spawned.
    pub judge_counts: BTreeMap<String, u64>,
    /// Hosts that ended mid-call in a run judged apart (a crash, a hang, a
    /// broken message), each as the judge named it, with the test running.
    pub host_endings: Vec<HostEnding>,
}

/// A host of a run judged apart that ended while the judge waited for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEnding {
    /// `signal`, `exit`, `hang` or `wire`.
    pub kind: String,
    /// What the judge said, with the call it was waiting for and the first
    /// frame in the candidate's code when its fault handler wrote one.
    pub message: String,
    /// The test running at the time (empty during collection).
    pub test: String,
}

impl RunnerResult {
    /// How the candidate's processes ended in a run judged apart, in one
    /// line for the receipt: the first ending and how many more there were.
    pub fn host_crash(&self) -> Option<String> {
        let first = self.host_endings.first()?;
        let mut line = first.message.clone();
        if !first.test.is_empty() {
            line.push_str(&format!(", in {}", first.test));
        }
        let more = self.host_endings.len() - 1;
        if more > 0 {
            line.push_str(&format!(" (and {more} more time{})", if more == 1 { "" } else { "s" }));
        }
        Some(line)
    }
}

#[derive(Deserialize)]
struct Record {
    t: String,
    nonce: String,
    #[serde(default)]
    id: String,
    #[serde(default)]
    classname: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    exit: Option<i32>,
    #[serde(default)]
    ids: Option<Vec<String>>,
    #[serde(default)]
    raised_in: Option<String>,
    #[serde(default)]
    raised_by: Option<String>,
    #[serde(default)]
    test_by: Option<String>,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    detail: String,
    #[serde(default)]
    file: String,
    #[serde(default)]
    line: u32,
    #[serde(default)]
    via: String,
    #[serde(default)]
    test: String,
    #[serde(default)]
    what: String,
    #[serde(default)]
    change: String,
    #[serde(default)]
    hooks: Vec<String>,
    #[serde(default)]
    us: Option<u64>,
    #[serde(default)]
    counts: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    frame: String,
}

/// At most this many audit and integrity records are kept from one run.
pub const MAX_AUDIT: usize = 200;

/// At most this many cases are kept from one run; the rest are counted.
pub const MAX_CASES: usize = 5000;

impl RunnerResult {
    /// Parses the channel's bytes; only records carrying `nonce` count.
    pub fn parse(bytes: &[u8], nonce: &str, truncated: bool) -> RunnerResult {
        let mut out = RunnerResult { truncated, ..RunnerResult::default() };
        let text = String::from_utf8_lossy(bytes);
        for line in text.lines() {
            if line.trim().is_empty() {
                continue;
            }
            let rec: Record = match serde_json::from_str(line) {
                Ok(r) => r,
                Err(_) => {
                    out.foreign_lines += 1;
                    continue;
                }
            };
            // The runner writes `start` first, once, and nothing after `end`:
            // anything else came from someone who learned the nonce (a
            // prelude's process, say).
            if rec.nonce != nonce || out.end.is_some() || (rec.t == "start") == out.started {
                out.foreign_lines += 1;
                continue;
            }
            let message = (!rec.message.is_empty())
                .then(|| rec.message.chars().take(200).collect::<String>());
            match rec.t.as_str() {
                "start" => out.started = true,
                "judge" => out.judge = true,
                "host-ended" => {
                    if out.host_endings.len() < MAX_AUDIT {
                        let clip = |s: &str| s.chars().take(400).collect::<String>();
                        out.host_endings.push(HostEnding {
                            kind: clip(&rec.kind),
                            message: clip(&rec.message),
                            test: clip(&rec.test),
                        });
                    }
                }
                "judge-counts" => {
                    out.judge_counts = (rec.counts.iter())
                        .take(16)
                        .filter_map(|(k, v)| Some((k.chars().take(40).collect(), v.as_u64()?)))
                        .collect()
                }
                "end" => out.end = Some(rec.exit.unwrap_or(-1)),
                "collected" => {
                    out.collected = rec.ids.map(|mut v| {
                        v.truncate(MAX_CASES);
                        v
                    })
                }
                "collect-error" => out.collect_errors.push((rec.id, message.unwrap_or_default())),
                // The first crash counts: what follows it is its aftermath.
                "crash" if out.crash.is_none() => {
                    let clip = |s: &str, n: usize| s.chars().take(n).collect::<String>();
                    out.crash = Some(Crash {
                        kind: CrashKind::from_word(&rec.kind),
                        test: (!rec.test.is_empty()).then(|| clip(&rec.test, 300)),
                        message: message.unwrap_or_default(),
                        frame: (!rec.frame.is_empty()).then(|| clip(&rec.frame, 200)),
                    })
                }
                "crash" => {}
                "run" => out.running = Some(rec.id.chars().take(300).collect()),
                "collect-skip" => {
                    if rec.raised_in.is_some() {
                        out.collect_skip_marks.insert(
                            rec.id.clone(),
                            CaseMark {
                                outcome: None,
                                raised_in: rec.raised_in.clone(),
                                raised_by: rec.raised_by.clone(),
                                test_by: rec.test_by.clone(),
                            },
                        );
                    }
                    out.collect_skips.push(rec.id)
                }
                "audit" => {
                    if out.audit.len() < MAX_AUDIT {
                        let clip = |s: &str| s.chars().take(300).collect::<String>();
                        out.audit.push(AuditEvent {
                            kind: clip(&rec.kind),
                            detail: clip(&rec.detail),
                            file: clip(&rec.file),
                            line: rec.line,
                            via: clip(&rec.via),
                            test: clip(&rec.test),
                        });
                    }
                }
                "plugin" => {
                    if out.plugins.len() < MAX_AUDIT {
                        let clip = |s: &str| s.chars().take(200).collect::<String>();
                        out.plugins.push((
                            clip(&rec.file),
                            rec.hooks.iter().take(40).map(|h| clip(h)).collect(),
                        ));
                    }
                }
                "integrity" => {
                    if out.integrity.len() < MAX_AUDIT {
                        let clip = |s: &str| s.chars().take(300).collect::<String>();
                        out.integrity.push(IntegrityChange {
                            what: clip(&rec.what),
                            change: clip(&rec.change),
                            test: clip(&rec.test),
                        });
                    }
                }
                "case" => {
                    // JUnit's view: an xfail is skipped, an xpass passed;
                    // the mark keeps the difference.
                    let status = match rec.status.as_str() {
                        "passed" | "xpassed" => TestStatus::Passed,
                        "failed" => TestStatus::Failed,
                        "skipped" | "xfailed" => TestStatus::Skipped,
                        _ => TestStatus::Error,
                    };
                    let outcome = matches!(rec.status.as_str(), "xfailed" | "xpassed")
                        .then(|| rec.status.clone());
                    if (outcome.is_some() || rec.raised_in.is_some()) && out.marks.len() < MAX_CASES
                    {
                        out.marks.insert(
                            rec.id.clone(),
                            CaseMark {
                                outcome,
                                raised_in: rec.raised_in.clone(),
                                raised_by: rec.raised_by.clone(),
                                test_by: rec.test_by.clone(),
                            },
                        );
                    }
                    if out.running.as_deref() == Some(rec.id.as_str()) {
                        out.running = None;
                    }
                    if out.cases.len() < MAX_CASES {
                        if let Some(us) = rec.us {
                            out.cost_us.insert(rec.id.clone(), us);
                        }
                        out.cases.push((
                            rec.id,
                            TestOutcome {
                                classname: rec.classname,
                                name: rec.name,
                                status,
                                message,
                            },
                        ));
                    }
                }
                _ => out.foreign_lines += 1,
            }
        }
        out
    }

    /// Whether the runner reported a crash in a run that failed (a crash
    /// is only a crash there; see [`ending`]).
    pub fn crashed(&self) -> bool {
        self.crash.is_some() && self.end.is_some_and(|e| e != 0)
    }

    /// The runner's verdict: it finished, said 0, and reported no failure.
    pub fn passed(&self) -> bool {
        self.end == Some(0)
            && self.collect_errors.is_empty()
            && self
                .cases
                .iter()
                .all(|(_, c)| matches!(c.status, TestStatus::Passed | TestStatus::Skipped))
    }

    /// The test outcomes to score: what the runner reported (the test a
    /// crash happened in saying so), plus every expected test it did not
    /// report, as an error saying why (see [`Ending::not_run`]).
    pub fn outcomes(
        &self,
        kind: RunnerKind,
        expected: Option<&BTreeSet<String>>,
        report: &RunReport,
    ) -> Vec<TestOutcome> {
        let ending = ending(self, kind, report);
        let mut out: Vec<TestOutcome> = self
            .cases
            .iter()
            .map(|(id, c)| {
                let mut c = c.clone();
                if matches!(c.status, TestStatus::Failed | TestStatus::Error)
                    && let Some(here) = ending.here(id)
                {
                    c.message = Some(here.chars().take(300).collect());
                }
                c
            })
            .collect();
        if let Some(expected) = expected {
            let seen: BTreeSet<&str> = self.cases.iter().map(|(id, _)| id.as_str()).collect();
            for id in expected.iter().filter(|id| !seen.contains(id.as_str())) {
                let (classname, name) = split_id(id);
                out.push(TestOutcome {
                    classname,
                    name,
                    status: TestStatus::Error,
                    message: Some(ending.not_run(id).chars().take(300).collect()),
                });
            }
        }
        out
    }

    /// Every disagreement between the stream, the process and the other
    /// evidence, as sentences; empty when the run is consistent.
    pub fn cross_check(
        &self,
        kind: RunnerKind,
        report: &RunReport,
        junit: Option<&Result<Vec<TestOutcome>, String>>,
        expected: Option<&BTreeSet<String>>,
    ) -> Vec<String> {
        let mut signs = Vec::new();
        if self.foreign_lines > 0 {
            signs.push(format!("{} record(s) on the result channel were not written by the runner (wrong nonce or not a record)", self.foreign_lines));
        }
        // The sandbox stopped the run (a cap, a signal): nothing more to
        // compare; the missing tests count as errors.
        let stopped = report.timed_out
            || report.limit_hit.is_some()
            || matches!(report.exit, Exit::Signal(_));
        let code = match report.exit {
            Exit::Code(c) => Some(c),
            Exit::Signal(_) => None,
        };
        if !self.started {
            if code == Some(0) {
                signs.push("the command exited 0 but the trusted runner never started".into());
            }
            return signs;
        }
        match (self.end, code) {
            (None, Some(0)) if !stopped => signs.push("the process exited 0 before the runner finished (an early exit skipped the rest of the run)".into()),
            // A process killed by a signal after the runner's end (a crash
            // at teardown, `/bin/sh` reporting 128 + N) never forges a
            // success: the results stand, the run failed.
            (Some(e), Some(c)) if e != c && !stopped && !(129..=159).contains(&c) => signs.push(format!("the runner finished with exit status {e} but the process exited with {c}")),
            _ => {}
        }
        if kind == RunnerKind::Script {
            return signs;
        }
        if let Some(0) = self.end {
            let bad: Vec<&str> = self
                .cases
                .iter()
                .filter(|(_, c)| matches!(c.status, TestStatus::Failed | TestStatus::Error))
                .map(|(id, _)| id.as_str())
                .collect();
            if !bad.is_empty() {
                signs.push(format!(
                    "the runner finished with exit status 0 although {} test(s) failed: {}",
                    bad.len(),
                    list(&bad)
                ));
            }
            if self.cases.is_empty() && self.collect_errors.is_empty() {
                signs.push("the runner finished with exit status 0 but ran no test".into());
            }
        }
        if self.end.is_some() {
            if let Some(Ok(file)) = junit {
                let stream: BTreeMap<(String, String), TestStatus> = self
                    .cases
                    .iter()
                    .map(|(_, c)| ((c.classname.clone(), c.name.clone()), c.status))
                    .collect();
                let in_file: BTreeMap<(String, String), TestStatus> = file
                    .iter()
                    .map(|c| ((c.classname.clone(), c.name.clone()), c.status))
                    .collect();
                // A module that failed to collect is an error entry in the
                // file (pytest's mangled address of the module) and a
                // collection error on the stream, not a case.
                let uncollected: BTreeSet<String> = self
                    .collect_errors
                    .iter()
                    .map(|(id, _)| split_id(id.split("::").next().unwrap_or(id)).0)
                    .collect();
                let mut diffs = Vec::new();
                for (key, st) in &in_file {
                    if key.0.is_empty()
                        && *st == TestStatus::Error
                        && uncollected.contains(&key.1)
                        && !stream.contains_key(key)
                    {
                        continue;
                    }
                    match stream.get(key) {
                        None => diffs.push(format!(
                            "{}::{} is {} in the file but was never run",
                            key.0,
                            key.1,
                            st.word()
                        )),
                        Some(s) if s != st => diffs.push(format!(
                            "{}::{} is {} in the file but {} in the run",
                            key.0,
                            key.1,
                            st.word(),
                            s.word()
                        )),
                        _ => {}
                    }
                }
                for key in stream.keys().filter(|k| !in_file.contains_key(*k)) {
                    diffs.push(format!("{}::{} ran but is missing from the file", key.0, key.1));
                }
                if !diffs.is_empty() {
                    let n = diffs.len();
                    diffs.truncate(5);
                    signs.push(format!("the result file disagrees with what the runner reported ({n} difference(s)): {}", diffs.join("; ")));
                }
            } else if let Some(Err(e)) = junit {
                signs.push(format!(
                    "the result file the runner wrote is gone or unreadable after the run: {e}"
                ));
            }
        }
        if kind == RunnerKind::GoTest {
            signs.extend(reported_twice(&self.cases));
        }
        if let Some(expected) = expected {
            let seen: BTreeSet<&str> = self.cases.iter().map(|(id, _)| id.as_str()).collect();
            let added: Vec<&str> =
                seen.iter().copied().filter(|id| !expected.contains(*id)).collect();
            if !added.is_empty() {
                signs.push(format!(
                    "the run reported {} test(s) that the packet's hidden tests do not define: {}",
                    added.len(),
                    list(&added)
                ));
            }
            // A run that crashed, was stopped or did not load a module
            // failed the tests it did not report; it did not leave them out.
            let partial = !ending(self, kind, report).complete();
            let missing: Vec<&str> =
                expected.iter().map(|s| s.as_str()).filter(|id| !seen.contains(id)).collect();
            if !missing.is_empty() && !partial {
                signs.push(format!(
                    "{} test(s) that the packet's hidden tests define were never reported: {}",
                    missing.len(),
                    list(&missing)
                ));
            }
        }
        signs
    }
}

/// A Go run: test2json reports each top-level test once, so a second
/// result for one is a line the test binary printed itself.
fn reported_twice(cases: &[(String, crate::evidence::TestOutcome)]) -> Option<String> {
    let mut seen = std::collections::BTreeSet::new();
    let twice: Vec<&str> =
        cases.iter().map(|(id, _)| id.as_str()).filter(|id| !seen.insert(*id)).collect();
    (!twice.is_empty()).then(|| {
        format!(
            "{} test(s) were reported more than once (a result line printed by the test binary itself): {}",
            twice.len(),
            list(&twice)
        )
    })
}

fn list(ids: &[&str]) -> String {
    let mut s = ids.iter().take(5).copied().collect::<Vec<_>>().join(", ");
    if ids.len() > 5 {
        s.push_str(&format!(" and {} more", ids.len() - 5));
    }
    s
}

/// (classname, name) of a pytest node id, as pytest's JUnit report spells
/// them: `pkg/test_x.py::TestC::test_m[1]` is `pkg.test_x.TestC`, `test_m[1]`.
pub fn split_id(id: &str) -> (String, String) {
    let (path, rest) = id.split_once("::").unwrap_or((id, ""));
    let module = path.strip_suffix(".py").unwrap_or(path).replace('/', ".");
    match rest.rsplit_once("::") {
        Some((cls, name)) => (format!("{module}.{}", cls.replace("::", ".")), name.to_string()),
        None => (module, rest.to_string()),
    }
}

/// The test files a pytest command names: its arguments that are not
/// options, with any `::node` suffix removed.
pub fn pytest_paths(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_next = false;
    for a in args {
        if skip_next {
            skip_next = false;
            continue;
        }
        if a.starts_with('-') {
            // Options that take a separate value.
            skip_next = matches!(
                a.as_str(),
                "-p" | "-k"
                    | "-m"
                    | "-o"
                    | "-c"
                    | "--rootdir"
                    | "--junitxml"
                    | "--junit-xml"
                    | "--basetemp"
                    | "--deselect"
                    | "--ignore"
            );
            continue;
        }
        out.push(a.split("::").next().unwrap_or(a).to_string());
    }
    out
}

/// The JUnit path a pytest command names with `--junitxml`, if any.
pub fn pytest_junit(args: &[String]) -> Option<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        for opt in ["--junitxml", "--junit-xml"] {
            if a == opt {
                return it.next().cloned();
            }
            if let Some(v) = a.strip_prefix(opt).and_then(|r| r.strip_prefix('=')) {
                return Some(v.to_string());
            }
        }
    }
    None
}

/// A fresh nonce for one run (not part of any receipt).
pub fn nonce() -> String {
    let mut bytes = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut bytes);
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    crate::tree::sha256_hex(&[&bytes[..], &t.to_le_bytes()[..]].concat())[..32].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::LimitHit;

    #[test]
    fn go_test_runs_through_the_runner_and_a_test_reported_twice_is_named() {
        let go = plan("go test -count=1 .");
        assert_eq!(go.runner(), Some(RunnerKind::GoTest));
        assert_eq!(go.command(), "python3 -I -B /gatehouse/gatehouse_go_runner.py -count=1 .");
        assert_eq!(plan("go test ./... | tee log").runner(), None);
        let case = |id: &str| {
            let outcome = crate::evidence::TestOutcome {
                classname: "t".into(),
                name: id.into(),
                status: crate::evidence::TestStatus::Passed,
                message: None,
            };
            (id.to_string(), outcome)
        };
        assert_eq!(reported_twice(&[case("t::TestA"), case("t::TestB")]), None);
        let twice = reported_twice(&[case("t::TestA"), case("t::TestB"), case("t::TestA")]);
        assert!(twice.is_some_and(|s| s.starts_with("1 test(s)") && s.ends_with("t::TestA")));
    }

    #[test]
    fn fail_fast_adds_each_runners_own_flag_and_leaves_other_commands_alone() {
        let check = |cmd: &str, expect: &str| assert_eq!(super::fail_fast(cmd), expect, "{cmd}");
        check("python3 -m pytest -q test_h.py", "python3 -m pytest -q test_h.py -x");
        check("cp a b && pytest t.py\n", "cp a b && pytest t.py -x");
        check("python3 -m unittest -q test_bucket", "python3 -m unittest -q test_bucket -f");
        check("go test ./...", "go test ./... -failfast");
        // Not a plain runner form: no flag could be put in the right place.
        check("node --test dist/", "node --test dist/");
        check("pytest t.py | tee log", "pytest t.py | tee log");
        check("python3 .gatehouse/notes.py", "python3 .gatehouse/notes.py");
        // The flag reaches the runner.
        assert!(plan(&super::fail_fast("python3 -m pytest t.py")).command().ends_with(" t.py -x"));
    }

    fn check_plan(cmd: &str, expect: &str) {
        assert_eq!(plan(cmd).command(), expect, "{cmd}");
    }

    #[test]
    fn plain_test_commands_go_through_the_runner() {
        check_plan(
            "python3 -m pytest -q -p no:cacheprovider --junitxml=.gatehouse/h.xml test_h.py",
            "python3 -I -B --check-hash-based-pycs always /gatehouse/gatehouse_runner.py pytest -q -p no:cacheprovider --junitxml=.gatehouse/h.xml test_h.py",
        );
        check_plan(
            "python3 -m unittest -q test_bucket",
            "python3 -I -B --check-hash-based-pycs always /gatehouse/gatehouse_runner.py unittest -q test_bucket",
        );
        check_plan(
            "pytest tests/test_x.py::test_a",
            "python3 -I -B --check-hash-based-pycs always /gatehouse/gatehouse_runner.py pytest tests/test_x.py::test_a",
        );
        check_plan(
            "python3.11 -m pytest",
            "python3 -I -B --check-hash-based-pycs always /gatehouse/gatehouse_runner.py pytest",
        );
        check_plan(
            "python3 .gatehouse/notes.py --x",
            "python3 -I -B --check-hash-based-pycs always /gatehouse/gatehouse_runner.py script .gatehouse/notes.py --x",
        );
        // A packet's preparation runs first, then the runner.
        check_plan(
            "python3 submit_check.py && python3 -m pytest -q test_fetch.py",
            "python3 submit_check.py && python3 -I -B --check-hash-based-pycs always /gatehouse/gatehouse_runner.py pytest -q test_fetch.py",
        );
        check_plan(
            "set -e\ncp -R a /tmp/o\ncd /tmp/o\npython3 -m pytest -q t.py\n",
            "set -e\ncp -R a /tmp/o\ncd /tmp/o\npython3 -I -B --check-hash-based-pycs always /gatehouse/gatehouse_runner.py pytest -q t.py",
        );
        assert!(!plan("cp a b && python3 -m pytest").in_workspace());
        assert!(plan("python3 -m pytest").in_workspace());
        // Shell text stays shell text.
        for cmd in [
            "python3 -m pytest -q && echo done",
            "cp a b; python3 -m pytest",
            "python3 -m pytest tests/test_*.py",
            "FOO=1 python3 -m pytest",
            "python3 -u -m pytest",
            "bash replay.sh",
            "python3 agent.py",
        ] {
            assert_eq!(plan(cmd), Plan::Shell(cmd.to_string()), "{cmd}");
        }
    }

    fn report(exit: Exit) -> RunReport {
        // Built from JSON so that fields the sandbox adds later default.
        let mut r: RunReport = serde_json::from_value(serde_json::json!({
            "exit": {"kind": "code", "value": 0}, "timed_out": false, "limit_hit": null,
            "wall": {"secs": 0, "nanos": 0}, "cpu": {"secs": 0, "nanos": 0}, "peak_memory_bytes": 0,
            "stdout_tail": "", "stderr_tail": "", "stdout_bytes": 0, "stderr_bytes": 0, "leftovers": []
        }))
        .unwrap();
        r.exit = exit;
        r
    }

    fn stream(lines: &[&str]) -> Vec<u8> {
        let mut s = String::new();
        for l in lines {
            s.push_str(&l.replace("NONCE", "n1"));
            s.push('\n');
        }
        s.into_bytes()
    }

    const START: &str = r#"{"t":"start","nonce":"NONCE","runner":"pytest"}"#;
    const PASS_A: &str = r#"{"t":"case","nonce":"NONCE","id":"t.py::test_a","classname":"t","name":"test_a","status":"passed","message":""}"#;
    const FAIL_B: &str = r#"{"t":"case","nonce":"NONCE","id":"t.py::test_b","classname":"t","name":"test_b","status":"failed","message":"assert 1 == 2"}"#;
    const END_1: &str = r#"{"t":"end","nonce":"NONCE","exit":1}"#;
    const END_0: &str = r#"{"t":"end","nonce":"NONCE","exit":0}"#;

    fn expected() -> BTreeSet<String> {
        ["t.py::test_a", "t.py::test_b"].iter().map(|s| s.to_string()).collect()
    }

    /// Parses `lines`, cross-checks against a process `exit`, and returns
    /// the signs (joined) and whether the runner passed.
    fn check(
        lines: &[&str],
        exit: Exit,
        junit: Option<Result<Vec<TestOutcome>, String>>,
        expect: &str,
    ) {
        let r = RunnerResult::parse(&stream(lines), "n1", false);
        let signs = r
            .cross_check(RunnerKind::Pytest, &report(exit), junit.as_ref(), Some(&expected()))
            .join(" | ");
        if expect.is_empty() {
            assert!(signs.is_empty(), "expected no sign, got: {signs}");
        } else {
            assert!(signs.contains(expect), "expected {expect:?} in: {signs}");
        }
    }

    fn outcome(name: &str, status: TestStatus) -> TestOutcome {
        TestOutcome { classname: "t".into(), name: name.into(), status, message: None }
    }

    #[test]
    fn honest_runs_are_quiet() {
        check(&[START, PASS_A, FAIL_B, END_1], Exit::Code(1), None, "");
        check(
            &[START, PASS_A, FAIL_B, END_1],
            Exit::Code(1),
            Some(Ok(vec![
                outcome("test_a", TestStatus::Passed),
                outcome("test_b", TestStatus::Failed),
            ])),
            "",
        );
        // A run stopped by a cap is incomplete, not forged.
        let r = RunnerResult::parse(&stream(&[START, PASS_A]), "n1", false);
        let mut rep = report(Exit::Signal(9));
        rep.timed_out = true;
        rep.limit_hit = Some(LimitHit::Wall);
        assert!(r.cross_check(RunnerKind::Pytest, &rep, None, Some(&expected())).is_empty());
        let outcomes = r.outcomes(RunnerKind::Pytest, Some(&expected()), &rep);
        assert_eq!(outcomes.len(), 2);
        assert_eq!(outcomes[1].status, TestStatus::Error);
        assert!(!r.passed());
        // A module that did not import: the missing tests are errors.
        let collect_err =
            r#"{"t":"collect-error","nonce":"NONCE","id":"t.py","message":"ImportError"}"#;
        check(
            &[START, collect_err, END_1],
            Exit::Code(2),
            None,
            "the runner finished with exit status 1 but the process exited with 2",
        );
        check(&[START, collect_err, END_1], Exit::Code(1), None, "");
        // Killed by a signal after the runner's end (a crash at teardown):
        // the run failed, nothing was forged.
        check(&[START, PASS_A, FAIL_B, END_1], Exit::Code(139), None, "");
        // Its entry in the result file (pytest's address of the module) is
        // that collection error, not a test that never ran ...
        let module_error = TestOutcome {
            classname: String::new(),
            name: "t".into(),
            status: TestStatus::Error,
            message: None,
        };
        check(
            &[START, collect_err, END_1],
            Exit::Code(1),
            Some(Ok(vec![module_error.clone()])),
            "",
        );
        // ... but the same entry without a collection error on the stream is.
        check(
            &[START, END_1],
            Exit::Code(1),
            Some(Ok(vec![module_error])),
            "::t is error in the file but was never run",
        );
    }

    #[test]
    fn forgeries_are_signs() {
        // os._exit(0) at import or in atexit: no end record.
        check(&[START, PASS_A], Exit::Code(0), None, "exited 0 before the runner finished");
        // The exit status rewritten after the runner finished.
        check(
            &[START, PASS_A, FAIL_B, END_1],
            Exit::Code(0),
            None,
            "finished with exit status 1 but the process exited with 0",
        );
        // A shim that never ran the trusted runner.
        check(&[], Exit::Code(0), None, "never started");
        // Records written by someone else.
        let forged = r#"{"t":"case","nonce":"guess","id":"t.py::test_b","classname":"t","name":"test_b","status":"passed"}"#;
        check(
            &[START, PASS_A, forged, FAIL_B, END_1],
            Exit::Code(1),
            None,
            "not written by the runner",
        );
        check(
            &[START, PASS_A, FAIL_B, END_1, END_0],
            Exit::Code(1),
            None,
            "not written by the runner",
        );
        // A prelude that learned the nonce and wrote first: the real runner's
        // own start comes second.
        check(
            &[START, PASS_A, START, PASS_A, FAIL_B, END_1],
            Exit::Code(1),
            None,
            "not written by the runner",
        );
        check(
            &[PASS_A, START, PASS_A, FAIL_B, END_1],
            Exit::Code(1),
            None,
            "not written by the runner",
        );
        // Exit 0 with failures, or with no test at all.
        check(&[START, PASS_A, FAIL_B, END_0], Exit::Code(0), None, "although 1 test(s) failed");
        check(&[START, END_0], Exit::Code(0), None, "ran no test");
        // A result file rewritten after the runner finished.
        check(
            &[START, PASS_A, FAIL_B, END_1],
            Exit::Code(1),
            Some(Ok(vec![
                outcome("test_a", TestStatus::Passed),
                outcome("test_b", TestStatus::Passed),
            ])),
            "test_b is passed in the file but failed in the run",
        );
        check(
            &[START, PASS_A, FAIL_B, END_1],
            Exit::Code(1),
            Some(Err("gone".into())),
            "gone or unreadable",
        );
        // Ids the packet does not define, or defined ids never reported.
        let extra = r#"{"t":"case","nonce":"NONCE","id":"t.py::test_z","classname":"t","name":"test_z","status":"passed"}"#;
        check(
            &[START, PASS_A, FAIL_B, extra, END_1],
            Exit::Code(1),
            None,
            "do not define: t.py::test_z",
        );
        check(&[START, PASS_A, END_0], Exit::Code(0), None, "never reported: t.py::test_b");
    }

    /// A Go test binary that panicked in a subtest of TestSquare: TestTotal
    /// never ran. `lines` follow the start record; `exit` is the runner's
    /// and the process's.
    fn go_run(lines: &[&str], exit: i32) -> (Vec<String>, Vec<TestOutcome>) {
        let mut all = vec![START];
        all.extend_from_slice(lines);
        let end = format!(r#"{{"t":"end","nonce":"NONCE","exit":{exit}}}"#);
        all.push(&end);
        let r = RunnerResult::parse(&stream(&all), "n1", false);
        let expected: BTreeSet<String> =
            ["grains::TestSquare", "grains::TestTotal"].iter().map(|s| s.to_string()).collect();
        let rep = report(Exit::Code(exit));
        let signs = r.cross_check(RunnerKind::GoTest, &rep, None, Some(&expected));
        (signs, r.outcomes(RunnerKind::GoTest, Some(&expected), &rep))
    }

    const GO_SQUARE_FAILED: &str = r#"{"t":"case","nonce":"NONCE","id":"grains::TestSquare","classname":"grains","name":"TestSquare","status":"failed","message":"--- FAIL"}"#;
    const GO_SQUARE_PASSED: &str = r#"{"t":"case","nonce":"NONCE","id":"grains::TestSquare","classname":"grains","name":"TestSquare","status":"passed","message":""}"#;
    const GO_PANIC: &str = r#"{"t":"crash","nonce":"NONCE","id":"grains","kind":"panic","test":"grains::TestSquare","message":"Please implement the Square function","frame":"grains.go:4 in grains.Square"}"#;

    #[test]
    fn a_crash_fails_the_tests_it_left_unreported_and_hides_no_forgery() {
        // The crash: TestSquare says where, TestTotal that it never ran;
        // neither is a sign.
        let (signs, outcomes) = go_run(&[GO_SQUARE_FAILED, GO_PANIC], 1);
        assert!(signs.is_empty(), "{signs:?}");
        let text: Vec<(TestStatus, String)> =
            outcomes.iter().map(|o| (o.status, o.message.clone().unwrap_or_default())).collect();
        assert_eq!(
            text,
            [
                (
                    TestStatus::Failed,
                    "crashed: the test binary panicked in this test: Please implement the Square function (at grains.go:4 in grains.Square)".to_string()
                ),
                (
                    TestStatus::Error,
                    "not run: the test binary panicked in TestSquare: Please implement the Square function (at grains.go:4 in grains.Square)".into()
                ),
            ]
        );
        // Without the crash record the same run left TestTotal out.
        let (signs, _) = go_run(&[GO_SQUARE_FAILED], 1);
        assert!(signs.join(" ").contains("never reported: grains::TestTotal"), "{signs:?}");
        // A crash in a run that says it passed is no crash.
        let (signs, _) = go_run(&[GO_SQUARE_PASSED, GO_PANIC], 0);
        assert!(signs.join(" ").contains("never reported: grains::TestTotal"), "{signs:?}");
        // Forged results beside a crash are still signs: a test reported
        // twice, a test the packet does not define.
        let forged = r#"{"t":"case","nonce":"NONCE","id":"grains::TestForged","classname":"grains","name":"TestForged","status":"passed","message":""}"#;
        let (signs, _) = go_run(&[GO_SQUARE_FAILED, GO_SQUARE_PASSED, forged, GO_PANIC], 1);
        let signs = signs.join(" | ");
        assert!(
            signs.contains("more than once") && signs.contains("do not define: grains::TestForged"),
            "{signs}"
        );
        // And a crash never makes a test pass: the runner said 1.
        let r =
            RunnerResult::parse(&stream(&[START, GO_SQUARE_PASSED, GO_PANIC, END_1]), "n1", false);
        assert!(!r.passed() && r.crashed());
    }

    #[test]
    fn each_case_keeps_what_it_cost() {
        let timed = r#"{"t":"case","nonce":"NONCE","id":"t.py::test_b","classname":"t","name":"test_b","status":"failed","message":"","us":4200}"#;
        let r = RunnerResult::parse(&stream(&[START, PASS_A, timed, END_1]), "n1", false);
        assert_eq!(r.cost_us, [("t.py::test_b".to_string(), 4200)].into());
        assert_eq!(r.cases.len(), 2);
    }

    #[test]
    fn node_ids_split_like_junit() {
        assert_eq!(split_id("t.py::test_a"), ("t".into(), "test_a".into()));
        assert_eq!(
            split_id("pkg/t.py::TestC::test_m[1]"),
            ("pkg.t.TestC".into(), "test_m[1]".into())
        );
        assert_eq!(
            pytest_paths(&[
                "-q".into(),
                "-p".into(),
                "no:x".into(),
                "a.py::t".into(),
                "b.py".into()
            ]),
            vec!["a.py", "b.py"]
        );
        assert_eq!(pytest_junit(&["--junitxml=.g/x.xml".into()]), Some(".g/x.xml".into()));
        assert_eq!(pytest_junit(&["--junitxml".into(), "y.xml".into()]), Some("y.xml".into()));
    }
}
