//! File trees on the host: listing and digests, copying without following
//! links, and joining untrusted relative paths safely. A leaf.

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

/// Copies a file or a folder (recursively, regular files only) to `to`,
/// creating parents and overwriting files.
pub fn copy_path(from: &Path, to: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(from)?;
    if meta.is_dir() {
        for entry in walkdir::WalkDir::new(from).follow_links(false) {
            let entry = entry.map_err(io::Error::other)?;
            let dest = to.join(entry.path().strip_prefix(from).unwrap_or(entry.path()));
            if entry.file_type().is_dir() {
                fs::create_dir_all(&dest)?;
            } else if entry.file_type().is_file() {
                copy_file(entry.path(), &dest)?;
            }
        }
        Ok(())
    } else if meta.is_file() {
        copy_file(from, to)
    } else {
        Err(io::Error::other(format!("{} is neither a file nor a folder", from.display())))
    }
}

fn copy_file(from: &Path, to: &Path) -> io::Result<()> {
    clear_for(to)?;
    fs::copy(from, to).map(drop)
}

/// Writes `bytes` to `to`, creating parents and replacing what is there.
pub fn write_file(to: &Path, bytes: &[u8]) -> io::Result<()> {
    clear_for(to)?;
    fs::write(to, bytes)
}

/// Makes room for a new file at `to`.
fn clear_for(to: &Path) -> io::Result<()> {
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent)?;
    }
    // A file in the way may be a symbolic link planted by a submission; it
    // is replaced, never written through.
    if fs::symlink_metadata(to).is_ok() {
        if fs::symlink_metadata(to)?.is_dir() {
            fs::remove_dir_all(to)?;
        } else {
            fs::remove_file(to)?;
        }
    }
    Ok(())
}

/// Removes `paths` (relative) from `root` where they exist; a path that
/// would leave `root` is an error, and nothing is removed through a link.
pub fn remove_paths(root: &Path, paths: &[String]) -> io::Result<()> {
    for p in paths {
        let path = safe_join(root, p)?;
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => fs::remove_dir_all(&path)?,
            Ok(_) => fs::remove_file(&path)?,
            Err(_) => {}
        }
    }
    Ok(())
}

/// `root` joined with the relative path `rel`, refusing any path that could
/// leave `root`: absolute, with `..`, `.` or empty components, or through a
/// symbolic link anywhere below `root`. Every read and write of packet or
/// workspace files by a path the packet names goes through here.
pub fn safe_join(root: &Path, rel: &str) -> io::Result<PathBuf> {
    if !is_safe_relative(rel) || rel.contains('\\') || rel.contains('\0') {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{rel:?} is not a safe relative path (absolute, `..`, or empty parts)")));
    }
    let mut path = root.to_path_buf();
    for part in rel.split('/') {
        path.push(part);
        match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{rel:?} goes through the symbolic link {}; links are never followed", path.display())));
            }
            Ok(_) => {}
            // Nothing further down exists yet, so no link either.
            Err(_) => break,
        }
    }
    Ok(root.join(rel))
}

/// [`is_safe_relative`], and no backslash or NUL (a backslash is a
/// separator on some systems and never in a packet's paths).
pub fn is_safe_path(p: &str) -> bool {
    is_safe_relative(p) && !p.contains('\\') && !p.contains('\0')
}

/// A relative path with `/` separators, no `..`, `.` or empty components.
pub fn is_safe_relative(p: &str) -> bool {
    !p.is_empty() && !p.starts_with('/') && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}
