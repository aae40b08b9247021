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

use std::path::{Path, PathBuf};

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
}

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("the archive could not be read: {0}")]
    Unreadable(String),
    #[error("I/O error while writing {path}: {source}")]
    Io { path: String, source: std::io::Error },
    // The helper adds one variant per refusal rule.
}

pub fn ingest(zip_path: &Path, dest: &Path, limits: &IngestLimits) -> Result<Ingested, IngestError> {
    let _ = (zip_path, dest, limits);
    todo!("ingest helper implements")
}
