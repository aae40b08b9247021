//! What runs and gradings leave behind on the host (issue #29): the kernel
//! keys of a run uid, and the work folders of a killed grader.

use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use grader::sandbox::{HostSpec, Limits, RunSpec, Sandbox, UID_LOCK_DIR, UID_RANGE};
use grader::workdir::{self, WorkDir};

/// Runs `f` on a thread whose own credentials are `uid`/`uid` (raw system
/// calls change that thread only), as the kernel's key lookups see them.
fn as_uid<T: Send>(uid: u32, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(move || {
            // SAFETY: raw system calls changing this thread's credentials.
            unsafe {
                assert_eq!(libc::syscall(libc::SYS_setresgid, uid, uid, uid), 0);
                assert_eq!(libc::syscall(libc::SYS_setresuid, uid, uid, uid), 0);
            }
            f()
        })
        .join()
        .expect("the thread acting as the uid")
    })
}

/// As the current thread's uid: a `user` key named `desc` in the user
/// keyring, the user session keyring and the persistent keyring.
fn plant(desc: &str) {
    let ty = c"user";
    let d = std::ffi::CString::new(desc).expect("c");
    // SAFETY: keyctl(GET_PERSISTENT, own uid, thread keyring).
    let persistent = unsafe { libc::syscall(libc::SYS_keyctl, 22i64, -1i64, -1i64) };
    assert!(persistent > 0, "persistent keyring: {}", std::io::Error::last_os_error());
    for ring in [-4i64, -5, persistent] {
        // SAFETY: add_key with live buffers.
        let id = unsafe {
            libc::syscall(
                libc::SYS_add_key,
                ty.as_ptr(),
                d.as_ptr(),
                b"LEFT".as_ptr(),
                4usize,
                ring,
            )
        };
        assert!(id > 0, "add_key into {ring}: {}", std::io::Error::last_os_error());
    }
}

/// The lines of `/proc/keys` naming `desc`, as the current thread reads
/// them (a key is listed to its owner, so the read makes no keyring).
fn keys_named(desc: &str) -> Vec<String> {
    fs::read_to_string("/proc/keys")
        .expect("/proc/keys")
        .lines()
        .filter(|l| l.contains(desc))
        .map(str::to_string)
        .collect()
}

/// Whether `/proc/key-users` lists `uid` (it holds some key).
fn listed_in_key_users(uid: u32) -> bool {
    let prefix = format!("{uid}:");
    fs::read_to_string("/proc/key-users")
        .expect("/proc/key-users")
        .lines()
        .any(|l| l.trim_start().starts_with(&prefix))
}

/// Polls `check` for up to `limit`; whether it held.
fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    loop {
        if check() {
            return true;
        }
        if t0.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The uid of the host process whose command line holds `marker`.
fn uid_of_process_with(marker: &str) -> Option<u32> {
    for entry in fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(cmd) = fs::read(entry.path().join("cmdline")) else { continue };
        if !String::from_utf8_lossy(&cmd).contains(marker) {
            continue;
        }
        let status = fs::read_to_string(entry.path().join("status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("Uid:"))?;
        return line.split_whitespace().nth(1)?.parse().ok();
    }
    None
}

/// Holds uid `u`'s lock as a live run's lease does.
fn hold_uid(u: u32) -> OwnedFd {
    fs::create_dir_all(UID_LOCK_DIR).expect("uid lock dir");
    let path = std::ffi::CString::new(format!("{UID_LOCK_DIR}/{u}")).expect("c");
    // SAFETY: opens a NUL-terminated path; the descriptor is owned below.
    let fd =
        unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC, 0o600) };
    assert!(fd >= 0, "{path:?}: {}", std::io::Error::last_os_error());
    // SAFETY: the descriptor was just opened.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: flock on an owned descriptor.
    let rc = unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(rc, 0, "uid {u} is leased elsewhere");
    fd
}

/// Holds the uid locks of every uid in `base .. base + UID_RANGE` but
/// `free`, so every run of a sandbox based at `base` leases `free`.
fn hold_all_uids_but(base: u32, free: u32) -> Vec<OwnedFd> {
    (base..base + UID_RANGE as u32).filter(|u| *u != free).map(hold_uid).collect()
}

fn sleeper(marker: &str, secs: u32) -> RunSpec {
    RunSpec {
        script: format!("id -u; sleep {secs}; : {marker}"),
        workspace: PathBuf::new(),
        env: Vec::new(),
        limits: Limits { wall: Duration::from_secs(20), ..Limits::default() },
        channel: false,
        read_only: Vec::new(),
        host: None,
    }
}

/// A key planted in run A's uid is gone when run A ends; one planted in the
/// uid between runs (what a grader killed mid-run would leave, its lease
/// never dropped) is gone before run B on the same uid starts; and the uid
/// holds no key at all once no run has it (`/proc/key-users`).
#[test]
fn no_key_of_a_run_uid_outlives_the_run_or_reaches_the_next_run_on_it() {
    // A uid range of this test's own, every uid of it held but one.
    let base = 64_000;
    let uid = base + 7;
    let _held = hold_all_uids_but(base, uid);
    let mut config = Sandbox::host_default_config();
    (config.uid, config.gid) = (base, base);
    let sb = Sandbox::new(config).expect("sandbox");
    let ws = tempfile::tempdir().expect("tempdir");

    // Run A: a key planted in each of its uid's keyrings while it runs.
    let spec = RunSpec { workspace: ws.path().to_path_buf(), ..sleeper("gh_keys_run_a", 2) };
    let run_a = std::thread::scope(|s| {
        let h = s.spawn(|| sb.run(&spec).expect("run A"));
        assert!(
            eventually(Duration::from_secs(10), || uid_of_process_with("gh_keys_run_a").is_some()),
            "run A never started"
        );
        assert_eq!(uid_of_process_with("gh_keys_run_a"), Some(uid));
        as_uid(uid, || {
            plant("gh-planted-in-run-a");
            assert_eq!(keys_named("gh-planted-in-run-a").len(), 3, "the planted keys are seen");
        });
        h.join().expect("run A")
    });
    assert_eq!(run_a.stdout_tail.trim(), uid.to_string(), "{run_a:?}");
    assert!(
        eventually(Duration::from_secs(3), || as_uid(uid, || keys_named("gh-planted-in-run-a")
            .is_empty())),
        "a key planted in run A outlived it: {:?}",
        as_uid(uid, || keys_named("gh-planted-in-run-a"))
    );
    assert!(
        eventually(Duration::from_secs(3), || !listed_in_key_users(uid)),
        "uid {uid} still holds keys after its run"
    );

    // Between runs: a key left in the uid's keyrings.
    as_uid(uid, || plant("gh-planted-between-runs"));
    assert!(listed_in_key_users(uid));
    let spec = RunSpec { workspace: ws.path().to_path_buf(), ..sleeper("gh_keys_run_b", 3) };
    std::thread::scope(|s| {
        let h = s.spawn(|| sb.run(&spec).expect("run B"));
        assert!(
            eventually(Duration::from_secs(10), || uid_of_process_with("gh_keys_run_b").is_some()),
            "run B never started"
        );
        assert_eq!(uid_of_process_with("gh_keys_run_b"), Some(uid));
        // While run B has the uid, nothing planted before it is there.
        assert!(
            eventually(Duration::from_millis(1500), || as_uid(uid, || keys_named(
                "gh-planted-between-runs"
            )
            .is_empty())),
            "run B's uid still held the key left before it: {:?}",
            as_uid(uid, || keys_named("gh-planted-between-runs"))
        );
        assert!(uid_of_process_with("gh_keys_run_b").is_some(), "checked while run B ran");
        h.join().expect("run B")
    });
}

/// A run with a host leases two uids (the judge's and the host's); a key
/// planted in either while the run lives is gone when it ends, and
/// neither uid holds any key afterwards.
#[test]
fn no_key_of_either_uid_of_a_run_with_a_host_outlives_it() {
    // A uid range of this test's own, every uid of it held but two.
    let base = 66_000;
    let pair = [base + 11, base + 12];
    let _held: Vec<OwnedFd> =
        (base..base + UID_RANGE as u32).filter(|u| !pair.contains(u)).map(hold_uid).collect();
    let mut config = Sandbox::host_default_config();
    (config.uid, config.gid) = (base, base);
    let sb = Sandbox::new(config).expect("sandbox");
    let ws = tempfile::tempdir().expect("tempdir");
    let spec = RunSpec {
        script: "cat <&4; sleep 2.5; : gh_keys_two_judge".into(),
        host: Some(HostSpec {
            argv: ["/bin/sh", "-c", "exec 3>&-; sleep 5; : gh_keys_two_host"]
                .map(String::from)
                .to_vec(),
            env: Vec::new(),
            judge_only: Vec::new(),
        }),
        ..sleeper("unused", 0)
    };
    let spec = RunSpec { workspace: ws.path().to_path_buf(), ..spec };
    let report = std::thread::scope(|s| {
        let h = s.spawn(|| sb.run(&spec).expect("the run"));
        let started = || {
            uid_of_process_with("gh_keys_two_judge").is_some()
                && uid_of_process_with("gh_keys_two_host").is_some()
        };
        assert!(eventually(Duration::from_secs(10), started), "the run never started");
        let mut uids =
            [uid_of_process_with("gh_keys_two_judge"), uid_of_process_with("gh_keys_two_host")]
                .map(|u| u.expect("uid"));
        uids.sort();
        assert_eq!(uids, pair, "the run's two uids");
        for uid in pair {
            as_uid(uid, || {
                plant("gh-planted-two-uids");
                assert_eq!(keys_named("gh-planted-two-uids").len(), 3, "uid {uid}");
            });
        }
        h.join().expect("the run")
    });
    assert!(report.apart && report.success(), "{report:?}");
    for uid in pair {
        assert!(
            eventually(Duration::from_secs(3), || as_uid(uid, || keys_named(
                "gh-planted-two-uids"
            )
            .is_empty())),
            "a key planted in uid {uid} outlived the run"
        );
        assert!(
            eventually(Duration::from_secs(3), || !listed_in_key_users(uid)),
            "uid {uid} still holds keys after its run"
        );
    }
}

/// A run killed with its grader never clears its uid, and that uid may
/// never be leased again: a sandbox's sweep (at `Sandbox::new`, and
/// `sweep_uid_keys` periodically) clears the keys of every run uid no live
/// run holds, and leaves a live run's uid alone.
#[test]
fn keys_a_killed_run_left_are_swept_and_a_live_runs_are_not() {
    // A uid range of this test's own.
    let base = 65_000;
    let (killed, live) = (base + 3, base + 5);
    // What a grader killed mid-run leaves: keys in its uid, the lock free.
    drop(hold_uid(killed));
    as_uid(killed, || plant("gh-left-by-a-killed-run"));
    let lease = hold_uid(live);
    as_uid(live, || plant("gh-of-a-live-run"));
    assert!(listed_in_key_users(killed) && listed_in_key_users(live));

    let mut config = Sandbox::host_default_config();
    (config.uid, config.gid) = (base, base);
    let sb = Sandbox::new(config).expect("sandbox");
    assert!(sb.swept().uid_keys >= 1, "{:?}", sb.swept());
    assert!(
        eventually(Duration::from_secs(3), || as_uid(killed, || keys_named(
            "gh-left-by-a-killed-run"
        )
        .is_empty())),
        "the keys a killed run left are still there"
    );
    assert!(
        eventually(Duration::from_secs(3), || !listed_in_key_users(killed)),
        "uid {killed} still holds keys after the sweep"
    );
    assert_eq!(as_uid(live, || keys_named("gh-of-a-live-run")).len(), 3, "a live run's keys");

    // Its run over (killed too), the next periodic sweep clears it.
    drop(lease);
    assert!(sb.sweep_uid_keys() >= 1);
    assert!(
        eventually(Duration::from_secs(3), || !listed_in_key_users(live)),
        "uid {live} still holds keys after the sweep"
    );
}

/// Not a test: a grader process holding a work folder until killed.
#[test]
#[ignore = "a helper process started by other tests"]
fn workdir_helper_process() {
    use std::io::Write;
    let Ok(base) = std::env::var("GH_WORKDIR_BASE") else { return };
    let dir = WorkDir::new_in(Path::new(&base), "gatehouse-grade-").expect("work folder");
    fs::write(dir.path().join("submission.zip"), b"zip").expect("write");
    println!("workdir {}", dir.path().display());
    std::io::stdout().flush().expect("flush");
    std::thread::sleep(Duration::from_secs(120));
}

fn workdir_helper(base: &Path) -> (std::process::Child, PathBuf) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(std::env::current_exe().expect("exe"))
        .args([
            "--exact",
            "leftovers::workdir_helper_process",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("GH_WORKDIR_BASE", base)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn helper");
    let out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    for line in out.lines() {
        let line = line.expect("line");
        if let Some((_, path)) = line.split_once("workdir ") {
            return (child, PathBuf::from(path.trim()));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the helper ended before making its folder");
}

/// A grader process killed mid-grading leaves its work folder; a sweep
/// removes it (and its lock), and leaves the folders of live graders (in
/// another process and in this one) alone; a folder with no lock is
/// removed only once old.
#[test]
fn the_work_folder_of_a_killed_grader_is_swept_and_a_live_ones_is_not() {
    let base = tempfile::tempdir().expect("tempdir");
    let (mut killed, killed_dir) = workdir_helper(base.path());
    let (mut alive, alive_dir) = workdir_helper(base.path());
    let mine = WorkDir::new_in(base.path(), "gatehouse-witness-").expect("own folder");
    let legacy_old = base.path().join("gatehouse-grade-legacy1");
    let legacy_new = base.path().join("gatehouse-grade-legacy2");
    let not_ours = base.path().join("gatehouse-sandbox");
    for d in [&legacy_old, &legacy_new, &not_ours] {
        fs::create_dir(d).expect("mkdir");
    }
    let two_days_ago = std::time::SystemTime::now() - Duration::from_secs(48 * 3600);
    for d in [&legacy_old, &not_ours] {
        fs::File::open(d).expect("open").set_modified(two_days_ago).expect("utimes");
    }

    // Every owner alive: nothing is removed.
    let s = workdir::sweep(base.path());
    assert_eq!((s.folders, s.unlocked_folders, s.live), (0, 1, 3), "{s:?}");
    assert!(killed_dir.join("submission.zip").exists() && alive_dir.exists());
    assert!(!legacy_old.exists() && legacy_new.exists() && not_ours.exists());

    killed.kill().expect("kill");
    killed.wait().expect("wait");
    assert!(killed_dir.exists(), "SIGKILL left the folder behind");
    let s = workdir::sweep(base.path());
    assert_eq!((s.folders, s.live), (1, 2), "{s:?}");
    assert!(!killed_dir.exists(), "the killed grader's folder was swept");
    let lock = |d: &Path| PathBuf::from(format!("{}.lock", d.display()));
    assert!(!lock(&killed_dir).exists(), "and its lock");
    assert!(alive_dir.join("submission.zip").exists(), "a live grader's folder is kept");
    assert!(lock(&alive_dir).exists() && mine.path().exists() && lock(mine.path()).exists());

    alive.kill().expect("kill");
    alive.wait().expect("wait");
    let mine_path = mine.path().to_path_buf();
    drop(mine);
    assert!(!mine_path.exists() && !lock(&mine_path).exists(), "a dropped folder leaves nothing");
    assert_eq!(workdir::sweep(base.path()).folders, 1);
    let mut left: Vec<String> = fs::read_dir(base.path())
        .expect("list")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["gatehouse-grade-legacy2", "gatehouse-sandbox"]);
}
