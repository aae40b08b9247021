//! Python: pytest, unittest and packet scripts through the trusted runner
//! (`harness/gatehouse_runner.py`), judged apart (JUDGE.md).
//!
//! In a run judged apart the runner is the judge: it loads
//! `harness/gatehouse_judge.py` before any packet code, which answers the
//! workspace's module names with proxy modules served by a host process
//! (`harness/gatehouse_host.py`, started by the sandbox under the
//! candidate's uid as a supervisor that starts hosts and programs on the
//! judge's request), decodes only data (`harness/gatehouse_wire.py`), and
//! starts every program packet code launches through that supervisor.

use super::JudgeSetup;

/// The host supervisor's command. A shell first waits for the judge's
/// first byte on the socket (a newline, read a byte at a time so nothing
/// after it is consumed: `gatehouse_judge.Supervisor.wake`); at the end of
/// a run that never woke it, it reads the end of the socket and exits, and
/// no interpreter ever started. Woken, it becomes the grader's own module
/// on the read-only tool folder (imported, not run as a script, so that
/// its bytecode there is used: `trusted::compile_tools`) in the sandbox's
/// `python3`, isolated, without `site` (it imports only the standard
/// library; the hosts it forks run `site` themselves) and writing no
/// bytecode.
pub const HOST_ARGV: [&str; 3] = [
    "/bin/sh",
    "-c",
    "read -r _ <&3 || exit 0; \
     exec python3 -I -S -B -c 'import sys; sys.path.insert(0, \"/gatehouse\"); import gatehouse_host; \
     sys.path.remove(\"/gatehouse\"); gatehouse_host.main()'",
];

/// Python's judge apart.
pub fn judge() -> JudgeSetup {
    JudgeSetup { host_argv: HOST_ARGV.iter().map(|s| s.to_string()).collect(), extra_processes: 0 }
}
