//! Running a packet's commands: each in the sandbox, on a fresh copy of the
//! assembled workspace, with what it produced read back (JUnit XML, script
//! findings, mutant verdicts).
//!
//! `run_guarded` takes a `Guard`: the grader's files it laid (under
//! `.gatehouse/`, and the hidden test modules the runner collects;
//! `guard::protected`) are bound read-only (`RunSpec::read_only`; other laid
//! files are fixtures the candidate's code may be meant to change) and named to
//! the runner by digest (`GATEHOUSE_RUN`); canaries are planted before the run
//! and resolved after it, planted names are written back in the output, and a
//! run that failed only because its twins did is the pass it is. `run_on_copy`
//! is `run_guarded` with no guard. Output tails have durations and addresses
//! masked (`normalize_output`), so the receipt stays deterministic.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, BufReader};
use std::path::Path;

use regex::Regex;

use crate::canary::{Choose, Rng, RunCanaries, Template, Verdict};
use crate::evidence::{ScriptFinding, TestOutcome, TestStatus};
use crate::sandbox::{Limits, RunReport, RunSpec, Sandbox, SandboxError};

/// A command the grader ran, as recorded in the receipt.
#[derive(Debug, Clone)]
pub struct RunRecord {
    /// `step:<id>`, `script:<n>`, `mutant:<id>`, `probe`.
    pub id: String,
    pub command: String,
    pub limits: Limits,
    pub report: RunReport,
    /// How the process that ran its tests crashed, when it did
    /// (`trusted::Ending::summary`).
    pub crash: Option<String>,
}

/// One command the grader ran: the sandbox's report, how the command was
/// run, what the trusted runner reported when it ran through one (mapped
/// back through the run's canaries), and what the canaries showed.
#[derive(Debug, Clone)]
pub struct Ran {
    pub report: RunReport,
    pub plan: crate::trusted::Plan,
    pub runner: Option<crate::trusted::RunnerResult>,
    /// The names the run planted, to map its JUnit file back.
    pub canaries: RunCanaries,
    pub verdict: Verdict,
    /// The run was judged apart: the candidate's code ran only in a host
    /// process under its own uid (`report.apart` says whether the sandbox
    /// could give it one).
    pub apart: bool,
}

/// A run judged apart (JUDGE.md): the trusted runner is the judge, under
/// the run's judge uid, and a host supervisor under the candidate's uid
/// starts the candidate's code on the judge's request; only data crosses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JudgePlan {
    /// Every workspace path the preparation laid (files or folders): the
    /// judge imports these itself; every other module of the workspace is
    /// served to it by the host.
    pub laid: Vec<String>,
    /// Of those, what only the judge may read (`manifest::Lay::judge_only`).
    pub judge_only: Vec<String>,
}

/// What a run carries besides its command: the grader's files to protect,
/// the canaries to plant.
#[derive(Default)]
pub struct Guard<'a> {
    /// Judge the run apart when its command runs through a runner whose
    /// language judges apart (Python, TypeScript on Node: `judge_setup`)
    /// with no prelude (`JudgePlan`); such a run plants no canary: nothing
    /// of the candidate's runs where a canary could tell.
    pub judge: Option<JudgePlan>,
    /// Workspace paths the preparation laid (files or folders): bound
    /// read-only, and known to the runner as the grader's.
    pub laid: Vec<String>,
    /// Hidden test modules to plant twins into: (workspace path, template,
    /// which twins).
    pub twins: Vec<(&'a str, &'a Template, Choose<'a>)>,
    /// Plant the generic pair (runs of tests the candidate wrote).
    pub generic: bool,
    /// Report every twin's outcome instead of judging them.
    pub calibrating: bool,
    /// The run's tests are all the packet's: no `conftest.py` loads.
    pub noconftest: bool,
    /// The seed of the run's names and choices.
    pub seed: Vec<u8>,
    /// What the run's twins may cost (`canary::choose_twins`), shared
    /// among its modules by their cost.
    pub twin_budget: crate::canary::Budget,
    /// The Go judge's kept builds this run may use and add to, when it is
    /// judged apart (`lang::go::cache`).
    pub go_cache: Option<crate::lang::go::cache::Scope<'a>>,
}

/// The runner's configuration variable (read and erased by the runner).
pub const RUN_VAR: &str = "GATEHOUSE_RUN";

/// Runs `script` in the sandbox on a copy of `workspace` made in `scratch`
/// (which must not exist), after `prepare` has laid extra files into the
/// copy. The copy stays in `scratch` for the caller to read. A command in
/// one of the trusted forms (`trusted::plan`) runs through the trusted
/// runner when the sandbox mounts the grader's tools.
pub fn run_on_copy(
    sandbox: &Sandbox,
    workspace: &Path,
    scratch: &Path,
    prepare: impl FnOnce(&Path) -> io::Result<()>,
    script: &str,
    limits: &Limits,
    env: Vec<(String, String)>,
) -> Result<Ran, RunError> {
    run_guarded(sandbox, workspace, scratch, prepare, script, limits, env, &Guard::default())
}

/// Plants the twins of `guard` into the hidden test modules laid in `ws`
/// (in a graded run, one module carries the run's first twin and each
/// shares the run's twin budget by what its tests cost), recording every
/// planted name in `roles`. Tests `keep` names keep their names.
fn plant_twins(
    guard: &Guard,
    ws: &crate::root::Root,
    keep: &dyn Fn(&str) -> bool,
    rng: &mut Rng,
    roles: &mut BTreeMap<String, crate::canary::Role>,
) -> io::Result<()> {
    let planted: Vec<_> = (guard.twins.iter())
        .filter(|(path, template, _)| template.error.is_none() && ws.is_file(path))
        .collect();
    // The module that carries the run's first twin, and each module's
    // share of the run's twin budget, by what its tests cost.
    let calibrated: Vec<_> = (planted.iter())
        .filter_map(|(_, t, c)| match c {
            Choose::Calibrated(g) => Some((*t, g.twins)),
            Choose::All => None,
        })
        .collect();
    let first = crate::canary::first_twin_module(&calibrated, rng);
    let module_cost = |t: &Template, c: &Choose| match c {
        Choose::Calibrated(g) => g.cost.map_or(0, |(c, _)| crate::canary::module_cost(t, c)),
        Choose::All => 0,
    };
    let all_cost: u64 = planted.iter().map(|(_, t, c)| module_cost(t, c)).sum();
    let mut calibrated_seen = 0;
    for (path, template, choose) in planted {
        let choose = match *choose {
            Choose::Calibrated(mut g) => {
                calibrated_seen += 1;
                g.first = first == Some(calibrated_seen - 1);
                g.run_budget = guard.twin_budget;
                if let Some((c, _)) = g.cost {
                    let part = crate::canary::module_cost(template, c);
                    g.cost = Some((c, guard.twin_budget.share(part, all_cost)));
                }
                Choose::Calibrated(g)
            }
            Choose::All => Choose::All,
        };
        let text = crate::canary::plant(template, path, choose, keep, rng, roles);
        ws.write(path, text.as_bytes())?;
    }
    Ok(())
}

/// [`run_on_copy`] with `guard`: the laid files read-only, canaries
/// planted into a trusted pytest or unittest run whose options leave every
/// test to run (`canary::options_allow_canaries`), and the results mapped
/// back (`canary::RunCanaries::resolve`): a run that failed only because
/// of its canaries is the pass it is.
#[allow(clippy::too_many_arguments)]
pub fn run_guarded(
    sandbox: &Sandbox,
    workspace: &Path,
    scratch: &Path,
    prepare: impl FnOnce(&Path) -> io::Result<()>,
    script: &str,
    limits: &Limits,
    mut env: Vec<(String, String)>,
    guard: &Guard,
) -> Result<Ran, RunError> {
    let io_at = |what: &str| {
        let context = format!("{what} {}", scratch.display());
        move |source| RunError::Io { context, source }
    };
    crate::tree::copy_path(workspace, scratch).map_err(|source| RunError::Io {
        context: format!("copying the workspace to {}", scratch.display()),
        source,
    })?;
    prepare(scratch).map_err(io_at("laying files into"))?;
    lay_harness(scratch).map_err(io_at("laying the harness into"))?;
    let plan = if sandbox.config().tool_dir.is_some() {
        crate::trusted::plan(script)
    } else {
        crate::trusted::Plan::Shell(script.to_string())
    };
    let mut read_only: Vec<String> =
        guard.laid.iter().filter(|p| scratch.join(p).exists()).cloned().collect();
    read_only.push(HARNESS_PATH.to_string());
    let mut roles = std::collections::BTreeMap::new();
    let mut extra_tests: Vec<String> = Vec::new();
    let kind = plan.runner();
    let setup = guard.judge.as_ref().and_then(|_| judge_setup(&plan));
    let apart = guard.judge.as_ref().filter(|_| setup.is_some());
    if apart.is_none()
        && let crate::trusted::Plan::Runner {
            kind: crate::trusted::RunnerKind::Pytest | crate::trusted::RunnerKind::Unittest,
            args,
            ..
        } = &plan
        && crate::canary::options_allow_canaries(args)
    {
        let mut rng = Rng::new(&[b"run", &guard.seed]);
        let ws = crate::root::Root::open(scratch).map_err(io_at("opening"))?;
        plant_twins(guard, &ws, &|name| script.contains(name), &mut rng, &mut roles)
            .map_err(io_at("planting canaries in"))?;
        if guard.generic && plan.in_workspace() {
            let path = format!("{CANARY_DIR}/{}.py", rng.test_name());
            let text = crate::canary::generic_module(&mut rng, &mut roles);
            ws.write(&path, text.as_bytes()).map_err(io_at("planting canaries in"))?;
            read_only.push(path.clone());
            // pytest given no path collects the working folder, the canary
            // folder with it (naming it too would drop it: pytest keeps
            // the parent of overlapping arguments); given paths, only those.
            if !(plan.runner() == Some(crate::trusted::RunnerKind::Pytest)
                && crate::trusted::pytest_paths(args).is_empty())
            {
                extra_tests.push(path);
            }
        }
    }
    let node = kind == Some(crate::trusted::RunnerKind::NodeTest);
    if node && apart.is_none() && plan.in_workspace() {
        // Every Node run not judged apart carries the generic pair, run
        // before the real tests, and the twins of the hidden test files it
        // runs.
        let mut rng = Rng::new(&[b"run", &guard.seed]);
        let ws = crate::root::Root::open(scratch).map_err(io_at("opening"))?;
        plant_twins(guard, &ws, &|_| false, &mut rng, &mut roles)
            .map_err(io_at("planting canaries in"))?;
        let (pass, fail) = (rng.test_name(), rng.test_name());
        let path = format!("{}/{}.test.ts", crate::lang::node::CANARY_DIR, rng.test_name());
        let text = crate::lang::node::generic_module(&mut |n| rng.below(n), &pass, &fail);
        roles.insert(pass, crate::canary::Role::Generic { must_pass: true });
        roles.insert(fail, crate::canary::Role::Generic { must_pass: false });
        ws.write(&path, text.as_bytes()).map_err(io_at("planting canaries in"))?;
        read_only.push(path.clone());
        extra_tests.push(path);
    }
    if let crate::trusted::Plan::Runner {
        kind: crate::trusted::RunnerKind::GoTest,
        args,
        prelude: None,
    } = &plan
        && apart.is_none()
    {
        // Every package the run tests carries the generic pair; the
        // hidden test files it compiles carry their twins (only where
        // every test runs: `lang_go::collects` chose them at calibration).
        let rng = std::cell::RefCell::new(Rng::new(&[b"run", &guard.seed]));
        let ws = crate::root::Root::open(scratch).map_err(io_at("opening"))?;
        plant_twins(guard, &ws, &|_| false, &mut rng.borrow_mut(), &mut roles)
            .map_err(io_at("planting canaries in"))?;
        let planted = crate::lang::go::plant_canaries(
            scratch,
            args,
            &mut || rng.borrow_mut().test_name(),
            &mut |n| rng.borrow_mut().below(n),
        )
        .map_err(io_at("planting canaries in"))?;
        for p in planted {
            roles.insert(p.must_pass, crate::canary::Role::Generic { must_pass: true });
            roles.insert(p.must_fail, crate::canary::Role::Generic { must_pass: false });
            read_only.push(p.file.clone());
            extra_tests.push(p.file);
        }
    }
    let nonce = crate::trusted::nonce();
    let channel = plan.runner().is_some();
    env.retain(|(k, _)| k != "GATEHOUSE_NONCE" && k != RUN_VAR);
    if channel && node {
        // The Node runner takes it from a file and removes it: a process's
        // environment stays readable in /proc for its whole life.
        crate::root::Root::open(scratch)
            .and_then(|ws| ws.write(crate::lang::node::NONCE_FILE, nonce.as_bytes()))
            .map_err(io_at("writing the run's nonce into"))?;
    } else if channel {
        env.push(("GATEHOUSE_NONCE".into(), nonce.clone()));
    }
    if channel {
        let mut digests: Vec<String> = Vec::new();
        for p in &read_only {
            let root = scratch.join(p);
            for entry in walkdir::WalkDir::new(&root).follow_links(false) {
                let entry = entry.map_err(|e| RunError::Io {
                    context: format!("reading {}", root.display()),
                    source: io::Error::other(e),
                })?;
                if entry.file_type().is_file() {
                    let bytes =
                        fs::read(entry.path()).map_err(io_at("reading the laid files of"))?;
                    digests.push(crate::tree::sha256_hex(&bytes));
                }
            }
        }
        digests.sort();
        digests.dedup();
        let mut config = serde_json::json!({
            "grader_files": digests,
            "extra_tests": extra_tests,
            "noconftest": guard.noconftest,
        });
        if let Some(j) = apart {
            config["judge"] = true.into();
            config["workspace"] = "/workspace".into();
            config["laid"] =
                expand_laid(scratch, &j.laid).map_err(io_at("listing the laid files of"))?.into();
            config["call_secs"] = call_secs(limits.wall).into();
            if guard.go_cache.is_some() {
                // The runner exports what it builds (`lang::go::cache`).
                config["go_cache"] = true.into();
            }
        }
        env.push((RUN_VAR.into(), config.to_string()));
    }
    let mut limits = limits.clone();
    if let (Some(_), Some(setup)) = (apart, &setup) {
        limits.processes += setup.extra_processes;
    }
    // A Go run judged apart gets the judge's kept builds, for its uid alone.
    let go_cache = guard
        .go_cache
        .filter(|_| apart.is_some() && kind == Some(crate::trusted::RunnerKind::GoTest));
    let mut cache_laid = None;
    if let Some(scope) = &go_cache {
        cache_laid =
            scope.cache.lay(scope, scratch).map_err(io_at("laying the Go judge's builds into"))?;
    }
    let host = match (apart, setup) {
        (Some(j), Some(setup)) => Some(crate::sandbox::HostSpec {
            argv: setup.host_argv,
            env: Vec::new(),
            judge_only: j
                .judge_only
                .iter()
                .filter(|p| scratch.join(p).exists())
                .cloned()
                .chain(cache_laid)
                .collect(),
        }),
        _ => None,
    };
    let spec = RunSpec {
        script: plan.command(),
        workspace: scratch.to_path_buf(),
        env,
        limits: limits.clone(),
        channel,
        read_only,
        host,
    };
    let mut report = sandbox.run(&spec)?;
    if let Some(scope) = &go_cache {
        // What the judge built is kept only from a run on two uids.
        scope.cache.harvest(scope, scratch, report.apart);
    }
    let canaries = RunCanaries { roles, calibrating: guard.calibrating };
    report.stdout_tail = canaries.rewrite_output(&normalize_output(&report.stdout_tail));
    report.stderr_tail = canaries.rewrite_output(&normalize_output(&report.stderr_tail));
    let mut runner = channel.then(|| {
        crate::trusted::RunnerResult::parse(&report.channel, &nonce, report.channel_truncated)
    });
    report.channel = Vec::new();
    let stopped = report.timed_out
        || report.limit_hit.is_some()
        || matches!(report.exit, crate::sandbox::Exit::Signal(_));
    let mut verdict = Verdict::default();
    if let Some(r) = &mut runner {
        verdict = canaries.resolve(r, stopped);
        // The run failed only because its twins failed, as they must (not
        // because its test process crashed, in a twin or elsewhere: the
        // tests it never reported failed).
        let only_canaries = !canaries.is_empty()
            && r.end == Some(1)
            && report.exit == crate::sandbox::Exit::Code(1)
            && r.collect_errors.is_empty()
            && r.crash.is_none()
            && !r.cases.is_empty()
            && r.cases.iter().all(|(_, c)| {
                matches!(
                    c.status,
                    crate::evidence::TestStatus::Passed | crate::evidence::TestStatus::Skipped
                )
            });
        if only_canaries {
            r.end = Some(0);
            report.exit = crate::sandbox::Exit::Code(0);
        }
    }
    Ok(Ran { report, plan, runner, canaries, verdict, apart: apart.is_some() })
}

/// How a run of `plan` is judged apart (`lang`), when its runner's language
/// judges apart and nothing runs before the runner in the command (a
/// prelude would run under the judge's uid whatever it starts).
pub fn judge_setup(plan: &crate::trusted::Plan) -> Option<crate::lang::JudgeSetup> {
    use crate::trusted::RunnerKind;
    let crate::trusted::Plan::Runner { kind, prelude: None, args } = plan else { return None };
    match kind {
        RunnerKind::Pytest | RunnerKind::Unittest | RunnerKind::Script => {
            Some(crate::lang::python::judge())
        }
        RunnerKind::NodeTest => crate::lang::node::judge(),
        RunnerKind::GoTest => crate::lang::go::judge(args),
    }
}

/// Whether a run of `plan` can be judged apart (`judge_setup`).
pub fn judged_apart(plan: &crate::trusted::Plan) -> bool {
    judge_setup(plan).is_some()
}

/// How long the judge waits for the host to say anything during one call
/// before it ends the host and fails the call: a third of the run's wall
/// limit, between 5 and 60 seconds, so a hang fails its test and leaves
/// time for the rest.
pub fn call_secs(wall: std::time::Duration) -> f64 {
    (wall.as_secs_f64() / 3.0).clamp(5.0, 60.0)
}

/// The laid paths of a run as the judge lists them: every file beneath
/// each (relative, `/`-separated), and the folders themselves.
fn expand_laid(scratch: &Path, laid: &[String]) -> io::Result<Vec<String>> {
    let mut out = Vec::new();
    for p in laid {
        let root = scratch.join(p);
        if !root.exists() {
            continue;
        }
        for entry in walkdir::WalkDir::new(&root).follow_links(false) {
            let entry = entry.map_err(io::Error::other)?;
            if let Ok(rel) = entry.path().strip_prefix(scratch) {
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

impl Ran {
    /// How the process that ran the tests crashed, in one line for the
    /// reviewer (`trusted::Ending::summary`); None when it did not.
    pub fn crash(&self) -> Option<String> {
        let (r, kind) = (self.runner.as_ref()?, self.plan.runner()?);
        crate::trusted::ending(r, kind, &self.report).summary().or_else(|| r.host_crash())
    }
}

/// Where the harness is laid in every run.
pub const HARNESS_PATH: &str = ".gatehouse/gatehouse_harness.py";
/// Where the generic canary module is planted (not a dot folder: pytest
/// collects it when a run names no path).
pub const CANARY_DIR: &str = "gatehouse_canary";

/// Lays the harness at `.gatehouse/gatehouse_harness.py`, replacing anything
/// a submission put there.
fn lay_harness(dir: &Path) -> io::Result<()> {
    let gatehouse = dir.join(".gatehouse");
    if fs::symlink_metadata(&gatehouse).is_ok_and(|m| !m.is_dir()) {
        fs::remove_file(&gatehouse)?;
    }
    fs::create_dir_all(&gatehouse)?;
    let path = gatehouse.join("gatehouse_harness.py");
    if fs::symlink_metadata(&path).is_ok() {
        fs::remove_file(&path)?;
    }
    fs::write(path, crate::trusted::HARNESS)
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
}

/// Reads pytest-style JUnit XML.
pub fn read_junit(path: &Path) -> Result<Vec<TestOutcome>, String> {
    let meta = fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let file = fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let suites = junit_parser::from_reader(BufReader::new(file))
        .map_err(|e| format!("{}: not JUnit XML: {e}", path.display()))?;
    let mut out = Vec::new();
    for suite in &suites.suites {
        for case in &suite.cases {
            let s = &case.status;
            let (status, message) = if s.is_failure() {
                (TestStatus::Failed, Some(s.failure_as_ref().message.clone()))
            } else if s.is_error() {
                (TestStatus::Error, Some(s.error_as_ref().message.clone()))
            } else if s.is_skipped() {
                (TestStatus::Skipped, None)
            } else {
                (TestStatus::Passed, None)
            };
            let message =
                message.map(|m| m.lines().next().unwrap_or_default().chars().take(200).collect());
            // A submission cannot make the grader keep more than this.
            if out.len() < crate::trusted::MAX_CASES {
                let clip = |s: &str| s.chars().take(300).collect::<String>();
                out.push(TestOutcome {
                    classname: clip(case.classname.as_deref().unwrap_or_default()),
                    name: clip(&case.original_name),
                    status,
                    message,
                });
            }
        }
    }
    Ok(out)
}

/// Parses a detector script's stdout: one JSON object per non-empty line.
pub fn parse_script_output(stdout: &str) -> Result<Vec<ScriptFinding>, String> {
    let mut out = Vec::new();
    for (n, line) in stdout.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let f: ScriptFinding = serde_json::from_str(line).map_err(|e| {
            format!(
                "line {}: `{}` is not a finding object: {e}",
                n + 1,
                line.chars().take(120).collect::<String>()
            )
        })?;
        // Only the platform witnesses; a script can at most replay.
        if f.provenance == Some(crate::evidence::Provenance::Witnessed) {
            return Err(format!(
                "line {}: a detector script cannot claim `witnessed` provenance",
                n + 1
            ));
        }
        out.push(f);
    }
    Ok(out)
}

/// Masks what changes from one run to the next in a command's output
/// (durations, object addresses), so receipts are reproducible.
pub fn normalize_output(text: &str) -> String {
    static PATTERNS: std::sync::OnceLock<Vec<(Regex, &'static str)>> = std::sync::OnceLock::new();
    let patterns = PATTERNS.get_or_init(|| {
        vec![
            (
                Regex::new(r"\bin \d+(?:\.\d+)?s\b(?: \(\d+:\d{2}:\d{2}\))?")
                    .expect("static regex"),
                "in <t>s",
            ),
            (
                Regex::new(r"\bRan (\d+) tests? in \d+\.\d+s").expect("static regex"),
                "Ran $1 tests in <t>s",
            ),
            (Regex::new(r"\b0x[0-9a-fA-F]{6,}\b").expect("static regex"), "0x<addr>"),
            // Go: `--- PASS: TestX (0.01s)`, `ok  \tticket\t0.010s`.
            (
                Regex::new(r"(--- (?:PASS|FAIL|SKIP): \S+) \(\d+\.\d+s\)").expect("static regex"),
                "$1 (<t>s)",
            ),
            (
                Regex::new(r"(?m)^(ok|FAIL)([ \t]+\S+[ \t]+)\d+\.\d+s\b").expect("static regex"),
                "$1$2<t>s",
            ),
            // Go's standard logger's date and time (`log.LstdFlags`).
            (
                Regex::new(r"\b\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?\b")
                    .expect("static regex"),
                "<date> <time>",
            ),
            // node:test's TAP: `duration_ms: 1.23`, `# duration_ms 45.6`.
            (
                Regex::new(r"\bduration_ms:? \d+(?:\.\d+)?").expect("static regex"),
                "duration_ms <t>",
            ),
        ]
    });
    let mut s = text.to_string();
    for (re, with) in patterns {
        s = re.replace_all(&s, *with).into_owned();
    }
    s
}

/// Environment variables a step sees beyond the sandbox's base set.
pub fn step_env(env: &BTreeMap<String, String>) -> Vec<(String, String)> {
    env.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_durations_and_addresses() {
        let got = normalize_output(
            "==== 1 failed, 2 passed in 0.53s ====\nRan 4 tests in 0.002s\n<object at 0x7f3a2b1c9d00>",
        );
        assert_eq!(
            got,
            "==== 1 failed, 2 passed in <t>s ====\nRan 4 tests in <t>s\n<object at 0x<addr>>"
        );
        let got = normalize_output(
            "--- PASS: TestA (0.01s)\n    --- FAIL: TestB/x (1.20s)\nok  \tticket\t0.010s\nFAIL\tticket\t2.5s\nok 1 - a\n  duration_ms: 1.23\n# duration_ms 45.6\n--- PASS: kept (soon)\n2026/12/07 08:58:39 greeted",
        );
        assert_eq!(
            got,
            "--- PASS: TestA (<t>s)\n    --- FAIL: TestB/x (<t>s)\nok  \tticket\t<t>s\nFAIL\tticket\t<t>s\nok 1 - a\n  duration_ms <t>\n# duration_ms <t>\n--- PASS: kept (soon)\n<date> <time> greeted"
        );
    }

    #[test]
    fn junit_cases_and_their_text_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.xml");
        let long = "n".repeat(1000);
        let mut xml = String::from("<testsuites><testsuite name=\"s\">");
        for i in 0..crate::trusted::MAX_CASES + 100 {
            xml.push_str(&format!("<testcase classname=\"c{long}\" name=\"t{i}\"><failure message=\"{long}\"/></testcase>"));
        }
        xml.push_str("</testsuite></testsuites>");
        fs::write(&path, xml).unwrap();
        let cases = read_junit(&path).unwrap();
        assert_eq!(cases.len(), crate::trusted::MAX_CASES);
        assert!(cases.iter().all(|c| c.classname.chars().count() == 300
            && c.message.as_ref().is_some_and(|m| m.chars().count() == 200)));
        // A handful stays a handful.
        fs::write(&path, "<testsuites><testsuite name=\"s\"><testcase classname=\"c\" name=\"t\"/></testsuite></testsuites>").unwrap();
        assert_eq!(read_junit(&path).unwrap().len(), 1);
    }

    #[test]
    fn script_output_must_be_objects() {
        assert_eq!(
            parse_script_output("{\"id\": \"a\", \"evidence\": \"x\"}\n\n").unwrap(),
            vec![ScriptFinding { id: "a".into(), evidence: "x".into(), provenance: None }]
        );
        assert!(parse_script_output("found a problem\n").unwrap_err().contains("line 1"));
        let claimed = parse_script_output("{\"id\": \"a\", \"provenance\": \"claimed\"}").unwrap();
        assert_eq!(claimed[0].provenance, Some(crate::evidence::Provenance::Claimed));
        assert!(parse_script_output("{\"id\": \"a\", \"provenance\": \"witnessed\"}").is_err());
    }
}
