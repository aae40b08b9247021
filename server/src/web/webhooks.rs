//! The admin page of webhooks (`/admin/webhooks`): add an endpoint (its
//! signing secret shown once), disable one, and see the latest deliveries
//! with their answers, each with "Redeliver". Every change is audited.
//! Delivery itself is `crate::webhooks`.

use axum::Form;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use leptos::prelude::*;

use app::pages::webhooks::{DeliveryRowView, EndpointRowView, WebhooksPage, WebhooksView};

use crate::db::Role;
use crate::error::AppError;
use crate::state::AppState;
use crate::web::assignments::utc;
use crate::web::auth::{page_meta, render, set_flash, take_flash};
use crate::web::session::{CsrfForm, SignedIn};
use crate::webhooks::Event;

const NEW_SECRET: &str = "new_webhook_secret";
/// The deliveries the page lists, newest first.
const LISTED: i64 = 100;
/// The longest endpoint URL taken.
const MAX_URL: usize = 2000;

pub fn routes() -> crate::routes::Routes {
    crate::routes::Routes::new()
        .route("/admin/webhooks", get(page).post(create_endpoint))
        .route("/admin/webhooks/{id}/disable", post(disable_endpoint))
        .route("/admin/webhooks/deliveries/{id}/redeliver", post(redeliver))
}

async fn page(State(state): State<AppState>, signed_in: SignedIn) -> Result<Response, AppError> {
    signed_in.require(Role::Admin)?;
    let endpoints = state
        .db
        .list_webhook_endpoints()
        .await?
        .into_iter()
        .map(|e| EndpointRowView {
            id: e.id,
            url: e.url,
            events: e.events,
            created: utc(e.created_at),
            disabled: e.disabled_at.map(utc),
        })
        .collect();
    let deliveries = state
        .db
        .recent_webhook_deliveries(LISTED)
        .await?
        .into_iter()
        .map(|d| DeliveryRowView {
            id: d.id,
            url: d.url,
            event: d.event,
            message_id: d.message_id,
            attempts: d.attempts,
            status: match (d.last_status, d.attempts) {
                (Some(s), _) => s.to_string(),
                (None, 0) => "not tried yet".into(),
                (None, _) => "not reached".into(),
            },
            answer: d.last_answer.unwrap_or_default(),
            when: match (d.state.as_str(), d.delivered_at) {
                ("delivered", Some(at)) => format!("delivered {}", utc(at)),
                ("failed", _) => "no more tries".into(),
                _ => format!("next try {}", utc(d.next_attempt_at)),
            },
            state: d.state,
        })
        .collect();
    let vm = WebhooksView {
        csrf: signed_in.csrf.clone(),
        endpoints,
        deliveries,
        new_secret: crate::web::session::take_shown_once(&signed_in.session, NEW_SECRET).await?,
        events: Event::ALL.iter().map(|e| e.as_str().to_string()).collect(),
    };
    let flash = take_flash(&signed_in.session).await;
    Ok(render(page_meta(&state, Some(&signed_in), "Webhooks", flash), move || {
        view! { <WebhooksPage vm=vm /> }
    })
    .into_response())
}

/// The endpoint form: `csrf`, `url`, and `events` once per event checked
/// (read as pairs: a form's repeated field is not a struct's).
async fn create_endpoint(
    State(state): State<AppState>,
    signed_in: SignedIn,
    body: Bytes,
) -> Result<Response, AppError> {
    signed_in.require(Role::Admin)?;
    let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(&body)
        .map_err(|e| AppError::BadRequest(format!("the form could not be read: {e}")))?;
    let field = |name: &str| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    signed_in.verify_csrf(field("csrf")).await?;
    let url = field("url").unwrap_or_default().trim();
    let url = endpoint_url(url)?;
    let mut events = Vec::new();
    for (_, v) in pairs.iter().filter(|(k, _)| k == "events") {
        let e = Event::parse(v.trim()).ok_or_else(|| {
            AppError::BadRequest(format!(
                "event {v:?} is not one of {}",
                Event::ALL.map(Event::as_str).join(", ")
            ))
        })?;
        if !events.contains(&e) {
            events.push(e);
        }
    }
    if events.is_empty() {
        return Err(AppError::BadRequest("choose at least one event for the endpoint".into()));
    }
    let events = events.iter().map(|e| e.as_str()).collect::<Vec<_>>().join(" ");
    let secret = crate::webhooks::new_secret();
    let id =
        state.db.create_webhook_endpoint(&url, &secret, &events, Some(signed_in.user.id)).await?;
    state
        .db
        .audit(
            &format!("user:{}", signed_in.user.id),
            "webhook.endpoint.create",
            &format!("webhook:{id}"),
            &format!("{url} ({events})"),
        )
        .await?;
    crate::web::session::put_shown_once(&signed_in.session, NEW_SECRET, secret).await?;
    Ok(Redirect::to("/admin/webhooks").into_response())
}

/// An endpoint URL: http or https, a host, no credentials, at most
/// [`MAX_URL`] bytes.
fn endpoint_url(url: &str) -> Result<String, AppError> {
    let bad = |why: &str| AppError::BadRequest(format!("endpoint URL {url:?}: {why}"));
    if url.len() > MAX_URL {
        return Err(bad(&format!("longer than {MAX_URL} characters")));
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("only http and https URLs receive webhooks"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad("it names no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad(
            "credentials in the URL would be shown on this page; the signature authenticates the sender",
        ));
    }
    Ok(parsed.to_string())
}

async fn disable_endpoint(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<i64>,
    Form(f): Form<CsrfForm>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Admin)?;
    signed_in.verify_csrf(Some(&f.csrf)).await?;
    if !state.db.disable_webhook_endpoint(id).await? {
        return Err(AppError::NotFound(format!("enabled webhook endpoint {id}")));
    }
    state
        .db
        .audit(
            &format!("user:{}", signed_in.user.id),
            "webhook.endpoint.disable",
            &format!("webhook:{id}"),
            "",
        )
        .await?;
    set_flash(
        &signed_in.session,
        format!("Webhook endpoint {id} disabled: it receives no more events."),
    )
    .await;
    Ok(Redirect::to("/admin/webhooks").into_response())
}

async fn redeliver(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<i64>,
    Form(f): Form<CsrfForm>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Admin)?;
    signed_in.verify_csrf(Some(&f.csrf)).await?;
    let Some(d) = state.db.webhook_delivery(id).await? else {
        return Err(AppError::NotFound(format!("webhook delivery {id}")));
    };
    if !state.db.redeliver_webhook(id, crate::now_ms()).await? {
        return Err(AppError::Conflict(format!(
            "webhook delivery {id} is being attempted now; redeliver it once this attempt ends"
        )));
    }
    state
        .db
        .audit(
            &format!("user:{}", signed_in.user.id),
            "webhook.delivery.redeliver",
            &format!("webhook:{}", d.endpoint_id),
            &format!("delivery {id} ({}, {})", d.event, d.message_id),
        )
        .await?;
    set_flash(&signed_in.session, format!("Delivery {id} ({}) will be posted again now.", d.event))
        .await;
    Ok(Redirect::to("/admin/webhooks").into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_urls_are_http_with_a_host_and_no_credentials() {
        let check = |url: &str, expect: Result<&str, &str>| match (endpoint_url(url), expect) {
            (Ok(got), Ok(want)) => assert_eq!(got, want),
            (Err(e), Err(says)) => assert!(e.to_string().contains(says), "{url}: {e}"),
            (got, _) => panic!("{url}: {got:?}"),
        };
        check("https://hooks.example.com/in", Ok("https://hooks.example.com/in"));
        check("http://127.0.0.1:9000/h?x=1", Ok("http://127.0.0.1:9000/h?x=1"));
        check("ftp://example.com/", Err("only http and https"));
        check("https://user:pw@example.com/", Err("credentials"));
        check("not a url", Err("endpoint URL"));
        check(&format!("https://example.com/{}", "a".repeat(MAX_URL)), Err("longer than"));
    }
}
