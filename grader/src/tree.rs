//! File trees on the host: listing and digests, copying without following
//! links, and joining untrusted relative paths safely. A leaf.
//!
//! `copy_path` copies between two folders the grader chose, through `Root`
//! handles (`crate::root`), so neither end is reached through a link.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// A file of a tree: relative path to (size, hex SHA-256).
pub type Tree = BTreeMap<String, (u64, String)>;

/// Lists the regular files under `root` with their digests. Symbolic links
/// are not followed and not listed.
pub fn list_files(root: &Path) -> io::Result<Tree> {
    let mut tree = Tree::new();
    for entry in walkdir::WalkDir::new(root).follow_links(false).sort_by_file_name() {
        let entry = entry.map_err(io::Error::other)?;
        if !entry.file_type().is_file() {
            continue;
        }
        let rel = relative(root, entry.path());
        let bytes = fs::read(entry.path())?;
        tree.insert(rel, (bytes.len() as u64, sha256_hex(&bytes)));
    }
    Ok(tree)
}

/// Relative paths of the regular files under `root`, sorted.
pub fn list_paths(root: &Path) -> Vec<String> {
    walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| relative(root, e.path()))
        .collect()
}

/// The digest of a tree: SHA-256 over `path\0sha\n` lines in path order.
pub fn tree_digest(tree: &Tree) -> String {
    let mut h = Sha256::new();
    for (path, (_, sha)) in tree {
        h.update(path.as_bytes());
        h.update([0]);
        h.update(sha.as_bytes());
        h.update([b'\n']);
    }
    hex::encode(h.finalize())
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `path` relative to `root`, with `/` separators.
pub fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

pub use crate::root::{Kind, Root, is_safe_path, is_safe_relative};

/// Copies a file or a folder (recursively, regular files and folders only,
/// links neither copied nor followed) from the host path `from` to `to`,
/// creating parents and replacing files in the way. Both are paths the
/// grader chose; what lies beneath them is read and written through
/// [`Root`] handles.
pub fn copy_path(from: &Path, to: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(from)?;
    if meta.is_dir() {
        Root::open(from)?.copy("", &Root::create(to)?, "")
    } else if meta.is_file() {
        let (src, name) = parent_and_name(from)?;
        let (dst, to_name) = parent_and_name(to)?;
        Root::open(&src)?.copy(&name, &Root::create(&dst)?, &to_name)
    } else {
        Err(io::Error::other(format!("{} is neither a file nor a folder", from.display())))
    }
}

fn parent_and_name(p: &Path) -> io::Result<(PathBuf, String)> {
    let name = p
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| io::Error::other(format!("{}: no file name", p.display())))?;
    let parent = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    Ok((parent.to_path_buf(), name.to_string()))
}

/// Removes `paths` (relative) from `root` where they exist; a path that
/// would leave `root` is an error, and nothing is removed through a link.
pub fn remove_paths(root: &Path, paths: &[String]) -> io::Result<()> {
    let root = Root::open(root)?;
    for p in paths {
        root.remove(p)?;
    }
    Ok(())
}
