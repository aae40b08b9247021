//! The reviewer's side: an assignment and its submissions, the scorecard in
//! evidence order with human scoring and regrade, the receipt and its
//! exports (JSON, standalone HTML, a packet's CSV), the side-by-side
//! comparison and the score distribution chart.
//!
//! Evidence order: the packet's gates first, then the findings (with what
//! could not be evaluated), the criteria with their scoring forms, every
//! command run, frozen files and mutation, the environment, the digests and
//! the submission's files against the starter last. Manifests have no key
//! prescribing another order today; when one is added, `card_view_model` is the
//! place to follow it.

use app::contract::{JobKind, SubmissionState};
use std::collections::BTreeMap;
use std::path::PathBuf;

use app::pages::review::{
    AssignmentPage, AssignmentView, CardView, CompareColumn, ComparePage, CompareView,
    CriterionView, ExcerptSide, FileChange, FindingView, GateView, HistoryRow, HumanForm,
    LedgerCall, LedgerRun, LedgerView, ReceiptPage, ReceiptView, RunView, ScorecardPage,
    ScorecardView, SimilarExcerpt, SimilarPair, SubmissionLine, ToolView,
};
use app::shell::PageMeta;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use grader::grade::{Scorecard, rescore};
use grader::manifest::{Manifest, Mode};
use grader::score::{HumanScore, Status};
use grader::tree::{Tree, list_files};
use grader::witness::{Witness, format_ms};
use leptos::prelude::*;
use serde::Deserialize;

use crate::db::{Assignment, PacketVersion, Role, Submission};
use crate::error::AppError;
use crate::export;
use crate::library::version_dir;
use crate::state::AppState;
use crate::web::session::SignedIn;

pub fn routes() -> crate::routes::Routes {
    crate::routes::Routes::new()
        .route("/assignments/{id}", get(assignment_page))
        .route("/submissions/{id}", get(scorecard_page))
        .route("/submissions/{id}/human", post(human_score))
        .route("/submissions/{id}/regrade", post(regrade))
        .route("/submissions/{id}/receipt", get(receipt_page))
        .route("/submissions/{id}/receipt.json", get(receipt_json))
        .route("/submissions/{id}/receipt.html", get(receipt_html))
        .route("/submissions/{id}/transcript.json", get(transcript_json))
        .route("/submissions/{id}/scorecard.json", get(scorecard_json))
        .route("/packets/{slug}/scorecards.csv", get(scorecards_csv))
        .route("/packets/{slug}/compare", get(compare_page))
        .route("/packets/{slug}/distribution.svg", get(distribution_svg))
}

/// The page frame for a signed-in user, with the session's flash notice.
fn meta(signed_in: &SignedIn, title: impl Into<String>, flash: Option<String>) -> PageMeta {
    PageMeta { flash, ..crate::web::page::meta(signed_in, title) }
}

/// A stored time (Unix ms) as `YYYY-MM-DD HH:MM UTC`.
pub fn when(ms: i64) -> String {
    crate::times::utc(ms)
}

/// A submission with its assignment and packet version.
struct Context {
    submission: Submission,
    assignment: Assignment,
    version: PacketVersion,
}

async fn context(state: &AppState, id: &str) -> Result<Context, AppError> {
    let submission = state
        .db
        .submission_by_id(id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("submission {id:?}")))?;
    let assignment =
        state.db.assignment_by_id(&submission.assignment_id).await?.ok_or_else(|| {
            AppError::NotFound(format!(
                "assignment {:?} of submission {id:?}",
                submission.assignment_id
            ))
        })?;
    let version = state.db.version_by_id(assignment.packet_version_id).await?.ok_or_else(|| {
        AppError::NotFound(format!(
            "packet version {} of assignment {:?}",
            assignment.packet_version_id, assignment.id
        ))
    })?;
    Ok(Context { submission, assignment, version })
}

/// Reads a packet version's manifest (only `packet.toml`; the packet's
/// files are not hashed again).
async fn manifest_of(state: &AppState, version: &PacketVersion) -> Result<Manifest, AppError> {
    let path = version_dir(state, &version.dir).join("packet.toml");
    let src = tokio::fs::read_to_string(&path)
        .await
        .map_err(|e| AppError::Internal(anyhow::anyhow!("reading {}: {e}", path.display())))?;
    Manifest::parse("packet.toml", &src)
        .map_err(|e| AppError::Internal(anyhow::anyhow!("packet version {}: {e}", version.id)))
}

/// The starter's files of a packet version, for the submission's diff.
async fn starter_of(state: &AppState, version: &PacketVersion) -> Option<Tree> {
    let dir: PathBuf = version_dir(state, &version.dir).join("starter");
    tokio::task::spawn_blocking(move || list_files(&dir).ok()).await.ok().flatten()
}

pub(crate) fn parse_card(s: &Submission) -> Result<Option<Scorecard>, AppError> {
    match (s.state, &s.scorecard_json) {
        (SubmissionState::Graded, Some(json)) => {
            serde_json::from_str(json).map(Some).map_err(|e| {
                AppError::Internal(anyhow::anyhow!(
                    "submission {}: stored scorecard does not parse: {e}",
                    s.id
                ))
            })
        }
        _ => Ok(None),
    }
}

/// Under blind review, the name a reviewer sees for a candidate: stable per
/// submission, derived from its id, carrying nothing of the person.
pub fn blind_label(submission_id: &str) -> String {
    format!("Candidate {}", blind_key(submission_id)[..6].to_ascii_uppercase())
}

/// The stable pseudo-random sort key of a submission under blind review.
pub fn blind_key(submission_id: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(format!("gatehouse-blind-review:{submission_id}").as_bytes()))
}

/// Whether `viewer` sees a pseudonym for the candidate of `a` on the
/// submission `submission_id` (graded as `card`): blind review is on and
/// the viewer has not yet saved a score of their own for every
/// human-scored criterion (for any one, when no criterion is human-only).
pub(crate) async fn hides_candidate(
    state: &AppState,
    a: &Assignment,
    submission_id: &str,
    card: Option<&Scorecard>,
    viewer: i64,
) -> Result<bool, AppError> {
    if !a.blind_review {
        return Ok(false);
    }
    let scores = state.db.human_scores(submission_id).await?;
    let mine: std::collections::BTreeSet<&str> =
        scores.iter().filter(|h| h.reviewer_id == viewer).map(|h| h.criterion.as_str()).collect();
    let required: Vec<&str> = card
        .map(|c| {
            c.scoring
                .criteria
                .iter()
                .filter(|c| c.mode == Mode::Human)
                .map(|c| c.id.as_str())
                .collect()
        })
        .unwrap_or_default();
    let revealed = if required.is_empty() {
        !mine.is_empty()
    } else {
        required.iter().all(|c| mine.contains(c))
    };
    Ok(!revealed)
}

/// Replaces the candidate's name and email in `ctx` by the pseudonym when
/// the viewer must not see them yet; returns whether it did.
async fn blind_for(
    state: &AppState,
    ctx: &mut Context,
    card: Option<&Scorecard>,
    viewer: i64,
) -> Result<bool, AppError> {
    let hide = hides_candidate(state, &ctx.assignment, &ctx.submission.id, card, viewer).await?;
    if hide {
        ctx.assignment.candidate_name = blind_label(&ctx.submission.id);
        ctx.assignment.email = "hidden under blind review".into();
    }
    Ok(hide)
}

/// The inbox's order of two waiting rows (graded at `ta` and `tb`): rows
/// under blind review after the others, in their stable pseudo-random
/// order; the others oldest first.
pub fn inbox_order(
    ta: &i64,
    a: &app::pages::inbox::InboxRow,
    tb: &i64,
    b: &app::pages::inbox::InboxRow,
) -> std::cmp::Ordering {
    let key = |t: &i64, r: &app::pages::inbox::InboxRow| {
        if r.blind { (1, blind_key(&r.submission_id)) } else { (0, format!("{:020}", t)) }
    };
    key(ta, a).cmp(&key(tb, b))
}

/// The assignment's packet version as every page and receipt says it: "v2"
/// (assignments are only made of published versions).
fn version_label(a: &Assignment) -> String {
    a.version.map_or("draft".to_string(), |v| format!("v{v}"))
}

pub(crate) fn score_label(card: &Scorecard) -> String {
    match card.scoring.score {
        Some(s) => format!("{s} / {}", card.scoring.max_score),
        None => "signals scored separately".into(),
    }
}

/// The latest reviewer level per criterion, from the append-only history.
/// Grading workers pass these as `GradeOptions::human` so a regrade keeps
/// the reviewers' levels.
pub async fn human_levels(
    state: &AppState,
    submission_id: &str,
) -> Result<BTreeMap<String, HumanScore>, AppError> {
    let mut out = BTreeMap::new();
    for row in state.db.human_scores(submission_id).await? {
        out.insert(
            row.criterion.clone(),
            HumanScore {
                level: row.level.max(0) as u32,
                reason: row.reason,
                by: row.reviewer_name,
            },
        );
    }
    Ok(out)
}

/// The scorecard as the pages and the standalone receipt show it.
pub fn card_view_model(card: &Scorecard, starter: Option<&Tree>) -> CardView {
    let r = &card.receipt;
    let gates = card
        .scoring
        .gates
        .iter()
        .map(|g| GateView {
            label: g.gate.clone(),
            result: g.result.clone(),
            message: g.message.clone(),
        })
        .collect();
    let findings = card
        .findings
        .iter()
        .map(|f| FindingView {
            id: f.id.clone(),
            title: f.title.clone(),
            provenance: serde_json::to_value(f.provenance)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            evidence: f.evidence.clone(),
        })
        .collect();
    let criteria = card
        .scoring
        .criteria
        .iter()
        .map(|c| CriterionView {
            id: c.id.clone(),
            title: c.title.clone(),
            mode: mode_word(c.mode).into(),
            level: match (c.status, c.level) {
                (Status::Pending, _) | (_, None) => "pending".into(),
                (Status::AfterGate, Some(l)) => format!("{l} (not counted)"),
                (_, Some(l)) => l.to_string(),
            },
            max: c.max,
            weight: c.weight,
            status: match c.status {
                Status::Scored => "scored",
                Status::Pending => "pending",
                Status::AfterGate => "after-gate",
            }
            .into(),
            basis: c.basis.clone(),
            level_text: c.level_text.clone(),
        })
        .collect();
    let runs = r
        .runs
        .iter()
        .map(|run| {
            let mut outcome = match run.exit {
                grader::sandbox::Exit::Code(c) => format!("exit {c}"),
                grader::sandbox::Exit::Signal(s) => format!("killed by signal {s}"),
            };
            if run.timed_out {
                outcome.push_str(", timed out");
            }
            let limit_hit = run.limit_hit.map(|l| {
                serde_json::to_value(l)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default()
            });
            if let Some(l) = &limit_hit {
                outcome.push_str(&format!(", {l} limit hit"));
            }
            let ok = matches!(run.exit, grader::sandbox::Exit::Code(0)) && !run.timed_out;
            let duration = r
                .timings
                .runs
                .iter()
                .find(|t| t.id == run.id)
                .map(|t| format!("{:.2} s", t.wall_ms / 1000.0))
                .unwrap_or_default();
            let (tests, failed_tests) = match &run.tests {
                Some(t) => {
                    let counted: Vec<_> = t
                        .iter()
                        .filter(|t| t.status != grader::evidence::TestStatus::Skipped)
                        .collect();
                    let passed = counted
                        .iter()
                        .filter(|t| t.status == grader::evidence::TestStatus::Passed)
                        .count();
                    let failed = counted
                        .iter()
                        .filter(|t| t.status != grader::evidence::TestStatus::Passed)
                        .map(|t| format!("{}::{}: {}", t.classname, t.name, t.status.word()))
                        .collect();
                    (Some(format!("{passed} / {} passed", counted.len())), failed)
                }
                None => (None, Vec::new()),
            };
            RunView {
                id: run.id.clone(),
                command: run.command.clone(),
                outcome,
                status: if ok { "ok" } else { "failed" }.into(),
                duration,
                timed_out: run.timed_out,
                limit_hit,
                leftovers: run.leftovers.clone(),
                tests,
                failed_tests,
                stdout_tail: run.stdout_tail.clone(),
                stderr_tail: run.stderr_tail.clone(),
            }
        })
        .collect();
    let frozen = r
        .frozen
        .iter()
        .map(|f| FileChange {
            path: f.path.clone(),
            change: if f.changed {
                "changed".into()
            } else if f.submitted_sha256.is_none() {
                "not-submitted".into()
            } else {
                "unchanged".into()
            },
            size: 0,
            sha256: f.submitted_sha256.clone().unwrap_or_else(|| f.starter_sha256.clone()),
            diff: Vec::new(),
            diff_note: None,
            model_calls: Vec::new(),
        })
        .collect();
    let mutation = r.mutation.as_ref().map(|m| {
        let survived: Vec<&str> =
            m.mutants.iter().filter(|x| !x.killed).map(|x| x.id.as_str()).collect();
        let mut s =
            format!("the candidate's tests killed {} of {} mutants", m.killed(), m.mutants.len());
        if !survived.is_empty() {
            s.push_str(&format!("; survived: {}", survived.join(", ")));
        }
        s
    });
    let tools = card
        .environment
        .tools
        .iter()
        .map(|t| ToolView {
            name: t.name.clone(),
            pin: t.pin.clone().unwrap_or_else(|| "-".into()),
            probed: t.probed.clone().unwrap_or_else(|| "none".into()),
            matches: t.matches,
        })
        .collect();
    let frozen_paths: Vec<&String> = r.frozen.iter().map(|f| &f.path).collect();
    let files = r
        .submission
        .files
        .iter()
        .map(|f| {
            let change = match starter.map(|s| s.get(&f.path)) {
                None => "submitted",
                Some(None) => "added",
                Some(Some((_, sha))) if sha == &f.sha256 => "unchanged",
                Some(Some(_)) if frozen_paths.contains(&&f.path) => "frozen-changed",
                Some(Some(_)) => "changed",
            };
            FileChange {
                path: f.path.clone(),
                change: change.into(),
                size: f.size,
                sha256: f.sha256.clone(),
                diff: Vec::new(),
                diff_note: None,
                model_calls: Vec::new(),
            }
        })
        // Files the platform put in the starter (the pin file, the brief)
        // were handed back but set aside: listed, never diffed or graded.
        .chain(r.submission.platform_files.iter().map(|f| FileChange {
            path: f.path.clone(),
            change: "platform".into(),
            size: f.size,
            sha256: f.sha256.clone(),
            diff: Vec::new(),
            diff_note: None,
            model_calls: Vec::new(),
        }))
        .collect();
    CardView {
        model_share: None,
        decision: card.scoring.decision.clone(),
        score: score_label(card),
        gates,
        caps: card.scoring.caps.clone(),
        pending: card.scoring.pending.clone(),
        findings,
        unevaluated: card
            .unevaluated
            .iter()
            .chain(&card.skipped)
            .map(|u| (u.id.clone(), u.reason.clone()))
            .collect(),
        not_witnessed: card
            .not_witnessed
            .iter()
            .map(|u| (u.id.clone(), u.reason.clone()))
            .collect(),
        criteria,
        runs,
        frozen,
        mutation,
        tools,
        mismatches: card.environment.mismatches.clone(),
        // Evidence kept without Landlock is listed with the fallback that
        // explains it.
        sandbox_fallbacks: r
            .sandbox
            .fallbacks
            .iter()
            .cloned()
            .chain(r.untrusted_evidence.iter().map(|e| format!("untrusted evidence: {e}")))
            .collect(),
        files,
        normalised: normalised_lines(&r.submission.normalised),
        archive_sha256: r.submission.archive_sha256.clone(),
        workspace_digest: r.submission.workspace_digest.clone(),
        receipt_digest: r.digest.clone(),
        packet_digest: r.packet.digest.clone(),
        witness_sha256: r.witness_sha256.clone(),
    }
}

/// What ingestion normalised, in sentences for the scorecard.
fn normalised_lines(n: &grader::ingest::Normalised) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(top) = &n.unwrapped {
        out.push(format!("the zip held everything in one folder, {top}/, which was unwrapped"));
    }
    if !n.dropped.is_empty() {
        let more = if n.dropped_unlisted > 0 {
            format!(" and {} more", n.dropped_unlisted)
        } else {
            String::new()
        };
        out.push(format!(
            "operating-system metadata left out, never graded: {}{more}",
            n.dropped.join(", ")
        ));
    }
    if !n.backslashes.is_empty() {
        let more = if n.backslashes_unlisted > 0 {
            format!(" and {} more", n.backslashes_unlisted)
        } else {
            String::new()
        };
        out.push(format!(
            "entries written with \\ as the separator, read as /: {}{more}",
            n.backslashes.join(", ")
        ));
    }
    out
}

/// A local file with a submission's stored zip: the blob store's copy,
/// fetched from the database first when it keeps the blobs (a missing or
/// unreadable zip gives the path where it would be, which opens as none).
async fn stored_zip(state: &AppState, sha256: &str) -> PathBuf {
    match state.blobs().local_copy(sha256).await {
        Ok(Some(path)) => path,
        Ok(None) => crate::blobs::blob_path(&state.config.data_dir, sha256),
        Err(e) => {
            tracing::warn!(blob = %sha256, error = %e, "reading a stored zip failed");
            crate::blobs::blob_path(&state.config.data_dir, sha256)
        }
    }
}

/// Largest file shown as a diff.
const DIFF_MAX_BYTES: u64 = 256 * 1024;

/// Most diff lines one scorecard shows, over all files: a submission cannot
/// make a reviewer's page enormous.
const DIFF_MAX_TOTAL_LINES: usize = 20_000;

/// Fills in the line diff of each added or changed text file, reading the
/// submission from its stored zip and the starter from the packet version.
/// Diffs are best effort: a file without one says why.
async fn attach_diffs(
    state: &AppState,
    version: &PacketVersion,
    archive_sha256: &str,
    unwrapped: Option<String>,
    view: &mut CardView,
    index: &crate::provenance::AnswerIndex,
) {
    let index = index.clone();
    let zip_path = stored_zip(state, archive_sha256).await;
    let starter = version_dir(state, &version.dir).join("starter");
    let mut files = std::mem::take(&mut view.files);
    files = tokio::task::spawn_blocking(move || {
        let mut archive = std::fs::File::open(&zip_path).ok().and_then(|f| zip::ZipArchive::new(f).ok());
        let mut shown = 0usize;
        let diffable = files.iter().filter(|f| f.change != "unchanged" && f.change != "platform").count();
        let mut seen = 0usize;
        for f in files.iter_mut().filter(|f| f.change != "unchanged" && f.change != "platform") {
            seen += 1;
            if shown >= DIFF_MAX_TOTAL_LINES {
                f.diff_note = Some(format!(
                    "not shown: this page shows at most {DIFF_MAX_TOTAL_LINES} diff lines ({} more file(s) not shown; the receipt lists every file's digest)",
                    diffable - seen + 1
                ));
                continue;
            }
            if f.size > DIFF_MAX_BYTES {
                f.diff_note = Some(format!("{} bytes: too large to show as a diff", f.size));
                continue;
            }
            let Some(archive) = archive.as_mut() else {
                f.diff_note = Some("the stored zip is not available, so no diff is shown".into());
                continue;
            };
            let submitted = read_entry(archive, &f.path, unwrapped.as_deref());
            let Some(new) = submitted.and_then(|b| String::from_utf8(b).ok()) else {
                f.diff_note = Some("not a text file (or not readable from the stored zip)".into());
                continue;
            };
            let old = std::fs::read(starter.join(&f.path)).ok().and_then(|b| String::from_utf8(b).ok()).unwrap_or_default();
            match export::line_diff(&old, &new, 3) {
                Some(mut d) => {
                    let room = DIFF_MAX_TOTAL_LINES - shown;
                    if d.len() > room {
                        let more = d.len() - room;
                        d.truncate(room);
                        f.diff_note = Some(format!("{more} more diff line(s) not shown"));
                    }
                    shown += d.len();
                    f.model_calls = if index.is_empty() { Vec::new() } else { d.iter().map(|(k, l)| if *k == '+' { index.call_of(l) } else { None }).collect() };
                    f.diff = d;
                }
                None => f.diff_note = Some("too many lines to diff here".into()),
            }
        }
        files
    })
    .await
    .unwrap_or_default();
    view.files = files;
}

/// The provenance of a submission's added and changed lines against the
/// answers in `index`: every diffable text file of the stored zip against
/// the starter's copy (files over the diff size cap are left out).
async fn provenance_of(
    state: &AppState,
    version: &PacketVersion,
    archive_sha256: &str,
    unwrapped: Option<String>,
    files: &[FileChange],
    index: &crate::provenance::AnswerIndex,
) -> crate::provenance::Provenance {
    let zip_path = stored_zip(state, archive_sha256).await;
    let starter = version_dir(state, &version.dir).join("starter");
    let paths: Vec<String> = files
        .iter()
        .filter(|f| f.change != "unchanged" && f.change != "platform" && f.size <= DIFF_MAX_BYTES)
        .map(|f| f.path.clone())
        .collect();
    let index = index.clone();
    let files = tokio::task::spawn_blocking(move || {
        let Some(mut archive) =
            std::fs::File::open(&zip_path).ok().and_then(|f| zip::ZipArchive::new(f).ok())
        else {
            return Vec::new();
        };
        paths
            .iter()
            .filter_map(|path| {
                let new = String::from_utf8(read_entry(&mut archive, path, unwrapped.as_deref())?)
                    .ok()?;
                let old = std::fs::read(starter.join(path))
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .unwrap_or_default();
                Some(crate::provenance::of_file(path, &old, &new, &index))
            })
            .collect()
    })
    .await
    .unwrap_or_default();
    crate::provenance::Provenance::of(files)
}

/// The answers of the assignment's calls up to the submission.
async fn answer_index(
    state: &AppState,
    ctx: &Context,
) -> Result<crate::provenance::AnswerIndex, AppError> {
    let calls =
        crate::transcript::load(state, &ctx.assignment.id, Some(ctx.submission.received_at))
            .await?;
    Ok(crate::provenance::AnswerIndex::of(&calls))
}

/// A graded submission's provenance (None before it is graded).
pub(crate) async fn submission_provenance(
    state: &AppState,
    submission_id: &str,
) -> Result<Option<crate::provenance::Provenance>, AppError> {
    let ctx = context(state, submission_id).await?;
    let Some(card) = parse_card(&ctx.submission)? else { return Ok(None) };
    let starter = starter_of(state, &ctx.version).await;
    let view = card_view_model(&card, starter.as_ref());
    let index = answer_index(state, &ctx).await?;
    Ok(Some(
        provenance_of(
            state,
            &ctx.version,
            &card.receipt.submission.archive_sha256,
            card.receipt.submission.normalised.unwrapped.clone(),
            &view.files,
            &index,
        )
        .await,
    ))
}

/// The stored scorecard JSON with the submission's line-level provenance
/// (per file) under `provenance`.
async fn scorecard_json(
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

/// The submitted file a criterion is about: the first path of the
/// submission named in the criterion's title or levels (e.g. NOTES.md).
pub fn file_named_by<'a>(
    title: &str,
    levels: &[String],
    paths: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    let text = std::iter::once(title)
        .chain(levels.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    let words: Vec<&str> = text
        .split(|c: char| {
            c.is_whitespace() || matches!(c, ',' | ';' | ':' | '(' | ')' | '`' | '"' | '\'')
        })
        .map(|w| w.trim_end_matches('.'))
        .collect();
    let mut paths: Vec<&str> = paths.collect();
    // The longest path first, so `docs/NOTES.md` wins over a bare `NOTES.md` mention of it.
    paths.sort_by_key(|p| std::cmp::Reverse(p.len()));
    paths.into_iter().find(|p| {
        let name = p.rsplit('/').next().unwrap_or(p);
        name.contains('.') && words.iter().any(|w| w == p || *w == name)
    })
}

/// Puts beside each human form the submitted file its criterion names
/// (text only, capped at `DIFF_MAX_BYTES`).
async fn attach_scored_files(
    state: &AppState,
    manifest: &Manifest,
    archive_sha256: &str,
    unwrapped: Option<String>,
    view: &CardView,
    forms: &mut [HumanForm],
) {
    let paths: Vec<String> =
        view.files.iter().filter(|f| f.change != "platform").map(|f| f.path.clone()).collect();
    let wanted: Vec<(usize, String)> = forms
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let c = manifest.criterion(&f.criterion)?;
            file_named_by(&c.title, &c.levels, paths.iter().map(String::as_str))
                .map(|p| (i, p.to_string()))
        })
        .collect();
    if wanted.is_empty() {
        return;
    }
    let zip_path = stored_zip(state, archive_sha256).await;
    let read = tokio::task::spawn_blocking(move || {
        let mut archive =
            std::fs::File::open(&zip_path).ok().and_then(|f| zip::ZipArchive::new(f).ok())?;
        Some(
            wanted
                .into_iter()
                .filter_map(|(i, p)| {
                    read_entry(&mut archive, &p, unwrapped.as_deref())
                        .and_then(|b| String::from_utf8(b).ok())
                        .map(|t| (i, p, t))
                })
                .collect::<Vec<_>>(),
        )
    })
    .await
    .ok()
    .flatten()
    .unwrap_or_default();
    for (i, path, text) in read {
        forms[i].file = Some((path, text));
    }
}

/// The bytes of the archive entry for `path`, capped at `DIFF_MAX_BYTES`.
/// The entry is looked up as ingestion named it: under the unwrapped top
/// folder, and with `\` read as `/`.
fn read_entry(
    archive: &mut zip::ZipArchive<std::fs::File>,
    path: &str,
    unwrapped: Option<&str>,
) -> Option<Vec<u8>> {
    use std::io::Read;
    let wanted = match unwrapped {
        Some(top) => format!("{top}/{path}"),
        None => path.to_string(),
    };
    let index = (0..archive.len()).find(|&i| {
        archive
            .name_for_index(i)
            .and_then(|r| r.ok())
            .is_some_and(|n| n.trim_start_matches("./").replace('\\', "/") == wanted)
    })?;
    let entry = archive.by_index(index).ok()?;
    let mut bytes = Vec::new();
    entry.take(DIFF_MAX_BYTES + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= DIFF_MAX_BYTES).then_some(bytes)
}

/// The reviewer's form for the platform-wide `evidence-tampering` veto.
fn tamper_override_form(card: &grader::grade::Scorecard) -> HumanForm {
    HumanForm {
        criterion: grader::tamper::ID.into(),
        title: "Evidence tampering: the veto to the lowest decision".into(),
        mode: "veto".into(),
        levels: vec![
            (0, "The veto stands: the submission interfered with the grader's evidence.".into()),
            (
                1,
                "Override the veto: the evidence shows no interference (the reason is kept)."
                    .into(),
            ),
        ],
        current: card
            .scoring
            .caps
            .iter()
            .any(|c| c.starts_with("evidence-tampering veto overridden"))
            .then_some(1),
        file: None,
    }
}

fn mode_word(m: Mode) -> &'static str {
    match m {
        Mode::Auto => "auto",
        Mode::Human => "human",
        Mode::AutoOverride => "auto-override",
    }
}

async fn assignment_page(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Reviewer)?;
    let mut a = state
        .db
        .assignment_by_id(&id)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("assignment {id:?}")))?;
    let mut all = state.db.submissions_of(&id).await?;
    // Blind review: a reviewer (authors manage the invite and know the
    // candidate) sees the pseudonym of the latest graded submission until
    // they have scored it.
    if a.blind_review && signed_in.user.role == Role::Reviewer {
        let latest = all.iter().find(|s| s.state == SubmissionState::Graded);
        let card = latest.and_then(|s| parse_card(s).ok().flatten());
        let hide = match latest {
            Some(s) => hides_candidate(&state, &a, &s.id, card.as_ref(), signed_in.user.id).await?,
            None => true,
        };
        if hide {
            a.candidate_name = latest
                .map(|s| blind_label(&s.id))
                .unwrap_or_else(|| "Candidate (blind review)".into());
            a.email = "hidden under blind review".into();
        }
    }
    // The last graded submission first, then the rest newest first (the
    // sort is stable over the newest-first list); every one is kept.
    all.sort_by_key(|s| s.state != SubmissionState::Graded);
    let submissions = all
        .into_iter()
        .map(|s| {
            let card = parse_card(&s).ok().flatten();
            SubmissionLine {
                id: s.id.clone(),
                received_at: when(s.received_at),
                state: s.state.to_string(),
                decision: s.decision.clone(),
                score: card.as_ref().map(score_label),
            }
        })
        .collect();
    let view = AssignmentView {
        id: a.id.clone(),
        candidate: a.candidate_name.clone(),
        email: a.email.clone(),
        slug: a.slug.clone(),
        version: version_label(&a),
        deadline: when(a.deadline),
        state: a.state.clone(),
        submissions,
        csrf: signed_in.csrf.clone(),
        refusals: state
            .db
            .audit_entries(Some(&format!("assignment:{}", a.id)), 1000)
            .await?
            .into_iter()
            .filter(|e| e.action == "submission.refused")
            .map(|e| (when(e.at), e.detail))
            .collect(),
        can_manage: signed_in.user.role >= Role::Author,
        model_key_active: state
            .db
            .model_keys_of(&a.id)
            .await?
            .iter()
            .any(|k| k.revoked_at.is_none()),
    };
    let meta = meta(&signed_in, format!("Assignment {}", a.candidate_name), None);
    Ok(Html(app::shell::document(meta, move || view! { <AssignmentPage view=view /> }))
        .into_response())
}

#[derive(Deserialize, Default)]
struct FlashQuery {
    scored: Option<String>,
    regrade: Option<String>,
}

async fn scorecard_page(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    Query(q): Query<FlashQuery>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Reviewer)?;
    let mut ctx = context(&state, &id).await?;
    let card = parse_card(&ctx.submission)?;
    let blind = blind_for(&state, &mut ctx, card.as_ref(), signed_in.user.id).await?;
    let manifest = manifest_of(&state, &ctx.version).await?;
    let starter = starter_of(&state, &ctx.version).await;
    let mut forms = match &card {
        Some(card) => manifest
            .criteria
            .iter()
            .filter(|c| c.mode != Mode::Auto)
            .map(|c| HumanForm {
                criterion: c.id.clone(),
                title: c.title.clone(),
                mode: mode_word(c.mode).into(),
                levels: c.levels.iter().enumerate().map(|(i, t)| (i as u32, t.clone())).collect(),
                current: card.scoring.criteria.iter().find(|s| s.id == c.id).and_then(|s| s.level),
                file: None,
            })
            .chain(
                card.findings
                    .iter()
                    .any(|f| f.id == grader::tamper::ID)
                    .then(|| tamper_override_form(card)),
            )
            .collect(),
        None => Vec::new(),
    };
    let history = state
        .db
        .human_scores(&id)
        .await?
        .into_iter()
        .rev()
        .map(|h| HistoryRow {
            when: when(h.created_at),
            who: h.reviewer_name,
            criterion: h.criterion,
            level: h.level,
            reason: h.reason,
        })
        .collect();
    let flash = match (q.scored, q.regrade) {
        (Some(c), _) => Some(format!("Score for {c} saved; the decision was recomputed.")),
        (_, Some(_)) => Some("Regrade queued on the stored packet version.".into()),
        _ => None,
    };
    let view = ScorecardView {
        id: ctx.submission.id.clone(),
        assignment_id: ctx.assignment.id.clone(),
        candidate: ctx.assignment.candidate_name.clone(),
        slug: ctx.assignment.slug.clone(),
        version: version_label(&ctx.assignment),
        received_at: when(ctx.submission.received_at),
        graded_at: ctx.submission.graded_at.map(when),
        state: ctx.submission.state.to_string(),
        error: ctx.submission.error.clone(),
        refusal: ctx.submission.refusal.clone(),
        card: match &card {
            Some(c) => {
                let mut v = card_view_model(c, starter.as_ref());
                let index = answer_index(&state, &ctx).await?;
                attach_diffs(
                    &state,
                    &ctx.version,
                    &c.receipt.submission.archive_sha256,
                    c.receipt.submission.normalised.unwrapped.clone(),
                    &mut v,
                    &index,
                )
                .await;
                if !index.is_empty() {
                    let p = provenance_of(
                        &state,
                        &ctx.version,
                        &c.receipt.submission.archive_sha256,
                        c.receipt.submission.normalised.unwrapped.clone(),
                        &v.files,
                        &index,
                    )
                    .await;
                    v.model_share = Some(p.sentence());
                }
                attach_scored_files(
                    &state,
                    &manifest,
                    &c.receipt.submission.archive_sha256,
                    c.receipt.submission.normalised.unwrapped.clone(),
                    &v,
                    &mut forms,
                )
                .await;
                Some(v)
            }
            None => None,
        },
        forms,
        history,
        csrf: signed_in.csrf.clone(),
        ledger: crate::grading::witness_of(&state, &ctx.assignment.id, ctx.submission.received_at)
            .await?
            .map(|w| ledger_view(&w)),
        blind,
        similar: similar_to(&state, &ctx.assignment.slug, &ctx.submission.id, signed_in.user.id)
            .await?,
        transcript: crate::transcript::entries(
            &state,
            &ctx.assignment.id,
            Some(ctx.submission.received_at),
        )
        .await?
        .0,
    };
    let meta = meta(&signed_in, format!("Scorecard {}", ctx.assignment.candidate_name), flash);
    Ok(Html(app::shell::document(meta, move || view! { <ScorecardPage view=view /> }))
        .into_response())
}

#[derive(Deserialize, Default)]
struct HumanScoreForm {
    #[serde(default)]
    csrf: Option<String>,
    #[serde(default)]
    criterion: String,
    #[serde(default)]
    level: String,
    #[serde(default)]
    reason: String,
}

async fn human_score(
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
    // Back to the criterion just scored, not the top of a long page.
    let anchor = format!("criterion-{}", crate::web::session::urlencode(criterion));
    Ok(Redirect::to(&format!(
        "/submissions/{id}?scored={}#{anchor}",
        crate::web::session::urlencode(criterion)
    ))
    .into_response())
}

#[derive(Deserialize, Default)]
struct CsrfForm {
    #[serde(default)]
    csrf: Option<String>,
}

async fn regrade(
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

async fn receipt_page(
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
    let starter = starter_of(state, &ctx.version).await;
    let view = card_view_model(card, starter.as_ref());
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

async fn receipt_json(
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
struct ReceiptQuery {
    /// `?transcript=1`: include each call's prompt and answer.
    #[serde(default)]
    transcript: Option<String>,
}

async fn receipt_html(
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
async fn transcript_json(
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

async fn scorecards_csv(
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
        })
        .collect();
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

/// The latest graded submission of each assignment of the packet, oldest
/// assignment first.
async fn graded_of_packet(
    state: &AppState,
    slug: &str,
) -> Result<Vec<(Assignment, Submission, Scorecard)>, AppError> {
    let mut out = Vec::new();
    let mut assignments = state.db.list_assignments(Some(slug)).await?;
    assignments.reverse();
    for a in assignments {
        let subs = state.db.submissions_of(&a.id).await?;
        if let Some(s) = subs.into_iter().find(|s| s.state == SubmissionState::Graded)
            && let Some(card) = parse_card(&s)?
        {
            out.push((a, s, card));
        }
    }
    Ok(out)
}

#[derive(Deserialize, Default)]
struct CompareQuery {
    ids: Option<String>,
}

async fn compare_page(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(slug): Path<String>,
    Query(q): Query<CompareQuery>,
) -> Result<Response, AppError> {
    signed_in.require(Role::Reviewer)?;
    state
        .db
        .packet_by_slug(&slug)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("packet {slug:?}")))?;
    let wanted: Vec<String> = q
        .ids
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let graded: Vec<_> = graded_of_packet(&state, &slug)
        .await?
        .into_iter()
        .filter(|(a, s, _)| wanted.is_empty() || wanted.contains(&a.id) || wanted.contains(&s.id))
        .collect();
    let mut criteria: Vec<(String, String)> = Vec::new();
    for (_, _, card) in &graded {
        for c in &card.scoring.criteria {
            if !criteria.iter().any(|(id, _)| id == &c.id) {
                criteria.push((c.id.clone(), c.title.clone()));
            }
        }
    }
    // Under blind review a candidate is a pseudonym to a reviewer who has not
    // scored them yet, and blind columns come in their stable pseudo-random
    // order after the others.
    let mut graded = graded;
    graded.sort_by_key(
        |(a, s, _)| if a.blind_review { (1, blind_key(&s.id)) } else { (0, String::new()) },
    );
    let mut names = Vec::with_capacity(graded.len());
    for (a, s, card) in &graded {
        names.push(if hides_candidate(&state, a, &s.id, Some(card), signed_in.user.id).await? {
            blind_label(&s.id)
        } else {
            a.candidate_name.clone()
        });
    }
    let columns: Vec<CompareColumn> = graded
        .iter()
        .zip(names)
        .map(|((_, s, card), name)| CompareColumn {
            candidate: name,
            submission_id: s.id.clone(),
            decision: card.scoring.decision.clone(),
            score: score_label(card),
            levels: criteria
                .iter()
                .map(|(id, _)| match card.scoring.criteria.iter().find(|c| &c.id == id) {
                    Some(c) => match (c.status, c.level) {
                        (Status::Pending, _) | (_, None) => "pending".into(),
                        (_, Some(l)) => format!("{l} / {}", c.max),
                    },
                    None => String::new(),
                })
                .collect(),
            failures: card.findings.iter().map(|f| f.id.clone()).collect(),
        })
        .collect();
    let similar = similar_found(&state, &graded, None)
        .await
        .into_iter()
        .map(|f| {
            let (a, b) = (&graded[f.i].1, &graded[f.j].1);
            pair_view(
                columns_name(&columns, f.i),
                a.id.clone(),
                columns_name(&columns, f.j),
                b.id.clone(),
                f.share,
                &f.excerpts,
                false,
            )
        })
        .collect();
    let view = CompareView {
        similar,
        slug: slug.clone(),
        criteria,
        columns,
        chart: format!("/packets/{slug}/distribution.svg"),
        csv: format!("/packets/{slug}/scorecards.csv"),
    };
    let meta = meta(&signed_in, format!("Compare {slug}"), None);
    Ok(Html(app::shell::document(meta, move || view! { <ComparePage view=view /> }))
        .into_response())
}

/// The submissions of `slug` similar to `submission_id`, this one as side
/// `a` (names as the viewer may see them).
async fn similar_to(
    state: &AppState,
    slug: &str,
    submission_id: &str,
    viewer: i64,
) -> Result<Vec<SimilarPair>, AppError> {
    let graded = graded_of_packet(state, slug).await?;
    let Some(me) = graded.iter().position(|(_, s, _)| s.id == submission_id) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for f in similar_found(state, &graded, Some(me)).await {
        let (other, swap) = if f.i == me { (f.j, false) } else { (f.i, true) };
        let name_of = async |k: usize| -> Result<String, AppError> {
            let (a, s, card) = &graded[k];
            Ok(if hides_candidate(state, a, &s.id, Some(card), viewer).await? {
                blind_label(&s.id)
            } else {
                a.candidate_name.clone()
            })
        };
        let (mine, theirs) = (name_of(me).await?, name_of(other).await?);
        out.push(pair_view(
            mine,
            graded[me].1.id.clone(),
            theirs,
            graded[other].1.id.clone(),
            f.share,
            &f.excerpts,
            swap,
        ));
    }
    Ok(out)
}

/// A similar pair as the pages show it; `swap` puts the excerpts' side `b`
/// first (the pair was found the other way round).
fn pair_view(
    a: String,
    a_id: String,
    b: String,
    b_id: String,
    share: f64,
    excerpts: &[crate::similarity::Excerpt],
    swap: bool,
) -> SimilarPair {
    let side = |s: &crate::similarity::Side| ExcerptSide {
        path: s.path.clone(),
        lines: if s.first_line == s.last_line {
            format!("line {}", s.first_line)
        } else {
            format!("lines {}–{}", s.first_line, s.last_line)
        },
        text: s.text.clone(),
        cut: s.cut,
    };
    let excerpts = excerpts
        .iter()
        .map(|e| {
            if swap {
                SimilarExcerpt { a: side(&e.b), b: side(&e.a) }
            } else {
                SimilarExcerpt { a: side(&e.a), b: side(&e.b) }
            }
        })
        .collect();
    SimilarPair { a, a_id, b, b_id, share: format!("{:.0} %", share * 100.0), excerpts }
}

fn columns_name(columns: &[CompareColumn], i: usize) -> String {
    columns.get(i).map(|c| c.candidate.clone()).unwrap_or_default()
}

/// Source files read for similarity: these extensions, each at most 256 KiB.
const SIMILARITY_EXTENSIONS: [&str; 12] =
    ["py", "rs", "js", "ts", "go", "java", "rb", "c", "h", "cpp", "cs", "sh"];
const SIMILARITY_MAX_FILE: u64 = 256 << 10;
/// Shared fragments shown per pair.
const SIMILARITY_EXCERPTS: usize = 6;

/// A similar pair among a packet's graded submissions (indices into them),
/// with its aligned excerpts.
struct Found {
    i: usize,
    j: usize,
    share: f64,
    excerpts: Vec<crate::similarity::Excerpt>,
}

/// The similar pairs among `graded`, by `crate::similarity`, each
/// submission's starter excluded; the excerpts of every pair, or only of
/// the pairs of submission `about`.
async fn similar_found(
    state: &AppState,
    graded: &[(Assignment, Submission, Scorecard)],
    about: Option<usize>,
) -> Vec<Found> {
    use crate::similarity::{excerpts, prints_of};
    struct Input {
        zip: PathBuf,
        sha256: String,
        starter: PathBuf,
        unwrapped: Option<String>,
    }
    let mut inputs = Vec::new();
    for (a, _, card) in graded {
        let starter = match state.db.version_by_id(a.packet_version_id).await {
            Ok(Some(ver)) => version_dir(state, &ver.dir).join("starter"),
            _ => PathBuf::new(),
        };
        let sha256 = card.receipt.submission.archive_sha256.clone();
        inputs.push(Input {
            zip: stored_zip(state, &sha256).await,
            sha256,
            starter,
            unwrapped: card.receipt.submission.normalised.unwrapped.clone(),
        });
    }
    let memo = state.memo.clone();
    tokio::task::spawn_blocking(move || {
        let cache = &memo.similarity;
        let starters: Vec<_> = inputs
            .iter()
            .map(|i| cache.starter(&i.starter, || starter_prints(&i.starter)))
            .collect();
        let prints: Vec<_> = inputs
            .iter()
            .zip(&starters)
            .map(|(i, starter)| {
                cache.prints(&i.sha256, &i.starter, || {
                    prints_of(&source_files(&i.zip, i.unwrapped.as_deref()), starter)
                })
            })
            .collect();
        let key = inputs.iter().map(|i| (i.sha256.clone(), i.starter.clone())).collect();
        let pairs = cache.pairs(key, || crate::similarity::similar_pairs(&prints));
        // Files are read again only for the pairs shown, for their excerpts.
        let mut files = std::collections::HashMap::new();
        let mut read = |k: usize| {
            files
                .entry(k)
                .or_insert_with(|| source_files(&inputs[k].zip, inputs[k].unwrapped.as_deref()))
                .clone()
        };
        pairs
            .iter()
            .filter(|(i, j, _)| about.is_none_or(|k| k == *i || k == *j))
            .map(|&(i, j, share)| {
                let mut starter = (*starters[i]).clone();
                starter.extend(starters[j].iter());
                Found {
                    i,
                    j,
                    share,
                    excerpts: excerpts(&read(i), &read(j), &starter, SIMILARITY_EXCERPTS),
                }
            })
            .collect()
    })
    .await
    .unwrap_or_default()
}

fn is_code(name: &str) -> bool {
    name.rsplit_once('.').is_some_and(|(_, e)| SIMILARITY_EXTENSIONS.contains(&e))
}

/// The fingerprints of the code files of the starter in `dir`.
fn starter_prints(dir: &std::path::Path) -> std::collections::HashSet<u64> {
    list_files(dir)
        .unwrap_or_default()
        .keys()
        .filter(|p| is_code(p))
        .filter_map(|p| std::fs::read_to_string(dir.join(p)).ok())
        .flat_map(|t| crate::similarity::fingerprints(&t))
        .collect()
}

/// The code files of the stored zip at `zip`, each at most
/// `SIMILARITY_MAX_FILE` bytes, by path as the workspace has it (a wrapping
/// folder `unwrapped` dropped), sorted.
fn source_files(
    zip: &std::path::Path,
    unwrapped: Option<&str>,
) -> Vec<crate::similarity::SourceFile> {
    use std::io::Read;
    let mut texts = Vec::new();
    if let Some(mut archive) =
        std::fs::File::open(zip).ok().and_then(|f| zip::ZipArchive::new(f).ok())
    {
        for i in 0..archive.len() {
            let Ok(entry) = archive.by_index(i) else { continue };
            let Ok(name) = entry.name().map(|n| n.to_string()) else { continue };
            if !entry.is_file() || entry.size() > SIMILARITY_MAX_FILE || !is_code(&name) {
                continue;
            }
            let path = match unwrapped {
                Some(folder) => {
                    name.strip_prefix(&format!("{folder}/")).unwrap_or(&name).to_string()
                }
                None => name.clone(),
            };
            let mut text = String::new();
            if entry.take(SIMILARITY_MAX_FILE).read_to_string(&mut text).is_ok() {
                texts.push(crate::similarity::SourceFile { path, text });
            }
        }
    }
    texts.sort_by(|a, b| a.path.cmp(&b.path));
    texts
}

async fn distribution_svg(
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

use crate::times::span;

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
