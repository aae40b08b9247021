//! Safe ingestion of submission zips.
//!
//! INTERFACE CONTRACT (the rest of the grader is written against this; keep
//! the public names and meanings, extend freely):
//!
//! - `ingest(zip_path, dest, &limits)` reads the archive without holding its
//!   contents in memory and writes its files under `dest`, which must not
//!   exist yet and is created. On any refusal `dest` is removed again and
//!   nothing else was ever written.
//! - Each refusal is its own `IngestError` variant with a message that names
//!   the entry and the rule.
//! - Ingestion normalises the ways people zip a folder, once, for every
//!   packet, and records what it did in `Ingested::normalised`: `\`
//!   separators (PowerShell 5.1) are read as `/` before any path rule; OS
//!   metadata (`__MACOSX/`, AppleDouble `._*`, `.DS_Store`, `Thumbs.db`,
//!   `desktop.ini`) is dropped, never extracted; and a single top-level
//!   folder with nothing beside it is unwrapped, one level, unless its name
//!   is one the workspace itself has (`IngestOptions::workspace_names`).
//!
//! The grader passes the top-level names of the packet's starter and sample as
//! `IngestOptions::workspace_names` (`grade::ingest_options`), so a folder
//! named like one of them is never unwrapped. `ingest_with` reports what it
//! normalised in `Ingested::normalised` (lists capped at `NORMALISED_LISTED`,
//! the rest counted), which the receipt records (`submission.normalised`) and
//! nothing grades; `ingest` is the same with no workspace names. Bytecode
//! caches are set aside, never extracted (`Ingested::bytecode`, bytes kept
//! within bounds for `crate::bytecode`). `types` holds what ingestion takes and
//! gives, `write` the deterministic zips (starters, and the sample and variants
//! during self-tests).

mod directory;
mod names;
mod nesting;
mod types;
mod write;

pub use types::*;
pub use write::write_zip_from_dir;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sha2::{Digest, Sha256};
use zip::ZipArchive;

/// Expansion allowed for any entry regardless of its ratio, so that small,
/// highly compressible files (a page of zeros, a repetitive CSV) pass.
const RATIO_FLOOR_BYTES: u64 = 64 << 10;

/// The copy buffer; memory use is this buffer plus the decoder's, however
/// large the archive.
const COPY_BUFFER_BYTES: usize = 256 << 10;

const ZIP_MAGIC: [u8; 4] = *b"PK\x03\x04";

/// What the metadata pass decided about one entry.
struct Planned {
    /// Index in the central directory, which is also the zip crate's index
    /// once duplicates are refused.
    index: usize,
    path: String,
    display: String,
    is_dir: bool,
    executable: bool,
    compressed_size: u64,
    mtime: Option<i64>,
    /// OS metadata, checked like every entry but never extracted.
    metadata: bool,
    /// The name as the archive spells it, when that used `\` separators.
    backslashes: Option<String>,
}

/// Removes the destination on drop unless ingestion succeeded.
struct DestGuard<'a> {
    dest: &'a Path,
    keep: bool,
}

impl Drop for DestGuard<'_> {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(self.dest);
        }
    }
}

/// Extracts the zip at `zip_path` into `dest`, which must not exist, enforcing
/// every rule in `limits`. On any error `dest` is removed again. Knows no
/// workspace names: any single top-level folder is unwrapped (see
/// [`ingest_with`]).
pub fn ingest(
    zip_path: &Path,
    dest: &Path,
    limits: &IngestLimits,
) -> Result<Ingested, IngestError> {
    ingest_with(zip_path, dest, limits, &IngestOptions::default())
}

/// [`ingest`], normalising with what `options` knows about the workspace.
pub fn ingest_with(
    zip_path: &Path,
    dest: &Path,
    limits: &IngestLimits,
    options: &IngestOptions,
) -> Result<Ingested, IngestError> {
    let dest_display = dest.display().to_string();
    if std::fs::symlink_metadata(dest).is_ok() {
        return Err(IngestError::DestinationExists { path: dest_display });
    }
    let file = File::open(zip_path).map_err(|err| {
        IngestError::Unreadable(format!("cannot open {}: {err}", zip_path.display()))
    })?;
    let file_len = file
        .metadata()
        .map_err(|err| {
            IngestError::Unreadable(format!("cannot stat {}: {err}", zip_path.display()))
        })?
        .len();

    // The archive hash runs on the second core while this thread validates
    // and extracts. It needs its own open file description (a clone would
    // share the file offset), opened on the same inode through /proc.
    let hash_file = File::open(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .or_else(|_| File::open(zip_path))
        .map_err(|err| {
            IngestError::Unreadable(format!("cannot reopen {}: {err}", zip_path.display()))
        })?;
    let stop = Arc::new(AtomicBool::new(false));
    let hasher = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || hash_whole_file(hash_file, &stop))
    };

    let result = (|| {
        let (plan, total_entries, normalised) = plan_entries(&file, file_len, limits, options)?;
        match std::fs::DirBuilder::new().mode(0o755).create(dest) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                return Err(IngestError::DestinationExists { path: dest_display.clone() });
            }
            Err(err) => return Err(IngestError::Io { path: dest_display.clone(), source: err }),
        }
        let mut guard = DestGuard { dest, keep: false };
        let mut ingested = extract(&file, file_len, plan, total_entries, dest, limits)?;
        ingested.normalised = normalised;
        set_aside_bytecode(&mut ingested, dest)?;
        guard.keep = true;
        Ok(ingested)
    })();

    if result.is_err() {
        stop.store(true, Ordering::Relaxed);
    }
    let archive_hash = hasher.join();
    let mut ingested = result?;
    match archive_hash {
        Ok(Ok(hash)) => ingested.archive_sha256 = hash,
        Ok(Err(err)) => {
            let _ = std::fs::remove_dir_all(dest);
            return Err(IngestError::Unreadable(format!(
                "cannot hash {}: {err}",
                zip_path.display()
            )));
        }
        Err(_) => {
            let _ = std::fs::remove_dir_all(dest);
            return Err(IngestError::Unreadable("the archive-hashing thread panicked".into()));
        }
    }
    Ok(ingested)
}

fn hash_whole_file(mut file: File, stop: &AtomicBool) -> io::Result<String> {
    file.seek(SeekFrom::Start(0))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; COPY_BUFFER_BYTES];
    while !stop.load(Ordering::Relaxed) {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// The metadata pass: entry count, names, types, encryption, collisions and
/// layout, all before a byte is decompressed.
fn plan_entries(
    file: &File,
    file_len: u64,
    limits: &IngestLimits,
    options: &IngestOptions,
) -> Result<(Vec<Planned>, usize, Normalised), IngestError> {
    let end = directory::read_end_record(file, file_len)?;
    if end.entries > limits.max_entries as u64 {
        return Err(IngestError::TooManyEntries { count: end.entries, limit: limits.max_entries });
    }
    if end.entries.saturating_mul(46) > end.cd_size {
        return Err(IngestError::Unreadable(format!(
            "the end record claims {} entries but the central directory is only {} bytes",
            end.entries, end.cd_size
        )));
    }

    let mut planned = Vec::with_capacity(end.entries as usize);
    let mut raws = Vec::with_capacity(end.entries as usize);
    directory::read_central_directory(file, &end, limits.max_path_bytes, |raw| {
        let index = raws.len();
        let utf8_flag = raw.flags & (1 << 11) != 0;
        let name = names::decode_name(&raw.name, utf8_flag)?;
        let checked = names::check_name(&name, limits.max_path_bytes, limits.max_path_depth)?;
        let display = format!("{name:?}");

        if raw.flags & 1 != 0 || raw.flags & (1 << 6) != 0 || raw.method == 99 {
            return Err(IngestError::Encrypted { entry: display });
        }
        let mode = raw.external_attributes >> 16;
        let host = raw.made_by >> 8;
        let mut mode_is_dir = false;
        if mode != 0 || host == 3 || host == 19 {
            match mode & 0o170_000 {
                0 | 0o100_000 => {}
                0o040_000 => mode_is_dir = true,
                0o120_000 => return Err(IngestError::Symlink { entry: display }),
                other => {
                    let kind = match other {
                        0o010_000 => "FIFO".to_owned(),
                        0o020_000 => "character device".to_owned(),
                        0o060_000 => "block device".to_owned(),
                        0o140_000 => "socket".to_owned(),
                        _ => {
                            format!("non-regular file (unix type {other:#o}, such as a hard link)")
                        }
                    };
                    return Err(IngestError::SpecialFile { entry: display, kind });
                }
            }
        }
        let is_dir = checked.trailing_slash || mode_is_dir;
        if !is_dir && raw.method != 0 && raw.method != 8 {
            return Err(IngestError::UnsupportedCompression { entry: display, method: raw.method });
        }

        let mtime =
            raw.extended_mtime.or_else(|| directory::dos_to_unix(raw.dos_date, raw.dos_time));
        planned.push(Planned {
            index,
            metadata: is_os_metadata(&checked.path, is_dir),
            backslashes: checked.backslashes.then(|| name.clone()),
            path: checked.path,
            display,
            is_dir,
            executable: !is_dir && mode & 0o111 != 0,
            compressed_size: raw.compressed_size,
            mtime,
        });
        raws.push(raw);
        Ok(())
    })?;

    check_layout(file, &end, &raws, &planned)?;
    let total_entries = planned.len();

    let mut normalised = Normalised::default();
    for name in planned.iter().filter_map(|p| p.backslashes.as_ref()) {
        if normalised.backslashes.len() < NORMALISED_LISTED {
            normalised.backslashes.push(name.clone());
        } else {
            normalised.backslashes_unlisted += 1;
        }
    }
    let (metadata, mut kept): (Vec<Planned>, Vec<Planned>) =
        planned.into_iter().partition(|p| p.metadata);
    for entry in metadata.iter().filter(|p| !p.is_dir) {
        if normalised.dropped.len() < NORMALISED_LISTED {
            normalised.dropped.push(entry.path.clone());
        } else {
            normalised.dropped_unlisted += 1;
        }
    }
    if let Some(folder) = single_top_folder(&kept, options) {
        let prefix = format!("{folder}/");
        kept.retain(|p| p.path != folder);
        for entry in &mut kept {
            entry.path = entry.path[prefix.len()..].to_owned();
        }
        normalised.unwrapped = Some(folder);
    }

    // Every path and every ancestor directory, keyed for collisions, on the
    // names as they will be written.
    let mut seen: HashMap<String, Seen> = HashMap::with_capacity(kept.len() * 2);
    for entry in &kept {
        register_path(&mut seen, &entry.path, &entry.display, entry.is_dir)?;
    }
    Ok((kept, total_entries, normalised))
}

/// Whether a (checked, `/`-separated) path is operating-system metadata that
/// file managers add to the zips they make: anything under `__MACOSX/`
/// (macOS Finder), AppleDouble `._*` files, `.DS_Store`, `Thumbs.db` and
/// `desktop.ini`, in any letter case (the systems that write them ignore
/// case).
fn is_os_metadata(path: &str, is_dir: bool) -> bool {
    let mut components = path.split('/');
    if components.clone().any(|c| c.eq_ignore_ascii_case("__MACOSX")) {
        return true;
    }
    let last = components.next_back().unwrap_or_default();
    !is_dir
        && (last.starts_with("._")
            || last.eq_ignore_ascii_case(".DS_Store")
            || last.eq_ignore_ascii_case("Thumbs.db")
            || last.eq_ignore_ascii_case("desktop.ini"))
}

/// The folder to unwrap: the one top-level folder when every entry is that
/// folder or inside it and something is inside it, unless it is hidden
/// (`.git/` alone is not a workspace) or a name the workspace itself has.
fn single_top_folder(entries: &[Planned], options: &IngestOptions) -> Option<String> {
    let first = entries.first()?;
    let folder = first.path.split('/').next()?;
    let mut inside = false;
    for entry in entries {
        match entry.path.strip_prefix(folder) {
            Some("") if entry.is_dir => {}
            Some(rest) if rest.starts_with('/') => inside = true,
            _ => return None,
        }
    }
    if !inside || folder.starts_with('.') {
        return None;
    }
    let key = names::collision_key(folder);
    if options.workspace_names.iter().any(|name| names::collision_key(name) == key) {
        return None;
    }
    Some(folder.to_owned())
}

/// How a collision key was first used.
struct Seen {
    /// The path as spelled by the entry that introduced it.
    path: String,
    /// The entry's display name.
    entry: String,
    /// Whether some entry named exactly this path.
    explicit: bool,
    is_dir: bool,
}

/// Records a path and its ancestors, refusing duplicates, case or
/// normalisation collisions, and files used as directories.
fn register_path(
    seen: &mut HashMap<String, Seen>,
    path: &str,
    display: &str,
    is_dir: bool,
) -> Result<(), IngestError> {
    // Ancestors first, as implicit directories.
    let mut prefix_end = 0;
    while let Some(slash) = path[prefix_end..].find('/') {
        let ancestor = &path[..prefix_end + slash];
        prefix_end += slash + 1;
        let key = names::collision_key(ancestor);
        match seen.get(&key) {
            None => {
                seen.insert(
                    key,
                    Seen {
                        path: ancestor.to_owned(),
                        entry: display.to_owned(),
                        explicit: false,
                        is_dir: true,
                    },
                );
            }
            Some(prev) if !prev.is_dir => {
                return Err(IngestError::FileDirectoryConflict {
                    entry: prev.entry.clone(),
                    other: display.to_owned(),
                });
            }
            Some(prev) if prev.path != ancestor => {
                return Err(IngestError::NameCollision {
                    entry: display.to_owned(),
                    other: prev.entry.clone(),
                });
            }
            Some(_) => {}
        }
    }
    let key = names::collision_key(path);
    match seen.get_mut(&key) {
        None => {
            seen.insert(
                key,
                Seen { path: path.to_owned(), entry: display.to_owned(), explicit: true, is_dir },
            );
            Ok(())
        }
        Some(prev) if prev.path != path => {
            Err(IngestError::NameCollision { entry: display.to_owned(), other: prev.entry.clone() })
        }
        Some(prev) if prev.explicit && prev.is_dir == is_dir => {
            Err(IngestError::DuplicateName { entry: display.to_owned() })
        }
        Some(prev) if prev.is_dir && is_dir => {
            // An explicit directory entry for a directory already implied.
            prev.explicit = true;
            Ok(())
        }
        Some(prev) if is_dir => Err(IngestError::FileDirectoryConflict {
            entry: prev.entry.clone(),
            other: display.to_owned(),
        }),
        Some(prev) => Err(IngestError::FileDirectoryConflict {
            entry: display.to_owned(),
            other: prev.entry.clone(),
        }),
    }
}

/// Refuses entries whose header-and-data ranges overlap each other or run
/// into the central directory.
fn check_layout(
    file: &File,
    end: &directory::EndRecord,
    raws: &[directory::RawEntry],
    planned: &[Planned],
) -> Result<(), IngestError> {
    let mut ranges = Vec::with_capacity(raws.len());
    for (raw, plan) in raws.iter().zip(planned) {
        if raw.local_header_offset >= end.cd_offset {
            return Err(IngestError::OverlappingEntries {
                entry: plan.display.clone(),
                other: "the central directory".into(),
            });
        }
        let data_start = directory::local_data_start(file, raw, &plan.display)?;
        let data_end = data_start.saturating_add(raw.compressed_size);
        if data_end > end.cd_offset {
            return Err(IngestError::OverlappingEntries {
                entry: plan.display.clone(),
                other: "the central directory".into(),
            });
        }
        ranges.push((raw.local_header_offset, data_end, plan.index));
    }
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        let (_, prev_end, prev_index) = pair[0];
        let (start, _, index) = pair[1];
        if start < prev_end {
            return Err(IngestError::OverlappingEntries {
                entry: planned[index].display.clone(),
                other: planned[prev_index].display.clone(),
            });
        }
    }
    Ok(())
}

/// Running byte counts and the limits they are held to.
struct Budget<'a> {
    limits: &'a IngestLimits,
    total: u64,
    total_compressed: u64,
}

fn extract(
    file: &File,
    file_len: u64,
    plan: Vec<Planned>,
    total_entries: usize,
    dest: &Path,
    limits: &IngestLimits,
) -> Result<Ingested, IngestError> {
    let handle = file
        .try_clone()
        .map_err(|err| IngestError::Unreadable(format!("cannot reopen the archive: {err}")))?;
    let mut archive =
        ZipArchive::new(BufReader::with_capacity(64 << 10, handle)).map_err(|err| {
            IngestError::Unreadable(format!("the zip reader refused the archive: {err}"))
        })?;
    if archive.len() != total_entries {
        return Err(IngestError::Unreadable(format!(
            "the zip reader found {} entries where the central directory lists {}",
            archive.len(),
            total_entries
        )));
    }
    let total_compressed = plan.iter().map(|p| p.compressed_size).sum::<u64>().min(file_len);
    let mut budget = Budget { limits, total: 0, total_compressed };
    let mut made_dirs: HashSet<String> = HashSet::new();
    let mut buf = vec![0u8; COPY_BUFFER_BYTES];
    let mut files = Vec::with_capacity(plan.len());

    for entry in &plan {
        let target = dest.join(&entry.path);
        if entry.is_dir {
            make_dirs(dest, &entry.path, true, &mut made_dirs)?;
            continue;
        }
        make_dirs(dest, &entry.path, false, &mut made_dirs)?;
        let mut zipped = archive.by_index(entry.index).map_err(|err| {
            IngestError::Unreadable(format!("cannot open entry {}: {err}", entry.display))
        })?;
        let mut out = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(if entry.executable { 0o755 } else { 0o644 })
            .custom_flags(libc::O_NOFOLLOW)
            .open(&target)
            .map_err(|err| IngestError::Io { path: target.display().to_string(), source: err })?;
        let copied = copy_entry(&mut zipped, &mut out, entry, &mut budget, &mut buf, &target)?;
        drop(zipped);
        let mode = if entry.executable { 0o755 } else { 0o644 };
        out.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(|err| IngestError::Io { path: target.display().to_string(), source: err })?;
        drop(out);
        if copied.starts_with_zip_magic {
            if limits.max_nesting == 0 {
                return Err(IngestError::NestingTooDeep {
                    entry: entry.display.clone(),
                    depth: 1,
                    limit: 0,
                });
            }
            nesting::inspect(&target, &entry.display, 1, dest, limits)?;
        }
        files.push(IngestedFile {
            path: entry.path.clone(),
            size: copied.size,
            sha256: copied.sha256,
            mtime: entry.mtime,
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Ingested {
        dir: dest.to_path_buf(),
        archive_sha256: String::new(),
        files,
        total_bytes: budget.total,
        normalised: Normalised::default(),
        bytecode: Vec::new(),
    })
}

/// Moves the bytecode caches out of the extracted tree (see
/// [`is_bytecode`]): their bytes are kept, within bounds, for the grader's
/// check, and they are listed in `normalised`.
fn set_aside_bytecode(ingested: &mut Ingested, dest: &Path) -> Result<(), IngestError> {
    let (bytecode, files): (Vec<IngestedFile>, Vec<IngestedFile>) =
        std::mem::take(&mut ingested.files).into_iter().partition(|f| is_bytecode(&f.path));
    ingested.files = files;
    let mut dirs = BTreeSet::new();
    for f in bytecode {
        let path = dest.join(&f.path);
        let bytes =
            if f.size <= SET_ASIDE_READ_BYTES && ingested.bytecode.len() < SET_ASIDE_READ_FILES {
                Some(
                    std::fs::read(&path)
                        .map_err(|source| IngestError::Io { path: f.path.clone(), source })?,
                )
            } else {
                None
            };
        std::fs::remove_file(&path)
            .map_err(|source| IngestError::Io { path: f.path.clone(), source })?;
        let mut parent = Path::new(&f.path).parent();
        while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
            dirs.insert(p.to_path_buf());
            parent = p.parent();
        }
        if ingested.normalised.bytecode.len() < NORMALISED_LISTED {
            ingested.normalised.bytecode.push(f.path.clone());
        } else {
            ingested.normalised.bytecode_unlisted += 1;
        }
        ingested.bytecode.push(SetAside { path: f.path, size: f.size, sha256: f.sha256, bytes });
    }
    // Folders the caches leave empty (`__pycache__/`) go too, deepest first.
    for d in dirs.iter().rev() {
        let _ = std::fs::remove_dir(dest.join(d));
    }
    Ok(())
}

struct Copied {
    size: u64,
    sha256: String,
    starts_with_zip_magic: bool,
}

/// Streams one entry to disk, hashing as it goes and stopping one byte past
/// whichever limit comes first.
fn copy_entry(
    reader: &mut impl Read,
    out: &mut File,
    entry: &Planned,
    budget: &mut Budget<'_>,
    buf: &mut [u8],
    target: &Path,
) -> Result<Copied, IngestError> {
    let limits = budget.limits;
    let entry_ratio_cap =
        limits.max_ratio.saturating_mul(entry.compressed_size).max(RATIO_FLOOR_BYTES);
    let total_ratio_cap =
        limits.max_ratio.saturating_mul(budget.total_compressed).max(RATIO_FLOOR_BYTES);
    let cap = limits
        .max_entry_bytes
        .min(entry_ratio_cap)
        .min(limits.max_total_bytes.saturating_sub(budget.total))
        .min(total_ratio_cap.saturating_sub(budget.total));
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    let mut head = [0u8; 4];
    let mut head_len = 0usize;
    loop {
        let room = cap.saturating_add(1).saturating_sub(size);
        if room == 0 {
            break;
        }
        let want = usize::try_from(room).unwrap_or(usize::MAX).min(buf.len());
        let n = match reader.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(classify_read_error(err, entry)),
        };
        let chunk = &buf[..n];
        if head_len < 4 {
            let take = (4 - head_len).min(n);
            head[head_len..head_len + take].copy_from_slice(&chunk[..take]);
            head_len += take;
        }
        size += n as u64;
        if size > cap {
            break;
        }
        hasher.update(chunk);
        out.write_all(chunk)
            .map_err(|err| IngestError::Io { path: target.display().to_string(), source: err })?;
    }
    if size > cap {
        let display = entry.display.clone();
        return Err(if size > limits.max_entry_bytes {
            IngestError::EntryTooLarge { entry: display, limit: limits.max_entry_bytes }
        } else if budget.total + size > limits.max_total_bytes {
            IngestError::TotalTooLarge { entry: display, limit: limits.max_total_bytes }
        } else if size > entry_ratio_cap {
            IngestError::EntryRatio {
                entry: display,
                compressed: entry.compressed_size,
                limit: limits.max_ratio,
            }
        } else {
            IngestError::TotalRatio {
                entry: display,
                compressed: budget.total_compressed,
                limit: limits.max_ratio,
            }
        });
    }
    budget.total += size;
    Ok(Copied {
        size,
        sha256: hex::encode(hasher.finalize()),
        starts_with_zip_magic: head_len == 4 && head == ZIP_MAGIC,
    })
}

/// Maps the zip crate's read errors onto the refusal they stand for.
fn classify_read_error(err: io::Error, entry: &Planned) -> IngestError {
    let text = err.to_string();
    let display = entry.display.clone();
    if text.contains("Invalid checksum") {
        IngestError::CrcMismatch { entry: display }
    } else if text.contains("larger than its declared") {
        IngestError::SizeMismatch { entry: display }
    } else {
        IngestError::Unreadable(format!("entry {display} could not be decompressed: {text}"))
    }
}

/// Creates the directories of `path` (and `path` itself when it is a
/// directory) under `dest`, remembering what was made so that each is
/// created once. Directories are made with `mkdir`, which never follows an
/// existing symlink.
fn make_dirs(
    dest: &Path,
    path: &str,
    include_self: bool,
    made: &mut HashSet<String>,
) -> Result<(), IngestError> {
    let mut ends: Vec<usize> = path.match_indices('/').map(|(at, _)| at).collect();
    if include_self {
        ends.push(path.len());
    }
    // Walk back to the deepest directory already made, then forward.
    let first_missing =
        ends.iter().rposition(|&end| made.contains(&path[..end])).map_or(0, |found| found + 1);
    for &end in &ends[first_missing..] {
        let dir = &path[..end];
        let full = dest.join(dir);
        match std::fs::DirBuilder::new().mode(0o755).create(&full) {
            Ok(()) => {}
            Err(err) => {
                return Err(IngestError::Io { path: full.display().to_string(), source: err });
            }
        }
        made.insert(dir.to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::IngestError;

    #[test]
    fn each_refusal_names_its_rule() {
        let entry = || "a/../b".to_string();
        let check = [
            (IngestError::PathTraversal { entry: entry() }, "path_traversal"),
            (IngestError::Unreadable("x".into()), "unreadable"),
            (IngestError::TooManyEntries { count: 9, limit: 1 }, "too_many_entries"),
            (IngestError::CrcMismatch { entry: entry() }, "crc_mismatch"),
            (IngestError::Io { path: "p".into(), source: std::io::Error::other("x") }, "io"),
        ];
        for (e, rule) in check {
            assert_eq!(e.rule(), rule, "{e}");
            assert!(!e.to_string().contains(rule), "the rule is a label, not the message: {e}");
        }
    }
}
