//! Erasing a candidate's data and the retention setting that erases it on
//! schedule (see `crate::erasure`).

use async_trait::async_trait;
use serde::Serialize;

use super::DbResult;

/// Why an assignment was erased.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EraseReason {
    /// An admin asked (the candidate's request).
    Request,
    /// The retention period after the deadline ended.
    Retention,
}

impl EraseReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EraseReason::Request => "request",
            EraseReason::Retention => "retention",
        }
    }
}

/// What one erasure removed from the database; the blobs it names are no
/// longer referred to by anything and are the caller's to remove from the
/// local folder.
#[derive(Debug, Clone, Default)]
pub struct ErasedRows {
    pub submissions: i64,
    pub witness_runs: i64,
    pub model_calls: i64,
    /// Every row deleted, and every audit entry whose detail was redacted.
    pub rows: i64,
    /// Each blob only the candidate's rows referred to: its SHA-256, and
    /// its size when the database held it (Postgres).
    pub blobs: Vec<(String, Option<i64>)>,
}

/// Why an erasure did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EraseRefusal {
    NotFound,
    AlreadyErased {
        at: i64,
    },
    /// A grading of theirs is queued or running: erased once it ends.
    Grading,
}

/// The record of an erasure (no personal data).
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct Erasure {
    pub id: i64,
    pub assignment_id: String,
    pub slug: String,
    pub version: Option<i64>,
    pub actor: String,
    pub reason: String,
    pub at: i64,
    pub submissions: i64,
    pub witness_runs: i64,
    pub model_calls: i64,
    pub rows_removed: i64,
    pub blobs_removed: i64,
    pub bytes_removed: i64,
    pub final_score: Option<f64>,
    pub final_decision: Option<String>,
}

/// An assignment the retention setting will erase, and when.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct DueErasure {
    pub assignment_id: String,
    pub slug: String,
    pub deadline: i64,
    pub days: i64,
    pub due_at: i64,
}

/// A packet's own retention (None: the global setting).
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct PacketRetention {
    pub slug: String,
    pub title: String,
    pub retention_days: Option<i64>,
}

/// The settings key of the global retention in days (absent: kept until
/// erased by hand).
pub const RETENTION_SETTING: &str = "retention_days";

#[async_trait]
pub trait ErasureStore {
    /// Whether a grading of one of the assignment's submissions is queued
    /// or running (an erasure waits for it to end).
    async fn grading_of(&self, assignment_id: &str) -> DbResult<bool>;
    /// Takes back the revocation of the assignment's model keys revoked at
    /// `revoked_at` (by an erasure that was then refused), unless it was
    /// erased; how many.
    async fn restore_model_keys(&self, assignment_id: &str, revoked_at: i64) -> DbResult<u64>;
    /// Deletes blob `sha256`'s database rows unless something refers to it
    /// (a submission, a witnessed run, a model call, a packet archive):
    /// `Some(size)` when nothing did (the size when the database held it);
    /// its local file is the caller's to remove.
    async fn forget_unused_blob(&self, sha256: &str) -> DbResult<Option<Option<i64>>>;
    /// Erases assignment `id` in one transaction: deletes its submissions,
    /// their grading jobs, human scores and webhook deliveries, its witness
    /// runs, ledger rows, model keys and totals; redacts the audit entries
    /// about it and its submissions (and any naming its email as a whole
    /// address, `crate::erasure::names_address`); empties the
    /// name and email, replaces the link's hash and records the erasure
    /// (`link_hash` is the old one). Returns the blobs nothing refers to
    /// any more (their database rows, if any, deleted too).
    async fn erase_assignment(
        &self,
        id: &str,
        actor: &str,
        reason: EraseReason,
        now: i64,
    ) -> DbResult<Result<ErasedRows, EraseRefusal>>;
    /// Records the bytes the caller removed with an erasure's blobs.
    async fn set_erasure_bytes(&self, assignment_id: &str, blobs: i64, bytes: i64) -> DbResult<()>;
    /// Newest first.
    async fn erasures(&self, slug: Option<&str>, limit: i64) -> DbResult<Vec<Erasure>>;
    /// The erasure of the link whose token hashes to `link_hash`.
    async fn erasure_by_link(&self, link_hash: &str) -> DbResult<Option<Erasure>>;
    /// The erasure of an assignment.
    async fn erasure_of(&self, assignment_id: &str) -> DbResult<Option<Erasure>>;
    /// Assignments not yet erased whose retention (the packet's, else
    /// `global_days`) ends by `until`, soonest first.
    async fn due_erasures(
        &self,
        global_days: Option<i64>,
        until: i64,
        limit: i64,
    ) -> DbResult<Vec<DueErasure>>;
    async fn packet_retentions(&self) -> DbResult<Vec<PacketRetention>>;
    /// After an erasure: SQLite checkpoints and truncates its write-ahead
    /// log (which still holds the pages as they were); nothing on Postgres.
    async fn compact_after_erasure(&self) -> DbResult<()>;
    /// Sets a packet's retention (None: the global one); false when no
    /// packet has that slug.
    async fn set_packet_retention(&self, slug: &str, days: Option<i64>) -> DbResult<bool>;
}
