//! Plain runs: features, exit codes, the unprivileged user, results, concurrency, /gatehouse.

use std::fs;
use std::path::Path;
use std::time::Duration;

use grader::sandbox::{Exit, Limits, RunReport, RunSpec, Sandbox};

use super::*;

#[test]
fn sandbox_features_all_available_without_fallbacks() {
    let f = sandbox().features();
    assert!(f.fallbacks.is_empty(), "fallbacks: {:?}", f.fallbacks);
    assert!(f.pid_namespace && f.net_namespace && f.mount_namespace && f.uid_drop);
    assert!(f.cgroup_memory && f.cgroup_pids && f.cgroup_cpu && f.rlimits);
}

#[test]
fn sandbox_clean_runs_succeed() {
    let r = run("/bin/true", small_limits());
    assert_eq!(r.exit, Exit::Code(0), "{r:?}");
    assert!(r.success(), "{r:?}");
    let r = run("python3 -c 'print(1)'", small_limits());
    assert_eq!(r.exit, Exit::Code(0), "{r:?}");
    assert_eq!(r.stdout_tail, "1\n");
    assert!(r.success() && r.leftovers.is_empty(), "{r:?}");
}

#[test]
fn sandbox_exit_codes_and_signals() {
    let r = run("exit 3", small_limits());
    assert_eq!(r.exit, Exit::Code(3));
    assert_eq!(r.limit_hit, None);
    let r = run("kill -TERM $$", small_limits());
    assert_eq!(r.exit, Exit::Signal(libc::SIGTERM), "{r:?}");
    let r = run("echo out; echo err >&2; exit 0", small_limits());
    assert_eq!((r.stdout_tail.as_str(), r.stderr_tail.as_str()), ("out\n", "err\n"));
}

#[test]
fn sandbox_command_is_not_root() {
    let r = run("id -u; id -g; id -G", small_limits());
    assert_eq!(r.exit, Exit::Code(0), "{r:?}");
    let ids: Vec<u32> =
        r.stdout_tail.split_whitespace().map(|s| s.parse().expect("number")).collect();
    assert_eq!(ids.len(), 3, "{r:?}");
    let base = sandbox().config().uid;
    assert!(ids[0] >= base && ids[0] != 0, "uid {}", ids[0]);
    assert!(ids.iter().all(|&i| i != 0), "{ids:?}");
    // Writes to system directories fail, and the workspace is the run's own.
    let r = run(
        "touch /usr/gh_sandbox_probe || touch /etc/gh_probe || touch /gh_probe || echo denied",
        small_limits(),
    );
    assert_eq!(r.stdout_tail, "denied\n", "{r:?}");
    assert!(!Path::new("/usr/gh_sandbox_probe").exists());
    let r = run("stat -c %u . && touch x && echo ok", small_limits());
    assert!(r.stdout_tail.ends_with("ok\n"), "{r:?}");
}

#[test]
fn sandbox_workspace_results_come_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("input.txt"), "hello\n").expect("write");
    fs::create_dir(dir.path().join("sub")).expect("mkdir");
    fs::write(dir.path().join("sub/old.txt"), "old\n").expect("write");
    let script = "cat input.txt > out.txt && mkdir -p d/e && echo deep > d/e/f.txt && rm sub/old.txt \
                  && ln -s /etc/passwd link && mkfifo fifo && chmod 4755 out.txt; echo done";
    let r = run_in(dir.path(), script, small_limits());
    assert_eq!(r.stdout_tail, "done\n", "{r:?}");
    assert_eq!(fs::read_to_string(dir.path().join("out.txt")).expect("out"), "hello\n");
    assert_eq!(fs::read_to_string(dir.path().join("d/e/f.txt")).expect("f"), "deep\n");
    assert!(!dir.path().join("sub/old.txt").exists());
    assert!(dir.path().join("link").symlink_metadata().is_err(), "symlinks are not copied back");
    assert!(!dir.path().join("fifo").exists());
    assert_eq!(r.skipped_special_files, 2);
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(dir.path().join("out.txt")).expect("meta").permissions().mode();
    assert_eq!(mode & 0o7000, 0, "set-id bits are dropped");
}

#[test]
fn sandbox_concurrent_runs_use_distinct_uids() {
    let handles: Vec<_> =
        (0..12).map(|_| std::thread::spawn(|| run("id -u; sleep 0.2", small_limits()))).collect();
    let reports: Vec<RunReport> = handles.into_iter().map(|h| h.join().expect("join")).collect();
    let mut uids: Vec<String> = reports.iter().map(|r| r.stdout_tail.clone()).collect();
    assert!(uids.iter().all(|u| !u.is_empty()), "{reports:?}");
    uids.sort();
    uids.dedup();
    assert_eq!(uids.len(), 12, "{uids:?}");
}

/// Regression test for a hang: the command process is a raw-clone copy of a
/// multi-threaded parent, and glibc's setresuid/setgroups wrappers in it
/// waited forever for a parent thread that was being created at clone time.
/// Hostile runs (fork bomb, memory hog, CPU spinners, daemon, disk filler,
/// chatty output) run beside trivial ones while another thread keeps
/// creating threads; every trivial run must succeed promptly.
#[test]
fn sandbox_stress_hostile_and_trivial_runs_concurrently() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let sb = sandbox();
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut spawned = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let hs: Vec<_> =
                    (0..4).map(|_| std::thread::spawn(|| std::hint::black_box(1))).collect();
                for h in hs {
                    let _ = h.join();
                }
                spawned += 4;
            }
            spawned
        })
    };
    let hostile = [
        (
            ": stress_forkbomb; b() { b | b & }; b; sleep 1",
            Limits { wall: Duration::from_secs(3), processes: 24, ..small_limits() },
        ),
        (
            "python3 -c 'x = []\nwhile True: x.append(bytearray(1 << 20))'",
            Limits { memory_bytes: 48 << 20, ..small_limits() },
        ),
        (
            "while :; do :; done",
            Limits { cpu_secs: 1, wall: Duration::from_secs(3), ..small_limits() },
        ),
        (
            "for i in 1 2; do (while :; do :; done) & done; wait",
            Limits { cpu_secs: 1, wall: Duration::from_secs(3), ..small_limits() },
        ),
        ("( setsid sh -c 'sleep 300' </dev/null >/dev/null 2>&1 & ); sleep 0.2", small_limits()),
        (
            "i=0; while echo data > f$i 2>/dev/null; do i=$((i+1)); done",
            Limits { disk_bytes: 1 << 20, ..small_limits() },
        ),
        ("yes abcdefghi | head -c 3000000", small_limits()),
        ("sleep 30", Limits { wall: Duration::from_millis(1500), ..small_limits() }),
    ];
    let trivial = ["id -u; echo ok", "/bin/true && echo ok", "echo ok", "sleep 0.1; echo ok"];
    let mut handles = Vec::new();
    for i in 0..24 {
        let (script, limits, is_trivial) = if i % 3 == 0 {
            let (s, l) = hostile[(i / 3) % hostile.len()].clone();
            (s.to_string(), l, false)
        } else {
            (trivial[i % trivial.len()].to_string(), small_limits(), true)
        };
        handles.push(std::thread::spawn(move || {
            let dir = tempfile::tempdir().expect("tempdir");
            let spec = RunSpec {
                script: script.clone(),
                workspace: dir.path().to_path_buf(),
                env: Vec::new(),
                limits,
                channel: false,
                read_only: Vec::new(),
                host: None,
            };
            let r = sb.run(&spec);
            (script, is_trivial, r)
        }));
    }
    let results: Vec<_> = handles.into_iter().map(|h| h.join().expect("join")).collect();
    stop.store(true, Ordering::Relaxed);
    let spawned = churn.join().expect("churn");
    assert!(spawned > 0);
    let mut bad = Vec::new();
    for (script, is_trivial, r) in &results {
        match r {
            Err(e) => bad.push(format!("{script:?}: sandbox error {e}")),
            Ok(r) if *is_trivial => {
                if !r.success()
                    || !r.stdout_tail.ends_with("ok\n")
                    || r.wall > Duration::from_secs(5)
                {
                    bad.push(format!("{script:?}: {r:?}"));
                }
            }
            Ok(_) => {}
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} runs misbehaved:\n{}",
        bad.len(),
        results.len(),
        bad.join("\n")
    );
}

#[test]
fn sandbox_tool_dir_is_read_only_at_gatehouse() {
    let tools = tempfile::tempdir().expect("tempdir");
    fs::write(tools.path().join("runner.py"), "print('runner here')\n").expect("write");
    fs::create_dir(tools.path().join("lib")).expect("mkdir");
    fs::write(tools.path().join("lib/x.txt"), "X").expect("write");
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(tools.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
    let config = grader::sandbox::SandboxConfig {
        tool_dir: Some(tools.path().to_path_buf()),
        ..Sandbox::host_default_config()
    };
    let sb = Sandbox::new(config).expect("sandbox with tools");
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = RunSpec {
        script: "python3 /gatehouse/runner.py; cat /gatehouse/lib/x.txt; echo; \
                 touch /gatehouse/new 2>/dev/null && echo wrote-new; \
                 echo y >> /gatehouse/runner.py 2>/dev/null && echo appended; \
                 rm /gatehouse/lib/x.txt 2>/dev/null && echo removed; \
                 mkdir /gatehouse/d 2>/dev/null && echo made; id -u; \
                 grep ' /gatehouse ' /proc/self/mounts | grep -c 'ro,nosuid,nodev'"
            .into(),
        workspace: dir.path().to_path_buf(),
        env: Vec::new(),
        limits: small_limits(),
        channel: false,
        read_only: Vec::new(),
        host: None,
    };
    let r = sb.run(&spec).expect("run");
    let lines: Vec<&str> = r.stdout_tail.lines().collect();
    assert_eq!(lines[..2], ["runner here", "X"], "{r:?}");
    assert!(lines[2].parse::<u32>().expect("uid") >= 61000, "{r:?}");
    assert_eq!(lines[3], "1", "{r:?}");
    assert_eq!(lines.len(), 4, "nothing was written: {r:?}");
    assert!(!tools.path().join("new").exists() && tools.path().join("lib/x.txt").exists());
    assert_eq!(
        fs::read_to_string(tools.path().join("runner.py")).expect("read"),
        "print('runner here')\n"
    );
    // Without a tool folder, /gatehouse does not exist.
    let r = run("test -e /gatehouse && echo present || echo absent", small_limits());
    assert_eq!(r.stdout_tail, "absent\n");
    // A symlink as tool folder is refused with a clear error.
    let link = dir.path().join("toollink");
    std::os::unix::fs::symlink(tools.path(), &link).expect("symlink");
    let config =
        grader::sandbox::SandboxConfig { tool_dir: Some(link), ..Sandbox::host_default_config() };
    let e = Sandbox::new(config).err().expect("refused");
    assert!(e.to_string().contains("tool_dir") && e.to_string().contains("symlink"), "{e}");
}
