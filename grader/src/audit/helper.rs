//! The Python helper (`harness/gatehouse_audit.py`): it parses the target
//! file with `ast`, never imports or runs it. It runs as the host's
//! `python3 -I` (the interpreter the sandbox binds), with one JSON request
//! on stdin and one JSON answer on stdout.
//!
//! The source it parses is the packet's (untrusted: a file can be made to
//! blow up the parser), so each call runs under [`HelperLimits`]: an
//! address-space and a CPU-time rlimit set before `exec`, its own process
//! group, and a wall-clock deadline after which the whole group is killed.
//! Going past a limit is an error naming the limit, never a hang.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Proposal;

pub const HELPER: &str = include_str!("../../harness/gatehouse_audit.py");

/// A top-level definition of the target file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Def {
    pub name: String,
    /// `function` or `class`.
    pub kind: String,
    pub line: usize,
    pub end_line: usize,
    pub signature: String,
}

/// A mutant applied to the target: the mutated file and its diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub name: String,
    pub source: String,
    pub diff: String,
}

/// The limits of one helper call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HelperLimits {
    /// Wall-clock time; past it the helper's process group is killed.
    pub wall: Duration,
    /// CPU seconds (`RLIMIT_CPU`).
    pub cpu_secs: u64,
    /// Address space in bytes (`RLIMIT_AS`).
    pub memory_bytes: u64,
    /// Bytes of its answer read; more is an error.
    pub output_bytes: usize,
}

impl Default for HelperLimits {
    fn default() -> HelperLimits {
        HelperLimits {
            wall: Duration::from_secs(60),
            cpu_secs: 30,
            memory_bytes: 1 << 30,
            output_bytes: 64 << 20,
        }
    }
}

pub struct Helper {
    _dir: crate::workdir::WorkDir,
    path: PathBuf,
    limits: HelperLimits,
}

/// Reads `from` to its end, keeping at most `cap` bytes (the rest is
/// drained, so the writer never blocks); whether more came.
fn read_capped(mut from: impl Read, cap: usize) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    let mut over = false;
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return (out, over),
            Ok(n) => {
                if out.len() + n > cap {
                    over = true;
                    out.extend_from_slice(&buf[..cap.saturating_sub(out.len())]);
                } else {
                    out.extend_from_slice(&buf[..n]);
                }
            }
        }
    }
}

impl Helper {
    pub fn new() -> Result<Helper, String> {
        Helper::with_limits(HelperLimits::default())
    }

    pub fn with_limits(limits: HelperLimits) -> Result<Helper, String> {
        let dir = crate::workdir::WorkDir::new("gatehouse-audit-")
            .map_err(|e| format!("creating the audit helper's folder: {e}"))?;
        let path = dir.path().join("gatehouse_audit.py");
        std::fs::write(&path, HELPER).map_err(|e| format!("writing {}: {e}", path.display()))?;
        Ok(Helper { _dir: dir, path, limits })
    }

    fn call(&self, command: &str, request: &Value) -> Result<Value, String> {
        let HelperLimits { wall, cpu_secs, memory_bytes, output_bytes } = self.limits;
        let mut cmd = Command::new("python3");
        cmd.arg("-I")
            .arg(&self.path)
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        // SAFETY: only setrlimit, which is async-signal-safe, runs between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let set = |what, soft: u64, hard: u64| {
                    let r = libc::rlimit {
                        rlim_cur: soft as libc::rlim_t,
                        rlim_max: hard as libc::rlim_t,
                    };
                    if libc::setrlimit(what, &r) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                };
                set(libc::RLIMIT_AS, memory_bytes, memory_bytes)?;
                set(libc::RLIMIT_CPU, cpu_secs, cpu_secs + 1)?;
                set(libc::RLIMIT_CORE, 0, 0)
            });
        }
        let mut child =
            cmd.spawn().map_err(|e| format!("running python3 for the audit helper: {e}"))?;
        let pid = child.id() as libc::pid_t;
        let input = serde_json::to_vec(request).map_err(|e| e.to_string())?;
        let mut stdin = child.stdin.take().ok_or("the audit helper has no stdin")?;
        let stdout = child.stdout.take().ok_or("the audit helper has no stdout")?;
        let stderr = child.stderr.take().ok_or("the audit helper has no stderr")?;
        let writer = std::thread::spawn(move || stdin.write_all(&input));
        let out_reader = std::thread::spawn(move || read_capped(stdout, output_bytes));
        let err_reader = std::thread::spawn(move || read_capped(stderr, 64 * 1024));
        let deadline = Instant::now() + wall;
        // The helper is reaped only after its group is killed: while the
        // leader is an unreaped zombie its process group id cannot be
        // reused, so the kill never reaches an unrelated host group.
        let timed_out = loop {
            match exited_unreaped(pid) {
                Ok(true) => break false,
                Ok(false) if Instant::now() >= deadline => break true,
                Ok(false) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => {
                    // SAFETY: kill(2) on the helper's own, unreaped group.
                    unsafe { libc::kill(-pid, libc::SIGKILL) };
                    let _ = child.wait();
                    return Err(format!("waiting for the audit helper: waitid: {e}"));
                }
            }
        };
        // Whatever it left behind in its group goes too.
        // SAFETY: kill(2) on the helper's own, unreaped group.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        let status = child.wait().map_err(|e| format!("waiting for the audit helper: {e}"))?;
        let _ = writer.join();
        let (stdout, over) = out_reader.join().unwrap_or_default();
        let (stderr, _) = err_reader.join().unwrap_or_default();
        let stderr = String::from_utf8_lossy(&stderr);
        use std::os::unix::process::ExitStatusExt;
        if timed_out {
            return Err(format!(
                "the audit helper ({command}) ran past its wall-clock limit of {:.1} s and was killed: the target file is too large or too deeply nested to parse",
                wall.as_secs_f64()
            ));
        }
        if matches!(status.signal(), Some(libc::SIGXCPU | libc::SIGKILL)) {
            return Err(format!(
                "the audit helper ({command}) went past its CPU limit of {cpu_secs} s and was killed: the target file is too large or too deeply nested to parse"
            ));
        }
        if stderr.contains("MemoryError") {
            return Err(format!(
                "the audit helper ({command}) went past its memory limit of {} MiB: the target file is too large or too deeply nested to parse",
                memory_bytes >> 20
            ));
        }
        if over {
            return Err(format!(
                "the audit helper ({command}) answered more than {} MiB",
                output_bytes >> 20
            ));
        }
        let v: Value = serde_json::from_slice(&stdout).map_err(|_| {
            format!(
                "the audit helper ({command}) answered no JSON ({}): {}",
                describe_status(status),
                stderr.lines().last().unwrap_or("no output")
            )
        })?;
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            if e.contains("MemoryError") {
                return Err(format!(
                    "{e} (the audit helper's memory limit is {} MiB)",
                    memory_bytes >> 20
                ));
            }
            return Err(e.to_string());
        }
        Ok(v)
    }

    /// The limits each call runs under.
    pub fn limits(&self) -> HelperLimits {
        self.limits
    }

    /// The top-level functions and classes of `source`.
    pub fn defs(&self, source: &str) -> Result<Vec<Def>, String> {
        let v = self.call("defs", &json!({ "source": source }))?;
        serde_json::from_value(v["defs"].clone())
            .map_err(|e| format!("the audit helper's defs: {e}"))
    }

    /// The modules `source` imports (absolute imports, dotted names).
    pub fn imports(&self, source: &str) -> Result<Vec<String>, String> {
        let v = self.call("imports", &json!({ "source": source }))?;
        serde_json::from_value(v["modules"].clone())
            .map_err(|e| format!("the audit helper's imports: {e}"))
    }

    /// Replaces the same-named top-level definition of `source` (the file
    /// at `path`) by `code`. `Ok(Err(reason))` is an invalid mutant.
    pub fn apply(
        &self,
        source: &str,
        code: &str,
        path: &str,
        local_modules: &[String],
    ) -> Result<Result<Applied, String>, String> {
        let v = self.call("apply", &json!({ "source": source, "code": code, "path": path, "local_modules": local_modules }))?;
        if v["ok"] == json!(true) {
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            Ok(Ok(Applied { name: s("name"), source: s("source"), diff: s("diff") }))
        } else {
            Ok(Err(v["reason"].as_str().unwrap_or("the helper gave no reason").to_string()))
        }
    }

    /// Rule mutants of the named top-level definitions (all when empty),
    /// at most `per_function` of each (0: all), evenly spread.
    pub fn rules(
        &self,
        source: &str,
        functions: &[String],
        per_function: usize,
    ) -> Result<Vec<Proposal>, String> {
        let v = self.call(
            "rules",
            &json!({ "source": source, "functions": functions, "per_function": per_function }),
        )?;
        serde_json::from_value(v["mutants"].clone())
            .map_err(|e| format!("the audit helper's rule mutants: {e}"))
    }
}

/// Whether child `pid` has ended, leaving it unreaped (`WNOWAIT`).
fn exited_unreaped(pid: libc::pid_t) -> std::io::Result<bool> {
    // SAFETY: a zeroed siginfo_t is valid for waitid to fill.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid on our own child with a valid out pointer.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: waitid filled `info`; si_pid is 0 when nothing has ended.
    Ok(unsafe { info.si_pid() } != 0)
}

fn describe_status(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => "no exit status".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "import csv\n\nLIMIT = 3\n\n\ndef total(path: str) -> int:\n    \"\"\"Sum.\"\"\"\n    s = 0\n    for r in csv.reader(open(path)):\n        if not r:\n            continue\n        s += int(r[0])\n    return s if s >= 0 else 0\n\n\nclass Box:\n    def get(self, n=1):\n        return n + 1\n";

    #[test]
    fn lists_top_level_definitions_with_signatures() {
        let h = Helper::new().unwrap();
        let defs = h.defs(SRC).unwrap();
        let got: Vec<(&str, &str, usize, usize, &str)> = defs
            .iter()
            .map(|d| (d.name.as_str(), d.kind.as_str(), d.line, d.end_line, d.signature.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("total", "function", 6, 13, "def total(path: str) -> int"),
                ("Box", "class", 16, 18, "class Box(): def get(self, n=1)")
            ]
        );
        assert!(h.defs("def broken(:\n").unwrap_err().contains("does not parse"));
    }

    #[test]
    fn apply_accepts_one_behavioural_change_and_names_every_invalid_kind() {
        let h = Helper::new().unwrap();
        let check = |code: &str, expect: Result<&str, &str>| {
            let got = h.apply(SRC, code, "inv.py", &[]).unwrap();
            match (got, expect) {
                (Ok(a), Ok(line)) => {
                    assert!(a.diff.contains(line), "{code}: {}", a.diff);
                    assert!(a.diff.starts_with("--- a/inv.py\n+++ b/inv.py\n"), "{}", a.diff);
                    assert_eq!(crate::diff::apply_diff(SRC, &a.diff).unwrap(), a.source);
                }
                (Err(why), Err(want)) => assert!(why.contains(want), "{code}: {why}"),
                (got, want) => panic!("{code}: got {got:?}, want {want:?}"),
            }
        };
        check("def total(path: str) -> int:\n    return 0\n", Ok("+    return 0"));
        check(
            "class Box:\n    def get(self, n=1):\n        return n + 2\n",
            Ok("+        return n + 2"),
        );
        check(
            "def total(path: str) -> int:\n    import json\n    return 0\n",
            Ok("+    import json"),
        );
        // Invalid, each kind with its reason.
        check("def total(path: str) -> int:\n    return (\n", Err("does not parse"));
        check("x = 1\n", Err("not one function or class definition"));
        check(
            "def total(path: str) -> int:\n    return 0\ndef extra():\n    pass\n",
            Err("not one function or class definition"),
        );
        check(
            "def summe(path: str) -> int:\n    return 0\n",
            Err("'summe', which is not a top-level definition"),
        );
        check(
            "def total(path: str, strict=False) -> int:\n    return 0\n",
            Err("changes the signature"),
        );
        check("def total(path) -> int:\n    return 0\n", Err("changes the signature"));
        check(
            "class Box:\n    def get(self, n=1):\n        return n + 1\n    def put(self):\n        pass\n",
            Err("changes the signature"),
        );
        check(
            "def total(path: str) -> int:\n    import numpy_but_not_installed\n    return 0\n",
            Err("numpy_but_not_installed, which does not exist"),
        );
        check(
            "def total(path: str) -> int:\n    global LIMITS\n    LIMITS = 1\n    return 0\n",
            Ok("LIMITS = 1"),
        );
        // Only comments, quotes and spacing differ: identical after normalisation.
        check(
            "def total(path: str) -> int:\n    'Sum.'\n    s = 0  # zero\n    for r in csv.reader(open(path)):\n        if not r:\n            continue\n        s += int(r[0])\n    return (s if s >= 0 else 0)\n",
            Err("identical to the sample"),
        );
        check("", Err("empty"));
    }

    #[test]
    fn a_parse_past_the_wall_clock_limit_is_killed_with_a_clear_error() {
        let h = Helper::with_limits(HelperLimits {
            wall: Duration::from_millis(300),
            ..HelperLimits::default()
        })
        .unwrap();
        let big = "x = 1\n".repeat(300_000);
        let started = Instant::now();
        let e = h.defs(&big).unwrap_err();
        assert!(e.contains("ran past its wall-clock limit of 0.3 s and was killed"), "{e}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "killed at the deadline, not at the end: {:?}",
            started.elapsed()
        );
        // The same helper, with time to spare, parses a small file.
        assert_eq!(
            Helper::with_limits(HelperLimits {
                wall: Duration::from_secs(30),
                ..HelperLimits::default()
            })
            .unwrap()
            .defs(SRC)
            .unwrap()
            .len(),
            2
        );
    }

    #[test]
    fn a_parse_past_the_cpu_limit_is_killed_with_a_clear_error() {
        let h =
            Helper::with_limits(HelperLimits { cpu_secs: 1, ..HelperLimits::default() }).unwrap();
        let e = h.defs(&"x = 1\n".repeat(600_000)).unwrap_err();
        assert!(e.contains("went past its CPU limit of 1 s and was killed"), "{e}");
        assert_eq!(h.defs(SRC).unwrap().len(), 2, "a small file parses well within the CPU limit");
    }

    #[test]
    fn a_parse_past_the_memory_limit_names_the_limit() {
        let h = Helper::with_limits(HelperLimits {
            memory_bytes: 128 << 20,
            ..HelperLimits::default()
        })
        .unwrap();
        let e = h.defs(&"x = 1\n".repeat(2_000_000)).unwrap_err();
        assert!(e.contains("memory limit") && e.contains("128 MiB"), "{e}");
        // Under the same limit an ordinary file parses.
        assert_eq!(h.defs(SRC).unwrap().len(), 2);
        // Pathological nesting is refused as a parse error, never a crash or a hang.
        let nested = format!("x = {}y\n", "not ".repeat(200_000));
        let e = Helper::new().unwrap().defs(&nested).unwrap_err();
        assert!(e.contains("does not parse"), "{e}");
    }

    #[test]
    fn local_modules_count_as_importable() {
        let h = Helper::new().unwrap();
        let code = "def total(path: str) -> int:\n    import hidden_partner\n    return 0\n";
        assert!(h.apply(SRC, code, "inv.py", &[]).unwrap().is_err());
        assert!(h.apply(SRC, code, "inv.py", &["hidden_partner".into()]).unwrap().is_ok());
    }

    #[test]
    fn rule_mutants_cover_the_grammar_and_stay_valid() {
        let h = Helper::new().unwrap();
        let all = h.rules(SRC, &[], 0).unwrap();
        let families: std::collections::BTreeSet<String> =
            all.iter().map(|p| p.id.rsplit('-').next().unwrap().to_string()).collect();
        for f in ["guard", "negated", "constant", "arithmetic", "boundary", "comparison"] {
            assert!(families.contains(f), "no {f} mutant in {families:?}");
        }
        for p in &all {
            let applied = h.apply(SRC, &p.code, "inv.py", &[]).unwrap();
            let a = applied.unwrap_or_else(|e| panic!("{}: {e}", p.id));
            // One hunk: the rule changed one place.
            assert_eq!(a.diff.matches("\n@@").count(), 1, "{}: {}", p.id, a.diff);
        }
        // A guard that is the last statement of its body is removed too.
        let last = "def f(x):\n    y = x\n    if y:\n        raise ValueError(y)\n";
        let guards: Vec<Proposal> = h
            .rules(last, &[], 0)
            .unwrap()
            .into_iter()
            .filter(|p| p.id.ends_with("-guard"))
            .collect();
        assert_eq!(guards.len(), 1, "{guards:?}");
        assert_eq!(guards[0].code, "def f(x):\n    y = x\n");
        let only = h.rules(SRC, &["Box".into()], 2).unwrap();
        assert!(only.len() <= 2 && only.iter().all(|p| p.id.starts_with("rule-Box-")), "{only:?}");
        assert!(
            h.rules(SRC, &["nope".into()], 0)
                .unwrap_err()
                .contains("no top-level definition named nope")
        );
    }
}
