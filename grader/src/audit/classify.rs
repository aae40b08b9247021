//! Classifying one applied mutant from its hidden-test runs. Pure.

use serde::{Deserialize, Serialize};

use crate::evidence::{TestOutcome, TestStatus};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Killed,
    Survived,
    /// A survivor the packet explains (`mutants/EQUIVALENT.md`): an
    /// equivalent mutant, or a change the brief leaves open.
    Explained,
    Crashed,
    Invalid,
}

impl Outcome {
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Killed => "killed",
            Outcome::Survived => "survived",
            Outcome::Explained => "explained",
            Outcome::Crashed => "crashed",
            Outcome::Invalid => "invalid",
        }
    }
}

/// What one hidden-test step reported for a mutant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepResult {
    pub step: String,
    /// The step's process exited 0.
    pub exit_ok: bool,
    /// The run timed out or hit a limit: how the sandbox describes it.
    pub limit: Option<String>,
    /// Test modules that failed to import (id, message).
    pub collect_errors: Vec<(String, String)>,
    /// Every hidden test, expected ones the run never reported as errors.
    pub tests: Vec<TestOutcome>,
}

fn id(step: &str, t: &TestOutcome) -> String {
    format!("{step}: {}::{}", t.classname, t.name)
}

/// The outcome, its reason and the tests that killed the mutant.
pub fn classify(runs: &[StepResult]) -> (Outcome, String, Vec<String>) {
    // A step that broke off after a test failed (a Go test binary ends at
    // the first test that panics, and the runner reports the package as
    // broken) noticed the mutant: that is a kill, by the failed tests, not
    // a file that fails to import.
    if let Some((r, (module, msg))) = runs
        .iter()
        .filter(|r| !r.tests.iter().any(|t| t.status == TestStatus::Failed))
        .find_map(|r| r.collect_errors.first().map(|e| (r, e)))
    {
        return (
            Outcome::Crashed,
            format!(
                "the mutated file fails to import: step {} could not collect {module} ({msg})",
                r.step
            ),
            Vec::new(),
        );
    }
    let all: Vec<(&str, &TestOutcome)> =
        runs.iter().flat_map(|r| r.tests.iter().map(move |t| (r.step.as_str(), t))).collect();
    let total = all.iter().filter(|(_, t)| t.status != TestStatus::Skipped).count();
    let failed: Vec<String> =
        all.iter().filter(|(_, t)| t.status == TestStatus::Failed).map(|(s, t)| id(s, t)).collect();
    let errored: Vec<String> =
        all.iter().filter(|(_, t)| t.status == TestStatus::Error).map(|(s, t)| id(s, t)).collect();
    if !failed.is_empty() {
        let first = all
            .iter()
            .find(|(_, t)| t.status == TestStatus::Failed)
            .and_then(|(_, t)| t.message.clone())
            .unwrap_or_default();
        let why = if first.is_empty() { String::new() } else { format!(": {first}") };
        return (
            Outcome::Killed,
            format!("{} of {total} hidden tests fail{why}", failed.len()),
            failed,
        );
    }
    if let Some(r) = runs.iter().find(|r| r.limit.is_some()) {
        return (
            Outcome::Killed,
            format!(
                "step {} {} before the hidden tests passed",
                r.step,
                r.limit.clone().unwrap_or_default()
            ),
            errored,
        );
    }
    if total > 0 && errored.len() == total {
        let first = all.iter().find_map(|(_, t)| t.message.clone()).unwrap_or_default();
        return (
            Outcome::Crashed,
            format!("every hidden test ({total}) errors rather than fails: {first}"),
            Vec::new(),
        );
    }
    if !errored.is_empty() {
        return (
            Outcome::Killed,
            format!("{} of {total} hidden tests error", errored.len()),
            errored,
        );
    }
    if let Some(r) = runs.iter().find(|r| !r.exit_ok) {
        return (
            Outcome::Killed,
            format!("step {} exits non-zero although no hidden test fails", r.step),
            Vec::new(),
        );
    }
    (
        Outcome::Survived,
        format!(
            "all {total} hidden tests pass: a hole in the hidden tests, or an equivalent mutant"
        ),
        Vec::new(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use TestStatus::*;

    fn t(name: &str, status: TestStatus) -> TestOutcome {
        TestOutcome {
            classname: "test_hidden".into(),
            name: name.into(),
            status,
            message: (status != Passed).then(|| format!("{name} broke")),
        }
    }

    fn step(tests: Vec<TestOutcome>) -> StepResult {
        let exit_ok = tests.iter().all(|t| matches!(t.status, Passed | Skipped));
        StepResult {
            step: "hidden".into(),
            exit_ok,
            limit: None,
            collect_errors: Vec::new(),
            tests,
        }
    }

    #[test]
    fn each_outcome_fires_and_stays_quiet() {
        let check = |runs: Vec<StepResult>, outcome: Outcome, reason: &str, killed_by: &[&str]| {
            let (o, why, by) = classify(&runs);
            assert_eq!(o, outcome, "{runs:?}: {why}");
            assert!(why.contains(reason), "{why}");
            assert_eq!(by, killed_by.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        };
        // Survived: every test passes (skips aside).
        check(
            vec![step(vec![t("a", Passed), t("b", Skipped)])],
            Outcome::Survived,
            "all 1 hidden tests pass",
            &[],
        );
        // Killed: one failure is enough; errors beside it do not make it a crash.
        check(
            vec![step(vec![t("a", Passed), t("b", Failed)])],
            Outcome::Killed,
            "1 of 2 hidden tests fail: b broke",
            &["hidden: test_hidden::b"],
        );
        check(
            vec![step(vec![t("a", Error), t("b", Failed)])],
            Outcome::Killed,
            "1 of 2",
            &["hidden: test_hidden::b"],
        );
        // Killed over two steps: the second step's failure counts.
        let mut other = step(vec![t("c", Failed)]);
        other.step = "retry".into();
        check(
            vec![step(vec![t("a", Passed)]), other],
            Outcome::Killed,
            "1 of 2",
            &["retry: test_hidden::c"],
        );
        // Some tests error, none fail, not all: killed by the errors.
        check(
            vec![step(vec![t("a", Passed), t("b", Error)])],
            Outcome::Killed,
            "1 of 2 hidden tests error",
            &["hidden: test_hidden::b"],
        );
        // Crashed: every test errors.
        check(
            vec![step(vec![t("a", Error), t("b", Error)])],
            Outcome::Crashed,
            "every hidden test (2) errors",
            &[],
        );
        // Crashed: the mutated file does not import.
        let mut broken = step(vec![t("a", Error)]);
        broken
            .collect_errors
            .push(("test_hidden.py".into(), "NameError: name 'x' is not defined".into()));
        check(
            vec![broken],
            Outcome::Crashed,
            "fails to import: step hidden could not collect test_hidden.py (NameError",
            &[],
        );
        // A test that fails before its step breaks off (a Go test that
        // panics ends the binary) kills the mutant; the break alone does
        // not (above: crashed).
        let mut panicked = step(vec![t("a", Failed), t("b", Error)]);
        panicked.collect_errors.push(("ticket".into(), "a test panicked".into()));
        check(
            vec![panicked],
            Outcome::Killed,
            "1 of 2 hidden tests fail: a broke",
            &["hidden: test_hidden::a"],
        );
        // A run that hits its limit is killed, naming the limit.
        let mut slow = step(vec![t("a", Passed), t("b", Error)]);
        slow.limit = Some("timed out after 30 s".into());
        check(
            vec![slow],
            Outcome::Killed,
            "step hidden timed out after 30 s",
            &["hidden: test_hidden::b"],
        );
        // A failing command with green tests still notices the mutant.
        let mut odd = step(vec![t("a", Passed)]);
        odd.exit_ok = false;
        check(vec![odd], Outcome::Killed, "exits non-zero", &[]);
    }
}
