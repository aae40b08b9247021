//! The model meter: an OpenAI-compatible endpoint (`POST /v1/chat/completions`,
//! streaming or not, and `GET /v1/models`) authenticated with a
//! per-assignment key. It enforces the packet's budgets, opens the model
//! window only after a witnessed red run when the packet says so, forwards
//! to the operator's upstream, and records every call, forwarded or
//! refused, in `model_calls` (the ledger the grader reads as witnessed
//! evidence).
//!
//! The key of an assignment is derived from its link token and a
//! generation (see [`model_key`]); only its hash is stored, so the
//! candidate page (which has the link token) can always show it.
//!
//! Admission (`chat_completions`) finds the key's row and assignment
//! (`meter_cache`, else the database), reads the body up to the size cap,
//! checks the rules (window, time box, `models`), then under one per-assignment
//! lock takes the assignment's running totals (kept in memory, seeded from
//! `meter_totals`), reserves the worst case (prompt estimate plus `max_tokens`,
//! clamped to what is left) and writes the row (status 0, `reserved_tokens`),
//! the trigger `model_calls_admit` adding it to the totals in the same
//! statement; the row is committed before the call is forwarded. A filled-in
//! `max_tokens` is added to the client's bytes; a body whose own fields change
//! is serialised again. One rustls client (web PKI roots plus `model_ca_file`)
//! in `AppState::model_client` reaches the upstreams.
//!
//! `meter_totals` equals the sum of the counted rows (settled tokens plus the
//! reservations of rows in flight): triggers on `model_calls` keep it
//! (`model_calls_admit` on insert, `model_calls_settle` when a row leaves
//! status 0), so `insert_model_call` and `finish_model_call` are one statement
//! each, atomic with the totals, and a crash between admission and settlement
//! leaves a row in flight that the next start settles
//! (`interrupted::settle_interrupted`). Admission runs in the one `serve`
//! process (the lock is in memory); `gatehouse worker` never admits calls. A
//! transcript never changes a call's outcome: `meter_totals.transcript_bytes`
//! equals the sum of the rows' `transcript_bytes`, refused rows included.

use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use grader::manifest::Budgets;
use serde_json::{Value, json};
use sha2::Digest;

use crate::auth::password::token_hash;
use crate::db::meter::NewModelCall;
use crate::db::{Assignment, ModelKey};
use crate::error::AppError;
use crate::now_ms;
use crate::state::AppState;

mod budget;
mod interrupted;
pub use crate::meter_cache as cache;
mod proxy;
pub mod transcript;

pub use interrupted::settle_interrupted;

pub use app::contract::MeterStatus;
pub use budget::{CapUse, Refused, caps_of};
pub use proxy::{Usage, estimate_prompt, usage_of};

pub fn routes() -> crate::routes::Routes {
    crate::routes::Routes::new()
        // The handler reads the body itself, up to the packet's and the
        // configured cap, so an oversized request is a recorded refusal.
        .route("/v1/chat/completions", post(chat_completions).layer(DefaultBodyLimit::disable()))
        .route("/v1/models", get(models))
        .route("/c/{token}/meter", get(meter_status))
}

/// The model key of an assignment's `generation`:
/// `gh-` + the first 40 hex digits of sha256("gatehouse-model-key:<generation>:<link token>").
pub fn model_key(generation: i64, link_token: &str) -> String {
    let digest =
        sha2::Sha256::digest(format!("gatehouse-model-key:{generation}:{link_token}").as_bytes());
    format!("gh-{}", &hex::encode(digest)[..40])
}

/// The assignment's current key: the newest generation unless it was
/// revoked (then None). The first generation is created the first time
/// it is needed.
pub async fn current_key(
    state: &AppState,
    a: &Assignment,
    link_token: &str,
) -> Result<Option<(ModelKey, String)>, AppError> {
    let mut keys = state.db.model_keys_of(&a.id).await?;
    if keys.is_empty() {
        let key = model_key(1, link_token);
        state.db.create_model_key(&a.id, 1, &token_hash(&key), now_ms()).await?;
        keys = state.db.model_keys_of(&a.id).await?;
    }
    Ok(keys.pop().filter(|k| k.revoked_at.is_none()).map(|k| {
        let key = model_key(k.generation, link_token);
        (k, key)
    }))
}

/// Revokes every key of the assignment still valid; returns how many.
/// The meter's cache forgets the assignment's keys once the database has
/// them revoked, so the very next call with one is refused. Every
/// revocation goes through here.
pub async fn revoke_keys(state: &AppState, a: &Assignment) -> Result<usize, AppError> {
    revoke_keys_at(state, a, now_ms()).await
}

/// [`revoke_keys`] with the revocation time given (an erasure takes it back
/// by that time when it is refused).
pub async fn revoke_keys_at(state: &AppState, a: &Assignment, now: i64) -> Result<usize, AppError> {
    let keys = state.db.model_keys_of(&a.id).await?;
    let mut revoked = 0;
    let result = async {
        for k in keys.iter().filter(|k| k.revoked_at.is_none()) {
            state.db.revoke_model_key(k.id, now).await?;
            revoked += 1;
        }
        Ok::<_, AppError>(())
    }
    .await;
    // Forgotten even when a revocation failed part way.
    state.memo.meter.forget_keys_of(&a.id);
    result.map(|()| revoked)
}

/// Revokes every key of the assignment and issues the next generation.
pub async fn reissue_key(
    state: &AppState,
    a: &Assignment,
    link_token: &str,
) -> Result<String, AppError> {
    revoke_keys(state, a).await?;
    let keys = state.db.model_keys_of(&a.id).await?;
    let now = now_ms();
    let generation = keys.last().map(|k| k.generation + 1).unwrap_or(1);
    let key = model_key(generation, link_token);
    state.db.create_model_key(&a.id, generation, &token_hash(&key), now).await?;
    Ok(key)
}

/// The upstream client: rustls with the web PKI roots, plus the CA
/// certificates of `model_ca_file` when set.
pub fn upstream_client(config: &crate::config::Config) -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(true)
        .connect_timeout(std::time::Duration::from_secs(10))
        .pool_idle_timeout(std::time::Duration::from_secs(60))
        .tcp_nodelay(true);
    if let Some(path) = &config.model_ca_file {
        let pem = std::fs::read(path)
            .map_err(|e| anyhow::anyhow!("model_ca_file {}: {e}", path.display()))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| anyhow::anyhow!("model_ca_file {}: {e}", path.display()))?;
        if certs.is_empty() {
            anyhow::bail!(
                "model_ca_file {}: no PEM certificate (-----BEGIN CERTIFICATE-----) in the file",
                path.display()
            );
        }
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder.build().map_err(|e| anyhow::anyhow!("building the model upstream client: {e}"))
}

/// What the meter needs from a packet version: a view of the cached
/// packet (published versions never change), so nothing is copied per call.
#[derive(Debug, Clone)]
pub struct Rules {
    packet: std::sync::Arc<grader::packet::Packet>,
}

impl Rules {
    pub fn of(packet: std::sync::Arc<grader::packet::Packet>) -> Rules {
        Rules { packet }
    }

    /// `[budgets]`: the caps, the allowed models and the `max_tokens`
    /// default and ceiling.
    pub fn budgets(&self) -> &Budgets {
        &self.packet.manifest.budgets
    }

    /// `[workspace] model_waits_for_red`: no model calls before a witnessed red.
    pub fn waits_for_red(&self) -> bool {
        self.packet.manifest.workspace.model_waits_for_red
    }

    /// The refusal of a request for a model the packet does not allow.
    fn model_refusal(&self, model: &str) -> Option<AppError> {
        let allowed = self.budgets().models.as_ref()?;
        if allowed.iter().any(|m| m == model) {
            return None;
        }
        let shown =
            if model.is_empty() { "no model".to_string() } else { format!("the model {model:?}") };
        Some(
            AppError::BadRequest(format!(
                "this assignment may not use {shown}; it may use: {}",
                allowed.join(", ")
            ))
            .coded("model_not_allowed")
            .with_fields(json!({ "allowed": allowed })),
        )
    }
}

/// The rules of the assignment's packet version, from the app's packet
/// cache.
pub async fn rules_for(state: &AppState, a: &Assignment) -> Result<Rules, AppError> {
    Ok(Rules::of(crate::library::packet_of(state, a.packet_version_id).await?))
}

/// The meter's rendering of an [`AppError`]: OpenAI's
/// `{"error": {"message", "type", ...}}` with the error's status, its code
/// as the `type` (uncoded errors: `server_error`) and its extra fields, so
/// SDK clients map it to their exception types.
#[derive(Debug)]
pub struct OpenAiError(pub AppError);

/// The codes of errors a client may retry (upstream failures and the
/// meter's own internal errors); every other meter error is final.
const RETRYABLE: [&str; 3] = ["upstream_timeout", "upstream_unreachable", "server_error"];

impl OpenAiError {
    /// The `type` of the error object.
    pub fn kind(&self) -> &'static str {
        self.0.code().unwrap_or("server_error")
    }

    pub fn body(&self) -> Value {
        let mut error = json!({ "message": self.0.public_message(), "type": self.kind() });
        if let (Some(Value::Object(extra)), Value::Object(obj)) = (self.0.fields(), &mut error) {
            obj.extend(extra.clone());
        }
        json!({ "error": error })
    }
}

impl From<AppError> for OpenAiError {
    fn from(e: AppError) -> OpenAiError {
        OpenAiError(e)
    }
}

impl From<sqlx::Error> for OpenAiError {
    fn from(e: sqlx::Error) -> OpenAiError {
        OpenAiError(e.into())
    }
}

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        if let Some(cause) = self.0.internal_cause() {
            tracing::error!(error = ?cause, "internal error in the model meter");
        }
        let mut response = (self.0.status(), axum::Json(self.body())).into_response();
        // A refusal is final: asking again gets the same answer. The
        // OpenAI SDKs read `x-should-retry` before their own rules (which
        // would retry 429 and 5xx twice), so they raise at once instead of
        // sending the same request three times.
        // (Upstream failures and the meter's own internal errors may pass.)
        if !RETRYABLE.contains(&self.kind()) {
            response
                .headers_mut()
                .insert("x-should-retry", axum::http::HeaderValue::from_static("false"));
        }
        response
    }
}

/// The 503 of a packet without a model upstream.
fn not_configured() -> AppError {
    AppError::Unavailable(
        "no model upstream is configured for this packet; tell the hiring team".into(),
    )
    .coded("upstream_not_configured")
}

/// A 401 for the model key (`invalid_api_key`).
fn bad_key(message: impl Into<String>) -> AppError {
    AppError::BadCredentials(message.into()).coded("invalid_api_key")
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// A model key's row and assignment, and how to keep them once the
/// assignment has started (see [`cache`]).
struct Authenticated {
    keyed: std::sync::Arc<cache::Keyed>,
    hash: String,
    /// The cache's epoch when the facts were read from the database (None:
    /// they came from the cache).
    read_at: Option<u64>,
}

/// The assignment behind a model key, from the meter's cache or the
/// database. A revoked key or a passed deadline is a refusal of that
/// assignment (returned with it, so it can be recorded); an unknown key is
/// plain 401.
async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<(Authenticated, Option<(&'static str, AppError)>), OpenAiError> {
    let key = bearer(headers).ok_or_else(|| {
        bad_key("send `Authorization: Bearer <model key>`; the key is on your assignment page")
    })?;
    let hash = token_hash(key);
    let (keyed, read_at) = match state.memo.meter.key(&hash) {
        Ok(keyed) => (keyed, None),
        Err(epoch) => {
            let row = state.db.model_key_by_hash(&hash).await?.ok_or_else(|| {
                bad_key("this model key is not known; copy the key from your assignment page")
            })?;
            let assignment = state
                .db
                .assignment_by_id(&row.assignment_id)
                .await?
                .ok_or_else(|| bad_key("this model key's assignment no longer exists"))?;
            let keyed = std::sync::Arc::new(cache::Keyed { key: row, assignment });
            state.memo.meter.keep_key(&hash, epoch, keyed.clone());
            (keyed, Some(epoch))
        }
    };
    let (row, a) = (&keyed.key, &keyed.assignment);
    let refusal = if let Some(at) = row.revoked_at {
        Some((
            "revoked",
            bad_key(format!(
                "this model key was revoked at {}; your assignment page shows the current key",
                crate::times::utc(at)
            )),
        ))
    } else if now_ms() >= a.deadline {
        Some((
            "expired",
            bad_key(format!(
                "this model key expired with its assignment, whose deadline passed at {}",
                crate::times::utc(a.deadline)
            )),
        ))
    } else {
        None
    };
    Ok((Authenticated { keyed, hash, read_at }, refusal))
}

/// Whether the assignment's red run was witnessed (kept once it was).
async fn red_witnessed(state: &AppState, assignment_id: &str) -> Result<bool, AppError> {
    if state.memo.meter.red_witnessed(assignment_id) {
        return Ok(true);
    }
    let red = state.db.red_witnessed_at(assignment_id).await?.is_some();
    if red {
        state.memo.meter.keep_red_witnessed(assignment_id);
    }
    Ok(red)
}

/// A JSON text read as serde_json reads it into a [`Value`] (a key given
/// twice keeps its last value, as serde_json, Python, Go and JavaScript
/// read it), in the same pass telling whether some object, at any depth,
/// had a key twice. An upstream that read the first could be sent a model
/// or a `max_tokens` other than the one the meter checked, so such a body
/// is forwarded as the meter read it.
fn parse_noting_duplicates(body: &[u8]) -> Option<(Value, bool)> {
    use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

    /// Reads one value, setting the flag on a duplicate key within it.
    struct Read<'f>(&'f mut bool);
    impl<'de> DeserializeSeed<'de> for Read<'_> {
        type Value = Value;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Read<'_> {
        type Value = Value;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON value")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
            Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
        }
        fn visit_str<E>(self, v: &str) -> Result<Value, E> {
            Ok(Value::String(v.to_owned()))
        }
        fn visit_string<E>(self, v: String) -> Result<Value, E> {
            Ok(Value::String(v))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            let mut out = Vec::new();
            while let Some(v) = seq.next_element_seed(Read(&mut *self.0))? {
                out.push(v);
            }
            Ok(Value::Array(out))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut out = serde_json::Map::new();
            while let Some(key) = map.next_key::<String>()? {
                let v = map.next_value_seed(Read(&mut *self.0))?;
                *self.0 |= out.insert(key, v).is_some();
            }
            Ok(Value::Object(out))
        }
    }
    let mut duplicated = false;
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = Read(&mut duplicated).deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some((value, duplicated))
}

/// What the meter reads from a request body before forwarding it.
struct RequestInfo {
    model: String,
    stream: bool,
    sha256: String,
    bytes: i64,
    /// The retry number a client library says this request is.
    client_retry: i64,
    /// Some object in the body has a key twice.
    duplicated: bool,
}

impl RequestInfo {
    fn of(body: &[u8], headers: &HeaderMap) -> (RequestInfo, Option<Value>) {
        let (json, duplicated) = match parse_noting_duplicates(body) {
            Some((json, duplicated)) if json.is_object() => (Some(json), duplicated),
            _ => (None, false),
        };
        let model = json
            .as_ref()
            .and_then(|j| j.get("model"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let stream =
            json.as_ref().and_then(|j| j.get("stream")).and_then(Value::as_bool).unwrap_or(false);
        let info = RequestInfo {
            model,
            stream,
            sha256: hex::encode(sha2::Sha256::digest(body)),
            bytes: body.len() as i64,
            client_retry: client_retry(headers),
            duplicated,
        };
        (info, json)
    }
}

/// The retry number a client library sent: the OpenAI SDKs'
/// `x-stainless-retry-count` (0 on a first attempt), else 0.
fn client_retry(headers: &HeaderMap) -> i64 {
    headers
        .get("x-stainless-retry-count")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok())
        .map(|n| n.clamp(0, 1000))
        .unwrap_or(0)
}

/// Records a refused call and hands the refusal back. Past
/// `max_refused_call_rows` refusals of one assignment the call is still
/// refused and counted in the metrics, but no further ledger row is written
/// (a script hammering a closed meter cannot grow the database).
/// Its transcript keeps the request and the error body the client got.
async fn refuse(
    state: &AppState,
    a: &Assignment,
    req: &RequestInfo,
    body: &Bytes,
    refused: &str,
    error: AppError,
) -> OpenAiError {
    let error = OpenAiError(error);
    let message = error.0.public_message();
    match state.db.refused_call_count(&a.id).await {
        Ok(n) if n >= state.config.max_refused_call_rows as i64 => {
            metrics::counter!("gatehouse_model_calls_refused_unrecorded_total").increment(1);
            return error;
        }
        Ok(_) => {}
        Err(e) => return e.into(),
    }
    let room = match state.db.meter_usage(&a.id).await {
        Ok(usage) => transcript::Room::of(state, &usage),
        Err(e) => return e.into(),
    };
    let request = transcript::keep(state, "request", body.clone(), room, Some(&req.sha256));
    let answer = Bytes::from(serde_json::to_vec(&error.body()).expect("JSON serializes"));
    let response = transcript::keep(state, "response", answer, room.after(request.bytes), None);
    let cut = transcript::cuts(request.cut, response.cut);
    let recorded = state
        .db
        .insert_model_call(NewModelCall {
            assignment_id: &a.id,
            at: now_ms(),
            model: &req.model,
            stream: req.stream,
            request_bytes: req.bytes,
            status: i64::from(error.0.status().as_u16()),
            error: Some(&message),
            refused: Some(refused),
            request_sha256: &req.sha256,
            prompt_estimate: 0,
            reserved_tokens: 0,
            counted: false,
            client_retry: req.client_retry,
            request_body_sha256: request.sha256.as_deref(),
            response_body_sha256: response.sha256.as_deref(),
            transcript_cut: cut.as_deref(),
            transcript_bytes: (request.bytes + response.bytes) as i64,
        })
        .await;
    // The row's transcript bytes are in the database's totals: the kept
    // ones are read afresh by the next admission.
    state.memo.meter.forget_totals(&a.id);
    metrics::counter!("gatehouse_model_calls_refused_total", "refused" => refused.to_string())
        .increment(1);
    match recorded {
        Ok(_) => error,
        Err(e) => e.into(),
    }
}

fn time_box_secs(a: &Assignment, rules: &Rules) -> Option<i64> {
    crate::assignment::time_box_secs(a, rules.budgets().time_box_minutes)
}

/// The largest request body the meter reads for this packet: the
/// configured maximum, lowered to the packet's `request_bytes` budget.
fn request_limit(state: &AppState, rules: &Rules) -> u64 {
    let configured = state.config.model_max_request_bytes.max(1);
    rules.budgets().request_bytes.map_or(configured, |b| b.min(configured))
}

/// Reads the body up to `limit` bytes; past it, Err(bytes seen so far).
async fn read_body(body: Body, limit: u64) -> Result<Result<Bytes, Vec<u8>>, OpenAiError> {
    let mut stream = body.into_data_stream();
    let mut out = Vec::new();
    while let Some(chunk) = futures_util::StreamExt::next(&mut stream).await {
        let chunk = chunk.map_err(|e| {
            AppError::BadRequest(format!("reading the request body failed: {e}"))
                .coded("invalid_request_error")
        })?;
        out.extend_from_slice(&chunk);
        if out.len() as u64 > limit {
            return Ok(Err(out));
        }
    }
    Ok(Ok(Bytes::from(out)))
}

/// The completion limit the client asked for: (field name, value).
fn requested_max(json: &Value) -> Option<(&'static str, i64)> {
    ["max_completion_tokens", "max_tokens"]
        .into_iter()
        .find_map(|k| json.get(k).and_then(Value::as_i64).map(|v| (k, v.max(0))))
}

/// `body` (a JSON object without `field`) with `"field":value` as its
/// first member.
fn with_first_field(body: &[u8], field: &str, value: i64) -> Bytes {
    let open = body.iter().position(|&b| b == b'{').expect("the body is a JSON object");
    let rest = &body[open + 1..];
    let empty = rest.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'}');
    let member = format!("\"{field}\":{value}{}", if empty { "" } else { "," });
    let mut out = Vec::with_capacity(body.len() + member.len());
    out.extend_from_slice(&body[..=open]);
    out.extend_from_slice(member.as_bytes());
    out.extend_from_slice(rest);
    Bytes::from(out)
}

async fn chat_completions(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, OpenAiError> {
    let started = Instant::now();
    let (auth, refusal) = authenticate(&state, &headers).await?;
    let a = &auth.keyed.assignment;
    let rules = rules_for(&state, a).await?;
    let limit = request_limit(&state, &rules);
    let body = match read_body(body, limit).await? {
        Ok(b) => b,
        Err(seen) => {
            // The bytes read so far are hashed; the size is the declared
            // length when the client sent one.
            let declared = headers
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<i64>().ok());
            let (mut req, _) = RequestInfo::of(&seen, &headers);
            req.bytes = declared.unwrap_or(req.bytes).max(req.bytes);
            let error = AppError::TooLarge(format!(
                "this request is larger than the {limit} bytes a model call may send"
            ))
            .coded("request_too_large")
            .with_fields(json!({ "cap": "request_size", "limit": limit }));
            return Err(refuse(&state, a, &req, &Bytes::from(seen), "request_size", error).await);
        }
    };
    let (req, json) = RequestInfo::of(&body, &headers);
    if let Some((why, error)) = refusal {
        return Err(refuse(&state, a, &req, &body, why, error).await);
    }
    // Using the assignment's (valid) model key starts its time box, even
    // when the call is refused below.
    let started_at = match a.started_at {
        Some(t) => Some(t),
        None => {
            let t = now_ms();
            state.db.start_assignment(&a.id, t).await?;
            // Read back (an earlier start stands), and kept from now on:
            // `started_at` never changes again.
            let fresh = state
                .db
                .assignment_by_id(&a.id)
                .await?
                .ok_or_else(|| bad_key("this model key's assignment no longer exists"))?;
            let at = fresh.started_at.unwrap_or(t);
            if let Some(epoch) = auth.read_at {
                let keyed = cache::Keyed { key: auth.keyed.key.clone(), assignment: fresh };
                state.memo.meter.keep_key(&auth.hash, epoch, std::sync::Arc::new(keyed));
            }
            Some(at)
        }
    };
    let Some(json) = json else {
        let error = AppError::BadRequest(
            "the request body is not a JSON object; send a chat completion request (`{\"model\": ..., \"messages\": [...]}`)".into(),
        )
        .coded("invalid_request_error");
        return Err(refuse(&state, a, &req, &body, "invalid_request", error).await);
    };
    if rules.waits_for_red() && !red_witnessed(&state, &a.id).await? {
        let error = AppError::Forbidden(
            "the model window opens after a witnessed red run: ask the platform to witness your failing test first (see your assignment page), then call the model".into(),
        )
        .coded("model_window_closed");
        return Err(refuse(&state, a, &req, &body, "model_window", error).await);
    }
    let now = now_ms();
    if let (Some(tb), Some(start)) = (time_box_secs(a, &rules), started_at)
        && now >= start + tb * 1000
    {
        let limit = tb / 60;
        let error = budget::exceeded(
            "time_box_minutes",
            limit,
            (now - start) / 60_000,
            format!("the time box of {limit} min is over"),
        );
        return Err(refuse(&state, a, &req, &body, "time_box_minutes", error).await);
    }
    if let Some(error) = rules.model_refusal(&req.model) {
        return Err(refuse(&state, a, &req, &body, "model", error).await);
    }
    let Some((base, upstream_key)) = state.config.model_upstream(&a.slug) else {
        let error = not_configured();
        return Err(refuse(&state, a, &req, &body, "no_upstream", error).await);
    };

    // Admission: check the caps and reserve the worst case under the
    // assignment's lock, in one transaction with the call's row, so
    // concurrent calls cannot together pass a cap.
    let prompt_estimate = proxy::estimate_prompt(&json);
    let mut forwarded = json;
    let mut rewritten = false;
    let lock = state.memo.lock_for(&a.id);
    let guard = lock.lock().await;
    let usage = match state.memo.meter.totals(&a.id) {
        Some(usage) => usage,
        None => {
            let usage = state.db.meter_usage(&a.id).await?;
            state.memo.meter.keep_totals(&a.id, usage);
            usage
        }
    };
    if let Some(r) = budget::check(rules.budgets(), usage, req.bytes) {
        let error = budget::exceeded(r.cap, r.limit, r.used, r.message);
        return Err(refuse(&state, a, &req, &body, r.cap, error).await);
    }
    let asked = requested_max(&forwarded);
    let (field, mut max) = match asked {
        Some((field, v)) => (field, Some(v)),
        None => ("max_tokens", rules.budgets().max_tokens_default.map(|v| v as i64)),
    };
    // The packet's ceiling clamps what was asked (or stands in for it).
    if let Some(ceiling) = rules.budgets().max_tokens_ceiling.map(|v| v as i64) {
        max = Some(max.map_or(ceiling, |m| m.min(ceiling)));
    }
    if let Some(limit) = rules.budgets().tokens.map(|v| v as i64) {
        let left = limit - usage.tokens;
        let room = left - prompt_estimate;
        if room < 1 {
            let error = budget::exceeded(
                "tokens",
                limit,
                usage.tokens,
                format!(
                    "this request's prompt is about {prompt_estimate} tokens and only {left} of the budget of {limit} tokens are left (calls in flight hold their max_tokens until they end)"
                ),
            );
            return Err(refuse(&state, a, &req, &body, "tokens", error).await);
        }
        max = Some(max.map_or(room, |m| m.min(room)));
    }
    // (A `max_tokens` that is no integer is replaced, never sent twice.)
    let field_sent = forwarded.get(field).is_some();
    if max != asked.map(|(_, v)| v)
        && let Some(m) = max
    {
        forwarded[field] = json!(m);
        rewritten = true;
    }
    // Every stream is counted from the provider's own usage chunk: ask for
    // it when the client did not, and keep it from the client.
    let strip_usage = req.stream
        && forwarded.pointer("/stream_options/include_usage").and_then(Value::as_bool)
            != Some(true);
    if strip_usage {
        match forwarded.get_mut("stream_options") {
            Some(Value::Object(o)) => {
                o.insert("include_usage".into(), Value::Bool(true));
            }
            _ => forwarded["stream_options"] = json!({ "include_usage": true }),
        }
        rewritten = true;
    }
    let reserved = prompt_estimate + max.unwrap_or(0);
    // The transcript: the request as the client sent it, and room reserved
    // for the response.
    let room = transcript::Room::of(&state, &usage);
    let request = transcript::keep(&state, "request", body.clone(), room, Some(&req.sha256));
    let response_room = room.after(request.bytes);
    let transcript_bytes = request.bytes + response_room.limit();
    let admitted = NewModelCall {
        assignment_id: &a.id,
        at: now,
        model: &req.model,
        stream: req.stream,
        request_bytes: req.bytes,
        status: 0,
        error: None,
        refused: None,
        request_sha256: &req.sha256,
        prompt_estimate,
        reserved_tokens: reserved,
        counted: true,
        client_retry: req.client_retry,
        request_body_sha256: request.sha256.as_deref(),
        response_body_sha256: None,
        transcript_cut: request.cut.as_deref(),
        transcript_bytes: transcript_bytes as i64,
    };
    let mut kept = usage;
    kept.admit(&admitted);
    // Committed before the call is forwarded: a crash from here on leaves a
    // row in flight that `settle_interrupted` settles at the next start.
    let id = match state.db.insert_model_call(admitted).await {
        Ok(id) => id,
        Err(e) => {
            state.memo.meter.forget_totals(&a.id);
            return Err(e.into());
        }
    };
    state.memo.meter.keep_totals(&a.id, kept);
    drop(guard);
    metrics::counter!("gatehouse_model_calls_total").increment(1);
    let upstream_body = match (rewritten, field_sent, max, strip_usage) {
        // A body with a key twice goes as the meter read it.
        _ if req.duplicated => {
            Bytes::from(serde_json::to_vec(&forwarded).expect("JSON serializes"))
        }
        (false, ..) => body,
        // Only a max_tokens the client did not send was filled in: added
        // to the client's bytes, the rest of the body is not serialised again.
        (true, false, Some(m), false) => with_first_field(&body, field, m),
        (true, ..) => Bytes::from(serde_json::to_vec(&forwarded).expect("JSON serializes")),
    };
    let response_room = transcript::Room { left: response_room.limit(), ..response_room };
    let call = proxy::Call {
        state: state.clone(),
        id,
        assignment_id: a.id.clone(),
        reserved_tokens: reserved,
        request_bytes: req.bytes,
        transcript_bytes: transcript_bytes as i64,
        stream: req.stream,
        strip_usage,
        request: Some(forwarded),
        prompt_estimate,
        started,
        request_kept: request.bytes,
        request_blob: request.sha256.clone(),
        response_room,
    };
    Ok(proxy::forward(call, base, upstream_key, upstream_body).await)
}

async fn models(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, OpenAiError> {
    let (auth, refusal) = authenticate(&state, &headers).await?;
    if let Some((_, error)) = refusal {
        return Err(error.into());
    }
    let a = &auth.keyed.assignment;
    let Some((base, key)) = state.config.model_upstream(&a.slug) else {
        return Err(not_configured().into());
    };
    Ok(proxy::models(&state, &base, key.as_deref()).await)
}

/// The meter status of an assignment reached through its link token.
pub async fn status_of(
    state: &AppState,
    a: &Assignment,
    link_token: &str,
) -> Result<MeterStatus, AppError> {
    let key = current_key(state, a, link_token).await?.map(|(_, k)| k);
    let rules = rules_for(state, a).await?;
    let window_open = !rules.waits_for_red() || state.db.red_witnessed_at(&a.id).await?.is_some();
    let usage = state.db.meter_usage(&a.id).await?;
    let recorded = state.db.model_calls_of(&a.id).await?.len() as i64;
    let elapsed_min = a.started_at.map(|s| (now_ms() - s).max(0) / 60_000);
    let tb_min = time_box_secs(a, &rules).map(|s| s / 60);
    Ok(MeterStatus {
        key,
        endpoint: format!("{}/v1", state.config.public_url.trim_end_matches('/')),
        upstream_configured: state.config.model_upstream(&a.slug).is_some(),
        waits_for_red: rules.waits_for_red(),
        window_open,
        caps: caps_of(rules.budgets(), usage, tb_min, elapsed_min),
        calls_recorded: recorded,
    })
}

async fn meter_status(
    State(state): State<AppState>,
    Path(token): Path<String>,
) -> Result<axum::Json<MeterStatus>, AppError> {
    let a = crate::assignment::by_token(&state, &token).await?;
    Ok(axum::Json(status_of(&state, &a, &token).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn app_errors_render_in_openai_shape() {
        let render = |e: AppError| async move {
            let r = OpenAiError(e).into_response();
            let status = r.status();
            let retry = r.headers().get("x-should-retry").map(|v| v.to_str().unwrap().to_string());
            let body: Value = serde_json::from_slice(
                &axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap(),
            )
            .unwrap();
            (status.as_u16(), retry, body)
        };
        // A cap refusal: 429, its type and figures, final.
        let (status, retry, body) =
            render(budget::exceeded("tokens", 10, 12, "used up".into())).await;
        assert_eq!((status, retry.as_deref()), (429, Some("false")));
        assert_eq!(
            body,
            json!({"error": {"message": "used up", "type": "budget_exceeded", "cap": "tokens", "limit": 10, "used": 12}})
        );
        // A bad key: 401 invalid_api_key, final.
        let (status, retry, body) = render(bad_key("unknown key")).await;
        assert_eq!(
            (status, retry.as_deref(), body["error"]["type"].as_str()),
            (401, Some("false"), Some("invalid_api_key"))
        );
        // An upstream failure may be retried.
        let (status, retry, body) =
            render(AppError::BadGateway("down".into()).coded("upstream_unreachable")).await;
        assert_eq!(
            (status, retry, body["error"]["type"].as_str()),
            (502, None, Some("upstream_unreachable"))
        );
        let (status, retry, _) =
            render(AppError::GatewayTimeout("slow".into()).coded("upstream_timeout")).await;
        assert_eq!((status, retry), (504, None));
        // An internal error: 500 server_error with the generic message, retryable.
        let (status, retry, body) =
            render(AppError::Internal(anyhow::anyhow!("disk on fire"))).await;
        assert_eq!((status, retry), (500, None));
        assert_eq!(body["error"]["type"], "server_error");
        assert!(!body.to_string().contains("disk on fire"), "{body}");
    }

    #[test]
    fn a_filled_in_field_is_added_to_the_bodys_bytes() {
        for (body, expect) in [
            (
                &br#"{"model":"m","messages":[]}"#[..],
                json!({"max_tokens": 7, "model": "m", "messages": []}),
            ),
            (b" \n{ \"a\" : 1 }", json!({"max_tokens": 7, "a": 1})),
            (b"{}", json!({"max_tokens": 7})),
            (b"{ \n }", json!({"max_tokens": 7})),
        ] {
            let out = with_first_field(body, "max_tokens", 7);
            assert_eq!(
                serde_json::from_slice::<Value>(&out).unwrap(),
                expect,
                "{}",
                String::from_utf8_lossy(&out)
            );
        }
    }

    #[test]
    fn duplicate_keys_are_found_at_any_depth() {
        for (body, expect) in [
            (&br#"{"model":"m","max_tokens":5}"#[..], Some(false)),
            (br#"{"max_tokens":1000000,"max_tokens":5}"#, Some(true)),
            (br#"{"a":{"b":1,"c":[{"d":1},{"d":2}]}}"#, Some(false)),
            (br#"{"stream_options":{"include_usage":false,"include_usage":true}}"#, Some(true)),
            (br#"{"messages":[{"role":"user","content":"x","content":"y"}]}"#, Some(true)),
            (br#"{"a":null,"b":true,"c":-1.5,"d":"\u0041","e":18446744073709551615}"#, Some(false)),
            // The same key once escaped, once not, is the same key.
            (br#"{"max_tokens":1,"max\u005ftokens":2}"#, Some(true)),
            (b"not json", None),
        ] {
            let read = parse_noting_duplicates(body);
            assert_eq!(read.as_ref().map(|r| r.1), expect, "{}", String::from_utf8_lossy(body));
            // What the meter reads is what serde_json reads.
            assert_eq!(
                read.map(|r| r.0),
                serde_json::from_slice::<Value>(body).ok(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn keys_follow_the_contract() {
        let k = model_key(1, "tok");
        assert!(k.starts_with("gh-") && k.len() == 43, "{k}");
        assert_ne!(k, model_key(2, "tok"));
        let digest = hex::encode(sha2::Sha256::digest(b"gatehouse-model-key:1:tok"));
        assert_eq!(&k[3..], &digest[..40]);
    }

    #[test]
    fn only_the_packets_models_are_allowed() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../packets/null-status");
        let mut packet = grader::packet::Packet::load(&root).unwrap();
        let check = |packet: &grader::packet::Packet, model: &str, expect: Option<&str>| {
            let refusal = Rules::of(std::sync::Arc::new(packet.clone()))
                .model_refusal(model)
                .map(|e| e.public_message());
            assert_eq!(refusal.as_deref(), expect, "{model:?}");
        };
        packet.manifest.budgets.models = None;
        check(&packet, "anything", None);
        packet.manifest.budgets.models = Some(vec!["small".into(), "large".into()]);
        check(&packet, "small", None);
        check(
            &packet,
            "huge",
            Some("this assignment may not use the model \"huge\"; it may use: small, large"),
        );
        check(&packet, "", Some("this assignment may not use no model; it may use: small, large"));
    }
}
