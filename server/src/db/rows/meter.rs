//! The rows of `meter` as both backends read them (sqlx's `FromRow` is
//! generic over the database), and their conversion to the area's types.

use sqlx::FromRow;

use crate::db::meter::*;

#[derive(FromRow)]
pub(crate) struct ModelCallDb {
    pub(crate) id: i64,
    pub(crate) assignment_id: String,
    pub(crate) at: i64,
    pub(crate) model: String,
    pub(crate) stream: i64,
    pub(crate) request_bytes: i64,
    pub(crate) response_bytes: i64,
    pub(crate) prompt_tokens: i64,
    pub(crate) completion_tokens: i64,
    pub(crate) tokens_estimated: i64,
    pub(crate) latency_ms: i64,
    pub(crate) status: i64,
    pub(crate) error: Option<String>,
    pub(crate) refused: Option<String>,
    pub(crate) request_sha256: String,
    pub(crate) duplicate_of: Option<i64>,
    pub(crate) reserved_tokens: i64,
    pub(crate) counted: i64,
    pub(crate) client_retry: i64,
    pub(crate) request_body_sha256: Option<String>,
    pub(crate) response_body_sha256: Option<String>,
    pub(crate) transcript_cut: Option<String>,
    pub(crate) transcript_bytes: i64,
}

#[derive(FromRow)]
pub(crate) struct ModelKeyDb {
    pub(crate) id: i64,
    pub(crate) assignment_id: String,
    pub(crate) generation: i64,
    pub(crate) key_hash: String,
    pub(crate) created_at: i64,
    pub(crate) revoked_at: Option<i64>,
}

impl From<ModelCallDb> for ModelCall {
    fn from(r: ModelCallDb) -> ModelCall {
        ModelCall {
            id: r.id,
            assignment_id: r.assignment_id,
            at: r.at,
            model: r.model,
            stream: r.stream != 0,
            request_bytes: r.request_bytes,
            response_bytes: r.response_bytes,
            prompt_tokens: r.prompt_tokens,
            completion_tokens: r.completion_tokens,
            tokens_estimated: r.tokens_estimated != 0,
            latency_ms: r.latency_ms,
            status: r.status,
            error: r.error,
            refused: r.refused,
            request_sha256: r.request_sha256,
            duplicate_of: r.duplicate_of,
            reserved_tokens: r.reserved_tokens,
            counted: r.counted != 0,
            client_retry: r.client_retry,
            request_body_sha256: r.request_body_sha256,
            response_body_sha256: r.response_body_sha256,
            transcript_cut: r.transcript_cut,
            transcript_bytes: r.transcript_bytes,
        }
    }
}

impl From<ModelKeyDb> for ModelKey {
    fn from(r: ModelKeyDb) -> ModelKey {
        ModelKey {
            id: r.id,
            assignment_id: r.assignment_id,
            generation: r.generation,
            key_hash: r.key_hash,
            created_at: r.created_at,
            revoked_at: r.revoked_at,
        }
    }
}

pub(crate) const CALL_COLUMNS: &str = "id, assignment_id, at, model, stream, request_bytes, response_bytes, prompt_tokens, completion_tokens,
    tokens_estimated, latency_ms, status, error, refused, request_sha256, duplicate_of, reserved_tokens, counted, client_retry,
    request_body_sha256, response_body_sha256, transcript_cut, transcript_bytes";

pub(crate) const KEY_COLUMNS: &str =
    "id, assignment_id, generation, key_hash, created_at, revoked_at";
