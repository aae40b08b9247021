//! The grading queue page and its JSON status, and the reviewer's status of
//! one submission.

use app::contract::{JobKind, QueueJob, QueueStatus, SubmissionStatus};
use app::pages::queue::{JobRow, QueuePage, QueueView};
use axum::extract::{Path, State};
use axum::response::Html;
use axum::routing::get;
use leptos::prelude::*;

use crate::db::{Job, Role};
use crate::error::AppError;
use crate::state::AppState;
use crate::web::candidate::{fmt_time, status_json};
use crate::web::session::SignedIn;

pub fn routes() -> crate::routes::Routes {
    crate::routes::Routes::new()
        .route("/queue", get(page))
        .route("/queue/status", get(status))
        .route("/submissions/{id}/status", get(submission_status))
}

/// How many finished jobs the page lists.
const RECENT: i64 = 50;

fn row(j: Job) -> JobRow {
    let subject_href = (j.kind == JobKind::Grade).then(|| format!("/submissions/{}", j.subject));
    JobRow {
        id: j.id,
        kind: j.kind,
        subject: j.subject,
        subject_href,
        label: None,
        state: j.state,
        attempts: j.attempts,
        max_attempts: j.max_attempts,
        lease: j
            .lease_owner
            .map(|o| format!("{o} until {}", j.lease_until.map(fmt_time).unwrap_or_default())),
        last_error: j.last_error,
        created: fmt_time(j.created_at),
    }
}

/// What a job works on, in words: the candidate and packet of a grading
/// (a pseudonym under blind review), the packet version of a self-test.
async fn label(state: &AppState, r: &JobRow) -> Result<Option<String>, AppError> {
    Ok(match r.kind {
        JobKind::Grade => match state.db.submission_by_id(&r.subject).await? {
            Some(s) => state.db.assignment_by_id(&s.assignment_id).await?.map(|a| {
                let who = if a.blind_review {
                    crate::web::review::blind_label(&s.id)
                } else {
                    a.candidate_name.clone()
                };
                let version = a.version.map(|v| format!(" v{v}")).unwrap_or_default();
                format!("{who} · {}{version}", a.slug)
            }),
            None => None,
        },
        JobKind::Check => match r.subject.parse::<i64>().ok() {
            Some(id) => match state.db.version_by_id(id).await? {
                Some(v) => Some(format!(
                    "self-test of {} {}",
                    v.slug,
                    crate::web::library::label_of(state, &v).await?
                )),
                None => None,
            },
            None => None,
        },
        JobKind::Audit => None,
    })
}

async fn labelled(state: &AppState, jobs: Vec<Job>) -> Result<Vec<JobRow>, AppError> {
    let mut out = Vec::with_capacity(jobs.len());
    for j in jobs {
        let mut r = row(j);
        r.label = label(state, &r).await?;
        out.push(r);
    }
    Ok(out)
}

async fn page(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Html<String>, AppError> {
    signed_in.require(Role::Reviewer)?;
    let pending = labelled(&state, state.db.pending_jobs().await?).await?;
    let recent = labelled(
        &state,
        state.db.recent_jobs(RECENT).await?.into_iter().filter(|j| j.state.is_final()).collect(),
    )
    .await?;
    let meta = crate::web::page::meta(&signed_in, "Grading queue");
    let page = QueueView { pending, recent };
    Ok(Html(app::shell::document(meta, move || view! { <QueuePage page=page /> })))
}

async fn status(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<axum::Json<QueueStatus>, AppError> {
    signed_in.require(Role::Reviewer)?;
    let mut jobs = state.db.pending_jobs().await?;
    jobs.extend(state.db.recent_jobs(RECENT).await?.into_iter().filter(|j| j.state.is_final()));
    let jobs = jobs
        .into_iter()
        .map(|j| QueueJob {
            id: j.id,
            kind: j.kind,
            subject: j.subject,
            state: j.state,
            attempts: j.attempts,
            lease_until: j.lease_until,
            last_error: j.last_error,
        })
        .collect();
    Ok(axum::Json(QueueStatus { jobs }))
}

async fn submission_status(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<axum::Json<SubmissionStatus>, AppError> {
    signed_in.require(Role::Reviewer)?;
    let s = state
        .db
        .submission_by_id(&id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("submission {id}")))?;
    Ok(axum::Json(status_json(&s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_page_renders_jobs() {
        let job = JobRow {
            id: 7,
            kind: JobKind::Grade,
            subject: "abc".into(),
            subject_href: Some("/submissions/abc".into()),
            label: None,
            state: app::contract::JobState::Running,
            attempts: 1,
            max_attempts: 3,
            lease: Some("host:1 until 2026-11-29 10:00 UTC".into()),
            last_error: Some("boom <b>".into()),
            created: "2026-11-29 09:59 UTC".into(),
        };
        let page = QueueView { pending: vec![job], recent: vec![] };
        let html = app::shell::document(
            app::shell::PageMeta::default(),
            move || view! { <QueuePage page=page /> },
        );
        assert!(html.contains("/submissions/abc"), "{html}");
        assert!(html.contains("boom &lt;b&gt;"), "{html}");
    }
}
