//! What the grader and the sandbox's init agree on: the fixed descriptor
//! numbers, the step numbers of failures, the result record, and the
//! command context's byte format with its parser.
//!
//! One file, compiled twice: as a module of the `no_std` init image
//! (`grader/init`) and, through `#[path]`, of the grader's sandbox
//! (`sandbox::proto`), so both sides read the same definitions. It uses
//! `core` only.
#![allow(dead_code)]

use core::ffi::CStr;

/// Record kind: a step of the sandbox machinery failed.
pub const KIND_FAILURE: u32 = 1;
/// Record kind: the command finished and init reports the result.
pub const KIND_RESULT: u32 = 2;

/// How many leftover processes one result record can describe.
pub const MAX_LEFTOVERS: usize = 24;
/// How many bytes of a leftover's command line are kept.
pub const LEFTOVER_CMD_BYTES: usize = 112;

/// Steps outside the filesystem plan; plan steps are their index in `ops`.
pub const STEP_CLOSE_FDS: u32 = 10_000;
pub const STEP_LOOPBACK_SOCKET: u32 = 10_001;
pub const STEP_LOOPBACK_IOCTL: u32 = 10_002;
pub const STEP_SETHOSTNAME: u32 = 10_003;
pub const STEP_FORK: u32 = 10_004;
pub const STEP_CGROUP_NS: u32 = 10_006;
pub const STEP_INIT_FDS: u32 = 10_007;
pub const STEP_INIT_EXEC: u32 = 10_008;
pub const STEP_INIT_CTX: u32 = 10_009;
/// `socketpair(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC)` of a run with a host.
pub const STEP_SOCKETPAIR: u32 = 10_010;
/// The `clone` that starts the host process.
pub const STEP_HOST_FORK: u32 = 10_011;
pub const STEP_CMD_DUP2: u32 = 10_100;
pub const STEP_CMD_DEVNULL: u32 = 10_101;
pub const STEP_CMD_CLOEXEC: u32 = 10_102;
pub const STEP_CMD_CHDIR: u32 = 10_103;
pub const STEP_CMD_NO_NEW_PRIVS: u32 = 10_104;
pub const STEP_CMD_SETGROUPS: u32 = 10_105;
pub const STEP_CMD_SETGID: u32 = 10_106;
pub const STEP_CMD_SETUID: u32 = 10_107;
pub const STEP_CMD_EXECVE: u32 = 10_108;
pub const STEP_CMD_CHANNEL: u32 = 10_109;
pub const STEP_CMD_KEYRING: u32 = 10_110;
pub const STEP_CMD_SECCOMP: u32 = 10_111;
/// `fcntl(FD_REPORT, F_DUPFD_CLOEXEC, 16)`: the command of a run with a
/// host moves its report descriptor off fd 4 before the socket goes there.
pub const STEP_CMD_REPORT_FD: u32 = 10_112;
/// `dup2(socket, n)`: the judge's end onto `JUDGE_FD_HOST` in the command,
/// the host's end onto `HOST_FD_JUDGE` in the host.
pub const STEP_CMD_SOCKET: u32 = 10_113;
/// `STEP_CMD_SETRLIMIT + i` is the i-th rlimit of the context.
pub const STEP_CMD_SETRLIMIT: u32 = 10_200;
/// `STEP_CGROUP_JOIN + i` is the i-th cgroup `tasks` file init joins.
pub const STEP_CGROUP_JOIN: u32 = 10_300;
/// The host process's steps are the command's (`STEP_CMD_*`, including
/// `STEP_CMD_SETRLIMIT + i`) plus this offset.
pub const HOST_STEP_OFFSET: u32 = 1_000;

/// argv[0] of the exec'd init, its whole command line.
pub const INIT_ARGV0: &CStr = c"gatehouse-sandbox-init";
/// The exec'd init's name (`/proc/<pid>/comm`, at most 15 bytes).
pub const INIT_COMM: &CStr = c"gatehouse-init";

/// The exec'd init's descriptors: the command's context (a memfd), the
/// report pipe, the go pipe, stdout, stderr and the result channel (open
/// only when the run has one).
pub const FD_CTX: i32 = 3;
pub const FD_REPORT: i32 = 4;
pub const FD_GO: i32 = 5;
pub const FD_OUT: i32 = 6;
pub const FD_ERR: i32 = 7;
pub const FD_CHAN: i32 = 8;

/// In a run with a host: the command's descriptor for its end of the
/// socketpair joining it to the host (the result channel, when the run has
/// one, stays at 3).
pub const JUDGE_FD_HOST: i32 = 4;
/// In a run with a host: the host's descriptor for its end of the
/// socketpair (its only descriptor besides stdio).
pub const HOST_FD_JUDGE: i32 = 3;

/// The first word of an encoded context.
pub const CTX_MAGIC: u64 = 0x3374_696e_6965_7567; // "gueinit3" little-endian
/// Byte offset of the word where init's first image stores when it
/// finished the root (CLOCK_MONOTONIC ns), just before the exec.
pub const CTX_T_ROOT: usize = 8;
/// The largest context the exec'd init reads.
pub const CTX_MAX: usize = 64 << 20;
/// Context flag: drop to the run's uid and gid.
pub const CTX_DROP_UID: u64 = 1;
/// Context flag: the command gets `FD_CHAN` as fd 3.
pub const CTX_CHANNEL: u64 = 2;
/// Context flag: init starts the host process (`host_argv`, `host_envp`,
/// `host_uid`) before the command, joined to it by a socketpair.
pub const CTX_HOST: u64 = 4;

/// `Record::host`: the run has no host.
pub const HOST_NONE: u32 = 0;
/// `Record::host`: the host's main process ended before the command's did;
/// `Record::host_status` is its wait status.
pub const HOST_ENDED: u32 = 1;
/// `Record::host`: the host's main process was alive when the command's
/// ended; init killed it (and reaped it) before listing the leftovers.
pub const HOST_KILLED: u32 = 2;

/// One leftover process as reported by init.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LeftoverRecord {
    pub pid: i32,
    pub len: u32,
    pub cmd: [u8; LEFTOVER_CMD_BYTES],
}

/// The fixed-size message init and the command process send to the parent.
/// It is smaller than `PIPE_BUF`, so each write is atomic.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Record {
    pub kind: u32,
    pub step: u32,
    pub errno: i32,
    /// The wait status of the command's main process.
    pub status: i32,
    pub utime_us: i64,
    pub stime_us: i64,
    pub maxrss_kb: i64,
    /// Non-zero when /tmp or /workspace had no free blocks or inodes left.
    pub disk_full: u32,
    /// How many leftovers are described in `left`.
    pub nleft: u32,
    /// How many leftovers were found in total.
    pub total_left: u32,
    /// `HOST_NONE`, `HOST_ENDED` or `HOST_KILLED`.
    pub host: u32,
    /// The host main process's wait status (with `HOST_ENDED`).
    pub host_status: i32,
    /// Explicit padding (always 0), so the record has no uninitialised bytes.
    pub pad: u32,
    pub left: [LeftoverRecord; MAX_LEFTOVERS],
    /// CLOCK_MONOTONIC (ns) when init: finished the root (before the
    /// exec), started in the exec'd image, got the go byte, reaped the main
    /// process, finished the teardown.
    pub t_ns: [i64; 5],
}

const _: () = assert!(core::mem::size_of::<Record>() < 4096);
const _: () = assert!(
    core::mem::size_of::<Record>() == 64 + MAX_LEFTOVERS * (8 + LEFTOVER_CMD_BYTES) + 5 * 8
);

impl Record {
    pub const SIZE: usize = core::mem::size_of::<Record>();

    pub const ZERO: Record = Record {
        kind: 0,
        step: 0,
        errno: 0,
        status: 0,
        utime_us: 0,
        stime_us: 0,
        maxrss_kb: 0,
        disk_full: 0,
        nleft: 0,
        total_left: 0,
        host: HOST_NONE,
        host_status: 0,
        pad: 0,
        left: [LeftoverRecord { pid: 0, len: 0, cmd: [0; LEFTOVER_CMD_BYTES] }; MAX_LEFTOVERS],
        t_ns: [0; 5],
    };

    /// Decodes a record from exactly `Record::SIZE` bytes.
    pub fn from_bytes(bytes: &[u8]) -> Option<Record> {
        if bytes.len() != Record::SIZE {
            return None;
        }
        // SAFETY: the length is checked and every bit pattern is valid.
        Some(unsafe { core::ptr::read_unaligned(bytes.as_ptr().cast::<Record>()) })
    }

    /// The record's bytes, as written to the report pipe.
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: plain old data of `SIZE` bytes without implicit padding
        // (asserted below), so every byte is initialised.
        unsafe { core::slice::from_raw_parts((self as *const Record).cast::<u8>(), Record::SIZE) }
    }
}

/// The command's context after `parse`: pointers into the parsed buffer
/// (which must stay alive and unmoved while they are used).
///
/// THE FORMAT (every item a little-endian 64-bit word or a run of words, so
/// that a buffer at an 8-byte-aligned address can be used in place):
///
/// ```text
/// CTX_MAGIC, t_root, uid, gid, flags (CTX_DROP_UID | CTX_CHANNEL | CTX_HOST),
/// host_uid
/// n, then n × (resource, rlim_cur, rlim_max)             the rlimits
/// n, then n words, each one `struct sock_filter`         the seccomp program
/// sh, workspace, tmp, dev_null, proc_dir                 strings
/// argv, envp, host_argv, host_envp                       lists
/// string: byte length (without the NUL), the bytes, a NUL, zero padding to 8
/// list:   count, count + 1 zero words (filled with the strings' addresses
///         and a NULL by `parse`), then count strings
/// ```
///
/// Nothing may follow; strings hold no NUL; counts are bounded by the
/// bytes left. With `CTX_HOST`, `host_argv` has at least one string (the
/// program exec'd); without it both host lists are empty.
pub struct Ctx {
    pub t_root: i64,
    pub uid: u32,
    pub gid: u32,
    pub drop_uid: bool,
    pub channel: bool,
    /// Start the host process (uid `host_uid`, gid `gid`) before the command.
    pub host: bool,
    pub host_uid: u32,
    /// `n_rlimits` triples of words: resource, rlim_cur, rlim_max.
    pub rlimits: *const u64,
    pub n_rlimits: usize,
    /// `n_seccomp` 8-byte `struct sock_filter`s.
    pub seccomp: *const u8,
    pub n_seccomp: usize,
    pub sh: *const u8,
    pub workspace: *const u8,
    pub tmp: *const u8,
    pub dev_null: *const u8,
    pub proc_dir: *const u8,
    /// NULL-terminated arrays of NUL-terminated strings.
    pub argv: *const *const u8,
    pub envp: *const *const u8,
    /// The host's argv (its program is `host_argv[0]`) and environment.
    pub host_argv: *const *const u8,
    pub host_envp: *const *const u8,
}

struct Cur<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl Cur<'_> {
    fn word(&mut self) -> Option<u64> {
        let w = self.buf.get(self.at..self.at.checked_add(8)?)?;
        let v = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        self.at += 8;
        Some(v)
    }

    fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.word()?).ok()
    }

    /// A count of items of `words` words each that fit in what is left.
    fn count(&mut self, words: usize) -> Option<usize> {
        let n = usize::try_from(self.word()?).ok()?;
        let left = (self.buf.len() - self.at) / 8;
        (n.checked_mul(words)? <= left).then_some(n)
    }

    /// Skips `n` words; returns the address of the first.
    fn words(&mut self, n: usize) -> Option<*const u8> {
        let end = self.at.checked_add(n.checked_mul(8)?)?;
        if end > self.buf.len() {
            return None;
        }
        let p = self.buf[self.at..].as_ptr();
        self.at = end;
        Some(p)
    }

    fn string(&mut self) -> Option<*const u8> {
        let len = usize::try_from(self.word()?).ok()?;
        let padded = len.checked_add(8)? & !7;
        let end = self.at.checked_add(padded)?;
        let bytes = self.buf.get(self.at..end)?;
        if bytes[..len].contains(&0) || bytes[len..].iter().any(|&b| b != 0) {
            return None;
        }
        let p = bytes.as_ptr();
        self.at = end;
        Some(p)
    }

    fn list(&mut self) -> Option<(*const *const u8, usize)> {
        // Each string takes at least two words.
        let n = self.count(3)?;
        let slots = self.at;
        let table = self.words(n + 1)?;
        for i in 0..n {
            let s = self.string()? as usize as u64;
            self.buf[slots + 8 * i..slots + 8 * i + 8].copy_from_slice(&s.to_le_bytes());
        }
        self.buf[slots + 8 * n..slots + 8 * n + 8].copy_from_slice(&[0; 8]);
        Some((table.cast(), n))
    }
}

/// Checks the context in `buf` and fills its lists' pointer tables in
/// place; None when `buf` is not exactly one encoded context at an
/// 8-byte-aligned address.
pub fn parse(buf: &mut [u8]) -> Option<Ctx> {
    if !(buf.as_ptr() as usize).is_multiple_of(8) || !buf.len().is_multiple_of(8) {
        return None;
    }
    let mut c = Cur { buf, at: 0 };
    if c.word()? != CTX_MAGIC {
        return None;
    }
    let t_root = c.word()? as i64;
    let (uid, gid, flags, host_uid) = (c.u32()?, c.u32()?, c.word()?, c.u32()?);
    if flags & !(CTX_DROP_UID | CTX_CHANNEL | CTX_HOST) != 0 {
        return None;
    }
    let host = flags & CTX_HOST != 0;
    let n_rlimits = c.count(3)?;
    let rlimits = c.words(3 * n_rlimits)?.cast::<u64>();
    let n_seccomp = c.count(1)?;
    let seccomp = c.words(n_seccomp)?;
    let (sh, workspace, tmp, dev_null, proc_dir) =
        (c.string()?, c.string()?, c.string()?, c.string()?, c.string()?);
    let (argv, _) = c.list()?;
    let (envp, _) = c.list()?;
    let (host_argv, n_host_argv) = c.list()?;
    let (host_envp, n_host_envp) = c.list()?;
    if c.at != c.buf.len() || host != (n_host_argv > 0) || (!host && n_host_envp > 0) {
        return None;
    }
    Some(Ctx {
        t_root,
        uid,
        gid,
        drop_uid: flags & CTX_DROP_UID != 0,
        channel: flags & CTX_CHANNEL != 0,
        host,
        host_uid,
        rlimits,
        n_rlimits,
        seccomp,
        n_seccomp,
        sh,
        workspace,
        tmp,
        dev_null,
        proc_dir,
        argv,
        envp,
        host_argv,
        host_envp,
    })
}
