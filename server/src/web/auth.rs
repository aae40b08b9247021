//! Sign-in, sign-out and the one-time setup link that creates the first
//! admin.
//!
//! Failed sign-ins are rate limited per client address and per email with
//! `governor`: each failure takes a cell from both buckets; once either
//! bucket is empty every attempt for that key (even with the right
//! password) gets 429 until the bucket refills.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, FromRequestParts, Path, Query, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Extension, Form};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use leptos::prelude::*;
use serde::Deserialize;
use tower_sessions::Session;

use app::pages::auth::{LoginPage, LoginView, SetupPage, SetupView};
use app::shell::PageMeta;

use crate::auth::password::{self, random_token, token_hash};
use crate::db::{NewUser, Role};
use crate::error::AppError;
use crate::state::AppState;
use crate::web::session::{SignedIn, csrf_token, sign_in, sign_out, verify_csrf};

/// The settings key holding the hash of the pending setup link's token.
pub const SETUP_KEY: &str = "setup_token_hash";
const FLASH_KEY: &str = "flash";

pub fn routes() -> crate::routes::Routes {
    crate::routes::Routes::new()
        .route("/", get(home))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/setup/{token}", get(setup_page).post(setup))
        .layer(Extension(Arc::new(LoginGuard::default())))
}

/// The frame of a page for `signed_in` (or for nobody, on the sign-in and
/// setup pages), with the session's flash notice.
pub fn page_meta(
    state: &AppState,
    signed_in: Option<&SignedIn>,
    title: &str,
    flash: Option<String>,
) -> PageMeta {
    let base = match signed_in {
        Some(s) => crate::web::page::meta(s, title),
        None => crate::web::page::candidate_meta(state, title),
    };
    PageMeta { flash, ..base }
}

/// Leaves a one-line notice for the next page this session sees.
pub async fn set_flash(session: &Session, message: impl Into<String>) {
    let _ = session.insert(FLASH_KEY, message.into()).await;
}

/// Takes the pending notice, if any.
pub async fn take_flash(session: &Session) -> Option<String> {
    session.remove::<String>(FLASH_KEY).await.ok().flatten()
}

/// A page rendered by `shell::document`.
pub fn render<V: IntoView + 'static>(meta: PageMeta, body: impl FnOnce() -> V) -> Html<String> {
    Html(app::shell::document(meta, body))
}

/// The client's address as the socket saw it (no proxy headers are
/// trusted), or "unknown" when the server was not started with connect info.
pub struct ClientIp(pub String);

impl<S: Send + Sync> FromRequestParts<S> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<ClientIp, Self::Rejection> {
        let ip = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip().to_string())
            .unwrap_or_else(|| "unknown".into());
        Ok(ClientIp(ip))
    }
}

/// Failed sign-in buckets, built on first use from the configuration, and
/// the bound on password checks running at once.
#[derive(Default)]
pub struct LoginGuard {
    limiter: OnceLock<DefaultKeyedRateLimiter<String>>,
    /// Keys whose bucket ran dry, until when.
    blocked: Mutex<HashMap<String, Instant>>,
    hashing: OnceLock<Arc<tokio::sync::Semaphore>>,
}

impl LoginGuard {
    /// A permit to run one argon2 check (about 19 MiB for its duration), or
    /// 503 when `concurrency` checks already run: memory stays bounded
    /// however many sign-ins arrive at once.
    pub fn hash_permit(
        &self,
        concurrency: usize,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, AppError> {
        let sem =
            self.hashing.get_or_init(|| Arc::new(tokio::sync::Semaphore::new(concurrency.max(1))));
        sem.clone().try_acquire_owned().map_err(|_| {
            AppError::Unavailable(
                "the server is busy checking other sign-ins; try again in a moment".into(),
            )
        })
    }

    fn limiter(&self, per_minute: u32) -> &DefaultKeyedRateLimiter<String> {
        self.limiter.get_or_init(|| {
            let n = NonZeroU32::new(per_minute.max(1)).expect("at least one");
            RateLimiter::keyed(Quota::per_minute(n))
        })
    }

    /// The wait left for any of `keys`, if one is blocked.
    fn blocked_for(&self, keys: &[String]) -> Option<Duration> {
        let now = Instant::now();
        let mut blocked = self.blocked.lock().expect("not poisoned");
        blocked.retain(|_, until| *until > now);
        keys.iter().filter_map(|k| blocked.get(k)).map(|until| *until - now).max()
    }

    /// Counts one failure against every key; the wait when a bucket ran dry.
    fn fail(&self, per_minute: u32, keys: &[String]) -> Option<Duration> {
        let limiter = self.limiter(per_minute);
        let clock = DefaultClock::default();
        let mut wait = None;
        for k in keys {
            if let Err(not_until) = limiter.check_key(k) {
                let w = not_until.wait_time_from(clock.now()).max(Duration::from_secs(1));
                self.blocked.lock().expect("not poisoned").insert(k.clone(), Instant::now() + w);
                wait = Some(wait.map_or(w, |x: Duration| x.max(w)));
            }
        }
        wait
    }
}

fn too_many(wait: Duration) -> AppError {
    AppError::TooManyRequests(format!(
        "too many failed sign-ins for this address or account; try again in {} seconds",
        wait.as_secs().max(1)
    ))
}

/// Only same-origin paths are followed after signing in (no open redirect):
/// one leading `/` then no `/` or `\\`, and no backslash, whitespace or
/// control character anywhere (browsers drop tabs and newlines and read `\\`
/// as `/`, so `/\t/evil.example` would become `//evil.example`).
pub fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n) if is_local_path(n) => n.to_string(),
        _ => "/".to_string(),
    }
}

fn is_local_path(n: &str) -> bool {
    let mut chars = n.chars();
    chars.next() == Some('/')
        && !matches!(chars.next(), Some('/' | '\\'))
        && n.len() <= 2048
        && !n.chars().any(|c| c == '\\' || c.is_whitespace() || c.is_control())
        && !n.contains("://")
}

/// The landing page: a reviewer's inbox, an author's or admin's packets.
async fn home(signed_in: Result<SignedIn, crate::web::session::NotSignedIn>) -> Redirect {
    Redirect::to(match signed_in {
        Ok(s) if s.user.role == Role::Reviewer => "/inbox",
        Ok(_) => "/packets",
        Err(_) => "/login",
    })
}

#[derive(Deserialize)]
struct NextQuery {
    next: Option<String>,
}

/// The sign-in form's CSRF cookie (double submit): the form echoes its value.
/// A visitor who only opens the sign-in page gets this cookie, no session
/// row.
pub const LOGIN_COOKIE: &str = "gatehouse_login";

/// The sign-in CSRF token the request's cookie holds, if well formed.
fn login_cookie(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, _)| *name == LOGIN_COOKIE)
        .map(|(_, value)| value.trim().to_string())
        .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The sign-in page with its CSRF token, setting the cookie it is checked
/// against.
fn login_response(
    state: &AppState,
    status: StatusCode,
    token: String,
    vm: LoginView,
    flash: Option<String>,
) -> Response {
    let secure = if state.config.secure_cookies() { "; Secure" } else { "" };
    let cookie = format!(
        "{LOGIN_COOKIE}={token}; Path=/login; HttpOnly; SameSite=Strict; Max-Age=86400{secure}"
    );
    let page =
        render(page_meta(state, None, "Sign in", flash), move || view! { <LoginPage vm=vm /> });
    let mut res = (status, page).into_response();
    if let Ok(v) = axum::http::HeaderValue::from_str(&cookie) {
        res.headers_mut().append(axum::http::header::SET_COOKIE, v);
    }
    res
}

/// The sign-in page's view: the form, a button per identity provider, and
/// a note when password sign-in is off.
fn login_view(
    state: &AppState,
    csrf: String,
    email: String,
    next: String,
    error: Option<String>,
) -> LoginView {
    let sso = state
        .config
        .oidc
        .iter()
        .map(|(name, issuer)| {
            let href = format!("/login/sso/{name}?next={}", crate::web::session::urlencode(&next));
            (href, issuer.label(name).to_string())
        })
        .collect();
    let password_note = (!state.config.password_sign_in).then(|| {
        "Password sign-in is turned off: sign in through your identity provider. (The break-glass admin may still use the form below.)".to_string()
    });
    LoginView { csrf, email, next, error, sso, password_note }
}

async fn login_page(
    State(state): State<AppState>,
    session: Session,
    headers: axum::http::HeaderMap,
    Query(q): Query<NextQuery>,
) -> Result<Response, AppError> {
    let token = login_cookie(&headers).unwrap_or_else(random_token);
    let vm = login_view(&state, token.clone(), String::new(), safe_next(q.next.as_deref()), None);
    let flash = take_flash(&session).await;
    Ok(login_response(&state, StatusCode::OK, token, vm, flash))
}

#[derive(Deserialize)]
struct LoginForm {
    #[serde(default)]
    csrf: String,
    email: String,
    password: String,
    next: Option<String>,
}

async fn login(
    State(state): State<AppState>,
    Extension(guard): Extension<Arc<LoginGuard>>,
    ClientIp(ip): ClientIp,
    session: Session,
    headers: axum::http::HeaderMap,
    Form(form): Form<LoginForm>,
) -> Result<Response, AppError> {
    let Some(token) = login_cookie(&headers)
        .filter(|t| crate::web::session::constant_time_eq(t.as_bytes(), form.csrf.as_bytes()))
    else {
        return Err(AppError::Forbidden(
            "missing or wrong CSRF token; reload the sign-in page and try again".into(),
        ));
    };
    let email = form.email.trim().to_lowercase();
    let keys = [format!("ip:{ip}"), format!("email:{email}")];
    if let Some(wait) = guard.blocked_for(&keys) {
        return Err(too_many(wait));
    }
    if !state.config.password_allowed(&email) {
        let vm = login_view(
            &state,
            token.clone(),
            form.email,
            safe_next(form.next.as_deref()),
            Some(
                "password sign-in is turned off; use your identity provider's button above".into(),
            ),
        );
        return Ok(login_response(&state, StatusCode::FORBIDDEN, token, vm, None));
    }
    let _permit = guard.hash_permit(state.config.password_hash_concurrency)?;
    let user = state.db.user_by_email(&email).await?;
    // Without an account the password is still checked against a fixed hash,
    // so a wrong email takes as long as a wrong password.
    let stored = match &user {
        Some(u) => u.password_hash.clone(),
        None => dummy_hash().await,
    };
    let good = password::verify_async(form.password, stored).await;
    match user {
        // With password sign-in off, the break-glass account signs in
        // only while it is an admin.
        Some(u)
            if good && !u.disabled && (state.config.password_sign_in || u.role == Role::Admin) =>
        {
            sign_in(&session, &u).await?;
            crate::web::session::purge_expired(&state).await;
            state
                .db
                .audit(
                    &format!("user:{}", u.id),
                    "session.sign-in",
                    &format!("user:{}", u.id),
                    &format!("from {ip}"),
                )
                .await?;
            Ok(Redirect::to(&safe_next(form.next.as_deref())).into_response())
        }
        _ => {
            if let Some(wait) = guard.fail(state.config.login_attempts_per_minute, &keys) {
                return Err(too_many(wait));
            }
            let vm = login_view(
                &state,
                token.clone(),
                form.email,
                safe_next(form.next.as_deref()),
                Some("wrong email or password (or the account is disabled)".into()),
            );
            Ok(login_response(&state, StatusCode::UNAUTHORIZED, token, vm, None))
        }
    }
}

/// An argon2id hash of a random string, checked when the email is unknown.
async fn dummy_hash() -> String {
    static DUMMY: OnceLock<String> = OnceLock::new();
    if let Some(h) = DUMMY.get() {
        return h.clone();
    }
    let h = password::hash_async(random_token()).await.unwrap_or_default();
    DUMMY.get_or_init(|| h).clone()
}

#[derive(Deserialize)]
struct CsrfOnly {
    #[serde(default)]
    csrf: String,
}

async fn logout(signed_in: SignedIn, Form(form): Form<CsrfOnly>) -> Result<Redirect, AppError> {
    signed_in.verify_csrf(Some(&form.csrf)).await?;
    sign_out(&signed_in.session).await?;
    Ok(Redirect::to("/login"))
}

/// Makes a fresh one-time setup link when there is no account yet (each
/// start replaces the previous link); `serve` prints it.
pub async fn setup_link(state: &AppState) -> anyhow::Result<Option<String>> {
    if state.db.user_count().await? > 0 {
        return Ok(None);
    }
    let token = random_token();
    state.db.set_setting(SETUP_KEY, &token_hash(&token)).await?;
    Ok(Some(format!("{}/setup/{token}", state.config.public_url.trim_end_matches('/'))))
}

/// Refuses unless `token` is the pending setup link and there is no account.
async fn check_setup_token(state: &AppState, token: &str) -> Result<(), AppError> {
    let stored = state.db.setting(SETUP_KEY).await?.unwrap_or_default();
    if stored.is_empty() || stored != token_hash(token) || state.db.user_count().await? > 0 {
        return Err(AppError::NotFound(
            "this setup link (it was used already or replaced by a newer one)".into(),
        ));
    }
    Ok(())
}

async fn setup_page(
    State(state): State<AppState>,
    session: Session,
    Path(token): Path<String>,
) -> Result<Response, AppError> {
    check_setup_token(&state, &token).await?;
    let vm = SetupView { csrf: csrf_token(&session).await?, token, ..SetupView::default() };
    Ok(render(page_meta(&state, None, "Set up", None), move || view! { <SetupPage vm=vm /> })
        .into_response())
}

#[derive(Deserialize)]
struct SetupForm {
    #[serde(default)]
    csrf: String,
    email: String,
    name: String,
    password: String,
}

async fn setup(
    State(state): State<AppState>,
    session: Session,
    Path(token): Path<String>,
    Form(form): Form<SetupForm>,
) -> Result<Response, AppError> {
    check_setup_token(&state, &token).await?;
    verify_csrf(&session, Some(&form.csrf)).await?;
    let problem = validate_account(&form.email, &form.name, &form.password);
    if let Some(error) = problem {
        let vm = SetupView {
            csrf: csrf_token(&session).await?,
            token,
            email: form.email,
            name: form.name,
            error: Some(error),
        };
        let page =
            render(page_meta(&state, None, "Set up", None), move || view! { <SetupPage vm=vm /> });
        return Ok((StatusCode::BAD_REQUEST, page).into_response());
    }
    // The link dies before the account exists, so it cannot be used twice.
    state.db.set_setting(SETUP_KEY, "").await?;
    let hash = password::hash_async(form.password).await?;
    let user = state
        .db
        .create_user(NewUser {
            email: form.email.trim(),
            name: form.name.trim(),
            role: Role::Admin,
            password_hash: &hash,
        })
        .await?;
    state
        .db
        .audit(
            &format!("user:{}", user.id),
            "user.setup",
            &format!("user:{}", user.id),
            &format!("first admin {}", user.email),
        )
        .await?;
    sign_in(&session, &user).await?;
    crate::web::session::purge_expired(&state).await;
    set_flash(&session, format!("Welcome, {}. You are the first admin.", user.name)).await;
    Ok(Redirect::to("/admin/users").into_response())
}

/// What is wrong with a new account's fields, if anything.
pub fn validate_account(email: &str, name: &str, password: &str) -> Option<String> {
    let email = email.trim();
    if !email.contains('@') || email.len() > 254 || email.contains(char::is_whitespace) {
        Some(format!("{email:?} is not an email address"))
    } else if name.trim().is_empty() {
        Some("the name is empty".into())
    } else if password.chars().count() < 8 {
        Some("the password must be at least 8 characters".into())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn next_is_a_same_origin_path() {
        let check =
            |next: &str, expect: &str| assert_eq!(safe_next(Some(next)), expect, "next={next:?}");
        check("/assignments?packet=x", "/assignments?packet=x");
        check("/", "/");
        check("/c/abc#top", "/c/abc#top");
        for bad in [
            "",
            "https://evil.example/",
            "//evil.example/",
            "/\\evil.example",
            "\\\\evil.example",
            "/\t/evil.example",
            "/\n/evil.example",
            "/\r/evil.example",
            " //evil.example",
            "/ /evil",
            "javascript:alert(1)",
            "evil.example",
            "/x\u{7f}",
            "/x\u{2028}",
            "/\u{a0}/evil.example",
            "/a/b\\c",
        ] {
            check(bad, "/");
        }
        assert_eq!(safe_next(None), "/");
    }
}
