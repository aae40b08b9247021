//! Scoring glue: the one scoring of grading and rescoring, and the reviewer levels it honours.

use std::collections::BTreeMap;

use crate::evidence::{MutationOutcome, TestOutcome};
use crate::manifest::Mode;
use crate::score::{Finding, HumanScore, Measures, Scoring, score};

use super::*;

/// The reviewer levels a scoring honours: those of human and auto-override
/// criteria, and a reviewer's override of the platform-wide
/// `evidence-tampering` veto.
pub fn reviewer_levels(
    m: &crate::manifest::Manifest,
    human: &BTreeMap<String, HumanScore>,
) -> BTreeMap<String, HumanScore> {
    human
        .iter()
        .filter(|(id, _)| {
            id.as_str() == crate::tamper::ID
                || m.criterion(id).is_some_and(|c| c.mode != Mode::Auto)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Scores a stored scorecard again with reviewer levels `human`, without
/// running anything: the findings, the step tests and the mutation results
/// are read back from the scorecard and its receipt. The receipt's scoring
/// fields and digest are replaced; its runs, findings and timings are kept.
/// Levels for auto criteria are ignored, as in a grading.
pub fn rescore(
    m: &crate::manifest::Manifest,
    card: &Scorecard,
    human: &BTreeMap<String, HumanScore>,
) -> Scorecard {
    let tests_of = |step: &str| {
        let id = format!("step:{step}");
        card.receipt.runs.iter().find(|r| r.id == id).and_then(|r| r.tests.as_deref())
    };
    let held = !card.unevaluated.is_empty() || !card.skipped.is_empty();
    let scoring =
        scoring(m, &card.findings, &tests_of, card.receipt.mutation.as_ref(), human, held);
    let mut out = card.clone();
    out.scoring = scoring.clone();
    out.receipt.scoring = scoring;
    // A reviewer's score changes the digest: the receipt keeps the one the
    // grader gave it (the first rescoring records it; later ones keep it).
    if !human.is_empty() && out.receipt.graded_digest.is_none() {
        out.receipt.graded_digest = Some(card.receipt.digest.clone());
    }
    out.receipt.digest = String::new();
    out.receipt.digest = receipt_digest(&out.receipt);
    out
}

/// The one scoring of grading and rescoring: the rubric over `findings`,
/// the steps' tests (skipped tests not counted) and the mutation results,
/// with reviewer levels for the criteria a reviewer may set. `held` (a
/// failure unevaluated, a run skipped) keeps the decision pending.
pub(super) fn scoring<'a>(
    m: &crate::manifest::Manifest,
    findings: &[Finding],
    tests_of: &dyn Fn(&str) -> Option<&'a [TestOutcome]>,
    mutation: Option<&MutationOutcome>,
    human: &BTreeMap<String, HumanScore>,
    held: bool,
) -> Scoring {
    let counts = |step: &str| {
        tests_of(step).map(|t| {
            let counted: Vec<&TestOutcome> =
                t.iter().filter(|t| t.status != crate::evidence::TestStatus::Skipped).collect();
            (
                counted.iter().filter(|t| t.status == crate::evidence::TestStatus::Passed).count(),
                counted.len(),
            )
        })
    };
    let measures =
        Measures { tests: &counts, mutation: mutation.map(|mo| (mo.killed(), mo.mutants.len())) };
    let mut scoring = score(m, findings, &measures, &reviewer_levels(m, human));
    if held {
        scoring.decision = crate::score::PENDING.to_string();
    }
    scoring
}

#[cfg(test)]
mod rescore_tests {
    use super::*;
    use crate::env::EnvReport;
    use crate::evidence::Provenance;
    use crate::evidence::TestStatus;
    use crate::ingest::Normalised;
    use crate::manifest::Manifest;
    use crate::sandbox::Features;
    use crate::score::Status;

    const RUBRIC: &str = include_str!("../../tests/fixtures/rubrics/rescore.toml");

    /// A stored scorecard as a grading would leave it: the hidden step
    /// passed `passed` of 4 tests, `findings` were detected, no human level.
    fn card(m: &Manifest, passed: usize, findings: &[&str]) -> Scorecard {
        let tests: Vec<TestOutcome> = (0..4)
            .map(|i| TestOutcome {
                classname: "t".into(),
                name: format!("test_{i}"),
                status: if i < passed { TestStatus::Passed } else { TestStatus::Failed },
                message: None,
            })
            .collect();
        let findings: Vec<Finding> = findings
            .iter()
            .map(|id| Finding {
                id: id.to_string(),
                title: String::new(),
                provenance: Provenance::Replayed,
                evidence: vec![],
            })
            .collect();
        let packet = PacketRef { slug: "demo".into(), version: "1".into(), digest: "d".into() };
        let environment = EnvReport { tools: vec![], mismatches: vec![] };
        let run = RunEntry {
            id: "step:hidden".into(),
            command: "true".into(),
            limits: LimitsView::from(&Limits::default()),
            exit: crate::sandbox::Exit::Code(0),
            timed_out: false,
            limit_hit: None,
            leftovers: vec![],
            stdout_tail: String::new(),
            stderr_tail: String::new(),
            tests: Some(tests),
            crash: None,
        };
        let receipt = Receipt {
            receipt_version: 1,
            packet: packet.clone(),
            submission: SubmissionRef {
                archive_sha256: "a".into(),
                workspace_digest: "w".into(),
                files: vec![],
                platform_files: vec![],
                normalised: Normalised::default(),
            },
            environment: environment.clone(),
            sandbox: Features {
                pid_namespace: true,
                net_namespace: true,
                mount_namespace: true,
                uid_drop: true,
                cgroup_memory: true,
                cgroup_pids: true,
                cgroup_cpu: true,
                rlimits: true,
                landlock_abi: 7,
                fallbacks: vec![],
            },
            runs: vec![run],
            frozen: vec![],
            mutation: None,
            findings: findings.clone(),
            unevaluated: vec![],
            skipped: vec![],
            not_witnessed: vec![],
            untrusted_evidence: vec![],
            witness_sha256: None,
            transcript: vec![],
            hidden_text: vec![],
            hidden_text_unlisted: 0,
            runtime_notes: vec![],
            canaries: BTreeMap::new(),
            judged: BTreeMap::new(),
            graded_digest: None,
            scoring: Scoring {
                criteria: vec![],
                score: None,
                max_score: 0,
                decision: String::new(),
                gates: vec![],
                caps: vec![],
                pending: vec![],
            },
            digest: String::new(),
            timings: Timings { total_ms: 1.0, budget_secs: 0, runs: vec![] },
        };
        let base = Scorecard {
            packet,
            findings,
            unevaluated: vec![],
            skipped: vec![],
            not_witnessed: vec![],
            scoring: Scoring {
                criteria: vec![],
                score: None,
                max_score: 0,
                decision: String::new(),
                gates: vec![],
                caps: vec![],
                pending: vec![],
            },
            environment,
            receipt,
        };
        // The first scoring, without human levels, is what grading stores.
        rescore(m, &base, &BTreeMap::new())
    }

    fn human(levels: &[(&str, u32)]) -> BTreeMap<String, HumanScore> {
        levels
            .iter()
            .map(|(id, l)| {
                (
                    id.to_string(),
                    HumanScore { level: *l, reason: "because".into(), by: "rev".into() },
                )
            })
            .collect()
    }

    #[test]
    fn derived_wall_limits_are_ten_times_the_sample_with_a_floor() {
        let c = Calibration {
            run_ms: BTreeMap::from([
                ("step:a".into(), 300),
                ("step:b".into(), 3_345),
                ("mutant:m1".into(), 800),
                ("mutant:m2".into(), 3_600),
            ]),
            ..Calibration::default()
        };
        let secs = |id: &str| c.derived_wall(id).map(|(d, ms)| (d.as_secs(), ms));
        assert_eq!(secs("step:a"), Some((30, 300)));
        assert_eq!(secs("step:b"), Some((34, 3_345)));
        // Every mutant run takes the slowest mutant run of the sample.
        assert_eq!(secs("mutant:m1"), Some((36, 3_600)));
        assert_eq!(secs("mutant:new"), Some((36, 3_600)));
        assert_eq!(secs("script:1"), None);
        // What `packet check` records reads back (older records lack times).
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Calibration>(&json).unwrap(), c);
        let old: Calibration =
            serde_json::from_str(r#"{"expected":{"hidden":["t.py::test_a"]},"sample_ms":5}"#)
                .unwrap();
        assert!(old.run_ms.is_empty() && old.digest.is_empty());
    }

    #[test]
    fn human_levels_settle_a_pending_decision_from_stored_tests() {
        let m = Manifest::parse("packet.toml", RUBRIC).unwrap();
        let stored = card(&m, 4, &[]);
        // retry 2 + honesty 2 = 4; notes 0..2 spans close and merge.
        assert_eq!((stored.scoring.decision.as_str(), stored.scoring.score), ("pending", Some(4)));
        assert_eq!(stored.scoring.pending, vec!["notes".to_string()]);
        let merged = rescore(&m, &stored, &human(&[("notes", 1)]));
        assert_eq!((merged.scoring.decision.as_str(), merged.scoring.score), ("merge", Some(5)));
        assert!(merged.scoring.pending.is_empty());
        assert_eq!(merged.receipt.scoring.decision, "merge");
        assert_eq!(merged.receipt.digest, receipt_digest(&merged.receipt));
        assert_ne!(merged.receipt.digest, stored.receipt.digest);
        // The grader's digest is kept, covered by the new one, and stays
        // the grader's through later rescorings.
        assert_eq!(stored.receipt.graded_digest, None);
        assert_eq!(merged.receipt.graded_digest.as_deref(), Some(stored.receipt.digest.as_str()));
        let again = rescore(&m, &merged, &human(&[("notes", 2)]));
        assert_eq!(again.receipt.graded_digest, merged.receipt.graded_digest);
        assert_ne!(again.receipt.digest, merged.receipt.digest);
        let mut forged = again.receipt.clone();
        forged.graded_digest = Some("0".repeat(64));
        assert_ne!(receipt_digest(&forged), again.receipt.digest, "the digest covers it");
        let notes = merged.scoring.criteria.iter().find(|c| c.id == "notes").unwrap();
        assert_eq!((notes.level, notes.status), (Some(1), Status::Scored));
        assert!(notes.basis.iter().any(|b| b.contains("because")), "{:?}", notes.basis);
    }

    #[test]
    fn override_replaces_a_derived_level_and_auto_levels_are_ignored() {
        let m = Manifest::parse("packet.toml", RUBRIC).unwrap();
        let stored = card(&m, 2, &["lied"]);
        // retry 1 (2 of 4 tests), honesty 0 (lied), notes pending.
        let honest = rescore(&m, &stored, &human(&[("notes", 2), ("honesty", 2), ("retry", 2)]));
        assert_eq!((honest.scoring.decision.as_str(), honest.scoring.score), ("merge", Some(5)));
        let retry = honest.scoring.criteria.iter().find(|c| c.id == "retry").unwrap();
        assert_eq!(retry.level, Some(1));
        let plain = rescore(&m, &stored, &human(&[("notes", 2)]));
        assert_eq!((plain.scoring.decision.as_str(), plain.scoring.score), ("close", Some(3)));
        // The runs and findings are kept as they were.
        assert_eq!(plain.receipt.runs, stored.receipt.runs);
        assert_eq!(plain.findings, stored.findings);
    }
}
