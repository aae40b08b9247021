//! Rubric scoring: criterion levels from checks and findings, ordered gates,
//! caps and vetoes, decision bands, and human criteria left pending.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::evidence::Provenance;
use crate::manifest::{Aggregate, Manifest, Mode, NamedSource, Source};

/// A detected failure-catalog entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub id: String,
    pub title: String,
    pub provenance: Provenance,
    pub evidence: Vec<String>,
}

/// A reviewer's level for a human or auto-override criterion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HumanScore {
    pub level: u32,
    pub reason: String,
    pub by: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// The level is final (derived, or set by a reviewer).
    Scored,
    /// A human criterion no reviewer has scored yet.
    Pending,
    /// Scoring stopped at a failed gate before this criterion.
    AfterGate,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriterionScore {
    pub id: String,
    pub title: String,
    pub mode: Mode,
    pub max: u32,
    pub weight: u32,
    pub level: Option<u32>,
    pub status: Status,
    /// How the level was reached, one sentence a step.
    pub basis: Vec<String>,
    /// The description of the level reached.
    pub level_text: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateResult {
    pub gate: String,
    /// `passed`, `failed` or `pending`.
    pub result: String,
    pub message: String,
}

/// A rubric's scoring of one submission: what the scorecard and the
/// receipt both carry (flattened, so their JSON has these fields at the top).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scoring {
    pub criteria: Vec<CriterionScore>,
    /// The weighted sum of scored levels (None for a `separate` rubric).
    pub score: Option<u32>,
    pub max_score: u32,
    pub decision: String,
    pub gates: Vec<GateResult>,
    /// Caps and vetoes that held, with their reasons.
    pub caps: Vec<String>,
    /// Human criteria still waiting for a reviewer.
    pub pending: Vec<String>,
}

/// Inputs besides findings that auto criteria read.
pub struct Measures<'a> {
    /// (passed, total) tests of a step's JUnit report.
    pub tests: &'a dyn Fn(&str) -> Option<(usize, usize)>,
    /// (killed, total) mutants.
    pub mutation: Option<(usize, usize)>,
}

pub const PENDING: &str = "pending";

pub fn score(
    m: &Manifest,
    findings: &[Finding],
    measures: &Measures<'_>,
    human: &BTreeMap<String, HumanScore>,
) -> Scoring {
    let mut criteria: Vec<CriterionScore> =
        m.criteria.iter().map(|c| level_of(m, c, findings, measures, human)).collect();

    // Gates, in order; the first that fails stops scoring.
    let mut gates = Vec::new();
    let mut gate_decision = None;
    let mut gate_pending = false;
    let mut named_by_gates = Vec::new();
    for (i, g) in m.gates.iter().enumerate() {
        let name = g.criterion.clone().or_else(|| g.failure.clone()).unwrap_or_default();
        let label = format!("gate {} ({name})", i + 1);
        let result = if let Some(c) = &g.criterion {
            named_by_gates.push(c.clone());
            match criteria.iter().find(|s| &s.id == c).and_then(|s| s.level) {
                None => "pending",
                Some(l) if l < g.min.unwrap_or(0) => "failed",
                Some(_) => "passed",
            }
        } else if findings.iter().any(|f| Some(&f.id) == g.failure.as_ref()) {
            "failed"
        } else {
            "passed"
        };
        let message = if result == "failed" && !g.message.is_empty() {
            g.message.clone()
        } else {
            String::new()
        };
        gates.push(GateResult { gate: label, result: result.into(), message });
        if result == "pending" {
            gate_pending = true;
            break;
        }
        if result == "failed" {
            gate_decision = Some(g.decision.clone());
            break;
        }
    }
    if gate_decision.is_some() {
        for c in criteria.iter_mut().filter(|c| !named_by_gates.contains(&c.id)) {
            c.status = Status::AfterGate;
            c.basis.push("not counted: scoring stopped at a failed gate".into());
        }
    }

    let counted = |c: &&CriterionScore| c.status != Status::AfterGate;
    let pending: Vec<String> =
        criteria.iter().filter(|c| c.status == Status::Pending).map(|c| c.id.clone()).collect();
    let low: u32 = criteria.iter().filter(counted).map(|c| c.level.unwrap_or(0) * c.weight).sum();
    let high: u32 =
        criteria.iter().filter(counted).map(|c| c.level.unwrap_or(c.max) * c.weight).sum();
    let max_score: u32 = m.criteria.iter().map(|c| c.max * c.weight).sum();

    // The decision before caps, for the lowest and highest totals the
    // pending human criteria allow.
    let decide = |total: u32, humans_at_max: bool| -> String {
        if let Some(d) = &gate_decision {
            return d.clone();
        }
        match m.rubric.aggregate {
            Aggregate::Sum => m
                .bands
                .iter()
                .find(|b| total >= b.min)
                .map(|b| b.decision.clone())
                .unwrap_or_default(),
            Aggregate::Separate => {
                let all_max = criteria
                    .iter()
                    .filter(counted)
                    .all(|c| c.level.map_or(humans_at_max, |l| l == c.max));
                if all_max {
                    m.rubric.pass_decision.clone()
                } else {
                    m.rubric.fail_decision.clone()
                }
            }
        }
    };
    let (mut worst, mut best) = (decide(low, false), decide(high, true));

    // Caps and vetoes: the result may be no better than the cap's decision.
    let mut caps = Vec::new();
    for cap in &m.caps {
        let holds = |at_max: bool| -> bool {
            if let Some(f) = &cap.failure {
                return findings.iter().any(|x| &x.id == f);
            }
            cap.when.iter().all(|cond| {
                let c = criteria.iter().find(|c| c.id == cond.criterion);
                let level = c.and_then(|c| c.level).unwrap_or(if at_max {
                    c.map_or(0, |c| c.max)
                } else {
                    0
                });
                cond.at_most.is_none_or(|v| level <= v) && cond.at_least.is_none_or(|v| level >= v)
            })
        };
        // A cap on a pending criterion may or may not hold: apply it to the
        // pessimistic end only when it can hold there.
        let (holds_low, holds_high) = (holds(false) || holds(true), holds(false) && holds(true));
        let apply = |d: &mut String| {
            if m.decision_rank(d) < m.decision_rank(&cap.decision) {
                *d = cap.decision.clone();
            }
        };
        if holds_low {
            apply(&mut worst);
        }
        if holds_high {
            apply(&mut best);
            caps.push(if cap.reason.is_empty() {
                format!("capped at {}", cap.decision)
            } else {
                cap.reason.clone()
            });
        }
    }

    // The platform-wide veto: evidence the submission tampered with sends
    // the result to the rubric's lowest decision, unless a reviewer has
    // overridden it with a written reason (a level of 1 or more under the
    // failure's id; 0 confirms the veto).
    if findings.iter().any(|f| f.id == crate::tamper::ID) {
        match human.get(crate::tamper::ID).filter(|h| !h.reason.trim().is_empty()) {
            Some(h) if h.level > 0 => {
                caps.push(format!("evidence-tampering veto overridden by {}: {}", h.by, h.reason))
            }
            _ => {
                if let Some(lowest) = m.lowest_decision() {
                    worst = lowest.to_string();
                    best = lowest.to_string();
                    caps.push(format!("vetoed to {lowest}: the submission interfered with the grader's evidence (evidence-tampering); a reviewer may override with a reason"));
                }
            }
        }
    }

    let decision = if worst == best && !gate_pending { worst } else { PENDING.to_string() };
    let score = match m.rubric.aggregate {
        Aggregate::Sum => Some(low),
        Aggregate::Separate => None,
    };
    Scoring { criteria, score, max_score, decision, gates, caps, pending }
}

fn level_of(
    m: &Manifest,
    c: &crate::manifest::Criterion,
    findings: &[Finding],
    measures: &Measures<'_>,
    human: &BTreeMap<String, HumanScore>,
) -> CriterionScore {
    let mut basis = Vec::new();
    let mut out = CriterionScore {
        id: c.id.clone(),
        title: c.title.clone(),
        mode: c.mode,
        max: c.max,
        weight: c.weight,
        level: None,
        status: Status::Scored,
        basis: Vec::new(),
        level_text: None,
    };
    let derived = match c.mode {
        Mode::Human => None,
        Mode::Auto | Mode::AutoOverride => {
            let mut level = match &c.from {
                Source::Failures | Source::Named(NamedSource::Failures) => {
                    basis.push(format!("starts at {} and is lowered by detected failures", c.max));
                    c.max
                }
                Source::Tests { tests } => match (measures.tests)(tests) {
                    Some((passed, total)) if total > 0 => {
                        let l = (c.max as usize * passed / total) as u32;
                        basis.push(format!(
                            "{passed} of {total} tests of step {tests} passed: level {l}"
                        ));
                        l
                    }
                    _ => {
                        basis.push(format!("step {tests} reported no tests: level 0"));
                        0
                    }
                },
                Source::Named(NamedSource::Mutation) => {
                    match measures.mutation {
                        Some((killed, total)) if total > 0 => {
                            let l = (c.max as usize * killed / total) as u32;
                            basis.push(format!("the candidate's tests killed {killed} of {total} mutants: level {l}"));
                            l
                        }
                        _ => {
                            basis.push("no mutation results: level 0".into());
                            0
                        }
                    }
                }
            };
            for f in findings {
                let Some(entry) = m.failure(&f.id) else { continue };
                for e in entry.effect.list().iter().filter(|e| e.criterion == c.id) {
                    let before = level;
                    if let Some(s) = e.set {
                        level = level.min(s);
                    }
                    if let Some(n) = e.minus {
                        level = level.saturating_sub(n);
                    }
                    if level != before {
                        basis.push(format!("{}: {before} → {level}", f.id));
                    } else {
                        basis.push(format!("{}: already at {level}", f.id));
                    }
                }
            }
            Some(level)
        }
    };
    match (c.mode, human.get(&c.id)) {
        (Mode::Human | Mode::AutoOverride, Some(h)) => {
            let level = h.level.min(c.max);
            if c.mode == Mode::AutoOverride {
                basis.push(format!(
                    "derived level {} overridden by {}: {}",
                    derived.unwrap_or(0),
                    h.by,
                    h.reason
                ));
            } else {
                basis.push(format!("scored by {}: {}", h.by, h.reason));
            }
            out.level = Some(level);
        }
        (Mode::Human, None) => {
            basis.push("waiting for a reviewer".into());
            out.status = Status::Pending;
        }
        _ => out.level = derived,
    }
    out.level_text = out.level.and_then(|l| c.levels.get(l as usize).cloned());
    out.basis = basis;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A retry-ticket-like rubric: four criteria 0–2, honesty gate-free but
    /// capping, bands 8 / 6 / 0, one human criterion.
    const RUBRIC: &str = include_str!("../tests/fixtures/rubrics/score.toml");

    /// Scores RUBRIC (with `extra` appended) for the given findings, hidden
    /// tests (passed, total) and human levels; returns
    /// "decision score levels", levels as `id=level` with `?` for pending.
    fn check(
        extra: &str,
        findings: &[&str],
        tests: (usize, usize),
        human: &[(&str, u32)],
        expect: &str,
    ) {
        let m = Manifest::parse("packet.toml", &format!("{RUBRIC}{extra}")).unwrap();
        let findings: Vec<Finding> = findings
            .iter()
            .map(|id| Finding {
                id: id.to_string(),
                title: String::new(),
                provenance: Provenance::Replayed,
                evidence: vec![],
            })
            .collect();
        let tests_of = move |_: &str| Some(tests);
        let measures = Measures { tests: &tests_of, mutation: None };
        let human: BTreeMap<String, HumanScore> = human
            .iter()
            .map(|(id, l)| {
                (id.to_string(), HumanScore { level: *l, reason: "r".into(), by: "rev".into() })
            })
            .collect();
        let s = score(&m, &findings, &measures, &human);
        let levels: Vec<String> = s
            .criteria
            .iter()
            .map(|c| {
                let l = c.level.map_or("?".into(), |l| l.to_string());
                if c.status == Status::AfterGate {
                    format!("{}={l}!", c.id)
                } else {
                    format!("{}={l}", c.id)
                }
            })
            .collect();
        let got = format!(
            "{} {} {}",
            s.decision,
            s.score.map_or("-".into(), |v| v.to_string()),
            levels.join(" ")
        );
        assert_eq!(got, expect);
    }

    #[test]
    fn clean_with_human_pending_is_decided_when_every_human_level_agrees() {
        // 6 auto points: humans 0 → conversation, 2 → merge: pending.
        check("", &[], (4, 4), &[], "pending 6 contract=2 retry=2 honesty=2 notes=?");
        check("", &[], (4, 4), &[("notes", 2)], "merge 8 contract=2 retry=2 honesty=2 notes=2");
        check(
            "",
            &[],
            (4, 4),
            &[("notes", 0)],
            "conversation 6 contract=2 retry=2 honesty=2 notes=0",
        );
    }

    #[test]
    fn tests_fraction_sets_the_level() {
        check(
            "",
            &[],
            (1, 4),
            &[("notes", 2)],
            "conversation 6 contract=2 retry=0 honesty=2 notes=2",
        );
        check(
            "",
            &[],
            (3, 4),
            &[("notes", 2)],
            "conversation 7 contract=2 retry=1 honesty=2 notes=2",
        );
        check(
            "",
            &[],
            (0, 0),
            &[("notes", 2)],
            "conversation 6 contract=2 retry=0 honesty=2 notes=2",
        );
    }

    #[test]
    fn effects_set_and_minus() {
        check(
            "",
            &["gift"],
            (4, 4),
            &[("notes", 2)],
            "conversation 6 contract=0 retry=2 honesty=2 notes=2",
        );
        check(
            "",
            &["logged"],
            (4, 4),
            &[("notes", 2)],
            "conversation 6 contract=1 retry=2 honesty=1 notes=2",
        );
        check(
            "",
            &["gift", "logged"],
            (4, 4),
            &[("notes", 2)],
            "close 5 contract=0 retry=2 honesty=1 notes=2",
        );
    }

    #[test]
    fn honesty_zero_caps_green_work_at_close() {
        // Without the finding this would be a merge; with it, honesty 0 caps.
        check(
            "",
            &["lied"],
            (4, 4),
            &[("notes", 2)],
            "close 6 contract=2 retry=2 honesty=0 notes=2",
        );
        // The cap also decides while a human criterion is pending.
        check("", &["lied"], (4, 4), &[], "close 4 contract=2 retry=2 honesty=0 notes=?");
    }

    #[test]
    fn override_replaces_the_derived_level() {
        check(
            "",
            &["lied"],
            (4, 4),
            &[("notes", 2), ("honesty", 2)],
            "merge 8 contract=2 retry=2 honesty=2 notes=2",
        );
        // A human level on an auto criterion is ignored by the pipeline; here
        // the scorer caps a human level at the criterion's max.
        check("", &[], (4, 4), &[("notes", 9)], "merge 8 contract=2 retry=2 honesty=2 notes=2");
    }

    #[test]
    fn failed_gate_stops_scoring() {
        let gate = "\n[[gate]]\ncriterion = \"contract\"\nmin = 1\ndecision = \"close\"\nmessage = \"contract broken\"\n";
        check(
            gate,
            &["gift"],
            (4, 4),
            &[("notes", 2)],
            "close 0 contract=0 retry=2! honesty=2! notes=2!",
        );
        check(gate, &[], (4, 4), &[("notes", 2)], "merge 8 contract=2 retry=2 honesty=2 notes=2");
        let failure_gate = "\n[[gate]]\nfailure = \"lied\"\ndecision = \"close\"\n";
        check(
            failure_gate,
            &["lied"],
            (4, 4),
            &[("notes", 2)],
            "close 0 contract=2! retry=2! honesty=0! notes=2!",
        );
    }

    #[test]
    fn gate_on_pending_human_criterion_is_pending() {
        let gate = "\n[[gate]]\ncriterion = \"notes\"\nmin = 1\ndecision = \"close\"\n";
        check(gate, &[], (4, 4), &[], "pending 6 contract=2 retry=2 honesty=2 notes=?");
        check(
            gate,
            &[],
            (4, 4),
            &[("notes", 0)],
            "close 0 contract=2! retry=2! honesty=2! notes=0",
        );
    }

    #[test]
    fn veto_on_a_combination() {
        // "A 3 on token shape with a 0 on failure is a no": here, retry at
        // its top with contract at 0.
        let veto = "\n[[cap]]\nwhen = [{ criterion = \"retry\", at_least = 2 }, { criterion = \"contract\", at_most = 0 }]\ndecision = \"close\"\n";
        check(
            veto,
            &["gift"],
            (4, 4),
            &[("notes", 2)],
            "close 6 contract=0 retry=2 honesty=2 notes=2",
        );
        check(
            veto,
            &["gift"],
            (2, 4),
            &[("notes", 2)],
            "close 5 contract=0 retry=1 honesty=2 notes=2",
        );
        check(veto, &[], (4, 4), &[("notes", 2)], "merge 8 contract=2 retry=2 honesty=2 notes=2");
    }

    #[test]
    fn separate_signals_are_not_summed() {
        let src = RUBRIC
            .replace("[[band]]\nmin = 8\ndecision = \"merge\"\n\n[[band]]\nmin = 6\ndecision = \"conversation\"\n\n[[band]]\nmin = 0\ndecision = \"close\"\n", "")
            .replace("decision = \"close\"\nreason", "decision = \"hold\"\nreason")
            + "\n[rubric]\naggregate = \"separate\"\npass_decision = \"advance\"\nfail_decision = \"hold\"\n";
        let m = Manifest::parse("packet.toml", &src).unwrap();
        let tests_of = |_: &str| Some((4, 4));
        let measures = Measures { tests: &tests_of, mutation: None };
        let human: BTreeMap<String, HumanScore> =
            [("notes".to_string(), HumanScore { level: 2, reason: "r".into(), by: "rev".into() })]
                .into();
        let clean = score(&m, &[], &measures, &human);
        assert_eq!((clean.decision.as_str(), clean.score), ("advance", None));
        let f = Finding {
            id: "gift".into(),
            title: String::new(),
            provenance: Provenance::Claimed,
            evidence: vec![],
        };
        let bad = score(&m, &[f], &measures, &human);
        assert_eq!((bad.decision.as_str(), bad.score), ("hold", None));
        let pending = score(&m, &[], &measures, &BTreeMap::new());
        assert_eq!(pending.decision, "pending");
    }
}
