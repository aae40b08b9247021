//! The packet library on disk and its self-test.
//!
//! A packet version lives in `<data_dir>/packets/<slug>/<key>/<slug>/`: the
//! last folder carries the slug because `Packet::load` requires the folder
//! name to match it, and `<key>` tells versions apart (the digest prefix for
//! a built-in, a random key for imports and drafts). A published version's
//! folder never changes; a draft's folder is replaced whole by each edit,
//! after the edited copy validated.
//!
//! When the database keeps the blobs (Postgres), each version folder is
//! also stored as a zip blob keyed by its tree digest ([`keep_archive`]),
//! and a worker without the folder materialises it from the database into
//! `<data_dir>/cache/packets/<digest>/<slug>/` ([`version_path`]), unpacked
//! with the grader's safe ingestion (no links, no unsafe paths) and checked
//! against the digest before use.

use app::contract::JobKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use grader::check::check_packet;
use grader::ingest::{IngestLimits, ingest};
use grader::packet::{Packet, PacketError};
use grader::tree::copy_path;

use crate::db::{BUILTIN_CHECK_PRIORITY, NewVersion, PacketVersion, VersionState};
use crate::error::AppError;
use crate::state::AppState;

/// The folder of a packet version, from its stored relative `dir`.
pub fn version_dir(state: &AppState, dir: &str) -> PathBuf {
    state.config.data_dir.join(dir)
}

/// The folder of `version` on this machine: its library folder when this
/// machine has it (the server, and always with SQLite); else, when the
/// database keeps the blobs, the version's archive from the database,
/// unpacked once into this machine's cache and checked against the
/// version's digest.
pub async fn version_path(state: &AppState, version: &PacketVersion) -> anyhow::Result<PathBuf> {
    let dir = version_dir(state, &version.dir);
    if !state.db.blobs_in_db()
        || tokio::fs::try_exists(dir.join("packet.toml")).await.unwrap_or(false)
    {
        return Ok(dir);
    }
    let digest = version.digest.clone();
    let cached =
        state.config.data_dir.join("cache").join("packets").join(&digest).join(&version.slug);
    if tokio::fs::try_exists(cached.join("packet.toml")).await.unwrap_or(false) {
        // Its last use, for the cache's eviction (`sweep::run`).
        crate::blobs::touch(cached.parent().unwrap_or(&cached));
        return Ok(cached);
    }
    materialise(state, version, &cached).await?;
    Ok(cached)
}

/// Unpacks `version`'s archive from the database into `dest` (made, with
/// its parents): the grader's safe ingestion, the digest checked before the
/// folder is moved into place.
async fn materialise(state: &AppState, version: &PacketVersion, dest: &Path) -> anyhow::Result<()> {
    let digest = version.digest.clone();
    let short = &digest[..digest.len().min(12)];
    let sha = state.db.packet_archive(&digest).await?.with_context(|| {
        format!(
            "packet version {} ({} digest {short}) has no archive in the database",
            version.id, version.slug
        )
    })?;
    let zip = state
        .blobs()
        .local_copy(&sha)
        .await
        .with_context(|| format!("reading the archive of packet version {}", version.id))?
        .with_context(|| {
            format!(
                "the archive blob {sha} of packet version {} is not in the database",
                version.id
            )
        })?;
    let work = scratch(state)?;
    let staged = work.path().join(&version.slug);
    let (id, out) = (version.id, dest.to_path_buf());
    tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
        ingest(&zip, &staged, &IngestLimits::default())
            .map_err(|e| anyhow::anyhow!("the archive of packet version {id} was refused: {e}"))?;
        let packet = Packet::load(&staged)
            .with_context(|| format!("loading the archive of packet version {id}"))?;
        anyhow::ensure!(
            packet.digest == digest,
            "the archive of packet version {id} has digest {}, not the version's {}",
            &packet.digest[..12],
            &digest[..12]
        );
        let parent = out.parent().expect("has a parent");
        std::fs::create_dir_all(parent)?;
        // Another worker of this machine may have won the race; its copy is
        // the same content.
        if let Err(e) = std::fs::rename(&staged, &out)
            && !out.join("packet.toml").is_file()
        {
            return Err(anyhow::Error::new(e)
                .context(format!("moving packet version {id} into {}", out.display())));
        }
        Ok(())
    })
    .await??;
    Ok(())
}

/// With the database keeping the blobs (Postgres): unpacks, from its
/// archive, the library folder of every stored version this server lacks,
/// as a server brought up on a restored database (`pg_restore`) with an
/// empty data folder does at start, so every page that reads a version's
/// folder finds it. Returns how many; a version without an archive is
/// logged and left.
pub async fn restore_library_folders(state: &AppState) -> anyhow::Result<usize> {
    if !state.db.blobs_in_db() {
        return Ok(0);
    }
    let mut restored = 0;
    for p in state.db.list_packets().await? {
        for v in state.db.versions_of(p.id).await? {
            let dir = version_dir(state, &v.dir);
            if dir.join("packet.toml").is_file() {
                continue;
            }
            match materialise(state, &v, &dir).await {
                Ok(()) => restored += 1,
                Err(e) => {
                    tracing::warn!(version = v.id, error = %format!("{e:#}"), "restoring a packet version's folder from its archive failed")
                }
            }
        }
    }
    Ok(restored)
}

/// When the database keeps the blobs, stores the folder `dir` as a zip
/// blob recorded under `digest` (once per digest), so workers elsewhere can
/// materialise it. The digest is taken again from the bytes archived; an
/// archive whose content is not `digest` (the folder changed meanwhile) is
/// not recorded.
pub async fn keep_archive(state: &AppState, dir: &Path, digest: &str) -> anyhow::Result<()> {
    if !state.db.blobs_in_db() {
        return Ok(());
    }
    if state.db.packet_archive(digest).await?.is_some() {
        // Stored already (a draft edited back to an earlier tree): marked
        // used now, so the sweep of unused archives leaves it.
        state.db.touch_packet_archive(digest, crate::now_ms()).await?;
        return Ok(());
    }
    let work = scratch(state)?;
    let zip = work.path().join("packet.zip");
    let (from, to) = (dir.to_path_buf(), zip.clone());
    let archived = tokio::task::spawn_blocking(move || write_archive(&from, &to)).await??;
    anyhow::ensure!(
        archived == digest,
        "the folder {} changed while it was archived (digest {}, expected {})",
        dir.display(),
        &archived[..12],
        &digest[..12]
    );
    let sha = state.blobs().put_file(&zip).await.context("storing the packet archive")?;
    state.db.set_packet_archive(digest, &sha).await?;
    Ok(())
}

/// Archives every stored version whose folder this server holds and whose
/// digest has no archive in the database yet (versions stored before
/// archives existed, or whose archiving was cut short), so that workers
/// elsewhere can grade against them. The server runs it at start; it
/// returns how many it archived, and does nothing unless the database
/// keeps blobs. A version it cannot archive is logged and left; a worker
/// asked for it says it has no archive.
pub async fn archive_stored_versions(state: &AppState) -> anyhow::Result<usize> {
    if !state.db.blobs_in_db() {
        return Ok(0);
    }
    let mut archived = 0;
    for p in state.db.list_packets().await? {
        for v in state.db.versions_of(p.id).await? {
            if state.db.packet_archive(&v.digest).await?.is_some() {
                continue;
            }
            let dir = version_dir(state, &v.dir);
            if !dir.is_dir() {
                tracing::warn!(version = v.id, dir = %dir.display(), "a stored packet version has no folder here and no archive");
                continue;
            }
            match keep_archive(state, &dir, &v.digest).await {
                Ok(()) => archived += 1,
                Err(e) => {
                    tracing::warn!(version = v.id, error = %format!("{e:#}"), "archiving a stored packet version failed")
                }
            }
        }
    }
    Ok(archived)
}

/// Zips the regular files of `dir` (as `Packet::load` counts them: links
/// are not followed) into `out`; returns the tree digest of what it wrote.
fn write_archive(dir: &Path, out: &Path) -> anyhow::Result<String> {
    use std::io::Write;
    let mut zip = zip::ZipWriter::new(std::fs::File::create(out)?);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let mut tree = grader::tree::Tree::new();
    for rel in grader::tree::list_paths(dir) {
        let bytes = std::fs::read(dir.join(&rel)).with_context(|| format!("reading {rel}"))?;
        tree.insert(rel.clone(), (bytes.len() as u64, grader::tree::sha256_hex(&bytes)));
        zip.start_file(rel.as_str(), options)?;
        zip.write_all(&bytes)?;
    }
    zip.finish()?.sync_all()?;
    Ok(grader::tree::tree_digest(&tree))
}

/// The stored (relative) folder of a version of `slug` under `key`.
fn version_rel(slug: &str, key: &str) -> String {
    format!("packets/{slug}/{key}/{slug}")
}

/// A scratch folder under the data directory (same file system as the
/// library, so a finished folder is moved in with one rename).
fn scratch(state: &AppState) -> anyhow::Result<grader::workdir::WorkDir> {
    let base = state.config.data_dir.join("tmp");
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    grader::workdir::WorkDir::new_in(&base, "gatehouse-packet-")
        .with_context(|| format!("creating a scratch folder in {}", base.display()))
}

fn new_key() -> String {
    crate::auth::password::random_token()[..16].to_string()
}

/// A packet error as an author should read it: paths relative to the packet
/// folder (`packet.toml:12: ...`), not the server's scratch paths.
pub fn describe_packet_error(e: &PacketError, root: &Path) -> String {
    match e {
        PacketError::Manifest(m) => grader::manifest::ManifestError {
            file: "packet.toml".into(),
            problems: m.problems.clone(),
        }
        .to_string(),
        other => {
            let text = other.to_string();
            let prefix = format!("{}/", root.display());
            text.replace(&prefix, "").replace(&root.display().to_string(), "the packet folder")
        }
    }
}

/// Loads every packet folder of `config.packets_dir` that has a
/// `packet.toml` into the library as a published built-in version, unless
/// its newest published version already has the same digest. Returns how
/// many versions were added.
///
/// Each built-in version the library holds is then self-tested in the
/// background, once per version digest, as `builtin_self_test` says: a
/// `check` job of [`BUILTIN_CHECK_PRIORITY`], which workers claim only when
/// no grading (nor an author's job) waits. A version whose check ran, or
/// is queued or running, is not queued again, so a restart with the same
/// digests queues nothing.
pub async fn load_builtin(state: &AppState) -> anyhow::Result<usize> {
    let root = state.config.packets_dir.clone();
    if root.as_os_str().is_empty() || !root.is_dir() {
        return Ok(0);
    }
    let mut folders: Vec<PathBuf> = std::fs::read_dir(&root)
        .with_context(|| format!("reading {}", root.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("packet.toml").is_file())
        .collect();
    folders.sort();
    let wanted = state.config.builtin_checks().map_err(anyhow::Error::msg)?;
    let mut added = 0;
    let mut to_check = Vec::new();
    for folder in folders {
        let f = folder.clone();
        let packet = match tokio::task::spawn_blocking(move || Packet::load(&f)).await? {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(folder = %folder.display(), error = %e, "skipping a built-in packet that does not load");
                continue;
            }
        };
        let slug = packet.manifest.packet.slug.clone();
        if let Some(v) = state.db.latest_published(&slug).await?
            && v.digest == packet.digest
        {
            keep_archive(state, &version_dir(state, &v.dir), &v.digest)
                .await
                .with_context(|| format!("archiving built-in packet {slug}"))?;
            if wanted.wants(&slug) {
                to_check.push(v);
            }
            continue;
        }
        let rel = version_rel(&slug, &packet.digest[..16]);
        let dest = version_dir(state, &rel);
        let (from, to) = (folder.clone(), dest.clone());
        tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
            if to.exists() {
                std::fs::remove_dir_all(&to)?;
            }
            copy_path(&from, &to)?;
            Ok(())
        })
        .await?
        .with_context(|| format!("copying {} into the library", folder.display()))?;
        let version = state
            .db
            .create_version(NewVersion {
                builtin: true,
                publish: true,
                ..draft_row(&slug, &packet, &rel, None)
            })
            .await?;
        keep_archive(state, &dest, &packet.digest)
            .await
            .with_context(|| format!("archiving built-in packet {slug}"))?;
        state
            .db
            .audit(
                "system",
                "packet.builtin",
                &format!("packet:{slug}"),
                &format!("digest {}", &packet.digest[..12]),
            )
            .await?;
        added += 1;
        if wanted.wants(&slug) {
            to_check.push(version);
        }
    }
    let mut queued = 0;
    for v in to_check {
        if v.check_state == "none"
            && state.db.jobs_for(JobKind::Check, &v.id.to_string()).await?.is_empty()
        {
            enqueue_check_at(state, v.id, BUILTIN_CHECK_PRIORITY).await?;
            queued += 1;
        }
    }
    if queued > 0 {
        tracing::info!(queued, "built-in packet versions queued for their self-test");
        state.wake_workers();
    }
    Ok(added)
}

/// The row of a new draft of `slug`: `packet`, whose folder is `dir` in the
/// library, made by `by`.
fn draft_row<'a>(
    slug: &'a str,
    packet: &'a Packet,
    dir: &'a str,
    by: Option<i64>,
) -> NewVersion<'a> {
    NewVersion {
        slug,
        title: &packet.manifest.packet.title,
        builtin: false,
        dir,
        digest: &packet.digest,
        created_by: by,
        publish: false,
    }
}

/// Imports a packet folder zip (`packet.toml` at the root or in one top
/// folder) as a new draft. The zip is unpacked with the grader's safe
/// ingestion and validated with `Packet::load`; on any refusal nothing is
/// left behind.
pub async fn import_zip(
    state: &AppState,
    zip: &Path,
    by: Option<i64>,
) -> Result<PacketVersion, AppError> {
    let work = scratch(state)?;
    let unpacked = work.path().join("unpacked");
    let (zip_path, dest) = (zip.to_path_buf(), unpacked.clone());
    tokio::task::spawn_blocking(move || ingest(&zip_path, &dest, &IngestLimits::default()))
        .await
        .map_err(|e| AppError::Internal(e.into()))?
        .map_err(|e| AppError::BadRequest(format!("the zip was refused: {e}")))?;
    let root = find_packet_root(&unpacked)?;
    // Read the slug first, so the folder can be named after it for `Packet::load`.
    let manifest_src = std::fs::read_to_string(root.join("packet.toml"))
        .map_err(|e| AppError::BadRequest(format!("packet.toml could not be read: {e}")))?;
    let manifest = grader::manifest::Manifest::parse("packet.toml", &manifest_src)
        .map_err(|e| AppError::BadRequest(e.to_string()))?;
    let slug = manifest.packet.slug.clone();
    if !valid_slug(&slug) {
        return Err(AppError::BadRequest(format!(
            "packet.toml: slug {slug:?} must be lowercase letters, digits and dashes"
        )));
    }
    let staged = work.path().join("staged").join(&slug);
    std::fs::create_dir_all(staged.parent().expect("has a parent"))
        .map_err(|e| AppError::Internal(e.into()))?;
    std::fs::rename(&root, &staged).map_err(|e| AppError::Internal(e.into()))?;
    let packet = load_blocking(&staged).await?;
    let rel = version_rel(&slug, &new_key());
    let dest = version_dir(state, &rel);
    std::fs::create_dir_all(dest.parent().expect("has a parent"))
        .map_err(|e| AppError::Internal(e.into()))?;
    std::fs::rename(&staged, &dest).map_err(|e| AppError::Internal(e.into()))?;
    let created = state.db.create_version(draft_row(&slug, &packet, &rel, by)).await;
    let version = match created {
        Ok(v) => v,
        Err(e) => {
            let _ = std::fs::remove_dir_all(dest.parent().expect("has a parent"));
            return Err(e.into());
        }
    };
    keep_archive(state, &dest, &packet.digest).await.map_err(AppError::Internal)?;
    audit(
        state,
        by,
        "packet.import",
        &slug,
        &format!("draft {} digest {}", version.id, &packet.digest[..12]),
    )
    .await?;
    Ok(version)
}

fn valid_slug(slug: &str) -> bool {
    !slug.is_empty()
        && slug.len() <= 64
        && slug.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The folder holding `packet.toml`: the unpacked root or its only folder.
fn find_packet_root(unpacked: &Path) -> Result<PathBuf, AppError> {
    if unpacked.join("packet.toml").is_file() {
        return Ok(unpacked.to_path_buf());
    }
    let entries: Vec<PathBuf> = std::fs::read_dir(unpacked)
        .map_err(|e| AppError::Internal(e.into()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    match entries.as_slice() {
        [only] if only.is_dir() && only.join("packet.toml").is_file() => Ok(only.clone()),
        _ => Err(AppError::BadRequest(
            "the zip has no packet.toml at its root or in a single top folder".into(),
        )),
    }
}

async fn load_blocking(dir: &Path) -> Result<Packet, AppError> {
    let d = dir.to_path_buf();
    let loaded = tokio::task::spawn_blocking(move || Packet::load(&d))
        .await
        .map_err(|e| AppError::Internal(e.into()))?;
    loaded.map_err(|e| AppError::BadRequest(describe_packet_error(&e, dir)))
}

async fn audit(
    state: &AppState,
    by: Option<i64>,
    action: &str,
    slug: &str,
    detail: &str,
) -> Result<(), AppError> {
    let actor = by.map(|b| format!("user:{b}")).unwrap_or_else(|| "system".into());
    state.db.audit(&actor, action, &format!("packet:{slug}"), detail).await?;
    Ok(())
}

/// One edit of a draft, from the packet editor's forms.
#[derive(Debug, Clone)]
pub enum DraftEdit {
    Prompt(String),
    /// Budget name (`model_calls`, `tokens`, ...) to value; None removes it.
    Budgets(Vec<(String, Option<u64>)>),
    /// A rubric row by index: title, max and level descriptions.
    Criterion {
        index: usize,
        title: String,
        max: u32,
        levels: Vec<String>,
    },
    /// A failure catalog entry by index: title and description.
    Failure {
        index: usize,
        title: String,
        description: String,
    },
    /// Keeps mutant `id` of an audit of this draft as `mutants/<id>.diff`
    /// (what `packet audit --save` does), so the self-test requires the
    /// hidden tests to kill it.
    KeepMutant {
        id: String,
        report: Box<grader::audit::AuditReport>,
    },
}

/// The budget names the editor offers, as in `[budgets]`.
pub const BUDGETS: [&str; 6] =
    ["model_calls", "tokens", "tool_calls", "wall_clock_secs", "time_box_minutes", "request_bytes"];

/// Applies `edit` to a draft: edits a copy of its folder, validates the copy
/// with `Packet::load`, then swaps it in and records the new digest. A
/// published version is refused (it is immutable).
pub async fn edit_draft(
    state: &AppState,
    version: &PacketVersion,
    edit: DraftEdit,
    by: Option<i64>,
) -> Result<(), AppError> {
    if version.state == VersionState::Published {
        return Err(AppError::Conflict(format!(
            "version {} of {} is published and cannot change; use \"Edit as new draft\" to change it",
            version.version.unwrap_or_default(),
            version.slug
        )));
    }
    // The self-test reads the folder while it runs: no edit swaps it then.
    if state.db.version_by_id(version.id).await?.is_some_and(|v| v.check_state == "running") {
        return Err(AppError::Conflict(
            "the self-test is running on this draft; edit it again when the check has finished"
                .into(),
        ));
    }
    let current = version_dir(state, &version.dir);
    let work = scratch(state)?;
    let copy = work.path().join(&version.slug);
    let (from, to) = (current.clone(), copy.clone());
    tokio::task::spawn_blocking(move || copy_path(&from, &to))
        .await
        .map_err(|e| AppError::Internal(e.into()))?
        .map_err(|e| AppError::Internal(e.into()))?;
    apply_edit(&copy, &edit)?;
    let packet = load_blocking(&copy).await?;
    // Swap: the old folder moves aside, the validated copy takes its place.
    let aside = work.path().join("old");
    std::fs::rename(&current, &aside).map_err(|e| AppError::Internal(e.into()))?;
    if let Err(e) = std::fs::rename(&copy, &current) {
        let _ = std::fs::rename(&aside, &current);
        return Err(AppError::Internal(e.into()));
    }
    if !state.db.update_draft(version.id, &packet.digest).await? {
        // Put the checked folder back: a self-test started meanwhile reads it.
        let _ = std::fs::rename(&current, work.path().join("refused"));
        let _ = std::fs::rename(&aside, &current);
        return Err(AppError::Conflict(format!(
            "version {} is no longer a draft, or its self-test started; nothing changed",
            version.id
        )));
    }
    keep_archive(state, &current, &packet.digest).await.map_err(AppError::Internal)?;
    let what = match &edit {
        DraftEdit::Prompt(_) => "prompt".to_string(),
        DraftEdit::Budgets(_) => "budgets".to_string(),
        DraftEdit::Criterion { index, .. } => format!("criterion #{}", index + 1),
        DraftEdit::Failure { index, .. } => format!("failure #{}", index + 1),
        DraftEdit::KeepMutant { id, .. } => {
            format!("kept audit mutant {id} as mutants/audit/{id}.diff")
        }
    };
    audit(state, by, "packet.edit", &version.slug, &format!("draft {}: {what}", version.id)).await
}

fn bad(e: impl std::fmt::Display) -> AppError {
    AppError::BadRequest(e.to_string())
}

/// Writes `edit` into the packet folder `dir` (a scratch copy).
fn apply_edit(dir: &Path, edit: &DraftEdit) -> Result<(), AppError> {
    use toml_edit::{Array, DocumentMut, Item, value};

    if let DraftEdit::Prompt(text) = edit {
        let text = text.replace("\r\n", "\n");
        return std::fs::write(dir.join("prompt.md"), text)
            .map_err(|e| AppError::Internal(e.into()));
    }
    if let DraftEdit::KeepMutant { id, report } = edit {
        return keep_mutant(dir, id, report);
    }
    let path = dir.join("packet.toml");
    let src = std::fs::read_to_string(&path).map_err(|e| AppError::Internal(e.into()))?;
    let mut doc: DocumentMut =
        src.parse().map_err(|e| bad(format!("packet.toml does not parse: {e}")))?;
    match edit {
        DraftEdit::Prompt(_) | DraftEdit::KeepMutant { .. } => unreachable!("handled above"),
        DraftEdit::Budgets(values) => {
            if !doc.contains_key("budgets") {
                doc["budgets"] = toml_edit::table();
            }
            let table = doc["budgets"]
                .as_table_mut()
                .ok_or_else(|| bad("packet.toml: [budgets] is not a table"))?;
            for (name, v) in values {
                match v {
                    Some(n) => {
                        let n = i64::try_from(*n)
                            .map_err(|_| bad(format!("budget {name} is too large")))?;
                        table[name.as_str()] = value(n);
                    }
                    None => {
                        table.remove(name);
                    }
                }
            }
        }
        DraftEdit::Criterion { index, title, max, levels } => {
            let rows = doc
                .get_mut("criterion")
                .and_then(Item::as_array_of_tables_mut)
                .ok_or_else(|| bad("packet.toml has no [[criterion]] rows"))?;
            let row = rows
                .get_mut(*index)
                .ok_or_else(|| bad(format!("there is no rubric row #{}", index + 1)))?;
            row["title"] = value(title.trim());
            row["max"] = value(i64::from(*max));
            let mut arr = Array::new();
            for l in levels {
                arr.push(l.trim());
            }
            row["levels"] = value(arr);
        }
        DraftEdit::Failure { index, title, description } => {
            let rows = doc
                .get_mut("failure")
                .and_then(Item::as_array_of_tables_mut)
                .ok_or_else(|| bad("packet.toml has no [[failure]] entries"))?;
            let row = rows
                .get_mut(*index)
                .ok_or_else(|| bad(format!("there is no failure catalog entry #{}", index + 1)))?;
            row["title"] = value(title.trim());
            row["description"] = value(description.trim());
        }
    }
    std::fs::write(&path, doc.to_string()).map_err(|e| AppError::Internal(e.into()))
}

/// Writes mutant `id` of `report` into the packet copy `dir` with the
/// grader's `audit::save` (the diff must still apply to the draft's sample
/// of the audited file, and the packet must read it back as that mutant).
fn keep_mutant(dir: &Path, id: &str, report: &grader::audit::AuditReport) -> Result<(), AppError> {
    let packet = Packet::load(dir).map_err(|e| bad(describe_packet_error(&e, dir)))?;
    let pk = packet.files().map_err(|e| AppError::Internal(e.into()))?;
    let read = |d: &str| pk.read_to_string(&format!("{d}/{}", report.target)).ok();
    let source = read("sample")
        .or_else(|| read("starter"))
        .ok_or_else(|| bad(format!("the draft has no {} any more, so mutant {id} of the audit cannot be kept; audit the draft again", report.target)))?;
    grader::audit::save::save(&packet, report, id, &source).map(|_| ()).map_err(|e| {
        let e = e.strip_prefix(&format!("--save {id:?}: ")).map(str::to_string).unwrap_or(e);
        bad(format!(
            "mutant {id} cannot be kept: {}",
            e.replace(&format!("{}/", dir.display()), "")
        ))
    })
}

/// Makes a new draft of `slug` from a version's folder (the way to change a
/// published version).
pub async fn new_draft_from(
    state: &AppState,
    version: &PacketVersion,
    by: Option<i64>,
) -> Result<PacketVersion, AppError> {
    let from = version_dir(state, &version.dir);
    let rel = version_rel(&version.slug, &new_key());
    let to = version_dir(state, &rel);
    let (f, t) = (from.clone(), to.clone());
    tokio::task::spawn_blocking(move || copy_path(&f, &t))
        .await
        .map_err(|e| AppError::Internal(e.into()))?
        .map_err(|e| AppError::Internal(e.into()))?;
    let packet = match load_blocking(&to).await {
        Ok(p) => p,
        Err(e) => {
            let _ = std::fs::remove_dir_all(to.parent().expect("has a parent"));
            return Err(e);
        }
    };
    let draft = state.db.create_version(draft_row(&version.slug, &packet, &rel, by)).await?;
    keep_archive(state, &to, &packet.digest).await.map_err(AppError::Internal)?;
    audit(
        state,
        by,
        "packet.draft",
        &version.slug,
        &format!("draft {} from version {}", draft.id, version.id),
    )
    .await?;
    Ok(draft)
}

/// Records a publish request on a draft and enqueues its self-test; the
/// `check` job publishes it when the check passes.
pub async fn request_publish(
    state: &AppState,
    version: &PacketVersion,
    by: Option<i64>,
) -> Result<i64, AppError> {
    if version.state == VersionState::Published {
        return Err(AppError::Conflict(format!(
            "version {} of {} is already published",
            version.version.unwrap_or_default(),
            version.slug
        )));
    }
    state.db.set_publish_request(version.id, Some(crate::now_ms())).await?;
    let job = enqueue_check(state, version.id).await?;
    audit(
        state,
        by,
        "packet.publish-request",
        &version.slug,
        &format!("draft {} (check job {job})", version.id),
    )
    .await?;
    Ok(job)
}

/// Enqueues a `check` job for a version unless one is already pending.
pub async fn enqueue_check(state: &AppState, version_id: i64) -> Result<i64, AppError> {
    enqueue_check_at(state, version_id, 0).await
}

/// As [`enqueue_check`] with a priority; a pending check of a lower one is
/// raised to it (an author asks now for a built-in check queued behind the
/// gradings).
pub async fn enqueue_check_at(
    state: &AppState,
    version_id: i64,
    priority: i64,
) -> Result<i64, AppError> {
    let subject = version_id.to_string();
    if let Some(j) = state
        .db
        .jobs_for(JobKind::Check, &subject)
        .await?
        .into_iter()
        .find(|j| j.state.is_pending())
    {
        if j.priority < priority {
            state.db.raise_priority(j.id, priority).await?;
        }
        return Ok(j.id);
    }
    Ok(state.db.enqueue_with_priority(JobKind::Check, &subject, priority).await?)
}

/// Records that a version's self-test could not run to the end (its job
/// failed for good: `reason` says why) as a failed check whose one item
/// gives the reason, so the version's page shows it like any failing item.
pub async fn fail_check(state: &AppState, version_id: i64, reason: &str) -> anyhow::Result<()> {
    let slug = state.db.version_by_id(version_id).await?.map(|v| v.slug).unwrap_or_default();
    let report = grader::check::CheckReport {
        packet: slug,
        items: vec![grader::check::CheckItem {
            name: "the self-test ran to the end".into(),
            ok: false,
            detail: reason.to_string(),
            warning: false,
        }],
        ..grader::check::CheckReport::default()
    };
    state.db.set_check(version_id, "failed", Some(&serde_json::to_string(&report)?)).await?;
    Ok(())
}

/// Runs `packet check` on a version (the `check` job) and stores the report.
/// When a publish was requested, a passing check publishes the draft and a
/// failing one leaves it a draft (its failing items are on its page); the
/// request is cleared either way. Returns whether the check passed.
pub async fn run_check(state: &AppState, version_id: i64) -> anyhow::Result<bool> {
    run_check_in(state, version_id, false).await
}

/// As [`run_check`]; `background` runs the self-test on a thread of its
/// own at the lowest CPU and I/O priority (`crate::lowly`), which every
/// thread and sandboxed process of the check inherits, so a grading
/// running beside it keeps the machine; a background check that fails is
/// run again at normal priority and that report is the one recorded.
pub async fn run_check_in(
    state: &AppState,
    version_id: i64,
    background: bool,
) -> anyhow::Result<bool> {
    let version = state
        .db
        .version_by_id(version_id)
        .await?
        .with_context(|| format!("packet version {version_id} does not exist"))?;
    state.db.set_check(version_id, "running", None).await?;
    let dir = version_path(state, &version).await?;
    let grader = state.grader.clone();
    // The digest of the folder before and after the check: the check counts
    // only for the folder it read, and publishing needs the version's digest
    // to still be that one.
    let digest_of = |dir: std::path::PathBuf| async move {
        tokio::task::spawn_blocking(move || Packet::load(&dir).map(|p| p.digest).ok())
            .await
            .ok()
            .flatten()
    };
    let before = digest_of(dir.clone()).await;
    let d = dir.clone();
    let mut report = if background {
        // Measured apart: a grading of the version meanwhile calibrates at
        // its own priority instead of waiting behind this starved one.
        crate::lowly::run(move || grader::check::check_packet_with(&grader, &d, true)).await?
    } else {
        tokio::task::spawn_blocking(move || check_packet(&grader, &d)).await?
    };
    // At idle priority a busy machine can starve the check's runs past
    // their wall limits (a `SCHED_IDLE` thread gets the CPU only when
    // nothing else wants it), so a packet is not recorded as failing on a
    // background run alone: its failure is confirmed at normal priority,
    // with the sample measured anew (the grader keeps one calibration per
    // version, and the starved one is no measure), and the confirming
    // report is the one kept.
    if background && !report.ok() {
        tracing::warn!(
            version = version_id,
            failing = report.failures().count(),
            "the background self-test failed at idle priority; confirming at normal priority"
        );
        for digest in before.iter().chain([&version.digest]) {
            state.grader.forget_calibration(digest);
        }
        let (grader, d) = (state.grader.clone(), dir.clone());
        report = tokio::task::spawn_blocking(move || check_packet(&grader, &d)).await?;
    }
    let after = digest_of(dir).await;
    let checked = before.filter(|b| after.as_deref() == Some(b.as_str()) && *b == version.digest);
    if checked.is_none() {
        tracing::warn!(
            version = version_id,
            "the draft changed while its self-test ran; the check does not count"
        );
    }
    let ok = report.ok() && checked.is_some();
    let json = serde_json::to_string(&report)?;
    state
        .db
        .finish_check(version_id, if ok { "passed" } else { "failed" }, &json, checked.as_deref())
        .await?;
    if state.db.publish_request(version_id).await?.is_some() {
        state.db.set_publish_request(version_id, None).await?;
        let subject = format!("packet:{}", version.slug);
        if ok && state.db.publish(version_id).await? {
            state
                .db
                .audit("system", "packet.publish", &subject, &format!("version id {version_id}"))
                .await?;
        } else if !ok {
            let failed = report.failures().count();
            state
                .db
                .audit(
                    "system",
                    "packet.publish-refused",
                    &subject,
                    &format!("version id {version_id}: {failed} failing self-test item(s)"),
                )
                .await?;
        }
    }
    Ok(ok)
}

/// The packet of a published version, from this app's memory or loaded
/// (and kept) from its version folder.
pub async fn packet_of(state: &AppState, version_id: i64) -> Result<Arc<Packet>, AppError> {
    if let Some(p) = state.memo.packet(version_id) {
        return Ok(p);
    }
    let version = state.db.version_by_id(version_id).await?.ok_or_else(|| {
        AppError::Internal(anyhow::anyhow!("packet version {version_id} is missing"))
    })?;
    let dir = version_path(state, &version).await.map_err(AppError::Internal)?;
    let packet = tokio::task::spawn_blocking(move || {
        Packet::load(&dir).map_err(|e| anyhow::anyhow!("loading packet {}: {e}", dir.display()))
    })
    .await
    .map_err(|e| AppError::Internal(e.into()))?
    .map_err(AppError::Internal)?;
    let packet = Arc::new(packet);
    state.memo.keep_packet(version_id, packet.clone());
    Ok(packet)
}
