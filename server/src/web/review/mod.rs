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

mod charts;
mod compare;
mod exports;
mod files;
mod scorecard;
mod scoring;

pub use charts::{ledger_view, timeline_svg};
pub use files::file_named_by;
pub(crate) use files::submission_provenance;
pub use scorecard::card_view_model;

use app::contract::SubmissionState;
use std::collections::BTreeMap;
use std::path::PathBuf;

use app::shell::PageMeta;
use axum::routing::{get, post};
use grader::grade::Scorecard;
use grader::manifest::{Manifest, Mode};
use grader::score::HumanScore;
use grader::tree::{Tree, list_files};

use crate::db::{Assignment, PacketVersion, Submission};
use crate::error::AppError;
use crate::library::version_dir;
use crate::state::AppState;
use crate::web::session::SignedIn;

pub fn routes() -> crate::routes::Routes {
    crate::routes::Routes::new()
        .route("/assignments/{id}", get(scorecard::assignment_page))
        .route("/submissions/{id}", get(scorecard::scorecard_page))
        .route("/submissions/{id}/human", post(scoring::human_score))
        .route("/submissions/{id}/regrade", post(scoring::regrade))
        .route("/submissions/{id}/receipt", get(exports::receipt_page))
        .route("/submissions/{id}/receipt.json", get(exports::receipt_json))
        .route("/submissions/{id}/receipt.html", get(exports::receipt_html))
        .route("/submissions/{id}/transcript.json", get(exports::transcript_json))
        .route("/submissions/{id}/scorecard.json", get(exports::scorecard_json))
        .route("/packets/{slug}/scorecards.csv", get(exports::scorecards_csv))
        .route("/packets/{slug}/compare", get(compare::compare_page))
        .route("/packets/{slug}/distribution.svg", get(charts::distribution_svg))
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

/// The starter a candidate received, for the submission's diff: the packet
/// version's starter files with the assignment's seed filled in its seed
/// files (`[packet] seed_files`), so a seed file handed back as received
/// shows unchanged rather than changed from the template.
#[derive(Clone)]
pub(super) struct Starter {
    dir: PathBuf,
    /// Every starter file as the candidate received it: size and digest.
    pub tree: Tree,
    /// The seed files' text with the seed filled in.
    seeded: BTreeMap<String, String>,
}

impl Starter {
    /// The text of `path` as the candidate received it (None: not in the
    /// starter, or not text).
    pub fn text(&self, path: &str) -> Option<String> {
        if let Some(t) = self.seeded.get(path) {
            return Some(t.clone());
        }
        // Only a regular file the starter listing found (no link followed):
        // a submitted path never picks a file outside the starter.
        if !self.tree.contains_key(path) {
            return None;
        }
        std::fs::read(self.dir.join(path)).ok().and_then(|b| String::from_utf8(b).ok())
    }
}

async fn starter_of(state: &AppState, ctx: &Context) -> Option<Starter> {
    let root = version_dir(state, &ctx.version.dir);
    let seed = ctx.assignment.seed.clone();
    let seed_files = manifest_of(state, &ctx.version).await.ok()?.packet.seed_files;
    tokio::task::spawn_blocking(move || {
        let dir = root.join("starter");
        let mut tree = list_files(&dir).ok()?;
        let mut seeded = BTreeMap::new();
        for f in seed_files {
            let Some(text) =
                std::fs::read(dir.join(&f)).ok().and_then(|b| String::from_utf8(b).ok())
            else {
                continue;
            };
            let filled = grader::packet::apply_seed(&text, &seed);
            tree.insert(
                f.clone(),
                (filled.len() as u64, grader::tree::sha256_hex(filled.as_bytes())),
            );
            seeded.insert(f, filled);
        }
        Some(Starter { dir, tree, seeded })
    })
    .await
    .ok()
    .flatten()
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
                .filter(|c| matches!(c.mode, Mode::Human | Mode::AutoOverride))
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
