//! The scoring forms: a reviewer's levels for human criteria, and regrade.

use app::contract::{JobKind, SubmissionState};

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use grader::grade::rescore;
use grader::manifest::Mode;
use serde::Deserialize;

use crate::db::Role;
use crate::error::AppError;
use crate::state::AppState;
use crate::web::session::SignedIn;

use super::*;

#[derive(Deserialize, Default)]
pub(super) struct HumanScoreForm {
    #[serde(default)]
    csrf: Option<String>,
    #[serde(default)]
    criterion: String,
    #[serde(default)]
    level: String,
    #[serde(default)]
    reason: String,
}

pub(super) async fn human_score(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    axum::Form(form): axum::Form<HumanScoreForm>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Reviewer)?;
    signed_in.verify_csrf(form.csrf.as_deref()).await?;
    let ctx = context(&state, &id).await?;
    let Some(card) = parse_card(&ctx.submission)? else {
        return Err(AppError::Conflict(format!(
            "submission {id} is {}, not graded; score it once grading has finished",
            ctx.submission.state
        )));
    };
    let manifest = manifest_of(&state, &ctx.version).await?;
    let criterion = form.criterion.trim();
    // The platform-wide veto takes 0 (it stands) or 1 (overridden), and only
    // on a scorecard that has the finding.
    let max = if criterion == grader::tamper::ID {
        if !card.findings.iter().any(|f| f.id == grader::tamper::ID) {
            return Err(AppError::BadRequest(format!(
                "this scorecard has no {criterion:?} finding to override"
            )));
        }
        1
    } else {
        let c = manifest.criterion(criterion).ok_or_else(|| {
            AppError::BadRequest(format!(
                "criterion {criterion:?} is not in the rubric of {}",
                ctx.assignment.slug
            ))
        })?;
        if c.mode == Mode::Auto {
            return Err(AppError::BadRequest(format!(
                "criterion {criterion:?} is scored automatically; only human and auto-override criteria take a level"
            )));
        }
        c.max
    };
    let level: u32 = form.level.trim().parse().map_err(|_| {
        AppError::BadRequest(format!(
            "level {:?} is not a whole number from 0 to {max}",
            form.level
        ))
    })?;
    if level > max {
        return Err(AppError::BadRequest(format!(
            "level {level} is above the maximum {max} of criterion {criterion:?}"
        )));
    }
    let reason = form.reason.trim();
    if reason.is_empty() {
        return Err(AppError::BadRequest(format!(
            "a written reason is required to score {criterion:?}"
        )));
    }
    if reason.len() > 4000 {
        return Err(AppError::BadRequest("the reason is longer than 4000 characters".into()));
    }

    let before = state.db.human_scores(&id).await?.len();
    state.db.add_human_score(&id, criterion, level as i64, reason, signed_in.user.id).await?;
    let human = human_levels(&state, &id).await?;
    let updated = rescore(&manifest, &card, &human);
    let scorecard_json =
        serde_json::to_string(&updated).map_err(|e| AppError::Internal(e.into()))?;
    let receipt_json =
        serde_json::to_string(&updated.receipt).map_err(|e| AppError::Internal(e.into()))?;
    state
        .db
        .update_scorecard(
            &id,
            &scorecard_json,
            &receipt_json,
            &updated.scoring.decision,
            updated.scoring.score.map(f64::from),
        )
        .await?;
    state
        .db
        .audit(
            &format!("user:{}", signed_in.user.id),
            "submission.human_score",
            &format!("submission:{id}"),
            &format!(
                "{criterion} = {level} ({}); decision {} → {}: {reason}",
                signed_in.user.name, card.scoring.decision, updated.scoring.decision
            ),
        )
        .await?;
    let mut data = crate::webhooks::submission_data(&state, &id, &ctx.assignment.id);
    data["criterion"] = serde_json::Value::from(criterion);
    crate::webhooks::emit(&state, crate::webhooks::Event::SubmissionScored, data).await;
    crate::webhooks::released_now(&state, &id, crate::webhooks::Release::Score { before }).await;
    // Back to the criterion just scored, not the top of a long page.
    let anchor = format!("criterion-{}", crate::web::session::urlencode(criterion));
    Ok(Redirect::to(&format!(
        "/submissions/{id}?scored={}#{anchor}",
        crate::web::session::urlencode(criterion)
    ))
    .into_response())
}

#[derive(Deserialize, Default)]
pub(super) struct CsrfForm {
    #[serde(default)]
    csrf: Option<String>,
}

pub(super) async fn regrade(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    axum::Form(form): axum::Form<CsrfForm>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Reviewer)?;
    signed_in.verify_csrf(form.csrf.as_deref()).await?;
    let ctx = context(&state, &id).await?;
    match ctx.submission.state {
        SubmissionState::Queued | SubmissionState::Grading => {
            return Err(AppError::Conflict(format!(
                "submission {id} is already {}; wait for it to finish",
                ctx.submission.state
            )));
        }
        SubmissionState::Refused => {
            return Err(AppError::Conflict(format!(
                "submission {id} was refused at upload; there is nothing to grade"
            )));
        }
        SubmissionState::Graded | SubmissionState::Failed => {}
    }
    state.db.set_submission_state(&id, SubmissionState::Queued, None).await?;
    let job = state.db.enqueue(JobKind::Grade, &id).await?;
    state
        .db
        .audit(
            &format!("user:{}", signed_in.user.id),
            "submission.regrade",
            &format!("submission:{id}"),
            &format!("job {job} on packet version {}", ctx.version.id),
        )
        .await?;
    Ok(Redirect::to(&format!("/submissions/{id}?regrade=1")).into_response())
}
