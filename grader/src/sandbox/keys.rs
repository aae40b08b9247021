//! The kernel keys a run uid keeps between runs, and their removal.
//!
//! The kernel keeps keyrings per uid, beyond any process: the user keyring
//! (`_uid.<uid>`), the user session keyring (`_uid_ses.<uid>`) and, where
//! the kernel has them, the persistent keyring (`_persistent.<uid>`,
//! `KEYCTL_GET_PERSISTENT`). A key linked into one of them outlives the run
//! that put it there, and the next run of the same uid could find it (the
//! seccomp filter refuses the key system calls to the command, but init's
//! own calls make these keyrings exist, and a kernel path the filter does
//! not cover would reach them). [`clear_uid_keys`] empties each of them and
//! invalidates it, so the kernel collects the keyrings themselves and the
//! uid holds no key afterwards (`/proc/key-users` stops listing it once the
//! kernel's collector has run). The sandbox calls it when a uid is leased
//! (before the run) and when the lease ends (after init and everything in
//! its namespace are dead).
//!
//! It acts as the uid: on a thread of its own whose credentials alone are
//! changed with the raw `setresgid`/`setresuid` system calls (glibc's
//! wrappers would change every thread of the process), so the key lookups
//! (`KEY_SPEC_USER_KEYRING` and the like) resolve to that uid's keyrings;
//! the thread ends with its credentials.

use super::SandboxError;

const KEYCTL_GET_KEYRING_ID: libc::c_long = 0;
const KEYCTL_CLEAR: libc::c_long = 7;
const KEYCTL_INVALIDATE: libc::c_long = 21;
const KEYCTL_GET_PERSISTENT: libc::c_long = 22;
const KEY_SPEC_THREAD_KEYRING: libc::c_long = -1;
const KEY_SPEC_USER_KEYRING: libc::c_long = -4;
const KEY_SPEC_USER_SESSION_KEYRING: libc::c_long = -5;
/// errno values meaning "no such key" or "no keys here": nothing to clear.
const NOTHING_THERE: &[i32] = &[libc::ENOKEY, libc::EKEYREVOKED, libc::EKEYEXPIRED];
/// errno values of a kernel without keys, or without persistent keyrings.
const UNSUPPORTED: &[i32] = &[libc::ENOSYS, libc::EOPNOTSUPP];

fn keyctl(op: libc::c_long, a: libc::c_long, b: libc::c_long) -> Result<libc::c_long, i32> {
    // SAFETY: keyctl operations taking integer arguments only.
    let rc = unsafe { libc::syscall(libc::SYS_keyctl, op, a, b) };
    if rc < 0 { Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0)) } else { Ok(rc) }
}

fn failed(call: String, errno: i32) -> SandboxError {
    SandboxError { call, detail: super::sys::errno_name(errno) }
}

/// Empties and invalidates every keyring the kernel keeps for `uid` (user,
/// user session and persistent), acting as `uid`/`gid` on a thread of its
/// own. A kernel without keys (or without persistent keyrings) has nothing
/// to clear; any other refusal is an error naming the call.
pub fn clear_uid_keys(uid: u32, gid: u32) -> Result<(), SandboxError> {
    std::thread::scope(|s| {
        s.spawn(move || clear_as(uid, gid)).join().unwrap_or_else(|_| {
            Err(SandboxError {
                call: format!("clearing the keys of uid {uid}"),
                detail: "the thread panicked".into(),
            })
        })
    })
}

/// The body of [`clear_uid_keys`], on the thread whose credentials it
/// changes for good.
fn clear_as(uid: u32, gid: u32) -> Result<(), SandboxError> {
    // SAFETY: raw system calls change only this thread's credentials.
    if unsafe { libc::syscall(libc::SYS_setresgid, gid, gid, gid) } != 0 {
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        return Err(failed(format!("setresgid({gid}, {gid}, {gid}) on a key-clearing thread"), e));
    }
    // SAFETY: as above.
    if unsafe { libc::syscall(libc::SYS_setresuid, uid, uid, uid) } != 0 {
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        return Err(failed(format!("setresuid({uid}, {uid}, {uid}) on a key-clearing thread"), e));
    }
    let mut rings = Vec::new();
    // The persistent keyring, linked into this thread's own keyring (so
    // the thread possesses it and may invalidate it).
    match keyctl(KEYCTL_GET_PERSISTENT, -1, KEY_SPEC_THREAD_KEYRING) {
        Ok(id) => rings.push((id, "the persistent keyring")),
        Err(e) if UNSUPPORTED.contains(&e) || NOTHING_THERE.contains(&e) => {}
        Err(e) => return Err(failed(format!("keyctl(KEYCTL_GET_PERSISTENT, uid {uid})"), e)),
    }
    // The user and user session keyrings by id: looking either up by its
    // special id again after the other was invalidated would make both
    // anew.
    for (spec, name) in [
        (KEY_SPEC_USER_KEYRING, "the user keyring"),
        (KEY_SPEC_USER_SESSION_KEYRING, "the user session keyring"),
    ] {
        match keyctl(KEYCTL_GET_KEYRING_ID, spec, 0) {
            Ok(id) => rings.push((id, name)),
            Err(e) if UNSUPPORTED.contains(&e) => return Ok(()),
            Err(e) if NOTHING_THERE.contains(&e) => {}
            Err(e) => {
                return Err(failed(
                    format!("keyctl(KEYCTL_GET_KEYRING_ID, {name} of uid {uid})"),
                    e,
                ));
            }
        }
    }
    for &(id, name) in &rings {
        match keyctl(KEYCTL_CLEAR, id, 0) {
            Ok(_) => {}
            Err(e) if NOTHING_THERE.contains(&e) => {}
            Err(e) => return Err(failed(format!("keyctl(KEYCTL_CLEAR, {name} of uid {uid})"), e)),
        }
    }
    for &(id, name) in rings.iter().rev() {
        match keyctl(KEYCTL_INVALIDATE, id, 0) {
            Ok(_) => {}
            Err(e) if NOTHING_THERE.contains(&e) => {}
            Err(e) => {
                return Err(failed(format!("keyctl(KEYCTL_INVALIDATE, {name} of uid {uid})"), e));
            }
        }
    }
    Ok(())
}
