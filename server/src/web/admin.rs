//! Admin pages: accounts (create, change role, disable) and integration API
//! tokens (create, shown once; revoke). Every change is audited.

use axum::Form;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use leptos::prelude::*;
use serde::Deserialize;

use app::pages::admin::{AdminPage, AdminView, TokenRowView, UserRowView};

use crate::auth::password::{self, random_token, token_hash};
use crate::db::{NewUser, Role};
use crate::error::AppError;
use crate::state::AppState;
use crate::web::assignments::utc;
use crate::web::auth::{page_meta, render, set_flash, take_flash, validate_account};
use crate::web::session::CsrfForm;
use crate::web::session::SignedIn;

const NEW_TOKEN_KEY: &str = "new_api_token";

pub fn routes() -> crate::routes::Routes {
    crate::routes::Routes::new()
        .route("/admin", get(|| async { Redirect::to("/admin/users") }))
        .route("/admin/users", get(users).post(create_user))
        .route("/admin/users/{id}", post(update_user))
        .route("/admin/users/{id}/password", post(reset_password))
        .route("/admin/tokens", post(create_token))
        .route("/admin/tokens/{id}/revoke", post(revoke_token))
}

async fn view_model(
    state: &AppState,
    signed_in: &SignedIn,
    error: Option<String>,
) -> Result<AdminView, AppError> {
    let users = state
        .db
        .list_users()
        .await?
        .into_iter()
        .map(|u| UserRowView {
            id: u.id,
            is_self: u.id == signed_in.user.id,
            email: u.email,
            name: u.name,
            role: u.role.as_str().to_string(),
            disabled: u.disabled,
            created: utc(u.created_at),
        })
        .collect();
    let tokens = state
        .db
        .list_api_tokens()
        .await?
        .into_iter()
        .map(|t| TokenRowView {
            id: t.id,
            name: t.name,
            user_email: t.user_email,
            created: utc(t.created_at),
            revoked: t.revoked_at.map(utc),
        })
        .collect();
    let new_token = crate::web::session::take_shown_once(&signed_in.session, NEW_TOKEN_KEY).await?;
    Ok(AdminView {
        csrf: signed_in.csrf.clone(),
        users,
        tokens,
        new_token,
        error,
        upstreams: upstreams(&state.config),
    })
}

async fn users(State(state): State<AppState>, signed_in: SignedIn) -> Result<Response, AppError> {
    signed_in.require(Role::Admin)?;
    let vm = view_model(&state, &signed_in, None).await?;
    let flash = take_flash(&signed_in.session).await;
    Ok(render(
        page_meta(&state, Some(&signed_in), "Users", flash),
        move || view! { <AdminPage vm=vm /> },
    )
    .into_response())
}

/// The configured model upstreams, URLs without any credentials in them and
/// never a key: ("all packets" | slug, URL, key set).
pub fn upstreams(config: &crate::config::Config) -> Vec<(String, String, bool)> {
    let strip = |u: &str| match u.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((_, host)) if !host.contains('/') || rest.find('@') < rest.find('/') => {
                format!("{scheme}://{host}")
            }
            _ => u.to_string(),
        },
        None => u.to_string(),
    };
    let mut out = Vec::new();
    if let Some(url) = config.model_upstream_url.as_deref().filter(|u| !u.is_empty()) {
        out.push((
            "all packets".to_string(),
            strip(url),
            config.model_upstream_key.as_deref().is_some_and(|k| !k.is_empty()),
        ));
    }
    for (slug, u) in &config.model_upstreams {
        out.push((slug.clone(), strip(&u.url), u.key.as_deref().is_some_and(|k| !k.is_empty())));
    }
    out
}

#[derive(Deserialize)]
struct PasswordForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    password: String,
}

/// An admin sets a new password for an account (told to its owner out of
/// band); audited, the password itself never.
async fn reset_password(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<i64>,
    Form(f): Form<PasswordForm>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Admin)?;
    signed_in.verify_csrf(Some(&f.csrf)).await?;
    let user =
        state.db.user_by_id(id).await?.ok_or_else(|| AppError::NotFound(format!("user {id}")))?;
    if f.password.len() > 1024 {
        return Err(AppError::BadRequest("the password is longer than 1024 bytes".into()));
    }
    if let Some(problem) = validate_account(&user.email, &user.name, &f.password) {
        return Err(AppError::BadRequest(problem));
    }
    let hash = password::hash_async(f.password).await?;
    state.db.set_password(user.id, &hash).await?;
    state
        .db
        .audit(
            &actor(&signed_in),
            "user.password_reset",
            &format!("user:{}", user.id),
            &format!("{}: new password set by an admin", user.email),
        )
        .await?;
    set_flash(&signed_in.session, format!("Set a new password for {}.", user.email)).await;
    Ok(Redirect::to("/admin/users").into_response())
}

fn actor(s: &SignedIn) -> String {
    format!("user:{}", s.user.id)
}

#[derive(Deserialize)]
struct NewUserForm {
    #[serde(default)]
    csrf: String,
    email: String,
    name: String,
    role: String,
    password: String,
}

async fn create_user(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Form(f): Form<NewUserForm>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Admin)?;
    signed_in.verify_csrf(Some(&f.csrf)).await?;
    let role = Role::parse(&f.role);
    let mut problem = validate_account(&f.email, &f.name, &f.password);
    if problem.is_none() && role.is_none() {
        problem = Some(format!("role {:?} is not admin, author or reviewer", f.role));
    }
    if problem.is_none() && state.db.user_by_email(f.email.trim()).await?.is_some() {
        problem = Some(format!("an account for {} already exists", f.email.trim()));
    }
    if let Some(error) = problem {
        let vm = view_model(&state, &signed_in, Some(error)).await?;
        let page = render(
            page_meta(&state, Some(&signed_in), "Users", None),
            move || view! { <AdminPage vm=vm /> },
        );
        return Ok((StatusCode::BAD_REQUEST, page).into_response());
    }
    let role = role.expect("checked above");
    let hash = password::hash_async(f.password).await?;
    let user = state
        .db
        .create_user(NewUser {
            email: f.email.trim(),
            name: f.name.trim(),
            role,
            password_hash: &hash,
        })
        .await?;
    state
        .db
        .audit(
            &actor(&signed_in),
            "user.create",
            &format!("user:{}", user.id),
            &format!("{} as {}", user.email, role.as_str()),
        )
        .await?;
    set_flash(&signed_in.session, format!("Added {} as {}.", user.email, role.as_str())).await;
    Ok(Redirect::to("/admin/users").into_response())
}

#[derive(Deserialize)]
struct UpdateUserForm {
    #[serde(default)]
    csrf: String,
    role: String,
    /// A checkbox: present ("on") when ticked.
    disabled: Option<String>,
}

async fn update_user(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<i64>,
    Form(f): Form<UpdateUserForm>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Admin)?;
    signed_in.verify_csrf(Some(&f.csrf)).await?;
    let user =
        state.db.user_by_id(id).await?.ok_or_else(|| AppError::NotFound(format!("user {id}")))?;
    let role = Role::parse(&f.role).ok_or_else(|| {
        AppError::BadRequest(format!("role {:?} is not admin, author or reviewer", f.role))
    })?;
    let disabled = f.disabled.is_some_and(|d| d == "on" || d == "true" || d == "1");
    if user.id == signed_in.user.id && (role != Role::Admin || disabled) {
        return Err(AppError::Conflict(
            "you cannot demote or disable your own account; ask another admin".into(),
        ));
    }
    state.db.set_user_role(user.id, role, disabled).await?;
    let detail = format!(
        "{}: role {} -> {}, disabled {} -> {}",
        user.email,
        user.role.as_str(),
        role.as_str(),
        user.disabled,
        disabled
    );
    state
        .db
        .audit(&actor(&signed_in), "user.update", &format!("user:{}", user.id), &detail)
        .await?;
    set_flash(&signed_in.session, format!("Saved {}.", user.email)).await;
    Ok(Redirect::to("/admin/users").into_response())
}

#[derive(Deserialize)]
struct NewTokenForm {
    #[serde(default)]
    csrf: String,
    name: String,
    user_id: i64,
}

async fn create_token(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Form(f): Form<NewTokenForm>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Admin)?;
    signed_in.verify_csrf(Some(&f.csrf)).await?;
    let name = f.name.trim();
    if name.is_empty() {
        return Err(AppError::BadRequest("the token needs a name (what it is for)".into()));
    }
    let user = state.db.user_by_id(f.user_id).await?.filter(|u| !u.disabled).ok_or_else(|| {
        AppError::BadRequest(format!("user {} does not exist or is disabled", f.user_id))
    })?;
    let token = format!("gh_{}", random_token());
    let id = state.db.create_api_token(user.id, name, &token_hash(&token)).await?;
    state
        .db
        .audit(
            &actor(&signed_in),
            "api-token.create",
            &format!("api-token:{id}"),
            &format!("{name:?} acting as {}", user.email),
        )
        .await?;
    crate::web::session::put_shown_once(&signed_in.session, NEW_TOKEN_KEY, token).await?;
    Ok(Redirect::to("/admin/users").into_response())
}

async fn revoke_token(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<i64>,
    Form(f): Form<CsrfForm>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Admin)?;
    signed_in.verify_csrf(Some(&f.csrf)).await?;
    if !state.db.list_api_tokens().await?.iter().any(|t| t.id == id) {
        return Err(AppError::NotFound(format!("API token {id}")));
    }
    state.db.revoke_api_token(id).await?;
    state.db.audit(&actor(&signed_in), "api-token.revoke", &format!("api-token:{id}"), "").await?;
    set_flash(&signed_in.session, format!("Token {id} revoked.")).await;
    Ok(Redirect::to("/admin/users").into_response())
}
