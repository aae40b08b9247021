//! The ledger rows of `packet_audit_calls` as both backends read them
//! (sqlx's `FromRow` is generic over the database), and the columns of
//! `packet_audits` (the `PacketAudit` type decodes those itself).

use sqlx::FromRow;

#[derive(FromRow)]
pub(crate) struct CallDb {
    pub(crate) audit_id: i64,
    pub(crate) version_id: i64,
    pub(crate) author_id: Option<i64>,
    pub(crate) n: i64,
    pub(crate) function: String,
    pub(crate) model: String,
    pub(crate) outcome: String,
    pub(crate) status: Option<i64>,
    pub(crate) prompt_tokens: i64,
    pub(crate) completion_tokens: i64,
    pub(crate) tokens_estimated: i64,
    pub(crate) request_bytes: i64,
    pub(crate) response_bytes: i64,
    pub(crate) started_at: i64,
    pub(crate) ended_at: i64,
    pub(crate) error: Option<String>,
}

pub(crate) const COLS: &str = "id, version_id, requested_by, mode, functions, mutants, model, max_calls, max_tokens, state, digest, report_json, error, created_at, started_at, finished_at";
