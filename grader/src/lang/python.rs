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

/// The host supervisor's command: the grader's own file on the read-only
/// tool folder, the sandbox's `python3`, isolated and writing no bytecode.
pub const HOST_ARGV: [&str; 3] =
    ["/bin/sh", "-c", "exec python3 -I -B /gatehouse/gatehouse_host.py"];

/// Python's judge apart.
pub fn judge() -> JudgeSetup {
    JudgeSetup { host_argv: HOST_ARGV.iter().map(|s| s.to_string()).collect(), extra_processes: 0 }
}
