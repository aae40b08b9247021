//! What each run of a grading carries besides its command (issue #25):
//! which files are the grader's (laid read-only), which canaries it
//! plants, and how its results are judged afterwards. The grading pipeline
//! asks this module for a [`Guard`] per run and for the judgement of each
//! run; the mechanisms themselves live in `canary`, `runtime`, `run` and the
//! trusted runner.

use std::collections::{BTreeMap, BTreeSet};

use crate::canary::{Choose, StepCanaries};
use crate::manifest::{Lay, Step};
use crate::run::{Guard, Ran};
use crate::runtime::{Judged, Whose};

/// The version of the calibration's canary data; a recorded calibration of
/// another version is measured again.
pub const CANARY_FORMAT: u32 = 1;

/// The canaries of one grading.
pub struct Canaries<'a> {
    /// Step id → its modules' templates and calibrated twins.
    pub steps: &'a BTreeMap<String, StepCanaries>,
    /// Plant every twin and report outcomes (grading the sample to
    /// calibrate), instead of one calibrated twin per chosen test.
    pub calibrating: bool,
    /// The calibration's salt: never in a receipt, so the candidate cannot
    /// predict the names and the order.
    pub salt: &'a str,
    /// The submission's digest: another submission, other names.
    pub submission: &'a str,
}

impl<'a> Canaries<'a> {
    fn seed(&self, run_id: &str) -> Vec<u8> {
        crate::tree::sha256_hex(format!("{}\n{}\n{run_id}", self.salt, self.submission).as_bytes())
            .into_bytes()
    }

    /// The guard of step `step`. `fixed`: its tests are all the packet's
    /// (twins, and no conftest loads); otherwise it runs tests the
    /// candidate wrote (the generic pair).
    pub fn for_step(&self, step: &'a Step, fixed: bool) -> Guard<'a> {
        let mut guard = Guard {
            laid: laid_paths(&step.lay),
            generic: !fixed,
            noconftest: fixed,
            calibrating: self.calibrating,
            seed: self.seed(&format!("step:{}", step.id)),
            twins: Vec::new(),
        };
        if let Some(sc) = self.steps.get(&step.id) {
            for (path, template) in &sc.files {
                let choose = if self.calibrating {
                    Choose::All
                } else {
                    match sc.calibrated.get(path) {
                        Some(cal) => Choose::Calibrated(cal),
                        None => continue,
                    }
                };
                guard.twins.push((path.as_str(), template, choose));
            }
        }
        guard
    }

    /// The guard of another run (`script:N`, `mutant:ID`): its laid files
    /// read-only, and the generic pair when it runs the candidate's tests.
    pub fn for_run(&self, run_id: &str, laid: Vec<String>, generic: bool) -> Guard<'a> {
        Guard {
            laid,
            generic,
            calibrating: self.calibrating,
            seed: self.seed(run_id),
            ..Guard::default()
        }
    }
}

/// The workspace paths `lays` lay.
pub fn laid_paths(lays: &[Lay]) -> Vec<String> {
    lays.iter().map(|l| l.paths().1).collect()
}

/// The judgement of one run: what its canaries showed, then what the
/// runner saw (`runtime::judge`). `baseline`: the framework changes the
/// sample's grading showed.
pub fn judge(ran: &Ran, whose: Whose, baseline: &BTreeSet<String>) -> Judged {
    let mut out = match &ran.runner {
        Some(r) => crate::runtime::judge(r, whose, baseline),
        None => Judged::default(),
    };
    out.signs.splice(0..0, ran.verdict.signs.iter().cloned());
    out
}

/// What grading the sample with every twin planted teaches: for each step,
/// module and test, the twins that failed while the test passed.
pub fn calibrated_from(
    templates: &BTreeMap<String, StepCanaries>,
    outcomes: &BTreeMap<String, crate::canary::Verdict>,
) -> BTreeMap<String, StepCanaries> {
    let mut out = templates.clone();
    for (step, sc) in &mut out {
        let Some(v) = outcomes.get(step) else { continue };
        for (file, template) in &sc.files {
            let mut per_test = BTreeMap::new();
            for slot in template.slots() {
                let key = slot.key();
                let Some((passed, twins)) = v.twins.get(file).and_then(|m| m.get(&key)) else {
                    continue;
                };
                if !passed {
                    continue;
                }
                let ok: BTreeSet<usize> = slot
                    .twins
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| twins.get(&t.what) == Some(&true))
                    .map(|(i, _)| i)
                    .collect();
                if !ok.is_empty() {
                    per_test.insert(key, ok);
                }
            }
            sc.calibrated.insert(file.clone(), per_test);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canary::{Part, Slot, Template, Twin, Verdict};

    #[test]
    fn twins_that_failed_beside_a_passing_test_are_kept() {
        let twin = |what: &str| Twin { code: String::new(), what: what.into() };
        let slot = |n: usize, name: &str| {
            Part::Slot(Slot {
                slot: n,
                indent: String::new(),
                name: name.into(),
                class: None,
                code: String::new(),
                twins: vec![twin("line 1: expects another value"), twin("line 1: negated")],
            })
        };
        let template = Template { parts: vec![slot(0, "test_a"), slot(1, "test_b")], error: None };
        let mut sc = StepCanaries::default();
        sc.files.insert("t.py".into(), template);
        let templates: BTreeMap<String, StepCanaries> = [("hidden".to_string(), sc)].into();
        let mut v = Verdict::default();
        let file = v.twins.entry("t.py".into()).or_default();
        // test_a passed; its value twin failed, its negation passed (not kept).
        file.insert(
            "test_a".into(),
            (
                true,
                [
                    ("line 1: expects another value".to_string(), true),
                    ("line 1: negated".into(), false),
                ]
                .into(),
            ),
        );
        // test_b failed on the sample: no twin of it can be judged.
        file.insert(
            "test_b".into(),
            (false, [("line 1: expects another value".to_string(), true)].into()),
        );
        let out = calibrated_from(&templates, &[("hidden".to_string(), v)].into());
        let cal = &out["hidden"].calibrated["t.py"];
        assert_eq!(cal.get("test_a"), Some(&[0usize].into()));
        assert_eq!(cal.get("test_b"), None);
        assert_eq!(out["hidden"].covered(), 1);
        assert_eq!(out["hidden"].uncovered(), vec!["t.py::test_b".to_string()]);
    }
}
