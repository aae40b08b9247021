//! Candidate assignments: one candidate, one published packet version.

use async_trait::async_trait;
use serde::Serialize;

use super::DbResult;

#[derive(Debug, Clone, Default, Serialize)]
pub struct Assignment {
    pub id: String,
    pub packet_version_id: i64,
    pub slug: String,
    pub version: Option<i64>,
    pub candidate_name: String,
    pub email: String,
    pub deadline: i64,
    pub time_box_secs: Option<i64>,
    pub seed: String,
    /// invited, started, submitted, grading, graded or failed.
    pub state: String,
    pub started_at: Option<i64>,
    pub created_by: Option<i64>,
    pub created_at: i64,
    /// What the candidate sees of a graded submission.
    pub results: ResultsRelease,
    /// How many submissions the assignment accepts.
    pub max_submissions: i64,
    /// Reviewers see a pseudonym until they have saved their scores.
    pub blind_review: bool,
    /// When the candidate's data was erased (the row is a tombstone).
    pub erased_at: Option<i64>,
}

/// When a candidate sees the decision and score of a graded submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ResultsRelease {
    /// Never: the candidate sees "received, graded" and the receipt digest.
    #[default]
    Never,
    /// Once a reviewer has scored the submission.
    AfterReview,
    /// As soon as it is graded.
    Immediately,
}

impl ResultsRelease {
    pub const ALL: [ResultsRelease; 3] =
        [ResultsRelease::Never, ResultsRelease::AfterReview, ResultsRelease::Immediately];

    pub fn as_str(self) -> &'static str {
        match self {
            ResultsRelease::Never => "never",
            ResultsRelease::AfterReview => "after-review",
            ResultsRelease::Immediately => "immediately",
        }
    }

    /// Parses a setting; the error names the accepted values.
    pub fn parse(s: &str) -> Result<ResultsRelease, String> {
        ResultsRelease::ALL
            .into_iter()
            .find(|r| r.as_str() == s.trim())
            .ok_or_else(|| format!("results {s:?} is not one of never, after-review, immediately"))
    }
}

/// The default submission limit of an assignment.
pub const DEFAULT_MAX_SUBMISSIONS: i64 = 3;

pub struct NewAssignment<'a> {
    pub id: &'a str,
    pub packet_version_id: i64,
    pub candidate_name: &'a str,
    pub email: &'a str,
    pub deadline: i64,
    pub time_box_secs: Option<i64>,
    pub seed: &'a str,
    pub token_hash: &'a str,
    pub created_by: Option<i64>,
}

#[async_trait]
pub trait AssignmentStore {
    async fn create_assignment(&self, a: NewAssignment<'_>) -> DbResult<Assignment>;
    async fn assignment_by_id(&self, id: &str) -> DbResult<Option<Assignment>>;
    async fn assignment_by_token_hash(&self, token_hash: &str) -> DbResult<Option<Assignment>>;
    /// Newest first; all packets when `slug` is None.
    async fn list_assignments(&self, slug: Option<&str>) -> DbResult<Vec<Assignment>>;
    /// Sets `started_at` if unset and moves `invited` to `started` (an
    /// erased assignment's tombstone stays as it is).
    async fn start_assignment(&self, id: &str, at: i64) -> DbResult<()>;
    async fn set_assignment_state(&self, id: &str, state: &str) -> DbResult<()>;
    /// Replaces the link token (the old link stops working).
    async fn reissue_token(&self, id: &str, token_hash: &str) -> DbResult<()>;
    /// Sets what the candidate sees of results and the submission limit.
    async fn set_assignment_policy(
        &self,
        id: &str,
        results: ResultsRelease,
        max_submissions: i64,
    ) -> DbResult<()>;
    /// Turns blind review of the assignment on or off.
    async fn set_blind_review(&self, id: &str, blind: bool) -> DbResult<()>;
}
