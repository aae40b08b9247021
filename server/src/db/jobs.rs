//! The job queue: rows claimed with a lease. A worker that dies stops
//! renewing its lease; once the lease expires the job is claimable again.
//! Completion is conditional on still holding the lease, so a job never
//! completes twice.

use async_trait::async_trait;
use serde::Serialize;

use super::DbResult;

#[derive(Debug, Clone, Serialize)]
pub struct Job {
    pub id: i64,
    /// `grade` (subject: submission id), `check` (subject: packet version id)
    /// or `audit` (subject: packet audit id).
    pub kind: String,
    pub subject: String,
    pub state: String,
    pub attempts: i64,
    pub max_attempts: i64,
    pub lease_owner: Option<String>,
    pub lease_until: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub finished_at: Option<i64>,
}

#[async_trait]
pub trait JobStore {
    async fn enqueue(&self, kind: &str, subject: &str) -> DbResult<i64>;
    /// Claims the oldest queued job, or a running one whose lease expired,
    /// for `owner` until `now + lease_ms`; bumps `attempts`.
    async fn claim_job(&self, owner: &str, now: i64, lease_ms: i64) -> DbResult<Option<Job>>;
    /// Extends the lease; false when `owner` no longer holds it.
    async fn renew_lease(&self, id: i64, owner: &str, until: i64) -> DbResult<bool>;
    /// Marks the job done (or failed) if `owner` still holds it; false otherwise.
    async fn finish_job(&self, id: i64, owner: &str, ok: bool, error: Option<&str>) -> DbResult<bool>;
    /// Puts a job whose attempt failed back in the queue, or fails it for good
    /// when attempts are used up; returns the new state.
    async fn release_job(&self, id: i64, owner: &str, error: &str) -> DbResult<String>;
    async fn job_by_id(&self, id: i64) -> DbResult<Option<Job>>;
    async fn jobs_for(&self, kind: &str, subject: &str) -> DbResult<Vec<Job>>;
    /// Queued and running jobs, oldest first.
    async fn pending_jobs(&self) -> DbResult<Vec<Job>>;
    /// The newest `limit` jobs of any state, newest first.
    async fn recent_jobs(&self, limit: i64) -> DbResult<Vec<Job>>;
    /// Finishes a `grade` job and stores its result in one transaction, only
    /// while `owner` still holds the job's lease; false (and nothing stored)
    /// otherwise, so a job never completes twice.
    async fn complete_grade_job(&self, job_id: i64, owner: &str, submission_id: &str, result: GradeResult<'_>) -> DbResult<bool>;
}

/// What a finished `grade` job stores on its submission.
pub enum GradeResult<'a> {
    Graded { scorecard_json: &'a str, receipt_json: &'a str, decision: &'a str, score: Option<f64> },
    /// The grader refused the submission at ingestion; the reason is shown.
    Refused { reason: &'a str },
}
