//! Assignment pages for authors: the list, the invite form, the invite link
//! shown once, and reissuing a link. `/assignments/{id}` itself is the
//! review area's page.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use leptos::prelude::*;
use serde::Deserialize;

use app::pages::assignments::{
    AssignmentListPage, AssignmentListView, AssignmentRow, InvitedPage, InvitedView, NewAssignmentPage, NewAssignmentView, PacketChoice,
};

use crate::auth::password::{random_token, token_hash};
use crate::db::{Role, VersionState};
use crate::error::AppError;
use crate::invites::{self, DEFAULT_DEADLINE_MS, Invite};
use crate::state::AppState;
use crate::web::auth::{page_meta, render, take_flash};
use crate::web::session::SignedIn;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/assignments", get(list).post(create))
        .route("/assignments/new", get(new_form))
        .route("/assignments/{id}/invited", get(invited))
        .route("/assignments/{id}/reissue", post(reissue))
        .route("/assignments/{id}/model-key/revoke", post(revoke_model_key))
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Parses a `datetime-local` value (`YYYY-MM-DDTHH:MM[:SS]`) as UTC, to Unix ms.
pub fn parse_datetime_local(s: &str) -> Option<i64> {
    let (date, time) = s.trim().split_once('T')?;
    let mut d = date.split('-');
    let (y, m, day): (i64, i64, i64) = (d.next()?.parse().ok()?, d.next()?.parse().ok()?, d.next()?.parse().ok()?);
    if d.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let mut t = time.split(':');
    let (h, min): (i64, i64) = (t.next()?.parse().ok()?, t.next()?.parse().ok()?);
    let sec: f64 = t.next().map(str::parse).transpose().ok()?.unwrap_or(0.0);
    if t.next().is_some() || !(0..24).contains(&h) || !(0..60).contains(&min) || !(0.0..60.0).contains(&sec) {
        return None;
    }
    let days = days_from_civil(y, m, day);
    if civil_from_days(days) != (y, m, day) {
        return None;
    }
    Some(((days * 86_400 + h * 3600 + min * 60) as f64 * 1000.0 + sec * 1000.0) as i64)
}

/// Unix ms as a `datetime-local` value in UTC.
pub fn datetime_local(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}", rem / 3600, rem % 3600 / 60)
}

/// Unix ms as "2026-12-01 17:00 UTC".
pub fn utc(ms: i64) -> String {
    format!("{} UTC", datetime_local(ms).replace('T', " "))
}

#[derive(Deserialize)]
struct ListQuery {
    packet: Option<String>,
}

async fn list(State(state): State<AppState>, signed_in: SignedIn, Query(q): Query<ListQuery>) -> Result<Response, AppError> {
    let filter = q.packet.filter(|p| !p.is_empty());
    let rows = state
        .db
        .list_assignments(filter.as_deref())
        .await?
        .into_iter()
        .map(|a| AssignmentRow {
            id: a.id,
            candidate: a.candidate_name,
            email: a.email,
            slug: a.slug,
            version: a.version.map(|v| format!("v{v}")).unwrap_or_default(),
            state: a.state,
            deadline: utc(a.deadline),
            created: utc(a.created_at),
        })
        .collect();
    let slugs = state.db.list_packets().await?.into_iter().map(|p| p.slug).collect();
    let vm = AssignmentListView { filter, slugs, can_invite: signed_in.user.role >= Role::Author, rows };
    let flash = take_flash(&signed_in.session).await;
    Ok(render(page_meta(&state, Some(&signed_in), "Assignments", flash), move || view! { <AssignmentListPage vm=vm /> }).into_response())
}

/// Packets that can be assigned: those with a published version.
async fn choices(state: &AppState) -> Result<Vec<PacketChoice>, AppError> {
    let mut out = Vec::new();
    for p in state.db.list_packets().await? {
        if let Some(v) = state.db.latest_published(&p.slug).await?
            && v.state == VersionState::Published
        {
            out.push(PacketChoice { slug: p.slug, title: p.title, version: v.version.map(|n| format!("v{n}")).unwrap_or_default() });
        }
    }
    Ok(out)
}

async fn new_form(State(state): State<AppState>, signed_in: SignedIn, Query(q): Query<ListQuery>) -> Result<Response, AppError> {
    signed_in.require(Role::Author)?;
    let vm = NewAssignmentView {
        csrf: signed_in.csrf.clone(),
        packets: choices(&state).await?,
        selected: q.packet,
        deadline: datetime_local(crate::now_ms() + DEFAULT_DEADLINE_MS),
        ..NewAssignmentView::default()
    };
    Ok(render(page_meta(&state, Some(&signed_in), "Invite a candidate", None), move || view! { <NewAssignmentPage vm=vm /> }).into_response())
}

#[derive(Deserialize)]
struct InviteForm {
    #[serde(default)]
    csrf: String,
    packet: String,
    candidate_name: String,
    email: String,
    deadline: String,
    #[serde(default)]
    time_box_minutes: String,
}

/// The session key holding an invite link until its page shows it once.
fn shown_once_key(id: &str) -> String {
    format!("invite_url:{id}")
}

async fn create(State(state): State<AppState>, signed_in: SignedIn, Form(f): Form<InviteForm>) -> Result<Response, AppError> {
    signed_in.require(Role::Author)?;
    signed_in.verify_csrf(Some(&f.csrf)).await?;
    let parsed = (|| -> Result<(i64, Option<i64>), String> {
        let deadline = parse_datetime_local(&f.deadline).ok_or_else(|| format!("deadline {:?} is not a date and time (YYYY-MM-DDTHH:MM, UTC)", f.deadline))?;
        let tb = f.time_box_minutes.trim();
        let time_box = if tb.is_empty() {
            None
        } else {
            let m: i64 = tb.parse().map_err(|_| format!("time box {tb:?} is not a whole number of minutes"))?;
            Some(m.checked_mul(60).ok_or("the time box is too long")?)
        };
        Ok((deadline, time_box))
    })();
    let result = match parsed {
        Ok((deadline, time_box_secs)) => {
            invites::create(
                &state,
                Some(signed_in.user.id),
                Invite { slug: &f.packet, candidate_name: &f.candidate_name, email: &f.email, deadline: Some(deadline), time_box_secs },
            )
            .await
        }
        Err(e) => Err(AppError::BadRequest(e)),
    };
    match result {
        Ok(invited) => {
            let id = invited.assignment.id.clone();
            signed_in.session.insert(&shown_once_key(&id), invited.url).await.map_err(|e| AppError::Internal(e.into()))?;
            Ok(Redirect::to(&format!("/assignments/{id}/invited")).into_response())
        }
        Err(AppError::BadRequest(message)) => {
            // The form comes back with what was typed and what was wrong.
            let vm = NewAssignmentView {
                csrf: signed_in.csrf.clone(),
                packets: choices(&state).await?,
                selected: Some(f.packet),
                candidate_name: f.candidate_name,
                email: f.email,
                deadline: f.deadline,
                time_box_minutes: f.time_box_minutes,
                error: Some(message),
            };
            let page = render(page_meta(&state, Some(&signed_in), "Invite a candidate", None), move || view! { <NewAssignmentPage vm=vm /> });
            Ok((StatusCode::BAD_REQUEST, page).into_response())
        }
        Err(e) => Err(e),
    }
}

async fn invited(State(state): State<AppState>, signed_in: SignedIn, Path(id): Path<String>) -> Result<Response, AppError> {
    signed_in.require(Role::Author)?;
    let a = state.db.assignment_by_id(&id).await?.ok_or_else(|| AppError::NotFound(format!("assignment {id:?}")))?;
    let url: Option<String> = signed_in.session.remove(&shown_once_key(&id)).await.map_err(|e| AppError::Internal(e.into()))?;
    let vm = InvitedView { assignment_id: a.id, candidate: a.candidate_name, slug: a.slug, url, csrf: signed_in.csrf.clone() };
    Ok(render(page_meta(&state, Some(&signed_in), "Invite link", None), move || view! { <InvitedPage vm=vm /> }).into_response())
}

#[derive(Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

async fn reissue(State(state): State<AppState>, signed_in: SignedIn, Path(id): Path<String>, Form(f): Form<CsrfForm>) -> Result<Response, AppError> {
    signed_in.require(Role::Author)?;
    signed_in.verify_csrf(Some(&f.csrf)).await?;
    let a = state.db.assignment_by_id(&id).await?.ok_or_else(|| AppError::NotFound(format!("assignment {id:?}")))?;
    let token = random_token();
    state.db.reissue_token(&a.id, &token_hash(&token)).await?;
    // The model key is derived from the link, so the old link's key dies with
    // it and the new link shows a new key.
    crate::meter::reissue_key(&state, &a, &token).await?;
    state
        .db
        .audit(&format!("user:{}", signed_in.user.id), "assignment.reissue", &format!("assignment:{}", a.id), "new link and model key; the old ones stop working")
        .await?;
    let url = format!("{}/c/{token}", state.config.public_url.trim_end_matches('/'));
    signed_in.session.insert(&shown_once_key(&a.id), url).await.map_err(|e| AppError::Internal(e.into()))?;
    Ok(Redirect::to(&format!("/assignments/{}/invited", a.id)).into_response())
}

/// Revokes the assignment's model key: every later call with it is refused
/// (401) and recorded. Reissuing the link gives the candidate a new key.
async fn revoke_model_key(State(state): State<AppState>, signed_in: SignedIn, Path(id): Path<String>, Form(f): Form<CsrfForm>) -> Result<Response, AppError> {
    signed_in.require(Role::Author)?;
    signed_in.verify_csrf(Some(&f.csrf)).await?;
    let a = state.db.assignment_by_id(&id).await?.ok_or_else(|| AppError::NotFound(format!("assignment {id:?}")))?;
    let now = crate::now_ms();
    let mut revoked = 0;
    for k in state.db.model_keys_of(&a.id).await?.into_iter().filter(|k| k.revoked_at.is_none()) {
        state.db.revoke_model_key(k.id, now).await?;
        revoked += 1;
    }
    state
        .db
        .audit(&format!("user:{}", signed_in.user.id), "assignment.model_key.revoke", &format!("assignment:{}", a.id), &format!("{revoked} key(s) revoked"))
        .await?;
    Ok(Redirect::to(&format!("/assignments/{}", a.id)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetime_local_round_trips_in_utc() {
        let check = |input: &str, expect: Option<i64>| assert_eq!(parse_datetime_local(input), expect, "{input}");
        check("1970-01-01T00:00", Some(0));
        check("2026-11-29T10:30", Some(1_795_948_200_000));
        check("2024-02-29T23:59:30", Some(1_709_251_170_000));
        check("2023-02-29T10:00", None);
        check("2026-13-01T10:00", None);
        check("2026-11-29 10:30", None);
        check("tomorrow", None);
        assert_eq!(datetime_local(1_795_948_200_000), "2026-11-29T10:30");
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
    }
}
