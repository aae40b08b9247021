//! Where a language plugs in: one module per language a packet's tests may
//! be written in (`python`, `node` for TypeScript on Node, `go`).
//!
//! Each answers the same questions for the rest of the grader:
//!
//! - which commands are its trusted runner's plain forms (`trusted::plan`
//!   maps them to a `RunnerKind`), and the runner's files on the tool folder
//!   (`trusted::write_tools`);
//! - which laid files a run of its tests collects (`collects`), and whether
//!   a step's tests are all the packet's (`guard::fixed_tests`);
//! - how a run of the packet's tests is judged apart (JUDGE.md): its
//!   [`JudgeSetup`], the host the sandbox starts under the candidate's uid
//!   (`run::judge_setup` dispatches by runner kind). A language without one
//!   runs its packet tests beside the candidate's code, with the canaries
//!   and the runner's cross-checks as its defence, and says so in the
//!   receipt (`judged`);
//! - its canary twins, while it has them (`canary::Lang`: the generator, the
//!   scratch file names, how a planted test is named).
//!
//! This module imports none of the grader's pipeline: `trusted`, `run`,
//! `canary` and the probe call into it.

pub mod go;
pub mod node;
pub mod python;

/// How the runs of a language's packet tests are judged apart: the host's
/// command, exec'd by the sandbox's init under the candidate's uid with the
/// judge's socket on descriptor 3 (`sandbox::HostSpec::argv`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JudgeSetup {
    pub host_argv: Vec<String>,
    /// Tasks (processes and threads: the pids cgroup counts both) the
    /// judge apart adds to a run, over what the packet's `[limits]
    /// processes` was set for: the host supervisor and a host server,
    /// each a runtime with threads of its own. Added to the run's limit.
    pub extra_processes: u64,
}
