//! The fd 3 channel: bytes in order, closed without one, capped.

use grader::sandbox::{Exit, RunReport, RunSpec};

use super::*;

fn run_channel(script: &str) -> RunReport {
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = RunSpec {
        script: script.to_string(),
        workspace: dir.path().to_path_buf(),
        env: Vec::new(),
        limits: small_limits(),
        channel: true,
        read_only: Vec::new(),
        host: None,
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
