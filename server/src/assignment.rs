//! Assignment rules every surface shares (the candidate's pages, witnessed
//! runs, uploads, the meter): finding an assignment by its link token, its
//! time box, and whether it is closed. No HTTP types beyond a status.

use axum::http::StatusCode;

use crate::auth::password::token_hash;
use crate::db::Assignment;
use crate::error::AppError;
use crate::state::AppState;
use crate::times::utc;

/// The assignment behind a link token, or 404 (the same for every unknown
/// token, so links cannot be probed), or 410 for the link of a candidate
/// whose data was erased (only its holder can tell).
pub async fn by_token(state: &AppState, token: &str) -> Result<Assignment, AppError> {
    if token.is_empty() || token.len() > 128 {
        return Err(AppError::NotFound("invite link".into()));
    }
    by_token_hash(state, &token_hash(token))
        .await?
        .ok_or_else(|| AppError::NotFound("invite link".into()))
}

/// The assignment whose link token hashes to `hash`; `None` for a token no
/// link ever had; 410 ([`erased_message`]) for an erased candidate's link.
/// Every surface a link token opens (the pages, uploads, witnessed runs,
/// the API) resolves it here, so a dead link says the same everywhere.
pub async fn by_token_hash(state: &AppState, hash: &str) -> Result<Option<Assignment>, AppError> {
    if let Some(a) = state.db.assignment_by_token_hash(hash).await? {
        return Ok(Some(a));
    }
    match state.db.erasure_by_link(hash).await? {
        Some(e) => Err(AppError::Gone(erased_message(e.at))),
        None => Ok(None),
    }
}

/// What an erased candidate's link says.
pub fn erased_message(at: i64) -> String {
    format!(
        "everything this platform held about you for this assignment (your details, submissions, test runs and model calls) was erased on {}; this link no longer opens anything",
        utc(at)
    )
}

/// The time box in seconds: the assignment's own, else the packet's
/// `time_box_minutes` budget.
pub fn time_box_secs(a: &Assignment, packet_minutes: Option<u64>) -> Option<i64> {
    a.time_box_secs
        .or_else(|| packet_minutes.map(|m| i64::try_from(m).unwrap_or(i64::MAX / 60_000) * 60))
}

/// Why an assignment takes nothing more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Closed {
    /// The deadline (Unix ms) passed.
    Deadline { at: i64 },
    /// The time box of `secs` seconds ended at `ended` (Unix ms).
    TimeBox { secs: i64, ended: i64 },
}

impl Closed {
    pub fn status(&self) -> StatusCode {
        match self {
            Closed::Deadline { .. } => StatusCode::GONE,
            Closed::TimeBox { .. } => StatusCode::FORBIDDEN,
        }
    }

    pub fn message(&self) -> String {
        match self {
            Closed::Deadline { at } => expired_message(*at),
            Closed::TimeBox { secs, ended } => {
                format!(
                    "The time box of {} ended at {}; submissions are closed.",
                    duration(secs * 1000),
                    utc(*ended)
                )
            }
        }
    }
}

/// Whether `a` is closed at `now` (Unix ms), given its time box in seconds.
pub fn closed(a: &Assignment, time_box: Option<i64>, now: i64) -> Option<Closed> {
    if now >= a.deadline {
        return Some(Closed::Deadline { at: a.deadline });
    }
    let (tb, started) = (time_box?, a.started_at?);
    let ended = started.saturating_add(tb.saturating_mul(1000));
    (now >= ended).then_some(Closed::TimeBox { secs: tb, ended })
}

/// What an expired link says.
pub fn expired_message(deadline: i64) -> String {
    format!(
        "The deadline of this assignment passed at {}; the link no longer accepts visits or submissions.",
        utc(deadline)
    )
}

/// A span of milliseconds for people, rounded up to the minute: `45 min`,
/// `2 h 5 min`.
pub fn duration(ms: i64) -> String {
    let mins = (ms.max(0) + 59_999) / 60_000;
    if mins >= 60 { format!("{} h {} min", mins / 60, mins % 60) } else { format!("{mins} min") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assignment(
        deadline: i64,
        started_at: Option<i64>,
        time_box_secs: Option<i64>,
    ) -> Assignment {
        Assignment { deadline, started_at, time_box_secs, ..Assignment::default() }
    }

    #[test]
    fn closes_at_the_deadline_or_the_end_of_the_time_box() {
        let check = |a: &Assignment, tb: Option<i64>, now: i64, expect: Option<Closed>| {
            assert_eq!(closed(a, tb, now), expect, "{now}")
        };
        let open = assignment(10_000_000, None, None);
        check(&open, None, 9_999_999, None);
        check(&open, None, 10_000_000, Some(Closed::Deadline { at: 10_000_000 }));
        check(&open, Some(60), 5_000_000, None);
        let started = assignment(10_000_000, Some(1_000_000), None);
        check(&started, Some(60), 1_059_999, None);
        check(&started, Some(60), 1_060_000, Some(Closed::TimeBox { secs: 60, ended: 1_060_000 }));
        check(&started, Some(i64::MAX), 9_000_000, None);
        assert_eq!(Closed::Deadline { at: 0 }.status(), StatusCode::GONE);
        assert_eq!(Closed::TimeBox { secs: 60, ended: 0 }.status(), StatusCode::FORBIDDEN);
        assert!(
            Closed::TimeBox { secs: 5400, ended: 0 }
                .message()
                .contains("1 h 30 min ended at 1970-01-01 00:00 UTC")
        );
    }

    #[test]
    fn the_assignments_own_time_box_wins() {
        assert_eq!(time_box_secs(&assignment(0, None, Some(600)), Some(90)), Some(600));
        assert_eq!(time_box_secs(&assignment(0, None, None), Some(90)), Some(5400));
        assert_eq!(time_box_secs(&assignment(0, None, None), None), None);
        assert_eq!(duration(0), "0 min");
        assert_eq!(duration(1), "1 min");
        assert_eq!(duration(3_600_000), "1 h 0 min");
    }
}
