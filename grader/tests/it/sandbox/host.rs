//! Runs with a host (`RunSpec::host`): the judge (the command) and the host
//! under two uids of one run, joined by a socketpair. Each test here fails
//! without the mechanism it names (see the notes of branch
//! `i44-sandbox-two-uids` for how that was checked).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use grader::sandbox::{
    Exit, HostSpec, JUDGE_HOST_SHARE_UID, RunReport, RunSpec, Sandbox, SandboxError,
};
use serde_json::Value;

use super::*;

/// The python3 the sandbox runs (the prefix bound by the default config).
fn python() -> String {
    sandbox()
        .config()
        .path_dirs
        .iter()
        .map(|d| d.join("python3"))
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("/usr/bin/python3"))
        .to_string_lossy()
        .into_owned()
}

/// Writes `files` (path, contents, mode) into `dir`, making folders.
fn lay(dir: &Path, files: &[(&str, &str, u32)]) {
    for (rel, text, mode) in files {
        let p = dir.join(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(&p, text).expect("write");
        fs::set_permissions(&p, fs::Permissions::from_mode(*mode)).expect("chmod");
    }
}

fn host_spec(argv: &[&str], judge_only: &[&str]) -> HostSpec {
    HostSpec {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        env: Vec::new(),
        judge_only: judge_only.iter().map(|s| s.to_string()).collect(),
    }
}

fn spec(dir: &Path, script: &str, host: Option<HostSpec>) -> RunSpec {
    RunSpec {
        script: script.to_string(),
        workspace: dir.to_path_buf(),
        env: Vec::new(),
        limits: small_limits(),
        channel: false,
        read_only: Vec::new(),
        host,
    }
}

fn run_host(dir: &Path, script: &str, host: HostSpec) -> RunReport {
    sandbox()
        .run(&spec(dir, script, Some(host)))
        .unwrap_or_else(|e| panic!("sandbox error for {script:?}: {e}"))
}

/// Python shared by the judge and the host of the facts run: each attempt
/// is recorded as "ok" (with a value) or the errno's name.
const PY_COMMON: &str = r#"
import errno, grp, json, os, pwd, socket, stat, sys
facts = {}
def attempt(name, fn):
    try:
        facts[name] = ["ok", fn()]
    except OSError as e:
        facts[name] = [errno.errorcode.get(e.errno, str(e.errno)), None]
def read(p):
    with open(p) as f:
        return f.read()
def write(p, text):
    with open(p, "w") as f:
        f.write(text)
def open_fds():
    fds = []
    for fd in range(256):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:
            pass
    return fds
def ids():
    lines = read("/proc/self/status").splitlines()
    keep = {}
    for l in lines:
        k, _, v = l.partition(":")
        if k in ("Uid", "Gid", "Groups"):
            keep[k] = v.split()
    keep["user"] = pwd.getpwuid(os.getuid()).pw_name
    keep["group"] = grp.getgrgid(os.getgid()).gr_name
    return keep
def sock_kind(fd):
    s = socket.socket(fileno=os.dup(fd))
    kind = [s.family == socket.AF_UNIX, s.type == socket.SOCK_STREAM]
    s.close()
    return kind
"#;

/// The host: told the judge's pid, it tries what it must not be able to
/// do and what it must, and answers with what happened.
const HOST_PY: &str = r#"
s = socket.socket(fileno=3)
f = s.makefile("rwb", buffering=0)
judge = json.loads(f.readline())["pid"]
attempt("read_judge_only_file", lambda: read("expected.txt"))
attempt("read_judge_only_dir_file", lambda: read("hidden/test_secret.py"))
attempt("list_judge_only_dir", lambda: os.listdir("hidden"))
attempt("rename_judge_only_dir", lambda: os.rename("hidden", "hidden2"))
attempt("replace_judge_only_file", lambda: os.rename("solution.py", "expected.txt"))
attempt("unlink_judge_only_file", lambda: os.unlink("expected.txt"))
attempt("kill_judge", lambda: os.kill(judge, 9))
attempt("signal0_judge", lambda: os.kill(judge, 0))
attempt("read_judge_status", lambda: read("/proc/%d/status" % judge))
attempt("read_judge_environ", lambda: read("/proc/%d/environ" % judge))
attempt("create_in_evidence", lambda: write("/evidence/by_host", "x"))
attempt("list_evidence", lambda: os.listdir("/evidence"))
attempt("write_workspace", lambda: write("from_host.txt", "written by the host"))
attempt("write_tmp", lambda: write("/tmp/shared_by_host", "tmp from the host"))
attempt("read_solution", lambda: read("solution.py"))
attempt("read_judge_py", lambda: read("judge.py"))
facts["fds"] = open_fds()
facts["fd3_unix_stream"] = sock_kind(3)
facts["ids"] = ids()
facts["host_var"] = os.environ.get("GH_HOST_VAR")
facts["judge_var"] = os.environ.get("GH_JUDGE_VAR")
f.write(json.dumps(facts).encode() + b"\n")
f.readline()
"#;

/// The judge: sends its pid, takes the host's answer, does its own part
/// and writes both to the result channel.
const JUDGE_PY: &str = r#"
s = socket.socket(fileno=4)
f = s.makefile("rwb", buffering=0)
f.write(json.dumps({"pid": os.getpid()}).encode() + b"\n")
host = json.loads(f.readline())
attempt("read_judge_only_file", lambda: read("expected.txt"))
attempt("read_judge_only_dir_file", lambda: read("hidden/test_secret.py"))
attempt("list_judge_only_dir", lambda: sorted(os.listdir("hidden")))
attempt("read_host_file", lambda: read("from_host.txt"))
attempt("read_host_tmp", lambda: read("/tmp/shared_by_host"))
attempt("write_workspace", lambda: write("from_judge.txt", "written by the judge"))
attempt("write_workspace_dir", lambda: write("sub/by_judge.txt", "judge in a folder"))
attempt("write_evidence", lambda: write("/evidence/by_judge.txt", "evidence"))
facts["fds"] = open_fds()
facts["fd3_fifo"] = stat.S_ISFIFO(os.fstat(3).st_mode)
facts["fd4_unix_stream"] = sock_kind(4)
facts["ids"] = ids()
facts["host_var"] = os.environ.get("GH_HOST_VAR")
facts["judge_var"] = os.environ.get("GH_JUDGE_VAR")
owners = {}
for p in [".", "solution.py", "sub", "sub/mod.py", "expected.txt", "hidden",
          "hidden/test_secret.py", "hidden/run.sh", "/evidence", "/tmp"]:
    st = os.lstat(p)
    owners[p] = [st.st_uid, st.st_gid, "%o" % stat.S_IMODE(st.st_mode)]
facts["owners"] = owners
f.write(b"bye\n")
os.write(3, json.dumps({"host": host, "judge": facts}).encode())
"#;

/// What the facts run found, with its report and the host folder after it.
struct Facts {
    report: RunReport,
    host: Value,
    judge: Value,
    after: tempfile::TempDir,
}

/// One run with a host (shared by the tests below: one sandbox run, many
/// properties).
fn facts() -> &'static Facts {
    static FACTS: OnceLock<Facts> = OnceLock::new();
    FACTS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let host_py = format!("{PY_COMMON}{HOST_PY}");
        let judge_py = format!("{PY_COMMON}{JUDGE_PY}");
        lay(
            dir.path(),
            &[
                ("host.py", &host_py, 0o644),
                ("judge.py", &judge_py, 0o644),
                ("solution.py", "ANSWER = 41\n", 0o644),
                ("sub/mod.py", "X = 1\n", 0o644),
                ("expected.txt", "the expected value is 42\n", 0o644),
                ("hidden/test_secret.py", "assert ANSWER == 42\n", 0o644),
                ("hidden/run.sh", "#!/bin/sh\n", 0o755),
            ],
        );
        let mut host = host_spec(
            &[&python(), "-I", "-B", "/workspace/host.py"],
            &["judge.py", "expected.txt", "hidden"],
        );
        host.env.push(("GH_HOST_VAR".into(), "host-only".into()));
        // judge.py is judge-only and read-only: both mounts, stacked.
        let spec = RunSpec {
            channel: true,
            read_only: vec!["judge.py".into()],
            env: vec![("GH_JUDGE_VAR".into(), "judge-only".into())],
            ..spec(dir.path(), "python3 -I -B judge.py", Some(host))
        };
        let report = sandbox().run(&spec).unwrap_or_else(|e| panic!("sandbox error: {e}"));
        assert!(report.success(), "{report:?}");
        let all: Value = serde_json::from_slice(&report.channel).unwrap_or_else(|e| {
            panic!("channel {:?}: {e}; {report:?}", String::from_utf8_lossy(&report.channel))
        });
        Facts { host: all["host"].clone(), judge: all["judge"].clone(), report, after: dir }
    })
}

/// The outcome of an attempt: "ok" or the errno's name.
fn outcome(side: &Value, name: &str) -> String {
    side[name][0].as_str().unwrap_or_else(|| panic!("no attempt {name} in {side}")).to_string()
}

fn value(side: &Value, name: &str) -> Value {
    assert_eq!(outcome(side, name), "ok", "{name}: {side}");
    side[name][1].clone()
}

#[test]
fn sandbox_host_cannot_read_judge_only_files_the_judge_can() {
    let f = facts();
    assert!(f.report.apart, "{:?}", f.report);
    for name in ["read_judge_only_file", "read_judge_only_dir_file", "list_judge_only_dir"] {
        assert_eq!(outcome(&f.host, name), "EACCES", "{name}: {}", f.host);
    }
    assert_eq!(value(&f.judge, "read_judge_only_file"), "the expected value is 42\n");
    assert_eq!(value(&f.judge, "read_judge_only_dir_file"), "assert ANSWER == 42\n");
    assert_eq!(
        value(&f.judge, "list_judge_only_dir"),
        serde_json::json!(["run.sh", "test_secret.py"])
    );
    // The host reads the rest of the workspace.
    assert_eq!(value(&f.host, "read_solution"), "ANSWER = 41\n");
    // judge.py, judge-only and read-only too, is the judge's that ran.
    assert_eq!(outcome(&f.host, "read_judge_py"), "EACCES", "{}", f.host);
}

/// The host owns the folders around a judge-only path, but each is a mount
/// point: it cannot be renamed, removed or replaced.
#[test]
fn sandbox_host_cannot_move_remove_or_replace_judge_only_paths() {
    let f = facts();
    for name in ["rename_judge_only_dir", "replace_judge_only_file", "unlink_judge_only_file"] {
        assert_eq!(outcome(&f.host, name), "EBUSY", "{name}: {}", f.host);
    }
    let after = f.after.path();
    assert!(after.join("hidden/test_secret.py").is_file() && !after.join("hidden2").exists());
    assert_eq!(
        fs::read_to_string(after.join("expected.txt")).unwrap(),
        "the expected value is 42\n"
    );
}

#[test]
fn sandbox_host_cannot_signal_the_judge_or_read_its_proc() {
    let f = facts();
    assert_eq!(outcome(&f.host, "kill_judge"), "EPERM", "{}", f.host);
    assert_eq!(outcome(&f.host, "signal0_judge"), "EPERM", "{}", f.host);
    // hidepid=2: another uid's /proc/<pid> is not there at all.
    assert_eq!(outcome(&f.host, "read_judge_status"), "ENOENT", "{}", f.host);
    assert_eq!(outcome(&f.host, "read_judge_environ"), "ENOENT", "{}", f.host);
}

#[test]
fn sandbox_host_cannot_write_evidence_the_judge_can() {
    let f = facts();
    assert_eq!(outcome(&f.host, "create_in_evidence"), "EACCES", "{}", f.host);
    assert_eq!(outcome(&f.host, "list_evidence"), "EACCES", "{}", f.host);
    assert_eq!(value(&f.judge, "write_evidence"), Value::Null);
    let ev = f.after.path().join(grader::sandbox::EVIDENCE_DIR);
    assert_eq!(fs::read_to_string(ev.join("by_judge.txt")).unwrap(), "evidence");
    assert!(!ev.join("by_host").exists());
}

#[test]
fn sandbox_host_and_judge_share_the_workspace_and_tmp() {
    let f = facts();
    assert_eq!(value(&f.host, "write_workspace"), Value::Null);
    assert_eq!(value(&f.host, "write_tmp"), Value::Null);
    assert_eq!(value(&f.judge, "read_host_file"), "written by the host");
    assert_eq!(value(&f.judge, "read_host_tmp"), "tmp from the host");
    assert_eq!(value(&f.judge, "write_workspace"), Value::Null);
    assert_eq!(value(&f.judge, "write_workspace_dir"), Value::Null);
    let after = f.after.path();
    assert_eq!(fs::read_to_string(after.join("from_host.txt")).unwrap(), "written by the host");
    assert_eq!(fs::read_to_string(after.join("from_judge.txt")).unwrap(), "written by the judge");
    assert_eq!(fs::read_to_string(after.join("sub/by_judge.txt")).unwrap(), "judge in a folder");
}

/// Each side's descriptors: the host stdio and its socket end at 3; the
/// judge stdio, the channel at 3 and its socket end at 4; nothing else.
/// The bytes crossed both ways (the judge's pid one way, the host's facts
/// the other, a last line back).
#[test]
fn sandbox_host_and_judge_descriptors_and_socketpair() {
    let f = facts();
    assert_eq!(f.host["fds"], serde_json::json!([0, 1, 2, 3]), "{}", f.host);
    assert_eq!(f.host["fd3_unix_stream"], serde_json::json!([true, true]));
    assert_eq!(f.judge["fds"], serde_json::json!([0, 1, 2, 3, 4]), "{}", f.judge);
    assert_eq!(f.judge["fd3_fifo"], true);
    assert_eq!(f.judge["fd4_unix_stream"], serde_json::json!([true, true]));
    assert_eq!(grader::sandbox::JUDGE_HOST_FD, 4);
    assert_eq!(grader::sandbox::HOST_JUDGE_FD, 3);
    // Each side's environment: the base plus its own extras.
    assert_eq!(f.host["host_var"], "host-only");
    assert_eq!(f.host["judge_var"], Value::Null);
    assert_eq!(f.judge["judge_var"], "judge-only");
    assert_eq!(f.judge["host_var"], Value::Null);
}

/// (uid, gid) leased ids seen in a process's Uid/Gid/Groups lines: every
/// one of the four ids the same, no supplementary group.
fn one_id(ids: &Value) -> (u32, u32) {
    let all = |k: &str| -> u32 {
        let v: Vec<u32> = ids[k]
            .as_array()
            .unwrap_or_else(|| panic!("{k} in {ids}"))
            .iter()
            .map(|x| x.as_str().and_then(|s| s.parse().ok()).expect("id"))
            .collect();
        assert!(v.len() == 4 && v.iter().all(|x| *x == v[0]), "{k}: {v:?}");
        v[0]
    };
    assert_eq!(ids["Groups"], serde_json::json!([]), "{ids}");
    (all("Uid"), all("Gid"))
}

#[test]
fn sandbox_host_and_judge_ids_owners_and_modes() {
    let f = facts();
    let (c, g) = one_id(&f.host["ids"]);
    let (j, jg) = one_id(&f.judge["ids"]);
    let config = sandbox().config();
    let range = config.uid..config.uid + grader::sandbox::UID_RANGE as u32;
    assert!(c != j && range.contains(&c) && range.contains(&j), "host {c}, judge {j}");
    assert_eq!(g, jg, "one gid for both");
    assert_eq!(g - config.gid, c - config.uid, "the gid is the host's lease's");
    assert_eq!(
        (f.host["ids"]["user"].as_str(), f.host["ids"]["group"].as_str()),
        (Some("sandbox"), Some("sandbox"))
    );
    assert_eq!(
        (f.judge["ids"]["user"].as_str(), f.judge["ids"]["group"].as_str()),
        (Some("judge"), Some("sandbox"))
    );
    let owners: BTreeMap<String, (u32, u32, String)> =
        serde_json::from_value(f.judge["owners"].clone()).expect("owners");
    let want = |p: &str, u: u32, gr: u32, mode: &str| {
        assert_eq!(owners[p], (u, gr, mode.to_string()), "{p}: {owners:?}");
    };
    want(".", c, g, "775");
    want("solution.py", c, g, "664");
    want("sub", c, g, "775");
    want("sub/mod.py", c, g, "664");
    // Judge-only: the judge's uid and its lease's own gid, which no process
    // of the run has (so the group bits, kept by the judge's copies in the
    // shared group, give the host nothing here).
    let jown = config.gid + (j - config.uid);
    assert_ne!(jown, g);
    want("expected.txt", j, jown, "660");
    want("hidden", j, jown, "770");
    want("hidden/test_secret.py", j, jown, "660");
    want("hidden/run.sh", j, jown, "770");
    want("/evidence", j, g, "700");
    want("/tmp", 0, 0, "1777");
}

/// The status lines `Uid`/`Gid`/`Groups` of a shell, to fd `fd`.
fn status_lines(fd: u32) -> String {
    format!("grep -E '^(Uid|Gid|Groups):' /proc/self/status >&{fd}")
}

/// Parses the `Uid:`/`Gid:` lines of `text` into (uid, gid) pairs, in order.
fn uid_gid_pairs(text: &str) -> Vec<(u32, u32)> {
    let first = |prefix: &str| -> Vec<u32> {
        text.lines()
            .filter_map(|l| l.strip_prefix(prefix))
            .map(|v| v.split_whitespace().next().and_then(|x| x.parse().ok()).expect("id"))
            .collect()
    };
    first("Uid:").into_iter().zip(first("Gid:")).collect()
}

/// Two runs with a host and one without, at the same time: five uids, all
/// different.
#[test]
fn sandbox_host_runs_lease_two_uids_no_live_run_shares() {
    let sh = "/bin/sh";
    let host_script = format!("{}; exec 3>&-; sleep 1.5", status_lines(3));
    let judge_script = format!("cat <&4; {}; sleep 1.5", status_lines(1));
    let runs: Vec<_> = std::thread::scope(|s| {
        let mut hs = Vec::new();
        for with_host in [true, true, false] {
            let (host_script, judge_script) = (&host_script, &judge_script);
            hs.push(s.spawn(move || {
                let dir = tempfile::tempdir().expect("tempdir");
                let host = with_host.then(|| host_spec(&[sh, "-c", host_script], &[]));
                let script = if with_host {
                    judge_script.clone()
                } else {
                    format!("{}; sleep 1.5", status_lines(1))
                };
                let t0 = Instant::now();
                let r = sandbox().run(&spec(dir.path(), &script, host)).expect("run");
                (t0, Instant::now(), r)
            }));
        }
        hs.into_iter().map(|h| h.join().expect("join")).collect()
    });
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            assert!(a.0 < b.1 && b.0 < a.1, "the runs did not overlap");
        }
    }
    let mut uids = Vec::new();
    for (_, _, r) in &runs {
        assert!(r.success(), "{r:?}");
        let pairs = uid_gid_pairs(&r.stdout_tail);
        if r.apart {
            assert_eq!(pairs.len(), 2, "{r:?}");
            let ((c, g), (j, jg)) = (pairs[0], pairs[1]);
            assert_eq!(g, jg, "{r:?}");
            uids.extend([c, j]);
        } else {
            assert_eq!(pairs.len(), 1, "{r:?}");
            uids.push(pairs[0].0);
        }
    }
    let distinct: std::collections::BTreeSet<_> = uids.iter().collect();
    assert_eq!(distinct.len(), 5, "uids {uids:?}");
}

/// When the judge ends, the host's main process is killed and reaped
/// before the leftovers are listed: it is never one, while what it started
/// and left running is.
#[test]
fn sandbox_host_is_not_a_leftover_what_it_left_running_is() {
    let dir = tempfile::tempdir().expect("tempdir");
    let host =
        host_spec(&["/bin/sh", "-c", "sleep 29.25 & echo started >&3; exec sleep 1000.5"], &[]);
    // Without the channel the judge has no fd 3 (ls's own directory is 3).
    let r = run_host(dir.path(), "head -n 1 <&4; ls /proc/self/fd | tr '\\n' ' '", host);
    assert!(r.success(), "{r:?}");
    assert_eq!(r.stdout_tail, "started\n0 1 2 3 4 ");
    assert_eq!(r.host_alive_at_end, Some(true), "{r:?}");
    assert_eq!(r.host_exit, None, "{r:?}");
    let cmds: Vec<&str> = r.leftovers.iter().map(|l| l.cmdline.as_str()).collect();
    assert!(cmds.contains(&"sleep 29.25"), "{cmds:?}");
    assert!(!cmds.iter().any(|c| c.contains("1000.5")), "the host is a leftover: {cmds:?}");
    assert_eq!(r.leftovers_total, 1, "{r:?}");
}

/// A host that ends before the judge: the judge sees the socket's end and
/// the run goes on; the report says how the host ended. The host's output
/// is the run's.
#[test]
fn sandbox_host_that_exits_early_does_not_break_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let host = host_spec(&["/bin/sh", "-c", "echo from-host; exit 7"], &[]);
    let r = run_host(dir.path(), "cat <&4; echo judge-done", host);
    assert!(r.success(), "{r:?}");
    assert!(r.apart);
    assert_eq!(r.stdout_tail, "from-host\njudge-done\n");
    assert_eq!(r.host_alive_at_end, Some(false), "{r:?}");
    assert_eq!(r.host_exit, Some(Exit::Code(7)), "{r:?}");
    assert!(r.leftovers.is_empty(), "{r:?}");
    let json = serde_json::to_value(&r).expect("json");
    assert_eq!(json["apart"], true);
    assert_eq!(json["host_exit"], serde_json::json!({"kind": "code", "value": 7}));
    // A run without a host reports none of it, and its report serializes
    // as before (no new keys).
    let plain = run_in(dir.path(), "true", small_limits());
    assert!(!plain.apart && plain.host_alive_at_end.is_none() && plain.host_exit.is_none());
    let json = serde_json::to_value(&plain).expect("json");
    for key in ["apart", "host_alive_at_end", "host_exit"] {
        assert!(json.get(key).is_none(), "{key} in {json}");
    }
}

fn host_error(host: HostSpec) -> SandboxError {
    let dir = tempfile::tempdir().expect("tempdir");
    lay(dir.path(), &[("ok.txt", "x", 0o644), ("real/f.txt", "y", 0o644)]);
    std::os::unix::fs::symlink("real", dir.path().join("link")).expect("symlink");
    // A command that would hold the run for 5 s: a failed host start
    // must not start it.
    let t0 = Instant::now();
    let e = match sandbox().run(&spec(dir.path(), "sleep 5; echo ran > ran.txt", Some(host))) {
        Ok(r) => panic!("the run started: {r:?}"),
        Err(e) => e,
    };
    assert!(t0.elapsed() < Duration::from_secs(4), "the command ran after the error: {e}");
    e
}

/// A host that cannot start is a sandbox error naming the failed call, and
/// the command never starts; bad host specs are refused naming what is
/// wrong.
#[test]
fn sandbox_host_start_failures_are_errors_naming_the_call() {
    let e = host_error(host_spec(&["/nonexistent/gh-host", "--serve"], &[]));
    assert!(
        e.call.contains("execve(\"/nonexistent/gh-host\", [\"/nonexistent/gh-host\", \"--serve\"]")
            && e.call.contains("in the host process"),
        "{e}"
    );
    assert!(e.detail.contains("ENOENT"), "{e}");
    let e = host_error(host_spec(&["/proc/self/status"], &[]));
    assert!(e.call.contains("execve(\"/proc/self/status\"") && e.detail.contains("EACCES"), "{e}");
    for argv in [&[][..], &["python3", "-c", "pass"][..]] {
        let e = host_error(host_spec(argv, &[]));
        assert!(e.call.contains("HostSpec::argv") && e.detail.contains("absolute path"), "{e}");
    }
    for bad in ["../x", "/ok.txt", "a//b", "./ok.txt", "missing.txt", "link", "link/f.txt"] {
        let e = host_error(host_spec(&["/bin/true"], &[bad]));
        assert!(e.call.contains("HostSpec::judge_only"), "{bad}: {e}");
    }
}

/// Without the uid drop the judge and the host share one uid: the run
/// still works, says it was not apart, and the features say so.
#[test]
fn sandbox_host_without_uid_drop_shares_a_uid_and_says_so() {
    assert!(!sandbox().features().fallbacks.iter().any(|f| f == JUDGE_HOST_SHARE_UID));
    let sb = Sandbox::new(Sandbox::host_default_config()).expect("sandbox").assume_no_uid_drop();
    assert!(!sb.features().uid_drop);
    assert!(
        sb.features().fallbacks.iter().any(|f| f == JUDGE_HOST_SHARE_UID),
        "{:?}",
        sb.features()
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let host = host_spec(&["/bin/sh", "-c", &status_lines(3)], &["secret.txt"]);
    lay(dir.path(), &[("secret.txt", "s", 0o644)]);
    let script = format!("cat <&4; {}", status_lines(1));
    let r = sb.run(&spec(dir.path(), &script, Some(host))).expect("run");
    assert!(r.success(), "{r:?}");
    assert!(!r.apart, "{r:?}");
    assert_eq!(uid_gid_pairs(&r.stdout_tail), vec![(0, 0), (0, 0)], "{r:?}");
}

/// The cost of a host: the wall time of a trivial run with and without
/// one (medians of 20, after 3 warm-up runs). Run with `--ignored
/// --nocapture`; the figures are for the notes.
#[test]
#[ignore = "a measurement, not a check"]
fn sandbox_host_overhead_figures() {
    let dir = tempfile::tempdir().expect("tempdir");
    let median = |host: Option<HostSpec>| {
        let mut t = Vec::new();
        for i in 0..23 {
            let t0 = Instant::now();
            let r = sandbox().run(&spec(dir.path(), "true", host.clone())).expect("run");
            assert!(r.success(), "{r:?}");
            if i >= 3 {
                t.push(t0.elapsed());
            }
        }
        t.sort();
        t[t.len() / 2]
    };
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let none = median(None);
    let sleeping = median(Some(host_spec(&["/bin/sleep", "100"], &[])));
    let exiting = median(Some(host_spec(&["/bin/true"], &[])));
    let none2 = median(None);
    println!(
        "trivial run `true`, median of 20: no host {:.2} ms / {:.2} ms; host /bin/sleep (killed at the end) {:.2} ms; host /bin/true {:.2} ms",
        ms(none),
        ms(none2),
        ms(sleeping),
        ms(exiting)
    );
}

/// The Python host supervisor's command (`lang::python::HOST_ARGV`) is a
/// shell waiting for the judge's first byte: a run whose judge never asks
/// for anything (a detector script that reads files) starts no interpreter
/// under the candidate's uid. Here there is no tools folder, so a woken
/// supervisor fails at once importing `gatehouse_host`, which the report
/// shows; an unwoken one ends quietly when the judge closes its socket.
#[test]
fn sandbox_host_python_supervisor_starts_only_when_woken() {
    let dir = tempfile::tempdir().expect("tempdir");
    let argv = grader::lang::python::HOST_ARGV;
    let quiet = run_host(dir.path(), "sleep 0.3; echo judge-done", host_spec(&argv, &[]));
    assert!(quiet.success(), "{quiet:?}");
    assert_eq!(quiet.stdout_tail, "judge-done\n", "{quiet:?}");
    assert!(!quiet.stderr_tail.contains("gatehouse_host"), "an interpreter started: {quiet:?}");
    // The shell saw the socket end, or was still reading when the run ended.
    assert!(
        quiet.host_exit == Some(Exit::Code(0)) || quiet.host_alive_at_end == Some(true),
        "{quiet:?}"
    );
    let woken =
        run_host(dir.path(), "printf '\\n' >&4; sleep 2; echo judge-done", host_spec(&argv, &[]));
    assert!(woken.success(), "{woken:?}");
    assert!(woken.stderr_tail.contains("No module named 'gatehouse_host'"), "{woken:?}");
    assert_eq!(woken.host_exit, Some(Exit::Code(1)), "{woken:?}");
}
