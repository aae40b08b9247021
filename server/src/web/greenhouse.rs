//! Greenhouse's Assessment Partner API, which Greenhouse calls on us, under
//! `/ats/greenhouse/`: `list_tests` (the published packets), `send_test`
//! (an assignment, its invite emailed; answers the partner_interview_id),
//! `test_status` (what `crate::ats::status` releases) and `response_error`
//! (Greenhouse reporting an answer it could not read; kept in the audit
//! log). Each call authenticates with HTTP Basic: the username is the key
//! of one ATS connection, the password empty (Greenhouse's convention).
//! Errors are JSON `{"error": ...}`.
//!
//! Also the admin page of ATS connections (`/admin/ats`): create one (its
//! key shown once, only its hash kept), revoke one.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use base64::Engine;
use leptos::prelude::*;
use serde::Deserialize;
use serde_json::json;

use app::pages::ats::{AtsPage, AtsRowView, AtsView};

use crate::auth::password::{random_token, token_hash};
use crate::db::{AtsConnection, NewAtsConnection, NewAtsInterview, ResultsRelease, Role};
use crate::error::AppError;
use crate::invites::{self, Invite};
use crate::state::AppState;
use crate::web::assignments::utc;
use crate::web::auth::{page_meta, render, set_flash, take_flash};
use crate::web::session::CsrfForm;
use crate::web::session::SignedIn;

const NEW_KEY: &str = "new_ats_key";
/// The largest `send_test` or `response_error` body read.
const MAX_BODY: usize = 64 << 10;

pub fn routes() -> crate::routes::Routes {
    crate::routes::Routes::new()
        .route("/ats/greenhouse/list_tests", get(list_tests))
        .route("/ats/greenhouse/send_test", post(send_test))
        .route("/ats/greenhouse/test_status", get(test_status))
        .route("/ats/greenhouse/response_error", post(response_error))
        .route("/admin/ats", get(admin_page).post(create_connection))
        .route("/admin/ats/{id}/revoke", post(revoke_connection))
}

/// An error as the ATS reads it: its status and `{"error": sentence}`.
struct AtsError(AppError);

impl From<AppError> for AtsError {
    fn from(e: AppError) -> AtsError {
        AtsError(e)
    }
}

impl From<sqlx::Error> for AtsError {
    fn from(e: sqlx::Error) -> AtsError {
        AtsError(e.into())
    }
}

impl IntoResponse for AtsError {
    fn into_response(self) -> Response {
        if let AppError::Internal(e) = &self.0 {
            tracing::error!("ATS request failed: {e:#}");
        }
        let status = self.0.status();
        let mut res =
            (status, axum::Json(json!({ "error": self.0.public_message() }))).into_response();
        if status == StatusCode::UNAUTHORIZED {
            res.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"gatehouse-ats\""),
            );
        }
        res
    }
}

/// The connection whose key is the request's HTTP Basic username.
async fn connection(state: &AppState, headers: &HeaderMap) -> Result<AtsConnection, AtsError> {
    let missing = || {
        AppError::BadCredentials(
            "send the ATS connection's key as the HTTP Basic username (`Authorization: Basic base64(key:)`)"
                .into(),
        )
    };
    let value =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).ok_or_else(missing)?;
    let (scheme, encoded) = value.split_once(' ').ok_or_else(missing)?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(missing().into());
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(missing)?;
    let key = decoded.split_once(':').map_or(decoded.as_str(), |(user, _)| user);
    if key.is_empty() || key.len() > 256 {
        return Err(missing().into());
    }
    state.db.ats_connection_by_key(&token_hash(key)).await?.ok_or_else(|| {
        AtsError(AppError::BadCredentials(
            "the key is not an active ATS connection's (revoked or mistyped)".into(),
        ))
    })
}

/// The published packets, as Greenhouse's test catalog.
async fn list_tests(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, AtsError> {
    connection(&state, &headers).await?;
    let mut tests = Vec::new();
    for p in state.db.list_packets().await? {
        if let Some(v) = state.db.latest_published(&p.slug).await? {
            let version = v.version.map(|n| format!(" (v{n})")).unwrap_or_default();
            tests.push(json!({ "partner_test_id": p.slug, "partner_test_name": format!("{}{version}", p.title) }));
        }
    }
    Ok(axum::Json(tests).into_response())
}

#[derive(Deserialize)]
struct SendTest {
    /// A string in Greenhouse's table, a number in one of its examples.
    partner_test_id: serde_json::Value,
    candidate: Candidate,
    /// Where to `PATCH` when the result is ready (optional).
    #[serde(default)]
    url: Option<String>,
}

#[derive(Deserialize)]
struct Candidate {
    first_name: String,
    last_name: String,
    email: String,
    #[serde(default)]
    greenhouse_profile_url: Option<String>,
}

fn text_id(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.trim().to_string()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Refuses a callback URL the connection may not call: not https (nor
/// http on loopback), or a host outside the connection's list.
fn check_callback(c: &AtsConnection, url: &str) -> Result<(), AppError> {
    crate::oidc::check_url(url).map_err(|e| AppError::BadRequest(format!("url: {e}")))?;
    let parsed = reqwest::Url::parse(url).map_err(|e| AppError::BadRequest(format!("url: {e}")))?;
    let host = parsed.host_str().unwrap_or("").to_ascii_lowercase();
    let with_port = parsed.port().map(|p| format!("{host}:{p}"));
    let allowed = c.callback_hosts.iter().any(|h| {
        let h = h.to_ascii_lowercase();
        h == host || with_port.as_deref() == Some(h.as_str())
    });
    if !allowed {
        return Err(AppError::BadRequest(format!(
            "url: {host} is not a host this ATS connection may call back (allowed: {})",
            if c.callback_hosts.is_empty() { "none".into() } else { c.callback_hosts.join(", ") }
        )));
    }
    Ok(())
}

async fn send_test(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, AtsError> {
    let c = connection(&state, &headers).await?;
    if body.len() > MAX_BODY {
        return Err(AppError::TooLarge(format!("the body is over {} KiB", MAX_BODY >> 10)).into());
    }
    let req: SendTest = serde_json::from_slice(&body)
        .map_err(|e| AppError::BadRequest(format!("the body is not a send_test request: {e}")))?;
    let slug = text_id(&req.partner_test_id).filter(|s| !s.is_empty()).ok_or_else(|| {
        AppError::BadRequest("partner_test_id must be a string (a test list_tests gave)".into())
    })?;
    if state.db.latest_published(&slug).await?.is_none() {
        return Err(AppError::BadRequest(format!(
            "partner_test_id {slug:?} is not a test list_tests offers (no published packet of that id)"
        ))
        .into());
    }
    let callback = req.url.as_deref().map(str::trim).filter(|u| !u.is_empty());
    if let Some(url) = callback {
        if url.len() > 2048 {
            return Err(AppError::BadRequest("url is longer than 2048 characters".into()).into());
        }
        check_callback(&c, url)?;
    }
    let profile = req.candidate.greenhouse_profile_url.as_deref().map(str::trim);
    if profile.is_some_and(|p| p.len() > 2048) {
        return Err(AppError::BadRequest(
            "candidate.greenhouse_profile_url is longer than 2048 characters".into(),
        )
        .into());
    }
    let name = format!("{} {}", req.candidate.first_name.trim(), req.candidate.last_name.trim());
    if name.len() > 300 {
        return Err(
            AppError::BadRequest("the candidate's name is over 300 characters".into()).into()
        );
    }
    if !crate::mail::configured(&state.config) {
        return Err(AppError::Unavailable(
            "this Gatehouse cannot email invites (no SMTP server is configured), so it cannot send tests; ask its operator to set GATEHOUSE_SMTP_HOST".into(),
        )
        .into());
    }
    let deadline = crate::now_ms() + c.deadline_days.clamp(1, 365) * 24 * 3600 * 1000;
    let invited = invites::create(
        &state,
        c.created_by,
        Invite {
            slug: &slug,
            candidate_name: name.trim(),
            email: &req.candidate.email,
            deadline: Some(deadline),
            time_box_secs: None,
        },
    )
    .await?;
    let a = &invited.assignment;
    state.db.set_assignment_policy(&a.id, c.results, a.max_submissions).await?;
    if c.blind_review {
        state.db.set_blind_review(&a.id, true).await?;
    }
    let id = random_token()[..24].to_string();
    state
        .db
        .create_ats_interview(NewAtsInterview {
            id: &id,
            connection_id: c.id,
            assignment_id: &a.id,
            partner_test_id: &slug,
            profile_url: profile,
            callback_url: callback,
        })
        .await?;
    let actor = format!("ats:{}", c.id);
    state
        .db
        .audit(&actor, "ats.send_test", &format!("assignment:{}", a.id), &format!("interview {id}"))
        .await?;
    let a = state.db.assignment_by_id(&a.id).await?.unwrap_or_else(|| a.clone());
    let (sent, sentence) =
        crate::web::assignments::email_invite(&state, &actor, &a, &invited.url).await?;
    if !sent {
        return Err(AppError::BadGateway(format!(
            "the test {id} was made but its invite email failed: {sentence}"
        ))
        .into());
    }
    Ok(axum::Json(json!({ "partner_interview_id": id })).into_response())
}

#[derive(Deserialize)]
struct StatusQuery {
    partner_interview_id: Option<String>,
}

async fn test_status(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<StatusQuery>,
) -> Result<Response, AtsError> {
    let c = connection(&state, &headers).await?;
    let id =
        q.partner_interview_id.filter(|i| !i.is_empty() && i.len() <= 64).ok_or_else(|| {
            AppError::BadRequest("the partner_interview_id query parameter is needed".into())
        })?;
    // Another connection's tests are not found.
    let interview = state
        .db
        .ats_interview(&id, c.id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("partner_interview_id {id:?}")))?;
    Ok(axum::Json(crate::ats::status(&state, &interview).await?).into_response())
}

#[derive(Deserialize)]
struct ResponseError {
    api_call: String,
    #[serde(default)]
    errors: Vec<String>,
    #[serde(default)]
    partner_interview_id: Option<String>,
}

async fn response_error(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, AtsError> {
    let c = connection(&state, &headers).await?;
    if body.len() > MAX_BODY {
        return Err(AppError::TooLarge(format!("the body is over {} KiB", MAX_BODY >> 10)).into());
    }
    let e: ResponseError = serde_json::from_slice(&body).map_err(|e| {
        AppError::BadRequest(format!("the body is not a response_error report: {e}"))
    })?;
    let mut detail = format!("{}: {}", e.api_call, e.errors.join("; "));
    if let Some(i) = e.partner_interview_id {
        detail.push_str(&format!(" (interview {i})"));
    }
    let detail: String = detail.chars().take(2000).collect();
    tracing::warn!(connection = c.id, "the ATS could not read an answer: {detail}");
    state.db.audit(&format!("ats:{}", c.id), "ats.response_error", "ats", &detail).await?;
    Ok(StatusCode::OK.into_response())
}

async fn view_model(state: &AppState, signed_in: &SignedIn) -> Result<AtsView, AppError> {
    let connections = state
        .db
        .list_ats_connections()
        .await?
        .into_iter()
        .map(|c| AtsRowView {
            id: c.id,
            name: c.name,
            results: c.results.as_str().to_string(),
            blind_review: c.blind_review,
            deadline_days: c.deadline_days,
            callback_hosts: c.callback_hosts.join(" "),
            created: utc(c.created_at),
            revoked: c.revoked_at.map(utc),
        })
        .collect();
    let base = state.config.public_url.trim_end_matches('/');
    Ok(AtsView {
        csrf: signed_in.csrf.clone(),
        connections,
        new_key: crate::web::session::take_shown_once(&signed_in.session, NEW_KEY).await?,
        endpoint_base: format!("{base}/ats/greenhouse"),
        sso: state
            .config
            .oidc
            .iter()
            .map(|(n, i)| {
                (
                    i.label(n).to_string(),
                    i.issuer().to_string(),
                    i.allowed_domains.join(", "),
                    i.default_role.clone(),
                )
            })
            .collect(),
        password_sign_in: state.config.password_sign_in,
        break_glass_admin: state.config.break_glass_admin.clone(),
    })
}

async fn admin_page(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Response, AppError> {
    signed_in.require(Role::Admin)?;
    let vm = view_model(&state, &signed_in).await?;
    let flash = take_flash(&signed_in.session).await;
    Ok(render(page_meta(&state, Some(&signed_in), "Sign-in and ATS", flash), move || {
        view! { <AtsPage vm=vm /> }
    })
    .into_response())
}

#[derive(Deserialize)]
struct NewConnectionForm {
    #[serde(default)]
    csrf: String,
    name: String,
    results: String,
    #[serde(default)]
    blind_review: Option<String>,
    deadline_days: i64,
    #[serde(default)]
    callback_hosts: String,
}

async fn create_connection(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Form(f): Form<NewConnectionForm>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Admin)?;
    signed_in.verify_csrf(Some(&f.csrf)).await?;
    let name = f.name.trim();
    if name.is_empty() || name.len() > 200 {
        return Err(AppError::BadRequest(
            "the connection needs a name (which ATS account it is for), at most 200 characters"
                .into(),
        ));
    }
    let results = ResultsRelease::parse(&f.results).map_err(AppError::BadRequest)?;
    if !(1..=365).contains(&f.deadline_days) {
        return Err(AppError::BadRequest(format!(
            "deadline_days {} is not between 1 and 365",
            f.deadline_days
        )));
    }
    let hosts: Vec<String> = f
        .callback_hosts
        .split([' ', ',', '\n'])
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    if let Some(bad) = hosts.iter().find(|h| {
        h.len() > 253 || !h.chars().all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
    }) {
        return Err(AppError::BadRequest(format!(
            "callback host {bad:?} is not a host name or host:port"
        )));
    }
    let key = format!("gha_{}", random_token());
    let id = state
        .db
        .create_ats_connection(NewAtsConnection {
            name,
            key_hash: &token_hash(&key),
            results,
            blind_review: f.blind_review.is_some(),
            deadline_days: f.deadline_days,
            callback_hosts: &hosts,
            created_by: Some(signed_in.user.id),
        })
        .await?;
    state
        .db
        .audit(
            &format!("user:{}", signed_in.user.id),
            "ats.connection.create",
            &format!("ats:{id}"),
            &format!("{name:?}, results {}", results.as_str()),
        )
        .await?;
    crate::web::session::put_shown_once(&signed_in.session, NEW_KEY, key).await?;
    Ok(Redirect::to("/admin/ats").into_response())
}

async fn revoke_connection(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<i64>,
    Form(f): Form<CsrfForm>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Admin)?;
    signed_in.verify_csrf(Some(&f.csrf)).await?;
    if !state.db.list_ats_connections().await?.iter().any(|c| c.id == id) {
        return Err(AppError::NotFound(format!("ATS connection {id}")));
    }
    state.db.revoke_ats_connection(id).await?;
    state
        .db
        .audit(
            &format!("user:{}", signed_in.user.id),
            "ats.connection.revoke",
            &format!("ats:{id}"),
            "",
        )
        .await?;
    set_flash(&signed_in.session, format!("ATS connection {id} revoked: its key no longer works."))
        .await;
    Ok(Redirect::to("/admin/ats").into_response())
}
