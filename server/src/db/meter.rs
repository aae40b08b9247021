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
    /// Tokens reserved while the call is in flight (status 0); 0 once settled.
    pub reserved_tokens: i64,
    /// Whether the call counts against the budgets.
    pub counted: bool,
    /// The retry number a client library sent (`x-stainless-retry-count`).
    pub client_retry: i64,
    /// The SHA-256 of the request body kept in the blob store (None: not kept).
    pub request_body_sha256: Option<String>,
    /// The SHA-256 of the response body kept in the blob store (a stream
    /// reassembled into one chat completion; a refusal's error body).
    pub response_body_sha256: Option<String>,
    /// What of the bodies was cut and why; None when both are whole.
    pub transcript_cut: Option<String>,
    /// What the row charges to the assignment's transcript budget.
    pub transcript_bytes: i64,
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
    /// For a forwarded call: the prompt's estimated tokens, kept in
    /// `prompt_tokens` (marked estimated) until the call is settled.
    pub prompt_estimate: i64,
    /// For a forwarded call: the worst case admission reserved.
    pub reserved_tokens: i64,
    /// For a forwarded call: it counts against the budgets until settled.
    pub counted: bool,
    pub client_retry: i64,
    pub request_body_sha256: Option<&'a str>,
    /// A refused call's error body (forwarded calls: None until settled).
    pub response_body_sha256: Option<&'a str>,
    pub transcript_cut: Option<&'a str>,
    /// The bytes kept, plus (for a forwarded call) the room reserved for
    /// its response.
    pub transcript_bytes: i64,
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
    /// Whether the call counts against the budgets: false only when the
    /// upstream never saw it (the connection failed).
    pub counted: bool,
    pub response_body_sha256: Option<String>,
    /// Added to the row's `transcript_cut` (after the request's).
    pub transcript_cut: Option<String>,
    /// The row's transcript bytes once settled (request and response kept);
    /// None keeps what admission charged.
    pub transcript_bytes: Option<i64>,
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

/// What an assignment has used of its budgets: the counted calls (forwarded
/// and seen by the upstream, whatever it answered, 5xx and time-outs
/// included; refused calls and connection failures never count), with the
/// reservations of calls still in flight in `tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MeterUsage {
    pub calls: i64,
    pub tokens: i64,
    pub request_bytes: i64,
    /// Transcript bytes kept (and reserved for calls in flight), refused
    /// calls included.
    pub transcript_bytes: i64,
}

impl std::ops::AddAssign for MeterUsage {
    fn add_assign(&mut self, d: MeterUsage) {
        self.calls += d.calls;
        self.tokens += d.tokens;
        self.request_bytes += d.request_bytes;
        self.transcript_bytes += d.transcript_bytes;
    }
}

impl MeterUsage {
    /// What recording `c` adds to the totals: the arithmetic of the
    /// trigger `model_calls_admit` (migration 0011), for the meter's
    /// in-memory copy (`crate::meter_cache`).
    pub fn admit(&mut self, c: &NewModelCall<'_>) {
        let counted = i64::from(c.counted);
        self.calls += counted;
        self.tokens += c.reserved_tokens * counted;
        self.request_bytes += c.request_bytes * counted;
        self.transcript_bytes += c.transcript_bytes;
    }

    /// What settling a forwarded call admitted with `reserved_tokens`,
    /// `request_bytes` and `transcript_bytes` changes: the arithmetic of the
    /// trigger `model_calls_settle` (the reservation replaced by the tokens
    /// used, the call and its bytes taken out when it no longer counts).
    pub fn settle(
        &mut self,
        reserved_tokens: i64,
        request_bytes: i64,
        transcript_bytes: i64,
        o: &ModelCallOutcome,
    ) {
        let counted = i64::from(o.counted);
        self.calls += counted - 1;
        self.tokens += (o.prompt_tokens + o.completion_tokens) * counted - reserved_tokens;
        self.request_bytes -= (1 - counted) * request_bytes;
        self.transcript_bytes += o.transcript_bytes.unwrap_or(transcript_bytes) - transcript_bytes;
    }
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
    /// Settles a call in flight: its reservation is replaced by the
    /// outcome's tokens, in the row and the assignment's totals, in one
    /// transaction. Returns false (and changes nothing) when the call was
    /// settled already.
    async fn finish_model_call(&self, id: i64, outcome: ModelCallOutcome) -> DbResult<bool>;
    /// The assignment's running totals (one row read, no scan of the ledger).
    async fn meter_usage(&self, assignment_id: &str) -> DbResult<MeterUsage>;
    /// The calls still in flight (status 0), oldest first.
    async fn pending_model_calls(&self) -> DbResult<Vec<ModelCall>>;
    /// The key row with this hash, revoked or not.
    async fn model_key_by_hash(&self, key_hash: &str) -> DbResult<Option<ModelKey>>;
    /// The assignment's keys, oldest generation first.
    async fn model_keys_of(&self, assignment_id: &str) -> DbResult<Vec<ModelKey>>;
    /// Adds a key generation; does nothing when that generation exists.
    async fn create_model_key(
        &self,
        assignment_id: &str,
        generation: i64,
        key_hash: &str,
        at: i64,
    ) -> DbResult<()>;
    async fn revoke_model_key(&self, id: i64, at: i64) -> DbResult<()>;
    /// When the assignment's first accepted red run was witnessed.
    async fn red_witnessed_at(&self, assignment_id: &str) -> DbResult<Option<i64>>;
}
