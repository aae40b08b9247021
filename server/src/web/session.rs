//! Sessions, the signed-in user, and CSRF.
//!
//! Sessions are `tower-sessions` records kept in the database (so they
//! survive restarts and work with any backend), in an HttpOnly, SameSite=Lax
//! cookie. Each session carries a random CSRF token; every state-changing
//! request from a browser must echo it, as the `csrf` form field or the
//! `x-csrf-token` header.

use async_trait::async_trait;
use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Redirect, Response};
use tower_sessions::cookie::SameSite;
use tower_sessions::session::{Id, Record};
use tower_sessions::{Expiry, Session, SessionManagerLayer, session_store};

use crate::auth::password::random_token;
use crate::db::{Db, Role, User};
use crate::error::AppError;
use crate::state::AppState;

const USER_KEY: &str = "user_id";
/// The session cookie's name.
pub const COOKIE: &str = "gatehouse_session";
const CSRF_KEY: &str = "csrf";

/// The database as a `tower-sessions` store.
#[derive(Clone)]
pub struct DbSessionStore(pub Db);

impl std::fmt::Debug for DbSessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DbSessionStore")
    }
}

fn backend(e: impl std::fmt::Display) -> session_store::Error {
    session_store::Error::Backend(e.to_string())
}

#[async_trait]
impl session_store::SessionStore for DbSessionStore {
    async fn save(&self, record: &Record) -> session_store::Result<()> {
        let data = serde_json::to_string(record)
            .map_err(|e| session_store::Error::Encode(e.to_string()))?;
        let expires = (record.expiry_date.unix_timestamp_nanos() / 1_000_000) as i64;
        self.0.save_session(&record.id.to_string(), &data, expires).await.map_err(backend)
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        let Some(data) =
            self.0.load_session(&id.to_string(), crate::now_ms()).await.map_err(backend)?
        else {
            return Ok(None);
        };
        serde_json::from_str(&data)
            .map(Some)
            .map_err(|e| session_store::Error::Decode(e.to_string()))
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        self.0.delete_session(&id.to_string()).await.map_err(backend)
    }
}

pub fn layer(state: &AppState) -> SessionManagerLayer<DbSessionStore> {
    SessionManagerLayer::new(DbSessionStore(state.db.clone()))
        .with_name(COOKIE)
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(state.config.secure_cookies())
        .with_expiry(Expiry::OnInactivity(tower_sessions::cookie::time::Duration::hours(12)))
}

/// The session's CSRF token, created on first use.
pub async fn csrf_token(session: &Session) -> Result<String, AppError> {
    if let Some(t) =
        session.get::<String>(CSRF_KEY).await.map_err(|e| AppError::Internal(e.into()))?
    {
        return Ok(t);
    }
    let t = random_token();
    session.insert(CSRF_KEY, &t).await.map_err(|e| AppError::Internal(e.into()))?;
    Ok(t)
}

/// Paths whose credential is in the path or a header, never the session: a
/// candidate's link (`/c/<token>`: a forged request must already know the
/// token), the bearer API, the model meter and the ATS's endpoints (HTTP
/// Basic). Their handlers never read the session, so a cookie sent along
/// carries no authority there.
pub const CSRF_EXEMPT: [&str; 4] = ["/c/", "/api/", "/v1/", "/ats/"];

/// Paths that check a CSRF token of their own, after their own credential:
/// the sign-in form (a double-submit cookie, so that opening the page stores
/// no session) and the one-time setup link (`/setup/<token>`: an unknown or
/// used link is a 404 before anything else).
pub const CSRF_OWN_CHECK: [&str; 2] = ["/login", "/setup/"];

/// Whether [`csrf_guard`] checks requests to `path` (a concrete path or a
/// route pattern); the others are in [`CSRF_EXEMPT`] or [`CSRF_OWN_CHECK`].
pub fn csrf_checked_by_layer(path: &str) -> bool {
    !CSRF_EXEMPT.iter().any(|p| path.starts_with(p))
        && !CSRF_OWN_CHECK.iter().any(|p| path == *p || (p.ends_with('/') && path.starts_with(p)))
}

/// The most of a form body read to find its `csrf` field.
const FORM_LIMIT: usize = 4 << 20;
/// How far into a multipart body the `csrf` field may start (forms put it first).
const MULTIPART_PREFIX: usize = 64 << 10;

/// CSRF in one place: every request with an unsafe method (anything but
/// GET, HEAD, OPTIONS and TRACE) that carries the session cookie must echo the
/// session's CSRF token, as the `x-csrf-token` header or the `csrf` field of
/// its urlencoded or multipart form; otherwise 403 before any handler runs.
/// Requests without the cookie have no ambient authority to forge (their
/// handlers find no session); requests with an `Authorization` header were
/// not sent by a cross-site form.
pub async fn csrf_guard(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    use axum::http::Method;
    let safe =
        matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE);
    let path = req.uri().path();
    if safe
        || !csrf_checked_by_layer(path)
        || !has_session_cookie(req.headers())
        || req.headers().contains_key(axum::http::header::AUTHORIZATION)
    {
        return next.run(req).await;
    }
    let Some(session) = req.extensions().get::<Session>().cloned() else {
        return AppError::Internal(anyhow::anyhow!(
            "the CSRF check runs outside the session layer"
        ))
        .into_response();
    };
    let (req, submitted) = match submitted_token(req).await {
        Ok(x) => x,
        Err(e) => return e.into_response(),
    };
    if let Err(e) = verify_csrf(&session, submitted.as_deref()).await {
        return e.into_response();
    }
    next.run(req).await
}

fn has_session_cookie(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .any(|c| c.trim().split_once('=').is_some_and(|(name, _)| name.trim() == COOKIE))
}

/// The token a request carries, and the request with its body intact.
async fn submitted_token(
    req: axum::extract::Request,
) -> Result<(axum::extract::Request, Option<String>), AppError> {
    use axum::body::{Body, Bytes};
    use futures_util::StreamExt;
    if let Some(t) = req.headers().get("x-csrf-token").and_then(|v| v.to_str().ok()) {
        let t = t.to_string();
        return Ok((req, Some(t)));
    }
    let kind = req
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let (parts, body) = req.into_parts();
    if kind.starts_with("application/x-www-form-urlencoded") {
        let bytes = axum::body::to_bytes(body, FORM_LIMIT).await.map_err(|_| {
            AppError::TooLarge(format!(
                "the form could not be read: it stalled or is over {} MiB",
                FORM_LIMIT >> 20
            ))
        })?;
        let fields: Vec<(String, String)> =
            serde_urlencoded::from_bytes(&bytes).unwrap_or_default();
        let token = fields.into_iter().find(|(k, _)| k == "csrf").map(|(_, v)| v);
        return Ok((axum::extract::Request::from_parts(parts, Body::from(bytes)), token));
    }
    if let Ok(boundary) = multer::parse_boundary(&kind) {
        // Read a prefix, look for the field in it, then serve the prefix
        // and the rest of the body to the handler unchanged.
        let mut stream = body.into_data_stream();
        let mut prefix: Vec<Bytes> = Vec::new();
        let mut len = 0;
        while len < MULTIPART_PREFIX {
            match stream.next().await {
                Some(Ok(chunk)) => {
                    len += chunk.len();
                    prefix.push(chunk);
                }
                Some(Err(e)) => {
                    return Err(AppError::BadRequest(format!(
                        "reading the request body failed: {e}"
                    )));
                }
                None => break,
            }
        }
        let chunks = prefix.clone();
        let mut form = multer::Multipart::new(
            futures_util::stream::iter(chunks.into_iter().map(Ok::<_, std::convert::Infallible>)),
            boundary,
        );
        let mut token = None;
        while let Ok(Some(field)) = form.next_field().await {
            if field.name() == Some("csrf") {
                token = field.text().await.ok();
                break;
            }
        }
        let body = Body::from_stream(
            futures_util::stream::iter(prefix.into_iter().map(Ok::<_, axum::Error>)).chain(stream),
        );
        return Ok((axum::extract::Request::from_parts(parts, body), token));
    }
    Ok((axum::extract::Request::from_parts(parts, body), None))
}

/// A form that carries only its CSRF token (a button that revokes,
/// retries or deletes).
#[derive(Debug, serde::Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    pub csrf: String,
}

/// Checks a submitted CSRF token against the session's, in constant time.
pub async fn verify_csrf(session: &Session, submitted: Option<&str>) -> Result<(), AppError> {
    let expected =
        session.get::<String>(CSRF_KEY).await.map_err(|e| AppError::Internal(e.into()))?;
    match (expected, submitted) {
        (Some(e), Some(s)) if constant_time_eq(e.as_bytes(), s.as_bytes()) => Ok(()),
        _ => Err(AppError::Forbidden(
            "missing or wrong CSRF token; reload the page and try again".into(),
        )),
    }
}

pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Signs `user` in: a fresh session id (no fixation) and a fresh CSRF token.
pub async fn sign_in(session: &Session, user: &User) -> Result<(), AppError> {
    session.cycle_id().await.map_err(|e| AppError::Internal(e.into()))?;
    session.insert(USER_KEY, user.id).await.map_err(|e| AppError::Internal(e.into()))?;
    session.insert(CSRF_KEY, random_token()).await.map_err(|e| AppError::Internal(e.into()))?;
    Ok(())
}

/// Deletes expired sessions (each sign-in does, and `serve` hourly).
pub async fn purge_expired(state: &AppState) {
    match state.db.delete_expired_sessions(crate::now_ms()).await {
        Ok(0) => {}
        Ok(n) => tracing::debug!(removed = n, "expired sessions deleted"),
        Err(e) => tracing::warn!(error = %e, "deleting expired sessions failed"),
    }
}

/// Secrets shown once on the page after a redirect (a new API token, an
/// invite URL): kept in this process's memory for ten minutes at most, and
/// the session holds only a random handle to them, so no session record in
/// the database ever holds a secret.
static SHOWN_ONCE: std::sync::Mutex<
    Option<std::collections::HashMap<String, (String, std::time::Instant)>>,
> = std::sync::Mutex::new(None);
const SHOWN_ONCE_FOR: std::time::Duration = std::time::Duration::from_secs(600);
const SHOWN_ONCE_MAX: usize = 10_000;

/// Keeps `secret` for the next [`take_shown_once`] of `key` in this session.
pub async fn put_shown_once(session: &Session, key: &str, secret: String) -> Result<(), AppError> {
    let handle = random_token();
    {
        let mut map = SHOWN_ONCE.lock().expect("not poisoned");
        let map = map.get_or_insert_with(Default::default);
        let now = std::time::Instant::now();
        map.retain(|_, (_, at)| now.duration_since(*at) < SHOWN_ONCE_FOR);
        if map.len() >= SHOWN_ONCE_MAX {
            return Err(AppError::Unavailable(
                "too many secrets wait to be shown; try again in a few minutes".into(),
            ));
        }
        map.insert(handle.clone(), (secret, now));
    }
    session.insert(key, handle).await.map_err(|e| AppError::Internal(e.into()))
}

/// The secret kept under `key`, once; `None` after the first read, after ten
/// minutes or after a restart.
pub async fn take_shown_once(session: &Session, key: &str) -> Result<Option<String>, AppError> {
    let Some(handle) =
        session.remove::<String>(key).await.map_err(|e| AppError::Internal(e.into()))?
    else {
        return Ok(None);
    };
    let mut map = SHOWN_ONCE.lock().expect("not poisoned");
    let Some((secret, at)) = map.as_mut().and_then(|m| m.remove(&handle)) else { return Ok(None) };
    Ok((at.elapsed() < SHOWN_ONCE_FOR).then_some(secret))
}

pub async fn sign_out(session: &Session) -> Result<(), AppError> {
    session.flush().await.map_err(|e| AppError::Internal(e.into()))
}

/// A signed-in, enabled user with the session's CSRF token. Pages that need
/// it redirect to the sign-in page when there is none.
pub struct SignedIn {
    pub user: User,
    pub session: Session,
    pub csrf: String,
    /// Whether this app's pages load the hydrate bundle (`AppState::hydrate`).
    pub hydrate: bool,
}

impl SignedIn {
    /// Refuses unless the user's role is at least `role` (admin > author > reviewer).
    pub fn require(&self, role: Role) -> Result<(), AppError> {
        if self.user.role >= role {
            Ok(())
        } else {
            Err(AppError::Forbidden(format!(
                "this needs the {} role; you are {}",
                role.as_str(),
                self.user.role.as_str()
            )))
        }
    }

    pub async fn verify_csrf(&self, submitted: Option<&str>) -> Result<(), AppError> {
        verify_csrf(&self.session, submitted).await
    }
}

/// Why [`SignedIn`] was refused: a redirect to the sign-in page for pages,
/// 401 for everything else.
pub enum NotSignedIn {
    Redirect(String),
    Error(AppError),
}

impl IntoResponse for NotSignedIn {
    fn into_response(self) -> Response {
        match self {
            NotSignedIn::Redirect(to) => Redirect::to(&to).into_response(),
            NotSignedIn::Error(e) => e.into_response(),
        }
    }
}

impl<S> FromRequestParts<S> for SignedIn
where
    AppState: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = NotSignedIn;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<SignedIn, NotSignedIn> {
        let state = AppState::from_ref(state);
        let session = Session::from_request_parts(parts, &state)
            .await
            .map_err(|(_, m)| NotSignedIn::Error(AppError::Internal(anyhow::anyhow!(m))))?;
        let wants_page = parts.method == axum::http::Method::GET
            && parts
                .headers
                .get(axum::http::header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|a| a.contains("text/html"));
        let refuse = || {
            if wants_page {
                let next = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
                NotSignedIn::Redirect(format!("/login?next={}", urlencode(next)))
            } else {
                NotSignedIn::Error(AppError::Unauthorized)
            }
        };
        let id: Option<i64> = session
            .get(USER_KEY)
            .await
            .map_err(|e| NotSignedIn::Error(AppError::Internal(e.into())))?;
        let Some(id) = id else { return Err(refuse()) };
        let user = state.db.user_by_id(id).await.map_err(|e| NotSignedIn::Error(e.into()))?;
        let Some(user) = user.filter(|u| !u.disabled) else { return Err(refuse()) };
        let csrf = csrf_token(&session).await.map_err(NotSignedIn::Error)?;
        Ok(SignedIn { user, session, csrf, hydrate: state.hydrate })
    }
}

/// Percent-encodes a query value.
pub fn urlencode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
