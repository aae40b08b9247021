//! The integration API under `/api/v1`, authenticated with bearer tokens:
//! an account's API token (author or above to create assignments), or, for
//! a candidate's own submissions, the assignment's link token. Every error
//! is JSON `{"error": ...}`.
//!
//! Also the HTTP metrics middleware every route runs through.

use std::time::Instant;

use axum::extract::multipart::MultipartRejection;
use axum::extract::{DefaultBodyLimit, MatchedPath, Multipart, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;

use crate::auth::password::token_hash;
use crate::db::{Assignment, ResultsRelease, Role, Submission, User};
use crate::error::AppError;
use crate::invites::{self, Invite};
use crate::state::AppState;
use crate::web::candidate::{Refusal, receive_upload};

pub fn routes() -> crate::routes::Routes {
    crate::routes::Routes::new()
        .route("/api/v1/assignments", post(create_assignment))
        .route("/api/v1/submissions", post(create_submission).layer(DefaultBodyLimit::disable()))
        .route("/api/v1/submissions/{id}", get(get_submission))
        .route("/api/v1/submissions/{id}/receipt", get(get_receipt))
}

/// Counts requests by matched route (never the raw path, which may hold a
/// link token) and status, and times them.
pub async fn track_http(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let method = req.method().to_string();
    let started = Instant::now();
    let response = next.run(req).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!("gatehouse_http_requests_total", "route" => route.clone(), "method" => method, "status" => status).increment(1);
    metrics::histogram!("gatehouse_http_request_seconds", "route" => route)
        .record(started.elapsed().as_secs_f64());
    response
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// Who a bearer token belongs to.
enum Caller {
    User(User),
    Candidate(Assignment),
}

async fn caller(state: &AppState, headers: &HeaderMap) -> Result<Caller, Refusal> {
    let token = bearer(headers).ok_or_else(|| {
        Refusal::new(
            StatusCode::UNAUTHORIZED,
            "send `Authorization: Bearer <token>` (an API token or the assignment's link token)",
        )
    })?;
    let hash = token_hash(token);
    if let Some(user) = state.db.user_by_api_token(&hash).await?.filter(|u| !u.disabled) {
        return Ok(Caller::User(user));
    }
    if let Some(a) = state.db.assignment_by_token_hash(&hash).await? {
        return Ok(Caller::Candidate(a));
    }
    Err(Refusal::new(
        StatusCode::UNAUTHORIZED,
        "the bearer token is not a valid API token or link token (revoked, mistyped or expired)",
    ))
}

#[derive(Deserialize)]
struct NewAssignmentBody {
    packet: String,
    candidate_name: String,
    email: String,
    /// RFC 3339 text or Unix milliseconds.
    deadline: Option<serde_json::Value>,
    time_box_minutes: Option<i64>,
    /// never (default), after-review or immediately.
    results: Option<String>,
    /// Submissions accepted (default 3).
    max_submissions: Option<i64>,
}

async fn create_assignment(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, Refusal> {
    let user = match caller(&state, &headers).await? {
        Caller::User(u) => u,
        Caller::Candidate(_) => {
            return Err(AppError::Forbidden(
                "a link token cannot create assignments; use an API token".into(),
            )
            .into());
        }
    };
    if user.role < Role::Author {
        return Err(AppError::Forbidden(format!(
            "creating assignments needs the author role; the token's account is {}",
            user.role.as_str()
        ))
        .into());
    }
    let body: NewAssignmentBody = serde_json::from_slice(&body).map_err(|e| {
        AppError::BadRequest(format!("the body is not the expected JSON object: {e}"))
    })?;
    let deadline = match &body.deadline {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::Number(n)) => Some(n.as_i64().ok_or_else(|| {
            AppError::BadRequest("deadline must be whole Unix milliseconds".into())
        })?),
        Some(serde_json::Value::String(s)) => Some(parse_rfc3339(s).ok_or_else(|| {
            AppError::BadRequest(format!(
                "deadline {s:?} is not an RFC 3339 time like 2030-01-31T17:00:00Z"
            ))
        })?),
        Some(other) => {
            return Err(AppError::BadRequest(format!(
                "deadline {other} is neither RFC 3339 text nor Unix milliseconds"
            ))
            .into());
        }
    };
    let results = body
        .results
        .as_deref()
        .map(ResultsRelease::parse)
        .transpose()
        .map_err(AppError::BadRequest)?
        .unwrap_or_default();
    let max_submissions = crate::invites::check_max_submissions(body.max_submissions)?;
    let invited = invites::create(
        &state,
        Some(user.id),
        Invite {
            slug: &body.packet,
            candidate_name: &body.candidate_name,
            email: &body.email,
            deadline,
            time_box_secs: body.time_box_minutes.map(|m| m * 60),
        },
    )
    .await?;
    state.db.set_assignment_policy(&invited.assignment.id, results, max_submissions).await?;
    let out = json!({ "id": invited.assignment.id, "invite_url": invited.url, "token": invited.token,
                      "results": results.as_str(), "max_submissions": max_submissions });
    Ok((StatusCode::CREATED, axum::Json(out)).into_response())
}

pub use crate::times::parse_rfc3339;

async fn create_submission(
    State(state): State<AppState>,
    headers: HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Response, Refusal> {
    let a = match caller(&state, &headers).await? {
        Caller::Candidate(a) => a,
        Caller::User(_) => {
            return Err(Refusal::new(
                StatusCode::FORBIDDEN,
                "submit with the assignment's link token as the bearer, not an API token",
            ));
        }
    };
    let s = receive_upload(&state, &a, &headers, multipart).await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(json!({ "id": s.id, "state": s.state, "sha256": s.blob_sha256 })),
    )
        .into_response())
}

/// The submission if the caller may read it: any account token, or the
/// link token of the submission's own assignment. Others get 404.
async fn readable(
    state: &AppState,
    headers: &HeaderMap,
    id: &str,
) -> Result<(Submission, bool), Refusal> {
    let who = caller(state, headers).await?;
    let s = state
        .db
        .submission_by_id(id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("submission {id}")))?;
    match who {
        Caller::User(_) => Ok((s, true)),
        Caller::Candidate(a) if a.id == s.assignment_id => Ok((s, false)),
        Caller::Candidate(_) => Err(AppError::NotFound(format!("submission {id}")).into()),
    }
}

async fn get_submission(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<axum::Json<serde_json::Value>, Refusal> {
    let (s, staff) = readable(&state, &headers, &id).await?;
    // A candidate sees the decision and score only once the assignment's
    // `results` setting releases them.
    let released = staff || {
        let a = state
            .db
            .assignment_by_id(&s.assignment_id)
            .await?
            .ok_or_else(|| AppError::NotFound(format!("submission {id}")))?;
        crate::web::candidate::results_released(&state, &a, &s).await?
    };
    let mut out = json!({
        "id": s.id,
        "assignment_id": s.assignment_id,
        "state": s.state,
        "received_at": s.received_at,
        "sha256": s.blob_sha256,
        "size_bytes": s.size_bytes,
        "refusal": s.refusal,
        "receipt_digest": crate::web::candidate::receipt_digest(&s),
    });
    if released {
        out["decision"] = json!(s.decision);
        out["score"] = json!(s.score);
    }
    // Candidates see their state, never the scorecard.
    if staff {
        let card = match &s.scorecard_json {
            Some(text) => serde_json::from_str(text)
                .map_err(|e| Refusal::from(AppError::Internal(e.into())))?,
            None => serde_json::Value::Null,
        };
        out["scorecard"] = card;
        // Beside the scorecard (which is exactly what the grader wrote):
        // the line-level provenance of the change, per file.
        out["provenance"] = json!(crate::web::review::submission_provenance(&state, &s.id).await?);
        out["error"] = json!(s.error);
    }
    Ok(axum::Json(out))
}

async fn get_receipt(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, Refusal> {
    let (s, staff) = readable(&state, &headers, &id).await?;
    if !staff {
        return Err(AppError::Forbidden(
            "the receipt is for the hiring team; use an API token".into(),
        )
        .into());
    }
    let receipt = s.receipt_json.ok_or_else(|| {
        AppError::NotFound(format!("receipt of submission {id} (it is {})", s.state))
    })?;
    Ok(([(header::CONTENT_TYPE, "application/json")], receipt).into_response())
}
