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

use std::path::PathBuf;
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
}

impl RunReport {
    pub fn success(&self) -> bool {
        self.exit == Exit::Code(0) && !self.timed_out && self.limit_hit.is_none()
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
}

impl Sandbox {
    pub fn new(config: SandboxConfig) -> Result<Sandbox, SandboxError> {
        let _ = &config;
        todo!("sandbox helper implements")
    }

    /// A configuration for this host: system directories plus the prefix of
    /// the `python3` on PATH, run as an unprivileged uid.
    pub fn host_default_config() -> SandboxConfig {
        todo!("sandbox helper implements")
    }

    pub fn features(&self) -> &Features {
        &self.features
    }

    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    pub fn run(&self, spec: &RunSpec) -> Result<RunReport, SandboxError> {
        let _ = spec;
        todo!("sandbox helper implements")
    }
}
