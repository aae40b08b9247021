//! How a packet command is run: through a trusted runner when it is one
//! of the plain forms (`trusted`'s module documentation, `go test ARGS`,
//! `lang_node::plain`), as shell text otherwise.

use super::{RUNNER_FLAGS, RunnerKind, TOOLS_MOUNT};

/// How a packet command is run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Shell text, run as written.
    Shell(String),
    /// Through the trusted runner, after `prelude` (packet shell text that
    /// prepares the run, such as copying files or applying a diff) when the
    /// command is `PRELUDE && RUNNER` or ends with a line `RUNNER`.
    Runner { kind: RunnerKind, args: Vec<String>, prelude: Option<String> },
}

impl Plan {
    /// The shell text the sandbox runs.
    pub fn command(&self) -> String {
        match self {
            Plan::Shell(s) => s.clone(),
            Plan::Runner { kind: RunnerKind::NodeTest, args, prelude } => {
                prelude.clone().unwrap_or_default() + &crate::lang::node::command(args, shell_quote)
            }
            Plan::Runner { kind, args, prelude } => {
                let mut s = prelude.clone().unwrap_or_default();
                s.push_str(&match kind {
                    RunnerKind::GoTest => crate::lang::go::runner_command(TOOLS_MOUNT),
                    _ => format!(
                        "python3 {RUNNER_FLAGS} {TOOLS_MOUNT}/gatehouse_runner.py {}",
                        kind.word()
                    ),
                });
                for a in args {
                    s.push(' ');
                    s.push_str(&shell_quote(a));
                }
                s
            }
        }
    }

    pub fn runner(&self) -> Option<RunnerKind> {
        match self {
            Plan::Runner { kind, .. } => Some(*kind),
            Plan::Shell(_) => None,
        }
    }

    /// Whether the runner runs in the command's own working folder (no
    /// prelude that could have changed it).
    pub fn in_workspace(&self) -> bool {
        matches!(self, Plan::Runner { prelude: None, .. })
    }
}

/// `command` with its test runner told to stop at the first failing test
/// (pytest's `-x`, unittest's `-f`, `go test -failfast`), when it is a plain
/// runner form with such a flag; `command` as it is otherwise (shell text,
/// `node --test`, a script). For runs whose only question is whether any
/// test fails, such as a mutant's: the tests after the first failure cannot
/// change that answer.
pub fn fail_fast(command: &str) -> String {
    let flag = match plan(command) {
        Plan::Runner { kind: RunnerKind::Pytest, .. } => "-x",
        Plan::Runner { kind: RunnerKind::Unittest, .. } => "-f",
        Plan::Runner { kind: RunnerKind::GoTest, .. } => "-failfast",
        _ => return command.to_string(),
    };
    format!("{} {flag}", command.trim_end())
}

/// Characters that make a command shell text rather than plain words.
const SHELL_SYNTAX: &[char] = &[
    '|', '&', ';', '<', '>', '(', ')', '$', '`', '\\', '"', '\'', '*', '?', '[', ']', '{', '}',
    '~', '#', '!', '\n', '\r',
];

/// Decides how `command` runs: the trusted runner for the plain forms named
/// in the module documentation (alone, after `PRELUDE &&`, or as the last
/// line of a multi-line command), the shell otherwise.
pub fn plan(command: &str) -> Plan {
    let shell = || Plan::Shell(command.to_string());
    let trimmed = command.trim_end();
    // The runner is the last line, or what follows the last `&&`.
    let (prelude, last) = match trimmed.rfind('\n') {
        Some(i) => (Some(format!("{}\n", &trimmed[..i])), &trimmed[i + 1..]),
        None => match trimmed.rfind("&&") {
            Some(i) => {
                (Some(format!("{} && ", trimmed[..i].trim_end())), trimmed[i + 2..].trim_start())
            }
            None => (None, trimmed),
        },
    };
    match plain(last) {
        Some((kind, args)) => Plan::Runner { kind, args, prelude },
        None => shell(),
    }
}

/// The runner and its arguments when `command` is one plain runner form.
fn plain(command: &str) -> Option<(RunnerKind, Vec<String>)> {
    if command.contains(SHELL_SYNTAX) {
        return None;
    }
    let words: Vec<&str> = command.split_whitespace().collect();
    let is_python = |w: &str| {
        w == "python3"
            || w == "python"
            || w.strip_prefix("python3.")
                .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()))
    };
    let own = |rest: &[&str]| rest.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match words.as_slice() {
        [py, "-m", "pytest", rest @ ..] if is_python(py) => Some((RunnerKind::Pytest, own(rest))),
        [py, "-m", "unittest", rest @ ..] if is_python(py) => {
            Some((RunnerKind::Unittest, own(rest)))
        }
        ["pytest", rest @ ..] => Some((RunnerKind::Pytest, own(rest))),
        ["go", "test", rest @ ..] => Some((RunnerKind::GoTest, own(rest))),
        [py, script, rest @ ..]
            if is_python(py) && script.starts_with(".gatehouse/") && script.ends_with(".py") =>
        {
            let mut args = vec![script.to_string()];
            args.extend(own(rest));
            Some((RunnerKind::Script, args))
        }
        _ => crate::lang::node::plain(&words).map(|args| (RunnerKind::NodeTest, args)),
    }
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
