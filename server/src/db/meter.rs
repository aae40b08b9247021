//! The model meter: per-assignment model keys and the ledger of every call
//! to the metered endpoint (see `crate::meter`).

use async_trait::async_trait;
use serde::Serialize;

use super::DbResult;

/// One row of `model_calls`, one field per column.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelCall {
    pub id: i64,
    pub assignment_id: String,
    pub at: i64,
    pub model: String,
    pub stream: bool,
    pub request_bytes: i64,
    pub response_bytes: i64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub tokens_estimated: bool,
    pub latency_ms: i64,
    pub status: i64,
    pub error: Option<String>,
    pub refused: Option<String>,
    pub request_sha256: String,
    pub duplicate_of: Option<i64>,
}

/// A call as it is first recorded: refused (final) or forwarded (pending,
/// status 0, finished by [`MeterStore::finish_model_call`]).
pub struct NewModelCall<'a> {
    pub assignment_id: &'a str,
    pub at: i64,
    pub model: &'a str,
    pub stream: bool,
    pub request_bytes: i64,
    pub status: i64,
    pub error: Option<&'a str>,
    pub refused: Option<&'a str>,
    pub request_sha256: &'a str,
}

/// What the upstream answered, recorded when a forwarded call ends.
pub struct ModelCallOutcome {
    pub status: i64,
    pub response_bytes: i64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub tokens_estimated: bool,
    pub latency_ms: i64,
    pub error: Option<String>,
}

/// One row of `model_keys`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelKey {
    pub id: i64,
    pub assignment_id: String,
    pub generation: i64,
    pub key_hash: String,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

/// What an assignment has used of its budgets. Only calls that were
/// forwarded and not answered with an upstream failure (status 5xx or a
/// connection error) count; refused calls never do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MeterUsage {
    pub calls: i64,
    pub tokens: i64,
    pub request_bytes: i64,
}

#[async_trait]
pub trait MeterStore {
    /// Every call of the assignment, oldest first.
    async fn model_calls_of(&self, assignment_id: &str) -> DbResult<Vec<ModelCall>>;
    /// Records a call; `duplicate_of` is set to the earliest earlier call of
    /// the same assignment with the same request hash. Returns the new id.
    async fn insert_model_call(&self, call: NewModelCall<'_>) -> DbResult<i64>;
    /// How many refused calls the assignment's ledger holds.
    async fn refused_call_count(&self, assignment_id: &str) -> DbResult<i64>;
    async fn finish_model_call(&self, id: i64, outcome: ModelCallOutcome) -> DbResult<()>;
    async fn meter_usage(&self, assignment_id: &str) -> DbResult<MeterUsage>;
    /// The key row with this hash, revoked or not.
    async fn model_key_by_hash(&self, key_hash: &str) -> DbResult<Option<ModelKey>>;
    /// The assignment's keys, oldest generation first.
    async fn model_keys_of(&self, assignment_id: &str) -> DbResult<Vec<ModelKey>>;
    /// Adds a key generation; does nothing when that generation exists.
    async fn create_model_key(&self, assignment_id: &str, generation: i64, key_hash: &str, at: i64) -> DbResult<()>;
    async fn revoke_model_key(&self, id: i64, at: i64) -> DbResult<()>;
    /// When the assignment's first accepted red run was witnessed.
    async fn red_witnessed_at(&self, assignment_id: &str) -> DbResult<Option<i64>>;
}
