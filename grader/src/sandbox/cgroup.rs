//! Per-run cgroup v1 directories for memory, pids and cpuacct.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::SandboxError;

/// Where the v1 controllers of this process live, found once.
#[derive(Debug, Clone, Default)]
pub struct CgroupRoots {
    pub memory: Option<PathBuf>,
    pub memsw: bool,
    pub pids: Option<PathBuf>,
    pub cpuacct: Option<PathBuf>,
}

fn io_err(call: String, e: std::io::Error) -> SandboxError {
    SandboxError { call, detail: e.to_string() }
}

impl CgroupRoots {
    /// Reads `/proc/self/cgroup` and checks that a child cgroup can be
    /// created under each controller; returns the roots and a reason for
    /// each unavailable controller.
    pub fn probe() -> (CgroupRoots, Vec<(&'static str, String)>) {
        let mut roots = CgroupRoots::default();
        let mut missing = Vec::new();
        let text = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        for (ctrl, file) in [
            ("memory", "memory.limit_in_bytes"),
            ("pids", "pids.max"),
            ("cpuacct", "cpuacct.usage"),
        ] {
            let rel = text.lines().find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let _id = parts.next()?;
                let ctrls = parts.next()?;
                let path = parts.next()?;
                ctrls
                    .split(',')
                    .any(|c| c == ctrl)
                    .then(|| path.trim_start_matches('/').to_string())
            });
            let Some(rel) = rel else {
                missing.push((ctrl, format!("no v1 {ctrl} controller in /proc/self/cgroup")));
                continue;
            };
            let dir = Path::new("/sys/fs/cgroup").join(ctrl).join(&rel);
            let probe = dir.join(format!("gatehouse-probe-{}", std::process::id()));
            let ok = fs::create_dir(&probe).and_then(|_| {
                let has = probe.join(file).exists();
                fs::remove_dir(&probe)?;
                if has { Ok(()) } else { Err(std::io::Error::other(format!("{file} missing"))) }
            });
            match ok {
                Ok(()) => match ctrl {
                    "memory" => {
                        roots.memsw = dir.join("memory.memsw.limit_in_bytes").exists();
                        roots.memory = Some(dir);
                    }
                    "pids" => roots.pids = Some(dir),
                    _ => roots.cpuacct = Some(dir),
                },
                Err(e) => missing.push((ctrl, format!("mkdir({}): {e}", probe.display()))),
            }
        }
        (roots, missing)
    }
}

/// The cgroups of one run; removed by `remove` (or on drop).
pub struct RunCgroups {
    pub memory: Option<PathBuf>,
    pub pids: Option<PathBuf>,
    pub cpuacct: Option<PathBuf>,
}

/// Counters read after a run.
#[derive(Debug, Default)]
pub struct CgroupStats {
    pub cpu: Option<Duration>,
    pub peak_memory: Option<u64>,
    pub oom: bool,
    pub pids_hit: bool,
}

fn write(path: &Path, value: &str) -> Result<(), SandboxError> {
    fs::write(path, value).map_err(|e| io_err(format!("write({:?}, {value:?})", path.display()), e))
}

fn read_u64(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Reads `key N` from a flat-keyed cgroup file.
fn read_key(path: &Path, key: &str) -> Option<u64> {
    let text = fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        if k == key { v.trim().parse().ok() } else { None }
    })
}

impl RunCgroups {
    /// Creates the run's cgroups and writes the limits.
    pub fn create(
        roots: &CgroupRoots,
        name: &str,
        memory_bytes: u64,
        processes: u64,
    ) -> Result<RunCgroups, SandboxError> {
        let mut cg = RunCgroups { memory: None, pids: None, cpuacct: None };
        let mk = |root: &Option<PathBuf>| -> Result<Option<PathBuf>, SandboxError> {
            let Some(root) = root else { return Ok(None) };
            let dir = root.join(name);
            fs::create_dir(&dir).map_err(|e| io_err(format!("mkdir({:?})", dir.display()), e))?;
            Ok(Some(dir))
        };
        cg.memory = mk(&roots.memory)?;
        if let Some(dir) = &cg.memory {
            write(&dir.join("memory.limit_in_bytes"), &memory_bytes.to_string())?;
            if roots.memsw {
                write(&dir.join("memory.memsw.limit_in_bytes"), &memory_bytes.to_string())?;
            }
        }
        cg.pids = mk(&roots.pids)?;
        if let Some(dir) = &cg.pids {
            // One more than the command's budget: init is in the cgroup too.
            write(&dir.join("pids.max"), &(processes + 1).to_string())?;
        }
        cg.cpuacct = mk(&roots.cpuacct)?;
        Ok(cg)
    }

    /// The v1 `tasks` file of every cgroup of the run. Init moves itself
    /// in by writing "0" to each: migrating the calling thread by "0" is
    /// the one migration that skips the global cgroup_threadgroup_rwsem,
    /// whose write side waits for a full RCU grace period (7-12 ms here)
    /// whenever no migration happened in the last few milliseconds. Init
    /// is single-threaded, so moving its thread moves the process.
    pub fn tasks_files(&self) -> Vec<PathBuf> {
        [&self.memory, &self.pids, &self.cpuacct]
            .into_iter()
            .flatten()
            .map(|d| d.join("tasks"))
            .collect()
    }

    /// CPU time used so far by the whole tree.
    pub fn cpu_usage(&self) -> Option<Duration> {
        let dir = self.cpuacct.as_ref()?;
        read_u64(&dir.join("cpuacct.usage")).map(Duration::from_nanos)
    }

    pub fn stats(&self) -> CgroupStats {
        let mut st = CgroupStats { cpu: self.cpu_usage(), ..CgroupStats::default() };
        if let Some(dir) = &self.memory {
            st.peak_memory = read_u64(&dir.join("memory.max_usage_in_bytes"));
            // The OOM-kill counter is exact; failcnt (which also counts
            // successful reclaim) is only used on kernels without it.
            st.oom = match read_key(&dir.join("memory.oom_control"), "oom_kill") {
                Some(kills) => kills > 0,
                None => read_u64(&dir.join("memory.failcnt")).unwrap_or(0) > 0,
            };
        }
        if let Some(dir) = &self.pids {
            st.pids_hit = read_key(&dir.join("pids.events"), "max").unwrap_or(0) > 0;
        }
        st
    }

    /// Removes the cgroups; all their tasks must be dead. A cgroup may stay
    /// busy for a moment after its last task is reaped, so EBUSY is retried.
    pub fn remove(&mut self) -> Result<(), SandboxError> {
        let mut first_err = None;
        for slot in [&mut self.memory, &mut self.pids, &mut self.cpuacct] {
            let Some(dir) = slot.take() else { continue };
            let mut tries = 0;
            loop {
                match fs::remove_dir(&dir) {
                    Ok(()) => break,
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) && tries < 200 => {
                        tries += 1;
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(e) => {
                        first_err.get_or_insert(io_err(format!("rmdir({:?})", dir.display()), e));
                        break;
                    }
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for RunCgroups {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}
