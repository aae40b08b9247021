//! The HTTP surface: pages, the candidate's link, the integration API,
//! `/healthz` and `/metrics`. Each area of the site is one module with a
//! `routes()` function; `router` merges them and adds the session layer and
//! the HTML error layer.

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::get;

use crate::error::AppError;
use crate::state::AppState;

pub mod admin;
pub mod api;
pub mod assets;
pub mod assignments;
pub mod auth;
pub mod candidate;
pub mod library;
pub mod page;
pub mod queue;
pub mod review;
pub mod session;
pub mod witness;

pub fn router(state: AppState) -> Router {
    page::init(&state.config.site_dir);
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .merge(auth::routes())
        .merge(admin::routes())
        .merge(library::routes())
        .merge(assignments::routes())
        .merge(candidate::routes())
        .merge(api::routes())
        .merge(review::routes())
        .merge(queue::routes())
        .merge(assets::routes())
        .merge(witness::routes())
        .fallback(not_found)
        .layer(axum::middleware::from_fn(api::track_http))
        .layer(session::layer(&state))
        .layer(axum::middleware::from_fn(html_errors))
        .with_state(state)
}

async fn not_found() -> AppError {
    AppError::NotFound("this page".into())
}

/// Whether a request is a browser asking for a page: it accepts HTML and
/// did not ask for JSON (the upload island and API clients ask for JSON).
fn wants_html(headers: &HeaderMap) -> bool {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    accept.contains("text/html") && !accept.contains("application/json")
}

/// Turns an error answer (an [`AppError`]'s `{"error": ...}`, or the plain
/// text of an extractor's rejection) into an HTML error page with the same
/// status and message, for browsers asking for a page. Everyone else keeps
/// the JSON.
async fn html_errors(req: Request, next: Next) -> Response {
    let wants_html = wants_html(req.headers());
    let res = next.run(req).await;
    let status = res.status();
    if !wants_html || !(status.is_client_error() || status.is_server_error()) {
        return res;
    }
    let kind = res.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let (json, text) = (kind.starts_with("application/json"), kind.starts_with("text/plain"));
    if !json && !text {
        return res;
    }
    let (mut parts, body) = res.into_parts();
    let bytes = axum::body::to_bytes(body, 64 << 10).await.unwrap_or_default();
    let message = if json {
        let value: Option<serde_json::Value> = serde_json::from_slice(&bytes).ok();
        match value.as_ref().and_then(|v| v.get("error")).and_then(|e| e.as_str()) {
            Some(m) => m.to_string(),
            // Some other JSON document: not ours to rewrite.
            None => return Response::from_parts(parts, Body::from(bytes)),
        }
    } else {
        String::from_utf8_lossy(&bytes).trim().to_string()
    };
    let message = if message.is_empty() { status.canonical_reason().unwrap_or("error").to_string() } else { message };
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(header::VARY, HeaderValue::from_static("accept"));
    let html = page::error_document(status, &message);
    Response::from_parts(parts, Body::from(html))
}

async fn healthz(State(state): State<AppState>) -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({ "ok": true, "database": state.db.backend() }))
}

async fn metrics(State(state): State<AppState>) -> String {
    state.metrics.render()
}
