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
        let data = serde_json::to_string(record).map_err(|e| session_store::Error::Encode(e.to_string()))?;
        let expires = (record.expiry_date.unix_timestamp_nanos() / 1_000_000) as i64;
        self.0.save_session(&record.id.to_string(), &data, expires).await.map_err(backend)
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        let Some(data) = self.0.load_session(&id.to_string(), crate::now_ms()).await.map_err(backend)? else {
            return Ok(None);
        };
        serde_json::from_str(&data).map(Some).map_err(|e| session_store::Error::Decode(e.to_string()))
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        self.0.delete_session(&id.to_string()).await.map_err(backend)
    }
}

pub fn layer(state: &AppState) -> SessionManagerLayer<DbSessionStore> {
    SessionManagerLayer::new(DbSessionStore(state.db.clone()))
        .with_name("gatehouse_session")
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(state.config.secure_cookies)
        .with_expiry(Expiry::OnInactivity(tower_sessions::cookie::time::Duration::hours(12)))
}

/// The session's CSRF token, created on first use.
pub async fn csrf_token(session: &Session) -> Result<String, AppError> {
    if let Some(t) = session.get::<String>(CSRF_KEY).await.map_err(|e| AppError::Internal(e.into()))? {
        return Ok(t);
    }
    let t = random_token();
    session.insert(CSRF_KEY, &t).await.map_err(|e| AppError::Internal(e.into()))?;
    Ok(t)
}

/// Checks a submitted CSRF token against the session's, in constant time.
pub async fn verify_csrf(session: &Session, submitted: Option<&str>) -> Result<(), AppError> {
    let expected = session.get::<String>(CSRF_KEY).await.map_err(|e| AppError::Internal(e.into()))?;
    match (expected, submitted) {
        (Some(e), Some(s)) if constant_time_eq(e.as_bytes(), s.as_bytes()) => Ok(()),
        _ => Err(AppError::Forbidden("missing or wrong CSRF token; reload the page and try again".into())),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Signs `user` in: a fresh session id (no fixation) and a fresh CSRF token.
pub async fn sign_in(session: &Session, user: &User) -> Result<(), AppError> {
    session.cycle_id().await.map_err(|e| AppError::Internal(e.into()))?;
    session.insert(USER_KEY, user.id).await.map_err(|e| AppError::Internal(e.into()))?;
    session.insert(CSRF_KEY, random_token()).await.map_err(|e| AppError::Internal(e.into()))?;
    Ok(())
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
}

impl SignedIn {
    /// Refuses unless the user's role is at least `role` (admin > author > reviewer).
    pub fn require(&self, role: Role) -> Result<(), AppError> {
        if self.user.role >= role {
            Ok(())
        } else {
            Err(AppError::Forbidden(format!("this needs the {} role; you are {}", role.as_str(), self.user.role.as_str())))
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
        let session = Session::from_request_parts(parts, &state).await.map_err(|(_, m)| NotSignedIn::Error(AppError::Internal(anyhow::anyhow!(m))))?;
        let wants_page = parts.method == axum::http::Method::GET
            && parts.headers.get(axum::http::header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/html"));
        let refuse = || {
            if wants_page {
                let next = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
                NotSignedIn::Redirect(format!("/login?next={}", urlencode(next)))
            } else {
                NotSignedIn::Error(AppError::Unauthorized)
            }
        };
        let id: Option<i64> = session.get(USER_KEY).await.map_err(|e| NotSignedIn::Error(AppError::Internal(e.into())))?;
        let Some(id) = id else { return Err(refuse()) };
        let user = state.db.user_by_id(id).await.map_err(|e| NotSignedIn::Error(e.into()))?;
        let Some(user) = user.filter(|u| !u.disabled) else { return Err(refuse()) };
        let csrf = csrf_token(&session).await.map_err(NotSignedIn::Error)?;
        Ok(SignedIn { user, session, csrf })
    }
}

/// Percent-encodes a query value.
pub fn urlencode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
