//! Inviting a candidate: one function shared by the assignment form and the
//! integration API.

use crate::auth::password::{random_token, token_hash};
use crate::db::{Assignment, NewAssignment};
use crate::error::AppError;
use crate::now_ms;
use crate::state::AppState;

pub struct Invite<'a> {
    pub slug: &'a str,
    pub candidate_name: &'a str,
    pub email: &'a str,
    /// Unix ms; defaults to seven days from now.
    pub deadline: Option<i64>,
    pub time_box_secs: Option<i64>,
}

/// A created assignment, with the link token (shown once; only its hash is kept).
pub struct Invited {
    pub assignment: Assignment,
    pub token: String,
    pub url: String,
}

pub const DEFAULT_DEADLINE_MS: i64 = 7 * 24 * 3600 * 1000;

/// The latest deadline (the end of year 9999, the last RFC 3339 can
/// write): the retention sweep adds days to deadlines, and on Postgres one
/// near `i64::MAX` overflowed that sum and failed the sweep for every
/// assignment.
pub const MAX_DEADLINE_MS: i64 = 253_402_300_799_999;

pub async fn create(
    state: &AppState,
    by: Option<i64>,
    invite: Invite<'_>,
) -> Result<Invited, AppError> {
    let name = invite.candidate_name.trim();
    let email = invite.email.trim();
    if name.is_empty() {
        return Err(AppError::BadRequest("candidate name is empty".into()));
    }
    if name.chars().count() > 200 || name.chars().any(char::is_control) {
        return Err(AppError::BadRequest(
            "the candidate name must be at most 200 characters, with no control characters".into(),
        ));
    }
    if !email.contains('@') || email.len() > 254 || email.chars().any(char::is_control) {
        return Err(AppError::BadRequest(format!("{email:?} is not an email address")));
    }
    let now = now_ms();
    let deadline = invite.deadline.unwrap_or(now + DEFAULT_DEADLINE_MS);
    if deadline <= now {
        return Err(AppError::BadRequest("the deadline is in the past".into()));
    }
    if deadline > MAX_DEADLINE_MS {
        return Err(AppError::BadRequest("the deadline is after the year 9999".into()));
    }
    if let Some(t) = invite.time_box_secs
        && t <= 0
    {
        return Err(AppError::BadRequest("the time box must be positive".into()));
    }
    let version = state.db.latest_published(invite.slug).await?.ok_or_else(|| {
        AppError::BadRequest(format!("packet {:?} has no published version", invite.slug))
    })?;
    let token = random_token();
    let id = random_token()[..16].to_string();
    let seed = (rand::random::<u32>() % 1_000_000).to_string();
    let assignment = state
        .db
        .create_assignment(NewAssignment {
            id: &id,
            packet_version_id: version.id,
            candidate_name: name,
            email,
            deadline,
            time_box_secs: invite.time_box_secs,
            seed: &seed,
            token_hash: &token_hash(&token),
            created_by: by,
        })
        .await?;
    let actor = by.map(|b| format!("user:{b}")).unwrap_or_else(|| "system".into());
    state
        .db
        .audit(
            &actor,
            "assignment.create",
            &format!("assignment:{id}"),
            &format!("{} <{}> on {}", name, email, invite.slug),
        )
        .await?;
    let url = format!("{}/c/{token}", state.config.public_url.trim_end_matches('/'));
    Ok(Invited { assignment, token, url })
}

/// The submission limit asked for (default 3); 1 to 100.
pub fn check_max_submissions(n: Option<i64>) -> Result<i64, AppError> {
    match n {
        None => Ok(crate::db::DEFAULT_MAX_SUBMISSIONS),
        Some(n) if (1..=100).contains(&n) => Ok(n),
        Some(n) => {
            Err(AppError::BadRequest(format!("max_submissions {n} is not between 1 and 100")))
        }
    }
}
