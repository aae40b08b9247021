//! The code that runs after `clone`: the namespace init and the command
//! process it forks.
//!
//! Everything here runs in a copy of a possibly multi-threaded parent, so it
//! must not allocate, lock or call anything that may take a lock held by a
//! thread that does not exist in the copy. Every string, path, argv and envp
//! is prepared by the parent in a `ChildCtx` before the clone; this module
//! only issues raw system calls and reports failures through a pipe as
//! fixed-size `Record`s.

use std::ffi::{CString, c_char, c_int, c_ulong};
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
    /// CLOCK_MONOTONIC (ns) when init: finished the root, got the go byte,
    /// reaped the main process, finished the teardown.
    pub t_ns: [i64; 4],
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

/// Everything the child needs, prepared before `clone`.
pub struct ChildCtx {
    pub ops: Vec<Op>,
    /// Init reads one byte from it before forking the command.
    pub go_r: RawFd,
    pub report_w: RawFd,
    pub out_w: RawFd,
    pub err_w: RawFd,
    /// The result channel's write end, given to the command as fd 3; -1
    /// when the run has no channel.
    pub chan_w: RawFd,
    pub loopback: Option<libc::ifreq>,
    pub hostname: Option<CString>,
    pub rlimits: Vec<(libc::__rlimit_resource_t, libc::rlimit)>,
    /// The v1 `tasks` files of the run's cgroups; init writes "0" to each.
    pub cgroup_tasks: Vec<CString>,
    /// The stack the command process runs on until it execs.
    pub cmd_stack: Vec<u8>,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    pub drop_uid: bool,
    pub sh: CString,
    pub argv: Vec<*const c_char>,
    pub envp: Vec<*const c_char>,
    pub workspace: CString,
    pub tmp: CString,
    pub dev_null: CString,
    pub proc_dir: CString,
    /// What init's `/proc/1/cmdline` shows instead of the grader's argv.
    pub init_title: CString,
    /// Init's argument and environment areas (the parent's, see
    /// `title_areas`), overwritten with `init_title` and NULs.
    pub title_areas: Option<[(usize, usize); 2]>,
    /// Init enters a new cgroup namespace after joining the run's cgroups,
    /// so the command sees its cgroup as `/`.
    pub cgroup_ns: bool,
    /// The seccomp program installed in the command process right before
    /// exec (empty: none).
    pub seccomp: Vec<libc::sock_filter>,
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
fn close_other_fds(keep: &mut [RawFd; 5]) -> Result<(), i32> {
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

/// Overwrites this process's argument area with `title` and NULs, and its
/// environment area with NULs: what `/proc/<pid>/cmdline` and `environ`
/// read. Init's memory is its own copy of the grader's, so the grader's
/// own argv is untouched. (PR_SET_MM would move the areas instead, but it
/// needs CAP_SYS_RESOURCE, which containers often drop.)
fn set_title(title: &CString, areas: &[(usize, usize); 2]) {
    let (arg_start, arg_end) = areas[0];
    if arg_end > arg_start {
        let t = title.as_bytes();
        let n = t.len().min(arg_end - arg_start - 1);
        // SAFETY: [arg_start, arg_end) is this process's argument area as
        // the kernel reported it for the parent, whose memory this is a
        // copy of; it lies on the writable initial stack.
        unsafe {
            ptr::copy_nonoverlapping(t.as_ptr(), arg_start as *mut u8, n);
            ptr::write_bytes((arg_start + n) as *mut u8, 0, arg_end - arg_start - n);
        }
    }
    let (env_start, env_end) = areas[1];
    if env_end > env_start {
        // SAFETY: as above, for the environment area.
        unsafe { ptr::write_bytes(env_start as *mut u8, 0, env_end - env_start) };
    }
}

/// The argument and environment areas of the calling process (fields 48
/// to 51 of `/proc/self/stat`), or None when they cannot be read.
pub fn title_areas() -> Option<[(usize, usize); 2]> {
    parse_title_areas(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

/// Fields 48 to 51 of a `/proc/<pid>/stat` line (the command name, field
/// 2, may hold spaces and parentheses: the last ')' ends it).
fn parse_title_areas(stat: &str) -> Option<[(usize, usize); 2]> {
    let after = &stat[stat.rfind(')')? + 1..];
    // `after` starts at field 3 (the state).
    let f: Vec<usize> = after.split_whitespace().skip(45).take(4).map(|x| x.parse().ok()).collect::<Option<_>>()?;
    if f.len() != 4 || f[0] > f[1] || f[2] > f[3] {
        return None;
    }
    Some([(f[0], f[1]), (f[2], f[3])])
}

/// CLOCK_MONOTONIC in nanoseconds (vDSO, no locks).
pub fn mono_ns() -> i64 {
    // SAFETY: clock_gettime fills a stack struct.
    unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
        ts.tv_sec * 1_000_000_000 + ts.tv_nsec
    }
}

/// The namespace init: builds the root, waits for the parent, forks the
/// command, reaps, reports and exits. Never returns.
pub fn init_main(ctx: &ChildCtx) -> ! {
    let rep = ctx.report_w;
    // SAFETY: the calls below are raw system calls on prepared data.
    unsafe {
        libc::umask(0o022);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
    }
    // Init reaps with blocking waitpid: SIGCHLD must not be ignored (that
    // would auto-reap the command) and nothing inherited from the calling
    // thread may stay blocked.
    reset_signals();
    let mut keep = [ctx.go_r, ctx.report_w, ctx.out_w, ctx.err_w, ctx.chan_w];
    if let Err(e) = close_other_fds(&mut keep) {
        fail(rep, STEP_CLOSE_FDS, e);
    }
    if let Some(areas) = &ctx.title_areas {
        set_title(&ctx.init_title, areas);
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
    let t_root = mono_ns();
    // Wait until the parent is ready (it holds the other pipe ends).
    let mut byte = 0u8;
    // SAFETY: reads one byte into a stack variable.
    let n = unsafe { libc::read(ctx.go_r, (&mut byte as *mut u8).cast(), 1) };
    if n != 1 {
        // SAFETY: the parent went away; exit quietly.
        unsafe { libc::_exit(1) }
    }
    let t_go = mono_ns();
    // The command process shares init's memory until it execs (like
    // vfork/posix_spawn, on its own stack; init sleeps meanwhile): copying
    // init's page tables, a copy of the whole parent's, cost about a
    // millisecond per run. It has its own descriptors, fs and signal
    // handlers, and only writes its stack and errno before exec or _exit.
    let stack_top = {
        let base = ctx.cmd_stack.as_ptr() as usize;
        (base + ctx.cmd_stack.len()) & !15usize
    };
    // SAFETY: the stack is owned by `ctx` and unused by init while the
    // child runs (CLONE_VFORK); `ctx` outlives the child's use of it.
    let main = unsafe {
        libc::clone(
            command_entry,
            stack_top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (ctx as *const ChildCtx).cast_mut().cast(),
        )
    };
    if main < 0 {
        fail(rep, STEP_FORK, errno());
    }
    // SAFETY: closing this process's copies of descriptors it does not use.
    unsafe {
        libc::close(ctx.out_w);
        libc::close(ctx.err_w);
        libc::close(ctx.go_r);
        if ctx.chan_w >= 0 {
            libc::close(ctx.chan_w);
        }
    }
    let mut rec = Record::zeroed();
    rec.kind = KIND_RESULT;
    rec.t_ns[0] = t_root;
    rec.t_ns[1] = t_go;
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
    rec.t_ns[2] = mono_ns();
    // Reap zombies so that only live processes are listed.
    // SAFETY: non-blocking waits.
    while unsafe { libc::waitpid(-1, ptr::null_mut(), libc::WNOHANG) } > 0 {}
    scan_leftovers(ctx, &mut rec);
    rec.disk_full = (fs_full(&ctx.tmp) || fs_full(&ctx.workspace)) as u32;
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
    rec.t_ns[3] = mono_ns();
    write_record(rep, &rec);
    // SAFETY: init is done.
    unsafe { libc::_exit(0) }
}

/// Whether the filesystem at `path` has no free blocks or inodes left.
fn fs_full(path: &CString) -> bool {
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
fn scan_leftovers(ctx: &ChildCtx, rec: &mut Record) {
    // SAFETY: raw directory reading into stack buffers.
    unsafe {
        let dir = libc::open(ctx.proc_dir.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
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
    // SAFETY: `arg` is the `ChildCtx` init passed to clone; it is alive.
    let ctx = unsafe { &*(arg as *const ChildCtx) };
    command_main(ctx)
}

/// The command process: stdio, rlimits, privileges, exec. Never returns.
fn command_main(ctx: &ChildCtx) -> ! {
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
        let null = libc::open(ctx.dev_null.as_ptr(), libc::O_RDONLY);
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
        // cgroup runs out: init is a copy of the grader, so its resident
        // set can outweigh a small command's, and an OOM kill of init would
        // be a sandbox failure instead of the command's memory limit.
        // Raising the score needs no privilege; best effort.
        let adj = libc::open(c"/proc/self/oom_score_adj".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if adj >= 0 {
            let _ = libc::write(adj, b"1000".as_ptr().cast(), 4);
            libc::close(adj);
        }
        for (i, (res, lim)) in ctx.rlimits.iter().enumerate() {
            if libc::setrlimit(*res, lim) != 0 {
                fail(rep, STEP_CMD_SETRLIMIT + i as u32, errno());
            }
        }
        if libc::chdir(ctx.workspace.as_ptr()) != 0 {
            fail(rep, STEP_CMD_CHDIR, errno());
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            fail(rep, STEP_CMD_NO_NEW_PRIVS, errno());
        }
        if ctx.drop_uid {
            // Raw system calls, NOT the glibc wrappers: glibc's setgroups,
            // setresgid and setresuid broadcast the change to every thread
            // of the process (`__nptl_setxid`). This copy still carries the
            // parent's glibc thread list, and a parent thread that was in
            // the middle of `pthread_create` at clone time is marked
            // "not started" (setxid_futex == -2) forever here, so the
            // wrapper waits on a futex nobody will ever wake: the command
            // hangs before exec until the wall limit. The kernel calls
            // change this (really single-threaded) process only.
            if libc::syscall(libc::SYS_setgroups, 0usize, ptr::null::<libc::gid_t>()) != 0 {
                fail(rep, STEP_CMD_SETGROUPS, errno());
            }
            if libc::syscall(libc::SYS_setresgid, ctx.gid, ctx.gid, ctx.gid) != 0 {
                fail(rep, STEP_CMD_SETGID, errno());
            }
            if libc::syscall(libc::SYS_setresuid, ctx.uid, ctx.uid, ctx.uid) != 0 {
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
        libc::execve(ctx.sh.as_ptr(), ctx.argv.as_ptr(), ctx.envp.as_ptr());
        fail(rep, STEP_CMD_EXECVE, errno());
    }
}

#[cfg(test)]
mod tests {
    use super::parse_title_areas;

    #[test]
    fn title_areas_come_from_fields_48_to_51() {
        let tail: Vec<String> = (3..=52).map(|i| i.to_string()).collect();
        let line = |comm: &str| format!("1234 ({comm}) {}", tail.join(" "));
        for (stat, expect) in [
            (line("it"), Some([(48, 49), (50, 51)])),
            (line("a) (b c"), Some([(48, 49), (50, 51)])),
            ("1234 (it) R 1 2".to_string(), None),
            ("no parenthesis".to_string(), None),
            (line("it").replace(" 48 ", " 50 "), None),
        ] {
            assert_eq!(parse_title_areas(&stat), expect, "{stat}");
        }
    }
}
