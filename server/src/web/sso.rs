//! Single sign-on with OpenID Connect: `/login/sso/<issuer>` sends the
//! browser to the issuer with a fresh `state`, `nonce` and PKCE verifier
//! (kept in `oidc_logins`, bound to this browser by a cookie), and
//! `/login/sso/<issuer>/callback` finishes: the `state` is taken (good
//! once, ten minutes), the code exchanged and the ID token checked
//! (`crate::oidc`), then the account with that verified email signs in.
//! An unknown email gets an account only when its domain is one the issuer
//! may create accounts for, with the issuer's default role.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde::Deserialize;
use tower_sessions::Session;

use crate::auth::password::{random_token, token_hash};
use crate::config::OidcIssuer;
use crate::db::{NewUser, OidcLogin, Role};
use crate::error::AppError;
use crate::oidc::{Client, SsoError};
use crate::state::AppState;
use crate::web::auth::{safe_next, set_flash};
use crate::web::session::sign_in;

/// The cookie binding a sign-in to the browser that started it.
pub const BROWSER_COOKIE: &str = "gatehouse_sso";
/// How long a started sign-in may take.
const LOGIN_TTL_MS: i64 = 10 * 60 * 1000;

pub fn routes() -> crate::routes::Routes {
    crate::routes::Routes::new()
        .route("/login/sso/{name}", get(start))
        .route("/login/sso/{name}/callback", get(callback))
}

fn issuer<'a>(state: &'a AppState, name: &str) -> Result<&'a OidcIssuer, AppError> {
    state
        .config
        .oidc
        .get(name)
        .ok_or_else(|| AppError::NotFound(format!("sign-in provider {name:?}")))
}

fn client<'a>(issuer: &'a OidcIssuer) -> Client<'a> {
    Client {
        discovery_url: &issuer.discovery_url,
        issuer: issuer.issuer(),
        client_id: &issuer.client_id,
        client_secret: &issuer.client_secret,
    }
}

fn redirect_uri(state: &AppState, name: &str) -> String {
    format!("{}/login/sso/{name}/callback", state.config.public_url.trim_end_matches('/'))
}

fn sso_error(e: SsoError) -> AppError {
    match e {
        SsoError::Refused(m) => AppError::Forbidden(format!("sign-in refused: {m}")),
        SsoError::Issuer(m) => AppError::BadGateway(format!("the identity provider failed: {m}")),
    }
}

/// The browser cookie's value, if well formed.
fn browser_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, _)| *name == BROWSER_COOKIE)
        .map(|(_, value)| value.trim().to_string())
        .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[derive(Deserialize)]
struct StartQuery {
    next: Option<String>,
}

async fn start(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    Query(q): Query<StartQuery>,
) -> Result<Response, AppError> {
    let issuer = issuer(&state, &name)?;
    let cache = &state.memo.oidc;
    let d = crate::oidc::discover(&cache.http(), cache, client(issuer)).await.map_err(sso_error)?;
    let browser = browser_cookie(&headers).unwrap_or_else(random_token);
    let (st, nonce, verifier) = (random_token(), random_token(), random_token());
    let now = crate::now_ms();
    // Sign-ins never finished are swept as new ones start, and those under
    // way are bounded (anyone may start one).
    state.db.delete_oidc_logins_before(now - LOGIN_TTL_MS).await?;
    if state.db.count_oidc_logins().await? >= state.config.max_sso_logins {
        return Err(AppError::Unavailable(
            "too many sign-ins are under way; try again in a few minutes".into(),
        ));
    }
    state
        .db
        .create_oidc_login(&OidcLogin {
            state_hash: token_hash(&st),
            provider: name.clone(),
            browser_hash: token_hash(&browser),
            nonce: nonce.clone(),
            pkce_verifier: verifier.clone(),
            next: safe_next(q.next.as_deref()),
            created_at: now,
        })
        .await?;
    let url = crate::oidc::authorization_url(
        &d,
        client(issuer),
        &redirect_uri(&state, &name),
        &st,
        &nonce,
        &verifier,
    )
    .map_err(sso_error)?;
    let secure = if state.config.secure_cookies() { "; Secure" } else { "" };
    // Lax: the issuer's redirect back is a top-level GET from its site.
    let cookie = format!(
        "{BROWSER_COOKIE}={browser}; Path=/login/sso; HttpOnly; SameSite=Lax; Max-Age=600{secure}"
    );
    let mut res = Redirect::to(&url).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        res.headers_mut().append(header::SET_COOKIE, v);
    }
    Ok(res)
}

#[derive(Deserialize)]
struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

async fn callback(
    State(state): State<AppState>,
    Path(name): Path<String>,
    session: Session,
    headers: HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> Result<Response, AppError> {
    let issuer = issuer(&state, &name)?;
    let refuse = |m: String| AppError::Forbidden(format!("sign-in refused: {m}"));
    let st = q.state.as_deref().filter(|s| !s.is_empty() && s.len() <= 512).ok_or_else(|| {
        AppError::BadRequest("the identity provider's answer has no state; start again".into())
    })?;
    // Taken before anything else: a state is good once, even when the
    // rest of this answer is refused.
    let login = state.db.take_oidc_login(&token_hash(st)).await?.ok_or_else(|| {
        refuse(
            "this sign-in's state is unknown or was already used (a sign-in link works once); start again"
                .into(),
        )
    })?;
    if login.provider != name {
        return Err(refuse(format!(
            "this sign-in was started with {:?}, not {name:?}",
            login.provider
        )));
    }
    if crate::now_ms() - login.created_at > LOGIN_TTL_MS {
        return Err(refuse("this sign-in took more than ten minutes; start again".into()));
    }
    let same_browser = browser_cookie(&headers)
        .is_some_and(|b| crate::oidc::eq(&token_hash(&b), &login.browser_hash));
    if !same_browser {
        return Err(refuse(
            "this sign-in was started in another browser (or its cookie is gone); start again here"
                .into(),
        ));
    }
    if let Some(e) = q.error {
        let detail = q.error_description.map(|d| format!(": {d}")).unwrap_or_default();
        return Err(refuse(format!("the identity provider answered {e}{detail}")));
    }
    let code = q.code.as_deref().filter(|c| !c.is_empty() && c.len() <= 4096).ok_or_else(|| {
        AppError::BadRequest("the identity provider's answer has no code; start again".into())
    })?;
    let cache = &state.memo.oidc;
    let who = crate::oidc::finish(
        &cache.http(),
        cache,
        client(issuer),
        code,
        &redirect_uri(&state, &name),
        &login.pkce_verifier,
        &login.nonce,
    )
    .await
    .map_err(sso_error)?;
    let user = match state.db.user_by_email(&who.email).await? {
        Some(u) if u.disabled => {
            return Err(refuse(format!("the account {} is disabled", u.email)));
        }
        Some(u) => u,
        None if issuer.allows(&who.email) => {
            let role = Role::parse(issuer.default_role.trim()).unwrap_or(Role::Reviewer);
            let name_shown = who
                .name
                .clone()
                .unwrap_or_else(|| who.email.split('@').next().unwrap_or("").into());
            // No password: this account signs in through its issuer (an
            // admin may still set one).
            let u = state
                .db
                .create_user(NewUser {
                    email: &who.email,
                    name: name_shown.trim(),
                    role,
                    password_hash: "",
                })
                .await?;
            state
                .db
                .audit(
                    &format!("oidc:{name}"),
                    "user.create",
                    &format!("user:{}", u.id),
                    &format!("{} as {} on first sign-in through {name}", u.email, role.as_str()),
                )
                .await?;
            u
        }
        None => {
            return Err(refuse(format!(
                "there is no account for {}, and {} does not make accounts for that domain; ask an admin to add you",
                who.email,
                issuer.label(&name)
            )));
        }
    };
    sign_in(&session, &user).await?;
    crate::web::session::purge_expired(&state).await;
    state
        .db
        .audit(
            &format!("user:{}", user.id),
            "session.sign-in",
            &format!("user:{}", user.id),
            &format!("through {name} (subject {})", who.subject),
        )
        .await?;
    set_flash(&session, format!("Signed in as {} through {}.", user.email, issuer.label(&name)))
        .await;
    Ok(Redirect::to(&login.next).into_response())
}
