//! Sandbox containment tests with real, hostile processes. They need root,
//! namespaces and cgroups (as on the CI machines).

use std::fs;
use std::net::TcpListener;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use grader::sandbox::{Exit, LimitHit, Limits, RunReport, RunSpec, Sandbox};

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
    let spec = RunSpec { script: script.to_string(), workspace: dir.to_path_buf(), env: Vec::new(), limits, channel: false };
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
    let ids: Vec<u32> = r.stdout_tail.split_whitespace().map(|s| s.parse().expect("number")).collect();
    assert_eq!(ids.len(), 3, "{r:?}");
    let base = sandbox().config().uid;
    assert!(ids[0] >= base && ids[0] != 0, "uid {}", ids[0]);
    assert!(ids.iter().all(|&i| i != 0), "{ids:?}");
    // Writes to system directories fail, and the workspace is the run's own.
    let r = run("touch /usr/gh_sandbox_probe || touch /etc/gh_probe || touch /gh_probe || echo denied", small_limits());
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
fn sandbox_fork_bomb_is_contained() {
    let marker = "gh_forkbomb_marker_91";
    let limits = Limits { wall: Duration::from_secs(4), processes: 24, ..small_limits() };
    let start = Instant::now();
    let r = run(&format!(": {marker}; b() {{ b | b & }}; b; sleep 1"), limits);
    assert!(start.elapsed() < Duration::from_secs(8));
    assert!(
        r.limit_hit == Some(LimitHit::Processes) || r.timed_out || matches!(r.exit, Exit::Signal(_)),
        "{r:?}"
    );
    assert_eq!(r.limit_hit, Some(LimitHit::Processes), "{r:?}");
    assert!(host_processes_with(marker).is_empty(), "{:?}", host_processes_with(marker));
}

#[test]
fn sandbox_memory_hog_hits_memory_limit() {
    let limits = Limits { memory_bytes: 64 << 20, ..small_limits() };
    let r = run("python3 -c 'x = []\nwhile True: x.append(bytearray(1 << 20))'", limits);
    assert_eq!(r.limit_hit, Some(LimitHit::Memory), "{r:?}");
    assert!(!r.success());
    assert!(r.peak_memory_bytes <= 64 << 20 && r.peak_memory_bytes > 32 << 20, "{}", r.peak_memory_bytes);
}

#[test]
fn sandbox_infinite_loop_hits_wall_clock() {
    let limits = Limits { wall: Duration::from_millis(800), ..small_limits() };
    let start = Instant::now();
    let r = run("while :; do :; done", limits);
    assert!(start.elapsed() < Duration::from_secs(3), "{:?}", start.elapsed());
    assert!(r.timed_out, "{r:?}");
    assert_eq!(r.limit_hit, Some(LimitHit::Wall));
    assert_eq!(r.exit, Exit::Signal(libc::SIGKILL));
}

#[test]
fn sandbox_cpu_limit_is_enforced() {
    let limits = Limits { cpu_secs: 1, wall: Duration::from_secs(8), ..small_limits() };
    let r = run("python3 -c 'while True: pass'", limits.clone());
    assert_eq!(r.limit_hit, Some(LimitHit::Cpu), "{r:?}");
    assert!(!r.timed_out && r.cpu >= Duration::from_millis(700), "{r:?}");
    // Several processes share the budget through the cgroup.
    let r = run("for i in 1 2 3; do (while :; do :; done) & done; wait", limits);
    assert_eq!(r.limit_hit, Some(LimitHit::Cpu), "{r:?}");
    assert!(!r.timed_out, "{r:?}");
}

#[test]
fn sandbox_big_file_hits_file_size_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = Limits { file_size_bytes: 1 << 20, ..small_limits() };
    let r = run_in(dir.path(), "head -c 5000000 /dev/zero > big", limits);
    assert_eq!(r.limit_hit, Some(LimitHit::FileSize), "{r:?}");
    let len = fs::metadata(dir.path().join("big")).map(|m| m.len()).unwrap_or(0);
    assert!(len <= 1 << 20, "{len}");
}

#[test]
fn sandbox_many_small_files_hit_disk_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = Limits { disk_bytes: 2 << 20, ..small_limits() };
    let script = "i=0; while echo data > f$i 2>/dev/null; do i=$((i+1)); done; echo stopped at $i";
    let r = run_in(dir.path(), script, limits.clone());
    assert!(r.stdout_tail.starts_with("stopped at"), "{r:?}");
    assert_eq!(r.limit_hit, Some(LimitHit::Disk), "{r:?}");
    let copied: u64 = fs::read_dir(dir.path()).expect("read").flatten().map(|e| e.metadata().expect("meta").len()).sum();
    assert!(copied > 0 && copied <= 2 << 20, "at most the cap came back: {copied}");
    // /tmp is capped too.
    let r = run("head -c 3000000 /dev/zero > /tmp/x; echo rc=$?", limits);
    assert!(r.stdout_tail.contains("rc=1"), "{r:?}");
    assert_eq!(r.limit_hit, Some(LimitHit::Disk), "{r:?}");
}

#[test]
fn sandbox_daemon_is_reported_and_killed() {
    let marker = "gh_daemon_marker_57";
    let script = format!(
        "( setsid sh -c 'sleep 300; : {marker}' </dev/null >/dev/null 2>&1 & ) ; sleep 0.3; echo parent done"
    );
    let r = run(&script, small_limits());
    assert_eq!(r.exit, Exit::Code(0), "{r:?}");
    assert_eq!(r.stdout_tail, "parent done\n");
    assert!(r.leftovers.iter().any(|l| l.cmdline.contains(marker)), "{:?}", r.leftovers);
    assert!(r.wall < Duration::from_secs(5));
    assert!(host_processes_with(marker).is_empty(), "{:?}", host_processes_with(marker));
}

#[test]
fn sandbox_network_is_loopback_only() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let script = format!(
        r#"python3 - <<'EOF'
import socket
try:
    socket.create_connection(('127.0.0.1', {port}), timeout=2)
    print('host reachable')
except OSError as e:
    print('host blocked')
srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(1)
c = socket.create_connection(srv.getsockname(), timeout=2)
s, _ = srv.accept(); c.sendall(b'ping'); print(s.recv(4).decode())
EOF"#
    );
    let r = run(&script, small_limits());
    assert_eq!(r.stdout_tail, "host blocked\nping\n", "{r:?}");
}

#[test]
fn sandbox_host_files_are_invisible() {
    let secret_dir = tempfile::Builder::new().prefix("gh-secret").tempdir_in("/var/tmp").expect("tempdir");
    let secret = secret_dir.path().join("secret.txt");
    fs::write(&secret, "TOPSECRET").expect("write");
    let root_dir = tempfile::Builder::new().prefix("gh-secret").tempdir_in("/root").expect("tempdir");
    let root_secret = root_dir.path().join("secret.txt");
    fs::write(&root_secret, "TOPSECRET").expect("write");
    let script = format!(
        "cat {} {} /etc/shadow /work/shared/PRODUCT.md 2>/dev/null; ls /home /var /work 2>/dev/null; echo end",
        secret.display(),
        root_secret.display()
    );
    let r = run(&script, small_limits());
    assert!(!r.stdout_tail.contains("TOPSECRET"), "{r:?}");
    assert_eq!(r.stdout_tail, "end\n", "{r:?}");
}

#[test]
fn sandbox_chatty_output_is_capped() {
    let limits = Limits { output_tail_bytes: 1000, ..small_limits() };
    let r = run("yes abcdefghi | head -c 5000000; yes e | head -c 300000 >&2; printf END", limits);
    assert_eq!(r.exit, Exit::Code(0), "{r:?}");
    assert_eq!(r.stdout_bytes, 5_000_003);
    assert_eq!(r.stderr_bytes, 300_000);
    assert_eq!(r.stdout_tail.len(), 1000);
    assert!(r.stdout_tail.ends_with("END"));
    assert_eq!(r.stderr_tail.len(), 1000);
}

#[test]
fn sandbox_concurrent_runs_use_distinct_uids() {
    let handles: Vec<_> = (0..12).map(|_| std::thread::spawn(|| run("id -u; sleep 0.2", small_limits()))).collect();
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
                let hs: Vec<_> = (0..4).map(|_| std::thread::spawn(|| std::hint::black_box(1))).collect();
                for h in hs {
                    let _ = h.join();
                }
                spawned += 4;
            }
            spawned
        })
    };
    let hostile = [
        (": stress_forkbomb; b() { b | b & }; b; sleep 1", Limits { wall: Duration::from_secs(3), processes: 24, ..small_limits() }),
        ("python3 -c 'x = []\nwhile True: x.append(bytearray(1 << 20))'", Limits { memory_bytes: 48 << 20, ..small_limits() }),
        ("while :; do :; done", Limits { cpu_secs: 1, wall: Duration::from_secs(3), ..small_limits() }),
        ("for i in 1 2; do (while :; do :; done) & done; wait", Limits { cpu_secs: 1, wall: Duration::from_secs(3), ..small_limits() }),
        ("( setsid sh -c 'sleep 300' </dev/null >/dev/null 2>&1 & ); sleep 0.2", small_limits()),
        ("i=0; while echo data > f$i 2>/dev/null; do i=$((i+1)); done", Limits { disk_bytes: 1 << 20, ..small_limits() }),
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
            let spec = RunSpec { script: script.clone(), workspace: dir.path().to_path_buf(), env: Vec::new(), limits, channel: false };
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
                if !r.success() || !r.stdout_tail.ends_with("ok\n") || r.wall > Duration::from_secs(5) {
                    bad.push(format!("{script:?}: {r:?}"));
                }
            }
            Ok(_) => {}
        }
    }
    assert!(bad.is_empty(), "{} of {} runs misbehaved:\n{}", bad.len(), results.len(), bad.join("\n"));
}
