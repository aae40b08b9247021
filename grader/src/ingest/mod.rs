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

mod directory;
mod names;
mod nesting;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngestLimits {
    pub max_entries: usize,
    pub max_entry_bytes: u64,
    pub max_total_bytes: u64,
    /// Largest allowed uncompressed/compressed ratio, per entry and overall.
    pub max_ratio: u64,
    /// How deep archives may nest inside the submission (0: no archive
    /// inside the zip at all).
    pub max_nesting: usize,
    pub max_path_bytes: usize,
    pub max_path_depth: usize,
}

impl Default for IngestLimits {
    fn default() -> Self {
        IngestLimits {
            max_entries: 10_000,
            max_entry_bytes: 64 << 20,
            max_total_bytes: 256 << 20,
            max_ratio: 200,
            max_nesting: 1,
            max_path_bytes: 1024,
            max_path_depth: 32,
        }
    }
}

/// One file taken from the archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngestedFile {
    /// Relative path with `/` separators.
    pub path: String,
    pub size: u64,
    /// Hex SHA-256 of the contents.
    pub sha256: String,
    /// Modification time the archive claims, as Unix seconds (UTC), when it
    /// has one.
    pub mtime: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ingested {
    pub dir: PathBuf,
    /// Hex SHA-256 of the archive bytes.
    pub archive_sha256: String,
    /// Files in path order (directories are not listed).
    pub files: Vec<IngestedFile>,
    pub total_bytes: u64,
    /// What ingestion normalised (nothing, for a flat zip made on Linux).
    #[serde(default, skip_serializing_if = "Normalised::is_empty")]
    pub normalised: Normalised,
    /// Bytecode caches (`__pycache__/`, `*.pyc`, `*.pyo`) set aside: never
    /// in `dir`, never run; kept so the grader can check them against
    /// their sources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bytecode: Vec<SetAside>,
}

/// A file ingestion set aside instead of extracting it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetAside {
    pub path: String,
    pub size: u64,
    pub sha256: String,
    /// Its bytes, when small enough to check ([`SET_ASIDE_READ_BYTES`],
    /// at most [`SET_ASIDE_READ_FILES`] files per submission).
    #[serde(skip)]
    pub bytes: Option<Vec<u8>>,
}

/// The largest set-aside file whose bytes are kept for the check.
pub const SET_ASIDE_READ_BYTES: u64 = 1 << 20;
/// How many set-aside files at most have their bytes kept.
pub const SET_ASIDE_READ_FILES: usize = 64;

/// Whether `path` (checked, `/`-separated) is a bytecode cache: anything in
/// a `__pycache__` folder, or a `.pyc`/`.pyo` file anywhere. Only the
/// submitted source runs, so ingestion sets these aside.
pub fn is_bytecode(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.split('/').rev().skip(1).any(|c| c == "__pycache__")
        || lower.ends_with(".pyc")
        || lower.ends_with(".pyo")
}

/// How many names each list of [`Normalised`] keeps; the rest are counted.
pub const NORMALISED_LISTED: usize = 50;

/// What ingestion changed about how the archive was laid out, so that the
/// receipt and the scorecard can say so. None of it is graded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Normalised {
    /// The single top-level folder whose contents became the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unwrapped: Option<String>,
    /// OS metadata files left out (paths as in the archive, `/`-separated),
    /// at most [`NORMALISED_LISTED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<String>,
    /// How many dropped files are not listed in `dropped`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_unlisted: usize,
    /// Entries whose names used `\` as the separator, as the archive spells
    /// them, at most [`NORMALISED_LISTED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backslashes: Vec<String>,
    /// How many such entries are not listed in `backslashes`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub backslashes_unlisted: usize,
    /// Bytecode caches set aside (`Ingested::bytecode`), at most
    /// [`NORMALISED_LISTED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bytecode: Vec<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bytecode_unlisted: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Normalised {
    pub fn is_empty(&self) -> bool {
        self == &Normalised::default()
    }

    /// One sentence per normalisation, for a scorecard or a receipt view.
    pub fn summary(&self) -> Vec<String> {
        let mut out = Vec::new();
        let more = |n: usize| if n == 0 { String::new() } else { format!(" and {n} more") };
        if !self.backslashes.is_empty() {
            let count = self.backslashes.len() + self.backslashes_unlisted;
            out.push(format!(
                "{count} entr{} used `\\` as the folder separator (as Windows PowerShell 5.1 writes); read as `/`: {}{}",
                if count == 1 { "y" } else { "ies" },
                self.backslashes.join(", "),
                more(self.backslashes_unlisted)
            ));
        }
        if let Some(folder) = &self.unwrapped {
            out.push(format!("everything sat in the single folder `{folder}/`; its contents were taken as the submission's root"));
        }
        if !self.dropped.is_empty() {
            out.push(format!(
                "operating-system metadata left out, not graded: {}{}",
                self.dropped.join(", "),
                more(self.dropped_unlisted)
            ));
        }
        if !self.bytecode.is_empty() {
            out.push(format!(
                "bytecode caches set aside, never run (only the submitted source runs): {}{}",
                self.bytecode.join(", "),
                more(self.bytecode_unlisted)
            ));
        }
        out
    }
}

/// What ingestion knows about the workspace the archive will be laid over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestOptions {
    /// Top-level names the workspace itself has (a packet's starter and its
    /// expected files). A single top-level folder with one of these names
    /// (compared ignoring case) is part of the workspace and is kept.
    pub workspace_names: BTreeSet<String>,
}

impl IngestOptions {
    /// Options whose `workspace_names` are the top-level entries of each of
    /// `dirs` (a folder that does not exist adds nothing). Names are only
    /// read, never followed.
    pub fn for_workspace(dirs: &[PathBuf]) -> io::Result<IngestOptions> {
        let mut workspace_names = BTreeSet::new();
        for dir in dirs {
            let entries = match std::fs::read_dir(dir) {
                Ok(entries) => entries,
                Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                Err(err) => return Err(err),
            };
            for entry in entries {
                if let Some(name) = entry?.file_name().to_str() {
                    workspace_names.insert(name.to_owned());
                }
            }
        }
        Ok(IngestOptions { workspace_names })
    }
}

/// Why an archive was refused. Every rule has its own variant, and every
/// message names the entry (as a quoted, escaped string) and the rule.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("the archive could not be read: {0}")]
    Unreadable(String),
    #[error("I/O error while writing {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("the destination {path} already exists; ingestion only writes into a fresh directory")]
    DestinationExists { path: String },
    #[error("the archive declares {count} entries, more than the limit of {limit}")]
    TooManyEntries { count: u64, limit: usize },
    #[error("entry {entry} has a `..` component, which would escape the destination")]
    PathTraversal { entry: String },
    #[error("entry {entry} has an absolute path")]
    AbsolutePath { entry: String },
    #[error("entry {entry} starts with a Windows drive letter")]
    DriveLetter { entry: String },
    #[error("entry {entry} has an empty or `.` path component")]
    EmptyComponent { entry: String },
    #[error("entry {entry} has a NUL or control character in its name")]
    ControlCharacter { entry: String },
    #[error("entry {entry} has a {bytes}-byte path, longer than the limit of {limit} bytes")]
    PathTooLong { entry: String, bytes: usize, limit: usize },
    #[error("entry {entry} is {depth} components deep, deeper than the limit of {limit}")]
    PathTooDeep { entry: String, depth: usize, limit: usize },
    #[error("entry {entry} is flagged as UTF-8 but its name is not valid UTF-8 ({detail})")]
    InvalidUtf8Name { entry: String, detail: String },
    #[error("entry {entry} is a symbolic link; only regular files and directories are accepted")]
    Symlink { entry: String },
    #[error("entry {entry} is a {kind}; only regular files and directories are accepted")]
    SpecialFile { entry: String, kind: String },
    #[error("entry {entry} is encrypted; encrypted entries are not accepted")]
    Encrypted { entry: String },
    #[error(
        "entry {entry} uses compression method {method}; only stored (0) and deflate (8) are accepted"
    )]
    UnsupportedCompression { entry: String, method: u16 },
    #[error("entry {entry} appears more than once in the archive")]
    DuplicateName { entry: String },
    #[error("entries {entry} and {other} differ only by letter case or Unicode normalisation")]
    NameCollision { entry: String, other: String },
    #[error("entry {entry} is a file, but {other} uses it as a directory")]
    FileDirectoryConflict { entry: String, other: String },
    #[error("entry {entry} decompresses to more than the per-entry limit of {limit} bytes")]
    EntryTooLarge { entry: String, limit: u64 },
    #[error(
        "the archive decompresses to more than the total limit of {limit} bytes (reached at entry {entry})"
    )]
    TotalTooLarge { entry: String, limit: u64 },
    #[error(
        "entry {entry} expands from {compressed} compressed bytes past the ratio limit of {limit}:1"
    )]
    EntryRatio { entry: String, compressed: u64, limit: u64 },
    #[error(
        "the archive expands from {compressed} compressed bytes past the overall ratio limit of {limit}:1 (reached at entry {entry})"
    )]
    TotalRatio { entry: String, compressed: u64, limit: u64 },
    #[error("entry {entry} overlaps {other} in the archive, as in overlapping-entry zip bombs")]
    OverlappingEntries { entry: String, other: String },
    #[error("entry {entry} nests archives {depth} deep, deeper than the limit of {limit}")]
    NestingTooDeep { entry: String, depth: usize, limit: usize },
    #[error(
        "entry {entry} is a zip archive that cannot be inspected for nested archives: {detail}"
    )]
    NestedUnreadable { entry: String, detail: String },
    #[error("entry {entry} failed its CRC-32 check")]
    CrcMismatch { entry: String },
    #[error("entry {entry} decompresses to more bytes than its declared size")]
    SizeMismatch { entry: String },
}

impl IngestError {
    /// The rule this refusal broke, as a stable `snake_case` name (a
    /// metrics label, never the message).
    pub fn rule(&self) -> &'static str {
        match self {
            IngestError::Unreadable(..) => "unreadable",
            IngestError::Io { .. } => "io",
            IngestError::DestinationExists { .. } => "destination_exists",
            IngestError::TooManyEntries { .. } => "too_many_entries",
            IngestError::PathTraversal { .. } => "path_traversal",
            IngestError::AbsolutePath { .. } => "absolute_path",
            IngestError::DriveLetter { .. } => "drive_letter",
            IngestError::EmptyComponent { .. } => "empty_component",
            IngestError::ControlCharacter { .. } => "control_character",
            IngestError::PathTooLong { .. } => "path_too_long",
            IngestError::PathTooDeep { .. } => "path_too_deep",
            IngestError::InvalidUtf8Name { .. } => "invalid_utf8_name",
            IngestError::Symlink { .. } => "symlink",
            IngestError::SpecialFile { .. } => "special_file",
            IngestError::Encrypted { .. } => "encrypted",
            IngestError::UnsupportedCompression { .. } => "unsupported_compression",
            IngestError::DuplicateName { .. } => "duplicate_name",
            IngestError::NameCollision { .. } => "name_collision",
            IngestError::FileDirectoryConflict { .. } => "file_directory_conflict",
            IngestError::EntryTooLarge { .. } => "entry_too_large",
            IngestError::TotalTooLarge { .. } => "total_too_large",
            IngestError::EntryRatio { .. } => "entry_ratio",
            IngestError::TotalRatio { .. } => "total_ratio",
            IngestError::OverlappingEntries { .. } => "overlapping_entries",
            IngestError::NestingTooDeep { .. } => "nesting_too_deep",
            IngestError::NestedUnreadable { .. } => "nested_unreadable",
            IngestError::CrcMismatch { .. } => "crc_mismatch",
            IngestError::SizeMismatch { .. } => "size_mismatch",
        }
    }
}

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

/// Writes a deterministic zip of every file and directory under `dir`:
/// sorted entries, deflate, fixed permissions (0644, or 0755 for executables
/// and directories), and modification times from `times` (keyed by relative
/// `/`-separated path) or `default_time`, stored both as a DOS time (UTC) and
/// as an extended-timestamp field. Symbolic links are refused.
pub fn write_zip_from_dir(
    dir: &Path,
    out: &Path,
    times: &BTreeMap<String, i64>,
    default_time: i64,
) -> io::Result<()> {
    let mut entries: Vec<(String, bool, bool)> = Vec::new();
    for item in walkdir::WalkDir::new(dir).min_depth(1).sort_by_file_name() {
        let item = item.map_err(io::Error::other)?;
        let rel = item
            .path()
            .strip_prefix(dir)
            .map_err(io::Error::other)?
            .to_str()
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is not UTF-8", item.path().display()),
                )
            })?
            .replace(std::path::MAIN_SEPARATOR, "/");
        let kind = item.file_type();
        if kind.is_symlink() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("refusing to zip the symlink {rel}"),
            ));
        }
        let executable = kind.is_file()
            && item.metadata().map_err(io::Error::other)?.permissions().mode() & 0o111 != 0;
        entries.push((rel, kind.is_dir(), executable));
    }
    entries.sort();

    let output = File::create(out)?;
    let mut writer = ZipWriter::new(io::BufWriter::new(output));
    let to_io = |err: zip::result::ZipError| io::Error::other(err);
    for (rel, is_dir, executable) in entries {
        let time = times.get(&rel).copied().unwrap_or(default_time);
        let mode = if is_dir || executable { 0o755 } else { 0o644 };
        let options = SimpleFileOptions::default()
            .compression_method(CompressionMethod::Deflated)
            .unix_permissions(mode)
            .last_modified_time(dos_time(time))
            .with_extended_timestamp(u32::try_from(time).ok(), None, None)
            .map_err(to_io)?;
        if is_dir {
            writer.add_directory(format!("{rel}/"), options).map_err(to_io)?;
        } else {
            writer.start_file(rel.as_str(), options).map_err(to_io)?;
            let mut source = File::open(dir.join(&rel))?;
            io::copy(&mut source, &mut writer)?;
        }
    }
    let mut inner = writer.finish().map_err(to_io)?;
    inner.flush()?;
    Ok(())
}

/// Unix seconds to a DOS date and time in UTC, clamped to the range DOS
/// times can hold (1980 to 2107).
fn dos_time(unix: i64) -> zip::DateTime {
    let (low, high) = (
        zip::DateTime::from_date_and_time(1980, 1, 1, 0, 0, 0),
        zip::DateTime::from_date_and_time(2107, 12, 31, 23, 59, 58),
    );
    let clamped = match ::time::OffsetDateTime::from_unix_timestamp(unix) {
        Ok(t) if t.year() < 1980 => low,
        Ok(t) if t.year() <= 2107 => zip::DateTime::from_date_and_time(
            t.year() as u16,
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
        ),
        Ok(_) => high,
        Err(_) if unix < 0 => low,
        Err(_) => high,
    };
    clamped.unwrap_or_default()
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
