//! Sandbox containment tests with real, hostile processes. They need root,
//! namespaces and cgroups (as on the CI machines).

use std::fs;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use grader::sandbox::{Limits, RunReport, RunSpec, Sandbox};

mod basics;
mod channel;
mod graders;
mod host;
mod init;
mod isolation;
mod limits;

/// One sandbox shared by all tests (probing happens once).
fn sandbox() -> &'static Sandbox {
    static SB: OnceLock<Sandbox> = OnceLock::new();
    SB.get_or_init(|| match Sandbox::new(Sandbox::host_default_config()) {
        Ok(sb) => sb,
        Err(e) => panic!("Sandbox::new failed: {e}"),
    })
}

/// Limits small enough to keep every test fast.
fn small_limits() -> Limits {
    Limits {
        wall: Duration::from_secs(10),
        cpu_secs: 5,
        memory_bytes: 256 << 20,
        processes: 32,
        file_size_bytes: 8 << 20,
        open_files: 64,
        disk_bytes: 16 << 20,
        output_tail_bytes: 4096,
    }
}

fn run_in(dir: &Path, script: &str, limits: Limits) -> RunReport {
    let spec = RunSpec {
        script: script.to_string(),
        workspace: dir.to_path_buf(),
        env: Vec::new(),
        limits,
        channel: false,
        read_only: Vec::new(),
        host: None,
    };
    match sandbox().run(&spec) {
        Ok(r) => r,
        Err(e) => panic!("sandbox error for {script:?}: {e}"),
    }
}

fn run(script: &str, limits: Limits) -> RunReport {
    let dir = tempfile::tempdir().expect("tempdir");
    run_in(dir.path(), script, limits)
}

/// Host processes whose command line contains `marker`.
fn host_processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    let me = std::process::id().to_string();
    for entry in fs::read_dir("/proc").expect("read /proc").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) || name == me {
            continue;
        }
        if let Ok(cmd) = fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(marker) {
                found.push(format!("{name}: {cmd}"));
            }
        }
    }
    found
}
