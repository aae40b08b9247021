//! The exports: the receipt (page, JSON, HTML), scorecard and transcript JSON, a packet's CSV.

use app::contract::SubmissionState;

use app::pages::review::{ReceiptPage, ReceiptView};
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use grader::grade::Scorecard;
use leptos::prelude::*;
use serde::Deserialize;

use crate::db::Role;
use crate::error::AppError;
use crate::export;
use crate::state::AppState;
use crate::web::session::SignedIn;

use super::*;

/// The stored scorecard JSON with the submission's line-level provenance
/// (per file) under `provenance`.
pub(super) async fn scorecard_json(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Reviewer)?;
    let ctx = context(&state, &id).await?;
    let text = ctx.submission.scorecard_json.as_deref().ok_or_else(|| {
        AppError::NotFound(format!(
            "a scorecard for submission {id} (it is {})",
            ctx.submission.state
        ))
    })?;
    let mut card: serde_json::Value =
        serde_json::from_str(text).map_err(|e| AppError::Internal(e.into()))?;
    let provenance = submission_provenance(&state, &id).await?;
    card["provenance"] =
        serde_json::to_value(provenance).map_err(|e| AppError::Internal(e.into()))?;
    Ok(axum::Json(card).into_response())
}

/// The stored receipt JSON of a graded submission.
fn stored_receipt(ctx: &Context) -> Result<String, AppError> {
    match (ctx.submission.state, &ctx.submission.receipt_json) {
        (SubmissionState::Graded, Some(r)) => Ok(r.clone()),
        (s, _) => Err(AppError::NotFound(format!(
            "a receipt for submission {} (it is {s})",
            ctx.submission.id
        ))),
    }
}

pub(super) async fn receipt_page(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Reviewer)?;
    let mut ctx = context(&state, &id).await?;
    stored_receipt(&ctx)?;
    let card = parse_card(&ctx.submission)?
        .ok_or_else(|| AppError::NotFound(format!("a scorecard for submission {id}")))?;
    blind_for(&state, &mut ctx, Some(&card), signed_in.user.id).await?;
    // The same document as the standalone receipt, minus its title and the
    // JSON (a link away): askama escaped every value in it.
    let doc = standalone_receipt(&state, &ctx, &card, "", false).await?;
    let body = doc.split_once("<h1>Gatehouse receipt</h1>").map(|(_, b)| b).unwrap_or(&doc);
    let body = body.split_once("<h2>Receipt JSON</h2>").map(|(b, _)| b).unwrap_or(body).to_string();
    let view = ReceiptView {
        id: id.clone(),
        candidate: ctx.assignment.candidate_name.clone(),
        slug: ctx.assignment.slug.clone(),
        version: version_label(&ctx.assignment),
        decision: card.receipt.scoring.decision.clone(),
        score: score_label(&card),
        digest: card.receipt.digest.clone(),
        archive_sha256: card.receipt.submission.archive_sha256.clone(),
        json: String::new(),
        body_html: body,
    };
    let meta = meta(&signed_in, format!("Receipt {}", ctx.assignment.candidate_name), None);
    Ok(Html(app::shell::document(meta, move || view! { <ReceiptPage view=view /> }))
        .into_response())
}

/// The standalone HTML receipt of a graded submission, with `json`; with
/// `with_text` each listed call's prompt and answer too.
async fn standalone_receipt(
    state: &AppState,
    ctx: &Context,
    card: &Scorecard,
    json: &str,
    with_text: bool,
) -> Result<String, AppError> {
    let texts = if with_text {
        crate::transcript::load(state, &ctx.assignment.id, Some(ctx.submission.received_at)).await?
    } else {
        Vec::new()
    };
    let transcript: Vec<export::TranscriptRow> = card
        .receipt
        .transcript
        .iter()
        .map(|t| export::TranscriptRow {
            call: t.call,
            request_sha256: t.request_sha256.clone().unwrap_or_else(|| "not kept".into()),
            response_sha256: t.response_sha256.clone().unwrap_or_else(|| "not kept".into()),
            cut: t.cut.clone().unwrap_or_default(),
            text: texts
                .iter()
                .find(|c| c.call.id == t.call)
                .map(export::transcript_text)
                .unwrap_or_default(),
        })
        .collect();
    let starter = starter_of(state, ctx).await;
    let view = card_view_model(card, starter.as_ref().map(|s| &s.tree));
    let version = version_label(&ctx.assignment);
    let received = when(ctx.submission.received_at);
    // Receipts written before they named the published version record the
    // packet.toml version; they are kept as they are (their digest covers
    // it) and the page says so.
    let recorded = if card.receipt.packet.version == version {
        ""
    } else {
        card.receipt.packet.version.as_str()
    };
    export::receipt_html(&export::ReceiptHtml {
        candidate: &ctx.assignment.candidate_name,
        slug: &ctx.assignment.slug,
        version: &version,
        recorded_version: recorded,
        submission_id: &ctx.submission.id,
        received_at: &received,
        card: &view,
        json,
        transcript: &transcript,
        with_text,
    })
    .map_err(AppError::Internal)
}

pub(super) async fn receipt_json(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Reviewer)?;
    let ctx = context(&state, &id).await?;
    let json = stored_receipt(&ctx)?;
    Ok(([(header::CONTENT_TYPE, "application/json")], json).into_response())
}

#[derive(Deserialize, Default)]
pub(super) struct ReceiptQuery {
    /// `?transcript=1`: include each call's prompt and answer.
    #[serde(default)]
    transcript: Option<String>,
}

pub(super) async fn receipt_html(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    Query(q): Query<ReceiptQuery>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Reviewer)?;
    let mut ctx = context(&state, &id).await?;
    let json = stored_receipt(&ctx)?;
    let card = parse_card(&ctx.submission)?
        .ok_or_else(|| AppError::NotFound(format!("a scorecard for submission {id}")))?;
    blind_for(&state, &mut ctx, Some(&card), signed_in.user.id).await?;
    let pretty = serde_json::from_str::<serde_json::Value>(&json)
        .and_then(|v| serde_json::to_string_pretty(&v))
        .unwrap_or(json);
    let with_text = q.transcript.as_deref().is_some_and(|v| v != "0" && !v.is_empty());
    let html = standalone_receipt(&state, &ctx, &card, &pretty, with_text).await?;
    let disposition = format!(
        "attachment; filename=\"gatehouse-receipt-{}.html\"",
        id.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_")
    );
    Ok((
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8".to_string()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        html,
    )
        .into_response())
}

/// The JSON export of the assignment's transcript up to this submission.
pub(super) async fn transcript_json(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Reviewer)?;
    let ctx = context(&state, &id).await?;
    let calls =
        crate::transcript::load(&state, &ctx.assignment.id, Some(ctx.submission.received_at))
            .await?;
    let mut out = crate::transcript::export_json(&ctx.assignment.id, &calls);
    out["submission"] = serde_json::json!(ctx.submission.id);
    Ok(axum::Json(out).into_response())
}

pub(super) async fn scorecards_csv(
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
    let submissions = state.db.latest_submissions_for_packet(&slug).await?;
    let mut loaded = Vec::new();
    for s in submissions {
        let mut a = state.db.assignment_by_id(&s.assignment_id).await?;
        let card = parse_card(&s)?;
        // Blind review holds for exports as for the pages: the pseudonym and
        // no email until this reviewer's scores are saved.
        if let Some(a) = a.as_mut()
            && hides_candidate(&state, a, &s.id, card.as_ref(), signed_in.user.id).await?
        {
            a.candidate_name = blind_label(&s.id);
            a.email = String::new();
        }
        loaded.push((s, a, card));
    }
    let rows: Vec<export::CsvRow<'_>> = loaded
        .iter()
        .map(|(s, a, card)| export::CsvRow {
            assignment_id: &s.assignment_id,
            candidate: a.as_ref().map_or("", |a| a.candidate_name.as_str()),
            email: a.as_ref().map_or("", |a| a.email.as_str()),
            submission_id: &s.id,
            state: s.state.as_str(),
            card: card.as_ref(),
            erased: None,
        })
        .collect();
    let erasures = state.db.erasures(Some(&slug), i64::MAX).await?;
    let mut rows = rows;
    rows.extend(erasures.iter().map(|e| export::CsvRow {
        assignment_id: &e.assignment_id,
        candidate: "erased",
        email: "",
        submission_id: "",
        state: "erased",
        card: None,
        erased: Some((e.final_decision.as_deref(), e.final_score)),
    }));
    let csv = export::scorecards_csv(&rows).map_err(AppError::Internal)?;
    let disposition = format!(
        "attachment; filename=\"{}-scorecards.csv\"",
        slug.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_")
    );
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        csv,
    )
        .into_response())
}
