//! The facts the pipeline gathers and the detectors read: test outcomes,
//! step runs, script findings, mutation results, and where each fact came
//! from. A leaf: nothing here runs anything or reads a manifest.
//!
//! Its types: `TestOutcome`, `StepOutcome`, `ScriptFinding`, `MutationOutcome`,
//! and `Provenance`/`Hit` (where a fact came from, and a detector that fired).

use serde::{Deserialize, Serialize};

use crate::sandbox::RunReport;

/// Where a fact on a scorecard came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provenance {
    /// Only the candidate's files say it.
    Claimed,
    /// The grader recomputed it from the submission.
    Replayed,
    /// The platform produced it.
    Witnessed,
}

/// A detector that fired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub provenance: Provenance,
    pub evidence: Vec<String>,
}

impl Hit {
    pub(crate) fn new(provenance: Provenance, evidence: Vec<String>) -> Option<Hit> {
        Some(Hit { provenance, evidence })
    }
}

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
    pub provenance: Option<Provenance>,
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
