//! What ingestion takes and gives: its limits and options, the ingested
//! tree and what was set aside or normalised, and the refusals.

use std::collections::BTreeSet;
use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

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
