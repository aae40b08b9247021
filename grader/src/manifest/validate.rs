//! Validation: the references and rules a manifest must satisfy beyond its shape.

use std::collections::BTreeSet;

use super::paths::check_lay;
use super::problems::{Key, Problems, quoted};
use super::*;

impl Manifest {
    pub(super) fn validate(&self, file: &str, src: &str) -> Result<(), ManifestError> {
        let mut bad = Problems::new(src);
        let slug_ok = !self.packet.slug.is_empty()
            && self
                .packet
                .slug
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !slug_ok {
            bad.at(
                &["packet".into(), "slug".into()],
                format!("slug {:?} must be lowercase letters, digits and '-'", self.packet.slug),
            );
        }

        let reason = self.packet.judge_reason.as_deref().map(str::trim);
        match (self.packet.judge, reason) {
            (Some(super::JudgeMode::Shared), None | Some("")) => bad.at(
                &["packet".into(), "judge".into()],
                "judge = \"shared\" needs judge_reason: why the hidden tests must run in the candidate's process".into(),
            ),
            (Some(super::JudgeMode::Apart) | None, Some(_)) => bad.at(
                &["packet".into(), "judge_reason".into()],
                "judge_reason explains judge = \"shared\" and means nothing without it".into(),
            ),
            _ => {}
        }

        if self.workspace.test.as_deref().is_some_and(|t| t.trim().is_empty()) {
            bad.at(
                &["workspace".into(), "test".into()],
                "workspace.test is empty; leave it out to use [commands] test".into(),
            );
        }

        for (needle, message) in self.check_paths() {
            bad.near(&needle, message);
        }

        let mut seen = BTreeSet::new();
        for (i, step) in self.steps.iter().enumerate() {
            if !seen.insert(step.id.as_str()) {
                bad.at(
                    &["step".into(), i.into(), "id".into()],
                    format!("step id {:?} is used twice", step.id),
                );
            }
            for lay in &step.lay {
                if let Err(m) = check_lay(lay) {
                    bad.at(&["step".into(), i.into(), "lay".into()], m);
                }
            }
        }

        let mut seen = BTreeSet::new();
        for (i, c) in self.criteria.iter().enumerate() {
            let at = |key: &'static str| [Key::from("criterion"), i.into(), key.into()];
            if !seen.insert(c.id.as_str()) {
                bad.at(&at("id"), format!("criterion id {:?} is used twice", c.id));
            }
            if c.levels.len() != c.max as usize + 1 {
                bad.at(
                    &at("levels"),
                    format!(
                        "criterion {:?} has max {} so it needs {} level descriptions, found {}",
                        c.id,
                        c.max,
                        c.max + 1,
                        c.levels.len()
                    ),
                );
            }
            match &c.from {
                Source::Tests { tests } if self.step(tests).is_none() => {
                    bad.at(
                        &at("from"),
                        format!(
                            "criterion {:?} reads tests of step {:?}, which is not defined",
                            c.id, tests
                        ),
                    );
                }
                Source::Tests { tests } if !self.step(tests).is_some_and(Step::reports_tests) => {
                    bad.at(&at("from"), format!("criterion {:?} reads tests of step {:?}, which has no `junit` path and is not a trusted test command", c.id, tests));
                }
                Source::Named(NamedSource::Mutation) if self.mutation.is_none() => {
                    bad.at(&at("from"), format!("criterion {:?} is scored from mutation but there is no [mutation] table", c.id));
                }
                _ => {}
            }
        }

        let mut seen = BTreeSet::new();
        for (i, f) in self.failures.iter().enumerate() {
            let at = |key: &'static str| [Key::from("failure"), i.into(), key.into()];
            if !seen.insert(f.id.as_str()) {
                bad.at(&at("id"), format!("failure id {:?} is used twice", f.id));
            }
            for e in f.effect.list() {
                if self.criterion(&e.criterion).is_none() {
                    bad.at(
                        &at("effect"),
                        format!(
                            "failure {:?} affects criterion {:?}, which is not defined",
                            f.id, e.criterion
                        ),
                    );
                }
                if e.set.is_none() == e.minus.is_none() {
                    bad.at(
                        &at("effect"),
                        format!(
                            "an effect of failure {:?} needs exactly one of `set` or `minus`",
                            f.id
                        ),
                    );
                }
            }
            let mut problems = Vec::new();
            f.detect.walk(&mut |d| {
                problems.extend(self.check_detector(d));
                // A witness check is quiet when grading has no witness, so
                // under `not` it would fire for every offline submission.
                if let Detector::Not { of } = d {
                    let mut witness = false;
                    of.walk(&mut |inner| witness |= matches!(inner, Detector::Witness { .. }));
                    if witness {
                        problems.push((
                            "\"not\"".into(),
                            "a `witness` detector cannot sit under `not`".into(),
                        ));
                    }
                }
            });
            for (_, m) in problems {
                bad.at(&at("detect"), format!("failure {:?}: {m}", f.id));
            }
        }

        let known_decision = |d: &str| self.decision_rank(d).is_some();
        for (i, g) in self.gates.iter().enumerate() {
            let at = |key: &'static str| [Key::from("gate"), i.into(), key.into()];
            match (&g.criterion, &g.failure) {
                (Some(c), None) => {
                    if self.criterion(c).is_none() {
                        bad.at(
                            &at("criterion"),
                            format!("gate names criterion {c:?}, which is not defined"),
                        );
                    }
                    if g.min.is_none() {
                        bad.at(&at("criterion"), format!("gate on criterion {c:?} needs `min`"));
                    }
                }
                (None, Some(f)) => {
                    if self.failure(f).is_none() {
                        bad.at(
                            &at("failure"),
                            format!("gate names failure {f:?}, which is not in the catalog"),
                        );
                    }
                }
                _ => bad.at(
                    &at("decision"),
                    "a gate names exactly one of `criterion` or `failure`".into(),
                ),
            }
            if !known_decision(&g.decision) {
                bad.at(
                    &at("decision"),
                    format!("gate decision {:?} is not one of the rubric's decisions", g.decision),
                );
            }
        }
        for (i, cap) in self.caps.iter().enumerate() {
            let at = |key: &'static str| [Key::from("cap"), i.into(), key.into()];
            if cap.when.is_empty() == cap.failure.is_none() {
                bad.at(&at("decision"), "a cap needs exactly one of `when` or `failure`".into());
            }
            for cond in &cap.when {
                if self.criterion(&cond.criterion).is_none() {
                    bad.at(
                        &at("when"),
                        format!("cap names criterion {:?}, which is not defined", cond.criterion),
                    );
                }
                if cond.at_most.is_none() && cond.at_least.is_none() {
                    bad.at(&at("when"), "a cap condition needs `at_most` or `at_least`".into());
                }
            }
            if let Some(f) = &cap.failure
                && self.failure(f).is_none()
            {
                bad.at(
                    &at("failure"),
                    format!("cap names failure {f:?}, which is not in the catalog"),
                );
            }
            if !known_decision(&cap.decision) {
                bad.at(
                    &at("decision"),
                    format!("cap decision {:?} is not one of the rubric's decisions", cap.decision),
                );
            }
        }
        if self.rubric.aggregate == Aggregate::Sum {
            if self.bands.is_empty() {
                bad.at(&["rubric".into()], "a summed rubric needs at least one [[band]]".into());
            }
            if let Some(i) = self.bands.windows(2).position(|w| w[0].min <= w[1].min) {
                bad.at(
                    &["band".into(), (i + 1).into(), "min".into()],
                    "bands must be listed best first with strictly falling `min`".into(),
                );
            }
            if let Some(last) = self.bands.len().checked_sub(1)
                && self.bands[last].min != 0
            {
                bad.at(
                    &["band".into(), last.into(), "min".into()],
                    "the last band must have `min = 0`".into(),
                );
            }
        }

        if let Some(m) = &self.mutation
            && self.step(&m.hidden_step).is_none()
        {
            bad.at(
                &["mutation".into(), "hidden_step".into()],
                format!("mutation.hidden_step {:?} is not a step", m.hidden_step),
            );
        }

        let mut seen = BTreeSet::new();
        for (i, v) in self.variants.iter().enumerate() {
            let at = |key: &'static str| [Key::from("variant"), i.into(), key.into()];
            if !seen.insert(v.name.as_str()) {
                bad.at(&at("name"), format!("variant {:?} is listed twice", v.name));
            }
            for id in &v.expect {
                if self.failure(id).is_none() {
                    bad.at(
                        &at("expect"),
                        format!(
                            "variant {:?} expects failure {id:?}, which is not in the catalog",
                            v.name
                        ),
                    );
                }
            }
        }

        for (step, map) in &self.proves {
            let table = [Key::from("proves"), step.into()];
            match self.step(step) {
                None => bad.at(
                    &table,
                    format!("[proves.{step}] names step {step:?}, which is not a step"),
                ),
                Some(s) if !s.reports_tests() => bad.at(
                    &table,
                    format!(
                        "[proves.{step}]: step {step:?} has no `junit` and no trusted test runner, so it reports no tests"
                    ),
                ),
                Some(_) => {}
            }
            for (pattern, proves) in map {
                let at = [Key::from("proves"), step.into(), pattern.into()];
                if globset::Glob::new(pattern).is_err() {
                    bad.at(
                        &at,
                        format!("[proves.{step}]: test pattern {pattern:?} is not a valid glob"),
                    );
                }
                if proves.ids().is_empty() {
                    bad.at(
                        &at,
                        format!("[proves.{step}]: test pattern {pattern:?} proves no failure id"),
                    );
                }
                for id in proves.ids() {
                    if self.failure(id).is_none() {
                        bad.at(&at, format!("[proves.{step}]: test {pattern:?} proves failure {id:?}, which is not in the catalog"));
                    }
                }
            }
        }
        for (step, map) in &self.cites {
            let table = [Key::from("cites"), step.into()];
            if self.step(step).is_none() {
                bad.at(&table, format!("[cites.{step}] names step {step:?}, which is not a step"));
            }
            for (pattern, quotes) in map {
                let at = [Key::from("cites"), step.into(), pattern.into()];
                if globset::Glob::new(pattern).is_err() {
                    bad.at(
                        &at,
                        format!("[cites.{step}]: test pattern {pattern:?} is not a valid glob"),
                    );
                }
                if quotes.all().iter().all(|q| q.trim().is_empty()) {
                    bad.at(&at, format!("[cites.{step}]: test pattern {pattern:?} quotes nothing"));
                }
            }
        }
        bad.finish(file)
    }

    /// Checks one detector's references; returns (text to locate, message).
    pub(super) fn check_detector(&self, d: &Detector) -> Option<(String, String)> {
        let step_ref = |step: &String| {
            if self.step(step).is_none() {
                Some((quoted(step), format!("detector names step {step:?}, which is not defined")))
            } else {
                None
            }
        };
        let globs_ok = |globs: &[String]| {
            globs.iter().find_map(|g| {
                globset::Glob::new(g).err().map(|e| (quoted(g), format!("bad glob {g:?}: {e}")))
            })
        };
        let kept_ref = |step: &Option<String>| -> Option<(String, String)> {
            let step = step.as_ref()?;
            step_ref(step).or_else(|| {
                self.step(step).filter(|s| s.keep.is_empty()).map(|_| {
                    (
                        quoted(step),
                        format!("detector reads files of step {step:?}, which keeps none (`keep`)"),
                    )
                })
            })
        };
        let file_step = match d {
            Detector::Missing { step, .. }
            | Detector::Present { step, .. }
            | Detector::Pattern { step, .. }
            | Detector::Ledger { step, .. }
            | Detector::Digest { step, .. } => kept_ref(step),
            _ => None,
        };
        if file_step.is_some() {
            return file_step;
        }
        match d {
            Detector::Leftovers { step } => step_ref(step),
            Detector::Digest { regex, files, .. } => {
                if files.is_empty() {
                    Some((quoted(regex.as_str()), "a digest detector needs `files`".into()))
                } else if regex.captures_len() != 2 {
                    Some((quoted(regex.as_str()), "a digest regex needs exactly one capture group".into()))
                } else {
                    None
                }
            }
            Detector::TestFailing { step, .. } => step_ref(step).or_else(|| {
                self.step(step)
                    .filter(|s| !s.reports_tests())
                    .map(|_| (quoted(step), format!("step {step:?} has no `junit` path and is not a trusted test command, so its tests cannot be read")))
            }),
            Detector::Exit { step, equals, not_equals, timed_out } => step_ref(step).or_else(|| {
                if equals.is_none() && not_equals.is_none() && timed_out.is_none() {
                    Some((quoted(step), "an exit detector needs `equals`, `not_equals` or `timed_out`".into()))
                } else {
                    None
                }
            }),
            Detector::Output { step, contains, absent, .. } => step_ref(step).or_else(|| match (contains, absent) {
                (Some(_), None) | (None, Some(_)) => None,
                _ => Some((quoted(step), "an output detector needs exactly one of `contains` or `absent`".into())),
            }),
            Detector::Witness { check, file, tolerance, min_chain } => {
                // The check's name as the TOML spells it, quoted, to locate it.
                let name = serde_json::to_string(check).unwrap_or_default();
                let needs_file = matches!(check, WitnessCheck::UsageDishonest | WitnessCheck::UsageMissing);
                let reads_file = needs_file || *check == WitnessCheck::RedDisagrees;
                if needs_file && file.is_none() {
                    Some((name, "this witness check needs `file` (the claimed usage ledger)".into()))
                } else if !reads_file && file.is_some() {
                    Some((name, "this witness check reads no claimed file; drop `file`".into()))
                } else if file.as_ref().is_some_and(|f| !is_safe_relative(f)) {
                    Some((name, format!("witness `file` {file:?} is not a safe relative path")))
                } else if tolerance.is_some() && *check != WitnessCheck::UsageDishonest || tolerance.is_some_and(|t| !(0.0..=1.0).contains(&t)) {
                    Some((name, "`tolerance` is a fraction between 0 and 1, for `usage-dishonest` only".into()))
                } else if min_chain.is_some() && *check != WitnessCheck::RetryStorm || min_chain.is_some_and(|n| n < 2) {
                    Some((name, "`min_chain` is at least 2, for `retry-storm` only".into()))
                } else {
                    None
                }
            }
            Detector::DiffAllowlist { allow, allow_file, diff } => {
                if allow.is_empty() && allow_file.is_none() {
                    Some((quoted(diff), "a diff-allowlist detector needs `allow` or `allow_file`".into()))
                } else {
                    globs_ok(allow)
                }
            }
            Detector::Order { by: OrderBy::Stamp, stamp: None, before, .. } => {
                Some((quoted(before), "an order detector by stamp needs a `stamp` regex".into()))
            }
            Detector::Frozen { paths: None } if self.policy.frozen.is_empty() => {
                Some(("frozen".into(), "a frozen detector with no `paths` needs `policy.frozen`".into()))
            }
            Detector::MutantsSurvive { .. } if self.mutation.is_none() => {
                Some(("mutants-survive".into(), "a mutants-survive detector needs a [mutation] table".into()))
            }
            Detector::Ledger { file, rows_over, rows_under, sum, duplicates, consecutive, invalid, compare, .. } => {
                let conditions = [
                    rows_over.is_some(),
                    rows_under.is_some(),
                    sum.is_some(),
                    duplicates.is_some(),
                    consecutive.is_some(),
                    *invalid,
                    compare.is_some(),
                ];
                if conditions.iter().filter(|c| **c).count() != 1 {
                    return Some((quoted(file), "a ledger detector needs exactly one condition".into()));
                }
                if let Some(c) = compare {
                    if let Some(p) = step_ref(&c.with_step) {
                        return Some(p);
                    }
                    if self.step(&c.with_step).is_some_and(|s| s.keep.is_empty()) {
                        return Some((quoted(&c.with_step), format!("compare reads a file of step {:?}, which keeps none", c.with_step)));
                    }
                    if c.tolerance_pct.is_nan() || c.tolerance_pct < 0.0 {
                        return Some((quoted(file), "compare.tolerance_pct must be zero or more".into()));
                    }
                }
                let limits = [rows_over.as_ref(), rows_under.as_ref(), sum.as_ref().map(|s| &s.over), consecutive.as_ref().map(|c| &c.over)];
                limits.into_iter().flatten().find_map(|l| match l {
                    Limit::Budget(name) => match name.strip_prefix("budget.") {
                        Some(b) if self.budgets.get(b).is_some() => None,
                        _ => Some((quoted(name), format!("limit {name:?} names no budget set in [budgets]"))),
                    },
                    Limit::Number(_) => None,
                })
            }
            Detector::Script { lay, run, .. } => lay.iter().find_map(|l| check_lay(l).err().map(|m| (quoted(run), m))),
            _ => None,
        }
    }
}
