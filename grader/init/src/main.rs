//! The sandbox's init: PID 1 of every run, after its first image (a
//! CLONE_VM child of the grader, see `grader/src/sandbox/child.rs`) built
//! the root and exec'd this image from a sealed memfd.
//!
//! A static, `no_std`, position-dependent executable without a C library:
//! its start-up is the kernel mapping a few pages, with no dynamic loader,
//! no relocations and no copy of anything of the grader. It finds its
//! descriptors at fixed numbers (`proto::FD_*`), maps the command's context
//! (a memfd the grader wrote, `proto::parse`), waits for the go byte,
//! starts the command (CLONE_VM|CLONE_VFORK on a stack of its own: signals
//! reset, stdio, rlimits, chdir, no_new_privs, uid and gid, a fresh session
//! keyring, the seccomp filter, execve), reaps everything until the
//! command's main process ends, lists the leftovers, kills the whole tree,
//! and reports one `proto::Record` on the report pipe. Every system call is
//! a raw `syscall` instruction.
//!
//! A run with a host (`proto::CTX_HOST`): init makes an AF_UNIX
//! SOCK_STREAM socketpair before the go byte, starts the host process
//! first (the same way as the command, by the same `child_main`: its own
//! uid, program and environment, its end of the socket at
//! `HOST_FD_JUDGE`, no result channel), then the command (its end at
//! `JUDGE_FD_HOST`), and closes its own ends. A failed step of the host's
//! start is reported (steps offset by `HOST_STEP_OFFSET`) and the command
//! never starts. When the command's main process ends, init kills and
//! reaps the host's main process before it lists the leftovers, and
//! records whether it was still alive (`Record::host`).
#![no_std]
#![no_main]
// The memory functions below are loops the compiler must not turn back
// into calls to themselves.
#![no_builtins]

mod proto;

use core::arch::{asm, global_asm};
use core::sync::atomic::{AtomicU32, Ordering};
use proto::*;

// The kernel starts a static executable at `_start` with the stack 16-byte
// aligned and no return address; nothing from argv, envp or auxv is used.
global_asm!(
    ".globl _start",
    "_start:",
    "xor ebp, ebp",
    "and rsp, -16",
    "call {main}",
    "ud2",
    main = sym init_main,
);

mod nr {
    pub const READ: usize = 0;
    pub const WRITE: usize = 1;
    pub const OPEN: usize = 2;
    pub const CLOSE: usize = 3;
    pub const FSTAT: usize = 5;
    pub const MMAP: usize = 9;
    pub const RT_SIGACTION: usize = 13;
    pub const RT_SIGPROCMASK: usize = 14;
    pub const DUP2: usize = 33;
    pub const SOCKETPAIR: usize = 53;
    pub const CLONE: usize = 56;
    pub const EXECVE: usize = 59;
    pub const WAIT4: usize = 61;
    pub const KILL: usize = 62;
    pub const FCNTL: usize = 72;
    pub const CHDIR: usize = 80;
    pub const GETRUSAGE: usize = 98;
    pub const SETGROUPS: usize = 116;
    pub const SETRESUID: usize = 117;
    pub const SETRESGID: usize = 119;
    pub const STATFS: usize = 137;
    pub const PRCTL: usize = 157;
    pub const GETDENTS64: usize = 217;
    pub const CLOCK_GETTIME: usize = 228;
    pub const EXIT_GROUP: usize = 231;
    pub const KEYCTL: usize = 250;
    pub const PRLIMIT64: usize = 302;
    pub const CLOSE_RANGE: usize = 436;
}

const EINTR: i32 = 4;
const EIO: i32 = 5;
const EFBIG: i32 = 27;
const EINVAL: i32 = 22;
const ENOSYS: i32 = 38;
/// A key lookup found the keyring dead: invalidated by the grader's
/// clearing (`sandbox::keys`) and not collected by the kernel yet. Nothing
/// is in it to clear.
const ENOKEY: i32 = 126;
const EKEYEXPIRED: i32 = 127;
const EKEYREVOKED: i32 = 128;
const O_WRONLY: usize = 1;
const O_DIRECTORY: usize = 0o200000;
const O_CLOEXEC: usize = 0o2000000;
const PROT_READ: usize = 1;
const PROT_WRITE: usize = 2;
const MAP_PRIVATE: usize = 2;
const CLONE_VM: usize = 0x100;
const CLONE_VFORK: usize = 0x4000;
const SIGCHLD: usize = 17;
const SIGKILL: usize = 9;
const SIGSTOP: usize = 19;
const SIG_SETMASK: usize = 2;
const WNOHANG: usize = 1;
const CLOSE_RANGE_CLOEXEC: usize = 4;
const F_DUPFD_CLOEXEC: usize = 1030;
const AF_UNIX: usize = 1;
const SOCK_STREAM: usize = 1;
const SOCK_CLOEXEC: usize = 0o2000000;
const PR_SET_NAME: usize = 15;
const PR_SET_SECCOMP: usize = 22;
const PR_SET_NO_NEW_PRIVS: usize = 38;
const SECCOMP_MODE_FILTER: usize = 2;
const KEYCTL_JOIN_SESSION_KEYRING: usize = 1;
const KEYCTL_CLEAR: usize = 7;
const KEY_SPEC_USER_KEYRING: isize = -4;
const KEY_SPEC_USER_SESSION_KEYRING: isize = -5;
const RUSAGE_CHILDREN: isize = -1;
const CLOCK_MONOTONIC: usize = 1;

/// A raw system call; the kernel's return value (-errno on failure).
#[inline(always)]
unsafe fn sys(n: usize, a: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the caller passes arguments valid for system call `n`.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") n as isize => ret,
            in("rdi") a[0], in("rsi") a[1], in("rdx") a[2], in("r10") a[3], in("r8") a[4], in("r9") a[5],
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

macro_rules! sc {
    ($n:expr) => { sys($n, [0; 6]) };
    ($n:expr, $($a:expr),+) => {{
        let mut a = [0usize; 6];
        let v = [$($a as usize),+];
        let mut i = 0;
        while i < v.len() {
            a[i] = v[i];
            i += 1;
        }
        sys($n, a)
    }};
}

fn exit(code: i32) -> ! {
    // SAFETY: exit_group does not return; `ud2` is never reached.
    unsafe {
        sc!(nr::EXIT_GROUP, code);
        asm!("ud2", options(noreturn));
    }
}

fn write_record(fd: i32, rec: &Record) {
    let b = rec.as_bytes();
    // SAFETY: writes the record's bytes.
    unsafe {
        sc!(nr::WRITE, fd, b.as_ptr(), b.len());
    }
}

/// Writes a failure record and exits; never returns.
fn fail(fd: i32, step: u32, errno: i32) -> ! {
    let mut rec = Record::ZERO;
    rec.kind = KIND_FAILURE;
    rec.step = step;
    rec.errno = errno;
    write_record(fd, &rec);
    exit(126)
}

/// The errno of a failed call, or None.
fn err(rc: isize) -> Option<i32> {
    (-4095..0).contains(&rc).then_some(-rc as i32)
}

fn mono_ns() -> i64 {
    let mut ts = [0i64; 2];
    // SAFETY: fills a stack array shaped like `struct timespec`.
    unsafe {
        sc!(nr::CLOCK_GETTIME, CLOCK_MONOTONIC, ts.as_mut_ptr());
    }
    ts[0] * 1_000_000_000 + ts[1]
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    exit(127)
}

/// The stack the command process runs on until it execs (init sleeps
/// meanwhile: CLONE_VFORK).
const CMD_STACK: usize = 64 << 10;
#[repr(align(16))]
struct Stack([u8; CMD_STACK]);
static mut STACK: Stack = Stack([0; CMD_STACK]);

extern "C" fn init_main() -> ! {
    let t_start = mono_ns();
    let rep = FD_REPORT;
    // SAFETY: raw system calls on this process's own state and descriptors.
    unsafe {
        sc!(nr::PRCTL, PR_SET_NAME, INIT_COMM.as_ptr());
    }
    // The context: a private, writable mapping of the memfd (`parse`
    // fills the lists' pointer tables in place).
    let mut st = [0u64; 18];
    // SAFETY: fstat fills a stack array shaped like `struct stat`.
    if let Some(e) = err(unsafe { sc!(nr::FSTAT, FD_CTX, st.as_mut_ptr()) }) {
        fail(rep, STEP_INIT_CTX, e);
    }
    let size = st[6] as usize; // st_size
    if size > CTX_MAX {
        fail(rep, STEP_INIT_CTX, EFBIG);
    }
    if size == 0 {
        fail(rep, STEP_INIT_CTX, EIO);
    }
    // SAFETY: a fresh private mapping of `size` bytes of the memfd.
    let addr = unsafe { sc!(nr::MMAP, 0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, FD_CTX, 0) };
    if let Some(e) = err(addr) {
        fail(rep, STEP_INIT_CTX, e);
    }
    // SAFETY: the mapping is `size` bytes, page-aligned, and never unmapped.
    let buf = unsafe { core::slice::from_raw_parts_mut(addr as *mut u8, size) };
    let Some(ctx) = parse(buf) else { fail(rep, STEP_INIT_CTX, EINVAL) };
    // A run with a host: the socketpair joining it to the command, made
    // while the context's descriptor still holds fd 3 (so neither end is
    // 3..=8, which the children's dup2 calls write over).
    let mut sv = [-1i32; 2];
    if ctx.host {
        // SAFETY: fills a two-element stack array.
        let rc =
            unsafe { sc!(nr::SOCKETPAIR, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv.as_mut_ptr()) };
        if let Some(e) = err(rc) {
            fail(rep, STEP_SOCKETPAIR, e);
        }
    }
    // SAFETY: the context descriptor is no longer needed.
    unsafe {
        sc!(nr::CLOSE, FD_CTX);
    }
    // Wait until the parent is ready (it holds the other pipe ends).
    let mut byte = 0u8;
    // SAFETY: reads one byte into a stack variable.
    if unsafe { sc!(nr::READ, FD_GO, &mut byte as *mut u8, 1) } != 1 {
        // The parent went away; exit quietly.
        exit(1);
    }
    let t_go = mono_ns();
    // The host first (the command may talk to it at once), then the
    // command; each shares init's memory and stack until it execs.
    let mut host_pid = 0isize;
    if ctx.host {
        let start = Start { ctx: &ctx, host: true, sock: sv[0] };
        // SAFETY: `start` and `ctx` outlive the child's use (CLONE_VFORK).
        host_pid = unsafe { spawn(&start) };
        if let Some(e) = err(host_pid) {
            fail(rep, STEP_HOST_FORK, e);
        }
        if HOST_FAILED.load(Ordering::Relaxed) != 0 {
            // Its failure record is written; the command never starts.
            exit(126);
        }
    }
    let start = Start { ctx: &ctx, host: false, sock: sv[1] };
    // SAFETY: as above.
    let main = unsafe { spawn(&start) };
    if let Some(e) = err(main) {
        fail(rep, STEP_FORK, e);
    }
    // SAFETY: closing this process's copies of descriptors it does not use
    // (the socket's ends too, so either side sees the other's end go).
    unsafe {
        sc!(nr::CLOSE, FD_OUT);
        sc!(nr::CLOSE, FD_ERR);
        sc!(nr::CLOSE, FD_GO);
        if ctx.channel {
            sc!(nr::CLOSE, FD_CHAN);
        }
        if ctx.host {
            sc!(nr::CLOSE, sv[0]);
            sc!(nr::CLOSE, sv[1]);
        }
    }
    let mut rec = Record::ZERO;
    rec.kind = KIND_RESULT;
    rec.t_ns[0] = ctx.t_root;
    rec.t_ns[1] = t_start;
    rec.t_ns[2] = t_go;
    let mut host = Host { pid: host_pid, live: ctx.host };
    // Reap everything until the main process ends.
    loop {
        let mut status = 0i32;
        // SAFETY: waits for any child into a stack variable.
        let pid = unsafe { sc!(nr::WAIT4, -1isize, &mut status as *mut i32, 0, 0) };
        if pid == main {
            rec.status = status;
            break;
        }
        host.reaped(pid, status, &mut rec);
        if pid < 0 && err(pid) != Some(EINTR) {
            break;
        }
    }
    rec.t_ns[3] = mono_ns();
    // Reap zombies so that only live processes are listed.
    reap_zombies(&mut host, &mut rec);
    // The host's main process is never a leftover: killed and reaped
    // here, so only what it started and left running (now init's
    // children) is listed below.
    if host.live {
        rec.host = HOST_KILLED;
        host.live = false;
        // SAFETY: the pid is init's unreaped child.
        unsafe {
            sc!(nr::KILL, host.pid, SIGKILL);
        }
        loop {
            let mut status = 0i32;
            // SAFETY: waits for the host into a stack variable.
            let pid = unsafe { sc!(nr::WAIT4, host.pid, &mut status as *mut i32, 0, 0) };
            if pid == host.pid {
                rec.host_status = status;
            }
            if !(pid < 0 && err(pid) == Some(EINTR)) {
                break;
            }
        }
        reap_zombies(&mut host, &mut rec);
    }
    // SAFETY: the context's strings are NUL-terminated in the mapping.
    unsafe {
        scan_leftovers(ctx.proc_dir, &mut rec);
        rec.disk_full = (fs_full(ctx.tmp) || fs_full(ctx.workspace)) as u32;
    }
    // SAFETY: from PID 1, kill(-1) reaches every other process in the
    // namespace and nothing outside it.
    unsafe {
        sc!(nr::KILL, -1isize, SIGKILL);
    }
    loop {
        // SAFETY: blocking wait for any child.
        let pid = unsafe { sc!(nr::WAIT4, -1isize, 0, 0, 0) };
        if pid < 0 && err(pid) != Some(EINTR) {
            break;
        }
    }
    // struct rusage: ru_utime, ru_stime (timevals), then ru_maxrss, ...
    let mut ru = [0i64; 18];
    // SAFETY: fills a stack array shaped like `struct rusage`.
    unsafe {
        sc!(nr::GETRUSAGE, RUSAGE_CHILDREN, ru.as_mut_ptr());
    }
    rec.utime_us = ru[0] * 1_000_000 + ru[1];
    rec.stime_us = ru[2] * 1_000_000 + ru[3];
    rec.maxrss_kb = ru[4];
    rec.t_ns[4] = mono_ns();
    write_record(rep, &rec);
    exit(0)
}

/// The host's main process as init tracks it.
struct Host {
    pid: isize,
    /// Started and not reaped yet.
    live: bool,
}

impl Host {
    /// Notes a reaped child: the host's main process ended on its own.
    fn reaped(&mut self, pid: isize, status: i32, rec: &mut Record) {
        if self.live && pid == self.pid {
            self.live = false;
            rec.host = HOST_ENDED;
            rec.host_status = status;
        }
    }
}

/// Reaps every child that has ended, without waiting.
fn reap_zombies(host: &mut Host, rec: &mut Record) {
    loop {
        let mut status = 0i32;
        // SAFETY: a non-blocking wait into a stack variable.
        let pid = unsafe { sc!(nr::WAIT4, -1isize, &mut status as *mut i32, WNOHANG, 0) };
        if pid <= 0 {
            break;
        }
        host.reaped(pid, status, rec);
    }
}

/// What a child of init starts: the command, or the host.
struct Start {
    ctx: *const Ctx,
    host: bool,
    /// Its end of the socketpair (-1: the run has no host).
    sock: i32,
}

/// Set by the host process when a step of its start failed (it shares
/// init's memory until its exec, and init reads this after the clone
/// returns): its failure record is written and the command must not start.
static HOST_FAILED: AtomicU32 = AtomicU32::new(0);

/// Starts `child_main(start)` in a process that shares init's memory until
/// it execs (like vfork/posix_spawn), on `STACK`: in the child the
/// `syscall` returns 0 with rsp at the stack's top, and it calls
/// `child_main` there, never to come back; init sleeps until that exec or
/// exit. Returns the pid or -errno.
///
/// # Safety
/// `start` (and the context it points to) outlive the child's use of them
/// (CLONE_VFORK); `STACK` is not in use.
unsafe fn spawn(start: *const Start) -> isize {
    // SAFETY: only the address is taken.
    let top = (unsafe { &raw mut STACK.0 } as usize + CMD_STACK) & !15;
    let pid: isize;
    // SAFETY: the stack is unused by init while the child runs; the
    // caller keeps `start` alive.
    unsafe {
        asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r12",
            "call {entry}",
            "ud2",
            "2:",
            entry = sym child_main,
            inlateout("rax") nr::CLONE as isize => pid,
            in("rdi") CLONE_VM | CLONE_VFORK | SIGCHLD,
            in("rsi") top,
            in("rdx") 0usize,
            in("r10") 0usize,
            in("r8") 0usize,
            in("r12") start,
            lateout("rcx") _, lateout("r11") _,
        );
    }
    pid
}

/// Whether the filesystem at `path` has no free blocks or inodes left.
///
/// # Safety
/// `path` is a NUL-terminated string.
unsafe fn fs_full(path: *const u8) -> bool {
    // struct statfs: f_type, f_bsize, f_blocks, f_bfree, f_bavail, f_files,
    // f_ffree, ... (120 bytes).
    let mut st = [0u64; 15];
    // SAFETY: fills a stack array shaped like `struct statfs`.
    if unsafe { sc!(nr::STATFS, path, st.as_mut_ptr()) } != 0 {
        return false;
    }
    st[4] == 0 || st[6] == 0
}

/// Lists the processes alive in the namespace (other than init) into `rec`.
///
/// # Safety
/// `proc_dir` is a NUL-terminated string.
unsafe fn scan_leftovers(proc_dir: *const u8, rec: &mut Record) {
    // SAFETY: opens a directory by a NUL-terminated path.
    let dir = unsafe { sc!(nr::OPEN, proc_dir, O_DIRECTORY | O_CLOEXEC) };
    if dir < 0 {
        return;
    }
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: fills a stack buffer with directory entries.
        let n = unsafe { sc!(nr::GETDENTS64, dir, buf.as_mut_ptr(), buf.len()) };
        if n <= 0 {
            break;
        }
        let mut off = 0usize;
        while off + 19 <= n as usize {
            // linux_dirent64: d_ino u64, d_off i64, d_reclen u16, d_type u8, d_name.
            let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
            if reclen < 19 || off + reclen > n as usize {
                break;
            }
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
    // SAFETY: closes the directory opened above.
    unsafe {
        sc!(nr::CLOSE, dir);
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
    // SAFETY: the path is NUL-terminated (the buffer was zeroed); reads
    // into `out`.
    let n = unsafe {
        let fd = sc!(nr::OPEN, path.as_ptr(), O_CLOEXEC);
        if fd < 0 {
            return 0;
        }
        let n = sc!(nr::READ, fd, out.as_mut_ptr(), out.len());
        sc!(nr::CLOSE, fd);
        n
    };
    if n <= 0 {
        return 0;
    }
    let mut end = n as usize;
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

/// Sets every signal's disposition to SIG_DFL and unblocks all signals (a
/// kernel `struct sigaction` of all zeroes means SIG_DFL, no flags, empty
/// mask).
fn reset_signals() {
    let dfl = [0usize; 4];
    for sig in 1..=64usize {
        if sig == SIGKILL || sig == SIGSTOP {
            continue;
        }
        // SAFETY: installs SIG_DFL from a live stack array.
        unsafe {
            sc!(nr::RT_SIGACTION, sig, dfl.as_ptr(), 0, 8);
        }
    }
    let empty = 0u64;
    // SAFETY: sets an empty mask from a stack variable.
    unsafe {
        sc!(nr::RT_SIGPROCMASK, SIG_SETMASK, &empty as *const u64, 0, 8);
    }
}

/// A failed step of a child's start: the host's steps are numbered apart
/// (`HOST_STEP_OFFSET`), and its failure tells init not to start the
/// command. Never returns.
fn child_fail(host: bool, rep: i32, step: u32, errno: i32) -> ! {
    if host {
        HOST_FAILED.store(1, Ordering::Relaxed);
        fail(rep, step + HOST_STEP_OFFSET, errno)
    }
    fail(rep, step, errno)
}

/// The command process or the host process: stdio, descriptors, rlimits,
/// privileges, exec. Never returns.
extern "C" fn child_main(start: *const Start) -> ! {
    // SAFETY: init's `Start` and context, alive while this child runs
    // (CLONE_VFORK).
    let (s, ctx) = unsafe { (&*start, &*(*start).ctx) };
    let host = s.host;
    let mut rep = FD_REPORT;
    // Nothing inherited may stay blocked or ignored across the exec; init's
    // first image reset them before its own exec, this keeps the child's
    // start independent of what init itself does.
    reset_signals();
    // SAFETY: raw system calls on prepared data in a child that shares
    // init's memory and writes only its own stack (and `HOST_FAILED`).
    unsafe {
        // The socket first, before anything below can write over its
        // number; the command's report descriptor (4) moves out of the way.
        if s.sock >= 0 {
            if !host {
                let r = sc!(nr::FCNTL, FD_REPORT, F_DUPFD_CLOEXEC, 16);
                if let Some(e) = err(r) {
                    child_fail(host, rep, STEP_CMD_REPORT_FD, e);
                }
                rep = r as i32;
            }
            let target = if host { HOST_FD_JUDGE } else { JUDGE_FD_HOST };
            if let Some(e) = err(sc!(nr::DUP2, s.sock, target)) {
                child_fail(host, rep, STEP_CMD_SOCKET, e);
            }
        }
        if let Some(e) = err(sc!(nr::DUP2, FD_OUT, 1)) {
            child_fail(host, rep, STEP_CMD_DUP2, e);
        }
        if let Some(e) = err(sc!(nr::DUP2, FD_ERR, 2)) {
            child_fail(host, rep, STEP_CMD_DUP2, e);
        }
        let null = sc!(nr::OPEN, ctx.dev_null, 0);
        if let Some(e) = err(null) {
            child_fail(host, rep, STEP_CMD_DEVNULL, e);
        }
        if let Some(e) = err(sc!(nr::DUP2, null, 0)) {
            child_fail(host, rep, STEP_CMD_DEVNULL, e);
        }
        // dup2 onto another number clears FD_CLOEXEC. The host keeps
        // stdio and its socket (3); the command stdio, the channel (3)
        // when the run has one, and its socket (4) when it has a host.
        let first_closed = if host {
            4
        } else {
            if ctx.channel
                && let Some(e) = err(sc!(nr::DUP2, FD_CHAN, 3))
            {
                child_fail(host, rep, STEP_CMD_CHANNEL, e);
            }
            if s.sock >= 0 {
                if !ctx.channel {
                    // /dev/null's first descriptor may be there.
                    sc!(nr::CLOSE, 3);
                }
                5
            } else if ctx.channel {
                4
            } else {
                3
            }
        };
        if let Some(e) = err(sc!(nr::CLOSE_RANGE, first_closed, u32::MAX, CLOSE_RANGE_CLOEXEC)) {
            child_fail(host, rep, STEP_CMD_CLOEXEC, e);
        }
        // The command, the host and everything they start go first when
        // the memory cgroup runs out: an OOM kill of init would be a
        // sandbox failure instead of the command's memory limit. Raising
        // the score needs no privilege; best effort.
        let adj = sc!(nr::OPEN, c"/proc/self/oom_score_adj".as_ptr(), O_WRONLY | O_CLOEXEC);
        if adj >= 0 {
            sc!(nr::WRITE, adj, b"1000".as_ptr(), 4);
            sc!(nr::CLOSE, adj);
        }
        for i in 0..ctx.n_rlimits {
            let r = ctx.rlimits.add(3 * i);
            let lim = [*r.add(1), *r.add(2)];
            if let Some(e) = err(sc!(nr::PRLIMIT64, 0, *r, lim.as_ptr(), 0)) {
                child_fail(host, rep, STEP_CMD_SETRLIMIT + i as u32, e);
            }
        }
        if let Some(e) = err(sc!(nr::CHDIR, ctx.workspace)) {
            child_fail(host, rep, STEP_CMD_CHDIR, e);
        }
        if let Some(e) = err(sc!(nr::PRCTL, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
            child_fail(host, rep, STEP_CMD_NO_NEW_PRIVS, e);
        }
        if ctx.drop_uid {
            let uid = if host { ctx.host_uid } else { ctx.uid };
            if let Some(e) = err(sc!(nr::SETGROUPS, 0, 0)) {
                child_fail(host, rep, STEP_CMD_SETGROUPS, e);
            }
            if let Some(e) = err(sc!(nr::SETRESGID, ctx.gid, ctx.gid, ctx.gid)) {
                child_fail(host, rep, STEP_CMD_SETGID, e);
            }
            if let Some(e) = err(sc!(nr::SETRESUID, uid, uid, uid)) {
                child_fail(host, rep, STEP_CMD_SETUID, e);
            }
        }
        // A fresh session keyring: the one inherited from the grader would
        // give the child possession of every key in it. And the run uid's
        // own keyrings are emptied of whatever an earlier run of the same
        // uid left there. (No kernel keys support: nothing to do.)
        if let Some(e) = err(sc!(nr::KEYCTL, KEYCTL_JOIN_SESSION_KEYRING, 0))
            && e != ENOSYS
        {
            child_fail(host, rep, STEP_CMD_KEYRING, e);
        }
        for ring in [KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING] {
            if let Some(e) = err(sc!(nr::KEYCTL, KEYCTL_CLEAR, ring))
                && !matches!(e, ENOSYS | ENOKEY | EKEYEXPIRED | EKEYREVOKED)
            {
                child_fail(host, rep, STEP_CMD_KEYRING, e);
            }
        }
        if ctx.n_seccomp > 0 {
            // struct sock_fprog: unsigned short len, then the filter pointer.
            let prog: [usize; 2] = [ctx.n_seccomp, ctx.seccomp as usize];
            if let Some(e) = err(sc!(nr::PRCTL, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog.as_ptr()))
            {
                child_fail(host, rep, STEP_CMD_SECCOMP, e);
            }
        }
        let rc = if host {
            sc!(nr::EXECVE, *ctx.host_argv, ctx.host_argv, ctx.host_envp)
        } else {
            sc!(nr::EXECVE, ctx.sh, ctx.argv, ctx.envp)
        };
        child_fail(host, rep, STEP_CMD_EXECVE, err(rc).unwrap_or(EIO));
    }
}

// The memory functions the compiler's generated code calls (no C library
// is linked).

/// # Safety
/// As C's `memcpy`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    let mut i = 0;
    while i < n {
        // SAFETY: the caller's ranges are valid for `n` bytes.
        unsafe { *dst.add(i) = *src.add(i) };
        i += 1;
    }
    dst
}

/// # Safety
/// As C's `memmove`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    if (dst as usize) < (src as usize) {
        // SAFETY: forwards copy of valid ranges.
        return unsafe { memcpy(dst, src, n) };
    }
    let mut i = n;
    while i > 0 {
        i -= 1;
        // SAFETY: the caller's ranges are valid for `n` bytes.
        unsafe { *dst.add(i) = *src.add(i) };
    }
    dst
}

/// # Safety
/// As C's `memset`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8 {
    let mut i = 0;
    while i < n {
        // SAFETY: the caller's range is valid for `n` bytes.
        unsafe { *dst.add(i) = c as u8 };
        i += 1;
    }
    dst
}

/// # Safety
/// As C's `memcmp`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    let mut i = 0;
    while i < n {
        // SAFETY: the caller's ranges are valid for `n` bytes.
        let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
        if x != y {
            return x as i32 - y as i32;
        }
        i += 1;
    }
    0
}

/// # Safety
/// As C's `bcmp`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: as memcmp.
    unsafe { memcmp(a, b, n) }
}
