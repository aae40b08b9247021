//! How a trusted run ended (issue #48): whether it reported every test it
//! set out to run, or stopped early for a reason that is no evidence of
//! anything but a failure.
//!
//! A test process that crashes takes every test it had not reported with
//! it: a Go panic ends the whole test binary, so does a deadlock, a
//! `-test.timeout`, an `os.Exit` in the middle of a test; a Node test
//! process dies of an uncaught exception or a signal; a Python C extension
//! segfaults the interpreter. That is what unfinished or buggy work does.
//! Every test the run did not report then FAILS, each with the crash named
//! in its reason (`not run: the test binary panicked in TestSquare: Please
//! implement the Square function (at grains.go:4 in grains.Square)`), and
//! none of the checks that read an UNREPORTED test as removed (a hidden test
//! never reported, a canary never reported) applies.
//!
//! INVARIANTS.
//! - A crash only turns tests the run did not report into failures. Every
//!   check of what WAS reported (a name never planted, a twin passed beside
//!   its test, the must-fail canary passed, a test reported twice, a record
//!   not written by the runner, the exit status against the results) holds
//!   whatever the ending, so imitating a crash (a fake `panic:` banner, an
//!   exit in the middle) after forging results gains nothing: leaving a test
//!   unreported scores exactly as reporting it failed.
//! - A crash is only a crash in a run that failed: the runner's own exit
//!   status is not 0 (or it never finished and the process's status is not
//!   0). A run that says it passed but left tests out is judged complete.
//! - The crash's text (test, message, frame) comes from output the
//!   candidate's code can write; it is shown to the reviewer, never judged.
//!
//! [`ending`] is the one place that decides; [`Ending::not_run`] and
//! [`Ending::here`] are the per-test reasons.

use crate::sandbox::{Exit, RunReport};

use super::{RunnerKind, RunnerResult};

/// What a runner saw of a crash of the process that ran the tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Crash {
    pub kind: CrashKind,
    /// The test running when it happened (an id as the run reports it),
    /// when known.
    pub test: Option<String>,
    /// What the runtime said: the panic's value, the fatal error, the
    /// uncaught exception, the exit status or signal, the compiler's
    /// first error.
    pub message: String,
    /// The first frame in the candidate's code (`file:line in function`),
    /// when the runtime printed a trace.
    pub frame: Option<String>,
}

/// How a test process crashed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CrashKind {
    /// A panic (Go's `panic:` report and goroutine trace).
    Panic,
    /// A fatal runtime error: a deadlock (`all goroutines are asleep`),
    /// concurrent map writes, a stack overflow, a V8 fatal error.
    Fatal,
    /// The test framework's own timeout (`-test.timeout`).
    Timeout,
    /// An uncaught exception or unhandled rejection ended the process.
    Uncaught,
    /// Killed by a signal (a segfault, an abort, SIGKILL).
    Signal,
    /// Exited in the middle of the tests (`os.Exit`, `process.exit`,
    /// `os._exit` with a status that is not 0).
    #[default]
    Exit,
    /// The tests did not build (a compile error).
    Build,
}

impl CrashKind {
    /// The runner's word for it (`harness/*_runner.*`); unknown words are
    /// an exit.
    pub fn from_word(word: &str) -> CrashKind {
        match word {
            "panic" => CrashKind::Panic,
            "fatal" => CrashKind::Fatal,
            "timeout" => CrashKind::Timeout,
            "uncaught" => CrashKind::Uncaught,
            "signal" => CrashKind::Signal,
            "build" => CrashKind::Build,
            _ => CrashKind::Exit,
        }
    }

    fn verb(self) -> &'static str {
        match self {
            CrashKind::Panic => "panicked",
            CrashKind::Fatal => "stopped with a fatal error",
            CrashKind::Timeout => "timed out",
            CrashKind::Uncaught => "died of an uncaught exception",
            CrashKind::Signal => "was killed",
            CrashKind::Exit => "exited",
            CrashKind::Build => "did not build",
        }
    }
}

/// How a run ended, for the tests it did not report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The runner finished and reported every test it ran: a test it did
    /// not report was left out (a sign when the packet defines it).
    Complete,
    /// The sandbox stopped the run (a cap, a signal): `how` it ended.
    Stopped(String),
    /// The process that ran the tests crashed. `subject` is what crashed
    /// ("the test binary", "the test process"); `go`: ids are Go's
    /// `<import path>::<Test>`.
    Crashed { crash: Crash, subject: &'static str, go: bool },
    /// The runner never finished, and the process exited 0: an early exit
    /// (a sign of its own, see `cross_check`), never a crash.
    EndedEarly(String),
    /// A test module did not load: its tests never ran.
    Collection(String),
    /// A module was skipped at collection: its tests were never run.
    Skipped,
    /// The result channel overflowed: what is missing cannot be told
    /// apart from what ran.
    Truncated,
}

impl Ending {
    /// Whether the run reported everything it ran, so that a test it did
    /// not report was left out on purpose.
    pub fn complete(&self) -> bool {
        matches!(self, Ending::Complete)
    }

    /// Whether every module that loaded ran to its end, so that a planted
    /// canary the run collected and did not report was left out on purpose
    /// (a module skipped at collection takes only its own tests along).
    pub fn canaries_complete(&self) -> bool {
        matches!(self, Ending::Complete | Ending::Skipped)
    }

    /// The crash, when the run crashed.
    pub fn crash(&self) -> Option<&Crash> {
        match self {
            Ending::Crashed { crash, .. } => Some(crash),
            _ => None,
        }
    }

    /// One line for the reviewer: what crashed, where, and why
    /// (`the test binary panicked in TestSquare: ... (at grains.go:4 in
    /// grains.Square)`), when the run crashed.
    pub fn summary(&self) -> Option<String> {
        match self {
            Ending::Crashed { crash, subject, go } => Some(describe(crash, subject, *go, None)),
            _ => None,
        }
    }

    /// Why the test `id`, which the run did not report, failed.
    pub fn not_run(&self, id: &str) -> String {
        match self {
            Ending::Complete | Ending::Skipped | Ending::Truncated => {
                "not run: the runner did not report this test".to_string()
            }
            Ending::Stopped(how) | Ending::EndedEarly(how) => {
                format!("not run: the run ended before the test ({how})")
            }
            Ending::Collection(message) => format!("not run: collection failed ({message})"),
            Ending::Crashed { crash, subject, go } => {
                if crash.test.as_deref() == Some(id) {
                    format!("crashed: {}", describe(crash, subject, *go, Some(id)))
                } else {
                    format!("not run: {}", describe(crash, subject, *go, Some(id)))
                }
            }
        }
    }

    /// The reason a test the run reported failing gets when it is the one
    /// the process crashed in (its own report says little: a Go test whose
    /// subtest panicked reports only `--- FAIL`); None for other tests.
    pub fn here(&self, id: &str) -> Option<String> {
        match self {
            Ending::Crashed { crash, subject, go } if crash.test.as_deref() == Some(id) => {
                Some(format!("crashed: {}", describe(crash, subject, *go, Some(id))))
            }
            _ => None,
        }
    }
}

/// `the test binary panicked in TestSquare: MESSAGE (at FRAME)`; `for_id`:
/// the test the text is for (the crashed one reads "in this test").
fn describe(crash: &Crash, subject: &str, go: bool, for_id: Option<&str>) -> String {
    let mut s = format!("{subject} {}", crash.kind.verb());
    if let Some(test) = &crash.test {
        if for_id == Some(test.as_str()) {
            s.push_str(" in this test");
        } else {
            // A Go id is `<import path>::<Test>`: the test's name says it.
            let shown = if go { test.rsplit("::").next().unwrap_or(test) } else { test };
            s.push_str(&format!(" in {shown}"));
        }
    }
    if !crash.message.is_empty() {
        s.push_str(&format!(": {}", crash.message));
    }
    if let Some(frame) = &crash.frame {
        s.push_str(&format!(" (at {frame})"));
    }
    s
}

/// Whether the sandbox stopped the run (a cap, a signal).
pub fn stopped(report: &RunReport) -> bool {
    report.timed_out || report.limit_hit.is_some() || matches!(report.exit, Exit::Signal(_))
}

/// How the run of `kind` that `r` reported, and the sandbox `report`ed,
/// ended. Pure: the same records and report give the same ending.
pub fn ending(r: &RunnerResult, kind: RunnerKind, report: &RunReport) -> Ending {
    let go = kind == RunnerKind::GoTest;
    let subject = if go { "the test binary" } else { "the test process" };
    let code = match report.exit {
        Exit::Code(c) if !stopped(report) => c,
        _ => return Ending::Stopped(report.describe()),
    };
    if r.truncated {
        return Ending::Truncated;
    }
    match r.end {
        // The runner itself died with the tests (Python's runner runs them
        // in its own process): a status that is not 0 is a crash.
        None if code != 0 => {
            return Ending::Crashed { crash: died(r, code, &report.stderr_tail), subject, go };
        }
        None => return Ending::EndedEarly(report.describe()),
        // A crash is only a crash in a run that failed.
        Some(_) if r.crashed() => {
            let crash = r.crash.clone().unwrap_or_default();
            return Ending::Crashed { crash, subject, go };
        }
        Some(_) => {}
    }
    if let Some((_, message)) = r.collect_errors.first() {
        return Ending::Collection(message.clone());
    }
    if !r.collect_skips.is_empty() {
        return Ending::Skipped;
    }
    Ending::Complete
}

/// The crash of a runner that died with its tests, exiting `code`: the
/// test it had started and not reported, and what the interpreter's fault
/// handler printed on `stderr` (`Fatal Python error: Segmentation fault`
/// and the frames, innermost first).
fn died(r: &RunnerResult, code: i32, stderr: &str) -> Crash {
    // `/bin/sh -c` reports a child killed by signal N as 128 + N.
    let (kind, how) = match code {
        129..=159 => {
            (CrashKind::Signal, format!("exit status {code}, {}", signal_name(code - 128)))
        }
        _ => (CrashKind::Exit, format!("exit status {code}")),
    };
    let mut message = how;
    let mut frame = None;
    let mut in_trace = false;
    for line in stderr.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("Fatal Python error: ") {
            message = format!("{} ({message})", rest.chars().take(120).collect::<String>());
            in_trace = true;
        } else if in_trace && frame.is_none() {
            // `File "/workspace/ext.py", line 3 in crash`
            if let Some(f) = python_frame(t) {
                frame = Some(f);
            }
        }
    }
    Crash { kind, test: r.running.clone(), message, frame }
}

/// `ext.py:3 in crash` from a fault handler line of a workspace file that
/// is not a test module.
fn python_frame(line: &str) -> Option<String> {
    let rest = line.strip_prefix("File \"")?;
    let (path, rest) = rest.split_once('"')?;
    let rel = path.strip_prefix("/workspace/")?;
    let name = rel.rsplit('/').next().unwrap_or(rel);
    if name.starts_with("test") || name.ends_with("_test.py") || rel.starts_with(".gatehouse/") {
        return None;
    }
    let rest = rest.trim_start_matches(',').trim();
    let (line_no, func) = rest.strip_prefix("line ")?.split_once(" in ")?;
    Some(format!("{rel}:{} in {}", line_no.trim(), func.trim()))
}

fn signal_name(n: i32) -> String {
    let name = match n {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => return format!("signal {n}"),
    };
    format!("killed by {name}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{TestOutcome, TestStatus};

    fn report(exit: Exit, stderr: &str) -> RunReport {
        let mut r: RunReport = serde_json::from_value(serde_json::json!({
            "exit": {"kind": "code", "value": 0}, "timed_out": false, "limit_hit": null,
            "wall": {"secs": 0, "nanos": 0}, "cpu": {"secs": 0, "nanos": 0}, "peak_memory_bytes": 0,
            "stdout_tail": "", "stderr_tail": "", "stdout_bytes": 0, "stderr_bytes": 0, "leftovers": []
        }))
        .unwrap();
        r.exit = exit;
        r.stderr_tail = stderr.to_string();
        r
    }

    fn case(id: &str, status: TestStatus) -> (String, TestOutcome) {
        let name = id.rsplit("::").next().unwrap().to_string();
        (id.to_string(), TestOutcome { classname: "t".into(), name, status, message: None })
    }

    fn panic_in(test: &str) -> Crash {
        Crash {
            kind: CrashKind::Panic,
            test: Some(test.into()),
            message: "Please implement the Square function".into(),
            frame: Some("grains.go:4 in grains.Square".into()),
        }
    }

    /// How each way a run can end is classified, and what an unreported
    /// test (`grains::TestTotal`) and the crashed one (`grains::TestSquare`)
    /// are told.
    #[test]
    fn each_ending_is_classified_and_names_the_crash() {
        struct Row {
            what: &'static str,
            kind: RunnerKind,
            end: Option<i32>,
            crash: Option<Crash>,
            running: Option<&'static str>,
            collect_error: bool,
            exit: Exit,
            stderr: &'static str,
            complete: bool,
            not_run: &'static str,
            here: Option<&'static str>,
        }
        let base = || Row {
            what: "",
            kind: RunnerKind::GoTest,
            end: Some(1),
            crash: None,
            running: None,
            collect_error: false,
            exit: Exit::Code(1),
            stderr: "",
            complete: true,
            not_run: "not run: the runner did not report this test",
            here: None,
        };
        let rows = [
            Row { what: "a failing run that finished", ..base() },
            Row {
                what: "a Go panic in a subtest of TestSquare",
                crash: Some(panic_in("grains::TestSquare")),
                complete: false,
                not_run: "not run: the test binary panicked in TestSquare: Please implement the Square function (at grains.go:4 in grains.Square)",
                here: Some(
                    "crashed: the test binary panicked in this test: Please implement the Square function (at grains.go:4 in grains.Square)",
                ),
                ..base()
            },
            Row {
                what: "a deadlock while the package initialised",
                crash: Some(Crash {
                    kind: CrashKind::Fatal,
                    message: "all goroutines are asleep - deadlock!".into(),
                    ..Crash::default()
                }),
                complete: false,
                not_run: "not run: the test binary stopped with a fatal error: all goroutines are asleep - deadlock!",
                ..base()
            },
            Row {
                what: "a crash record in a run that says it passed is no crash",
                end: Some(0),
                exit: Exit::Code(0),
                crash: Some(panic_in("grains::TestSquare")),
                ..base()
            },
            Row {
                what: "a Python runner that segfaulted in test_a",
                kind: RunnerKind::Pytest,
                end: None,
                running: Some("t.py::test_a"),
                exit: Exit::Code(139),
                stderr: "Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n  File \"/usr/lib/python3.11/ctypes/__init__.py\", line 519 in string_at\n  File \"/workspace/ext.py\", line 4 in crash\n  File \"/workspace/t.py\", line 3 in test_a\n",
                complete: false,
                not_run: "not run: the test process was killed in t.py::test_a: Segmentation fault (exit status 139, killed by SIGSEGV) (at ext.py:4 in crash)",
                ..base()
            },
            Row {
                what: "a Python runner that exited 3 with nothing on stderr",
                kind: RunnerKind::Unittest,
                end: None,
                exit: Exit::Code(3),
                complete: false,
                not_run: "not run: the test process exited: exit status 3",
                ..base()
            },
            Row {
                what: "an early exit 0 is no crash",
                kind: RunnerKind::Pytest,
                end: None,
                exit: Exit::Code(0),
                complete: false,
                not_run: "not run: the run ended before the test (exit code 0)",
                ..base()
            },
            Row {
                what: "the sandbox stopped it",
                end: None,
                exit: Exit::Signal(9),
                crash: Some(panic_in("grains::TestSquare")),
                complete: false,
                not_run: "not run: the run ended before the test (killed by signal 9)",
                ..base()
            },
            Row {
                what: "a module that did not import",
                kind: RunnerKind::Pytest,
                collect_error: true,
                complete: false,
                not_run: "not run: collection failed (ImportError: no bucket)",
                ..base()
            },
        ];
        for row in rows {
            let mut r = RunnerResult {
                started: true,
                end: row.end,
                crash: row.crash.clone(),
                running: row.running.map(String::from),
                cases: vec![case("grains::TestA", TestStatus::Passed)],
                ..RunnerResult::default()
            };
            if row.collect_error {
                r.collect_errors.push(("t.py".into(), "ImportError: no bucket".into()));
            }
            let e = ending(&r, row.kind, &report(row.exit, row.stderr));
            assert_eq!(e.complete(), row.complete, "{}: {e:?}", row.what);
            let unreported =
                if row.kind == RunnerKind::GoTest { "grains::TestTotal" } else { "t.py::test_b" };
            assert_eq!(e.not_run(unreported), row.not_run, "{}", row.what);
            let crashed = if row.kind == RunnerKind::GoTest { "grains::TestSquare" } else { "-" };
            assert_eq!(e.here(crashed).as_deref(), row.here, "{}", row.what);
            assert_eq!(e.here("grains::TestA"), None, "{}", row.what);
            assert_eq!(e.summary().is_some(), e.crash().is_some(), "{}", row.what);
        }
    }

    #[test]
    fn fault_handler_frames_skip_tests_and_libraries() {
        for (line, want) in [
            ("File \"/workspace/pkg/ext.py\", line 12 in boom", Some("pkg/ext.py:12 in boom")),
            ("File \"/workspace/test_bucket.py\", line 3 in test_a", None),
            ("File \"/workspace/.gatehouse/hidden_test.py\", line 3 in test_a", None),
            ("File \"/usr/lib/python3.11/ctypes/__init__.py\", line 519 in string_at", None),
            ("Current thread 0x00007f (most recent call first):", None),
        ] {
            assert_eq!(python_frame(line).as_deref(), want, "{line}");
        }
    }
}
