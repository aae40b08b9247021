//! Resource limits: processes, memory, time, files, disk, output, inodes, the copy-out budget.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use grader::sandbox::{Exit, LimitHit, Limits};

use super::*;

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
