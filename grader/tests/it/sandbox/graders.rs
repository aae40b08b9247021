//! Graders side by side: run uids apart, the sweep of a killed grader, the evidence folder.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use grader::sandbox::{Exit, Limits, RunSpec, Sandbox};

use super::*;

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
            "sandbox::graders::sandbox_helper_process",
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
                            host: None,
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
            host: None,
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
        host: None,
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
