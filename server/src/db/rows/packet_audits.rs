//! The rows of `packet_audits` as both backends read them (sqlx's `FromRow` is
//! generic over the database), and their conversion to the area's types.

use sqlx::FromRow;

use crate::db::packet_audits::*;

#[derive(FromRow)]
pub(crate) struct AuditDb {
    pub(crate) id: i64,
    pub(crate) version_id: i64,
    pub(crate) requested_by: Option<i64>,
    pub(crate) mode: String,
    pub(crate) functions: String,
    pub(crate) mutants: i64,
    pub(crate) model: String,
    pub(crate) max_calls: i64,
    pub(crate) max_tokens: i64,
    pub(crate) state: String,
    pub(crate) digest: String,
    pub(crate) report_json: Option<String>,
    pub(crate) error: Option<String>,
    pub(crate) created_at: i64,
    pub(crate) started_at: Option<i64>,
    pub(crate) finished_at: Option<i64>,
}

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

impl From<AuditDb> for PacketAudit {
    fn from(r: AuditDb) -> PacketAudit {
        PacketAudit {
            id: r.id,
            version_id: r.version_id,
            requested_by: r.requested_by,
            mode: r.mode,
            functions: r.functions,
            mutants: r.mutants,
            model: r.model,
            max_calls: r.max_calls,
            max_tokens: r.max_tokens,
            state: r.state,
            digest: r.digest,
            report_json: r.report_json,
            error: r.error,
            created_at: r.created_at,
            started_at: r.started_at,
            finished_at: r.finished_at,
        }
    }
}

pub(crate) const COLS: &str = "id, version_id, requested_by, mode, functions, mutants, model, max_calls, max_tokens, state, digest, report_json, error, created_at, started_at, finished_at";
