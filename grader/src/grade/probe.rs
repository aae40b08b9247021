//! The environment probe: the interpreter, its stdlib and the tools, probed once per grader.

use std::collections::BTreeSet;
use std::fs;
use std::time::Duration;

use crate::env::EnvProbe;
use crate::run::run_on_copy;
use crate::sandbox::Limits;

use super::*;

/// The environment probe, run as `python3 -c PROBE TOOL...`; prints one
/// JSON object. No single quotes, so it fits in a shell's single quotes.
const PROBE: &str = r#"
import json, subprocess, sys
from importlib import metadata
tools = {}
for name in sys.argv[1:]:
    try:
        tools[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        try:
            done = subprocess.run([name, "--version"], capture_output=True, text=True, timeout=10)
            tools[name] = (done.stdout + done.stderr).strip()
        except (OSError, subprocess.SubprocessError):
            tools[name] = None
langs = {}
for lang, cmd in LANGS:
    try:
        done = subprocess.run(cmd.split(), capture_output=True, text=True, timeout=60)
        langs[lang] = (done.stdout + done.stderr).strip() if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        langs[lang] = None
runner = []
try:
    import contextlib, io, tempfile, pytest
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        pytest.main(["-q", "-p", "no:cacheprovider", "--collect-only", tempfile.mkdtemp()])
    import unittest
    runner = sorted({m.split(".")[0] for m in sys.modules} & set(sys.stdlib_module_names))
except Exception:
    pass
print(json.dumps({"python": sys.version.split()[0], "stdlib": sorted(sys.stdlib_module_names), "runner": runner, "tools": tools, "langs": langs}))
"#;

impl Grader {
    /// Probes the interpreter, its standard library, the language
    /// toolchains (`env::TOOLCHAINS`, always in the answer's `tools`) and
    /// `tools` in the sandbox; each is probed once per grader.
    pub fn probe(&self, tools: &[String]) -> Result<EnvProbe, GradeError> {
        for t in tools {
            if t.is_empty()
                || !t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
            {
                return Err(GradeError::Packet(format!(
                    "tool name {t:?} is not a plain command or package name"
                )));
            }
        }
        let lock = || {
            self.tools.lock().map_err(|_| GradeError::Io {
                context: "reading the tool cache".into(),
                source: std::io::Error::other("a panic poisoned its lock"),
            })
        };
        let missing: Vec<String> = {
            let cache = lock()?;
            tools.iter().filter(|t| !cache.contains_key(*t)).cloned().collect()
        };
        if self.python.get().is_none() || !missing.is_empty() {
            // One sandbox run answers everything: the interpreter, its
            // standard library, and each tool (a Python distribution's
            // version from its metadata, else `TOOL --version`). It runs
            // with no lock held: a probe is the caller's run at the
            // caller's priority, so a grading never waits behind a
            // background self-test's probe that idle priority starves (two
            // callers at once each probe; the first answer kept is final).
            let names: Vec<&str> = missing.iter().map(|t| t.as_str()).collect();
            let langs: String = crate::env::TOOLCHAINS
                .iter()
                .map(|c| format!("(\"{}\", \"{}\"), ", c.key, c.probe))
                .collect();
            let report = self.probe_run(&format!(
                "python3 -c 'LANGS = [{langs}]\n{PROBE}' {}",
                names.join(" ")
            ))?;
            let parsed: serde_json::Value = serde_json::from_str(report.trim()).map_err(|e| {
                GradeError::Packet(format!(
                    "the environment probe printed something other than JSON ({e}): {}",
                    report.trim()
                ))
            })?;
            let version = parsed["python"].as_str().map(String::from);
            let names = |key: &str| -> BTreeSet<String> {
                parsed[key]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            };
            let _ = self.python.set((version, names("stdlib"), names("runner")));
            let number = regex::Regex::new(r"\d+(?:\.\d+)+").expect("static regex");
            let version_of = |found: &serde_json::Value| {
                found.as_str().and_then(|s| number.find(s)).map(|m| m.as_str().to_string())
            };
            let mut cache = lock()?;
            for name in crate::env::TOOLCHAINS.iter().map(|c| c.key) {
                cache.entry(name.to_string()).or_insert_with(|| version_of(&parsed["langs"][name]));
            }
            for t in missing {
                let found = version_of(&parsed["tools"][t.as_str()]);
                cache.entry(t).or_insert(found);
            }
        }
        let cache = lock()?;
        let (python, stdlib, runner_modules) = self.python.get().cloned().unwrap_or_default();
        let toolchains = crate::env::TOOLCHAINS.iter().map(|c| c.key.to_string());
        let tools = tools
            .iter()
            .cloned()
            .chain(toolchains)
            .map(|t| {
                let v = cache.get(&t).cloned().flatten();
                (t, v)
            })
            .collect();
        Ok(EnvProbe { python, tools, stdlib, runner_modules })
    }

    fn probe_run(&self, script: &str) -> Result<String, GradeError> {
        let dir = tempfile::tempdir().map_err(io("creating a probe folder"))?;
        // Once per grader: generous, so a loaded machine does not turn a
        // slow probe into a packet error.
        let limits = Limits { wall: Duration::from_secs(120), ..Limits::default() };
        let empty = dir.path().join("empty");
        fs::create_dir(&empty).map_err(io("creating a probe workspace"))?;
        let ran = run_on_copy(
            &self.sandbox,
            &empty,
            &dir.path().join("w"),
            |_| Ok(()),
            script,
            &limits,
            Vec::new(),
        )?;
        if ran.report.stdout_tail.trim().is_empty() {
            return Err(GradeError::Packet(format!(
                "the environment probe printed nothing ({}): {}",
                ran.report.describe(),
                ran.report.stderr_tail.lines().last().unwrap_or_default()
            )));
        }
        Ok(ran.report.stdout_tail)
    }
}
