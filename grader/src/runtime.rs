//! What the trusted runner saw while the tests ran, judged: its audit
//! hook's events, the framework callables it found changed, where skips and
//! xfails were raised, and "only a pass is a pass".
//!
//! A run of the packet's own tests or scripts ([`Whose::Packet`]) has no
//! reason to meet the candidate's code walking the collector, tracing,
//! swapping a function's code, opening the grader's files, changing the test
//! framework in memory or skipping tests: those are `evidence-tampering`.
//! Reaching frames, building code objects, `ctypes` and the like are only
//! shown to the reviewer, as is everything in a run of tests the candidate
//! wrote ([`Whose::Candidate`]), where the code under test is the grader's
//! and the tests are theirs to write.

use std::collections::BTreeSet;

use crate::evidence::TestStatus;
use crate::trusted::RunnerResult;

/// Whose tests a run runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whose {
    /// The packet's hidden tests or scripts, the candidate's code under test.
    Packet,
    /// Tests the candidate wrote.
    Candidate,
}

/// Audit kinds that are tampering when the candidate's own line did them
/// during a run of the packet's tests.
const TAMPERING_KINDS: &[&str] = &["gc", "trace", "code-swap", "defaults-swap", "open"];

/// The judgement of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Judged {
    /// Signs of tampering.
    pub signs: Vec<String>,
    /// What the reviewer is shown, without a verdict.
    pub notes: Vec<String>,
}

fn during(test: &str) -> String {
    if test.is_empty() {
        "while the test modules were imported".to_string()
    } else {
        format!("while {test} ran")
    }
}

/// Judges the audit events and framework changes of `r`. `baseline` holds
/// the framework changes seen on the sample's own run, which are the
/// packet's or the framework's doing.
pub fn judge(r: &RunnerResult, whose: Whose, baseline: &BTreeSet<String>) -> Judged {
    let mut out = Judged::default();
    for e in &r.audit {
        let line = format!(
            "{}:{}: {}{} ({})",
            e.file,
            e.line,
            e.detail,
            if e.via == "direct" { "" } else { ", through a library call" },
            during(&e.test)
        );
        if whose == Whose::Packet && e.via == "direct" && TAMPERING_KINDS.contains(&e.kind.as_str())
        {
            out.signs.push(format!("runtime audit: the candidate's code {line}"));
        } else {
            out.notes.push(format!("runtime audit: {line}"));
        }
    }
    for (file, hooks) in &r.plugins {
        out.notes.push(format!(
            "the candidate's pytest plugin `{file}` loaded{}",
            if hooks.is_empty() {
                String::new()
            } else {
                format!(" (it implements {})", hooks.join(", "))
            }
        ));
    }
    for c in &r.integrity {
        if baseline.contains(&c.what) {
            continue;
        }
        let text = if c.test == "(runner)" {
            // A cross-check of the runner's own (the Node runner's child
            // process), not a framework callable.
            format!("the runner's cross-check: {} {}", c.what, c.change)
        } else {
            format!(
                "the test framework was changed in memory: `{}` was {} ({}; the runner put it back)",
                c.what,
                c.change,
                if c.test.starts_with('(') {
                    format!("found at {}", &c.test[1..c.test.len() - 1])
                } else {
                    format!("found after {}", c.test)
                }
            )
        };
        match whose {
            Whose::Packet => out.signs.push(text),
            Whose::Candidate => out.notes.push(text),
        }
    }
    // A skip or xfail the candidate's code raised in a test that is not
    // theirs: a packet run's, or one in a file the grader laid (wherever a
    // packet command copied it).
    for (id, m) in r.marks.iter().chain(r.collect_skip_marks.iter()) {
        let packets_test = whose == Whose::Packet || m.test_by.as_deref() == Some("grader");
        if !packets_test || m.raised_by.as_deref() != Some("candidate") {
            continue;
        }
        let what = match m.outcome.as_deref() {
            Some("xfailed" | "xpassed") => "an expected failure (xfail)",
            _ => "a skip",
        };
        out.signs.push(format!(
            "{id} was turned into {what} by the candidate's code at {}: a hidden test is not the candidate's to skip",
            m.raised_in.as_deref().unwrap_or("?")
        ));
    }
    out
}

/// Only a pass is a pass: a test the sample passes counts as passed only
/// with status passed. A skip, an xfail or an xpass of such a test becomes
/// a failure saying why.
pub fn only_a_pass(r: &mut RunnerResult, passed_on_sample: &BTreeSet<String>) {
    if passed_on_sample.is_empty() {
        return;
    }
    for (id, outcome) in &mut r.cases {
        if !passed_on_sample.contains(id) {
            continue;
        }
        let mark = r.marks.get(id).and_then(|m| m.outcome.as_deref());
        let why = match (outcome.status, mark) {
            (TestStatus::Passed, None) => continue,
            (TestStatus::Passed, Some(_)) => "passed as an unexpected success (xpass)",
            (TestStatus::Skipped, Some("xfailed")) => "reported as an expected failure (xfail)",
            (TestStatus::Skipped, _) => "skipped",
            _ => continue,
        };
        outcome.status = TestStatus::Failed;
        outcome.message = Some(format!(
            "{why}: only a pass counts, and the packet's sample passes this test{}",
            outcome.message.as_deref().map(|m| format!(" ({m})")).unwrap_or_default()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::TestOutcome;
    use crate::trusted::{AuditEvent, CaseMark, IntegrityChange};

    fn event(kind: &str, via: &str) -> AuditEvent {
        AuditEvent {
            kind: kind.into(),
            detail: format!("does {kind}"),
            file: "bucket.py".into(),
            line: 7,
            via: via.into(),
            test: "t.py::test_a".into(),
        }
    }

    fn check(r: &RunnerResult, whose: Whose, signs: &[&str], notes: usize) {
        let j = judge(r, whose, &["_pytest.config.Config._getini_unknown_type".into()].into());
        assert_eq!(j.signs.len(), signs.len(), "{:#?}", j);
        for (got, want) in j.signs.iter().zip(signs) {
            assert!(got.contains(want), "{got:?} lacks {want:?}");
        }
        assert_eq!(j.notes.len(), notes, "{:#?}", j);
    }

    #[test]
    fn runtime_events_fire_in_packet_runs_and_are_notes_elsewhere() {
        let mut r = RunnerResult {
            audit: vec![
                event("gc", "direct"),
                event("trace", "library"),
                event("frames", "direct"),
                event("code-swap", "direct"),
            ],
            ..Default::default()
        };
        r.integrity = vec![
            IntegrityChange {
                what: "_pytest.reports.TestReport.from_item_and_call".into(),
                change: "replaced".into(),
                test: "t.py::test_a".into(),
            },
            IntegrityChange {
                what: "_pytest.config.Config._getini_unknown_type".into(),
                change: "replaced".into(),
                test: "(configuration)".into(),
            },
        ];
        r.marks.insert(
            "t.py::test_b".into(),
            CaseMark {
                outcome: Some("xfailed".into()),
                raised_in: Some("bucket.py:9".into()),
                raised_by: Some("candidate".into()),
                test_by: Some("candidate".into()),
            },
        );
        r.marks.insert(
            "t.py::test_c".into(),
            CaseMark {
                outcome: None,
                raised_in: Some("t.py:30".into()),
                raised_by: Some("grader".into()),
                test_by: Some("grader".into()),
            },
        );
        check(
            &r,
            Whose::Packet,
            &[
                "bucket.py:7: does gc",
                "bucket.py:7: does code-swap",
                "`_pytest.reports.TestReport.from_item_and_call` was replaced",
                "t.py::test_b was turned into an expected failure (xfail) by the candidate's code at bucket.py:9",
            ],
            2,
        );
        check(&r, Whose::Candidate, &[], 5);
        // A test in a file the grader laid, copied by a packet command
        // into a run the grader cannot call the packet's: the candidate's
        // skip is a sign there too; their own test's skip is not.
        let mut copied = RunnerResult::default();
        for (id, test_by) in [("h.py::test_h", "grader"), ("mine.py::test_m", "candidate")] {
            copied.collect_skip_marks.insert(
                id.into(),
                CaseMark {
                    outcome: None,
                    raised_in: Some("lib.py:2".into()),
                    raised_by: Some("candidate".into()),
                    test_by: Some(test_by.into()),
                },
            );
        }
        check(
            &copied,
            Whose::Candidate,
            &["h.py::test_h was turned into a skip by the candidate's code at lib.py:2"],
            0,
        );
        // The Node runner's own cross-checks read as such.
        let mut node = RunnerResult::default();
        node.integrity.push(IntegrityChange {
            what: "the test process".into(),
            change: "exited with status 0 before its tests finished".into(),
            test: "(runner)".into(),
        });
        check(
            &node,
            Whose::Packet,
            &[
                "the runner's cross-check: the test process exited with status 0 before its tests finished",
            ],
            0,
        );
        // An honest run: nothing at all.
        check(&RunnerResult::default(), Whose::Packet, &[], 0);
    }

    #[test]
    fn only_a_pass_counts_for_tests_the_sample_passes() {
        let case = |id: &str, status| {
            (
                id.to_string(),
                TestOutcome { classname: "t".into(), name: id[6..].into(), status, message: None },
            )
        };
        let mut r = RunnerResult {
            cases: vec![
                case("t.py::test_a", TestStatus::Skipped),
                case("t.py::test_b", TestStatus::Skipped),
                case("t.py::test_c", TestStatus::Passed),
                case("t.py::test_d", TestStatus::Passed),
                case("t.py::test_e", TestStatus::Skipped),
            ],
            ..Default::default()
        };
        r.marks.insert(
            "t.py::test_b".into(),
            CaseMark { outcome: Some("xfailed".into()), ..Default::default() },
        );
        r.marks.insert(
            "t.py::test_c".into(),
            CaseMark { outcome: Some("xpassed".into()), ..Default::default() },
        );
        let passed: BTreeSet<String> =
            ["t.py::test_a", "t.py::test_b", "t.py::test_c", "t.py::test_d"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        only_a_pass(&mut r, &passed);
        let got: Vec<(TestStatus, String)> = r
            .cases
            .iter()
            .map(|(_, o)| {
                (
                    o.status,
                    o.message
                        .clone()
                        .unwrap_or_default()
                        .split(':')
                        .next()
                        .unwrap_or("")
                        .to_string(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (TestStatus::Failed, "skipped".into()),
                (TestStatus::Failed, "reported as an expected failure (xfail)".into()),
                (TestStatus::Failed, "passed as an unexpected success (xpass)".into()),
                (TestStatus::Passed, String::new()),
                // Skipped on the sample too (an allowed importorskip): left alone.
                (TestStatus::Skipped, String::new()),
            ]
        );
    }
}
