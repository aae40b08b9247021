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
    let spec = RunSpec {
        script: script.to_string(),
        workspace: dir.to_path_buf(),
        env: Vec::new(),
        limits,
        channel: false,
        read_only: Vec::new(),
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
fn sandbox_fork_bomb_is_contained() {
    let marker = "gh_forkbomb_marker_91";
    let limits = Limits { wall: Duration::from_secs(4), processes: 24, ..small_limits() };
    let start = Instant::now();
    let r = run(&format!(": {marker}; b() {{ b | b & }}; b; sleep 1"), limits);
    assert!(start.elapsed() < Duration::from_secs(8));
    assert!(
        r.limit_hit == Some(LimitHit::Processes)
            || r.timed_out
            || matches!(r.exit, Exit::Signal(_)),
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
    assert!(
        r.peak_memory_bytes <= 64 << 20 && r.peak_memory_bytes > 32 << 20,
        "{}",
        r.peak_memory_bytes
    );
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
    let copied: u64 = fs::read_dir(dir.path())
        .expect("read")
        .flatten()
        .map(|e| e.metadata().expect("meta").len())
        .sum();
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
    let secret_dir =
        tempfile::Builder::new().prefix("gh-secret").tempdir_in("/var/tmp").expect("tempdir");
    let secret = secret_dir.path().join("secret.txt");
    fs::write(&secret, "TOPSECRET").expect("write");
    let root_dir =
        tempfile::Builder::new().prefix("gh-secret").tempdir_in("/root").expect("tempdir");
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

fn run_channel(script: &str) -> RunReport {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = RunSpec {
        script: script.to_string(),
        workspace: dir.path().to_path_buf(),
        env: Vec::new(),
        limits: small_limits(),
        channel: true,
        read_only: Vec::new(),
    };
    sandbox().run(&spec).unwrap_or_else(|e| panic!("sandbox error for {script:?}: {e}"))
}

#[test]
fn sandbox_channel_carries_fd3_bytes_in_order() {
    let r = run_channel("printf 'one\\n' >&3; echo out; printf 'two\\0three' >&3");
    assert_eq!(r.exit, Exit::Code(0), "{r:?}");
    assert_eq!(r.channel, b"one\ntwo\0three");
    assert_eq!(r.channel_bytes, 13);
    assert!(!r.channel_truncated);
    assert_eq!(r.stdout_tail, "out\n", "stdout stays apart from the channel");
    // A grandchild (a process of a process) writes to the same channel, and
    // python's os.write on fd 3 works too.
    let r =
        run_channel("sh -c 'sh -c \"echo x >&3\"'; python3 -c 'import os; os.write(3, b\"py\")'");
    assert_eq!(r.exit, Exit::Code(0), "{r:?}");
    assert_eq!(r.channel, b"x\npy");
}

#[test]
fn sandbox_without_channel_fd3_is_closed() {
    let r = run(
        "if { true >&3; } 2>/dev/null; then echo open; else echo closed; fi; ls /proc/self/fd",
        small_limits(),
    );
    assert!(r.stdout_tail.starts_with("closed\n"), "{r:?}");
    assert!(r.channel.is_empty() && r.channel_bytes == 0, "{r:?}");
    // With the channel, fd 3 is open and nothing beyond it leaks in.
    let r = run_channel(
        "if { true >&3; } 2>/dev/null; then echo open; else echo closed; fi; ls /proc/self/fd | tr '\\n' ' '",
    );
    assert_eq!(r.stdout_tail, "open\n0 1 2 3 4 ", "{r:?}");
}

#[test]
fn sandbox_channel_is_capped() {
    let cap = grader::sandbox::CHANNEL_CAP;
    let total = cap + 300_000;
    let r = run_channel(&format!("head -c {total} /dev/zero | tr '\\0' a >&3; echo done"));
    assert_eq!(r.exit, Exit::Code(0), "{r:?}");
    assert_eq!(r.stdout_tail, "done\n");
    assert!(r.channel_truncated);
    assert_eq!(r.channel.len(), cap);
    assert_eq!(r.channel_bytes, total as u64);
    assert!(r.channel.iter().all(|&b| b == b'a'));
    // Receipts do not carry the channel.
    let json = serde_json::to_value(&r).expect("json");
    assert!(json.get("channel").is_none() && json.get("channel_truncated").is_none(), "{json}");
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

/// Apparent and allocated bytes (each inode once) and entries of a host tree.
fn host_usage(root: &Path) -> (u64, u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut seen = std::collections::HashSet::new();
    let (mut apparent, mut allocated, mut entries) = (0, 0, 0);
    for e in walkdir::WalkDir::new(root).min_depth(1) {
        let e = e.expect("walk");
        let m = e.path().symlink_metadata().expect("lstat");
        entries += 1;
        if m.is_file() && seen.insert(m.ino()) {
            apparent += m.len();
            allocated += m.blocks() * 512;
        }
    }
    (apparent, allocated, entries)
}

#[test]
fn sandbox_copy_out_respects_budget_for_sparse_files_and_hard_links() {
    let limits = Limits {
        disk_bytes: 64 << 20,
        file_size_bytes: 32 << 20,
        wall: Duration::from_secs(30),
        ..small_limits()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let script = "echo result > result.txt; mkdir s; i=0; while [ $i -lt 96 ]; do truncate -s 16M s/f$i || exit 9; i=$((i+1)); done; \
                  mkdir h; head -c 16777216 /dev/urandom > h/big; i=0; while [ $i -lt 63 ]; do ln h/big h/l$i || exit 8; i=$((i+1)); done; echo made";
    let r = run_in(dir.path(), script, limits);
    assert_eq!(r.stdout_tail, "made\n", "{r:?}");
    let (apparent, allocated, _) = host_usage(dir.path());
    assert!(apparent <= 64 << 20, "apparent bytes on the host: {apparent}");
    assert!(allocated <= 64 << 20, "allocated bytes on the host: {allocated}");
    assert_eq!(fs::read_to_string(dir.path().join("result.txt")).expect("result"), "result\n");
    // The 16 MiB file came back once, its other names as links.
    use std::os::unix::fs::MetadataExt;
    let big = fs::metadata(dir.path().join("h/big")).expect("big");
    assert_eq!(big.len(), 16 << 20);
    assert_eq!(big.nlink(), 64, "{r:?}");
    assert_eq!(r.out_hard_links, 63, "{r:?}");
    // The sparse files were left behind and counted.
    assert_eq!(r.out_cut_sparse, 96, "{r:?}");
    assert_eq!(fs::read_dir(dir.path().join("s")).expect("s").count(), 0);
    assert!(r.post_run < Duration::from_secs(10), "{r:?}");
}

#[test]
fn sandbox_copy_out_byte_budget_cuts_and_counts() {
    // Half-sparse files are copied, but only up to the byte budget.
    let limits = Limits { disk_bytes: 8 << 20, file_size_bytes: 8 << 20, ..small_limits() };
    let dir = tempfile::tempdir().expect("tempdir");
    let script = "for i in 1 2 3 4; do head -c 1600000 /dev/urandom > f$i; truncate -s 3000000 f$i; done; echo ok";
    let r = run_in(dir.path(), script, limits);
    assert_eq!(r.stdout_tail, "ok\n", "{r:?}");
    let (apparent, _, _) = host_usage(dir.path());
    assert_eq!(apparent, 6_000_000, "{r:?}");
    assert_eq!((r.out_cut_files, r.out_cut_bytes, r.out_cut_sparse), (2, 6_000_000, 0), "{r:?}");
}

#[test]
fn sandbox_honest_results_are_not_cut() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("input.txt"), "in\n").expect("write");
    let script = "mkdir -p a/b/c && for i in 1 2 3 4 5 6 7 8 9; do head -c 1000000 /dev/urandom > a/b/c/f$i; done; \
                  cp input.txt out.txt; ln out.txt out-link.txt; echo ok";
    let r = run_in(dir.path(), script, small_limits());
    assert_eq!(r.stdout_tail, "ok\n", "{r:?}");
    assert_eq!(
        (r.out_cut_files, r.out_cut_bytes, r.out_cut_deep, r.out_cut_sparse),
        (0, 0, 0, 0),
        "{r:?}"
    );
    assert_eq!(r.out_hard_links, 1);
    let (apparent, _, _) = host_usage(dir.path());
    assert_eq!(apparent, 9_000_000 + 2 * 3, "every byte came back");
    assert_eq!(fs::read_to_string(dir.path().join("out-link.txt")).expect("link"), "in\n");
}

#[test]
fn sandbox_tmpfs_inodes_are_capped() {
    let cap = grader::sandbox::INODE_CAP;
    let script = r#"python3 - <<'EOF'
import os
def fill(make):
    n = 0
    try:
        while n < 200000:
            make(n); n += 1
    except OSError as e:
        return n, e.errno
    return n, 0
print(*fill(lambda n: open('/tmp/f%d' % n, 'w').close()))
open('seed', 'w').close()
print(*fill(lambda n: os.link('seed', 'l%d' % n)))
EOF"#;
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = Limits { wall: Duration::from_secs(60), ..small_limits() };
    let r = run_in(dir.path(), script, limits);
    let lines: Vec<Vec<u64>> = r
        .stdout_tail
        .lines()
        .map(|l| l.split(' ').map(|x| x.parse().expect("number")).collect())
        .collect();
    assert_eq!(lines.len(), 2, "{r:?}");
    for l in &lines {
        assert!(l[0] <= cap && l[0] > cap / 2, "{lines:?} {r:?}");
        assert_eq!(l[1], libc::ENOSPC as u64, "{lines:?}");
    }
    let (_, _, entries) = host_usage(dir.path());
    assert!(entries <= cap, "{entries}");
    assert!(r.post_run < Duration::from_secs(20), "{r:?}");
}

#[test]
fn sandbox_paths_deeper_than_path_max_do_not_fail_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = r#"echo kept > result.txt; python3 - <<'EOF'
import os
fd = os.open('.', os.O_RDONLY)
for i in range(300):
    name = 'd' * 40
    os.mkdir(name, dir_fd=fd)
    nfd = os.open(name, os.O_RDONLY, dir_fd=fd)
    os.close(fd); fd = nfd
w = os.open('deep.txt', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd); os.write(w, b'x'); os.close(w)
print('deep', 300 * 41)
EOF"#;
    let r = run_in(dir.path(), script, small_limits());
    assert_eq!(r.stdout_tail, "deep 12300\n", "{r:?}");
    assert_eq!(fs::read_to_string(dir.path().join("result.txt")).expect("result"), "kept\n");
    assert!(r.out_cut_deep >= 1, "{r:?}");
    // The host copy stays well inside PATH_MAX.
    let deepest = walkdir::WalkDir::new(dir.path())
        .into_iter()
        .flatten()
        .map(|e| e.path().as_os_str().len())
        .max();
    assert!(deepest.expect("entries") < 4096 - 1024, "{deepest:?}");
}

fn keyctl_add(desc: &str, payload: &[u8], ring: i64) -> i64 {
    let ty = std::ffi::CString::new("user").expect("c");
    let d = std::ffi::CString::new(desc).expect("c");
    // SAFETY: add_key with live buffers.
    unsafe {
        libc::syscall(
            libc::SYS_add_key,
            ty.as_ptr(),
            d.as_ptr(),
            payload.as_ptr(),
            payload.len(),
            ring,
        )
    }
}

#[test]
fn sandbox_grader_session_keyring_is_out_of_reach() {
    const KEY_SPEC_SESSION_KEYRING: i64 = -3;
    const KEYCTL_SEARCH: i64 = 10;
    let id = keyctl_add("gh-grader-secret", b"GRADERKEY", KEY_SPEC_SESSION_KEYRING);
    assert!(id > 0, "add_key in the test's session keyring: {}", std::io::Error::last_os_error());
    let script = format!(
        r#"python3 - <<'EOF'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(64)
n = libc.syscall({keyctl}, 11, {id}, buf, 64)
print('read', n, ctypes.get_errno() if n < 0 else buf.raw[:n])
k = libc.syscall({add_key}, b'user', b'gh-inside-key', b'INSIDE', 6, -3)
print('add', k, ctypes.get_errno() if k < 0 else 0)
EOF"#,
        keyctl = libc::SYS_keyctl,
        add_key = libc::SYS_add_key,
    );
    let r = run(&script, small_limits());
    assert!(r.stdout_tail.starts_with("read -1 "), "the grader's key was readable: {r:?}");
    assert!(!r.stdout_tail.contains("GRADERKEY"), "{r:?}");
    let desc = std::ffi::CString::new("gh-inside-key").expect("c");
    let ty = std::ffi::CString::new("user").expect("c");
    // SAFETY: keyctl search with live strings.
    let found = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_SEARCH,
            KEY_SPEC_SESSION_KEYRING,
            ty.as_ptr(),
            desc.as_ptr(),
            0,
        )
    };
    assert!(found < 0, "a key added inside reached the host's session keyring: {r:?}");
    // SAFETY: unlinks the test key from the session keyring.
    unsafe { libc::syscall(libc::SYS_keyctl, 9i64, id, KEY_SPEC_SESSION_KEYRING) };
}

#[test]
fn sandbox_no_key_outlives_a_run_in_the_uids_keyrings() {
    // Run after run: each tries to leave a key in its uid's user and
    // user-session keyrings (which the kernel keeps per uid, beyond the
    // run), then looks for what an earlier run left.
    let script = format!(
        r#"python3 - <<'EOF'
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
for ring in (-4, -5):
    found = libc.syscall({keyctl}, 10, ring, b'user', b'gh-left-behind', 0)
    print('found', ring, found)
    k = libc.syscall({add_key}, b'user', b'gh-left-behind', b'LEFT', 4, ring)
    print('add', ring, 'refused' if k < 0 else 'kept')
EOF"#,
        keyctl = libc::SYS_keyctl,
        add_key = libc::SYS_add_key,
    );
    for round in 0..3 {
        let r = run(&script, small_limits());
        assert!(r.success(), "round {round}: {r:?}");
        for ring in ["-4", "-5"] {
            assert!(
                r.stdout_tail.contains(&format!("found {ring} -1\n")),
                "round {round}: a key of an earlier run was found in keyring {ring}: {r:?}"
            );
            assert!(
                r.stdout_tail.contains(&format!("add {ring} refused\n")),
                "round {round}: a run could leave a key in keyring {ring}: {r:?}"
            );
        }
    }
}

#[test]
fn sandbox_init_does_not_show_the_grader_argv() {
    let exe = std::env::current_exe().expect("exe").to_string_lossy().into_owned();
    let r = run(
        "(cat /proc/1/cmdline 2>&1 || true) | tr '\\0\\n' '  '; echo; ls /proc | grep -c '^[0-9]'; cat /proc/1/environ 2>/dev/null | wc -c",
        small_limits(),
    );
    assert!(!r.stdout_tail.contains(&exe), "{r:?}");
    let lines: Vec<&str> = r.stdout_tail.lines().collect();
    assert!(lines[0].contains("No such file"), "hidepid hides init: {r:?}");
    let pids: u32 = lines[1].parse().expect("count");
    assert!((1..=4).contains(&pids), "only the run's own processes are listed: {r:?}");
    assert_eq!(lines[2], "0", "{r:?}");
    // Seen from the host (as root), init's command line is the fixed title.
    let h = std::thread::spawn(|| run(": gh_title_probe; sleep 1.5", small_limits()));
    let mut titles = Vec::new();
    let t0 = Instant::now();
    while titles.is_empty() && t0.elapsed() < Duration::from_secs(5) {
        titles = host_processes_with("gatehouse-sandbox-init");
        std::thread::sleep(Duration::from_millis(50));
    }
    h.join().expect("join");
    assert!(!titles.is_empty(), "no sandbox init with the fixed title");
    assert!(titles.iter().all(|t| !t.contains(&exe)), "{titles:?}");
}

/// The host pid of the sandbox init running the command whose shell
/// command line holds `marker` (the shell's parent), polling up to 5 s.
fn init_host_pid_of(marker: &str) -> Option<u32> {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        for line in host_processes_with(marker) {
            let pid = line.split(':').next().unwrap_or("");
            let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
            let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
            let ppid: u32 =
                after.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
            let title = fs::read(format!("/proc/{ppid}/cmdline")).unwrap_or_default();
            if title.starts_with(b"gatehouse-sandbox-init\0") {
                return Some(ppid);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Every readable mapping of process `pid` (read as root through
/// /proc/<pid>/mem): whether `needle` occurs in any, and how many bytes
/// were read.
fn memory_holds(pid: u32, needle: &[u8]) -> (bool, u64) {
    use std::os::unix::fs::FileExt;
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
    let mem = fs::File::open(format!("/proc/{pid}/mem")).expect("open mem");
    let mut read = 0u64;
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else { continue };
        if !perms.starts_with('r') || line.ends_with("[vvar]") || line.ends_with("[vsyscall]") {
            continue;
        }
        let (a, b) = range.split_once('-').expect("range");
        let (a, b) =
            (u64::from_str_radix(a, 16).expect("start"), u64::from_str_radix(b, 16).expect("end"));
        // In chunks of 1 MiB that overlap by the needle's length.
        let mut buf = vec![0u8; 1 << 20];
        let mut at = a;
        while at < b {
            let len = ((b - at) as usize).min(buf.len());
            let Ok(n) = mem.read_at(&mut buf[..len], at) else { break };
            if n == 0 {
                break;
            }
            read += n as u64;
            if buf[..n].windows(needle.len()).any(|w| w == needle) {
                return (true, read);
            }
            if at + (n as u64) >= b {
                break;
            }
            at += (n - needle.len().min(n - 1)) as u64;
        }
    }
    (false, read)
}

/// Init is a freshly exec'd image (issue 17, item 7): a secret in this
/// process's heap, which a forked init would carry in its copy of the
/// grader's memory, is nowhere in init's memory; init's command line is
/// the fixed title, its environment empty, its name `gatehouse-init`.
#[test]
fn sandbox_init_holds_no_copy_of_the_grader_memory() {
    // Made at run time, so it is in no binary: only in this heap.
    let mut seed = [0u8; 16];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut seed))
        .expect("urandom");
    let secret: Vec<u8> =
        format!("gh-heap-secret-{}", seed.iter().map(|b| format!("{b:02x}")).collect::<String>())
            .into_bytes();
    let marker =
        format!("gh_mem_probe_{:02x}{:02x}{:02x}{:02x}", seed[0], seed[1], seed[2], seed[3]);
    // The method finds the secret where it is: in this process.
    assert!(
        memory_holds(std::process::id(), &secret).0,
        "the probe cannot find the secret in its own heap"
    );
    let script = format!(": {marker}; sleep 6; true");
    let h = std::thread::spawn(move || run(&script, small_limits()));
    let pid = init_host_pid_of(&marker).expect("the run's sandbox init, seen from the host");
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let environ = fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let (found, read) = memory_holds(pid, &secret);
    // The whole scan happened while init was alive (the run still sleeps).
    let scanned_live = !h.is_finished();
    let r = h.join().expect("join");
    assert!(scanned_live, "the run ended before init's memory was read");
    assert!(r.success(), "{r:?}");
    assert!(read > 0, "nothing of init's memory was readable");
    assert!(!found, "the grader's heap secret is in the sandbox init's memory ({read} bytes read)");
    assert_eq!(comm.trim_end(), "gatehouse-init", "init is not the exec'd small init");
    assert!(environ.is_empty(), "init has an environment: {:?}", String::from_utf8_lossy(&environ));
    assert_eq!(cmdline, b"gatehouse-sandbox-init\0", "init's whole command line is the title");
    std::hint::black_box(&secret);
}

/// The image every run's init execs is the small static one embedded in
/// the grader (`grader/init`), from its sealed memfd: not this executable,
/// no dynamic loader or C library mapped, a few pages in all.
#[test]
fn sandbox_init_is_the_small_static_image_from_a_memfd() {
    let image = grader::sandbox::init_image();
    assert!(!image.is_empty() && image.len() < 64 << 10, "the init image is {} bytes", image.len());
    let script = ": gh_small_init_probe; sleep 3; true";
    let h = std::thread::spawn(move || run(script, small_limits()));
    let pid = init_host_pid_of("gh_small_init_probe")
        .expect("the run's sandbox init, seen from the host");
    let exe_link = fs::read_link(format!("/proc/{pid}/exe")).ok();
    let exe = fs::read(format!("/proc/{pid}/exe"));
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let alive = !h.is_finished();
    let r = h.join().expect("join");
    assert!(alive && r.success(), "{r:?}");
    let link = exe_link.expect("init's exe link").to_string_lossy().into_owned();
    assert!(
        link.starts_with("/memfd:gatehouse-init"),
        "init runs {link}, not the init image's memfd"
    );
    assert_eq!(
        exe.expect("init's executable").as_slice(),
        image,
        "init runs exactly the embedded image"
    );
    let me = std::env::current_exe().expect("exe").to_string_lossy().into_owned();
    assert!(!maps.contains(&me), "this executable is mapped in init:\n{maps}");
    assert!(
        !maps.contains("libc.so") && !maps.contains("ld-linux"),
        "a C library or loader is mapped in init:\n{maps}"
    );
    assert!(maps.contains("/memfd:gatehouse-init"), "{maps}");
    // Resident memory: the image's pages, its stacks and the context.
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    assert!(rss_kb < 1024, "init holds {rss_kb} kB resident");
}

/// An exec of the init image that the kernel refuses (here a seccomp
/// filter on the thread that starts the sandbox answers EACCES to
/// `execveat`) is a sandbox failure naming the exec, not a command's exit.
#[test]
fn sandbox_init_exec_failure_is_a_sandbox_error_naming_the_call() {
    let err = std::thread::spawn(|| {
        let nr = libc::SYS_execveat as u32;
        let ld = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
        let jeq = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
        let ret = (libc::BPF_RET | libc::BPF_K) as u16;
        let mut filter = [
            libc::sock_filter { code: ld, jt: 0, jf: 0, k: 0 },
            libc::sock_filter { code: jeq, jt: 0, jf: 1, k: nr },
            libc::sock_filter {
                code: ret,
                jt: 0,
                jf: 0,
                k: libc::SECCOMP_RET_ERRNO | libc::EACCES as u32,
            },
            libc::sock_filter { code: ret, jt: 0, jf: 0, k: libc::SECCOMP_RET_ALLOW },
        ];
        let prog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_mut_ptr() };
        // SAFETY: this thread only (no TSYNC); it ends after the probe.
        unsafe {
            assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
            assert_eq!(
                libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &prog as *const libc::sock_fprog
                ),
                0
            );
        }
        match Sandbox::new(Sandbox::host_default_config()) {
            Ok(_) => panic!("a sandbox whose init cannot be exec'd started"),
            Err(e) => e,
        }
    })
    .join()
    .expect("join");
    assert!(err.call.contains("execveat(") && err.call.contains("gatehouse-sandbox-init"), "{err}");
    assert!(err.detail.contains("EACCES"), "{err}");
    // The same configuration on a thread without the filter starts.
    assert!(Sandbox::new(Sandbox::host_default_config()).is_ok());
}

/// The init image is a static executable without a C library, so a root
/// with no system folders still starts init and the command's own exec is
/// what fails (naming it), not init's.
#[test]
fn sandbox_init_needs_nothing_from_the_run_root() {
    let config = grader::sandbox::SandboxConfig {
        read_only_binds: Vec::new(),
        ..Sandbox::host_default_config()
    };
    let err = match Sandbox::new(config) {
        Ok(_) => panic!("a sandbox without /bin/sh in its root started"),
        Err(e) => e,
    };
    assert!(err.call.contains("execve(\"/bin/sh\""), "{err}");
    assert!(err.detail.contains("ENOENT"), "{err}");
}

#[test]
fn sandbox_cgroup_path_and_host_proc_files_are_masked() {
    let host_cmdline = fs::read_to_string("/proc/cmdline").expect("host cmdline");
    let r = run(
        "cat /proc/self/cgroup; echo ---; cat /proc/cmdline /proc/keys /proc/timer_list /proc/sched_debug 2>/dev/null | wc -c; \
         echo ---; stat -c '%t:%T' /proc/cmdline /proc/keys /proc/sysrq-trigger /proc/kcore | sort -u",
        small_limits(),
    );
    let parts: Vec<&str> = r.stdout_tail.split("---\n").collect();
    assert_eq!(parts.len(), 3, "{r:?}");
    for line in parts[0].lines() {
        let path = line.splitn(3, ':').nth(2).expect("cgroup line");
        assert_eq!(path, "/", "the host cgroup path shows: {r:?}");
    }
    assert!(!parts[0].is_empty());
    assert_eq!(parts[1].trim(), "0", "masked files read empty: {r:?}");
    assert!(!r.stdout_tail.contains(host_cmdline.trim()), "{r:?}");
    assert_eq!(parts[2], "1:3\n", "masked by /dev/null (1:3): {r:?}");
    // Unmasked /proc files still work.
    let r = run(
        "grep -q Name /proc/self/status && grep -q MemTotal /proc/meminfo && echo ok",
        small_limits(),
    );
    assert_eq!(r.stdout_tail, "ok\n", "{r:?}");
}

/// Each call the seccomp filter refuses, tried by a python program with
/// harmless arguments: every one fails with EPERM (without the filter most
/// fail otherwise, or succeed).
#[test]
fn sandbox_seccomp_refuses_each_listed_call() {
    let list: Vec<String> = grader::sandbox::SECCOMP_BLOCKED
        .iter()
        .map(|(nr, name)| format!("({nr}, '{name}')"))
        .collect();
    let script = format!(
        r#"python3 - <<'EOF'
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return rc, ctypes.get_errno()
for nr, name in [{list}]:
    print(name, *call(nr, 0, 0, 0, 0, 0, 0))
params = ctypes.create_string_buffer(120)
print('io_uring_setup(8)', *call({io_uring}, 8, ctypes.addressof(params)))
print('unshare(CLONE_NEWUSER)', *call({unshare}, {newuser}))
print('clone(CLONE_NEWUSER)', *call({clone}, {newuser} | 17, 0, 0, 0, 0))
print('clone(CLONE_NEWNET)', *call({clone}, {newnet} | 17, 0, 0, 0, 0))
print('clone3', *call({clone3}, 0, 0))
for fam in (40, 38, 17, 15, 31, 44):
    print('socket(%d)' % fam, *call({socket}, fam, 1, 0))
print('socketpair(40)', *call({socketpair}, 40, 1, 0, 0))
EOF"#,
        list = list.join(", "),
        io_uring = libc::SYS_io_uring_setup,
        unshare = libc::SYS_unshare,
        clone = libc::SYS_clone,
        clone3 = libc::SYS_clone3,
        newuser = libc::CLONE_NEWUSER,
        newnet = libc::CLONE_NEWNET,
        socket = libc::SYS_socket,
        socketpair = libc::SYS_socketpair,
    );
    let r = run(&script, small_limits());
    assert_eq!(r.exit, Exit::Code(0), "{r:?}");
    let lines: Vec<&str> = r.stdout_tail.lines().collect();
    assert_eq!(lines.len(), grader::sandbox::SECCOMP_BLOCKED.len() + 12, "{r:?}");
    let mut bad = Vec::new();
    for l in &lines {
        let (name, rest) = l
            .rsplit_once(' ')
            .and_then(|(a, e)| a.rsplit_once(' ').map(|(n, rc)| (n, (rc, e))))
            .expect("line");
        let want = if name == "clone3" { libc::ENOSYS } else { libc::EPERM };
        if rest != ("-1", want.to_string().as_str()) {
            bad.push(format!("{name}: rc {} errno {} (want errno {want})", rest.0, rest.1));
        }
    }
    assert!(bad.is_empty(), "calls not refused:\n{}", bad.join("\n"));
    // The shell's own tools see the same: no user namespace.
    let r = run("unshare -r true 2>&1; echo rc=$?", small_limits());
    assert!(
        r.stdout_tail.ends_with("rc=1\n") && r.stdout_tail.contains("Operation not permitted"),
        "{r:?}"
    );
}

/// What the packets need still works under the filter: threads (clone3
/// falls back to clone), fork and subprocess, sockets of the allowed
/// families, name lookup, an http.server on 127.0.0.1.
#[test]
fn sandbox_seccomp_keeps_python_services_working() {
    let script = r#"python3 - <<'PY'
import os, socket, subprocess, threading, http.server, urllib.request
out = []
t = threading.Thread(target=lambda: out.append('thread')); t.start(); t.join()
pid = os.fork()
if pid == 0:
    os._exit(7)
out.append('fork %d' % os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
out.append(subprocess.run(['sh', '-c', 'echo sub'], capture_output=True, text=True).stdout.strip())
for fam in (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX):
    socket.socket(fam, socket.SOCK_STREAM).close()
a, b = socket.socketpair(); a.close(); b.close()
socket.getaddrinfo('localhost', 80)
srv = http.server.HTTPServer(('127.0.0.1', 0), http.server.SimpleHTTPRequestHandler)
threading.Thread(target=srv.serve_forever, daemon=True).start()
body = urllib.request.urlopen('http://127.0.0.1:%d/' % srv.server_address[1], timeout=5).status
out.append('http %d' % body)
srv.shutdown()
print(', '.join(out))
PY
grep Seccomp: /proc/self/status"#;
    let r = run(script, small_limits());
    assert_eq!(r.stdout_tail, "thread, fork 7, sub, http 200\nSeccomp:\t2\n", "{r:?}");
}

#[expect(
    clippy::zombie_processes,
    reason = "the child is handed to the caller, which waits for it"
)]
fn helper(
    mode: &str,
) -> (std::process::Child, std::io::BufReader<std::process::ChildStdout>, String) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(std::env::current_exe().expect("exe"))
        .args([
            "--exact",
            "sandbox::sandbox_helper_process",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("GH_SANDBOX_HELPER", mode)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn helper");
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line).expect("read") == 0 {
            let _ = child.kill();
            let _ = child.wait();
            panic!("helper ended before ready");
        }
        // libtest prints "test <name> ... " on the same line first.
        if let Some((_, id)) = line.split_once("ready ") {
            let id = id.trim().to_string();
            return (child, out, id);
        }
    }
}

/// Not a test: the second grader process of the tests below.
#[test]
#[ignore = "a helper process started by other tests"]
fn sandbox_helper_process() {
    use std::io::{BufRead, Write};
    let Ok(mode) = std::env::var("GH_SANDBOX_HELPER") else { return };
    let sb = Sandbox::new(Sandbox::host_default_config()).expect("helper sandbox");
    println!("ready {}", sb.instance_id());
    std::io::stdout().flush().expect("flush");
    let dir = tempfile::tempdir().expect("tempdir");
    if mode == "uids" {
        let mut go = String::new();
        std::io::stdin().lock().read_line(&mut go).expect("go");
        let sb = &sb;
        let uids: Vec<String> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..6)
                .map(|_| {
                    s.spawn(|| {
                        let d = tempfile::tempdir().expect("tempdir");
                        let spec = RunSpec {
                            script: "id -u; sleep 1".into(),
                            workspace: d.path().to_path_buf(),
                            env: Vec::new(),
                            limits: small_limits(),
                            channel: false,
                            read_only: Vec::new(),
                        };
                        sb.run(&spec).expect("run").stdout_tail.trim().to_string()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().expect("join")).collect()
        });
        println!("uids {}", uids.join(" "));
    } else {
        let spec = RunSpec {
            script: "sleep 60".into(),
            workspace: dir.path().to_path_buf(),
            env: Vec::new(),
            limits: Limits { wall: Duration::from_secs(60), ..small_limits() },
            channel: false,
            read_only: Vec::new(),
        };
        let _ = sb.run(&spec);
    }
}

#[test]
fn sandbox_two_grader_processes_never_share_a_run_uid() {
    use std::io::{BufRead, Write};
    let mut hs: Vec<_> = (0..2).map(|_| helper("uids")).collect();
    for (child, _, _) in &mut hs {
        child.stdin.as_mut().expect("stdin").write_all(b"go\n").expect("go");
    }
    let mut sets = Vec::new();
    for (child, out, _) in &mut hs {
        let mut uids = None;
        for line in out.lines() {
            let line = line.expect("line");
            if let Some((_, u)) = line.split_once("uids ") {
                uids = Some(
                    u.split(' ').map(|x| x.to_string()).collect::<std::collections::BTreeSet<_>>(),
                );
            }
        }
        assert!(child.wait().expect("wait").success());
        let uids = uids.expect("helper printed its uids");
        assert_eq!(uids.len(), 6, "{uids:?}");
        sets.push(uids);
    }
    let shared: Vec<_> = sets[0].intersection(&sets[1]).collect();
    assert!(shared.is_empty(), "live runs of two processes shared uids {shared:?}: {sets:?}");
}

#[test]
fn sandbox_new_sweeps_what_a_killed_grader_left() {
    let mountinfo = || fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let pids_root = fs::read_to_string("/proc/self/cgroup")
        .expect("cgroup")
        .lines()
        .find_map(|l| {
            let mut p = l.splitn(3, ':');
            let _ = p.next();
            let ctrls = p.next()?;
            let rel = p.next()?;
            ctrls.split(',').any(|c| c == "pids").then(|| rel.to_string())
        })
        .map(|rel| Path::new("/sys/fs/cgroup/pids").join(rel.trim_start_matches('/')))
        .expect("pids cgroup");
    let base = Path::new(grader::sandbox::STAGING_BASE);
    let (mut child, _out, id) = helper("hold");
    let prefix = format!("{id}-");
    let owned = |dir: &Path, prefix: &str| -> Vec<String> {
        fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with(prefix))
                    .collect()
            })
            .unwrap_or_default()
    };
    let cg_prefix = format!("gatehouse-{prefix}");
    let staged = format!("{}/{prefix}", base.display());
    let t0 = Instant::now();
    while !mountinfo().contains(&staged) || owned(&pids_root, &cg_prefix).is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(20), "the helper's run never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A run of this live process goes on while the next sandbox starts.
    let live_dir = tempfile::tempdir().expect("tempdir");
    let live = {
        let p = live_dir.path().to_path_buf();
        std::thread::spawn(move || run_in(&p, "sleep 1; echo alive > a.txt", small_limits()))
    };
    child.kill().expect("kill");
    child.wait().expect("wait");
    std::thread::sleep(Duration::from_millis(300));
    // (Another test's new sandbox may sweep first; the leftovers must be
    // gone once this one exists either way.)
    let sb = Sandbox::new(Sandbox::host_default_config()).expect("new sandbox");
    assert!(owned(base, &prefix).is_empty(), "{:?} {:?}", owned(base, &prefix), sb.swept());
    assert!(!mountinfo().contains(&staged));
    assert!(owned(&pids_root, &cg_prefix).is_empty());
    assert!(!base.join(format!("{id}.lock")).exists());
    // The live run was left alone.
    let r = live.join().expect("join");
    assert!(r.success(), "{r:?}");
    assert_eq!(fs::read_to_string(live_dir.path().join("a.txt")).expect("a.txt"), "alive\n");
    // The shared sandbox's own lock survives.
    assert!(base.join(format!("{}.lock", sandbox().instance_id())).exists());
}

/// `/evidence` (issue #9, kept evidence): what a run writes beneath it is at
/// `.gatehouse/evidence/` of the host folder afterwards, and only that (a
/// file the command put at that path in the workspace is gone); a process
/// started through the harness's confining launcher (Landlock) cannot write
/// it, can still write the workspace and /tmp, and cannot widen its own
/// rules to cover it.
#[test]
fn the_evidence_folder_is_apart_and_confined_processes_cannot_write_it() {
    let tools = grader::trusted::tools_dir().expect("tools dir");
    let mut cfg = Sandbox::host_default_config();
    cfg.tool_dir = Some(tools.path().to_path_buf());
    let sb = Sandbox::new(cfg).expect("sandbox with tools");
    assert!(sb.features().landlock_abi >= 1, "this kernel has Landlock: {:?}", sb.features());
    assert!(
        !sb.features().fallbacks.iter().any(|f| f.contains("Landlock")),
        "{:?}",
        sb.features().fallbacks
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let confine = "python3 -I /gatehouse/gatehouse_confine.py";
    let script = format!(
        "echo packet > \"$GATEHOUSE_EVIDENCE/kept.txt\"\n\
         mkdir -p .gatehouse/evidence && echo forged > .gatehouse/evidence/forged.txt\n\
         {confine} -- sh -c 'echo forged > /evidence/kept.txt'; echo \"confined-evidence=$?\"\n\
         {confine} -- sh -c 'sh -c \"echo forged > /evidence/child.txt\"'; echo \"confined-child=$?\"\n\
         {confine} -- sh -c 'echo mine > /workspace/mine.txt && echo t > /tmp/t && cat /evidence/kept.txt'; echo \"confined-workspace=$?\"\n\
         {confine} --write /evidence -- true; echo \"widen=$?\"\n\
         {confine} --write / -- true; echo \"widen-root=$?\"\n"
    );
    let spec = RunSpec {
        script,
        workspace: dir.path().to_path_buf(),
        env: Vec::new(),
        limits: small_limits(),
        channel: false,
        read_only: Vec::new(),
    };
    let r = sb.run(&spec).expect("run");
    let out = &r.stdout_tail;
    assert_eq!(r.exit, Exit::Code(0), "{r:?}");
    assert!(
        out.contains("confined-evidence=2"),
        "a confined write to /evidence must fail: {out}\n{}",
        r.stderr_tail
    );
    assert!(
        out.contains("confined-child=2"),
        "the confined process's children are confined too: {out}"
    );
    assert!(
        out.contains("packet\nconfined-workspace=0"),
        "the workspace and /tmp stay writable, /evidence readable: {out}\n{}",
        r.stderr_tail
    );
    assert!(
        out.contains("widen=125") && out.contains("widen-root=125"),
        "{out}\n{}",
        r.stderr_tail
    );
    assert!(r.stderr_tail.contains("would make /evidence writable"), "{}", r.stderr_tail);
    let ev = dir.path().join(".gatehouse/evidence");
    assert_eq!(fs::read_to_string(ev.join("kept.txt")).unwrap(), "packet\n");
    assert!(
        !ev.join("forged.txt").exists() && !ev.join("child.txt").exists(),
        "only what was written to /evidence comes back there"
    );
    assert_eq!(fs::read_to_string(dir.path().join("mine.txt")).unwrap(), "mine\n");
}

/// This executable (like every grader and server binary, see
/// `grader/build.rs`) is linked with packed relative relocations: its
/// start-up does not read and apply a megabyte of `R_X86_64_RELATIVE`
/// entries (about 44,000 of them before). (It was the sandbox's init image
/// once; the small init image below has no relocations at all.)
#[test]
fn the_grader_binaries_are_linked_with_packed_relative_relocations() {
    let elf = fs::read("/proc/self/exe").expect("reading this executable");
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap());
    assert_eq!(&elf[..5], b"\x7fELF\x02", "a 64-bit ELF file");
    let (phoff, phentsize, phnum) = (u64_at(0x20) as usize, u16_at(0x36), u16_at(0x38));
    let dynamic = (0..phnum)
        .map(|i| phoff + i * phentsize)
        .find(|&ph| u32::from_le_bytes(elf[ph..ph + 4].try_into().unwrap()) == 2) // PT_DYNAMIC
        .expect("a dynamic section");
    let (off, size) = (u64_at(dynamic + 8) as usize, u64_at(dynamic + 32) as usize);
    let entries: Vec<(u64, u64)> = (off..off + size)
        .step_by(16)
        .map(|e| (u64_at(e), u64_at(e + 8)))
        .take_while(|&(tag, _)| tag != 0)
        .collect();
    let tag = |t: u64| entries.iter().find(|e| e.0 == t).map(|e| e.1);
    const DT_RELASZ: u64 = 8;
    const DT_RELRSZ: u64 = 35;
    assert!(tag(DT_RELRSZ).is_some_and(|n| n > 0), "DT_RELR: {entries:x?}");
    let rela = tag(DT_RELASZ).unwrap_or(0) / 24;
    assert!(rela < 2_000, "{rela} RELA relocations are left to apply one by one");
}

/// The sandbox's init image is a static, position-dependent executable:
/// no interpreter (dynamic loader), no dynamic section, no relocations to
/// apply at start-up, a few kilobytes.
#[test]
fn the_init_image_is_static_without_loader_or_relocations() {
    let elf = grader::sandbox::init_image();
    assert!(elf.len() > 64 && elf.len() < 64 << 10, "{} bytes", elf.len());
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap());
    assert_eq!(&elf[..5], b"\x7fELF\x02", "a 64-bit ELF file");
    assert_eq!(u16_at(0x10), 2, "ET_EXEC, not a position-independent ET_DYN");
    let (phoff, phentsize, phnum) = (u64_at(0x20) as usize, u16_at(0x36), u16_at(0x38));
    let types: Vec<u32> = (0..phnum)
        .map(|i| phoff + i * phentsize)
        .map(|ph| u32::from_le_bytes(elf[ph..ph + 4].try_into().unwrap()))
        .collect();
    const PT_LOAD: u32 = 1;
    const PT_DYNAMIC: u32 = 2;
    const PT_INTERP: u32 = 3;
    assert!(types.contains(&PT_LOAD), "{types:?}");
    assert!(
        !types.contains(&PT_INTERP) && !types.contains(&PT_DYNAMIC),
        "program headers {types:?}"
    );
}
