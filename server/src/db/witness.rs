//! Witnessed runs: the red and green test runs the platform executed on a
//! candidate's uploaded tree (issue #4, "The gate, witnessed"), and which of
//! them preceded each submission.

use async_trait::async_trait;
use grader::witness::WitnessKind;
use serde::Serialize;

use super::DbResult;

/// One row of `witness_runs`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WitnessRunRow {
    pub id: i64,
    pub assignment_id: String,
    pub kind: WitnessKind,
    /// Unix ms when the run finished and was recorded.
    pub at: i64,
    /// Whether the run counts: red failed, or green passed after a red.
    pub accepted: bool,
    /// None when a signal ended the command.
    pub exit_code: Option<i64>,
    pub log: String,
    pub tree_sha256: String,
    /// The environment probe against the packet's pins (`grader::env::EnvReport`).
    pub env_json: String,
    /// Why the run was not accepted, in a sentence.
    pub refusal: Option<String>,
}

pub struct NewWitnessRun<'a> {
    pub assignment_id: &'a str,
    pub kind: WitnessKind,
    pub at: i64,
    pub accepted: bool,
    pub exit_code: Option<i64>,
    pub log: &'a str,
    pub tree_sha256: &'a str,
    pub env_json: &'a str,
    pub refusal: Option<&'a str>,
}

#[async_trait]
pub trait WitnessStore {
    /// Records one witnessed run, accepted or not, and starts the
    /// assignment (its `started_at`, if unset, is the run's `at`). An
    /// assignment erased meanwhile takes nothing: `RowNotFound` (the
    /// erasure holds the assignment's row until it commits, so a run
    /// finishing during it waits and then finds it erased).
    async fn add_witness_run(&self, run: NewWitnessRun<'_>) -> DbResult<WitnessRunRow>;
    /// The assignment's witnessed runs, oldest first.
    async fn witness_runs_of(&self, assignment_id: &str) -> DbResult<Vec<WitnessRunRow>>;
    /// When the assignment's first accepted red run was recorded.
    async fn first_accepted_red_at(&self, assignment_id: &str) -> DbResult<Option<i64>>;
    /// Stores which witnessed runs preceded a submission (`submissions.witnessed_json`).
    async fn set_witnessed(&self, submission_id: &str, witnessed_json: &str) -> DbResult<()>;
    /// The submission's `witnessed_json`, when it has one.
    async fn witnessed_of(&self, submission_id: &str) -> DbResult<Option<String>>;
}
