//! The HTTP surface: pages, the candidate's link, the integration API,
//! `/healthz` and `/metrics`. Each area of the site is one module with a
//! `routes()` function; `router` merges them and adds the session layer and
//! the HTML error layer.
//!
//! The areas: `auth` (sign-in, the setup link), `admin`, `library` (packets,
//! import, draft editor, publish), `assignments` (invites, the invite email,
//! reissue), `candidate` (the invite link), `review` (scorecards, human scores,
//! receipts, exports, compare, distribution, blind review), `inbox` (the
//! reviewer's landing page), `queue`, `api` (`/api/v1`, token auth; its OpenAPI
//! 3.1 document `ApiDoc` is derived by `utoipa` from the handlers' request and
//! answer types and `#[utoipa::path]` annotations, served at
//! `/api/v1/openapi.json`), `sso` (OpenID Connect sign-in, and what a checked
//! identity may do: sign in by verified email, an account only for an allowed
//! domain), `greenhouse` (Greenhouse's Assessment Partner API under
//! `/ats/greenhouse/`, HTTP Basic with a connection's key, and the admin page
//! of connections), `webhooks` (the admin page of endpoints and deliveries),
//! `retention` (the admin page of candidate data, the assignment's Erase form,
//! the candidate's `my-data.zip`), `witness` (the candidate's red and green
//! runs), `assets`.
//!
//! `session` keeps sessions in the database and owns CSRF (one layer,
//! `csrf_guard`, for every unsafe request with the session cookie). `router` =
//! `with_layers(routes())` adds sessions, CSRF, HTML errors, framework
//! rejections rewritten in the app's words (`plain_rejections`), panics as 500,
//! the body timeouts (idle and total) and the security headers (`Cache-Control:
//! no-store` on every answer that set no caching of its own,
//! `Permissions-Policy`). `page` builds the page frame; `gate` is the witnessed
//! gate as the candidate's page shows it, so `candidate` and `witness` do not
//! import each other.

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
pub mod gate;
pub mod greenhouse;
pub mod inbox;
pub mod library;
pub mod page;
pub mod queue;
pub mod retention;
pub mod review;
pub mod session;
pub mod sso;
pub mod webhooks;
pub mod witness;

// Moved to the crate root (the meter uses them too); kept here by name.
pub use crate::{routes, times};

pub fn router(state: AppState) -> Router {
    with_layers(routes().into_router(), state)
}

/// Every route of the site, without the layers, with its table of paths.
pub fn routes() -> crate::routes::Routes {
    crate::routes::Routes::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .merge(auth::routes())
        .merge(sso::routes())
        .merge(greenhouse::routes())
        .merge(admin::routes())
        .merge(webhooks::routes())
        .merge(retention::routes())
        .merge(library::routes())
        .merge(assignments::routes())
        .merge(candidate::routes())
        .merge(api::routes())
        .merge(review::routes())
        .merge(queue::routes())
        .merge(inbox::routes())
        .merge(assets::routes())
        .merge(crate::meter::routes())
        .merge(witness::routes())
}

/// `routes` with the fallback and every layer (sessions, CSRF, error pages,
/// panics, body timeout, security headers): what [`router`] serves. Tests
/// add routes of their own before the layers with it.
pub fn with_layers(routes: Router<AppState>, state: AppState) -> Router {
    let body_idle = std::time::Duration::from_secs(state.config.body_idle_timeout_secs.max(1));
    let body_total = std::time::Duration::from_secs(state.config.body_total_timeout_secs.max(1));
    routes
        .fallback(not_found)
        .layer(axum::middleware::from_fn(api::track_http))
        // Inside the session layer, so it sees the request's session.
        .layer(axum::middleware::from_fn(session::csrf_guard))
        .layer(session::layer(&state))
        // Inside `html_errors`, which renders its JSON for browsers.
        .layer(axum::middleware::from_fn(plain_rejections))
        .layer(axum::middleware::from_fn(html_errors))
        // A handler's panic is a 500 (JSON, or an HTML page for browsers),
        // never a dropped connection.
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(panic_response))
        .layer(axum::middleware::from_fn(move |req: Request, next: Next| {
            body_timeout(body_idle, body_total, req, next)
        }))
        .layer(axum::middleware::from_fn(security_headers))
        .with_state(state)
}

/// Cuts a request body that stalls longer than `idle` between two chunks,
/// or that is still arriving `total` after the request began (a body
/// trickled a byte at a time never stalls, and would otherwise hold its
/// connection, upload slot and file for as long as it likes); the handler
/// reading it sees an error.
async fn body_timeout(
    idle: std::time::Duration,
    total: std::time::Duration,
    req: Request,
    next: Next,
) -> Response {
    use futures_util::StreamExt;
    let (parts, body) = req.into_parts();
    let deadline = tokio::time::Instant::now() + total;
    let chunks = Body::new(tower_http::timeout::TimeoutBody::new(idle, body)).into_data_stream();
    let timed = futures_util::stream::unfold(Some(chunks), move |chunks| async move {
        let mut chunks = chunks?;
        match tokio::time::timeout_at(deadline, chunks.next()).await {
            Ok(Some(chunk)) => Some((chunk, Some(chunks))),
            Ok(None) => None,
            Err(_) => {
                let cut = std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("the request body took longer than {} s", total.as_secs()),
                );
                Some((Err(axum::Error::new(cut)), None))
            }
        }
    });
    // Fused: a reader may poll again after the end (multer does).
    next.run(Request::from_parts(parts, Body::from_stream(timed.fuse()))).await
}

/// A panicking handler's answer: 500 with no detail (the panic is logged).
fn panic_response(err: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let detail = err
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| err.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    tracing::error!(panic = %detail, "a request handler panicked");
    let html = page::error_document(
        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        "the server failed on this request; it was logged",
    );
    let mut res = Response::new(Body::from(html));
    *res.status_mut() = axum::http::StatusCode::INTERNAL_SERVER_ERROR;
    res.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    res
}

/// The Content-Security-Policy of every answer: scripts only from this
/// origin plus the hash of the one inline hydration bootstrap Leptos writes,
/// wasm instantiation allowed, no plugins, no framing, forms and fetches
/// only to this origin.
pub fn content_security_policy() -> &'static str {
    static CSP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CSP.get_or_init(|| {
        let mut scripts = String::from("'self' 'wasm-unsafe-eval'");
        for hash in inline_script_hashes() {
            scripts.push_str(&format!(" 'sha256-{hash}'"));
        }
        format!(
            "default-src 'none'; script-src {scripts}; style-src 'self'; img-src 'self' https:; font-src 'self'; \
             connect-src 'self'; form-action 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'"
        )
    })
}

/// The base64 SHA-256 of each inline `<script>` a page with the hydrate
/// bundle carries (Leptos' island bootstrap), computed from a real render so
/// it follows the Leptos version.
fn inline_script_hashes() -> Vec<String> {
    use base64::Engine;
    use sha2::Digest;
    let html =
        app::shell::document(app::shell::PageMeta { hydrate: true, ..Default::default() }, || ());
    let mut out = Vec::new();
    let mut rest = html.as_str();
    while let Some(i) = rest.find("<script") {
        rest = &rest[i..];
        let Some(open_end) = rest.find('>') else { break };
        let open = &rest[..open_end];
        let Some(close) = rest.find("</script>") else { break };
        let body = &rest[open_end + 1..close];
        if !open.contains(" src=") && !body.is_empty() {
            out.push(
                base64::engine::general_purpose::STANDARD
                    .encode(sha2::Sha256::digest(body.as_bytes())),
            );
        }
        rest = &rest[close + "</script>".len()..];
    }
    out
}

/// Security headers on every answer, errors and static files included.
async fn security_headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    if let Ok(v) = HeaderValue::from_str(content_security_policy()) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    h.insert("permissions-policy", HeaderValue::from_static(PERMISSIONS_POLICY));
    // Pages carry link tokens, model keys and scores: no cache keeps them,
    // unless the answer chose its own caching (the stylesheet, the bundle).
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    res
}

/// No page uses a device, a payment or a sensor.
const PERMISSIONS_POLICY: &str = "accelerometer=(), camera=(), display-capture=(), geolocation=(), gyroscope=(), \
     magnetometer=(), microphone=(), midi=(), payment=(), usb=(), browsing-topics=()";

/// Rewrites an extractor's rejection (axum answers it as plain text, in
/// the framework's words: "Failed to deserialize query string: ...",
/// "Invalid URL: Cannot parse `x` to a `i64`") as the app's own
/// `{"error": ...}` with the same status. Other answers pass unchanged.
async fn plain_rejections(req: Request, next: Next) -> Response {
    let res = next.run(req).await;
    let status = res.status();
    let plain = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|k| k.starts_with("text/plain"));
    if !status.is_client_error() || !plain {
        return res;
    }
    let (mut parts, body) = res.into_parts();
    let bytes = axum::body::to_bytes(body, 64 << 10).await.unwrap_or_default();
    let Some(message) = rejection_message(&String::from_utf8_lossy(&bytes)) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let body = serde_json::json!({ "error": message }).to_string();
    Response::from_parts(parts, Body::from(body))
}

/// The app's words for a rejection of axum's extractors, by the text it
/// starts with; None for any other text.
fn rejection_message(text: &str) -> Option<String> {
    let t = text.trim();
    let says = |prefixes: &[&str]| prefixes.iter().any(|p| t.starts_with(p));
    Some(if says(&["Failed to deserialize query string"]) {
        "a parameter in the address's query is missing or is not the kind of value it takes (a number, a known word)".into()
    } else if says(&["Failed to deserialize form"]) {
        "a field of the form is missing or is not the kind of value it takes (a number, a known word)".into()
    } else if says(&["Invalid URL", "Wrong number of path arguments", "No paths parameters"]) {
        "a part of this address is not valid (an id where a number belongs, or a value too long)"
            .into()
    } else if says(&[
        "Failed to parse the request body as JSON",
        "Failed to deserialize the JSON body",
    ]) {
        "the request body is not the JSON object this address takes".into()
    } else if says(&[
        "Expected request with `Content-Type: ",
        "Form requests must have `Content-Type: ",
    ]) {
        let kind = t.split('`').nth(1).unwrap_or("").trim_start_matches("Content-Type: ");
        format!("send the request body as {kind}")
    } else if says(&[
        "Failed to buffer the request body",
        "Request body didn't contain valid UTF-8",
    ]) {
        if t.contains("length limit") {
            "the request body is larger than this address takes".into()
        } else {
            "the request body could not be read (cut short, too slow, or not text)".into()
        }
    } else {
        return None;
    })
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
    let message = if message.is_empty() {
        status.canonical_reason().unwrap_or("error").to_string()
    } else {
        message
    };
    parts
        .headers
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(header::VARY, HeaderValue::from_static("accept"));
    let html = page::error_document(status, &message);
    Response::from_parts(parts, Body::from(html))
}

async fn healthz(State(state): State<AppState>) -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({ "ok": true, "database": state.db.backend() }))
}

/// Prometheus metrics. With `metrics_token` set, only for that bearer token;
/// without, only for clients on the loopback interface.
async fn metrics(State(state): State<AppState>, req: Request) -> Result<String, AppError> {
    let headers = req.headers();
    let peer = req.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>();
    let given = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    metrics_allowed(state.config.metrics_token.as_deref(), given, peer.map(|p| p.0.ip()))?;
    Ok(state.metrics.render())
}

/// Whether `/metrics` answers: the bearer token when one is configured,
/// else a loopback peer.
fn metrics_allowed(
    token: Option<&str>,
    authorization: Option<&str>,
    peer: Option<std::net::IpAddr>,
) -> Result<(), AppError> {
    match token.filter(|t| !t.is_empty()) {
        Some(token) => {
            let given = authorization.and_then(|v| v.strip_prefix("Bearer ")).unwrap_or("").trim();
            if session::constant_time_eq(given.as_bytes(), token.as_bytes()) {
                Ok(())
            } else {
                Err(AppError::Unauthorized)
            }
        }
        None if peer.is_some_and(|p| p.is_loopback() || p.to_canonical().is_loopback()) => Ok(()),
        None => Err(AppError::Forbidden(
            "/metrics answers only local clients; set metrics_token to read it from elsewhere"
                .into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_needs_the_token_or_a_local_peer() {
        let local: Option<std::net::IpAddr> = Some("127.0.0.1".parse().unwrap());
        let mapped: Option<std::net::IpAddr> = Some("::ffff:127.0.0.1".parse().unwrap());
        let far: Option<std::net::IpAddr> = Some("203.0.113.9".parse().unwrap());
        let check = |token, auth, peer, ok: bool| {
            assert_eq!(
                metrics_allowed(token, auth, peer).is_ok(),
                ok,
                "{token:?} {auth:?} {peer:?}"
            )
        };
        check(None, None, local, true);
        check(None, None, mapped, true);
        check(Some(""), None, local, true);
        check(None, None, far, false);
        check(None, None, None, false);
        check(Some("s3cret"), Some("Bearer s3cret"), far, true);
        check(Some("s3cret"), Some("Bearer s3cre"), far, false);
        check(Some("s3cret"), Some("s3cret"), far, false);
        check(Some("s3cret"), None, local, false);
    }

    #[test]
    fn framework_rejections_are_said_in_the_apps_words() {
        let check = |text: &str, expect: Option<&str>| {
            let got = rejection_message(text);
            match expect {
                Some(part) => {
                    let got = got.unwrap_or_else(|| panic!("{text:?} not rewritten"));
                    assert!(got.contains(part), "{text:?}: {got}");
                    for leak in ["deserialize", "`", "i64", "Cannot parse", "serde"] {
                        assert!(!got.contains(leak), "{text:?}: {got}");
                    }
                }
                None => assert_eq!(got, None, "{text:?}"),
            }
        };
        check(
            "Failed to deserialize query string: version: invalid digit found in string",
            Some("query"),
        );
        check("Failed to deserialize form body: days: invalid digit", Some("field of the form"));
        check("Invalid URL: Cannot parse `abc` to a `i64`", Some("part of this address"));
        check("Failed to parse the request body as JSON: EOF", Some("JSON object"));
        check(
            "Expected request with `Content-Type: application/json`",
            Some("as application/json"),
        );
        check(
            "Form requests must have `Content-Type: application/x-www-form-urlencoded`",
            Some("as application/x-www-form-urlencoded"),
        );
        check("Failed to buffer the request body: length limit exceeded", Some("larger"));
        check("the candidate's own words", None);
        check("", None);
    }

    #[test]
    fn the_csp_allows_wasm_and_no_inline_script_but_the_bootstrap() {
        let csp = content_security_policy();
        assert!(csp.contains("script-src 'self' 'wasm-unsafe-eval' 'sha256-"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert_eq!(inline_script_hashes().len(), 1, "{csp}");
    }
}
