//! What an ATS (Greenhouse's Assessment Partner API, `web::greenhouse`)
//! learns of a test it sent, and the result callbacks.
//!
//! The ATS never learns more than the hiring team has released: a graded
//! result is `complete` with its score and summary only once the
//! assignment's `results` setting releases it (`immediately`, or
//! `after-review` once a reviewer has saved a score), and under blind
//! review only once a reviewer has scored it, whatever `results` says (the
//! ATS puts the candidate's name beside whatever it is told). With
//! `results = never` it is `complete` with only the link to the scorecard,
//! which asks the hiring team to sign in.

use std::time::Duration;

use app::contract::SubmissionState;
use serde::Serialize;

use crate::db::{AtsInterview, ResultsRelease, Submission};
use crate::error::AppError;
use crate::state::AppState;

/// Greenhouse polls a test for eight weeks; a callback is not tried after.
pub const CALLBACK_WINDOW_MS: i64 = 8 * 7 * 24 * 3600 * 1000;

/// A `test_status` answer, in Greenhouse's shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestStatus {
    /// `complete` once the result is there for the ATS; else what is
    /// happening: invited, started, submitted, grading, refused,
    /// awaiting_review, failed, expired.
    pub partner_status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partner_profile_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partner_score: Option<f64>,
    /// Flat, text values only (Greenhouse shows them as they are); left
    /// out when empty (an erased candidate's).
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

/// Whether a graded submission's score and summary are released to the
/// ATS (see the module's documentation).
pub async fn released(
    state: &AppState,
    results: ResultsRelease,
    blind_review: bool,
    s: &Submission,
) -> Result<bool, AppError> {
    if s.state != SubmissionState::Graded || results == ResultsRelease::Never {
        return Ok(false);
    }
    let reviewed = || async { Ok::<_, AppError>(!state.db.human_scores(&s.id).await?.is_empty()) };
    Ok(match results {
        ResultsRelease::Immediately if !blind_review => true,
        _ => reviewed().await?,
    })
}

/// The status of `interview` as its ATS may see it.
pub async fn status(state: &AppState, interview: &AtsInterview) -> Result<TestStatus, AppError> {
    let base = state.config.public_url.trim_end_matches('/');
    let a = state
        .db
        .assignment_by_id(&interview.assignment_id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("the test {}", interview.id)))?;
    // An erased candidate: the ATS learns that, and nothing else (no link,
    // no packet, not when: the date of an erasure request is itself news
    // about the candidate that the ATS never had).
    if a.erased_at.is_some() {
        return Ok(TestStatus {
            partner_status: "erased".into(),
            partner_profile_url: None,
            partner_score: None,
            metadata: serde_json::Map::new(),
        });
    }
    let submissions = state.db.submissions_of(&a.id).await?;
    // The newest graded submission counts; else the newest of any state.
    let latest = submissions
        .iter()
        .find(|s| s.state == SubmissionState::Graded)
        .or_else(|| submissions.first());
    let mut metadata = serde_json::Map::new();
    metadata.insert("Packet".into(), format!("{} v{}", a.slug, a.version.unwrap_or(0)).into());
    let text = |s: &str| serde_json::Value::String(s.to_string());
    let mut out = TestStatus {
        partner_status: String::new(),
        partner_profile_url: Some(format!("{base}/assignments/{}", a.id)),
        partner_score: None,
        metadata,
    };
    let Some(s) = latest else {
        let time_box = crate::assignment::time_box_secs(&a, None);
        out.partner_status =
            if crate::assignment::closed(&a, time_box, crate::now_ms()).is_some() {
                "expired"
            } else if a.started_at.is_some() {
                "started"
            } else {
                "invited"
            }
            .into();
        return Ok(out);
    };
    out.partner_profile_url = Some(format!("{base}/submissions/{}", s.id));
    out.metadata.insert("Submitted at".into(), text(&crate::times::utc(s.received_at)));
    out.partner_status = match s.state {
        SubmissionState::Queued => "submitted",
        SubmissionState::Grading => "grading",
        SubmissionState::Refused => "refused",
        SubmissionState::Failed => "failed",
        SubmissionState::Graded => "graded",
    }
    .into();
    if s.state != SubmissionState::Graded {
        return Ok(out);
    }
    if let Some(at) = s.graded_at {
        out.metadata.insert("Graded at".into(), text(&crate::times::utc(at)));
    }
    if released(state, a.results, a.blind_review, s).await? {
        out.partner_status = "complete".into();
        out.partner_score = s.score;
        let max = s
            .scorecard_json
            .as_deref()
            .and_then(|c| serde_json::from_str::<serde_json::Value>(c).ok())
            .and_then(|c| c["scoring"]["max_score"].as_u64());
        let score = match (s.score, max) {
            (Some(x), Some(m)) => format!("{x} of {m}"),
            (Some(x), None) => x.to_string(),
            (None, _) => "pending".into(),
        };
        let decision = s.decision.clone().unwrap_or_else(|| "pending".into());
        out.metadata.insert("Decision".into(), text(&decision));
        out.metadata.insert("Score".into(), text(&score));
        let receipt = s
            .receipt_json
            .as_deref()
            .and_then(|r| serde_json::from_str::<serde_json::Value>(r).ok());
        if let Some(d) = receipt.as_ref().and_then(|r| r["digest"].as_str()) {
            out.metadata.insert("Receipt digest".into(), text(d));
        }
        out.metadata.insert(
            "Summary".into(),
            text(&format!("Decision {decision}, score {score}; the scorecard has the evidence.")),
        );
    } else if a.results == ResultsRelease::Never {
        out.partner_status = "complete".into();
        out.metadata.insert(
            "Result".into(),
            text("kept in Gatehouse (not released to the ATS): open the scorecard"),
        );
    } else {
        out.partner_status = "awaiting_review".into();
    }
    Ok(out)
}

/// Calls back, once, every test whose result is complete and whose ATS
/// gave a callback URL: a `PATCH` of that URL with the interview's id and
/// status, after which Greenhouse asks `test_status`. A failed call is
/// kept (with its error) and tried again on the next round.
pub async fn run_callbacks(state: &AppState, http: &reqwest::Client) -> Result<usize, AppError> {
    let now = crate::now_ms();
    let mut done = 0;
    for interview in state.db.pending_ats_callbacks(now - CALLBACK_WINDOW_MS).await? {
        let Some(url) = interview.callback_url.as_deref() else { continue };
        let status = status(state, &interview).await?;
        if status.partner_status != "complete" {
            continue;
        }
        let body = serde_json::json!({
            "partner_interview_id": interview.id,
            "partner_status": status.partner_status,
        });
        let error = match http
            .patch(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => None,
            Ok(r) => Some(format!("the callback answered {}", r.status())),
            Err(e) => Some(format!("the callback could not be reached: {e}")),
        };
        if let Some(e) = &error {
            tracing::warn!(interview = %interview.id, "ATS callback failed: {e}");
        } else {
            done += 1;
        }
        state.db.finish_ats_callback(&interview.id, crate::now_ms(), error.as_deref()).await?;
    }
    Ok(done)
}

/// Runs [`run_callbacks`] every `ats_callback_secs` until the app stops.
pub fn spawn_callbacks(state: AppState) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        let every = Duration::from_secs(state.config.ats_callback_secs.max(1));
        loop {
            if let Err(e) = run_callbacks(&state, &http).await {
                tracing::warn!("ATS callbacks: {e}");
            }
            tokio::time::sleep(every).await;
        }
    })
}
