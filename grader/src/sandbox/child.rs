//! The code that runs after `clone`: init's first image, which builds the
//! run's root and execs the small init image (`grader/init`).
//!
//! `init_main` runs in the cloned child (CLONE_VM|CLONE_VFORK: it shares
//! the parent's memory, on its own stack, while the parent waits) and so
//! must not allocate, lock or call anything that may take a lock held by a
//! thread that does not exist in the child. It joins the cgroups, builds
//! the root, moves its descriptors to fixed numbers (`FD_*`) and execs the
//! init image (a sealed memfd made at `Sandbox::new`) with argv
//! `[INIT_ARGV0]` and an empty environment. That image, a static `no_std`
//! executable of a few kilobytes, reads the command's context (`CmdCtx`,
//! written by the parent into a memfd) from `FD_CTX`, waits for the go
//! byte, starts the host process (a run with `RunSpec::host`) and the
//! command, reaps, reports and exits. Its memory holds its
//! own few pages and that context, no copy of the grader's. Failures are
//! reported through a pipe as fixed-size `Record`s. The descriptor and
//! step numbers, the record and the context's format are in
//! `grader/init/src/proto.rs`, shared by both sides.

use std::ffi::{CString, c_char, c_int, c_ulong};
use std::os::fd::RawFd;
use std::ptr;

pub use super::proto::*;

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
    Mkdir {
        path: CString,
        mode: libc::mode_t,
    },
    Symlink {
        target: CString,
        link: CString,
    },
    /// Creates (or truncates) a file and writes `data` into it.
    WriteFile {
        path: CString,
        data: Vec<u8>,
        mode: libc::mode_t,
    },
    Chdir {
        path: CString,
    },
    PivotRoot {
        new_root: CString,
        put_old: CString,
    },
    Umount {
        target: CString,
        flags: c_int,
    },
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
    /// The init image init execs (a sealed memfd made at `Sandbox::new`).
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
    /// The host process init starts before the command (`RunSpec::host`).
    pub host: Option<HostCmd>,
}

/// The host process of a run: the same stdio, rlimits, gid and seccomp
/// program as the command, its own uid, program and environment.
#[derive(Debug, PartialEq)]
pub struct HostCmd {
    pub uid: libc::uid_t,
    /// `argv[0]` is the program exec'd (no PATH search, no shell).
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
}

impl CmdCtx {
    /// The bytes `proto::parse` reads (see `proto::Ctx` for the format).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(4096);
        let word = |b: &mut Vec<u8>, v: u64| b.extend_from_slice(&v.to_le_bytes());
        let string = |b: &mut Vec<u8>, s: &CString| {
            let bytes = s.as_bytes_with_nul();
            word(b, (bytes.len() - 1) as u64);
            b.extend_from_slice(bytes);
            b.resize(b.len().next_multiple_of(8), 0);
        };
        word(&mut b, CTX_MAGIC);
        word(&mut b, 0);
        word(&mut b, self.uid.into());
        word(&mut b, self.gid.into());
        word(
            &mut b,
            if self.drop_uid { CTX_DROP_UID } else { 0 }
                | if self.channel { CTX_CHANNEL } else { 0 }
                | if self.host.is_some() { CTX_HOST } else { 0 },
        );
        word(&mut b, self.host.as_ref().map_or(0, |h| h.uid.into()));
        word(&mut b, self.rlimits.len() as u64);
        for (res, lim) in &self.rlimits {
            word(&mut b, (*res).into());
            word(&mut b, lim.rlim_cur);
            word(&mut b, lim.rlim_max);
        }
        word(&mut b, self.seccomp.len() as u64);
        for (code, jt, jf, k) in &self.seccomp {
            b.extend_from_slice(&code.to_le_bytes());
            b.push(*jt);
            b.push(*jf);
            b.extend_from_slice(&k.to_le_bytes());
        }
        for s in [&self.sh, &self.workspace, &self.tmp, &self.dev_null, &self.proc_dir] {
            string(&mut b, s);
        }
        let none = Vec::new();
        let (host_argv, host_envp) =
            self.host.as_ref().map_or((&none, &none), |h| (&h.argv, &h.envp));
        for list in [&self.argv, &self.envp, host_argv, host_envp] {
            word(&mut b, list.len() as u64);
            b.resize(b.len() + 8 * (list.len() + 1), 0);
            for s in list {
                string(&mut b, s);
            }
        }
        b
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Writes a failure record and exits; never returns.
fn fail(fd: RawFd, step: u32, err: i32) -> ! {
    let mut rec = Record::ZERO;
    rec.kind = KIND_FAILURE;
    rec.step = step;
    rec.errno = err;
    write_record(fd, &rec);
    // SAFETY: `_exit` is async-signal-safe and does not return.
    unsafe { libc::_exit(126) }
}

fn write_record(fd: RawFd, rec: &Record) {
    let bytes = rec.as_bytes();
    // SAFETY: writes the record's bytes.
    unsafe {
        libc::write(fd, bytes.as_ptr().cast(), bytes.len());
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
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                &dfl as *const KernelSigaction,
                ptr::null_mut::<u8>(),
                8usize,
            );
        }
    }
    let empty: u64 = 0;
    // SAFETY: sets an empty mask from a stack variable.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &empty as *const u64,
            ptr::null_mut::<u64>(),
            8usize,
        );
    }
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
    let mut keep =
        [ctx.go_r, ctx.report_w, ctx.out_w, ctx.err_w, ctx.chan_w, ctx.ctx_fd, ctx.exe_fd];
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

#[cfg(test)]
mod tests {
    use super::super::proto::{self, Ctx};
    use super::{CmdCtx, HostCmd};
    use std::ffi::{CStr, CString};

    fn sample() -> CmdCtx {
        let c = |s: &str| CString::new(s).unwrap();
        CmdCtx {
            rlimits: vec![
                (7, libc::rlimit { rlim_cur: 64, rlim_max: 65 }),
                (1, libc::rlimit { rlim_cur: u64::MAX, rlim_max: 0 }),
            ],
            uid: 61003,
            gid: 61004,
            drop_uid: true,
            channel: false,
            sh: c("/bin/sh"),
            argv: vec![c("/bin/sh"), c("-c"), c("echo 'ü' \"$x\"")],
            envp: vec![c("PATH=/usr/bin"), c(""), c("LONGER=12345678")],
            workspace: c("/workspace"),
            tmp: c("/tmp"),
            dev_null: c("/dev/null"),
            proc_dir: c("/proc"),
            seccomp: vec![(0x20, 0, 0, 4), (0x15, 1, 2, 0xc000_003e), (6, 0, 0, 0x7fff_0000)],
            host: None,
        }
    }

    fn with_host() -> CmdCtx {
        let c = |s: &str| CString::new(s).unwrap();
        CmdCtx {
            host: Some(HostCmd {
                uid: 61009,
                argv: vec![c("/usr/bin/python3"), c("-I"), c("/gatehouse/host.py")],
                envp: vec![c("PATH=/usr/bin"), c("HOST=1")],
            }),
            ..sample()
        }
    }

    /// An 8-byte-aligned copy of `bytes` (the init maps the memfd at a
    /// page boundary), padded with zero words.
    fn aligned(bytes: &[u8]) -> Vec<u64> {
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        as_bytes(&mut words)[..bytes.len()].copy_from_slice(bytes);
        words
    }

    fn as_bytes(words: &mut [u64]) -> &mut [u8] {
        // SAFETY: a u64 slice viewed as its bytes.
        unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), words.len() * 8) }
    }

    /// What the init would use, read back through the parsed pointers.
    fn read_back(c: &Ctx) -> (CmdCtx, i64) {
        // SAFETY: `parse` checked every string and filled the tables with
        // pointers into the live buffer.
        unsafe {
            let s = |p: *const u8| CStr::from_ptr(p.cast()).to_owned();
            let list = |mut p: *const *const u8| {
                let mut v = Vec::new();
                while !(*p).is_null() {
                    v.push(s(*p));
                    p = p.add(1);
                }
                v
            };
            let rlimits = (0..c.n_rlimits)
                .map(|i| {
                    let r = c.rlimits.add(3 * i);
                    (*r as u32, libc::rlimit { rlim_cur: *r.add(1), rlim_max: *r.add(2) })
                })
                .collect();
            let seccomp = (0..c.n_seccomp)
                .map(|i| {
                    let f = std::ptr::read(c.seccomp.add(8 * i).cast::<libc::sock_filter>());
                    (f.code, f.jt, f.jf, f.k)
                })
                .collect();
            let host = c.host.then(|| HostCmd {
                uid: c.host_uid,
                argv: list(c.host_argv),
                envp: list(c.host_envp),
            });
            assert!(c.host || (*c.host_argv).is_null() && (*c.host_envp).is_null());
            let cmd = CmdCtx {
                host,
                rlimits,
                uid: c.uid,
                gid: c.gid,
                drop_uid: c.drop_uid,
                channel: c.channel,
                sh: s(c.sh),
                argv: list(c.argv),
                envp: list(c.envp),
                workspace: s(c.workspace),
                tmp: s(c.tmp),
                dev_null: s(c.dev_null),
                proc_dir: s(c.proc_dir),
                seccomp,
            };
            (cmd, c.t_root)
        }
    }

    #[test]
    fn command_context_round_trips_through_the_init_parser() {
        let ctx = sample();
        let mut bytes = ctx.encode();
        bytes[8..16].copy_from_slice(&42i64.to_le_bytes());
        let mut buf = aligned(&bytes);
        let parsed = proto::parse(as_bytes(&mut buf)).expect("parses");
        assert_eq!(read_back(&parsed), (ctx, 42));
        let empty = CmdCtx {
            rlimits: vec![],
            seccomp: vec![],
            argv: vec![],
            envp: vec![],
            channel: true,
            drop_uid: false,
            ..sample()
        };
        let mut buf = aligned(&empty.encode());
        let parsed = proto::parse(as_bytes(&mut buf)).expect("parses");
        assert_eq!(read_back(&parsed).0, empty);
        // With a host: its uid, program, arguments and environment.
        let host = with_host();
        let mut buf = aligned(&host.encode());
        let parsed = proto::parse(as_bytes(&mut buf)).expect("parses");
        assert!(parsed.host);
        assert_eq!(read_back(&parsed).0, host);
        let bare = CmdCtx {
            host: Some(HostCmd { envp: vec![], ..with_host().host.unwrap() }),
            ..sample()
        };
        let mut buf = aligned(&bare.encode());
        assert_eq!(read_back(&proto::parse(as_bytes(&mut buf)).expect("parses")).0, bare);
    }

    #[test]
    fn command_context_parser_refuses_anything_else() {
        let bytes = sample().encode();
        let refused = |b: &[u8]| {
            let mut buf = aligned(b);
            proto::parse(&mut as_bytes(&mut buf)[..b.len()]).is_none()
        };
        assert!(!refused(&bytes));
        // Every truncation, a trailing word, a wrong magic, an unknown
        // flag, a huge count, a NUL inside a string, non-zero padding and a
        // misaligned buffer are refused.
        for n in 0..bytes.len() {
            assert!(refused(&bytes[..n]), "truncated to {n}");
        }
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[0; 8]);
        assert!(refused(&longer));
        let mut magic = bytes.clone();
        magic[0] ^= 1;
        assert!(refused(&magic));
        let mut flag = bytes.clone();
        flag[32] = 8;
        assert!(refused(&flag));
        let mut count = bytes.clone();
        count[48..56].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(refused(&count));
        // The host flag without a host program, and host lists without
        // the flag.
        let mut flag = bytes.clone();
        flag[32] |= 4;
        assert!(refused(&flag));
        let mut flag = with_host().encode();
        assert!(!refused(&flag));
        flag[32] &= !4;
        assert!(refused(&flag));
        let sh = bytes.windows(8).position(|w| w == b"/bin/sh\0").unwrap();
        let mut nul = bytes.clone();
        nul[sh + 1] = 0;
        assert!(refused(&nul));
        let mut pad = bytes.clone();
        let tmp = bytes.windows(5).position(|w| w == b"/tmp\0").unwrap();
        pad[tmp + 6] = b'x';
        assert!(refused(&pad));
        let mut buf = aligned(&[&[0u8; 8][..], &bytes].concat());
        assert!(proto::parse(&mut as_bytes(&mut buf)[4..4 + bytes.len()]).is_none(), "misaligned");
        assert!(
            proto::parse(&mut as_bytes(&mut buf)[8..8 + bytes.len()]).is_some(),
            "the same bytes, aligned"
        );
    }
}
