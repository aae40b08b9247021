//! The grader's work folders (`<tmp>/gatehouse-<kind>-XXXXXX`: a grading,
//! a witnessed run, a self-test, an audit, ...) and the sweep of those a
//! killed process left behind.
//!
//! A [`WorkDir`] is a temporary folder removed when dropped (as
//! `tempfile::TempDir`), with a lock beside it: `<folder>.lock`, a file its
//! process holds an exclusive `flock` on for the folder's life. The kernel
//! lets the lock go when the process dies however it dies (SIGKILL, the OOM
//! killer), so [`sweep`] can tell a dead owner's folder from a live one's
//! whichever process made it: it removes every folder whose lock nobody
//! holds, and its lock file, and never touches a folder whose lock is held.
//! The lock file is created under a temporary name, locked, and only then
//! renamed beside the folder, so a sweeper never finds an unlocked lock of
//! a live folder. A folder whose lock is still under its temporary name is
//! judged by that lock the same way (an owner killed before the rename; a
//! live owner a sweep overtakes between making that lock and taking it
//! makes another folder). A folder with no lock beside it at all (made by a
//! grader from before these locks, or by one killed between making the
//! folder and its lock) is swept only when it is one of the grader's kinds
//! ([`KINDS`]) and has not changed for [`UNLOCKED_AGE`].
//!
//! This is the sandbox's idea for its staging mounts (`sandbox::owner`),
//! applied to the folders outside them. The server sweeps at start and
//! periodically; a sweep never fails its caller (an entry it cannot judge
//! or remove is left and counted).

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The kinds of work folder the grader makes (`gatehouse-<kind>-...`).
pub const KINDS: &[&str] =
    &["grade", "witness", "check", "audit", "starter", "tools", "twins", "pyc"];

/// How long a folder with no lock beside it must have been left unchanged
/// before a sweep removes it (no grading runs this long).
pub const UNLOCKED_AGE: Duration = Duration::from_secs(24 * 3600);

const LOCK_SUFFIX: &str = ".lock";
const LOCK_TMP_SUFFIX: &str = ".lock.tmp";

/// A work folder and the lock that marks it live.
pub struct WorkDir {
    dir: Option<tempfile::TempDir>,
    lock_path: PathBuf,
    _lock: OwnedFd,
}

impl WorkDir {
    /// A new folder `<temp dir>/<prefix>XXXXXX` (the prefix is
    /// `gatehouse-<kind>-`), locked.
    pub fn new(prefix: &str) -> io::Result<WorkDir> {
        WorkDir::new_in(&std::env::temp_dir(), prefix)
    }

    /// A new folder `<base>/<prefix>XXXXXX`, locked.
    pub fn new_in(base: &Path, prefix: &str) -> io::Result<WorkDir> {
        // A sweep that comes between making the temporary lock and taking
        // it judges the owner dead (as it is when killed just after taking
        // it) and removes the folder: then this tries a new name.
        let mut attempt = 0;
        loop {
            attempt += 1;
            match WorkDir::try_new_in(base, prefix) {
                Err(e) if attempt < 8 && e.kind() == io::ErrorKind::Interrupted => continue,
                made => return made,
            }
        }
    }

    /// One attempt of [`WorkDir::new_in`]; `Interrupted` when a sweep took
    /// the folder meanwhile.
    fn try_new_in(base: &Path, prefix: &str) -> io::Result<WorkDir> {
        let dir = tempfile::Builder::new().prefix(prefix).tempdir_in(base)?;
        let name = dir.path().file_name().map(|n| n.to_os_string()).unwrap_or_default();
        let mut tmp_name = name.clone();
        tmp_name.push(LOCK_TMP_SUFFIX);
        let mut lock_name = name;
        lock_name.push(LOCK_SUFFIX);
        let (tmp, lock_path) = (base.join(tmp_name), base.join(lock_name));
        let swept = || {
            io::Error::new(
                io::ErrorKind::Interrupted,
                format!("a sweep took the new work folder {}", dir.path().display()),
            )
        };
        let lock = match try_lock(&tmp, true)? {
            Some(fd) => fd,
            // A sweeper holds it, removing the folder.
            None => return Err(swept()),
        };
        if let Err(e) = fs::rename(&tmp, &lock_path) {
            let _ = fs::remove_file(&tmp);
            // A sweeper removed the temporary lock (and the folder).
            return Err(if e.kind() == io::ErrorKind::NotFound { swept() } else { e });
        }
        if fs::symlink_metadata(dir.path()).is_err() {
            let _ = fs::remove_file(&lock_path);
            return Err(swept());
        }
        Ok(WorkDir { dir: Some(dir), lock_path, _lock: lock })
    }

    pub fn path(&self) -> &Path {
        self.dir.as_ref().map(|d| d.path()).unwrap_or(Path::new(""))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        // The folder first, then its lock: a process killed in between
        // leaves an unlocked lock (and what is left of the folder) that the
        // next sweep removes. A folder that could not be removed whole (an
        // entry busy or still being written) keeps its lock, unlocked once
        // this returns, so the next sweep tries again: without its lock it
        // would be left for `UNLOCKED_AGE`.
        if let Some(dir) = self.dir.take() {
            let path = dir.path().to_path_buf();
            if dir.close().is_err() && fs::symlink_metadata(&path).is_ok() {
                return;
            }
        }
        let _ = fs::remove_file(&self.lock_path);
    }
}

/// Opens `path` (creating it when `create`) without following a link and
/// takes an exclusive `flock` without waiting: `Ok(None)` when another open
/// file holds it.
fn try_lock(path: &Path, create: bool) -> io::Result<Option<OwnedFd>> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    let flags = libc::O_RDWR
        | libc::O_CLOEXEC
        | libc::O_NOFOLLOW
        | if create { libc::O_CREAT | libc::O_EXCL } else { 0 };
    // SAFETY: opens a NUL-terminated path.
    let fd = unsafe { libc::open(c.as_ptr(), flags, 0o600 as libc::c_uint) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just opened and is owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: flock on an owned descriptor.
    if unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(Some(fd));
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) { Ok(None) } else { Err(e) }
}

/// What a sweep found and removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Folders of dead owners removed (and their locks).
    pub folders: u64,
    /// Folders with no lock, unchanged for [`UNLOCKED_AGE`], removed.
    pub unlocked_folders: u64,
    /// Lock files left without their folder, removed.
    pub locks: u64,
    /// Folders of live owners, left alone.
    pub live: u64,
}

/// The kind of a work folder's name (`gatehouse-<kind>-...`), when it is one.
fn kind_of(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("gatehouse-")?;
    let (kind, random) = rest.split_once('-')?;
    (!random.is_empty() && !random.contains('/')).then_some(kind)
}

/// Removes the folder of a dead owner, then its lock (`held` by the sweep
/// meanwhile, so no new owner can take the name), counting it.
fn remove_dead(path: &Path, lock: &Path, held: OwnedFd, swept: &mut Swept) {
    if fs::remove_dir_all(path).is_ok() {
        swept.folders += 1;
        let _ = fs::remove_file(lock);
    }
    drop(held);
}

/// Removes, under `base` (the grader's temporary folder), the work folders
/// whose owner is gone and their locks; leaves every live one.
pub fn sweep(base: &Path) -> Swept {
    let mut swept = Swept::default();
    let Ok(entries) = fs::read_dir(base) else { return swept };
    let names: Vec<String> =
        entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    for name in &names {
        let Some(kind) = kind_of(name) else { continue };
        if name.ends_with(LOCK_SUFFIX) || name.ends_with(LOCK_TMP_SUFFIX) {
            continue;
        }
        let path = base.join(name);
        let Ok(meta) = fs::symlink_metadata(&path) else { continue };
        if !meta.is_dir() {
            continue;
        }
        let lock_path = base.join(format!("{name}{LOCK_SUFFIX}"));
        match try_lock(&lock_path, false) {
            Ok(Some(held)) => remove_dead(&path, &lock_path, held, &mut swept),
            Ok(None) => swept.live += 1,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                // Its owner was killed after taking its lock under the
                // temporary name and before renaming it: that lock, free,
                // says so (an owner still between making it and taking
                // it loses the folder and makes another).
                let tmp_path = base.join(format!("{name}{LOCK_TMP_SUFFIX}"));
                match try_lock(&tmp_path, false) {
                    Ok(Some(held)) => {
                        remove_dead(&path, &tmp_path, held, &mut swept);
                        continue;
                    }
                    Ok(None) => {
                        swept.live += 1;
                        continue;
                    }
                    Err(_) => {}
                }
                let old = meta
                    .modified()
                    .ok()
                    .and_then(|m| SystemTime::now().duration_since(m).ok())
                    .is_some_and(|age| age >= UNLOCKED_AGE);
                if KINDS.contains(&kind) && old && fs::remove_dir_all(&path).is_ok() {
                    swept.unlocked_folders += 1;
                }
            }
            Err(_) => {}
        }
    }
    // Locks whose folder is gone (an owner killed after removing its
    // folder), and temporary locks of owners killed before the rename.
    for name in &names {
        let folder = name.strip_suffix(LOCK_SUFFIX).or_else(|| name.strip_suffix(LOCK_TMP_SUFFIX));
        let Some(folder) = folder.filter(|f| kind_of(f).is_some()) else { continue };
        if fs::symlink_metadata(base.join(folder)).is_ok() {
            continue;
        }
        let path = base.join(name);
        if let Ok(Some(held)) = try_lock(&path, false) {
            if fs::remove_file(&path).is_ok() {
                swept.locks += 1;
            }
            drop(held);
        }
    }
    swept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_of_names() {
        for (name, kind) in [
            ("gatehouse-grade-a1B2c3", Some("grade")),
            ("gatehouse-witness-x", Some("witness")),
            ("gatehouse-sandbox", None),
            ("gatehouse-grade-", None),
            ("tmp-grade-x", None),
        ] {
            assert_eq!(kind_of(name), kind, "{name}");
        }
    }

    #[test]
    fn a_live_folder_is_kept_and_a_dropped_one_leaves_nothing() {
        let base = tempfile::tempdir().unwrap();
        let live = WorkDir::new_in(base.path(), "gatehouse-grade-").unwrap();
        std::fs::write(live.path().join("f"), b"x").unwrap();
        let gone = WorkDir::new_in(base.path(), "gatehouse-check-").unwrap();
        let gone_path = gone.path().to_path_buf();
        drop(gone);
        assert!(!gone_path.exists());
        let s = sweep(base.path());
        assert_eq!(s, Swept { live: 1, ..Swept::default() });
        assert!(live.path().join("f").exists());
        let listed: Vec<_> = std::fs::read_dir(base.path()).unwrap().flatten().collect();
        assert_eq!(listed.len(), 2, "the live folder and its lock only: {listed:?}");
        drop(live);
        assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 0);
    }

    /// An owner killed after taking its lock under the temporary name and
    /// before renaming it: the free temporary lock marks the folder dead
    /// (the soak once left one behind). Held, it marks it live.
    #[test]
    fn a_folder_whose_lock_was_never_renamed_is_judged_by_the_temporary_lock() {
        let base = tempfile::tempdir().unwrap();
        let dead = base.path().join("gatehouse-grade-aAbBcC");
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join("f"), b"x").unwrap();
        let dead_tmp = base.path().join("gatehouse-grade-aAbBcC.lock.tmp");
        drop(try_lock(&dead_tmp, true).unwrap().unwrap());
        let live = base.path().join("gatehouse-grade-dDeEfF");
        std::fs::create_dir(&live).unwrap();
        let live_tmp = base.path().join("gatehouse-grade-dDeEfF.lock.tmp");
        let held = try_lock(&live_tmp, true).unwrap().unwrap();
        let bare = base.path().join("gatehouse-grade-gGhHiI");
        std::fs::create_dir(&bare).unwrap();
        let s = sweep(base.path());
        assert_eq!(s, Swept { folders: 1, live: 1, ..Swept::default() });
        assert!(!dead.exists() && !dead_tmp.exists(), "the dead owner's folder and lock go");
        assert!(live.exists() && live_tmp.exists(), "the live owner's stay");
        assert!(bare.exists(), "a folder with no lock at all waits for UNLOCKED_AGE");
        drop(held);
        assert_eq!(sweep(base.path()).folders, 1);
        assert!(!live.exists() && !live_tmp.exists());
    }

    /// A folder its owner could not remove whole keeps its lock (free), so
    /// the next sweep removes it rather than leave it a day.
    #[test]
    fn a_folder_left_by_a_failed_removal_keeps_its_lock_for_the_sweep() {
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: mounting needs root");
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let dir = WorkDir::new_in(base.path(), "gatehouse-grade-").unwrap();
        let (path, lock) = (dir.path().to_path_buf(), dir.lock_path.clone());
        // A busy entry: a mount point inside the folder (EBUSY on removal).
        let busy = path.join("busy");
        std::fs::create_dir(&busy).unwrap();
        let target = CString::new(busy.as_os_str().as_bytes()).unwrap();
        let fstype = CString::new("tmpfs").unwrap();
        // SAFETY: plain mount(2) of a fresh tmpfs on a folder of our own.
        let mounted = unsafe {
            libc::mount(fstype.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null())
        };
        assert_eq!(mounted, 0, "mount: {}", io::Error::last_os_error());
        drop(dir);
        assert!(path.exists(), "the busy folder stays");
        assert!(lock.exists(), "with its lock");
        assert!(try_lock(&lock, false).unwrap().is_some(), "which nobody holds");
        // Still busy: the sweep keeps the lock too.
        assert_eq!(sweep(base.path()).folders, 0);
        assert!(lock.exists());
        // SAFETY: unmounting what this test mounted.
        assert_eq!(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) }, 0);
        assert_eq!(sweep(base.path()).folders, 1);
        assert!(!path.exists() && !lock.exists());
    }
}
