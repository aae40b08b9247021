//! The reviewer's inbox (`/inbox`, a reviewer's landing page): the newest
//! graded submission of every assignment, split into those waiting for a
//! human score (oldest first) and the recently graded rest (newest first).

use app::contract::SubmissionState;
use app::pages::inbox::{InboxPage, InboxRow, InboxView};
use axum::extract::State;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use grader::score::Status;
use leptos::prelude::*;

use crate::db::Role;
use crate::error::AppError;
use crate::state::AppState;
use crate::web::session::SignedIn;

pub fn routes() -> crate::web::routes::Routes {
    crate::web::routes::Routes::new().route("/inbox", get(inbox))
}

/// Rows listed in each part of the inbox, at most.
pub const WAITING_LISTED: usize = 200;
pub const RECENT_LISTED: usize = 25;

/// A duration in ms as "5 min", "3 h", "2 d".
pub fn age(ms: i64) -> String {
    let mins = ms.max(0) / 60_000;
    match mins {
        0 => "under a minute".into(),
        m if m < 60 => format!("{m} min"),
        m if m < 48 * 60 => format!("{} h", m / 60),
        m => format!("{} d", m / (24 * 60)),
    }
}

async fn inbox(State(state): State<AppState>, signed_in: SignedIn) -> Result<Response, AppError> {
    signed_in.require(Role::Reviewer)?;
    let now = crate::now_ms();
    let titles: std::collections::HashMap<String, String> =
        state.db.list_packets().await?.into_iter().map(|p| (p.slug, p.title)).collect();
    let mut waiting = Vec::new();
    let mut recent = Vec::new();
    for a in state.db.list_assignments(None).await? {
        let Some(s) = state
            .db
            .submissions_of(&a.id)
            .await?
            .into_iter()
            .find(|s| s.state == SubmissionState::Graded)
        else {
            continue;
        };
        let Some(card) = crate::web::review::parse_card(&s)? else { continue };
        let pending = card.scoring.criteria.iter().filter(|c| c.status == Status::Pending).count();
        let graded_at = s.graded_at.unwrap_or(s.received_at);
        let blind =
            crate::web::review::hides_candidate(&state, &a, &s.id, Some(&card), signed_in.user.id)
                .await?;
        let row = InboxRow {
            submission_id: s.id.clone(),
            candidate: if blind {
                crate::web::review::blind_label(&s.id)
            } else {
                a.candidate_name.clone()
            },
            blind,
            slug: a.slug.clone(),
            packet_title: titles.get(&a.slug).cloned().unwrap_or_else(|| a.slug.clone()),
            version: a.version.map(|v| format!("v{v}")).unwrap_or_default(),
            // Under blind review only the day: an exact time can be
            // matched to the person who submitted then.
            age: if blind { "-".into() } else { age(now - graded_at) },
            when: if blind {
                crate::times::utc_day(graded_at)
            } else {
                crate::web::times::utc(graded_at)
            },
            pending,
            decision: card.scoring.decision.clone(),
            score: crate::web::review::score_label(&card),
        };
        if pending > 0 { waiting.push((graded_at, row)) } else { recent.push((graded_at, row)) }
    }
    // Oldest waiting first; under blind review the order within the same
    // packet is a stable pseudo-random one (see `review::blind_order`).
    waiting.sort_by(|(ta, a), (tb, b)| crate::web::review::inbox_order(ta, a, tb, b));
    // Newest first; rows under blind review after them, in their stable
    // pseudo-random order (not the order they were graded in).
    recent.sort_by_cached_key(|(t, r)| {
        if r.blind {
            (1, 0, crate::web::review::blind_key(&r.submission_id))
        } else {
            (0, -*t, String::new())
        }
    });
    let packets: std::collections::BTreeMap<String, String> = waiting
        .iter()
        .chain(&recent)
        .map(|(_, r)| (r.slug.clone(), r.packet_title.clone()))
        .collect();
    let vm = InboxView {
        waiting: waiting.into_iter().take(WAITING_LISTED).map(|(_, r)| r).collect(),
        recent: recent.into_iter().take(RECENT_LISTED).map(|(_, r)| r).collect(),
        packets: packets.into_iter().collect(),
    };
    let meta = crate::web::page::meta(&signed_in, "Inbox");
    Ok(Html(app::shell::document(meta, move || view! { <InboxPage vm=vm /> })).into_response())
}

#[cfg(test)]
mod tests {
    #[test]
    fn ages_read_as_words() {
        for (ms, want) in [
            (0, "under a minute"),
            (5 * 60_000, "5 min"),
            (3 * 3_600_000, "3 h"),
            (3 * 86_400_000, "3 d"),
            (-5, "under a minute"),
        ] {
            assert_eq!(super::age(ms), want);
        }
    }
}
