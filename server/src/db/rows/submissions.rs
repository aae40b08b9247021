//! The rows of `submissions` as both backends read them (sqlx's `FromRow` is
//! generic over the database), and their conversion to the area's types.

use sqlx::FromRow;

use crate::db::submissions::*;

#[derive(FromRow)]
pub(crate) struct SubmissionDb {
    pub(crate) id: String,
    pub(crate) assignment_id: String,
    pub(crate) blob_sha256: String,
    pub(crate) size_bytes: i64,
    pub(crate) received_at: i64,
    pub(crate) state: String,
    pub(crate) refusal: Option<String>,
    pub(crate) error: Option<String>,
    pub(crate) scorecard_json: Option<String>,
    pub(crate) receipt_json: Option<String>,
    pub(crate) decision: Option<String>,
    pub(crate) score: Option<f64>,
    pub(crate) graded_at: Option<i64>,
}

#[derive(FromRow)]
pub(crate) struct HumanDb {
    pub(crate) id: i64,
    pub(crate) submission_id: String,
    pub(crate) criterion: String,
    pub(crate) level: i64,
    pub(crate) reason: String,
    pub(crate) reviewer_id: i64,
    pub(crate) reviewer_name: String,
    pub(crate) created_at: i64,
}

impl From<SubmissionDb> for Submission {
    fn from(r: SubmissionDb) -> Submission {
        Submission {
            id: r.id,
            assignment_id: r.assignment_id,
            blob_sha256: r.blob_sha256,
            size_bytes: r.size_bytes,
            received_at: r.received_at,
            state: r.state,
            refusal: r.refusal,
            error: r.error,
            scorecard_json: r.scorecard_json,
            receipt_json: r.receipt_json,
            decision: r.decision,
            score: r.score,
            graded_at: r.graded_at,
        }
    }
}

pub(crate) const SELECT: &str = "SELECT s.id, s.assignment_id, s.blob_sha256, s.size_bytes, s.received_at, s.state, s.refusal, s.error,
    s.scorecard_json, s.receipt_json, s.decision, s.score, s.graded_at FROM submissions s";
