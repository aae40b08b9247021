//! The side-by-side comparison of a packet's graded submissions, with their similar pairs.

use std::path::PathBuf;

use app::pages::compare::{CompareColumn, ComparePage, CompareView};
use app::pages::review::{ExcerptSide, SimilarExcerpt, SimilarPair};
use axum::extract::{Path, RawQuery, State};
use axum::response::{Html, IntoResponse, Response};
use grader::grade::Scorecard;
use grader::score::Status;
use grader::tree::list_files;
use leptos::prelude::*;

use crate::db::{Assignment, Role, Submission};
use crate::error::AppError;
use crate::library::version_dir;
use crate::state::AppState;
use crate::web::session::SignedIn;

use super::files::stored_zip;
use super::*;

/// Most submissions one compare page shows side by side when the reviewer
/// picks them (the unpicked page shows every graded one, as before).
const MOST_PICKED: usize = 50;

pub(super) async fn compare_page(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(slug): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<Response, AppError> {
    signed_in.require(Role::Reviewer)?;
    state
        .db
        .packet_by_slug(&slug)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("packet {slug:?}")))?;
    // `ids` comma-separated (a link) or repeated (the picking form's boxes);
    // an assignment id stands for its graded submission.
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(q.as_deref().unwrap_or(""))
        .map_err(|_| AppError::BadRequest("the compare query does not parse".into()))?;
    let wanted: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| k == "ids")
        .flat_map(|(_, v)| v.split(','))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if wanted.len() > MOST_PICKED {
        return Err(AppError::BadRequest(format!(
            "pick at most {MOST_PICKED} submissions to compare ({} picked)",
            wanted.len()
        )));
    }
    let mut every = graded_of_packet(&state, &slug).await?;
    // Under blind review a candidate is a pseudonym to a reviewer who has not
    // scored them yet, and blind columns come in their stable pseudo-random
    // order after the others.
    every.sort_by_key(
        |(a, s, _)| if a.blind_review { (1, blind_key(&s.id)) } else { (0, String::new()) },
    );
    let mut choices = Vec::with_capacity(every.len());
    let mut graded = Vec::new();
    let mut names = Vec::new();
    for (a, s, card) in every {
        let name = if hides_candidate(&state, &a, &s.id, Some(&card), signed_in.user.id).await? {
            blind_label(&s.id)
        } else {
            a.candidate_name.clone()
        };
        let shown = wanted.is_empty() || wanted.contains(&a.id) || wanted.contains(&s.id);
        choices.push((s.id.clone(), name.clone(), shown && !wanted.is_empty()));
        if shown {
            graded.push((a, s, card));
            names.push(name);
        }
    }
    let mut criteria: Vec<(String, String)> = Vec::new();
    for (_, _, card) in &graded {
        for c in &card.scoring.criteria {
            if !criteria.iter().any(|(id, _)| id == &c.id) {
                criteria.push((c.id.clone(), c.title.clone()));
            }
        }
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
        picked: !wanted.is_empty(),
        choices,
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
pub(super) async fn similar_to(
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
