//! The code that runs after `clone`: the namespace init, in two images,
//! and the command process it forks.
//!
//! `init_main` runs in the cloned child (CLONE_VM|CLONE_VFORK: it shares
//! the parent's memory, on its own stack, while the parent waits) and so
//! must not allocate, lock or call anything that may take a lock held by a
//! thread that does not exist in the child. It joins the cgroups, builds
//! the root, moves its descriptors to fixed numbers (`FD_*`) and execs the
//! grader's own executable (an fd opened before the clone) with argv
//! `[INIT_ARGV0]` and an empty environment. In the fresh image the
//! `.init_array` constructor `EXEC_INIT` (linked into every binary that
//! uses the sandbox) sees that argv in PID 1 of a new namespace and runs
//! `exec_init_main` before any `main`: it reads the command's context
//! (`CmdCtx`, written by the parent into a memfd) from `FD_CTX`, waits for
//! the go byte, forks the command, reaps, reports and exits. Its memory
//! holds the executable's image and that context, no copy of the grader's.
//! Failures are reported through a pipe as fixed-size `Record`s.

use std::ffi::{CStr, CString, c_char, c_int, c_ulong};
use std::os::fd::RawFd;
use std::ptr;

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
pub const STEP_CGROUP_NS: u32 = 10_006;
pub const STEP_INIT_FDS: u32 = 10_007;
pub const STEP_INIT_EXEC: u32 = 10_008;
pub const STEP_INIT_CTX: u32 = 10_009;

/// argv[0] of the exec'd init, its whole command line.
pub const INIT_ARGV0: &CStr = c"gatehouse-sandbox-init";
/// The exec'd init's name (`/proc/<pid>/comm`, at most 15 bytes).
pub const INIT_COMM: &CStr = c"gatehouse-init";

/// The exec'd init's descriptors: the command's context (a memfd), the
/// report pipe, the go pipe, stdout, stderr and the result channel (open
/// only when the run has one).
pub const FD_CTX: c_int = 3;
pub const FD_REPORT: c_int = 4;
pub const FD_GO: c_int = 5;
pub const FD_OUT: c_int = 6;
pub const FD_ERR: c_int = 7;
pub const FD_CHAN: c_int = 8;

/// The first 8 bytes of an encoded `CmdCtx`.
const CTX_MAGIC: u64 = 0x7469_6e69_6573_7567; // "guesinit" little-endian
/// Byte offset of the slot where the first image stores when it finished
/// the root (CLOCK_MONOTONIC ns), just before the exec.
const CTX_T_ROOT: usize = 8;
/// The largest context the exec'd init reads.
const CTX_MAX: usize = 64 << 20;
/// `STEP_CMD_SETRLIMIT + i` is the i-th entry of `ChildCtx::rlimits`.
pub const STEP_CMD_SETRLIMIT: u32 = 10_200;
/// `STEP_CGROUP_JOIN + i` is the i-th entry of `ChildCtx::cgroup_tasks`.
pub const STEP_CGROUP_JOIN: u32 = 10_300;

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
    pub left: [LeftoverRecord; MAX_LEFTOVERS],
    /// CLOCK_MONOTONIC (ns) when init: finished the root (before the
    /// exec), started in the exec'd image, got the go byte, reaped the main
    /// process, finished the teardown.
    pub t_ns: [i64; 5],
}

const _: () = assert!(std::mem::size_of::<Record>() < 4096);

impl Record {
    pub const SIZE: usize = std::mem::size_of::<Record>();

    fn zeroed() -> Record {
        // SAFETY: the record is plain old data; all-zero bytes are valid.
        unsafe { std::mem::zeroed() }
    }

    /// Decodes a record from exactly `Record::SIZE` bytes.
    pub fn from_bytes(bytes: &[u8]) -> Option<Record> {
        if bytes.len() != Record::SIZE {
            return None;
        }
        // SAFETY: the length is checked and every bit pattern is valid.
        Some(unsafe { ptr::read_unaligned(bytes.as_ptr().cast::<Record>()) })
    }
}

/// One step of building the new root, prepared by the parent.
pub enum Op {
    Mount {
        src: Option<CString>,
        target: CString,
        fstype: Option<CString>,
        flags: c_ulong,
        data: Option<CString>,
    },
    /// `mkdir`; an existing directory is not an error.
    Mkdir { path: CString, mode: libc::mode_t },
    Symlink { target: CString, link: CString },
    /// Creates (or truncates) a file and writes `data` into it.
    WriteFile { path: CString, data: Vec<u8>, mode: libc::mode_t },
    Chdir { path: CString },
    PivotRoot { new_root: CString, put_old: CString },
    Umount { target: CString, flags: c_int },
}

/// Everything the first image of init needs, prepared before `clone`.
pub struct ChildCtx {
    pub ops: Vec<Op>,
    /// The exec'd init reads one byte from it before forking the command.
    pub go_r: RawFd,
    pub report_w: RawFd,
    pub out_w: RawFd,
    pub err_w: RawFd,
    /// The result channel's write end, given to the command as fd 3; -1
    /// when the run has no channel.
    pub chan_w: RawFd,
    /// The memfd holding the encoded `CmdCtx`.
    pub ctx_fd: RawFd,
    /// The executable init execs (the grader's own, opened at
    /// `Sandbox::new`).
    pub exe_fd: RawFd,
    pub loopback: Option<libc::ifreq>,
    pub hostname: Option<CString>,
    /// The v1 `tasks` files of the run's cgroups; init writes "0" to each.
    pub cgroup_tasks: Vec<CString>,
    /// Init enters a new cgroup namespace after joining the run's cgroups,
    /// so the command sees its cgroup as `/`.
    pub cgroup_ns: bool,
    /// The stack the first image runs on until it execs.
    pub stack: Vec<u8>,
    /// `[INIT_ARGV0, NULL]` and `[NULL]`.
    pub init_argv: [*const c_char; 2],
    pub init_envp: [*const c_char; 1],
}

/// What the exec'd init needs to start the command; the parent encodes it
/// into a memfd, init decodes it after the exec.
#[derive(Debug, PartialEq)]
pub struct CmdCtx {
    pub rlimits: Vec<(libc::__rlimit_resource_t, libc::rlimit)>,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    pub drop_uid: bool,
    /// The command gets `FD_CHAN` as fd 3.
    pub channel: bool,
    pub sh: CString,
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
    pub workspace: CString,
    pub tmp: CString,
    pub dev_null: CString,
    pub proc_dir: CString,
    /// The seccomp program installed in the command process right before
    /// exec (empty: none).
    pub seccomp: Vec<(u16, u8, u8, u32)>,
}

impl CmdCtx {
    /// The bytes `decode` reads: magic, the t_root slot, then each field
    /// (integers little-endian, strings and lists length-prefixed).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(4096);
        b.extend_from_slice(&CTX_MAGIC.to_le_bytes());
        b.extend_from_slice(&0i64.to_le_bytes());
        let u32_ = |b: &mut Vec<u8>, v: u32| b.extend_from_slice(&v.to_le_bytes());
        let u64_ = |b: &mut Vec<u8>, v: u64| b.extend_from_slice(&v.to_le_bytes());
        let str_ = |b: &mut Vec<u8>, s: &CString| {
            b.extend_from_slice(&(s.as_bytes().len() as u32).to_le_bytes());
            b.extend_from_slice(s.as_bytes());
        };
        u32_(&mut b, self.uid);
        u32_(&mut b, self.gid);
        u32_(&mut b, self.drop_uid as u32);
        u32_(&mut b, self.channel as u32);
        u32_(&mut b, self.rlimits.len() as u32);
        for (res, lim) in &self.rlimits {
            u32_(&mut b, *res);
            u64_(&mut b, lim.rlim_cur);
            u64_(&mut b, lim.rlim_max);
        }
        u32_(&mut b, self.seccomp.len() as u32);
        for (code, jt, jf, k) in &self.seccomp {
            b.extend_from_slice(&code.to_le_bytes());
            b.push(*jt);
            b.push(*jf);
            u32_(&mut b, *k);
        }
        for s in [&self.sh, &self.workspace, &self.tmp, &self.dev_null, &self.proc_dir] {
            str_(&mut b, s);
        }
        for list in [&self.argv, &self.envp] {
            u32_(&mut b, list.len() as u32);
            for s in list {
                str_(&mut b, s);
            }
        }
        b
    }

    /// Decodes `encode`'s bytes; None when they are not exactly that.
    pub fn decode(bytes: &[u8]) -> Option<(CmdCtx, i64)> {
        struct Cur<'a>(&'a [u8]);
        impl Cur<'_> {
            fn take(&mut self, n: usize) -> Option<&[u8]> {
                if self.0.len() < n {
                    return None;
                }
                let (a, rest) = self.0.split_at(n);
                self.0 = rest;
                Some(a)
            }
            fn u8(&mut self) -> Option<u8> {
                Some(self.take(1)?[0])
            }
            fn u16(&mut self) -> Option<u16> {
                Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
            }
            fn u32(&mut self) -> Option<u32> {
                Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
            }
            fn u64(&mut self) -> Option<u64> {
                Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
            }
            fn flag(&mut self) -> Option<bool> {
                match self.u32()? {
                    0 => Some(false),
                    1 => Some(true),
                    _ => None,
                }
            }
            fn cstring(&mut self) -> Option<CString> {
                let n = self.u32()? as usize;
                CString::new(self.take(n)?.to_vec()).ok()
            }
            fn count(&mut self, each: usize) -> Option<usize> {
                let n = self.u32()? as usize;
                (n.checked_mul(each)? <= self.0.len()).then_some(n)
            }
        }
        let mut c = Cur(bytes);
        if c.u64()? != CTX_MAGIC {
            return None;
        }
        let t_root = c.u64()? as i64;
        let (uid, gid, drop_uid, channel) = (c.u32()?, c.u32()?, c.flag()?, c.flag()?);
        let n = c.count(20)?;
        let mut rlimits = Vec::with_capacity(n);
        for _ in 0..n {
            let res = c.u32()?;
            rlimits.push((res, libc::rlimit { rlim_cur: c.u64()?, rlim_max: c.u64()? }));
        }
        let n = c.count(8)?;
        let mut seccomp = Vec::with_capacity(n);
        for _ in 0..n {
            seccomp.push((c.u16()?, c.u8()?, c.u8()?, c.u32()?));
        }
        let (sh, workspace, tmp, dev_null, proc_dir) = (c.cstring()?, c.cstring()?, c.cstring()?, c.cstring()?, c.cstring()?);
        let mut lists = [Vec::new(), Vec::new()];
        for list in &mut lists {
            let n = c.count(4)?;
            for _ in 0..n {
                list.push(c.cstring()?);
            }
        }
        if !c.0.is_empty() {
            return None;
        }
        let [argv, envp] = lists;
        let ctx = CmdCtx { rlimits, uid, gid, drop_uid, channel, sh, argv, envp, workspace, tmp, dev_null, proc_dir, seccomp };
        Some((ctx, t_root))
    }
}

/// What the command process works from (it shares the exec'd init's
/// memory until it execs).
struct CmdRun<'a> {
    cmd: &'a CmdCtx,
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
    seccomp: Vec<libc::sock_filter>,
    report_w: RawFd,
    out_w: RawFd,
    err_w: RawFd,
    /// -1 when the run has no channel.
    chan_w: RawFd,
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Writes a failure record and exits; never returns.
fn fail(fd: RawFd, step: u32, err: i32) -> ! {
    let mut rec = Record::zeroed();
    rec.kind = KIND_FAILURE;
    rec.step = step;
    rec.errno = err;
    write_record(fd, &rec);
    // SAFETY: `_exit` is async-signal-safe and does not return.
    unsafe { libc::_exit(126) }
}

fn write_record(fd: RawFd, rec: &Record) {
    // SAFETY: the record is plain data of `Record::SIZE` bytes.
    unsafe {
        libc::write(fd, (rec as *const Record).cast(), Record::SIZE);
    }
}

fn opt_ptr(s: &Option<CString>) -> *const c_char {
    s.as_ref().map_or(ptr::null(), |s| s.as_ptr())
}

/// Runs one plan step with raw system calls; returns the errno on failure.
fn run_op(op: &Op) -> Result<(), i32> {
    // SAFETY: every pointer comes from a live CString or Vec owned by `op`.
    let rc = unsafe {
        match op {
            Op::Mount { src, target, fstype, flags, data } => libc::mount(
                opt_ptr(src),
                target.as_ptr(),
                opt_ptr(fstype),
                *flags,
                opt_ptr(data).cast(),
            ),
            Op::Mkdir { path, mode } => {
                let rc = libc::mkdir(path.as_ptr(), *mode);
                if rc != 0 && errno() == libc::EEXIST { 0 } else { rc }
            }
            Op::Symlink { target, link } => libc::symlink(target.as_ptr(), link.as_ptr()),
            Op::WriteFile { path, data, mode } => {
                let fd = libc::open(
                    path.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
                    *mode as libc::c_uint,
                );
                if fd < 0 {
                    -1
                } else {
                    let mut off = 0;
                    let mut rc = 0;
                    while off < data.len() {
                        let n = libc::write(fd, data[off..].as_ptr().cast(), data.len() - off);
                        if n <= 0 {
                            rc = -1;
                            break;
                        }
                        off += n as usize;
                    }
                    let e = errno();
                    libc::close(fd);
                    if rc != 0 {
                        return Err(e);
                    }
                    0
                }
            }
            Op::Chdir { path } => libc::chdir(path.as_ptr()),
            Op::PivotRoot { new_root, put_old } => {
                libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr()) as c_int
            }
            Op::Umount { target, flags } => libc::umount2(target.as_ptr(), *flags),
        }
    };
    if rc == 0 { Ok(()) } else { Err(errno()) }
}

/// Closes every descriptor except stdio and the `keep` list (negative
/// entries are ignored).
fn close_other_fds(keep: &mut [RawFd; 7]) -> Result<(), i32> {
    keep.sort_unstable();
    let mut next: u32 = 3;
    for &fd in keep.iter() {
        if fd < 0 {
            continue;
        }
        let fd = fd as u32;
        if fd > next {
            // SAFETY: plain system call on descriptor numbers.
            if unsafe { libc::close_range(next, fd - 1, 0) } != 0 {
                return Err(errno());
            }
        }
        next = next.max(fd + 1);
    }
    // SAFETY: plain system call on descriptor numbers.
    if unsafe { libc::close_range(next, u32::MAX, 0) } != 0 {
        return Err(errno());
    }
    Ok(())
}

/// A `fork` that skips glibc's atfork handlers (which take malloc locks that
/// a vanished parent thread might hold).
pub fn raw_fork(extra_flags: c_int) -> libc::pid_t {
    // SAFETY: clone without CLONE_VM and without a new stack behaves like
    // fork; the child continues on a copy of this stack.
    unsafe {
        libc::syscall(
            libc::SYS_clone,
            (extra_flags | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        ) as libc::pid_t
    }
}

/// The kernel's `struct sigaction` for `rt_sigaction` (x86-64 layout:
/// handler, flags, restorer, 64-bit mask). Only an all-zero value (SIG_DFL,
/// no flags, empty mask) is ever passed, which means the same thing in
/// every architecture's layout of at most this size.
#[repr(C)]
struct KernelSigaction {
    handler: usize,
    flags: c_ulong,
    restorer: usize,
    mask: u64,
}

/// Sets every signal's disposition to SIG_DFL and unblocks all signals with
/// raw system calls (glibc's wrappers refuse its internal signals and edit
/// the mask). A copy of a multi-threaded parent inherits the cloning
/// thread's mask and the process's dispositions (an ignored SIGCHLD would
/// auto-reap children, and SIG_IGN survives exec).
fn reset_signals() {
    let dfl = KernelSigaction { handler: 0, flags: 0, restorer: 0, mask: 0 };
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: installs SIG_DFL from a live stack struct.
        unsafe {
            libc::syscall(libc::SYS_rt_sigaction, sig, &dfl as *const KernelSigaction, ptr::null_mut::<u8>(), 8usize);
        }
    }
    let empty: u64 = 0;
    // SAFETY: sets an empty mask from a stack variable.
    unsafe {
        libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_SETMASK, &empty as *const u64, ptr::null_mut::<u64>(), 8usize);
    }
}

const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;
const KEYCTL_CLEAR: libc::c_long = 7;
const KEY_SPEC_USER_KEYRING: libc::c_long = -4;
const KEY_SPEC_USER_SESSION_KEYRING: libc::c_long = -5;

/// CLOCK_MONOTONIC in nanoseconds (vDSO, no locks).
pub fn mono_ns() -> i64 {
    // SAFETY: clock_gettime fills a stack struct.
    unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
        ts.tv_sec * 1_000_000_000 + ts.tv_nsec
    }
}

/// The clone entry of init's first image.
pub extern "C" fn init_entry(arg: *mut libc::c_void) -> c_int {
    // SAFETY: `arg` is the parent's `ChildCtx`; the parent waits (vfork)
    // until this child execs or exits, so it stays alive and unchanged.
    let ctx = unsafe { &*(arg as *const ChildCtx) };
    init_main(ctx)
}

/// Init's first image: joins the cgroups, builds the root, moves its
/// descriptors to the `FD_*` numbers and execs the fresh init. Never
/// returns.
fn init_main(ctx: &ChildCtx) -> ! {
    let mut rep = ctx.report_w;
    // Default dispositions and an empty mask first: nothing inherited may
    // stay blocked or ignored across the exec (SIG_IGN and the mask
    // survive it), and no handler of the parent may run in this child.
    reset_signals();
    // SAFETY: the calls below are raw system calls on prepared data.
    unsafe {
        libc::umask(0o022);
        // Survives the exec (init is not set-id).
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
    }
    let mut keep = [ctx.go_r, ctx.report_w, ctx.out_w, ctx.err_w, ctx.chan_w, ctx.ctx_fd, ctx.exe_fd];
    if let Err(e) = close_other_fds(&mut keep) {
        fail(rep, STEP_CLOSE_FDS, e);
    }
    // Join the run's cgroups before anything else; every process of the
    // run descends from init and inherits them.
    for (i, path) in ctx.cgroup_tasks.iter().enumerate() {
        let step = STEP_CGROUP_JOIN + i as u32;
        // SAFETY: raw open/write/close on a prepared path.
        unsafe {
            let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                fail(rep, step, errno());
            }
            if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                fail(rep, step, errno());
            }
            libc::close(fd);
        }
    }
    if ctx.cgroup_ns {
        // SAFETY: plain system call.
        if unsafe { libc::unshare(libc::CLONE_NEWCGROUP) } != 0 {
            fail(rep, STEP_CGROUP_NS, errno());
        }
    }
    for (i, op) in ctx.ops.iter().enumerate() {
        if let Err(e) = run_op(op) {
            fail(rep, i as u32, e);
        }
    }
    if let Some(ifr) = &ctx.loopback {
        // SAFETY: a datagram socket is only used for the ioctl.
        unsafe {
            let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
            if s < 0 {
                fail(rep, STEP_LOOPBACK_SOCKET, errno());
            }
            if libc::ioctl(s, libc::SIOCSIFFLAGS, ifr as *const libc::ifreq) != 0 {
                fail(rep, STEP_LOOPBACK_IOCTL, errno());
            }
            libc::close(s);
        }
    }
    if let Some(name) = &ctx.hostname {
        // SAFETY: the name is a live CString.
        if unsafe { libc::sethostname(name.as_ptr(), name.as_bytes().len()) } != 0 {
            fail(rep, STEP_SETHOSTNAME, errno());
        }
    }
    // The descriptors the exec'd init finds at fixed numbers: first
    // duplicate each above every target (F_DUPFD picks the lowest free
    // number >= 9, and at most 9 descriptors are open), close the
    // originals, then dup2 the copies onto 3..=8 (which clears their
    // close-on-exec flag). The executable's copy keeps close-on-exec.
    let srcs = [ctx.ctx_fd, ctx.report_w, ctx.go_r, ctx.out_w, ctx.err_w, ctx.chan_w, ctx.exe_fd];
    let mut tmp = [-1 as RawFd; 7];
    for (i, &fd) in srcs.iter().enumerate() {
        if fd >= 0 {
            // SAFETY: plain system call on a kept descriptor.
            tmp[i] = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 9) };
            if tmp[i] < 0 {
                fail(rep, STEP_INIT_FDS, errno());
            }
        }
    }
    rep = tmp[1];
    for &fd in srcs.iter().filter(|fd| **fd >= 0) {
        // SAFETY: closing this process's own descriptor.
        unsafe { libc::close(fd) };
    }
    for (i, &fd) in tmp[..6].iter().enumerate() {
        if fd >= 0 {
            // SAFETY: plain system calls on descriptors of this process.
            unsafe {
                if libc::dup2(fd, FD_CTX + i as c_int) < 0 {
                    fail(rep, STEP_INIT_FDS, errno());
                }
                if i == 1 {
                    rep = FD_REPORT;
                }
                libc::close(fd);
            }
        }
    }
    let t_root = mono_ns();
    // SAFETY: writes 8 bytes of a stack variable at a fixed offset of the
    // context memfd (its size is larger); best effort, timing only.
    unsafe {
        libc::pwrite(FD_CTX, (&t_root as *const i64).cast(), 8, CTX_T_ROOT as libc::off_t);
    }
    // SAFETY: every pointer is live: a static C string and NULL-ended
    // arrays owned by `ctx`.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            tmp[6],
            c"".as_ptr(),
            ctx.init_argv.as_ptr(),
            ctx.init_envp.as_ptr(),
            libc::AT_EMPTY_PATH,
        );
    }
    fail(rep, STEP_INIT_EXEC, errno());
}

/// Runs `exec_init_main` before `main` in the exec'd image (see the module
/// documentation). `Sandbox::new` refers to it, so every binary that can
/// start a sandbox links it. glibc passes argc, argv and envp to
/// `.init_array` functions (musl passes nothing: there the exec'd image
/// would not be recognised, and `Sandbox::new`'s probe run fails).
#[cfg(target_env = "gnu")]
#[used]
#[unsafe(link_section = ".init_array")]
pub static EXEC_INIT: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = exec_init_ctor;

#[cfg(target_env = "gnu")]
extern "C" fn exec_init_ctor(argc: c_int, argv: *const *const c_char, _envp: *const *const c_char) {
    if argc != 1 || argv.is_null() {
        return;
    }
    // SAFETY: argv has argc (1) entries from the kernel, then NULL.
    let arg0 = unsafe { *argv };
    // SAFETY: argv[0] is a NUL-terminated string when not NULL.
    if arg0.is_null() || unsafe { CStr::from_ptr(arg0) } != INIT_ARGV0 {
        return;
    }
    // Only PID 1 of a fresh PID namespace (its parent is outside: 0).
    // SAFETY: plain system calls.
    if unsafe { libc::getpid() } != 1 || unsafe { libc::getppid() } != 0 {
        return;
    }
    exec_init_main()
}

/// Reads the whole context memfd.
fn read_ctx(fd: RawFd) -> Result<Vec<u8>, i32> {
    // SAFETY: fstat fills a stack struct; pread fills the vector's
    // initialized bytes.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return Err(errno());
        }
        let size = st.st_size as usize;
        if size > CTX_MAX {
            return Err(libc::EFBIG);
        }
        let mut buf = vec![0u8; size];
        let mut off = 0;
        while off < size {
            let n = libc::pread(fd, buf[off..].as_mut_ptr().cast(), size - off, off as libc::off_t);
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            if n <= 0 {
                return Err(if n == 0 { libc::EIO } else { errno() });
            }
            off += n as usize;
        }
        Ok(buf)
    }
}

/// The exec'd init: reads the command's context, waits for the parent,
/// forks the command, reaps, reports and exits. Never returns.
fn exec_init_main() -> ! {
    let t_start = mono_ns();
    let rep = FD_REPORT;
    // SAFETY: sets this process's name from a static string.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, INIT_COMM.as_ptr() as c_ulong, 0, 0, 0);
    }
    let bytes = read_ctx(FD_CTX).unwrap_or_else(|e| fail(rep, STEP_INIT_CTX, e));
    let Some((cmd, t_root)) = CmdCtx::decode(&bytes) else { fail(rep, STEP_INIT_CTX, libc::EINVAL) };
    drop(bytes);
    // SAFETY: the context descriptor is no longer needed.
    unsafe { libc::close(FD_CTX) };
    let ptrs = |list: &[CString]| -> Vec<*const c_char> {
        list.iter().map(|s| s.as_ptr()).chain(std::iter::once(ptr::null())).collect()
    };
    let run = CmdRun {
        cmd: &cmd,
        argv: ptrs(&cmd.argv),
        envp: ptrs(&cmd.envp),
        seccomp: cmd.seccomp.iter().map(|&(code, jt, jf, k)| libc::sock_filter { code, jt, jf, k }).collect(),
        report_w: FD_REPORT,
        out_w: FD_OUT,
        err_w: FD_ERR,
        chan_w: if cmd.channel { FD_CHAN } else { -1 },
    };
    // The stack the command process runs on until it execs.
    let cmd_stack = vec![0u8; 256 << 10];
    // Wait until the parent is ready (it holds the other pipe ends).
    let mut byte = 0u8;
    // SAFETY: reads one byte into a stack variable.
    let n = unsafe { libc::read(FD_GO, (&mut byte as *mut u8).cast(), 1) };
    if n != 1 {
        // SAFETY: the parent went away; exit quietly.
        unsafe { libc::_exit(1) }
    }
    let t_go = mono_ns();
    // The command process shares init's memory until it execs (like
    // vfork/posix_spawn, on its own stack; init sleeps meanwhile). It has
    // its own descriptors, fs and signal handlers, and only writes its
    // stack and errno before exec or _exit.
    let stack_top = {
        let base = cmd_stack.as_ptr() as usize;
        (base + cmd_stack.len()) & !15usize
    };
    // SAFETY: the stack is owned here and unused by init while the child
    // runs (CLONE_VFORK); `run` outlives the child's use of it.
    let main = unsafe {
        libc::clone(
            command_entry,
            stack_top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&run as *const CmdRun).cast_mut().cast(),
        )
    };
    if main < 0 {
        fail(rep, STEP_FORK, errno());
    }
    // SAFETY: closing this process's copies of descriptors it does not use.
    unsafe {
        libc::close(FD_OUT);
        libc::close(FD_ERR);
        libc::close(FD_GO);
        if cmd.channel {
            libc::close(FD_CHAN);
        }
    }
    let mut rec = Record::zeroed();
    rec.kind = KIND_RESULT;
    rec.t_ns[0] = t_root;
    rec.t_ns[1] = t_start;
    rec.t_ns[2] = t_go;
    // Reap everything until the main process ends.
    loop {
        let mut status = 0;
        // SAFETY: waits for any child.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == main {
            rec.status = status;
            break;
        }
        if pid < 0 && errno() != libc::EINTR {
            break;
        }
    }
    rec.t_ns[3] = mono_ns();
    // Reap zombies so that only live processes are listed.
    // SAFETY: non-blocking waits.
    while unsafe { libc::waitpid(-1, ptr::null_mut(), libc::WNOHANG) } > 0 {}
    scan_leftovers(&cmd.proc_dir, &mut rec);
    rec.disk_full = (fs_full(&cmd.tmp) || fs_full(&cmd.workspace)) as u32;
    // SAFETY: from PID 1, kill(-1) reaches every other process in the
    // namespace and nothing outside it.
    unsafe {
        libc::kill(-1, libc::SIGKILL);
    }
    loop {
        // SAFETY: blocking wait for any child.
        let pid = unsafe { libc::waitpid(-1, ptr::null_mut(), 0) };
        if pid < 0 && errno() != libc::EINTR {
            break;
        }
    }
    // SAFETY: getrusage fills a stack struct.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru);
        rec.utime_us = ru.ru_utime.tv_sec * 1_000_000 + ru.ru_utime.tv_usec;
        rec.stime_us = ru.ru_stime.tv_sec * 1_000_000 + ru.ru_stime.tv_usec;
        rec.maxrss_kb = ru.ru_maxrss;
    }
    rec.t_ns[4] = mono_ns();
    write_record(rep, &rec);
    // SAFETY: init is done.
    unsafe { libc::_exit(0) }
}

/// Whether the filesystem at `path` has no free blocks or inodes left.
fn fs_full(path: &CStr) -> bool {
    // SAFETY: statvfs fills a stack struct.
    // (statfs, not glibc's statvfs, which may read /proc/mounts through
    // malloc'ing stdio.)
    unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        if libc::syscall(libc::SYS_statfs, path.as_ptr(), &mut st as *mut libc::statfs) != 0 {
            return false;
        }
        st.f_bavail == 0 || st.f_ffree == 0
    }
}

/// Lists the processes alive in the namespace (other than init) into `rec`.
fn scan_leftovers(proc_dir: &CStr, rec: &mut Record) {
    // SAFETY: raw directory reading into stack buffers.
    unsafe {
        let dir = libc::open(proc_dir.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
        if dir < 0 {
            return;
        }
        let mut buf = [0u8; 4096];
        loop {
            let n = libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len()) as isize;
            if n <= 0 {
                break;
            }
            let mut off = 0usize;
            while off < n as usize {
                // linux_dirent64: d_ino u64, d_off i64, d_reclen u16, d_type u8, d_name.
                let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
                let name = &buf[off + 19..off + reclen];
                off += reclen;
                let mut pid: i32 = 0;
                let mut digits = 0;
                for &b in name {
                    if b == 0 {
                        break;
                    }
                    if !b.is_ascii_digit() {
                        digits = 0;
                        break;
                    }
                    pid = pid.saturating_mul(10).saturating_add((b - b'0') as i32);
                    digits += 1;
                }
                if digits == 0 || pid == 1 {
                    continue;
                }
                rec.total_left += 1;
                let idx = rec.nleft as usize;
                if idx >= MAX_LEFTOVERS {
                    continue;
                }
                let entry = &mut rec.left[idx];
                entry.pid = pid;
                entry.len = read_cmdline(pid, &mut entry.cmd) as u32;
                rec.nleft += 1;
            }
        }
        libc::close(dir);
    }
}

/// Reads `/proc/<pid>/cmdline` into `out` with NULs turned into spaces.
fn read_cmdline(pid: i32, out: &mut [u8; LEFTOVER_CMD_BYTES]) -> usize {
    let mut path = [0u8; 48];
    let prefix = b"/proc/";
    path[..prefix.len()].copy_from_slice(prefix);
    let mut pos = prefix.len();
    let mut digits = [0u8; 12];
    let mut nd = 0;
    let mut p = pid;
    while p > 0 {
        digits[nd] = b'0' + (p % 10) as u8;
        p /= 10;
        nd += 1;
    }
    for i in (0..nd).rev() {
        path[pos] = digits[i];
        pos += 1;
    }
    let suffix = b"/cmdline";
    path[pos..pos + suffix.len()].copy_from_slice(suffix);
    // SAFETY: the path is NUL-terminated (the buffer was zeroed).
    unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return 0;
        }
        let n = libc::read(fd, out.as_mut_ptr().cast(), out.len());
        libc::close(fd);
        if n <= 0 {
            return 0;
        }
        let n = n as usize;
        let mut end = n;
        while end > 0 && out[end - 1] == 0 {
            end -= 1;
        }
        for b in &mut out[..end] {
            if *b == 0 {
                *b = b' ';
            }
        }
        end
    }
}

extern "C" fn command_entry(arg: *mut libc::c_void) -> c_int {
    // SAFETY: `arg` is the `CmdRun` init passed to clone; it is alive.
    let ctx = unsafe { &*(arg as *const CmdRun) };
    command_main(ctx)
}

/// The command process: stdio, rlimits, privileges, exec. Never returns.
fn command_main(ctx: &CmdRun) -> ! {
    let mut rep = ctx.report_w;
    // SAFETY: raw system calls on prepared data in a single-threaded child.
    unsafe {
        // Restore default signal handling (Rust ignores SIGPIPE, a server
        // may block signals) before exec.
        reset_signals();

        let channel = ctx.chan_w >= 0;
        if channel && rep == 3 {
            // fd 3 becomes the channel; keep the report pipe elsewhere.
            rep = libc::fcntl(rep, libc::F_DUPFD_CLOEXEC, 4);
            if rep < 0 {
                fail(ctx.report_w, STEP_CMD_CHANNEL, errno());
            }
        }
        if libc::dup2(ctx.out_w, 1) < 0 || libc::dup2(ctx.err_w, 2) < 0 {
            fail(rep, STEP_CMD_DUP2, errno());
        }
        let null = libc::open(ctx.cmd.dev_null.as_ptr(), libc::O_RDONLY);
        if null < 0 || libc::dup2(null, 0) < 0 {
            fail(rep, STEP_CMD_DEVNULL, errno());
        }
        let first_closed = if channel {
            // dup2 onto another number clears FD_CLOEXEC; a descriptor that
            // already is 3 keeps it, so clear it by hand.
            let rc = if ctx.chan_w == 3 { libc::fcntl(3, libc::F_SETFD, 0) } else { libc::dup2(ctx.chan_w, 3) };
            if rc < 0 {
                fail(rep, STEP_CMD_CHANNEL, errno());
            }
            4
        } else {
            3
        };
        if libc::close_range(first_closed, u32::MAX, libc::CLOSE_RANGE_CLOEXEC as c_int) != 0 {
            fail(rep, STEP_CMD_CLOEXEC, errno());
        }
        // The command and everything it starts go first when the memory
        // cgroup runs out: an OOM kill of init would be a sandbox failure
        // instead of the command's memory limit.
        // Raising the score needs no privilege; best effort.
        let adj = libc::open(c"/proc/self/oom_score_adj".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if adj >= 0 {
            let _ = libc::write(adj, b"1000".as_ptr().cast(), 4);
            libc::close(adj);
        }
        for (i, (res, lim)) in ctx.cmd.rlimits.iter().enumerate() {
            if libc::setrlimit(*res, lim) != 0 {
                fail(rep, STEP_CMD_SETRLIMIT + i as u32, errno());
            }
        }
        if libc::chdir(ctx.cmd.workspace.as_ptr()) != 0 {
            fail(rep, STEP_CMD_CHDIR, errno());
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            fail(rep, STEP_CMD_NO_NEW_PRIVS, errno());
        }
        if ctx.cmd.drop_uid {
            // Raw system calls, NOT the glibc wrappers: glibc's setgroups,
            // setresgid and setresuid broadcast the change to every thread
            // of the process (`__nptl_setxid`). This copy still carries the
            // parent's glibc thread list, and a parent thread that was in
            // the middle of `pthread_create` at clone time is marked
            // "not started" (setxid_futex == -2) forever here, so the
            // wrapper waits on a futex nobody will ever wake: the command
            // hangs before exec until the wall limit. (The exec'd init is
            // single-threaded; the raw calls stay the safe choice.)
            if libc::syscall(libc::SYS_setgroups, 0usize, ptr::null::<libc::gid_t>()) != 0 {
                fail(rep, STEP_CMD_SETGROUPS, errno());
            }
            if libc::syscall(libc::SYS_setresgid, ctx.cmd.gid, ctx.cmd.gid, ctx.cmd.gid) != 0 {
                fail(rep, STEP_CMD_SETGID, errno());
            }
            if libc::syscall(libc::SYS_setresuid, ctx.cmd.uid, ctx.cmd.uid, ctx.cmd.uid) != 0 {
                fail(rep, STEP_CMD_SETUID, errno());
            }
        }
        // A fresh session keyring: the one inherited from the grader would
        // give the command possession of every key in it. And the run
        // uid's own keyrings are emptied of whatever an earlier run of the
        // same uid left there. (No kernel keys support: nothing to do.)
        if libc::syscall(libc::SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, 0usize) < 0 && errno() != libc::ENOSYS {
            fail(rep, STEP_CMD_KEYRING, errno());
        }
        for ring in [KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING] {
            if libc::syscall(libc::SYS_keyctl, KEYCTL_CLEAR, ring) < 0 && errno() != libc::ENOSYS {
                fail(rep, STEP_CMD_KEYRING, errno());
            }
        }
        if !ctx.seccomp.is_empty() {
            let prog = libc::sock_fprog { len: ctx.seccomp.len() as u16, filter: ctx.seccomp.as_ptr().cast_mut() };
            if libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog as *const libc::sock_fprog) != 0 {
                fail(rep, STEP_CMD_SECCOMP, errno());
            }
        }
        libc::execve(ctx.cmd.sh.as_ptr(), ctx.argv.as_ptr(), ctx.envp.as_ptr());
        fail(rep, STEP_CMD_EXECVE, errno());
    }
}

#[cfg(test)]
mod tests {
    use super::CmdCtx;
    use std::ffi::CString;

    fn sample() -> CmdCtx {
        let c = |s: &str| CString::new(s).unwrap();
        CmdCtx {
            rlimits: vec![(7, libc::rlimit { rlim_cur: 64, rlim_max: 65 }), (1, libc::rlimit { rlim_cur: u64::MAX, rlim_max: 0 })],
            uid: 61003,
            gid: 61004,
            drop_uid: true,
            channel: false,
            sh: c("/bin/sh"),
            argv: vec![c("/bin/sh"), c("-c"), c("echo 'ü' \"$x\"")],
            envp: vec![c("PATH=/usr/bin"), c("")],
            workspace: c("/workspace"),
            tmp: c("/tmp"),
            dev_null: c("/dev/null"),
            proc_dir: c("/proc"),
            seccomp: vec![(0x20, 0, 0, 4), (0x15, 1, 2, 0xc000_003e), (6, 0, 0, 0x7fff_0000)],
        }
    }

    #[test]
    fn command_context_round_trips() {
        let ctx = sample();
        let mut bytes = ctx.encode();
        bytes[8..16].copy_from_slice(&42i64.to_le_bytes());
        assert_eq!(CmdCtx::decode(&bytes), Some((ctx, 42)));
        let empty = CmdCtx { rlimits: vec![], seccomp: vec![], argv: vec![], envp: vec![], ..sample() };
        assert_eq!(CmdCtx::decode(&empty.encode()).map(|(c, _)| c), Some(empty));
    }

    #[test]
    fn command_context_refuses_anything_else() {
        let bytes = sample().encode();
        // Every truncation, a trailing byte, a wrong magic, a bad flag, a
        // huge count and a NUL inside a string are refused.
        for n in 0..bytes.len() {
            assert!(CmdCtx::decode(&bytes[..n]).is_none(), "truncated to {n}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(CmdCtx::decode(&longer).is_none());
        let mut magic = bytes.clone();
        magic[0] ^= 1;
        assert!(CmdCtx::decode(&magic).is_none());
        let mut flag = bytes.clone();
        flag[24] = 2;
        assert!(CmdCtx::decode(&flag).is_none());
        let mut count = bytes.clone();
        count[32..36].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(CmdCtx::decode(&count).is_none());
        let sh = bytes.windows(7).position(|w| w == b"/bin/sh").unwrap();
        let mut nul = bytes;
        nul[sh + 1] = 0;
        assert!(CmdCtx::decode(&nul).is_none());
    }
}
