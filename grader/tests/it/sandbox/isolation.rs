//! What a run cannot reach: the network, host files, keyrings, the cgroup path, seccomp's calls.

use std::fs;
use std::net::TcpListener;

use grader::sandbox::Exit;

use super::*;

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
