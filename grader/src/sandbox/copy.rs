//! Copying the workspace into the run's tmpfs and the results back.
//!
//! Both copies run in the parent while no sandboxed process is alive (before
//! the clone and after init is reaped), so nothing can swap a file for a
//! symlink underneath them.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt, lchown, symlink};
use std::path::{Path, PathBuf};

use super::SandboxError;

fn err(call: String, e: io::Error) -> SandboxError {
    SandboxError { call, detail: e.to_string() }
}

/// Copies the host folder `src` into `dst` (an existing empty directory),
/// giving every entry to `uid:gid`. Symlinks are copied as symlinks; special
/// files are skipped. With `group_rw` every directory gets group
/// read, write and search and every regular file group read and write (the
/// judge of a run with a host is in the group).
pub fn copy_in(
    src: &Path,
    dst: &Path,
    uid: u32,
    gid: u32,
    group_rw: bool,
) -> Result<(), SandboxError> {
    let (dir_bits, file_bits) = if group_rw { (0o770, 0o060) } else { (0o700, 0) };
    let entries = fs::read_dir(src).map_err(|e| err(format!("opendir({:?})", src.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| err(format!("readdir({:?})", src.display()), e))?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let meta = fs::symlink_metadata(&from)
            .map_err(|e| err(format!("lstat({:?})", from.display()), e))?;
        let ft = meta.file_type();
        let mode = meta.permissions().mode() & 0o777;
        if ft.is_dir() {
            fs::create_dir(&to).map_err(|e| err(format!("mkdir({:?})", to.display()), e))?;
            fs::set_permissions(&to, fs::Permissions::from_mode(mode | dir_bits))
                .map_err(|e| err(format!("chmod({:?})", to.display()), e))?;
            copy_in(&from, &to, uid, gid, group_rw)?;
        } else if ft.is_file() {
            copy_file(&from, &to, mode)?;
            if file_bits != 0 {
                // Not through open's mode, which the umask trims.
                fs::set_permissions(&to, fs::Permissions::from_mode(mode | file_bits))
                    .map_err(|e| err(format!("chmod({:?})", to.display()), e))?;
            }
        } else if ft.is_symlink() {
            let target = fs::read_link(&from)
                .map_err(|e| err(format!("readlink({:?})", from.display()), e))?;
            symlink(&target, &to).map_err(|e| {
                err(format!("symlink({:?}, {:?})", target.display(), to.display()), e)
            })?;
        } else {
            continue;
        }
        lchown(&to, Some(uid), Some(gid))
            .map_err(|e| err(format!("lchown({:?}, {uid}, {gid})", to.display()), e))?;
    }
    Ok(())
}

/// The staging path of `rel` under `root` (the workspace's tmpfs), for the
/// `what` list of a `RunSpec`: `rel` must be relative, '/'-separated,
/// without empty, `.` or `..` components, and name a regular file or a
/// folder reached through folders only (no symlink anywhere on the way,
/// so nothing done to it leaves `root`).
pub fn checked_path(root: &Path, rel: &str, what: &str) -> Result<PathBuf, SandboxError> {
    let valid = !rel.is_empty()
        && !rel.starts_with('/')
        && rel.split('/').all(|c| !c.is_empty() && c != "." && c != "..");
    if !valid {
        return Err(SandboxError {
            call: format!("{what} {rel:?}"),
            detail: "a path of the workspace must be relative, without `.` or `..`".into(),
        });
    }
    let parts: Vec<&str> = rel.split('/').collect();
    let mut path = root.to_path_buf();
    for (i, part) in parts.iter().enumerate() {
        path.push(part);
        let meta = fs::symlink_metadata(&path)
            .map_err(|e| err(format!("lstat({:?}) of {what}", path.display()), e))?;
        let last = i + 1 == parts.len();
        if !(meta.is_dir() || last && meta.is_file()) {
            return Err(SandboxError {
                call: format!("lstat({:?}) of {what}", path.display()),
                detail: "the path must be a regular file or a folder, never a link, reached through folders only".into(),
            });
        }
    }
    Ok(path)
}

/// Gives `path` and, for a folder, everything beneath it to `uid:gid`, so
/// only that uid and group can read it (the run gives the group to no
/// process): folders 0770, regular files 0660 (0770 when the file had an
/// execute bit), symlinks owned but never followed. The group bits grant
/// nothing here; they carry over to a copy the owner makes in its own
/// (shared) group, where the candidate's code may read and change it (a
/// fixture a hidden test copies for the candidate's program to edit).
pub fn give_to(path: &Path, uid: u32, gid: u32) -> Result<(), SandboxError> {
    let meta =
        fs::symlink_metadata(path).map_err(|e| err(format!("lstat({:?})", path.display()), e))?;
    lchown(path, Some(uid), Some(gid))
        .map_err(|e| err(format!("lchown({:?}, {uid}, {gid})", path.display()), e))?;
    let mode = if meta.is_dir() {
        0o770
    } else if meta.is_file() {
        if meta.permissions().mode() & 0o111 != 0 { 0o770 } else { 0o660 }
    } else {
        return Ok(());
    };
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(|e| err(format!("chmod({:?}, {mode:o})", path.display()), e))?;
    if meta.is_dir() {
        let entries =
            fs::read_dir(path).map_err(|e| err(format!("opendir({:?})", path.display()), e))?;
        for entry in entries {
            let entry = entry.map_err(|e| err(format!("readdir({:?})", path.display()), e))?;
            give_to(&entry.path(), uid, gid)?;
        }
    }
    Ok(())
}

fn copy_file(from: &Path, to: &Path, mode: u32) -> Result<(), SandboxError> {
    let mut src = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(from)
        .map_err(|e| err(format!("open({:?}, O_RDONLY|O_NOFOLLOW)", from.display()), e))?;
    let mut dst: File = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(to)
        .map_err(|e| {
            err(format!("open({:?}, O_WRONLY|O_CREAT|O_EXCL, {mode:o})", to.display()), e)
        })?;
    io::copy(&mut src, &mut dst)
        .map_err(|e| err(format!("copy({:?}, {:?})", from.display(), to.display()), e))?;
    Ok(())
}

/// Caps on what one run may bring back to the host.
#[derive(Debug, Clone, Copy)]
pub struct OutBudget {
    /// Total apparent bytes (a sparse file counts its full length: it would
    /// become that long on the host).
    pub bytes: u64,
    /// Directory entries created on the host (files, directories, links).
    pub files: u64,
}

/// What `copy_out` did not bring back, and why.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct OutStats {
    /// Symlinks and special files (never copied).
    pub skipped_special: u64,
    /// Entries left behind because the byte or file budget ran out.
    pub cut_files: u64,
    /// Apparent bytes of the regular files left behind by the budget.
    pub cut_bytes: u64,
    /// Sparse files left behind: less than half of their length allocated
    /// and more than `SPARSE_SLACK` bytes of holes. Copying would expand
    /// the holes on the host; no honest result file is sparse.
    pub cut_sparse: u64,
    /// Entries left behind because they are nested deeper than
    /// `MAX_OUT_DEPTH` or their path is longer than `MAX_OUT_PATH` bytes
    /// (or could not be read at all).
    pub cut_deep: u64,
    /// Extra names of an inode already copied: recreated as host hard links
    /// to the one copy, charged no bytes.
    pub hard_links: u64,
}

impl OutStats {
    /// Adds another copy's counts to these.
    pub fn add(&mut self, o: &OutStats) {
        self.skipped_special += o.skipped_special;
        self.cut_files += o.cut_files;
        self.cut_bytes += o.cut_bytes;
        self.cut_sparse += o.cut_sparse;
        self.cut_deep += o.cut_deep;
        self.hard_links += o.hard_links;
    }
}

/// Holes a file may have before it counts as sparse (and is not copied).
pub const SPARSE_SLACK: u64 = 1 << 20;

/// Whether a file of `len` bytes with `blocks` 512-byte blocks allocated is
/// mostly holes.
pub fn is_sparse(len: u64, blocks: u64) -> bool {
    let allocated = blocks.saturating_mul(512);
    allocated < len / 2 && len - allocated > SPARSE_SLACK
}

/// Deepest directory nesting copied back (ingestion allows 32).
pub const MAX_OUT_DEPTH: usize = 64;
/// Longest relative path copied back, in bytes (ingestion allows 1024).
pub const MAX_OUT_PATH: usize = 2048;

/// Replaces the contents of the host folder `dst` with the regular files and
/// directories of `src`, within `budget`. Symlinks and special files the
/// command created are skipped and counted; set-id bits are dropped; an
/// inode is copied once (its other names become host hard links); entries
/// beyond the budget, the depth or the path length are left behind and
/// counted. Only failures on the host side are errors: whatever the command
/// left in `src` yields `Ok`.
pub fn copy_out(src: &Path, dst: &Path, budget: OutBudget) -> Result<OutStats, SandboxError> {
    let entries = fs::read_dir(dst).map_err(|e| err(format!("opendir({:?})", dst.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| err(format!("readdir({:?})", dst.display()), e))?;
        let path = entry.path();
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        let res = if is_dir { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
        res.map_err(|e| err(format!("remove({:?})", path.display()), e))?;
    }
    let mut out =
        Out { budget, stats: OutStats::default(), seen: HashMap::new(), bytes: 0, files: 0 };
    out.tree(src, dst, 0, 0)?;
    Ok(out.stats)
}

struct Out {
    budget: OutBudget,
    stats: OutStats,
    /// (dev, ino) of multiply-linked files already copied, and their host copy.
    seen: HashMap<(u64, u64), PathBuf>,
    bytes: u64,
    files: u64,
}

impl Out {
    fn take_file(&mut self) -> bool {
        if self.files >= self.budget.files {
            self.stats.cut_files += 1;
            return false;
        }
        self.files += 1;
        true
    }

    fn tree(
        &mut self,
        src: &Path,
        dst: &Path,
        depth: usize,
        rel_len: usize,
    ) -> Result<(), SandboxError> {
        let Ok(entries) = fs::read_dir(src) else {
            self.stats.cut_deep += 1;
            return Ok(());
        };
        for entry in entries {
            let Ok(entry) = entry else {
                self.stats.cut_deep += 1;
                continue;
            };
            let name = entry.file_name();
            let len = rel_len + 1 + name.len();
            if depth >= MAX_OUT_DEPTH || len > MAX_OUT_PATH {
                self.stats.cut_deep += 1;
                continue;
            }
            let from = entry.path();
            let to = dst.join(&name);
            let Ok(meta) = fs::symlink_metadata(&from) else {
                self.stats.cut_deep += 1;
                continue;
            };
            let mode = meta.permissions().mode() & 0o777;
            if meta.is_dir() {
                if !self.take_file() {
                    continue;
                }
                fs::create_dir(&to).map_err(|e| err(format!("mkdir({:?})", to.display()), e))?;
                fs::set_permissions(&to, fs::Permissions::from_mode(mode | 0o700))
                    .map_err(|e| err(format!("chmod({:?})", to.display()), e))?;
                self.tree(&from, &to, depth + 1, len)?;
            } else if meta.is_file() {
                let key = (meta.dev(), meta.ino());
                let first = if meta.nlink() > 1 { self.seen.get(&key).cloned() } else { None };
                if let Some(first) = first {
                    if !self.take_file() {
                        continue;
                    }
                    fs::hard_link(&first, &to).map_err(|e| {
                        err(format!("link({:?}, {:?})", first.display(), to.display()), e)
                    })?;
                    self.stats.hard_links += 1;
                    continue;
                }
                if is_sparse(meta.len(), meta.blocks()) {
                    self.stats.cut_sparse += 1;
                    continue;
                }
                if self.bytes.saturating_add(meta.len()) > self.budget.bytes {
                    self.stats.cut_files += 1;
                    self.stats.cut_bytes += meta.len();
                    continue;
                }
                if !self.take_file() {
                    self.stats.cut_bytes += meta.len();
                    continue;
                }
                self.bytes += meta.len();
                copy_file(&from, &to, mode)?;
                if meta.nlink() > 1 {
                    self.seen.insert(key, to);
                }
            } else {
                self.stats.skipped_special += 1;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::is_sparse;

    #[test]
    fn sparse_files_are_recognised() {
        let mb = 1u64 << 20;
        for (len, blocks, expect) in [
            (0, 0, false),
            (10, 8, false),
            (16 * mb, 0, true),
            (16 * mb, 16 * mb / 512, false),
            (16 * mb, 7 * mb / 512, true),
            (16 * mb, 9 * mb / 512, false),
            (mb, 0, false),
            (2 * mb + 1, 0, true),
            (u64::MAX, u64::MAX, false),
        ] {
            assert_eq!(is_sparse(len, blocks), expect, "len {len} blocks {blocks}");
        }
    }
}
