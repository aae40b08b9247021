//! Running a packet's commands: each in the sandbox, on a fresh copy of the
//! assembled workspace, with what it produced read back (JUnit XML, script
//! findings, mutant verdicts).

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, BufReader};
use std::path::Path;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::sandbox::{Limits, RunReport, RunSpec, Sandbox, SandboxError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TestStatus {
    Passed,
    Failed,
    Error,
    Skipped,
}

impl TestStatus {
    pub fn word(self) -> &'static str {
        match self {
            TestStatus::Passed => "passed",
            TestStatus::Failed => "failed",
            TestStatus::Error => "error",
            TestStatus::Skipped => "skipped",
        }
    }
}

/// One test case read from JUnit XML.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestOutcome {
    pub classname: String,
    pub name: String,
    pub status: TestStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A step's run and the tests it reported.
#[derive(Debug, Clone)]
pub struct StepOutcome {
    pub report: RunReport,
    /// None when the step wrote no readable JUnit XML (or has none).
    pub tests: Option<Vec<TestOutcome>>,
    pub junit_error: Option<String>,
}

/// One object printed by a packet's detector script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptFinding {
    pub id: String,
    #[serde(default)]
    pub evidence: String,
    /// What the finding rests on; a script that only read the candidate's
    /// own files says `claimed`. Defaults to `replayed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<crate::detect::Provenance>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MutantResult {
    pub id: String,
    pub killed: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MutationOutcome {
    pub mutants: Vec<MutantResult>,
}

impl MutationOutcome {
    pub fn killed(&self) -> usize {
        self.mutants.iter().filter(|m| m.killed).count()
    }
}

/// A command the grader ran, as recorded in the receipt.
#[derive(Debug, Clone)]
pub struct RunRecord {
    /// `step:<id>`, `script:<n>`, `mutant:<id>`, `probe`.
    pub id: String,
    pub command: String,
    pub limits: Limits,
    pub report: RunReport,
}

/// Runs `script` in the sandbox on a copy of `workspace` made in `scratch`
/// (which must not exist), after `prepare` has laid extra files into the
/// copy. The copy stays in `scratch` for the caller to read.
pub fn run_on_copy(
    sandbox: &Sandbox,
    workspace: &Path,
    scratch: &Path,
    prepare: impl FnOnce(&Path) -> io::Result<()>,
    script: &str,
    limits: &Limits,
    env: Vec<(String, String)>,
) -> Result<RunReport, RunError> {
    crate::packet::copy_path(workspace, scratch).map_err(|e| RunError::Io(format!("copying the workspace to {}: {e}", scratch.display())))?;
    prepare(scratch).map_err(|e| RunError::Io(format!("laying files into {}: {e}", scratch.display())))?;
    lay_harness(scratch).map_err(|e| RunError::Io(format!("laying the harness into {}: {e}", scratch.display())))?;
    let spec = RunSpec { script: script.to_string(), workspace: scratch.to_path_buf(), env, limits: limits.clone(), channel: false };
    let mut report = sandbox.run(&spec)?;
    report.stdout_tail = normalize_output(&report.stdout_tail);
    report.stderr_tail = normalize_output(&report.stderr_tail);
    Ok(report)
}

/// The harness packet driver scripts import (`packets/FORMAT.md`).
pub const HARNESS: &str = include_str!("../harness/gatehouse_harness.py");

/// Lays the harness at `.gatehouse/gatehouse_harness.py`, replacing anything
/// a submission put there.
fn lay_harness(dir: &Path) -> io::Result<()> {
    let gatehouse = dir.join(".gatehouse");
    if fs::symlink_metadata(&gatehouse).is_ok_and(|m| !m.is_dir()) {
        fs::remove_file(&gatehouse)?;
    }
    fs::create_dir_all(&gatehouse)?;
    let path = gatehouse.join("gatehouse_harness.py");
    if fs::symlink_metadata(&path).is_ok() {
        fs::remove_file(&path)?;
    }
    fs::write(path, HARNESS)
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error("{0}")]
    Io(String),
}

/// Reads pytest-style JUnit XML.
pub fn read_junit(path: &Path) -> Result<Vec<TestOutcome>, String> {
    let meta = fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let file = fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let suites = junit_parser::from_reader(BufReader::new(file)).map_err(|e| format!("{}: not JUnit XML: {e}", path.display()))?;
    let mut out = Vec::new();
    for suite in &suites.suites {
        for case in &suite.cases {
            let s = &case.status;
            let (status, message) = if s.is_failure() {
                (TestStatus::Failed, Some(s.failure_as_ref().message.clone()))
            } else if s.is_error() {
                (TestStatus::Error, Some(s.error_as_ref().message.clone()))
            } else if s.is_skipped() {
                (TestStatus::Skipped, None)
            } else {
                (TestStatus::Passed, None)
            };
            let message = message.map(|m| m.lines().next().unwrap_or_default().chars().take(200).collect());
            out.push(TestOutcome { classname: case.classname.clone().unwrap_or_default(), name: case.original_name.clone(), status, message });
        }
    }
    Ok(out)
}

/// Parses a detector script's stdout: one JSON object per non-empty line.
pub fn parse_script_output(stdout: &str) -> Result<Vec<ScriptFinding>, String> {
    let mut out = Vec::new();
    for (n, line) in stdout.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let f: ScriptFinding =
            serde_json::from_str(line).map_err(|e| format!("line {}: `{}` is not a finding object: {e}", n + 1, line.chars().take(120).collect::<String>()))?;
        // Only the platform witnesses; a script can at most replay.
        if f.provenance == Some(crate::detect::Provenance::Witnessed) {
            return Err(format!("line {}: a detector script cannot claim `witnessed` provenance", n + 1));
        }
        out.push(f);
    }
    Ok(out)
}

/// Masks what changes from one run to the next in a command's output
/// (durations, object addresses), so receipts are reproducible.
pub fn normalize_output(text: &str) -> String {
    static PATTERNS: std::sync::OnceLock<Vec<(Regex, &'static str)>> = std::sync::OnceLock::new();
    let patterns = PATTERNS.get_or_init(|| {
        vec![
            (Regex::new(r"\bin \d+(?:\.\d+)?s\b(?: \(\d+:\d{2}:\d{2}\))?").expect("static regex"), "in <t>s"),
            (Regex::new(r"\bRan (\d+) tests? in \d+\.\d+s").expect("static regex"), "Ran $1 tests in <t>s"),
            (Regex::new(r"\b0x[0-9a-fA-F]{6,}\b").expect("static regex"), "0x<addr>"),
        ]
    });
    let mut s = text.to_string();
    for (re, with) in patterns {
        s = re.replace_all(&s, *with).into_owned();
    }
    s
}

/// Environment variables a step sees beyond the sandbox's base set.
pub fn step_env(env: &BTreeMap<String, String>) -> Vec<(String, String)> {
    env.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_durations_and_addresses() {
        let got = normalize_output("==== 1 failed, 2 passed in 0.53s ====\nRan 4 tests in 0.002s\n<object at 0x7f3a2b1c9d00>");
        assert_eq!(got, "==== 1 failed, 2 passed in <t>s ====\nRan 4 tests in <t>s\n<object at 0x<addr>>");
    }

    #[test]
    fn script_output_must_be_objects() {
        assert_eq!(parse_script_output("{\"id\": \"a\", \"evidence\": \"x\"}\n\n").unwrap(), vec![ScriptFinding { id: "a".into(), evidence: "x".into(), provenance: None }]);
        assert!(parse_script_output("found a problem\n").unwrap_err().contains("line 1"));
        let claimed = parse_script_output("{\"id\": \"a\", \"provenance\": \"claimed\"}").unwrap();
        assert_eq!(claimed[0].provenance, Some(crate::detect::Provenance::Claimed));
        assert!(parse_script_output("{\"id\": \"a\", \"provenance\": \"witnessed\"}").is_err());
    }
}
