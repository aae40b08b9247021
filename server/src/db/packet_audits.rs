//! Mutation audits of packet versions (`packet audit` run as a job) and
//! their author ledger: one row per model call an audit made.

use app::contract::JobState;
use async_trait::async_trait;
use serde::Serialize;

use super::DbResult;

/// One audit of a packet version, as stored.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct PacketAudit {
    pub id: i64,
    pub version_id: i64,
    pub requested_by: Option<i64>,
    /// `rules` or `model`.
    pub mode: String,
    /// The definitions audited, space-separated (empty: all).
    pub functions: String,
    /// Mutants per definition.
    pub mutants: i64,
    pub model: String,
    pub max_calls: i64,
    pub max_tokens: i64,
    #[sqlx(try_from = "String")]
    pub state: JobState,
    /// The version's digest when the audit was queued.
    pub digest: String,
    /// The grader's `AuditReport` as JSON, once done.
    pub report_json: Option<String>,
    pub error: Option<String>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
}

/// What an author asks for.
pub struct NewPacketAudit<'a> {
    pub version_id: i64,
    pub requested_by: Option<i64>,
    pub mode: &'a str,
    pub functions: &'a str,
    pub mutants: i64,
    pub model: &'a str,
    pub max_calls: i64,
    pub max_tokens: i64,
    pub digest: &'a str,
}

/// One model call of an audit (the author ledger).
#[derive(Debug, Clone, Serialize)]
pub struct AuditCall {
    pub audit_id: i64,
    pub version_id: i64,
    pub author_id: Option<i64>,
    /// The call's number in the audit, from 1.
    pub n: i64,
    /// The definition whose mutants were asked for.
    pub function: String,
    pub model: String,
    /// answered, malformed, refused, unreachable or upstream-error.
    pub outcome: String,
    /// The upstream's HTTP status, when it answered.
    pub status: Option<i64>,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub tokens_estimated: bool,
    pub request_bytes: i64,
    pub response_bytes: i64,
    pub started_at: i64,
    pub ended_at: i64,
    pub error: Option<String>,
}

/// The outcome counts of a finished audit.
#[derive(Debug, Clone, Copy, Default)]
pub struct AuditCounts {
    pub killed: i64,
    pub survived: i64,
    pub crashed: i64,
    pub invalid: i64,
}

#[async_trait]
pub trait PacketAuditStore {
    /// Stores a queued audit and enqueues its `audit` job in one
    /// transaction; returns (audit id, job id).
    async fn queue_packet_audit(&self, new: NewPacketAudit<'_>) -> DbResult<(i64, i64)>;
    async fn packet_audit(&self, id: i64) -> DbResult<Option<PacketAudit>>;
    /// A version's audits, newest first.
    async fn packet_audits_of(&self, version_id: i64, limit: i64) -> DbResult<Vec<PacketAudit>>;
    /// Marks an audit running (again, on a retried job).
    async fn start_packet_audit(&self, id: i64) -> DbResult<()>;
    /// Stores a finished audit's report and counts.
    async fn finish_packet_audit(
        &self,
        id: i64,
        report_json: &str,
        counts: AuditCounts,
    ) -> DbResult<()>;
    /// Marks an audit failed with the reason it could not run.
    async fn fail_packet_audit(&self, id: i64, error: &str) -> DbResult<()>;
    /// Drops the ledger rows of an attempt that will be run again.
    async fn clear_audit_calls(&self, audit_id: i64) -> DbResult<()>;
    async fn record_audit_call(&self, call: &AuditCall) -> DbResult<()>;
    /// An audit's ledger, in call order.
    async fn audit_calls(&self, audit_id: i64) -> DbResult<Vec<AuditCall>>;
}
