//! Sandbox overhead: median wall time per command through `Sandbox::run`
//! versus a plain `std::process::Command` spawn. Included with `#[path]` by
//! the overhead benchmark; it has no `main` of its own.

use std::process::Command;
use std::time::{Duration, Instant};

use grader::sandbox::{Limits, RunSpec, Sandbox};

const WARMUP: usize = 3;
const ITERATIONS: usize = 30;

fn median_ms(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1000.0
}

/// Rows of (label, sandbox median ms, plain spawn median ms).
pub fn rows() -> Vec<(String, f64, f64)> {
    let config = Sandbox::host_default_config();
    let path_dirs = config.path_dirs.clone();
    let sandbox = match Sandbox::new(config) {
        Ok(sb) => sb,
        Err(e) => panic!("Sandbox::new failed: {e}"),
    };
    let workspace = tempfile::tempdir().expect("tempdir");
    let mut path = String::new();
    for d in &path_dirs {
        path.push_str(&d.to_string_lossy());
        path.push(':');
    }
    path.push_str("/usr/local/bin:/usr/bin:/bin");
    let limits = Limits { wall: Duration::from_secs(10), ..Limits::default() };

    let mut rows = Vec::new();
    for (label, script) in [("/bin/true", "/bin/true"), ("python3 -c pass", "python3 -c pass")] {
        let spec = RunSpec {
            script: script.to_string(),
            workspace: workspace.path().to_path_buf(),
            env: Vec::new(),
            limits: limits.clone(),
            channel: false,
            read_only: Vec::new(),
            host: None,
        };
        let mut sandboxed = Vec::new();
        for i in 0..WARMUP + ITERATIONS {
            let start = Instant::now();
            let report = sandbox.run(&spec).expect("sandbox run");
            assert!(report.success(), "{report:?}");
            if i >= WARMUP {
                sandboxed.push(start.elapsed());
            }
        }
        let mut plain = Vec::new();
        for i in 0..WARMUP + ITERATIONS {
            let start = Instant::now();
            let status = Command::new("/bin/sh")
                .args(["-c", script])
                .env_clear()
                .env("PATH", &path)
                .status()
                .expect("spawn");
            assert!(status.success());
            if i >= WARMUP {
                plain.push(start.elapsed());
            }
        }
        rows.push((label.to_string(), median_ms(sandboxed), median_ms(plain)));
    }
    rows
}
