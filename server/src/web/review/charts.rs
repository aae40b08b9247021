//! The charts and the witness view: the score distribution, the witnessed ledger and timeline.

use app::pages::review::{LedgerCall, LedgerRun, LedgerView};
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use grader::witness::{Witness, format_ms};

use crate::db::Role;
use crate::error::AppError;
use crate::export;
use crate::state::AppState;
use crate::times::span;
use crate::web::session::SignedIn;

use super::*;

pub(super) async fn distribution_svg(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(slug): Path<String>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Reviewer)?;
    state
        .db
        .packet_by_slug(&slug)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("packet {slug:?}")))?;
    let graded = graded_of_packet(&state, &slug).await?;
    let scores: Vec<(f64, String)> = graded
        .iter()
        .filter_map(|(_, _, c)| {
            c.scoring.score.filter(|_| c.scoring.max_score > 0).map(|s| {
                (100.0 * s as f64 / c.scoring.max_score as f64, c.scoring.decision.clone())
            })
        })
        .collect();
    let ranked: Vec<String> = match state.db.latest_published(&slug).await? {
        Some(v) => match manifest_of(&state, &v).await {
            Ok(m) => match m.rubric.aggregate {
                grader::manifest::Aggregate::Sum => {
                    m.bands.iter().map(|b| b.decision.clone()).collect()
                }
                grader::manifest::Aggregate::Separate => {
                    vec![m.rubric.pass_decision.clone(), m.rubric.fail_decision.clone()]
                }
            },
            Err(_) => Vec::new(),
        },
        None => Vec::new(),
    };
    let svg = export::distribution_svg(
        &format!("Scores of {slug} ({} graded)", scores.len()),
        &scores,
        &ranked,
    );
    Ok(([(header::CONTENT_TYPE, "image/svg+xml; charset=utf-8")], svg).into_response())
}

/// The reviewer's view of what the platform witnessed: the runs, the model
/// meter's ledger and the timeline chart.
pub fn ledger_view(w: &Witness) -> LedgerView {
    let red_at = w.first_accepted_red().map(|r| r.at);
    let runs = w
        .runs
        .iter()
        .map(|r| LedgerRun {
            id: r.id,
            kind: r.kind.to_string(),
            at: format_ms(r.at),
            accepted: r.accepted,
            exit: r.exit_code.map(|c| c.to_string()).unwrap_or_else(|| "signal".into()),
            tree_sha256: r.tree_sha256.chars().take(12).collect(),
        })
        .collect();
    let calls = w
        .calls
        .iter()
        .map(|c| LedgerCall {
            id: c.id,
            at: format_ms(c.at),
            since_red: match red_at {
                Some(red) if c.at >= red => format!("+{}", span((c.at - red) / 1000)),
                Some(red) => format!("{} before red", span((red - c.at) / 1000)),
                None => "no red".into(),
            },
            status: c.status,
            refused: c.refused.clone(),
            prompt_tokens: c.prompt_tokens,
            completion_tokens: c.completion_tokens,
            tokens_estimated: c.tokens_estimated,
            request_bytes: c.request_bytes,
            duplicate_of: c.duplicate_of,
        })
        .collect();
    let forwarded: Vec<_> = w.forwarded().collect();
    let tokens: i64 = forwarded.iter().map(|c| c.prompt_tokens + c.completion_tokens).sum();
    let summary = format!(
        "{} witnessed run(s); {} model call(s), {} forwarded and {} refused; {tokens} token(s) forwarded; submitted {}.",
        w.runs.len(),
        w.calls.len(),
        forwarded.len(),
        w.calls.len() - forwarded.len(),
        format_ms(w.submitted_at)
    );
    LedgerView { summary, runs, calls, timeline_svg: timeline_svg(w) }
}

/// The witnessed timeline as an SVG document (`app::charts::timeline_svg`):
/// the red and green runs, each model call (refused ones marked) and the
/// submission on one time axis, every mark titled with its id and time.
pub fn timeline_svg(w: &Witness) -> String {
    use app::charts::{Timeline, TimelineCall, TimelineRun};
    let runs = w
        .runs
        .iter()
        .map(|r| TimelineRun { id: r.id, kind: r.kind.to_string(), at: r.at, accepted: r.accepted })
        .collect();
    let calls = w
        .calls
        .iter()
        .map(|c| TimelineCall {
            id: c.id,
            at: c.at,
            refused: c.refused.is_some(),
            title: match &c.refused {
                Some(why) => {
                    format!("model call {} at {}, refused: {}", c.id, format_ms(c.at), why)
                }
                None => format!(
                    "model call {} at {}, HTTP {}, {} + {} tokens",
                    c.id,
                    format_ms(c.at),
                    c.status,
                    c.prompt_tokens,
                    c.completion_tokens
                ),
            },
        })
        .collect();
    app::charts::timeline_svg(&Timeline {
        runs,
        calls,
        submitted_at: w.submitted_at,
        label: &format_ms,
        span: &span,
    })
}
