//! Host-wide bookkeeping shared by every grader process on the machine:
//! run uids leased with `flock` so no two live runs share one, and the
//! owner lock of each `Sandbox` that lets a later grader sweep what a killed
//! one left behind (staging mounts and folders, cgroups).

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::SandboxError;

/// One lock file per leased uid lives here (mode 0700).
pub const UID_LOCK_DIR: &str = "/run/gatehouse-uids";

fn io_err(call: String, e: std::io::Error) -> SandboxError {
    SandboxError { call, detail: e.to_string() }
}

fn private_dir(dir: &Path) -> Result<(), SandboxError> {
    if !dir.is_dir() {
        fs::create_dir_all(dir).map_err(|e| io_err(format!("mkdir({:?})", dir.display()), e))?;
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
        .map_err(|e| io_err(format!("chmod({:?}, 0700)", dir.display()), e))
}

/// Opens (creating) `path` and takes an exclusive `flock` without waiting;
/// `Ok(None)` when another open file holds it.
fn try_lock(path: &Path, create: bool) -> Result<Option<OwnedFd>, SandboxError> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io_err(format!("{path:?}"), std::io::Error::other(e)))?;
    let flags =
        libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOFOLLOW | if create { libc::O_CREAT } else { 0 };
    // SAFETY: opens a NUL-terminated path.
    let fd = unsafe { libc::open(c.as_ptr(), flags, 0o600 as libc::c_uint) };
    if fd < 0 {
        return Err(io_err(
            format!("open({:?}, O_RDWR|O_CREAT)", path.display()),
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: the descriptor was just opened and is owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: flock on an owned descriptor.
    if unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(Some(fd));
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(None)
    } else {
        Err(io_err(format!("flock({:?}, LOCK_EX|LOCK_NB)", path.display()), e))
    }
}

/// A run uid held for the life of a run. The uid's kernel keys were
/// cleared when it was leased and are cleared again when the lease ends
/// (`keys::clear_uid_keys`), before the lock is let go.
pub struct UidLease {
    pub offset: u32,
    uid: u32,
    gid: u32,
    _lock: OwnedFd,
}

impl Drop for UidLease {
    fn drop(&mut self) {
        // Best effort here (a drop cannot fail); the next lease of the uid
        // clears again and fails the run if it cannot.
        let _ = super::keys::clear_uid_keys(self.uid, self.gid);
    }
}

/// Leases the first free uid `base + (start + i) % range` (its gid is
/// `gid_base` plus the same offset): free means no open file anywhere on
/// the host holds its lock. The uid's kernel keys are cleared before it is
/// handed out; a uid whose keys cannot be cleared is not leased.
pub fn lease_uid(
    base: u32,
    gid_base: u32,
    start: u64,
    range: u64,
) -> Result<UidLease, SandboxError> {
    static READY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let dir = Path::new(UID_LOCK_DIR);
    if !READY.load(std::sync::atomic::Ordering::Relaxed) {
        private_dir(dir)?;
        READY.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    for i in 0..range {
        let offset = ((start + i) % range) as u32;
        let path = dir.join((base + offset).to_string());
        if let Some(lock) = try_lock(&path, true)? {
            let (uid, gid) = (base + offset, gid_base + offset);
            super::keys::clear_uid_keys(uid, gid)?;
            return Ok(UidLease { offset, uid, gid, _lock: lock });
        }
    }
    Err(SandboxError {
        call: format!("flock() of {range} uid locks in {UID_LOCK_DIR}"),
        detail: format!(
            "every run uid from {base} to {} is held by a live run",
            base as u64 + range - 1
        ),
    })
}

/// The lock a live `Sandbox` holds on `<base>/<id>.lock`; every staging
/// folder and cgroup it makes is named `<id>-<n>`.
pub struct OwnerLock {
    pub id: String,
    _lock: OwnedFd,
}

fn random_id() -> Result<String, SandboxError> {
    let mut b = [0u8; 8];
    // SAFETY: getrandom fills the stack buffer.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        return Err(io_err("getrandom(8)".into(), std::io::Error::last_os_error()));
    }
    Ok(format!("g{}", hex::encode(b)))
}

/// Takes a fresh owner lock under `base`. The lock file is created under
/// a temporary name, locked, then renamed into place, so a sweeper never
/// finds an unlocked lock file of a live owner; a sweeper that removed the
/// temporary file between creation and lock makes the rename fail, and a
/// new name is tried.
pub fn take_owner_lock(base: &Path) -> Result<OwnerLock, SandboxError> {
    private_dir(base)?;
    for _ in 0..8 {
        let id = random_id()?;
        let tmp = base.join(format!("{id}.lock.tmp"));
        let Some(lock) = try_lock(&tmp, true)? else { continue };
        let path = base.join(format!("{id}.lock"));
        if fs::rename(&tmp, &path).is_ok() {
            return Ok(OwnerLock { id, _lock: lock });
        }
    }
    Err(SandboxError {
        call: format!("owner lock in {:?}", base.display()),
        detail: "could not take a fresh lock".into(),
    })
}

/// What a sweep removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Swept {
    pub staging_dirs: u64,
    pub cgroups: u64,
    pub locks: u64,
    /// Run uids found holding kernel keys with no run on them, cleared
    /// ([`sweep_uid_keys`]).
    pub uid_keys: u64,
}

/// The uids `/proc/key-users` lists: those holding some key (a uid stays
/// listed until the kernel's collector has run after its last key went).
fn uids_with_keys() -> Vec<u32> {
    fs::read_to_string("/proc/key-users")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim_start().split(':').next()?.trim().parse().ok())
        .collect()
}

/// Clears the kernel keys of every run uid (`base .. base + range`, gid
/// `gid_base` plus the same offset) that holds some and that no live run
/// holds. A run ends by clearing its uid, but a run killed with its grader
/// never does, and the next lease of that uid, which clears it too, may
/// never come. The uid's lock is held while it is cleared, so no run leases
/// it meanwhile; a uid a live run holds is left alone. Returns how many
/// uids were cleared; a uid that cannot be is left for the next sweep (a
/// sweep never fails its caller).
pub fn sweep_uid_keys(base: u32, gid_base: u32, range: u64) -> u64 {
    let ours: Vec<(u32, u32)> = uids_with_keys()
        .into_iter()
        .filter_map(|uid| Some((uid, uid.checked_sub(base).filter(|o| u64::from(*o) < range)?)))
        .collect();
    let dir = Path::new(UID_LOCK_DIR);
    if ours.is_empty() || private_dir(dir).is_err() {
        return 0;
    }
    let mut cleared = 0;
    for (uid, offset) in ours {
        let Ok(Some(lock)) = try_lock(&dir.join(uid.to_string()), true) else { continue };
        if super::keys::clear_uid_keys(uid, gid_base + offset).is_ok() {
            cleared += 1;
        }
        drop(lock);
    }
    cleared
}

/// The owner id a staging folder or cgroup name belongs to: the part
/// before the first '-' (cgroups carry a "gatehouse-" prefix first), when
/// it is an id `take_owner_lock` makes ('g' and 16 hex digits). Names of
/// any other shape (an older grader's `run-<pid>-<n>`) are never swept:
/// nothing tells whether their owner is alive.
fn owner_of(name: &str) -> Option<&str> {
    let id = name.split('-').next()?;
    let hex = id.strip_prefix('g')?;
    (hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// Removes the staging folders, mounts and cgroups of owners that are gone
/// (their lock file is not held, or missing), and their lock files.
/// Folders of a live owner (its lock is held) are left alone; the lock is
/// checked when the folder is judged, after the listing, so an owner that
/// started during the sweep is seen. Errors on single entries are skipped:
/// a sweep never fails a new sandbox.
pub fn sweep(base: &Path, cgroup_roots: &[PathBuf]) -> Swept {
    let mut swept = Swept::default();
    let Ok(entries) = fs::read_dir(base) else { return swept };
    let entries: Vec<_> = entries.flatten().collect();
    // owner id -> Some(held lock) when stale, None when live.
    let mut state: BTreeMap<String, Option<Option<OwnedFd>>> = BTreeMap::new();
    let mut is_stale = |owner: &str| -> bool {
        let st = state.entry(owner.to_string()).or_insert_with(|| {
            match try_lock(&base.join(format!("{owner}.lock")), false) {
                Ok(None) => None,
                Ok(Some(fd)) => Some(Some(fd)),
                Err(_) => Some(None),
            }
        });
        st.is_some()
    };
    for e in &entries {
        let name = e.file_name().to_string_lossy().into_owned();
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Some(owner) = owner_of(&name) else { continue };
        if !is_stale(owner) {
            continue;
        }
        let path = e.path();
        for sub in ["ws", "ev"] {
            if let Ok(c) = CString::new(path.join(sub).as_os_str().as_bytes()) {
                // SAFETY: unmounts a NUL-terminated path; EINVAL when not mounted.
                unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
            }
        }
        if fs::remove_dir_all(&path).is_ok() {
            swept.staging_dirs += 1;
        }
    }
    for root in cgroup_roots {
        let Ok(list) = fs::read_dir(root) else { continue };
        for e in list.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(owner) = name.strip_prefix("gatehouse-").and_then(owner_of) else { continue };
            if is_stale(owner) && fs::remove_dir(e.path()).is_ok() {
                swept.cgroups += 1;
            }
        }
    }
    // Release the stale locks taken above before locking each file anew.
    drop(state);
    for e in &entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(id) = name.strip_suffix(".lock.tmp").or_else(|| name.strip_suffix(".lock")) else {
            continue;
        };
        if owner_of(id).is_none() {
            continue;
        }
        let path = e.path();
        if let Ok(Some(fd)) = try_lock(&path, false) {
            if fs::remove_file(&path).is_ok() {
                swept.locks += 1;
            }
            drop(fd);
        }
    }
    swept
}

#[cfg(test)]
mod tests {
    use super::owner_of;

    #[test]
    fn owners_of_names() {
        for (name, owner) in [
            ("g0123456789abcdef-4", Some("g0123456789abcdef")),
            ("g0123456789abcdef", Some("g0123456789abcdef")),
            ("g0123456789abcdeg-4", None),
            ("g0123456789abcde-4", None),
            ("run-77-3", None),
            ("probe-1", None),
            ("", None),
        ] {
            assert_eq!(owner_of(name), owner, "{name}");
        }
    }
}
