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

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use grader::manifest::Budgets;
use serde::Serialize;
use serde_json::{Value, json};
use sha2::Digest;

use crate::auth::password::token_hash;
use crate::db::meter::NewModelCall;
use crate::db::{Assignment, MeterUsage, ModelKey};
use crate::error::AppError;
use crate::now_ms;
use crate::state::AppState;

mod budget;
mod proxy;

pub use budget::{CapUse, Refused, caps_of};

pub fn routes() -> crate::routes::Routes {
    crate::routes::Routes::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/c/{token}/meter", get(meter_status))
}

/// The model key of an assignment's `generation`:
/// `gh-` + the first 40 hex digits of sha256("gatehouse-model-key:<generation>:<link token>").
pub fn model_key(generation: i64, link_token: &str) -> String {
    let digest = sha2::Sha256::digest(format!("gatehouse-model-key:{generation}:{link_token}").as_bytes());
    format!("gh-{}", &hex::encode(digest)[..40])
}

/// The assignment's current key: the newest generation unless it was
/// revoked (then None). The first generation is created the first time
/// it is needed.
pub async fn current_key(state: &AppState, a: &Assignment, link_token: &str) -> Result<Option<(ModelKey, String)>, AppError> {
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

/// Revokes every key of the assignment and issues the next generation.
pub async fn reissue_key(state: &AppState, a: &Assignment, link_token: &str) -> Result<String, AppError> {
    let keys = state.db.model_keys_of(&a.id).await?;
    let now = now_ms();
    for k in keys.iter().filter(|k| k.revoked_at.is_none()) {
        state.db.revoke_model_key(k.id, now).await?;
    }
    let generation = keys.last().map(|k| k.generation + 1).unwrap_or(1);
    let key = model_key(generation, link_token);
    state.db.create_model_key(&a.id, generation, &token_hash(&key), now).await?;
    Ok(key)
}

/// What the meter needs from a packet version, read once per version
/// (published versions never change).
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub budgets: Budgets,
    /// `[workspace] model_waits_for_red`: no model calls before a witnessed red.
    pub waits_for_red: bool,
}

impl Rules {
    /// Reads `[budgets]` and `[workspace] model_waits_for_red` from a
    /// packet.toml without the full manifest, so a newer manifest field
    /// never stops the meter.
    pub fn parse(src: &str) -> Result<Rules, String> {
        let doc: toml_edit::DocumentMut = src.parse().map_err(|e| format!("packet.toml: {e}"))?;
        let budget = |name: &str| doc.get("budgets").and_then(|t| t.get(name)).and_then(|v| v.as_integer()).map(|v| v.max(0) as u64);
        Ok(Rules {
            budgets: Budgets {
                model_calls: budget("model_calls"),
                tokens: budget("tokens"),
                tool_calls: budget("tool_calls"),
                wall_clock_secs: budget("wall_clock_secs"),
                time_box_minutes: budget("time_box_minutes"),
                request_bytes: budget("request_bytes"),
            },
            waits_for_red: doc.get("workspace").and_then(|t| t.get("model_waits_for_red")).and_then(|v| v.as_bool()).unwrap_or(false),
        })
    }
}

/// The rules of the assignment's packet version, cached by data folder and
/// version id (several apps in one process, as in tests, never share one).
pub async fn rules_for(state: &AppState, a: &Assignment) -> Result<Arc<Rules>, AppError> {
    type Cache = Mutex<HashMap<(PathBuf, i64), Arc<Rules>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let id = (state.config.data_dir.clone(), a.packet_version_id);
    if let Some(r) = cache.lock().expect("rules cache").get(&id) {
        return Ok(r.clone());
    }
    let version = state
        .db
        .version_by_id(a.packet_version_id)
        .await?
        .ok_or_else(|| AppError::Internal(anyhow::anyhow!("packet version {} of assignment {} is missing", a.packet_version_id, a.id)))?;
    let path = crate::library::version_dir(state, &version.dir).join("packet.toml");
    let src = tokio::fs::read_to_string(&path).await.map_err(|e| AppError::Internal(anyhow::anyhow!("reading {}: {e}", path.display())))?;
    let rules = Arc::new(Rules::parse(&src).map_err(|e| AppError::Internal(anyhow::anyhow!("{}: {e}", path.display())))?);
    cache.lock().expect("rules cache").insert(id, rules.clone());
    Ok(rules)
}

/// One lock per assignment, held while a call's budgets are checked and its
/// row is written, so concurrent calls cannot both take the last unit.
fn assignment_lock(id: &str) -> Arc<tokio::sync::Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> = OnceLock::new();
    LOCKS.get_or_init(Default::default).lock().expect("meter locks").entry(id.to_string()).or_default().clone()
}

/// An error in the OpenAI shape: `{"error": {"message", "type", ...}}`.
#[derive(Debug)]
pub struct MeterError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub message: String,
    /// Extra fields of the error object (`cap`, `limit`, `used`).
    pub extra: Option<Value>,
}

impl MeterError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> MeterError {
        MeterError { status, kind, message: message.into(), extra: None }
    }

    fn unauthorized(message: impl Into<String>) -> MeterError {
        MeterError::new(StatusCode::UNAUTHORIZED, "invalid_api_key", message)
    }

    pub fn body(&self) -> Value {
        let mut error = json!({ "message": self.message, "type": self.kind });
        if let (Some(Value::Object(extra)), Value::Object(obj)) = (&self.extra, &mut error) {
            obj.extend(extra.clone());
        }
        json!({ "error": error })
    }
}

impl From<AppError> for MeterError {
    fn from(e: AppError) -> MeterError {
        if let AppError::Internal(cause) = &e {
            tracing::error!(error = ?cause, "internal error in the model meter");
        }
        MeterError::new(e.status(), "server_error", e.public_message())
    }
}

impl From<sqlx::Error> for MeterError {
    fn from(e: sqlx::Error) -> MeterError {
        AppError::from(e).into()
    }
}

impl IntoResponse for MeterError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// The assignment behind a model key. A revoked key or a passed deadline
/// is a refusal of that assignment (returned with it, so it can be
/// recorded); an unknown key is plain 401.
async fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<(Assignment, Option<(&'static str, MeterError)>), MeterError> {
    let key = bearer(headers).ok_or_else(|| {
        MeterError::unauthorized("send `Authorization: Bearer <model key>`; the key is on your assignment page")
    })?;
    let row = state
        .db
        .model_key_by_hash(&token_hash(key))
        .await?
        .ok_or_else(|| MeterError::unauthorized("this model key is not known; copy the key from your assignment page"))?;
    let a = state
        .db
        .assignment_by_id(&row.assignment_id)
        .await?
        .ok_or_else(|| MeterError::unauthorized("this model key's assignment no longer exists"))?;
    let refusal = if let Some(at) = row.revoked_at {
        Some(("revoked", MeterError::unauthorized(format!(
            "this model key was revoked at {}; your assignment page shows the current key",
            crate::times::utc(at)
        ))))
    } else if now_ms() >= a.deadline {
        Some(("expired", MeterError::unauthorized(format!(
            "this model key expired with its assignment, whose deadline passed at {}",
            crate::times::utc(a.deadline)
        ))))
    } else {
        None
    };
    Ok((a, refusal))
}

/// What the meter reads from a request body before forwarding it.
struct RequestInfo {
    model: String,
    stream: bool,
    sha256: String,
    bytes: i64,
}

impl RequestInfo {
    fn of(body: &[u8]) -> (RequestInfo, Option<Value>) {
        let json: Option<Value> = serde_json::from_slice(body).ok();
        let model = json.as_ref().and_then(|j| j.get("model")).and_then(Value::as_str).unwrap_or_default().to_string();
        let stream = json.as_ref().and_then(|j| j.get("stream")).and_then(Value::as_bool).unwrap_or(false);
        let info = RequestInfo { model, stream, sha256: hex::encode(sha2::Sha256::digest(body)), bytes: body.len() as i64 };
        (info, json)
    }
}

/// Records a refused call and hands the refusal back. Past
/// `max_refused_call_rows` refusals of one assignment the call is still
/// refused and counted in the metrics, but no further ledger row is written
/// (a script hammering a closed meter cannot grow the database).
async fn refuse(state: &AppState, a: &Assignment, req: &RequestInfo, refused: &str, error: MeterError) -> MeterError {
    match state.db.refused_call_count(&a.id).await {
        Ok(n) if n >= state.config.max_refused_call_rows as i64 => {
            metrics::counter!("gatehouse_model_calls_refused_unrecorded_total").increment(1);
            return error;
        }
        Ok(_) => {}
        Err(e) => return e.into(),
    }
    let recorded = state
        .db
        .insert_model_call(NewModelCall {
            assignment_id: &a.id,
            at: now_ms(),
            model: &req.model,
            stream: req.stream,
            request_bytes: req.bytes,
            status: i64::from(error.status.as_u16()),
            error: Some(&error.message),
            refused: Some(refused),
            request_sha256: &req.sha256,
        })
        .await;
    metrics::counter!("gatehouse_model_calls_refused_total", "refused" => refused.to_string()).increment(1);
    match recorded {
        Ok(_) => error,
        Err(e) => e.into(),
    }
}

fn time_box_secs(a: &Assignment, rules: &Rules) -> Option<i64> {
    crate::assignment::time_box_secs(a, rules.budgets.time_box_minutes)
}

async fn chat_completions(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Result<Response, MeterError> {
    let started = Instant::now();
    let (a, refusal) = authenticate(&state, &headers).await?;
    let (req, json) = RequestInfo::of(&body);
    if let Some((why, error)) = refusal {
        return Err(refuse(&state, &a, &req, why, error).await);
    }
    // Using the assignment's (valid) model key starts its time box, even
    // when the call is refused below.
    let started_at = match a.started_at {
        Some(t) => Some(t),
        None => {
            let t = now_ms();
            state.db.start_assignment(&a.id, t).await?;
            Some(t)
        }
    };
    let rules = rules_for(&state, &a).await?;
    if rules.waits_for_red && state.db.red_witnessed_at(&a.id).await?.is_none() {
        let error = MeterError::new(
            StatusCode::FORBIDDEN,
            "model_window_closed",
            "the model window opens after a witnessed red run: ask the platform to witness your failing test first (see your assignment page), then call the model",
        );
        return Err(refuse(&state, &a, &req, "model_window", error).await);
    }
    let now = now_ms();
    if let (Some(tb), Some(start)) = (time_box_secs(&a, &rules), started_at)
        && now >= start + tb * 1000
    {
        let limit = tb / 60;
        let error = budget::exceeded("time_box_minutes", limit, (now - start) / 60_000, format!("the time box of {limit} min is over"));
        return Err(refuse(&state, &a, &req, "time_box_minutes", error).await);
    }
    let Some((base, upstream_key)) = state.config.model_upstream(&a.slug) else {
        let error = MeterError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "upstream_not_configured",
            "no model upstream is configured for this packet; tell the hiring team",
        );
        return Err(refuse(&state, &a, &req, "no_upstream", error).await);
    };

    // Check the counted caps and record the call under the assignment's
    // lock, so the cap holds under concurrent calls.
    let counted = rules.budgets.model_calls.is_some() || rules.budgets.tokens.is_some() || rules.budgets.request_bytes.is_some();
    let lock = counted.then(|| assignment_lock(&a.id));
    let guard = match &lock {
        Some(l) => Some(l.lock().await),
        None => None,
    };
    let usage = if counted { state.db.meter_usage(&a.id).await? } else { MeterUsage::default() };
    if let Some(r) = budget::check(&rules.budgets, usage, req.bytes) {
        let error = budget::exceeded(r.cap, r.limit, r.used, r.message);
        return Err(refuse(&state, &a, &req, r.cap, error).await);
    }
    let id = state
        .db
        .insert_model_call(NewModelCall {
            assignment_id: &a.id,
            at: now,
            model: &req.model,
            stream: req.stream,
            request_bytes: req.bytes,
            status: 0,
            error: None,
            refused: None,
            request_sha256: &req.sha256,
        })
        .await?;
    drop(guard);
    metrics::counter!("gatehouse_model_calls_total").increment(1);
    let call = proxy::Call { state: state.clone(), id, stream: req.stream, request: json, started };
    Ok(proxy::forward(call, &base, upstream_key.as_deref(), body).await)
}

async fn models(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, MeterError> {
    let (a, refusal) = authenticate(&state, &headers).await?;
    if let Some((_, error)) = refusal {
        return Err(error);
    }
    let Some((base, key)) = state.config.model_upstream(&a.slug) else {
        return Err(MeterError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "upstream_not_configured",
            "no model upstream is configured for this packet; tell the hiring team",
        ));
    };
    Ok(proxy::models(&state, &base, key.as_deref()).await)
}

/// The candidate's view of the meter: key, endpoint, window and what is
/// left of each budget. The live budget island polls it.
#[derive(Debug, Clone, Serialize)]
pub struct MeterStatus {
    /// The current key, or None when it was revoked.
    pub key: Option<String>,
    /// The OpenAI-compatible base URL (`<public url>/v1`).
    pub endpoint: String,
    pub upstream_configured: bool,
    pub waits_for_red: bool,
    /// False before a witnessed red when the packet makes the model wait.
    pub window_open: bool,
    pub caps: Vec<CapUse>,
    /// Calls recorded (forwarded or refused).
    pub calls_recorded: i64,
}

/// The meter status of an assignment reached through its link token.
pub async fn status_of(state: &AppState, a: &Assignment, link_token: &str) -> Result<MeterStatus, AppError> {
    let key = current_key(state, a, link_token).await?.map(|(_, k)| k);
    let rules = rules_for(state, a).await?;
    let window_open = !rules.waits_for_red || state.db.red_witnessed_at(&a.id).await?.is_some();
    let usage = state.db.meter_usage(&a.id).await?;
    let recorded = state.db.model_calls_of(&a.id).await?.len() as i64;
    let elapsed_min = a.started_at.map(|s| (now_ms() - s).max(0) / 60_000);
    let tb_min = time_box_secs(a, &rules).map(|s| s / 60);
    Ok(MeterStatus {
        key,
        endpoint: format!("{}/v1", state.config.public_url.trim_end_matches('/')),
        upstream_configured: state.config.model_upstream(&a.slug).is_some(),
        waits_for_red: rules.waits_for_red,
        window_open,
        caps: caps_of(&rules.budgets, usage, tb_min, elapsed_min),
        calls_recorded: recorded,
    })
}

async fn meter_status(State(state): State<AppState>, Path(token): Path<String>) -> Result<axum::Json<MeterStatus>, AppError> {
    let a = crate::assignment::by_token(&state, &token).await?;
    Ok(axum::Json(status_of(&state, &a, &token).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_contract() {
        let k = model_key(1, "tok");
        assert!(k.starts_with("gh-") && k.len() == 43, "{k}");
        assert_ne!(k, model_key(2, "tok"));
        let digest = hex::encode(sha2::Sha256::digest(b"gatehouse-model-key:1:tok"));
        assert_eq!(&k[3..], &digest[..40]);
    }

    #[test]
    fn rules_read_budgets_and_window() {
        let r = Rules::parse("[budgets]\nmodel_calls = 3\ntokens = 10\n[workspace]\nmodel_waits_for_red = true\n").unwrap();
        assert_eq!(r.budgets.model_calls, Some(3));
        assert_eq!(r.budgets.tokens, Some(10));
        assert_eq!(r.budgets.request_bytes, None);
        assert!(r.waits_for_red);
        assert!(!Rules::parse("[packet]\nslug = \"x\"\n").unwrap().waits_for_red);
    }
}
