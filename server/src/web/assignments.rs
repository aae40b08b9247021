//! Assignment pages for authors: the list, the invite form, the invite link
//! shown once, and reissuing a link. `/assignments/{id}` itself is the
//! review area's page.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use leptos::prelude::*;
use serde::Deserialize;

use app::pages::assignments::{
    AssignmentListPage, AssignmentListView, AssignmentRow, InvitedPage, InvitedView,
    NewAssignmentPage, NewAssignmentView, PacketChoice,
};

use crate::auth::password::{random_token, token_hash};
use crate::db::{Role, VersionState};
use crate::error::AppError;
use crate::invites::{self, DEFAULT_DEADLINE_MS, Invite};
use crate::state::AppState;
use crate::web::auth::{page_meta, render, take_flash};
use crate::web::session::CsrfForm;
use crate::web::session::SignedIn;

pub fn routes() -> crate::routes::Routes {
    crate::routes::Routes::new()
        .route("/assignments", get(list).post(create))
        .route("/assignments/new", get(new_form))
        .route("/assignments/{id}/invited", get(invited))
        .route("/assignments/{id}/reissue", post(reissue))
        .route("/assignments/{id}/model-key/revoke", post(revoke_model_key))
}

pub use crate::times::{datetime_local, parse_datetime_local, utc};

#[derive(Deserialize)]
struct ListQuery {
    packet: Option<String>,
}

async fn list(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Query(q): Query<ListQuery>,
) -> Result<Response, AppError> {
    let filter = q.packet.filter(|p| !p.is_empty());
    let mut rows: Vec<(bool, AssignmentRow)> = state
        .db
        .list_assignments(filter.as_deref())
        .await?
        .into_iter()
        .map(|a| {
            // Reviewers do not see who a blind assignment is for here, nor
            // when it was made or is due to the minute (which a recruiter's
            // calendar would match to a name): the day only.
            let blind = a.blind_review && signed_in.user.role == Role::Reviewer;
            let time = if blind { crate::times::utc_day } else { utc };
            let row = AssignmentRow {
                candidate: if blind { "Candidate (blind review)".into() } else { a.candidate_name },
                email: if blind { String::new() } else { a.email },
                slug: a.slug,
                version: a.version.map(|v| format!("v{v}")).unwrap_or_default(),
                state: a.state,
                deadline: time(a.deadline),
                created: time(a.created_at),
                id: a.id,
            };
            (blind, row)
        })
        .collect();
    // Newest first (the store's order); blind rows after the others, in a
    // stable pseudo-random order rather than the order they were invited in.
    rows.sort_by_cached_key(|(blind, r)| {
        if *blind { (1, crate::web::review::blind_key(&r.id)) } else { (0, String::new()) }
    });
    let rows = rows.into_iter().map(|(_, r)| r).collect();
    let slugs = state.db.list_packets().await?.into_iter().map(|p| p.slug).collect();
    let vm =
        AssignmentListView { filter, slugs, can_invite: signed_in.user.role >= Role::Author, rows };
    let flash = take_flash(&signed_in.session).await;
    Ok(render(
        page_meta(&state, Some(&signed_in), "Assignments", flash),
        move || view! { <AssignmentListPage vm=vm /> },
    )
    .into_response())
}

/// The time box a packet version sets itself, in minutes (read from its
/// manifest; none when it sets none or cannot be read).
pub async fn version_time_box(state: &AppState, v: &crate::db::PacketVersion) -> Option<u64> {
    let dir = crate::library::version_dir(state, &v.dir);
    tokio::task::spawn_blocking(move || {
        grader::packet::Packet::load(&dir).ok().and_then(|p| p.manifest.budgets.time_box_minutes)
    })
    .await
    .ok()
    .flatten()
}

/// Packets that can be assigned: those with a published version.
async fn choices(state: &AppState) -> Result<Vec<PacketChoice>, AppError> {
    let mut out = Vec::new();
    for p in state.db.list_packets().await? {
        if let Some(v) = state.db.latest_published(&p.slug).await?
            && v.state == VersionState::Published
        {
            let time_box_minutes = version_time_box(state, &v).await;
            out.push(PacketChoice {
                slug: p.slug,
                title: p.title,
                version: v.version.map(|n| format!("v{n}")).unwrap_or_default(),
                time_box_minutes,
            });
        }
    }
    Ok(out)
}

/// Sends the invite email for `a` with `url`, records the outcome in the
/// audit log as `actor`'s (never the link) and returns it as (sent, sentence).
pub(crate) async fn email_invite(
    state: &AppState,
    actor: &str,
    a: &crate::db::Assignment,
    url: &str,
) -> Result<(bool, String), AppError> {
    let version = state.db.version_by_id(a.packet_version_id).await?;
    let packet_time_box = match &version {
        Some(v) => version_time_box(state, v).await,
        None => None,
    };
    let title =
        state.db.packet_by_slug(&a.slug).await?.map(|p| p.title).unwrap_or_else(|| a.slug.clone());
    let time_box = a
        .time_box_secs
        .map(|s| (s as u64).div_ceil(60))
        .or(packet_time_box)
        .map(|m| format!("{m} min"));
    let deadline = utc(a.deadline);
    let mail = crate::mail::InviteMail {
        candidate_name: &a.candidate_name,
        email: &a.email,
        packet_title: &title,
        url,
        deadline: &deadline,
        time_box: time_box.as_deref(),
        max_submissions: a.max_submissions,
    };
    let outcome = match crate::mail::send_invite(&state.config, &mail).await {
        Ok(()) => (true, format!("Emailed the link to {} at {}.", a.email, utc(crate::now_ms()))),
        Err(e) => {
            tracing::warn!(assignment = %a.id, "invite email not sent: {e}");
            (
                false,
                format!(
                    "The email to {} was not sent: {e}. Copy the link below and send it yourself.",
                    a.email
                ),
            )
        }
    };
    let detail =
        if outcome.0 { format!("sent to {}", a.email) } else { format!("not sent to {}", a.email) };
    state
        .db
        .audit(actor, "assignment.invite_email", &format!("assignment:{}", a.id), &detail)
        .await?;
    Ok(outcome)
}

/// The session key holding what became of an invite email until the
/// invite page shows it.
fn mailed_key(id: &str) -> String {
    format!("invite_mail:{id}")
}

async fn put_mailed(
    session: &tower_sessions::Session,
    id: &str,
    outcome: (bool, String),
) -> Result<(), AppError> {
    session.insert(&mailed_key(id), outcome).await.map_err(|e| AppError::Internal(e.into()))
}

async fn new_form(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Query(q): Query<ListQuery>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Author)?;
    let packets = choices(&state).await?;
    let selected = q
        .packet
        .filter(|s| packets.iter().any(|p| &p.slug == s))
        .or_else(|| packets.first().map(|p| p.slug.clone()));
    let time_box_minutes = packets
        .iter()
        .find(|p| Some(&p.slug) == selected.as_ref())
        .and_then(|p| p.time_box_minutes)
        .map(|m| m.to_string())
        .unwrap_or_default();
    let can_email = crate::mail::configured(&state.config);
    let vm = NewAssignmentView {
        csrf: signed_in.csrf.clone(),
        packets,
        selected,
        deadline: datetime_local(crate::now_ms() + DEFAULT_DEADLINE_MS),
        time_box_minutes,
        can_email,
        send_email: can_email,
        ..NewAssignmentView::default()
    };
    Ok(render(
        page_meta(&state, Some(&signed_in), "Invite a candidate", None),
        move || view! { <NewAssignmentPage vm=vm /> },
    )
    .into_response())
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
    #[serde(default)]
    results: String,
    #[serde(default)]
    max_submissions: String,
    /// "on" when the link is to be emailed.
    #[serde(default)]
    send_email: String,
    /// "on" for blind review.
    #[serde(default)]
    blind_review: String,
}

/// The session key holding an invite link until its page shows it once.
fn shown_once_key(id: &str) -> String {
    format!("invite_url:{id}")
}

async fn create(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Form(f): Form<InviteForm>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Author)?;
    signed_in.verify_csrf(Some(&f.csrf)).await?;
    let policy = (|| -> Result<(crate::db::ResultsRelease, i64), String> {
        let results = if f.results.trim().is_empty() {
            Default::default()
        } else {
            crate::db::ResultsRelease::parse(&f.results)?
        };
        let max = f.max_submissions.trim();
        let max = if max.is_empty() {
            None
        } else {
            Some(
                max.parse::<i64>()
                    .map_err(|_| format!("submissions accepted {max:?} is not a whole number"))?,
            )
        };
        let max = invites::check_max_submissions(max).map_err(|e| e.public_message())?;
        Ok((results, max))
    })();
    let parsed = (|| -> Result<(i64, Option<i64>), String> {
        let deadline = parse_datetime_local(&f.deadline).ok_or_else(|| {
            format!("deadline {:?} is not a date and time (YYYY-MM-DDTHH:MM, UTC)", f.deadline)
        })?;
        let tb = f.time_box_minutes.trim();
        let time_box = if tb.is_empty() {
            None
        } else {
            let m: i64 = tb
                .parse()
                .map_err(|_| format!("time box {tb:?} is not a whole number of minutes"))?;
            Some(m.checked_mul(60).ok_or("the time box is too long")?)
        };
        Ok((deadline, time_box))
    })();
    let result = match parsed.and_then(|p| policy.clone().map(|q| (p, q))) {
        Ok(((deadline, time_box_secs), _)) => {
            invites::create(
                &state,
                Some(signed_in.user.id),
                Invite {
                    slug: &f.packet,
                    candidate_name: &f.candidate_name,
                    email: &f.email,
                    deadline: Some(deadline),
                    time_box_secs,
                },
            )
            .await
        }
        Err(e) => Err(AppError::BadRequest(e)),
    };
    match result {
        Ok(invited) => {
            let id = invited.assignment.id.clone();
            let (results, max_submissions) = policy.map_err(AppError::BadRequest)?;
            state.db.set_assignment_policy(&id, results, max_submissions).await?;
            if f.blind_review == "on" {
                state.db.set_blind_review(&id, true).await?;
            }
            if f.send_email == "on" {
                let a = state
                    .db
                    .assignment_by_id(&id)
                    .await?
                    .ok_or_else(|| AppError::NotFound(format!("assignment {id:?}")))?;
                let outcome =
                    email_invite(&state, &format!("user:{}", signed_in.user.id), &a, &invited.url)
                        .await?;
                put_mailed(&signed_in.session, &id, outcome).await?;
            }
            crate::web::session::put_shown_once(
                &signed_in.session,
                &shown_once_key(&id),
                invited.url,
            )
            .await?;
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
                results: f.results,
                max_submissions: f.max_submissions,
                error: Some(message),
                can_email: crate::mail::configured(&state.config),
                send_email: f.send_email == "on",
                blind_review: f.blind_review == "on",
            };
            let page = render(
                page_meta(&state, Some(&signed_in), "Invite a candidate", None),
                move || view! { <NewAssignmentPage vm=vm /> },
            );
            Ok((StatusCode::BAD_REQUEST, page).into_response())
        }
        Err(e) => Err(e),
    }
}

async fn invited(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Author)?;
    let a = state
        .db
        .assignment_by_id(&id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("assignment {id:?}")))?;
    let url =
        crate::web::session::take_shown_once(&signed_in.session, &shown_once_key(&id)).await?;
    let mailed = signed_in.session.remove::<(bool, String)>(&mailed_key(&id)).await.ok().flatten();
    let vm = InvitedView {
        assignment_id: a.id,
        candidate: a.candidate_name,
        email: a.email,
        slug: a.slug,
        url,
        csrf: signed_in.csrf.clone(),
        mailed,
        can_email: crate::mail::configured(&state.config),
    };
    Ok(render(
        page_meta(&state, Some(&signed_in), "Invite link", None),
        move || view! { <InvitedPage vm=vm /> },
    )
    .into_response())
}

#[derive(Deserialize)]
struct ReissueForm {
    #[serde(default)]
    csrf: String,
    /// "yes": the author confirmed that the current link stops working.
    #[serde(default)]
    confirm: String,
    #[serde(default)]
    send_email: String,
}

async fn reissue(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    Form(f): Form<ReissueForm>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Author)?;
    signed_in.verify_csrf(Some(&f.csrf)).await?;
    let a = state
        .db
        .assignment_by_id(&id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("assignment {id:?}")))?;
    if f.confirm != "yes" {
        return Err(AppError::BadRequest(
            "reissuing stops the current link: tick \"Yes, stop the current link\" to confirm"
                .into(),
        ));
    }
    let token = random_token();
    state.db.reissue_token(&a.id, &token_hash(&token)).await?;
    // The model key is derived from the link, so the old link's key dies with
    // it and the new link shows a new key.
    crate::meter::reissue_key(&state, &a, &token).await?;
    state
        .db
        .audit(
            &format!("user:{}", signed_in.user.id),
            "assignment.reissue",
            &format!("assignment:{}", a.id),
            "new link and model key; the old ones stop working",
        )
        .await?;
    let url = format!("{}/c/{token}", state.config.public_url.trim_end_matches('/'));
    if f.send_email == "on" {
        let outcome =
            email_invite(&state, &format!("user:{}", signed_in.user.id), &a, &url).await?;
        put_mailed(&signed_in.session, &a.id, outcome).await?;
    }
    crate::web::session::put_shown_once(&signed_in.session, &shown_once_key(&a.id), url).await?;
    Ok(Redirect::to(&format!("/assignments/{}/invited", a.id)).into_response())
}

/// Revokes the assignment's model key: every later call with it is refused
/// (401) and recorded. Reissuing the link gives the candidate a new key.
async fn revoke_model_key(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    Form(f): Form<CsrfForm>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Author)?;
    signed_in.verify_csrf(Some(&f.csrf)).await?;
    let a = state
        .db
        .assignment_by_id(&id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("assignment {id:?}")))?;
    let revoked = crate::meter::revoke_keys(&state, &a).await?;
    state
        .db
        .audit(
            &format!("user:{}", signed_in.user.id),
            "assignment.model_key.revoke",
            &format!("assignment:{}", a.id),
            &format!("{revoked} key(s) revoked"),
        )
        .await?;
    Ok(Redirect::to(&format!("/assignments/{}", a.id)).into_response())
}
