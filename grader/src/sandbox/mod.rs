//! The sandbox: runs one shell command of a packet under Linux namespaces,
//! cgroups and rlimits, and reports what happened.
//!
//! INTERFACE CONTRACT (the rest of the grader is written against this; keep
//! the public names and meanings, extend freely):
//!
//! - `Sandbox::new(SandboxConfig)` probes the host once (namespaces, cgroup
//!   controllers, uid drop) and records which isolation features are in
//!   effect; an unavailable feature is an explicit fallback listed in
//!   `Features::fallbacks`, never a silent skip.
//! - `Sandbox::run(&RunSpec)` runs `/bin/sh -c <script>` with the host folder
//!   `RunSpec::workspace` visible at `/workspace` (cwd) as the only writable
//!   place besides a private `/tmp`; files the command writes there are in
//!   the host folder afterwards.
//! - `Err(SandboxError)` means the sandbox itself failed (a syscall, a mount,
//!   a cgroup write): the message names the call and its arguments. Anything
//!   the command does, including crashing, timing out or hitting a limit, is
//!   an `Ok(RunReport)`.
//! - With `RunSpec::host` the run is the judge apart (below): the command
//!   (the judge) and a host process under two uids, joined by a socketpair.
//!   `None` is the command alone, exactly as before.
//!
//! DESIGN. `run` clones an init process (raw `clone`, so no glibc atfork
//! handlers run in a child of a multi-threaded parent) into new PID, mount,
//! net, IPC and UTS namespaces. Everything the child needs is prepared
//! before the clone (`child::ChildCtx`); the child only issues raw system
//! calls and reports failures as fixed-size records (step + errno) that the
//! parent maps back to the call and its arguments. Init makes `/` rprivate,
//! builds a root on a tmpfs (read-only binds, recreated top-level symlinks,
//! a written /etc/passwd, group and hosts, a /dev of bound null, zero, full,
//! random and urandom, a fresh /proc, a size-capped /tmp), pivots into it,
//! brings loopback up, then EXECS A FRESH INIT: see below. The exec'd init
//! waits for the parent's go byte, then starts the command (rlimits,
//! no_new_privs, per-run uid, a fresh session keyring, the seccomp filter),
//! after the host process when the run has one (THE JUDGE APART), reaps
//! it, lists and kills what is left, and reports.
//!
//! THE EXEC'D INIT. Init's first image is cloned with CLONE_VM|CLONE_VFORK
//! on a stack of its own: it shares the grader's memory (no copy of its
//! page tables) while the grader's thread waits, and only runs the
//! prepared system calls. At the end it moves its descriptors to fixed
//! numbers (`proto::FD_*`: the command's context, report, go, stdout,
//! stderr, channel) and `execveat`s the SMALL INIT IMAGE with argv
//! `["gatehouse-sandbox-init"]` and an empty environment. That image is
//! the crate `grader/init`: a static, `no_std`, position-dependent
//! executable of about 11 KB with no C library (raw `syscall`
//! instructions), built by `grader/build.rs` with a nested `cargo build`
//! (offline, its own target folder), embedded in the grader with
//! `include_bytes!` (`init_image`) and written once per `Sandbox::new` into
//! a memfd sealed against writes, growth and shrinking (`F_SEAL_*`), which
//! every run execs (`execveat(memfd, "", ..., AT_EMPTY_PATH)`). It needs
//! nothing from the run's root (no loader, no C library), and its start-up
//! is the kernel mapping a few pages: no dynamic linking, no relocations.
//! It maps the command's context (`child::CmdCtx`: argv, environment,
//! rlimits, uid, seccomp program, in the format of `proto::Ctx`) from a
//! memfd the parent wrote, waits for the go byte, starts the command (after
//! the host, in a run with one), each with
//! CLONE_VM|CLONE_VFORK on its own stack (signals reset, stdio, rlimits,
//! chdir, no_new_privs, uid and gid, a fresh session keyring, the seccomp
//! filter, execve), reaps everything until the command's main process
//! ends, kills and reaps the host, lists the leftovers, kills the tree and
//! reports one record. So
//! init's address space holds its own few pages and that context, nothing
//! of the grader's image, heap, stacks or other threads' data;
//! `/proc/<init>/exe` is the memfd (`/memfd:gatehouse-init`), `cmdline` is
//! the fixed title, `environ` is empty and `comm` is `gatehouse-init`.
//! `grader/init/src/proto.rs` (descriptor and step numbers, the record,
//! the context's format and parser) is compiled into both sides.
//!
//! Before, init exec'd the grader's own executable (`/proc/self/exe`),
//! whose `.init_array` constructor ran the same loop; the exec of that
//! large position-independent image cost about 1.1–1.5 ms per command
//! (the dynamic loader's relocations and page copies, even with packed
//! relative relocations); the small image's exec takes about 0.1 ms
//! (docs/benchmarks.md, "The sandbox").
//!
//! Init moves ITSELF into the run's cgroups first thing, by writing "0" to
//! each v1 `tasks` file: a migration by pid takes the global
//! cgroup_threadgroup_rwsem for write and waits a whole RCU grace period
//! (7-12 ms) whenever no other migration happened just before, a move of
//! the calling thread does not. The command process is started with
//! CLONE_VM|CLONE_VFORK on its own stack (no copy of init's page tables).
//!
//! Nothing in init's first image may call a glibc function that assumes
//! glibc's view of the process's threads or takes a lock: it runs in the
//! grader's memory, with the grader's thread list. (When init was a forked
//! copy, glibc's setgroups/setresgid/setresuid wrappers, which broadcast
//! to "all threads", waited forever for a parent thread caught inside
//! pthread_create; the init image has no C library at all.) The
//! parent blocks every signal around the clone; the first image resets
//! dispositions and the mask with raw rt_sigaction and rt_sigprocmask
//! before anything else, and the command does again before its exec.
//!
//! The workspace differs from a `/proc/<pid>/root` copy handshake: the
//! parent mounts a size- and inode-capped tmpfs (`Limits::disk_bytes`,
//! `INODE_CAP`) on a 0700 staging directory under `/tmp/gatehouse-sandbox/`,
//! copies the host folder into it (owned by the run's uid: the host
//! process's in a run with a host) BEFORE the
//! clone, and init binds it at `/workspace`. After init is reaped (so every
//! sandboxed process is dead and nothing can race the copy) the parent
//! copies regular files and directories back into the host folder within a
//! budget (`disk_bytes` apparent bytes, `INODE_CAP` entries): symlinks and
//! special files are skipped, sparse files (mostly holes) are left behind,
//! each inode is copied once (other names become host hard links), and
//! entries nested deeper than `MAX_OUT_DEPTH` or with paths longer than
//! `MAX_OUT_PATH` are left behind; all of it is counted in the report
//! (`out_*`), and the time spent is `RunReport::post_run`. Then the staging
//! tmpfs is unmounted.
//!
//! THE JUDGE APART (a run with `RunSpec::host`, issue 44). The hidden
//! tests and the candidate's code never share a process or a uid: the
//! command is the JUDGE (the test framework, the hidden tests, the
//! grader's runner and its channel), the HOST is the candidate's side (a
//! server importing the candidate's modules, `HostSpec::argv`), and they
//! talk over an AF_UNIX SOCK_STREAM socketpair only.
//! - Uids: two are leased host-wide for the run, from the same range and
//!   with the same locks as a single run's (`owner::lease_uid`), so no other
//!   live run has either: first the host's, C, then the judge's, J. Both
//!   run with one gid G (C's lease's) and no supplementary groups. Both
//!   leases clear their uid's kernel keys when taken and when dropped, and
//!   the sweep covers both (every uid of the range).
//! - Init creates the socketpair (`socketpair(AF_UNIX, SOCK_STREAM |
//!   SOCK_CLOEXEC)`, before the go byte) and starts the host FIRST, then the
//!   command, both the same way (`child_main` of `grader/init`): the host
//!   gets the run's stdout and stderr pipes, /dev/null as stdin, its end of
//!   the socket as fd 3 (`HOST_JUDGE_FD`) and nothing else (no result
//!   channel, every other descriptor closed on exec), the same rlimits,
//!   `chdir("/workspace")`, no_new_privs, `setgroups(0)`, gid G, uid C, a
//!   fresh session keyring and C's user keyrings cleared, the seccomp
//!   filter, `oom_score_adj` 1000, then `execve(argv[0], argv, envp)` with
//!   the base environment plus `HostSpec::env` (never `RunSpec::env`). The
//!   command is started as without a host, as uid J and gid G, with the
//!   result channel at fd 3 (with `RunSpec::channel`) and its end of the
//!   socket at fd 4 (`JUDGE_HOST_FD`). Init then closes both ends of its own,
//!   so either side reads end-of-file when the other's process is gone. A
//!   failed step of the host's start is a `SandboxError` naming the call
//!   (its steps are the command's plus `proto::HOST_STEP_OFFSET`, "... in
//!   the host process"), and the command is never started.
//! - The end: when the command's main process ends, init kills the host's
//!   main process (if it still runs) and reaps it BEFORE it lists the
//!   leftovers, so the host is never a leftover while whatever it started
//!   and left running (reparented to init) is, as today.
//!   `RunReport::host_alive_at_end` says whether it still ran,
//!   `RunReport::host_exit` how it ended if it ended earlier; a host that
//!   ends early leaves the run going (the judge reads end-of-file).
//! - Files: the workspace's tmpfs root (mode 0775) and its copy are owned by
//!   C:G, with group read and write added to every regular file and group
//!   read, write and search to every folder (so the judge, in G, reads and
//!   writes there too). Each `HostSpec::judge_only` path (checked like
//!   `read_only`: relative, no `.`/`..`, a file or folder reached through
//!   folders only) is given after the copy to J and to J's lease's own
//!   group, which no process of the run has, recursively (folders 0770,
//!   files 0660, 0770 with an execute bit: `copy::give_to`), so C can
//!   neither read nor list it; and it is bound over itself in the run's
//!   root, so C, which owns the folders around it, cannot rename, remove
//!   or replace it either (a mount point is busy). `/evidence` is owned by
//!   J:G, mode 0700: only the judge writes evidence. `/tmp` stays 1777,
//!   shared. `/etc/passwd` names C "sandbox" (the name the command's uid has
//!   in a run without a host, so the candidate's code sees the same user in
//!   every kind of run) and J "judge"; `/etc/group` names G "sandbox".
//!   Copy-back is unchanged (root copies whatever the owners).
//! - Without the uid drop (not root) a run with a host still works, both
//!   processes under the one uid: `RunReport::apart` is false (true when
//!   the two uids were in effect) and `Features::fallbacks` lists
//!   `JUDGE_HOST_SHARE_UID`.
//!
//! RESULT CHANNEL AND TOOLS. With `RunSpec::channel` the command gets the
//! write end of a pipe as fd 3 (inherited like stdout) and the parent reads
//! it in the same poll loop into `RunReport::channel` (first `CHANNEL_CAP`
//! bytes). A trusted runner writes its results there, where no file the
//! candidate controls can rewrite them. `SandboxConfig::tool_dir` is bound
//! read-only (nosuid, nodev) at `/gatehouse` in every run.
//!
//! EVIDENCE FOLDER. Every run also gets `/evidence` (`EVIDENCE_MOUNT`,
//! `$GATEHOUSE_EVIDENCE`), a second capped tmpfs owned by the run's uid (the
//! judge's, mode 0700, in a run with a host), outside `/workspace` and
//! `/tmp`. After the run its contents are copied
//! (same rules and budget as the workspace) to `.gatehouse/evidence/` of
//! the host folder, replacing whatever the command left at that path. The
//! sandbox itself does not tell packet code from candidate code (both run as
//! the run's uid); the harness's confining launcher
//! (`harness/gatehouse_confine.py`, Landlock) does: a confined process
//! cannot write `/evidence`. `Sandbox::new` records the kernel's Landlock
//! ABI in `Features::landlock_abi` and lists a fallback when it has none.
//!
//! HOST-WIDE STATE. Run uids are leased with a `flock` on
//! `UID_LOCK_DIR/<uid>` for the whole run (two per run with a host), so no
//! two live runs on the host share a uid (RLIMIT_NPROC and keyrings are per uid), whichever grader
//! process started them. Each `Sandbox` holds a lock on
//! `STAGING_BASE/<id>.lock` (a random id) and names its staging folders
//! `<id>-<n>` and cgroups `gatehouse-<id>-<n>`; `Sandbox::new` sweeps the
//! folders, mounts, cgroups and locks of ids whose lock is not held (a
//! killed grader), and never those of a live one.
//!
//! WHAT THE SANDBOX DEFENDS AGAINST (each has a test in
//! `grader/tests/it/sandbox/`):
//! - seeing or changing host files: a fresh root of read-only binds, no
//!   host data but the configured system folders, the old root detached
//!   (file-handle tricks find nothing), `/workspace` and `/tmp` private;
//! - escaping the caps: wall and CPU time, memory and pids through cgroups
//!   (kernel memory included), RLIMIT_FSIZE/NOFILE/NPROC/CORE, size and
//!   inode caps on every tmpfs, output tails, a bounded result channel, and
//!   a copy-out budget so nothing the command leaves grows on the host
//!   (sparse files, hard links, inode floods, paths deeper than PATH_MAX:
//!   all counted, none an error);
//! - the network: a new network namespace with loopback only; AF_VSOCK
//!   and every socket family but UNIX, INET, INET6 and NETLINK refused;
//! - other processes: a PID namespace whose init kills everything when the
//!   command ends; `/proc` with `hidepid=2`; init is the small static
//!   image exec'd afresh (no copy of the grader's memory or image) with a
//!   fixed command line (`gatehouse-sandbox-init`) and no environment;
//! - other candidates: a uid per live run, host-wide; a fresh session
//!   keyring per run and the uid's user keyrings cleared before exec; key
//!   system calls refused anyway;
//! - the kernel's wider surface: the seccomp filter of `seccomp.rs`
//!   (namespaces, io_uring, keys, ptrace, bpf, perf, userfaultfd, mounts,
//!   modules, kexec, ...: EPERM), no_new_privs, no set-id effects
//!   (nosuid everywhere, set-id bits dropped on copy-out);
//! - host layout leaks: a cgroup namespace (`/proc/self/cgroup` shows `/`),
//!   `/proc/cmdline`, `/proc/keys`, `/proc/kcore`, `/proc/sched_debug`,
//!   `/proc/timer_list`, `/proc/sysrq-trigger` and the other `PROC_MASKS`
//!   covered by `/dev/null`;
//! - in a run with a host, the candidate's side against the judge
//!   (`sandbox/host.rs`): the host's uid cannot read or list the judge-only
//!   paths, nor rename, remove or replace them; cannot signal the judge (a
//!   different uid, no capabilities; ptrace is refused anyway), nor see its
//!   `/proc/<pid>/` (hidepid=2); cannot write or list `/evidence`; has no
//!   result channel and no descriptor but stdio and its socket; is killed
//!   before the leftovers are listed, and what it left running is listed;
//! - a killed grader's leftovers (swept at the next `Sandbox::new`): its
//!   staging mounts and folders, cgroups, and the kernel keys of the run
//!   uids it never cleared (`Sandbox::sweep_uid_keys`, also periodically).
//!
//! WHAT IT DOES NOT DEFEND AGAINST:
//! - kernel bugs in the system calls it allows (the filter is a deny list:
//!   read, write, mmap, futex, the allowed socket families, ...), and
//!   hardware side channels (Spectre-class, timing, the shared CPU caches);
//! - reading what the read-only binds show: the system folders and the
//!   interpreter's prefix are visible to every run, so they must hold no
//!   secrets; so is `/gatehouse` (the tool folder);
//! - timing between runs: two runs on the host share the CPUs and the page
//!   cache; one candidate's load can slow another's (no CPU shares);
//! - init's first image runs in the grader's memory until its exec (it
//!   only issues the prepared system calls, before any command runs); the
//!   exec'd init holds the run's own context (the command's argv and
//!   environment, which the command gets anyway) and its own small image;
//! - `/sys` is not mounted, but anything the kernel shows through the
//!   allowed `/proc` files (meminfo, cpuinfo, the kernel version via uname)
//!   stays visible;
//! - in a run with a host, what the two share: the host owns the workspace
//!   (all but the judge-only paths), so whatever the judge reads, imports,
//!   executes or follows there is the candidate's, and a symlink the host
//!   plants there can redirect a write of the judge that follows links
//!   (the judge must open with `O_NOFOLLOW`, or write under `/evidence`);
//!   `/tmp` is shared (the host reads what the judge leaves there with
//!   default modes, and can take names first); so are the loopback network
//!   and abstract UNIX sockets (intended: a hidden test's server in the
//!   judge, the candidate's client in the host), and the run's cgroup caps
//!   (memory, pids, CPU): a host can exhaust them and make the judge fail,
//!   which fails the run, never passes it. RLIMIT_NPROC is per uid, so each
//!   side has its own;
//! - in a run with a host, what crosses the socket: bytes, and whatever the
//!   kernel carries with them (the host can send descriptors with
//!   SCM_RIGHTS; a judge that reads without an ancillary buffer drops
//!   them): framing, bounds and time per call are the judge's to enforce;
//! - in a run with a host, the host can tell it is one (a "judge" user in
//!   `/etc/passwd`, a socket at fd 3, the judge's processes hidden in
//!   `/proc`); the judge's design, not the sandbox, keeps that from
//!   mattering;
//! - leftovers named by an older grader (`run-<pid>-<n>`) are not swept,
//!   since nothing tells whether their owner lives; the grader's own work
//!   folders outside `STAGING_BASE` are the grader's to clean.
//!
//! LAYOUT. Besides the command, a run may carry a result channel on fd 3
//! (`RunSpec::channel`), a read-only tool folder at `/gatehouse`
//! (`SandboxConfig::tool_dir`), an evidence folder at `/evidence` (a tmpfs of
//! its own, copied back to `.gatehouse/evidence/` of the host folder, replacing
//! what the command left there) and workspace paths bound read-only over
//! themselves (`RunSpec::read_only`). The workspace is a size- and inode-capped
//! tmpfs copy that comes back within a byte and file budget. `Sandbox::new`
//! probes the kernel's Landlock ABI (`Features::landlock_abi`, a fallback when
//! there is none) and sweeps what killed graders left (`owner`: staging mounts,
//! cgroups, and the kernel keys of run uids no live run holds, which
//! `Sandbox::sweep_uid_keys` also clears for the server's periodic sweep).
//! `prepare` builds the staging area, the mount plan and the command's context
//! before the clone; `run` leases the uid, clones, runs the event loop and
//! copies back; `sys` holds the system-call helpers both share (errors that
//! name the call).

mod cgroup;
mod child;
mod copy;
mod keys;
mod owner;
mod prepare;
#[path = "../../init/src/proto.rs"]
mod proto;
mod run;
mod seccomp;
mod sys;

pub use copy::{MAX_OUT_DEPTH, MAX_OUT_PATH, SPARSE_SLACK};
pub use owner::{Swept, UID_LOCK_DIR};
pub use run::UID_RANGE;
pub use seccomp::BLOCKED as SECCOMP_BLOCKED;
pub use sys::STAGING_BASE;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Caps applied to one command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Wall-clock limit; the whole process tree is killed when it passes.
    pub wall: Duration,
    /// CPU seconds (RLIMIT_CPU and/or cgroup accounting).
    pub cpu_secs: u64,
    /// Memory for the whole tree, in bytes.
    pub memory_bytes: u64,
    /// Processes (and threads) for the whole tree.
    pub processes: u64,
    /// Largest file the command may write, in bytes (RLIMIT_FSIZE).
    pub file_size_bytes: u64,
    /// Open file descriptors per process (RLIMIT_NOFILE).
    pub open_files: u64,
    /// Size of the private /tmp and of the writable workspace, in bytes.
    pub disk_bytes: u64,
    /// How many bytes of the end of stdout and of stderr are kept.
    pub output_tail_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            wall: Duration::from_secs(60),
            cpu_secs: 60,
            memory_bytes: 512 << 20,
            processes: 64,
            file_size_bytes: 16 << 20,
            open_files: 256,
            disk_bytes: 64 << 20,
            output_tail_bytes: 16 << 10,
        }
    }
}

/// Host-level configuration, fixed for the life of a `Sandbox`.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Host paths bound read-only at the same path inside the sandbox
    /// (system directories, the pinned interpreter's prefix).
    pub read_only_binds: Vec<PathBuf>,
    /// Directories prepended to PATH inside the sandbox.
    pub path_dirs: Vec<PathBuf>,
    /// Unprivileged uid/gid the command runs as.
    pub uid: u32,
    pub gid: u32,
    /// A host folder bound read-only (nosuid, nodev) at `/gatehouse` in
    /// every run: trusted tools such as the grader's test runners. It must
    /// be a directory (not a symlink); `None` leaves `/gatehouse` absent.
    pub tool_dir: Option<PathBuf>,
}

/// Where every run finds its evidence folder: a tmpfs of its own, outside
/// `/workspace` and `/tmp`, writable by the run's uid. What is beneath it
/// when the command ends is at `.gatehouse/evidence/` of the host folder
/// afterwards, replacing whatever the command left at that path in the
/// workspace. Processes the harness starts confined (Landlock) cannot
/// write it; packet code (hidden tests, fake upstreams) can.
pub const EVIDENCE_MOUNT: &str = "/evidence";

/// Where `/evidence` lands in the host folder after a run.
pub const EVIDENCE_DIR: &str = ".gatehouse/evidence";

/// The Landlock ABI version the running kernel offers, 0 when it has none
/// (`landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`).
pub fn landlock_abi() -> u32 {
    // SAFETY: the version query reads no memory (null attr, size 0).
    let rc = unsafe {
        libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32)
    };
    if rc < 0 { 0 } else { rc as u32 }
}

/// The fallback line a sandbox lists for the Landlock ABI `abi`: `None`
/// when the kernel has Landlock, else why evidence kept from `/evidence`
/// is not trusted.
pub fn landlock_fallback(abi: u32) -> Option<String> {
    (abi == 0).then(|| LANDLOCK_UNAVAILABLE.to_string())
}

/// The fallback line when the judge and the host of a run with a host
/// share one uid (the uid drop is unavailable).
pub const JUDGE_HOST_SHARE_UID: &str = "uid drop unavailable: every command runs as root inside the sandbox, and in a run with a host the judge and the host share that uid (the host can read the judge's files, signal it and read its /proc)";

/// The fallback lines of a sandbox whose uid drop is (un)available.
fn uid_fallbacks(uid_drop: bool) -> Option<String> {
    (!uid_drop).then(|| JUDGE_HOST_SHARE_UID.to_string())
}

/// The fallback line of a host without Landlock.
pub const LANDLOCK_UNAVAILABLE: &str = "Landlock unavailable: the harness cannot confine the candidate's processes, so files packet code writes to /evidence are not protected from them (evidence kept from it is not trusted)";

/// Where `SandboxConfig::tool_dir` appears inside the sandbox.
pub const TOOL_MOUNT: &str = "/gatehouse";

/// Inodes of each tmpfs a run mounts (the workspace, /tmp) and the most
/// entries copied back from the workspace. Ingestion allows 10,000 entries.
pub const INODE_CAP: u64 = 32_768;

/// How many bytes of the result channel (fd 3) a report keeps.
pub const CHANNEL_CAP: usize = 4 << 20;

/// One command to run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Shell text given to `/bin/sh -c`.
    pub script: String,
    /// Host folder shown at `/workspace`.
    pub workspace: PathBuf,
    /// Extra environment (the base environment is fixed and minimal).
    pub env: Vec<(String, String)>,
    pub limits: Limits,
    /// When true the command gets the write end of a pipe as descriptor 3
    /// (inherited by its children like stdout) and everything written to
    /// it is returned in `RunReport::channel`. A trusted runner streams its
    /// results there: the candidate's files cannot rewrite them afterwards.
    /// When false descriptor 3 is not open.
    pub channel: bool,
    /// Paths inside the workspace (relative, `/`-separated, no `..`) bound
    /// read-only over themselves: the files the grader laid (hidden tests,
    /// packet helpers, the harness, canaries), which nothing the command
    /// runs can then change, rename or remove. Each must exist in
    /// `workspace` as a regular file or folder, never a link, reached
    /// through folders only (no link on the way).
    pub read_only: Vec<String>,
    /// A host process beside the command, under a uid of its own (the
    /// judge apart, see the module docs); `None`: the command alone, as
    /// before.
    pub host: Option<HostSpec>,
}

/// The host process of a run with two uids: the candidate's side, started
/// before the command (the judge) and joined to it by a socketpair
/// (`HOST_JUDGE_FD` in the host, `JUDGE_HOST_FD` in the command).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    /// argv of the host process, exec'd directly (no shell, no PATH
    /// search: `argv[0]` is an absolute path), e.g.
    /// `["/usr/bin/python3", "-I", "-B", "/gatehouse/gatehouse_host.py"]`.
    pub argv: Vec<String>,
    /// The host's extra environment (the base environment plus these; NOT
    /// `RunSpec::env`).
    pub env: Vec<(String, String)>,
    /// Workspace paths (relative, '/'-separated, validated like
    /// `RunSpec::read_only`) that only the judge may read: owned by the
    /// judge's uid, mode 0600 (0700 for a file with an execute bit) and
    /// 0700 for folders, recursively; each is a mount point (bound over
    /// itself), so the host, which owns the folders around it, cannot
    /// rename, remove or replace it either.
    pub judge_only: Vec<String>,
}

/// The command's descriptor for its end of the socketpair joining it to the
/// host (in a run with `RunSpec::host`).
pub const JUDGE_HOST_FD: i32 = proto::JUDGE_FD_HOST;
/// The host's descriptor for its end of that socketpair.
pub const HOST_JUDGE_FD: i32 = proto::HOST_FD_JUDGE;

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

/// Which cap, if any, ended or constrained the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitHit {
    Wall,
    Cpu,
    Memory,
    Processes,
    FileSize,
    Disk,
}

/// A process that was still alive in the sandbox after the command's main
/// process exited; it was killed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leftover {
    pub pid: i32,
    pub cmdline: String,
}

/// What one run did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub exit: Exit,
    pub timed_out: bool,
    pub limit_hit: Option<LimitHit>,
    pub wall: Duration,
    pub cpu: Duration,
    pub peak_memory_bytes: u64,
    pub stdout_tail: String,
    pub stderr_tail: String,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub leftovers: Vec<Leftover>,
    /// How many leftover processes were found; `leftovers` lists at most
    /// the first 24 of them.
    #[serde(default)]
    pub leftovers_total: u64,
    /// Symlinks and special files the command left in the workspace; they
    /// were not copied back to the host folder.
    #[serde(default)]
    pub skipped_special_files: u64,
    /// Files and directories not copied back because the copy-out budget
    /// (`Limits::disk_bytes` apparent bytes, `INODE_CAP` entries) ran out.
    #[serde(default)]
    pub out_cut_files: u64,
    /// Apparent bytes of the regular files the budget left behind.
    #[serde(default)]
    pub out_cut_bytes: u64,
    /// Sparse files (mostly holes) not copied back: the host copy would be
    /// their full length (see `copy::is_sparse`).
    #[serde(default)]
    pub out_cut_sparse: u64,
    /// Entries not copied back because they were nested too deep or their
    /// path was too long (see `copy::MAX_OUT_DEPTH`, `copy::MAX_OUT_PATH`).
    #[serde(default)]
    pub out_cut_deep: u64,
    /// Extra names of a file already copied back; they became host hard
    /// links to the one copy and cost no bytes.
    #[serde(default)]
    pub out_hard_links: u64,
    /// Time the parent spent after the command's tree was dead: copying the
    /// workspace back and removing the staging area. Not part of `wall`;
    /// a caller's budget should count it.
    #[serde(default)]
    pub post_run: Duration,
    /// Everything the command wrote to descriptor 3 (`RunSpec::channel`),
    /// in order, at most `CHANNEL_CAP` bytes. Not part of receipts.
    #[serde(skip)]
    pub channel: Vec<u8>,
    /// How many bytes were written to descriptor 3 in total.
    #[serde(skip)]
    pub channel_bytes: u64,
    /// More than `CHANNEL_CAP` bytes were written; `channel` holds the first.
    #[serde(skip)]
    pub channel_truncated: bool,
    /// A run with a host (`RunSpec::host`) ran the judge and the host under
    /// two uids; false without a host, or when the uid drop is unavailable
    /// and both ran under one (`Features::fallbacks` says so).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub apart: bool,
    /// Whether the host's main process was still alive when the command's
    /// main process ended (init then killed it, and it is not a leftover;
    /// what it started and left running is). `None`: the run has no host,
    /// or init did not report (the run was killed at its wall or CPU
    /// limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_alive_at_end: Option<bool>,
    /// How the host's main process ended when it ended before the command's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_exit: Option<Exit>,
}

impl RunReport {
    pub fn success(&self) -> bool {
        self.exit == Exit::Code(0) && !self.timed_out && self.limit_hit.is_none()
    }

    /// How the command ended, in a few words: "exit code 1", "killed by
    /// signal 9, timed out, hit the wall limit".
    pub fn describe(&self) -> String {
        let mut s = match self.exit {
            Exit::Code(c) => format!("exit code {c}"),
            Exit::Signal(n) => format!("killed by signal {n}"),
        };
        if self.timed_out {
            s.push_str(", timed out");
        }
        if let Some(l) = self.limit_hit {
            s.push_str(&format!(", hit the {l:?} limit").to_lowercase());
        }
        s
    }
}

/// Isolation features in effect on this host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Features {
    pub pid_namespace: bool,
    pub net_namespace: bool,
    pub mount_namespace: bool,
    pub uid_drop: bool,
    pub cgroup_memory: bool,
    pub cgroup_pids: bool,
    pub cgroup_cpu: bool,
    pub rlimits: bool,
    /// The Landlock ABI version the kernel offers (0: none). The harness's
    /// confining launcher (`gatehouse_confine.py`) needs it to keep the
    /// candidate's processes from writing `/evidence`.
    pub landlock_abi: u32,
    /// Each feature that is missing, with what was done instead.
    pub fallbacks: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("sandbox failure: {call}: {detail}")]
pub struct SandboxError {
    /// The call and its arguments, e.g. `mount("tmpfs", "/x/tmp", ...)`.
    pub call: String,
    pub detail: String,
}

pub struct Sandbox {
    config: SandboxConfig,
    features: Features,
    cgroups: cgroup::CgroupRoots,
    /// The namespaces `clone` creates for init.
    clone_flags: libc::c_int,
    clone_flag_names: String,
    uts_namespace: bool,
    /// Init enters a cgroup namespace of its own.
    cgroup_ns: bool,
    /// The command's seccomp program (empty on an architecture without one).
    seccomp: Vec<libc::sock_filter>,
    /// Files of /proc hidden behind /dev/null in every run.
    proc_masks: Vec<&'static str>,
    /// The small init image (`init_image`) in a sealed memfd, made at
    /// `new`: what every run's init execs.
    init_exe: std::os::fd::OwnedFd,
    /// Held for the life of the sandbox; names its staging folders and
    /// cgroups.
    owner: owner::OwnerLock,
    /// What the sweep at `new` removed of killed graders' leftovers.
    swept: Swept,
}

/// Files of /proc that show the host (kernel command line, keys, kernel
/// memory and timers) or act on it; each one present is covered by a bind
/// of /dev/null, as container runtimes do.
pub const PROC_MASKS: &[&str] = &[
    "cmdline",
    "kcore",
    "keys",
    "key-users",
    "kallsyms",
    "sched_debug",
    "timer_list",
    "sysrq-trigger",
    "latency_stats",
    "timer_stats",
    "mounts_all",
    "kmsg",
    "config.gz",
    "modules",
    "vmallocinfo",
    "slabinfo",
];

impl Sandbox {
    /// Probes the host and returns a sandbox, or an error when the
    /// mandatory isolation (root, PID and mount namespaces) is unavailable
    /// or a trivial probe command cannot run.
    pub fn new(config: SandboxConfig) -> Result<Sandbox, SandboxError> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(SandboxError {
                call: "geteuid()".into(),
                detail: "the sandbox must run as root (mounts, namespaces, cgroups, uid drop)"
                    .into(),
            });
        }
        let mut fallbacks = Vec::new();
        let mandatory = libc::CLONE_NEWPID | libc::CLONE_NEWNS;
        if let Err(e) = probe_clone(mandatory) {
            return Err(SandboxError {
                call: "clone(CLONE_NEWPID|CLONE_NEWNS|SIGCHLD)".into(),
                detail: format!("{e}; the sandbox cannot isolate processes or files"),
            });
        }
        let mut flags = mandatory;
        let mut names = String::from("CLONE_NEWPID|CLONE_NEWNS");
        let mut optional = |flag: libc::c_int, name: &str, fallback: &str| -> bool {
            match probe_clone(flag) {
                Ok(()) => {
                    flags |= flag;
                    names.push('|');
                    names.push_str(name);
                    true
                }
                Err(e) => {
                    fallbacks.push(format!("clone({name}) failed ({e}): {fallback}"));
                    false
                }
            }
        };
        let net =
            optional(libc::CLONE_NEWNET, "CLONE_NEWNET", "the command shares the host network");
        let ipc = optional(
            libc::CLONE_NEWIPC,
            "CLONE_NEWIPC",
            "the command shares the host System V IPC",
        );
        let uts = optional(libc::CLONE_NEWUTS, "CLONE_NEWUTS", "the command sees the host name");
        let _ = ipc;
        names.push_str("|CLONE_VM|CLONE_VFORK|SIGCHLD");
        let cgroup_ns = match probe_clone(libc::CLONE_NEWCGROUP) {
            Ok(()) => true,
            Err(e) => {
                fallbacks.push(format!(
                    "clone(CLONE_NEWCGROUP) failed ({e}): the command sees its host cgroup path in /proc/self/cgroup"
                ));
                false
            }
        };
        let seccomp = match seccomp::program() {
            Some(p) => p,
            None => {
                fallbacks.push("no seccomp filter for this architecture: every system call is open to the command".into());
                Vec::new()
            }
        };
        let init_exe = init_image_memfd()?;
        let proc_masks =
            PROC_MASKS.iter().copied().filter(|m| Path::new("/proc").join(m).exists()).collect();

        let (cgroups, missing) = cgroup::CgroupRoots::probe();
        for (ctrl, why) in missing {
            let instead = match ctrl {
                "memory" => {
                    "memory cgroup unavailable: RLIMIT_AS used instead (per process, virtual memory; LimitHit::Memory is not detected)"
                }
                "pids" => {
                    "pids cgroup unavailable: RLIMIT_NPROC on the run's own uid used instead (LimitHit::Processes is not detected)"
                }
                _ => {
                    "cpuacct cgroup unavailable: RLIMIT_CPU per process and the rusage of reaped processes used instead"
                }
            };
            fallbacks.push(format!("{instead} ({why})"));
        }
        let landlock_abi = landlock_abi();
        fallbacks.extend(landlock_fallback(landlock_abi));
        // Root, checked above: the uid drop (and two uids per run with a
        // host) is always in effect.
        let uid_drop = true;
        fallbacks.extend(uid_fallbacks(uid_drop));
        let features = Features {
            landlock_abi,
            pid_namespace: true,
            net_namespace: net,
            mount_namespace: true,
            uid_drop,
            cgroup_memory: cgroups.memory.is_some(),
            cgroup_pids: cgroups.pids.is_some(),
            cgroup_cpu: cgroups.cpuacct.is_some(),
            rlimits: true,
            fallbacks,
        };
        let roots: Vec<PathBuf> = [&cgroups.memory, &cgroups.pids, &cgroups.cpuacct]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        let mut swept = owner::sweep(Path::new(STAGING_BASE), &roots);
        if features.uid_drop {
            swept.uid_keys = owner::sweep_uid_keys(config.uid, config.gid, UID_RANGE);
        }
        let owner = owner::take_owner_lock(Path::new(STAGING_BASE))?;
        let sandbox = Sandbox {
            config,
            features,
            cgroups,
            clone_flags: flags,
            clone_flag_names: names,
            uts_namespace: uts,
            cgroup_ns,
            seccomp,
            proc_masks,
            init_exe,
            owner,
            swept,
        };
        sandbox.probe_run()?;
        Ok(sandbox)
    }

    /// Runs a trivial command end to end; any failure is reported as is.
    fn probe_run(&self) -> Result<(), SandboxError> {
        let dir = tempfile::tempdir()
            .map_err(|e| SandboxError { call: "mkdtemp()".into(), detail: e.to_string() })?;
        let spec = RunSpec {
            script: "test \"$(id -u)\" != 0".into(),
            workspace: dir.path().to_path_buf(),
            env: Vec::new(),
            limits: Limits { wall: Duration::from_secs(10), ..Limits::default() },
            channel: false,
            read_only: Vec::new(),
            host: None,
        };
        let report = self.run(&spec)?;
        if report.exit != Exit::Code(0) {
            return Err(SandboxError {
                call: "probe run of `test \"$(id -u)\" != 0`".into(),
                detail: format!("ended with {:?}; stderr: {}", report.exit, report.stderr_tail),
            });
        }
        Ok(())
    }

    /// A configuration for this host: system directories plus the prefix of
    /// the `python3` on PATH, run as an unprivileged uid.
    pub fn host_default_config() -> SandboxConfig {
        let mut binds: Vec<PathBuf> = Vec::new();
        let candidates = [
            "/usr",
            "/bin",
            "/sbin",
            "/lib",
            "/lib32",
            "/lib64",
            "/libx32",
            "/etc/ld.so.cache",
            "/etc/ld.so.conf",
            "/etc/ld.so.conf.d",
            "/etc/localtime",
            "/etc/timezone",
            "/etc/alternatives",
            "/etc/ssl/certs",
            "/etc/ssl/openssl.cnf",
            "/etc/ca-certificates",
            "/etc/nsswitch.conf",
            "/etc/protocols",
            "/etc/services",
            "/etc/mime.types",
            "/etc/os-release",
            "/etc/debian_version",
        ];
        for c in candidates {
            let p = Path::new(c);
            if p.symlink_metadata().is_ok() {
                binds.push(p.to_path_buf());
            }
        }
        let mut path_dirs = Vec::new();
        let out = std::process::Command::new("python3")
            .args(["-c", "import sys, os; print(sys.base_prefix); print(sys.prefix); print(os.path.realpath(sys.executable))"])
            .output();
        if let Some(out) = out.ok().filter(|o| o.status.success()) {
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let lines: Vec<&str> = text.lines().collect();
            for prefix in lines.iter().take(2) {
                let p = PathBuf::from(prefix);
                let covered = binds.iter().any(|b| p.starts_with(b));
                if p.is_absolute() && p.is_dir() && !covered && !binds.contains(&p) {
                    binds.push(p.clone());
                }
            }
            if let Some(bin) = lines.get(2).map(Path::new).and_then(Path::parent) {
                path_dirs.push(bin.to_path_buf());
            }
        }
        SandboxConfig { read_only_binds: binds, path_dirs, uid: 61000, gid: 61000, tool_dir: None }
    }

    pub fn features(&self) -> &Features {
        &self.features
    }

    /// This sandbox as it reports itself on a kernel whose Landlock ABI is
    /// `abi` (0: none): `Features::landlock_abi` and the Landlock fallback
    /// line follow `abi` instead of the probe. For tests of the paths a
    /// kernel without Landlock takes (what the grader reports and trusts);
    /// the harness's own probe inside the sandbox still sees the kernel.
    #[doc(hidden)]
    pub fn assume_landlock_abi(mut self, abi: u32) -> Sandbox {
        self.features.fallbacks.retain(|f| f != LANDLOCK_UNAVAILABLE);
        self.features.fallbacks.extend(landlock_fallback(abi));
        self.features.landlock_abi = abi;
        self
    }

    /// This sandbox as it would be without the uid drop (not root): every
    /// command runs as root inside the sandbox, a run with a host runs
    /// both processes under that one uid (`RunReport::apart` false), and
    /// `Features` says so. For tests of that fallback only.
    #[doc(hidden)]
    pub fn assume_no_uid_drop(mut self) -> Sandbox {
        self.features.uid_drop = false;
        self.features.fallbacks.retain(|f| f != JUDGE_HOST_SHARE_UID);
        self.features.fallbacks.extend(uid_fallbacks(false));
        self
    }

    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// The id naming this sandbox's staging folders (`STAGING_BASE/<id>-<n>`),
    /// cgroups (`gatehouse-<id>-<n>`) and owner lock (`STAGING_BASE/<id>.lock`).
    pub fn instance_id(&self) -> &str {
        &self.owner.id
    }

    /// What `new` swept of graders that died without cleaning up.
    pub fn swept(&self) -> &Swept {
        &self.swept
    }

    /// Clears the kernel keys of this sandbox's run uids that no live run
    /// holds (what runs killed with their grader left); how many uids.
    /// `new` does it once; a long-lived process calls it periodically.
    pub fn sweep_uid_keys(&self) -> u64 {
        if !self.features.uid_drop {
            return 0;
        }
        owner::sweep_uid_keys(self.config.uid, self.config.gid, UID_RANGE)
    }

    pub fn run(&self, spec: &RunSpec) -> Result<RunReport, SandboxError> {
        self.run_inner(spec)
    }
}

/// The sandbox's init image (`grader/init`, built by `grader/build.rs`): a
/// static executable of a few kilobytes that every run's init execs. Empty
/// on a target it is not built for (then `Sandbox::new` refuses).
pub fn init_image() -> &'static [u8] {
    include_bytes!(concat!(env!("OUT_DIR"), "/gatehouse-init"))
}

/// A memfd holding `init_image`, sealed against writes, growth, shrinking
/// and further seals, close-on-exec.
fn init_image_memfd() -> Result<std::os::fd::OwnedFd, SandboxError> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let image = init_image();
    if image.is_empty() {
        return Err(SandboxError {
            call: "the sandbox init image (grader/init)".into(),
            detail: "not built for this target: grader/build.rs builds it for x86_64 Linux only"
                .into(),
        });
    }
    let last = |call: &str| SandboxError {
        call: call.into(),
        detail: sys::errno_name(std::io::Error::last_os_error().raw_os_error().unwrap_or(0)),
    };
    let name = c"gatehouse-init";
    let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    // MFD_EXEC (Linux 6.3) keeps it executable where vm.memfd_noexec=1
    // makes new memfds non-executable by default; older kernels refuse the
    // flag with EINVAL and are asked without it.
    // SAFETY: a static name; the descriptor is owned below.
    let mut fd = unsafe { libc::memfd_create(name.as_ptr(), flags | libc::MFD_EXEC) };
    if fd < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        // SAFETY: as above.
        fd = unsafe { libc::memfd_create(name.as_ptr(), flags) };
    }
    if fd < 0 {
        return Err(last(
            "memfd_create(\"gatehouse-init\", MFD_CLOEXEC|MFD_ALLOW_SEALING|MFD_EXEC)",
        ));
    }
    // SAFETY: the descriptor was just created and is owned here.
    let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    std::io::Write::write_all(&mut &file, image).map_err(|e| SandboxError {
        call: format!("write(memfd \"gatehouse-init\", {} bytes of the init image)", image.len()),
        detail: e.to_string(),
    })?;
    let seals = libc::F_SEAL_WRITE | libc::F_SEAL_GROW | libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL;
    // SAFETY: plain fcntl on an owned descriptor.
    if unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&file), libc::F_ADD_SEALS, seals) } != 0
    {
        return Err(last(
            "fcntl(memfd \"gatehouse-init\", F_ADD_SEALS, F_SEAL_WRITE|F_SEAL_GROW|F_SEAL_SHRINK|F_SEAL_SEAL)",
        ));
    }
    Ok(file.into())
}

/// Clones a child in the given namespaces that exits at once.
fn probe_clone(flags: libc::c_int) -> Result<(), std::io::Error> {
    let pid = child::raw_fork(flags);
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: the probe child exits without touching anything.
        unsafe { libc::_exit(0) }
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    Ok(())
}
