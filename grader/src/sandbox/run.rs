//! One run: its uid and cgroups, the clone, the parent's event loop, the
//! copy back and the report (`prepare` builds what the clone needs).

use std::ffi::c_int;
use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::cgroup::RunCgroups;
use super::child::{self, ChildCtx, Record};
use super::prepare::{Ids, Staging};
use super::sys::{errno_name, io_err, os_err};
use super::{Exit, Leftover, LimitHit, RunReport, RunSpec, Sandbox, SandboxError};

/// How many run uids there are: `config.uid .. config.uid + UID_RANGE`,
/// each leased host-wide (a `flock` in `UID_LOCK_DIR`) by one live run.
pub const UID_RANGE: u64 = 1000;

static RUN_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Phase timings of one run, printed to stderr when the environment
/// variable `GATEHOUSE_SANDBOX_PHASES` is set (for overhead work).
struct Phases {
    last: Instant,
    marks: Vec<(&'static str, Duration)>,
}

impl Phases {
    fn new() -> Phases {
        Phases { last: Instant::now(), marks: Vec::new() }
    }

    fn mark(&mut self, name: &'static str) {
        let now = Instant::now();
        self.marks.push((name, now - self.last));
        self.last = now;
    }

    fn print(&self, extra: &str) {
        if std::env::var_os("GATEHOUSE_SANDBOX_PHASES").is_some() {
            let mut line = String::from("sandbox phases (us):");
            for (name, d) in &self.marks {
                line.push_str(&format!(" {name}={}", d.as_micros()));
            }
            eprintln!("{line}{extra}");
        }
    }
}

/// Brings the run's evidence tmpfs back to `.gatehouse/evidence/` of the
/// host folder `host` (`copy::copy_out` under its own budget), replacing
/// whatever the command left at that path in the workspace: only what was
/// written beneath `/evidence` is there afterwards.
fn copy_out_evidence(
    ev: &Path,
    host: &Path,
    budget: super::copy::OutBudget,
) -> Result<super::copy::OutStats, SandboxError> {
    let gh = host.join(".gatehouse");
    let dst = host.join(super::EVIDENCE_DIR);
    let empty = fs::read_dir(ev)
        .map_err(|e| io_err(format!("opendir({:?})", ev.display()), e))?
        .next()
        .is_none();
    if empty && fs::symlink_metadata(&dst).is_err() {
        return Ok(super::copy::OutStats::default());
    }
    for p in [&gh, &dst] {
        if fs::symlink_metadata(p).is_ok_and(|m| !m.is_dir()) {
            fs::remove_file(p).map_err(|e| io_err(format!("unlink({:?})", p.display()), e))?;
        }
    }
    fs::create_dir_all(&dst).map_err(|e| io_err(format!("mkdir -p {:?}", dst.display()), e))?;
    super::copy::copy_out(ev, &dst, budget)
}

fn pipe() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: pipe2 fills the two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(os_err("pipe2(O_CLOEXEC)"));
    }
    // SAFETY: both descriptors were just created and are owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A tail buffer that keeps the last `cap` bytes and counts all of them.
struct Tail {
    buf: Vec<u8>,
    cap: usize,
    total: u64,
}

impl Tail {
    fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        if data.len() >= self.cap {
            self.buf.clear();
            self.buf.extend_from_slice(&data[data.len() - self.cap..]);
        } else {
            self.buf.extend_from_slice(data);
            if self.buf.len() > self.cap {
                let excess = self.buf.len() - self.cap;
                self.buf.drain(..excess);
            }
        }
    }
}

/// A head buffer that keeps the first `cap` bytes and counts all of them.
struct Head {
    buf: Vec<u8>,
    cap: usize,
    total: u64,
}

impl Head {
    fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        let room = self.cap.saturating_sub(self.buf.len());
        self.buf.extend_from_slice(&data[..data.len().min(room)]);
    }
}

fn set_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on a descriptor owned by the caller.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
}

/// Reads what is available; returns false at end of file.
fn drain(fd: RawFd, mut sink: impl FnMut(&[u8])) -> bool {
    let mut buf = [0u8; 65536];
    loop {
        // SAFETY: reads into a stack buffer.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            sink(&buf[..n as usize]);
            continue;
        }
        if n == 0 {
            return false;
        }
        let e = std::io::Error::last_os_error().raw_os_error();
        if e == Some(libc::EINTR) {
            continue;
        }
        // EAGAIN: nothing more for now; any other error ends the stream.
        return e == Some(libc::EAGAIN);
    }
}

/// What `describe_step` needs to name a failed step.
struct StepNames<'a> {
    desc: &'a [String],
    ctx: &'a ChildCtx,
    ids: Ids,
    rlimit_names: &'a [String],
    host_argv: Option<&'a [String]>,
}

/// Maps a child step number to the call it made.
fn describe_step(step: u32, n: &StepNames) -> String {
    if let Some(d) = n.desc.get(step as usize) {
        return d.clone();
    }
    let host_steps = child::STEP_CMD_DUP2 + child::HOST_STEP_OFFSET
        ..child::STEP_CGROUP_JOIN + child::HOST_STEP_OFFSET;
    if host_steps.contains(&step) {
        let step = step - child::HOST_STEP_OFFSET;
        let call = match step {
            child::STEP_CMD_SOCKET => {
                format!(
                    "dup2(socket, {}) of the host's end of the socketpair",
                    child::HOST_FD_JUDGE
                )
            }
            child::STEP_CMD_SETUID => {
                let u = n.ids.host_uid.unwrap_or(0);
                format!("setresuid({u}, {u}, {u})")
            }
            child::STEP_CMD_EXECVE => {
                let argv = n.host_argv.unwrap_or_default();
                format!("execve({:?}, {argv:?}, env)", argv.first().map_or("", |a| a.as_str()))
            }
            s => describe_step(s, n),
        };
        return format!("{call} in the host process");
    }
    let (uid, gid) = (n.ids.uid, n.ids.gid);
    match step {
        child::STEP_CLOSE_FDS => "close_range(3.., 0) in init".into(),
        child::STEP_LOOPBACK_SOCKET => "socket(AF_INET, SOCK_DGRAM, 0)".into(),
        child::STEP_LOOPBACK_IOCTL => {
            "ioctl(sock, SIOCSIFFLAGS, {\"lo\", IFF_UP|IFF_LOOPBACK|IFF_RUNNING})".into()
        }
        child::STEP_SETHOSTNAME => "sethostname(\"gatehouse\")".into(),
        child::STEP_FORK => "clone(CLONE_VM|CLONE_VFORK|SIGCHLD) of the command process".into(),
        child::STEP_SOCKETPAIR => "socketpair(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0) in init".into(),
        child::STEP_HOST_FORK => "clone(CLONE_VM|CLONE_VFORK|SIGCHLD) of the host process".into(),
        child::STEP_CMD_DUP2 => "dup2(pipe, 1) / dup2(pipe, 2)".into(),
        child::STEP_CMD_DEVNULL => "open(\"/dev/null\", O_RDONLY) + dup2(fd, 0)".into(),
        child::STEP_CMD_CLOEXEC => "close_range(first unused fd, ~0, CLOSE_RANGE_CLOEXEC)".into(),
        child::STEP_CMD_CHDIR => "chdir(\"/workspace\")".into(),
        child::STEP_CMD_NO_NEW_PRIVS => "prctl(PR_SET_NO_NEW_PRIVS, 1)".into(),
        child::STEP_CMD_SETGROUPS => "setgroups(0, [])".into(),
        child::STEP_CMD_SETGID => format!("setresgid({gid}, {gid}, {gid})"),
        child::STEP_CMD_SETUID => format!("setresuid({uid}, {uid}, {uid})"),
        child::STEP_CMD_CHANNEL => "dup2(channel pipe, 3)".into(),
        child::STEP_CMD_REPORT_FD => {
            format!("fcntl({}, F_DUPFD_CLOEXEC, 16) of the report pipe", child::FD_REPORT)
        }
        child::STEP_CMD_SOCKET => {
            format!("dup2(socket, {}) of the judge's end of the socketpair", child::JUDGE_FD_HOST)
        }
        child::STEP_CMD_KEYRING => {
            "keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL) / keyctl(KEYCTL_CLEAR, user keyrings)".into()
        }
        child::STEP_CMD_SECCOMP => "prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, filter)".into(),
        child::STEP_CGROUP_NS => "unshare(CLONE_NEWCGROUP) in init".into(),
        child::STEP_INIT_FDS => {
            "fcntl(F_DUPFD_CLOEXEC, 9) / dup2(fd, 3..=8) of init's descriptors before its exec"
                .into()
        }
        child::STEP_INIT_EXEC => format!(
            "execveat(init image memfd \"gatehouse-init\", \"\", [{:?}], [], AT_EMPTY_PATH) of the sandbox init",
            child::INIT_ARGV0
        ),
        child::STEP_INIT_CTX => format!(
            "fstat + mmap + parse of the command context (fd {}) in the exec'd init",
            child::FD_CTX
        ),
        child::STEP_CMD_EXECVE => "execve(\"/bin/sh\", [\"/bin/sh\", \"-c\", script], env)".into(),
        s if s >= child::STEP_CGROUP_JOIN => n
            .ctx
            .cgroup_tasks
            .get((s - child::STEP_CGROUP_JOIN) as usize)
            .map(|p| {
                format!(
                    "open({:?}, O_WRONLY) + write(\"0\") (init joining the run's cgroup)",
                    p.to_string_lossy()
                )
            })
            .unwrap_or_else(|| format!("cgroup join #{}", s - child::STEP_CGROUP_JOIN)),
        s if s >= child::STEP_CMD_SETRLIMIT => n
            .rlimit_names
            .get((s - child::STEP_CMD_SETRLIMIT) as usize)
            .cloned()
            .unwrap_or_else(|| format!("setrlimit #{}", s - child::STEP_CMD_SETRLIMIT)),
        s => format!("unknown step {s}"),
    }
}

impl Sandbox {
    pub(super) fn run_inner(&self, spec: &RunSpec) -> Result<RunReport, SandboxError> {
        let lim = &spec.limits;
        let n = RUN_COUNTER.fetch_add(1, Ordering::Relaxed);
        // The uids are leased host-wide for the whole run (copy-out
        // included): the command's, and with a host first the host's (its
        // gid is the run's one gid), then the judge's (the command's).
        let (base, gid_base) = (self.config.uid, self.config.gid);
        let lease = |start: u64| super::owner::lease_uid(base, gid_base, start, UID_RANGE);
        let apart = spec.host.is_some() && self.features.uid_drop;
        let (first, second) = match (self.features.uid_drop, apart) {
            (false, _) => (None, None),
            (true, false) => (Some(lease(n)?), None),
            (true, true) => {
                let host = lease(n)?;
                (Some(host), Some(lease(n + 1)?))
            }
        };
        let ids = match (&first, &second) {
            (Some(h), Some(j)) => Ids {
                uid: base + j.offset,
                gid: gid_base + h.offset,
                host_uid: Some(base + h.offset),
            },
            (Some(l), None) => {
                Ids { uid: base + l.offset, gid: gid_base + l.offset, host_uid: None }
            }
            _ => Ids { uid: 0, gid: 0, host_uid: spec.host.as_ref().map(|_| 0) },
        };
        let (uid, gid) = (ids.uid, ids.gid);
        let id = format!("{}-{n}", self.owner.id);
        let mut ph = Phases::new();

        // Without a host the command's uid owns the workspace and the
        // evidence; with one the host's uid owns the workspace (the judge
        // writes there through the group) and the judge's the evidence.
        let (ws_owner, ev_owner) = match ids.host_uid {
            None => ((uid, gid, 0o755), (uid, gid, 0o755)),
            Some(h) => ((h, gid, 0o775), (uid, gid, 0o700)),
        };
        let mut staging = Staging::create(&id, lim.disk_bytes, ws_owner, ev_owner)?;
        ph.mark("staging");
        super::copy::copy_in(
            &spec.workspace,
            &staging.ws,
            ws_owner.0,
            gid,
            ids.host_uid.is_some(),
        )?;
        // Judge-only files belong to the judge's uid and to a group of the
        // judge's alone (its lease's own gid, which no process of the run
        // has): the host can neither read them as their owner nor through
        // the run's shared group. A copy the judge makes of one for the
        // candidate's code (a fixture folder in /tmp) is the judge's new
        // file in the shared group, readable there as intended.
        let judge_own_gid = second.as_ref().map_or(gid, |j| gid_base + j.offset);
        for rel in spec.host.iter().flat_map(|h| &h.judge_only) {
            let path = super::copy::checked_path(&staging.ws, rel, "HostSpec::judge_only")?;
            super::copy::give_to(&path, uid, judge_own_gid)?;
        }
        ph.mark("copy_in");
        let mut cgroups = RunCgroups::create(
            &self.cgroups,
            &format!("gatehouse-{id}"),
            lim.memory_bytes,
            lim.processes,
        )?;
        ph.mark("cg_create");

        let (go_r, go_w) = pipe()?;
        let (rep_r, rep_w) = pipe()?;
        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        let chan = if spec.channel { Some(pipe()?) } else { None };
        let chan_w_raw = chan.as_ref().map_or(-1, |(_, w)| w.as_raw_fd());
        let mut rlimit_names = Vec::new();
        let prepared = self.prepare(
            spec,
            &staging,
            ids,
            [go_r.as_raw_fd(), rep_w.as_raw_fd(), out_w.as_raw_fd(), err_w.as_raw_fd(), chan_w_raw],
            &cgroups.tasks_files(),
            &mut rlimit_names,
        )?;

        ph.mark("prepare");
        let start = Instant::now();
        let clone_ns = child::mono_ns();
        let pid = spawn_init(&prepared.ctx, self.clone_flags);
        if pid < 0 {
            return Err(os_err(format!("clone({})", self.clone_flag_names)));
        }
        drop((go_r, rep_w, out_w, err_w));
        let chan_r = chan.map(|(r, w)| {
            drop(w);
            r
        });
        // From here on the child must be killed and reaped on every path.
        let mut guard = ChildGuard { pid, reaped: false };

        ph.mark("clone");
        // SAFETY: writes one byte from a stack variable.
        if unsafe { libc::write(go_w.as_raw_fd(), b"g".as_ptr().cast(), 1) } != 1 {
            let e = std::io::Error::last_os_error();
            // EPIPE: init already failed and exited (its first image runs
            // before clone returns); its failure record tells why.
            if e.raw_os_error() != Some(libc::EPIPE) {
                return Err(io_err("write(go pipe, \"g\", 1)", e));
            }
        }
        drop(go_w);

        // The channel's read end (-1 when the run has none).
        let chan_fd = chan_r.as_ref().map_or(-1, |r| r.as_raw_fd());
        for fd in [rep_r.as_raw_fd(), out_r.as_raw_fd(), err_r.as_raw_fd(), chan_fd] {
            if fd >= 0 {
                set_nonblocking(fd);
            }
        }
        let mut chan_buf = Head { buf: Vec::new(), cap: super::CHANNEL_CAP, total: 0 };
        let mut out = Tail { buf: Vec::new(), cap: lim.output_tail_bytes, total: 0 };
        let mut err = Tail { buf: Vec::new(), cap: lim.output_tail_bytes, total: 0 };
        let mut rep_bytes = Vec::new();
        let mut open = [true, true, true, chan_fd >= 0];
        let deadline = start + lim.wall;
        let cpu_limit = Duration::from_secs(lim.cpu_secs);
        let mut timed_out = false;
        let mut cpu_killed = false;
        let mut killed_at: Option<Instant> = None;
        while open.iter().any(|o| *o) {
            let now = Instant::now();
            if killed_at.is_none() {
                if now >= deadline {
                    timed_out = true;
                    guard.kill();
                    killed_at = Some(now);
                } else if cgroups
                    .cpu_usage()
                    .is_some_and(|c| c > cpu_limit + Duration::from_millis(200))
                {
                    cpu_killed = true;
                    guard.kill();
                    killed_at = Some(now);
                }
            } else if killed_at.is_some_and(|t| now.duration_since(t) > Duration::from_secs(5)) {
                // Everything in the namespace is dead by now; stop waiting
                // for descriptors that some bug kept open.
                break;
            }
            let mut pfds = Vec::with_capacity(4);
            let fds = [rep_r.as_raw_fd(), out_r.as_raw_fd(), err_r.as_raw_fd(), chan_fd];
            for (i, fd) in fds.iter().enumerate() {
                if open[i] {
                    pfds.push(libc::pollfd { fd: *fd, events: libc::POLLIN, revents: 0 });
                }
            }
            let mut timeout = if killed_at.is_some() {
                100
            } else {
                deadline.saturating_duration_since(now).as_millis() as i64 + 1
            };
            if cgroups.cpuacct.is_some() {
                timeout = timeout.min(100);
            }
            // SAFETY: polls a live array of pollfds.
            let rc = unsafe {
                libc::poll(
                    pfds.as_mut_ptr(),
                    pfds.len() as libc::nfds_t,
                    timeout.clamp(0, 1000) as c_int,
                )
            };
            if rc < 0 {
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return Err(os_err("poll(sandbox pipes)"));
            }
            for (i, fd) in fds.iter().enumerate() {
                if !open[i] {
                    continue;
                }
                let still = match i {
                    0 => drain(*fd, |d| rep_bytes.extend_from_slice(d)),
                    1 => drain(*fd, |d| out.push(d)),
                    2 => drain(*fd, |d| err.push(d)),
                    _ => drain(*fd, |d| chan_buf.push(d)),
                };
                open[i] = still;
            }
        }
        ph.mark("loop");
        let (init_status, ru) = guard.reap()?;
        let wall = start.elapsed();
        ph.mark("reap");

        let stats = cgroups.stats();
        ph.mark("cg_stats");
        cgroups.remove()?;
        ph.mark("cg_remove");

        // Decode init's records; a failure record is a sandbox error.
        let mut result: Option<Record> = None;
        for chunk in rep_bytes.chunks(Record::SIZE) {
            let Some(rec) = Record::from_bytes(chunk) else { continue };
            if rec.kind == child::KIND_FAILURE {
                let names = StepNames {
                    desc: &prepared.desc,
                    ctx: &prepared.ctx,
                    ids,
                    rlimit_names: &rlimit_names,
                    host_argv: spec.host.as_ref().map(|h| h.argv.as_slice()),
                };
                return Err(SandboxError {
                    call: describe_step(rec.step, &names),
                    detail: errno_name(rec.errno),
                });
            }
            if rec.kind == child::KIND_RESULT {
                result = Some(rec);
            }
        }
        if result.is_none() && !timed_out && !cpu_killed {
            return Err(SandboxError {
                call: format!("wait4({pid}) of the sandbox init"),
                detail: format!("init ended with status {init_status:#x} without a report"),
            });
        }

        let post_start = Instant::now();
        let budget = super::copy::OutBudget { bytes: lim.disk_bytes, files: super::INODE_CAP };
        let mut out_stats = super::copy::copy_out(&staging.ws, &spec.workspace, budget)?;
        let ev_stats = copy_out_evidence(&staging.ev, &spec.workspace, budget)?;
        out_stats.add(&ev_stats);
        ph.mark("copy_out");
        staging.cleanup()?;
        ph.mark("staging_cleanup");
        let post_run = post_start.elapsed();
        if let Some(rec) = &result {
            let us = |a: i64, b: i64| (b - a) / 1000;
            let t = rec.t_ns;
            ph.print(&format!(
                " | init: root={} exec={} wait_go={} command={} teardown={} after_report={}",
                us(clone_ns, t[0]),
                us(t[0], t[1]),
                us(t[1], t[2]),
                us(t[2], t[3]),
                us(t[3], t[4]),
                us(t[4], child::mono_ns())
            ));
        }

        let exit = match &result {
            Some(rec) => decode_status(rec.status),
            None => Exit::Signal(libc::SIGKILL),
        };
        let tv =
            |t: libc::timeval| Duration::from_micros((t.tv_sec * 1_000_000 + t.tv_usec) as u64);
        let cpu = stats.cpu.unwrap_or_else(|| match &result {
            Some(rec) => Duration::from_micros((rec.utime_us + rec.stime_us).max(0) as u64),
            None => tv(ru.ru_utime) + tv(ru.ru_stime),
        });
        let peak = stats.peak_memory.unwrap_or_else(|| match &result {
            Some(rec) => rec.maxrss_kb.max(0) as u64 * 1024,
            None => ru.ru_maxrss.max(0) as u64 * 1024,
        });
        let leftovers = result
            .as_ref()
            .map(|rec| {
                rec.left[..rec.nleft as usize]
                    .iter()
                    .map(|l| Leftover {
                        pid: l.pid,
                        cmdline: String::from_utf8_lossy(&l.cmd[..l.len as usize]).into_owned(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let disk_full = result.as_ref().is_some_and(|r| r.disk_full != 0);
        let sig_or_code = |sig: i32| exit == Exit::Signal(sig) || exit == Exit::Code(128 + sig);
        let limit_hit = if timed_out {
            Some(LimitHit::Wall)
        } else if stats.oom {
            Some(LimitHit::Memory)
        } else if cpu_killed
            || sig_or_code(libc::SIGXCPU)
            || (sig_or_code(libc::SIGKILL) && cpu + Duration::from_millis(50) >= cpu_limit)
        {
            Some(LimitHit::Cpu)
        } else if sig_or_code(libc::SIGXFSZ) {
            Some(LimitHit::FileSize)
        } else if stats.pids_hit {
            Some(LimitHit::Processes)
        } else if disk_full {
            Some(LimitHit::Disk)
        } else {
            None
        };
        Ok(RunReport {
            exit,
            timed_out,
            limit_hit,
            wall,
            cpu,
            peak_memory_bytes: peak,
            stdout_tail: String::from_utf8_lossy(&out.buf).into_owned(),
            stderr_tail: String::from_utf8_lossy(&err.buf).into_owned(),
            stdout_bytes: out.total,
            stderr_bytes: err.total,
            leftovers,
            leftovers_total: result.as_ref().map_or(0, |r| r.total_left as u64),
            skipped_special_files: out_stats.skipped_special,
            out_cut_files: out_stats.cut_files,
            out_cut_bytes: out_stats.cut_bytes,
            out_cut_sparse: out_stats.cut_sparse,
            out_cut_deep: out_stats.cut_deep,
            out_hard_links: out_stats.hard_links,
            post_run,
            channel_truncated: chan_buf.total > chan_buf.buf.len() as u64,
            channel_bytes: chan_buf.total,
            channel: chan_buf.buf,
            apart,
            host_alive_at_end: result.as_ref().and_then(|r| match r.host {
                child::HOST_KILLED => Some(true),
                child::HOST_ENDED => Some(false),
                _ => None,
            }),
            host_exit: result
                .as_ref()
                .filter(|r| r.host == child::HOST_ENDED)
                .map(|r| decode_status(r.host_status)),
        })
    }
}

/// Clones init's first image on its own stack, sharing this process's
/// memory (CLONE_VM|CLONE_VFORK: no copy of the grader's page tables, and
/// this thread waits until init has exec'd or exited), in the new
/// namespaces. All signals are blocked around the clone so that no handler
/// of this process runs in the child before it resets them. Returns the
/// pid, or -1 with errno set.
fn spawn_init(ctx: &ChildCtx, ns_flags: c_int) -> libc::pid_t {
    let stack_top = (ctx.stack.as_ptr() as usize + ctx.stack.len()) & !15usize;
    // SAFETY: sigset_t is plain data; the masks are stack variables; the
    // stack is owned by `ctx`, which outlives the child's use of it (it
    // execs or exits before clone returns).
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            child::init_entry,
            stack_top as *mut libc::c_void,
            ns_flags | libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (ctx as *const ChildCtx).cast_mut().cast(),
        );
        let e = std::io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            // Keep clone's errno for the caller's message.
            *libc::__errno_location() = e.raw_os_error().unwrap_or(0);
        }
        pid
    }
}

fn decode_status(status: i32) -> Exit {
    if libc::WIFSIGNALED(status) {
        Exit::Signal(libc::WTERMSIG(status))
    } else {
        Exit::Code(libc::WEXITSTATUS(status))
    }
}

/// Kills and reaps the init process if a run ends early.
struct ChildGuard {
    pid: libc::pid_t,
    reaped: bool,
}

impl ChildGuard {
    fn kill(&self) {
        if !self.reaped {
            // SAFETY: the pid is our unreaped child, so it cannot be reused.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
            }
        }
    }

    fn reap(&mut self) -> Result<(i32, libc::rusage), SandboxError> {
        let mut status = 0;
        // SAFETY: rusage is plain data filled by wait4.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: waits for our own child.
            let rc = unsafe { libc::wait4(self.pid, &mut status, 0, &mut ru) };
            if rc == self.pid {
                self.reaped = true;
                return Ok((status, ru));
            }
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                self.reaped = true;
                return Err(os_err(format!("wait4({}, ..., 0)", self.pid)));
            }
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if !self.reaped {
            self.kill();
            let _ = self.reap();
        }
    }
}
