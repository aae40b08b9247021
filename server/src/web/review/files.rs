//! The submission's files on the scorecard: diffs, line provenance, files criteria name.

use std::path::PathBuf;

use app::pages::review::{CardView, FileChange, HumanForm};
use grader::manifest::Manifest;

use crate::error::AppError;
use crate::export;
use crate::state::AppState;

use super::*;

/// A local file with a submission's stored zip: the blob store's copy,
/// fetched from the database first when it keeps the blobs (a missing or
/// unreadable zip gives the path where it would be, which opens as none).
pub(super) async fn stored_zip(state: &AppState, sha256: &str) -> PathBuf {
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
pub(super) async fn attach_diffs(
    state: &AppState,
    starter: Option<&Starter>,
    archive_sha256: &str,
    unwrapped: Option<String>,
    view: &mut CardView,
    index: &crate::provenance::AnswerIndex,
) {
    let index = index.clone();
    let zip_path = stored_zip(state, archive_sha256).await;
    let starter = starter.cloned();
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
            let old = starter.as_ref().and_then(|s| s.text(&f.path)).unwrap_or_default();
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
pub(super) async fn provenance_of(
    state: &AppState,
    starter: Option<&Starter>,
    archive_sha256: &str,
    unwrapped: Option<String>,
    files: &[FileChange],
    index: &crate::provenance::AnswerIndex,
) -> crate::provenance::Provenance {
    let zip_path = stored_zip(state, archive_sha256).await;
    let starter = starter.cloned();
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
                let old = starter.as_ref().and_then(|s| s.text(path)).unwrap_or_default();
                Some(crate::provenance::of_file(path, &old, &new, &index))
            })
            .collect()
    })
    .await
    .unwrap_or_default();
    crate::provenance::Provenance::of(files)
}

/// The answers of the assignment's calls up to the submission.
pub(super) async fn answer_index(
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
    let starter = starter_of(state, &ctx).await;
    let view = card_view_model(&card, starter.as_ref().map(|s| &s.tree));
    let index = answer_index(state, &ctx).await?;
    Ok(Some(
        provenance_of(
            state,
            starter.as_ref(),
            &card.receipt.submission.archive_sha256,
            card.receipt.submission.normalised.unwrapped.clone(),
            &view.files,
            &index,
        )
        .await,
    ))
}

/// The submitted file a criterion is about: the criterion's own `file` when
/// the packet names one (None when it was not submitted); else the first
/// submitted path the title names; else the first the levels name, in
/// reading order (a level listing `bucket.py, test_bucket.py` is about
/// `bucket.py`). Where one word names several paths, the longest wins, so
/// `docs/NOTES.md` wins over a bare `NOTES.md` mention of it.
pub fn file_named_by<'a>(
    explicit: Option<&str>,
    title: &str,
    levels: &[String],
    paths: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    let mut paths: Vec<&str> = paths.collect();
    if let Some(want) = explicit {
        return paths.into_iter().find(|p| *p == want);
    }
    paths.sort_by_key(|p| std::cmp::Reverse(p.len()));
    std::iter::once(title).chain(levels.iter().map(String::as_str)).find_map(|text| {
        text.split(|c: char| {
            c.is_whitespace() || matches!(c, ',' | ';' | ':' | '(' | ')' | '`' | '"' | '\'')
        })
        .map(|w| w.trim_end_matches('.'))
        .find_map(|w| {
            paths.iter().copied().find(|p| {
                let name = p.rsplit('/').next().unwrap_or(p);
                name.contains('.') && (w == *p || w == name)
            })
        })
    })
}

/// Puts beside each human form the submitted file its criterion names
/// (text only, capped at `DIFF_MAX_BYTES`).
pub(super) async fn attach_scored_files(
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
            file_named_by(c.file.as_deref(), &c.title, &c.levels, paths.iter().map(String::as_str))
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
