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
//!
//! DESIGN. `run` clones an init process (raw `clone`, so no glibc atfork
//! handlers run in a copy of a multi-threaded parent) into new PID, mount,
//! net, IPC and UTS namespaces. Everything the child needs is prepared
//! before the clone (`child::ChildCtx`); the child only issues raw system
//! calls and reports failures as fixed-size records (step + errno) that the
//! parent maps back to the call and its arguments. Init makes `/` rprivate,
//! builds a root on a tmpfs (read-only binds, recreated top-level symlinks,
//! a written /etc/passwd, group and hosts, a /dev of bound null, zero, full,
//! random and urandom, a fresh /proc, a size-capped /tmp), pivots into it,
//! brings loopback up, waits for the parent's go byte, then starts the
//! command (rlimits, no_new_privs, per-run uid).
//!
//! Init moves ITSELF into the run's cgroups first thing, by writing "0" to
//! each v1 `tasks` file: a migration by pid takes the global
//! cgroup_threadgroup_rwsem for write and waits a whole RCU grace period
//! (7-12 ms) whenever no other migration happened just before, a move of
//! the calling thread does not. The command process is started with
//! CLONE_VM|CLONE_VFORK on its own stack (no copy of init's page tables).
//!
//! Nothing after the clone may call a glibc function that assumes glibc's
//! view of the process's threads: the copy still carries the parent's
//! thread list. In particular setgroups/setresgid/setresuid must be raw
//! system calls; glibc's wrappers broadcast to "all threads" and wait
//! forever for a parent thread that was inside pthread_create at clone
//! time (the `sandbox_stress_*` test hung on this about once a suite run).
//! Signal dispositions and the mask are reset with raw rt_sigaction and
//! rt_sigprocmask in init and again in the command before exec.
//!
//! The workspace differs from a `/proc/<pid>/root` copy handshake: the
//! parent mounts a size-capped tmpfs (`Limits::disk_bytes`) on a 0700
//! staging directory under `/tmp/gatehouse-sandbox/`, copies the host folder
//! into it (owned by the run's uid) BEFORE the clone, and init binds it at
//! `/workspace`. After init is reaped (so every sandboxed process is dead and
//! nothing can race the copy) the parent copies regular files and
//! directories back into the host folder, skipping and counting symlinks and
//! special files, then unmounts the staging tmpfs. The disk cap holds, no
//! host data is visible inside, and results land on the host.

mod cgroup;
mod child;
mod copy;
mod run;

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
    /// TEMPORARY STUB (the sandbox branch implements it).
    pub tool_dir: Option<PathBuf>,
}

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
    /// TEMPORARY STUB.
    pub channel: bool,
}

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
    #[serde(skip)]
    pub channel: Vec<u8>,
    #[serde(skip)]
    pub channel_truncated: bool,
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
}

impl Sandbox {
    /// Probes the host and returns a sandbox, or an error when the
    /// mandatory isolation (root, PID and mount namespaces) is unavailable
    /// or a trivial probe command cannot run.
    pub fn new(config: SandboxConfig) -> Result<Sandbox, SandboxError> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(SandboxError {
                call: "geteuid()".into(),
                detail: "the sandbox must run as root (mounts, namespaces, cgroups, uid drop)".into(),
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
        let net = optional(libc::CLONE_NEWNET, "CLONE_NEWNET", "the command shares the host network");
        let ipc = optional(libc::CLONE_NEWIPC, "CLONE_NEWIPC", "the command shares the host System V IPC");
        let uts = optional(libc::CLONE_NEWUTS, "CLONE_NEWUTS", "the command sees the host name");
        let _ = ipc;
        names.push_str("|SIGCHLD");

        let (cgroups, missing) = cgroup::CgroupRoots::probe();
        for (ctrl, why) in missing {
            let instead = match ctrl {
                "memory" => "memory cgroup unavailable: RLIMIT_AS used instead (per process, virtual memory; LimitHit::Memory is not detected)",
                "pids" => "pids cgroup unavailable: RLIMIT_NPROC on the run's own uid used instead (LimitHit::Processes is not detected)",
                _ => "cpuacct cgroup unavailable: RLIMIT_CPU per process and the rusage of reaped processes used instead",
            };
            fallbacks.push(format!("{instead} ({why})"));
        }
        let features = Features {
            pid_namespace: true,
            net_namespace: net,
            mount_namespace: true,
            uid_drop: true,
            cgroup_memory: cgroups.memory.is_some(),
            cgroup_pids: cgroups.pids.is_some(),
            cgroup_cpu: cgroups.cpuacct.is_some(),
            rlimits: true,
            fallbacks,
        };
        let sandbox = Sandbox {
            config,
            features,
            cgroups,
            clone_flags: flags,
            clone_flag_names: names,
            uts_namespace: uts,
        };
        sandbox.probe_run()?;
        Ok(sandbox)
    }

    /// Runs a trivial command end to end; any failure is reported as is.
    fn probe_run(&self) -> Result<(), SandboxError> {
        let dir = tempfile::tempdir().map_err(|e| SandboxError { call: "mkdtemp()".into(), detail: e.to_string() })?;
        let spec = RunSpec {
            script: "test \"$(id -u)\" != 0".into(),
            workspace: dir.path().to_path_buf(),
            env: Vec::new(),
            limits: Limits { wall: Duration::from_secs(10), ..Limits::default() },
            channel: false,
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
            "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
            "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
            "/etc/timezone", "/etc/alternatives", "/etc/ssl/certs", "/etc/ssl/openssl.cnf",
            "/etc/ca-certificates", "/etc/nsswitch.conf", "/etc/protocols", "/etc/services",
            "/etc/mime.types", "/etc/os-release", "/etc/debian_version",
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

    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    pub fn run(&self, spec: &RunSpec) -> Result<RunReport, SandboxError> {
        self.run_inner(spec)
    }
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
