//! Copying the workspace into the run's tmpfs and the results back.
//!
//! Both copies run in the parent while no sandboxed process is alive (before
//! the clone and after init is reaped), so nothing can swap a file for a
//! symlink underneath them.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt, lchown, symlink};
use std::path::Path;

use super::SandboxError;

fn err(call: String, e: io::Error) -> SandboxError {
    SandboxError { call, detail: e.to_string() }
}

/// Copies the host folder `src` into `dst` (an existing empty directory),
/// giving every entry to `uid:gid`. Symlinks are copied as symlinks; special
/// files are skipped.
pub fn copy_in(src: &Path, dst: &Path, uid: u32, gid: u32) -> Result<(), SandboxError> {
    let entries = fs::read_dir(src).map_err(|e| err(format!("opendir({:?})", src.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| err(format!("readdir({:?})", src.display()), e))?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let meta = fs::symlink_metadata(&from).map_err(|e| err(format!("lstat({:?})", from.display()), e))?;
        let ft = meta.file_type();
        let mode = meta.permissions().mode() & 0o777;
        if ft.is_dir() {
            fs::create_dir(&to).map_err(|e| err(format!("mkdir({:?})", to.display()), e))?;
            fs::set_permissions(&to, fs::Permissions::from_mode(mode | 0o700))
                .map_err(|e| err(format!("chmod({:?})", to.display()), e))?;
            copy_in(&from, &to, uid, gid)?;
        } else if ft.is_file() {
            copy_file(&from, &to, mode)?;
        } else if ft.is_symlink() {
            let target = fs::read_link(&from).map_err(|e| err(format!("readlink({:?})", from.display()), e))?;
            symlink(&target, &to).map_err(|e| err(format!("symlink({:?}, {:?})", target.display(), to.display()), e))?;
        } else {
            continue;
        }
        lchown(&to, Some(uid), Some(gid))
            .map_err(|e| err(format!("lchown({:?}, {uid}, {gid})", to.display()), e))?;
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
        .map_err(|e| err(format!("open({:?}, O_WRONLY|O_CREAT|O_EXCL, {mode:o})", to.display()), e))?;
    io::copy(&mut src, &mut dst).map_err(|e| err(format!("copy({:?}, {:?})", from.display(), to.display()), e))?;
    Ok(())
}

/// Replaces the contents of the host folder `dst` with the regular files and
/// directories of `src`. Symlinks and special files the command created are
/// skipped and counted; set-id bits are dropped. Returns the skipped count.
pub fn copy_out(src: &Path, dst: &Path) -> Result<u64, SandboxError> {
    let entries = fs::read_dir(dst).map_err(|e| err(format!("opendir({:?})", dst.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| err(format!("readdir({:?})", dst.display()), e))?;
        let path = entry.path();
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        let res = if is_dir { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
        res.map_err(|e| err(format!("remove({:?})", path.display()), e))?;
    }
    let mut skipped = 0;
    copy_tree_out(src, dst, &mut skipped)?;
    Ok(skipped)
}

fn copy_tree_out(src: &Path, dst: &Path, skipped: &mut u64) -> Result<(), SandboxError> {
    let entries = fs::read_dir(src).map_err(|e| err(format!("opendir({:?})", src.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| err(format!("readdir({:?})", src.display()), e))?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let meta = fs::symlink_metadata(&from).map_err(|e| err(format!("lstat({:?})", from.display()), e))?;
        let mode = meta.permissions().mode() & 0o777;
        if meta.is_dir() {
            fs::create_dir(&to).map_err(|e| err(format!("mkdir({:?})", to.display()), e))?;
            fs::set_permissions(&to, fs::Permissions::from_mode(mode | 0o700))
                .map_err(|e| err(format!("chmod({:?})", to.display()), e))?;
            copy_tree_out(&from, &to, skipped)?;
        } else if meta.is_file() {
            copy_file(&from, &to, mode)?;
        } else {
            *skipped += 1;
        }
    }
    Ok(())
}
