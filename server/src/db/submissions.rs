//! Submissions and their grading results.

use app::contract::SubmissionState;
use async_trait::async_trait;
use serde::Serialize;

use super::DbResult;

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct Submission {
    pub id: String,
    pub assignment_id: String,
    pub blob_sha256: String,
    pub size_bytes: i64,
    pub received_at: i64,
    #[sqlx(try_from = "String")]
    pub state: SubmissionState,
    pub refusal: Option<String>,
    pub error: Option<String>,
    pub scorecard_json: Option<String>,
    pub receipt_json: Option<String>,
    pub decision: Option<String>,
    pub score: Option<f64>,
    pub graded_at: Option<i64>,
}

pub struct NewSubmission<'a> {
    pub id: &'a str,
    pub assignment_id: &'a str,
    pub blob_sha256: &'a str,
    pub size_bytes: i64,
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct HumanScoreRow {
    pub id: i64,
    pub submission_id: String,
    pub criterion: String,
    pub level: i64,
    pub reason: String,
    pub reviewer_id: i64,
    pub reviewer_name: String,
    pub created_at: i64,
}

#[async_trait]
pub trait SubmissionStore {
    /// Records an accepted submission and queues its grading job in one
    /// transaction; the assignment moves to `submitted`.
    async fn create_submission(&self, s: NewSubmission<'_>) -> DbResult<Submission>;
    async fn submission_by_id(&self, id: &str) -> DbResult<Option<Submission>>;
    /// Newest first.
    async fn submissions_of(&self, assignment_id: &str) -> DbResult<Vec<Submission>>;
    /// The newest submission of every assignment of a packet (all versions).
    async fn latest_submissions_for_packet(&self, slug: &str) -> DbResult<Vec<Submission>>;
    async fn set_submission_state(
        &self,
        id: &str,
        state: SubmissionState,
        error: Option<&str>,
    ) -> DbResult<()>;
    /// Stores a finished grading; the assignment moves to `graded`.
    async fn set_graded(
        &self,
        id: &str,
        scorecard_json: &str,
        receipt_json: &str,
        decision: &str,
        score: f64,
    ) -> DbResult<()>;

    /// Appends a reviewer's score (the audit trail keeps every row).
    async fn add_human_score(
        &self,
        submission_id: &str,
        criterion: &str,
        level: i64,
        reason: &str,
        reviewer_id: i64,
    ) -> DbResult<()>;
    /// Every score for the submission, oldest first.
    async fn human_scores(&self, submission_id: &str) -> DbResult<Vec<HumanScoreRow>>;

    /// Replaces a graded submission's scorecard after a reviewer's score
    /// (re-scored without a new run); `graded_at` and the state stay. Returns
    /// false when the submission is not graded.
    async fn update_scorecard(
        &self,
        id: &str,
        scorecard_json: &str,
        receipt_json: &str,
        decision: &str,
        score: Option<f64>,
    ) -> DbResult<bool>;
}
