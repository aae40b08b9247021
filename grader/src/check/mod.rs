//! `packet check`: the self-test a packet must pass before it is published.
//!
//! Variants and alternates are graded side by side with `par::map_indexed` (one
//! thread per core, results in order, a panicking job re-raised, never
//! dropped), sharing one `grade::memo` of mutant runs with the calibration and
//! the sample's grading (the grading of the sample runs the calibration's
//! trees, and a variant that changes only the mutated file the sample's;
//! `CheckReport::reused_runs`). Each variant's failing hidden tests are checked
//! against the ids they prove (`[proves.<step>]`).
//!
//! Two propositions live in modules of their own: `mutants` runs every mutant
//! (the packet's `mutants/<id>` through `[mutation] hidden_step`, and those
//! kept from audits, `mutants/audit/<id>.diff`, through the audit's steps) side
//! by side with `audit::run::run_hidden`, fails on a survivor
//! `mutants/EQUIVALENT.md` does not explain or on a stale entry, and returns
//! the counts the report carries (`CheckReport::mutants`); `proves` checks that
//! every `[proves.<step>]` pattern names a test of the sample's grading (and
//! warns about a hidden-test step with no table).

pub mod brief;
pub mod mutants;
pub mod proves;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::evidence::{TestOutcome, TestStatus};
use crate::grade::{GradeOptions, Grader, Scorecard, default_limits};
use crate::manifest::{Manifest, Proves};
use crate::packet::Packet;
use crate::run::{run_guarded, run_on_copy};
use crate::tree::copy_path;

pub use crate::starter::CHECK_SEED;

/// One proposition of the self-test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckItem {
    pub name: String,
    pub ok: bool,
    pub detail: String,
    /// A lint warning: worth an author's attention, never a failure.
    #[serde(default)]
    pub warning: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckReport {
    pub packet: String,
    pub items: Vec<CheckItem>,
    /// What grading the sample measured (the hidden tests' ids, the
    /// sample's times), recorded with the version so that every grading of
    /// it expects exactly these ids (`GradeOptions::calibration`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<crate::grade::Calibration>,
    /// The packet's mutants: killed, survived (unexplained) and explained
    /// (`check::mutants`); `None` when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutants: Option<crate::check::mutants::MutantCounts>,
    /// Mutant runs of the gradings reused from another grading of this
    /// self-test instead of run again (`grade::memo`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reused_runs: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl CheckReport {
    pub fn ok(&self) -> bool {
        !self.items.is_empty() && self.items.iter().all(|i| i.ok || i.warning)
    }

    fn push(&mut self, name: impl Into<String>, ok: bool, detail: impl Into<String>) {
        self.items.push(CheckItem { name: name.into(), ok, detail: detail.into(), warning: false });
    }

    fn warn(&mut self, name: impl Into<String>, detail: impl Into<String>) {
        self.items.push(CheckItem {
            name: name.into(),
            ok: false,
            detail: detail.into(),
            warning: true,
        });
    }

    /// Failed propositions (warnings left out).
    pub fn failures(&self) -> impl Iterator<Item = &CheckItem> {
        self.items.iter().filter(|i| !i.ok && !i.warning)
    }

    pub fn warnings(&self) -> impl Iterator<Item = &CheckItem> {
        self.items.iter().filter(|i| i.warning)
    }
}

/// Runs every proposition of the self-test on the packet at `dir`.
pub fn check_packet(grader: &Grader, dir: &Path) -> CheckReport {
    check_packet_with(grader, dir, false)
}

/// [`check_packet`]; with `apart`, the sample's calibration is measured for
/// this self-test alone (`Grader::calibration_apart`), not shared with the
/// grader's gradings: a self-test run at idle priority (the platform's
/// background check of a built-in packet) must not hold up a candidate's
/// grading that needs the same version's calibration.
pub fn check_packet_with(grader: &Grader, dir: &Path, apart: bool) -> CheckReport {
    let mut report = CheckReport { packet: dir.display().to_string(), ..CheckReport::default() };
    let packet = match Packet::load(dir) {
        Ok(p) => p,
        Err(e) => {
            report.push("manifest is valid", false, e.to_string());
            return report;
        }
    };
    report.packet = packet.manifest.packet.slug.clone();
    report.push(
        "manifest is valid",
        true,
        format!("version {}, digest {}", packet.manifest.packet.version, &packet.digest[..12]),
    );
    if let Err(e) = check_all(grader, &packet, apart, &mut report) {
        report.push("self-test ran to the end", false, e);
    }
    report
}

fn check_all(
    grader: &Grader,
    packet: &Packet,
    apart: bool,
    report: &mut CheckReport,
) -> Result<(), String> {
    let m = &packet.manifest;
    let work = crate::workdir::WorkDir::new("gatehouse-check-")
        .map_err(|e| format!("creating a work folder: {e}"))?;
    let limits = m.limits.apply(&default_limits());
    for (name, detail) in crate::lint::lint(packet) {
        report.warn(name, detail);
    }
    // Every hidden test names the sentence of the brief it enforces.
    report.items.extend(crate::check::brief::check(packet));

    // Every failure id has a variant that triggers it.
    let exercised: BTreeSet<&str> =
        m.variants.iter().flat_map(|v| v.expect.iter().map(String::as_str)).collect();
    let unexercised: Vec<&str> =
        m.failures.iter().map(|f| f.id.as_str()).filter(|id| !exercised.contains(id)).collect();
    report.push(
        "every failure id has a known-bad variant",
        unexercised.is_empty(),
        if unexercised.is_empty() {
            format!("{} ids", m.failures.len())
        } else {
            format!("no variant expects {}", unexercised.join(", "))
        },
    );

    // The starter is red, the sample green, under the packet's test command,
    // both on the tree a candidate unpacks: the starter with the files the
    // platform adds (the brief and the pin file).
    let starter = work.path().join("starter");
    let tools: Vec<String> = m.environment.tools.keys().cloned().collect();
    let probe = grader.probe(&tools).map_err(|e| e.to_string())?;
    let missing = crate::env::missing_toolchains(m, &probe);
    if !missing.is_empty() {
        report.push("the packet's toolchain is installed", false, missing.join("; "));
        return Err(format!("the packet's toolchain is missing: {}", missing.join("; ")));
    }
    let gate = crate::starter::Gate::placeholders();
    crate::starter::lay_received(packet, CHECK_SEED, &probe, &gate, &starter)
        .map_err(|e| format!("laying the starter a candidate receives: {e}"))?;
    // The candidate's tests, with the generic canary pair beside them.
    let generic = || crate::run::Guard {
        generic: true,
        seed: packet.digest.clone().into_bytes(),
        ..crate::run::Guard::default()
    };
    let red = run_guarded(
        grader.sandbox(),
        &starter,
        &work.path().join("red"),
        |_| Ok(()),
        &m.commands.test,
        &limits,
        Vec::new(),
        &generic(),
    )
    .map_err(|e| e.to_string())?;
    let red_ok = !red.report.success()
        && !red.report.timed_out
        && red.report.limit_hit.is_none()
        && red.runner.as_ref().is_none_or(|r| !r.passed());
    report.push(
        "the starter is red",
        red_ok,
        format!(
            "`{}`: {}{}",
            m.commands.test,
            red.report.describe(),
            tail(&red.report.stdout_tail)
        ),
    );

    let sample = work.path().join("sample-tree");
    copy_path(&starter, &sample).map_err(|e| format!("copying the starter: {e}"))?;
    if packet.sample_dir().is_dir() {
        copy_path(&packet.sample_dir(), &sample).map_err(|e| format!("laying the sample: {e}"))?;
    }
    let green = run_guarded(
        grader.sandbox(),
        &sample,
        &work.path().join("green"),
        |_| Ok(()),
        &m.commands.test,
        &limits,
        Vec::new(),
        &generic(),
    )
    .map_err(|e| e.to_string())?;
    report.push(
        "the sample passes the test command",
        green.report.success()
            && green.runner.as_ref().is_none_or(|r| r.passed())
            && green.verdict.signs.is_empty(),
        format!(
            "`{}`: {}{}",
            m.commands.test,
            green.report.describe(),
            tail(&green.report.stdout_tail)
        ),
    );

    // The sample's hidden tests define the test ids a grading expects.
    // Every step that runs only the packet's own test files through the
    // trusted pytest runner must have reported a set of ids on the sample:
    // an empty set would let any grading of the version run no test.
    // The gradings of this self-test share their mutant runs
    // (`grade::memo`), the calibration's included: a variant that changes
    // only the mutated file runs the same trees as the sample.
    let memo: std::sync::Arc<crate::grade::RunMemo> = std::sync::Arc::default();
    let calibration = if apart {
        grader.calibration_apart(packet, Some(&memo))
    } else {
        grader.calibration_with(packet, Some(&memo))
    };
    let fixed: Vec<&str> = m
        .steps
        .iter()
        .filter(|s| crate::grade::fixed_tests(s, &crate::trusted::plan(&s.run)))
        .map(|s| s.id.as_str())
        .collect();
    let unrecorded: Vec<&str> = fixed
        .iter()
        .copied()
        .filter(|id| calibration.expected.get(*id).is_none_or(|ids| ids.is_empty()))
        .collect();
    if !fixed.is_empty() {
        let counts: Vec<String> = calibration
            .expected
            .iter()
            .map(|(step, ids)| format!("{step}: {}", ids.len()))
            .collect();
        report.push(
            "the hidden tests' ids are recorded",
            unrecorded.is_empty(),
            if unrecorded.is_empty() {
                format!("{}; grading budget {} s (sample graded in {:.1} s)", counts.join(", "), Grader::budget(packet, &calibration).as_secs(), calibration.sample_ms as f64 / 1000.0)
            } else {
                format!("grading the sample reported no test id for step(s) {}: the hidden tests did not run", unrecorded.join(", "))
            },
        );
    }
    // Canaries: the twins of every hidden test module a step lays must be
    // able to fail on the sample (where their test passes).
    for (step, sc) in &calibration.canaries {
        let unreadable: Vec<String> = sc
            .files
            .iter()
            .filter_map(|(f, t)| t.error.as_ref().map(|e| format!("{f}: {e}")))
            .collect();
        let total: usize = sc.files.values().map(|t| t.slots().count()).sum();
        let covered = sc.covered();
        let uncovered = sc.uncovered();
        let ok = unreadable.is_empty() && (total == 0 || covered > 0);
        report.push(
            format!("the canaries of step {step} fail on the sample"),
            ok,
            if !unreadable.is_empty() {
                format!("the hidden tests could not be read for canaries: {}", unreadable.join("; "))
            } else if ok {
                format!("{covered} of {total} hidden tests have a twin that fails on the sample")
            } else {
                format!(
                    "no twin of the hidden tests fails on the sample, so no canary can be planted; tests without one: {}",
                    uncovered.join(", ")
                )
            },
        );
        if ok && !uncovered.is_empty() {
            report.warn(
                format!("every hidden test of step {step} has a canary"),
                format!(
                    "no twin of these fails on the sample (an assertion that does not run, or none the generator can contradict): {}",
                    uncovered.join(", ")
                ),
            );
        }
    }
    // The recorded calibration gets a salt of its own: the platform's
    // gradings of the version plant names nobody can derive.
    let mut recorded = (*calibration).clone();
    recorded.salt = crate::canary::random_salt();
    report.calibration = Some(recorded);

    // The sample grades with no finding, under the calibration above (the
    // grader's own, or this self-test's alone).
    let opts = GradeOptions {
        memo: Some(memo),
        calibration: Some(calibration.clone()),
        ..GradeOptions::default()
    };
    let sample_overlay =
        if packet.sample_dir().is_dir() { packet.sample_dir() } else { work.path().join("empty") };
    fs::create_dir_all(&sample_overlay).map_err(|e| e.to_string())?;
    match grader.grade_overlay(packet, &sample_overlay, &m.sample.times, &opts) {
        Ok(card) => {
            report.items.extend(crate::check::proves::check(m, &card));
            if let Some(item) = skipped_on_sample(m, &card) {
                report.items.push(item);
            }
            let mut ids: Vec<String> = card
                .findings
                .iter()
                .map(|f| format!("{} ({})", f.id, f.evidence.join("; ")))
                .collect();
            ids.extend(
                card.unevaluated.iter().map(|u| format!("{} unevaluated ({})", u.id, u.reason)),
            );
            report.push(
                "the sample grades clean",
                ids.is_empty(),
                if ids.is_empty() {
                    format!(
                        "decision {}, score {}",
                        card.scoring.decision,
                        card.scoring
                            .score
                            .map_or("-".into(), |s| format!("{s}/{}", card.scoring.max_score))
                    )
                } else {
                    format!("findings: {}", ids.join(", "))
                },
            );
        }
        Err(e) => report.push("the sample grades clean", false, e.to_string()),
    }

    // Each known-bad variant triggers exactly what it declares, and each
    // honest alternate grades clean. They are independent, so they are
    // graded side by side, one per core.
    let alternates = packet.alternates().map_err(|e| e.to_string())?;
    let jobs = m.variants.len() + alternates.len();
    let items = crate::par::map_indexed(jobs, |i| match m.variants.get(i) {
        Some(v) => check_variant(grader, packet, v, work.path(), &opts),
        None => check_alternate(
            grader,
            packet,
            &alternates[i - m.variants.len()],
            &probe,
            &gate,
            work.path(),
            &opts,
        ),
    });
    report.items.extend(items.into_iter().flatten());
    report.reused_runs = opts.memo.as_ref().map_or(0, |m| m.reused());

    // Every mutant is killed by the hidden tests, or explained.
    let (items, counts) =
        crate::check::mutants::check(grader, packet, &sample, work.path(), &calibration.expected);
    report.items.extend(items);
    report.mutants = counts;
    Ok(())
}

/// The hidden tests the packet's own sample run skips (an
/// `@unittest.skip`, a `t.Skip` under `-short`, a `test.skip`): they score
/// nobody (a skip is never counted), so the packet measures less than it
/// says. A problem of the packet, named here; None when a step runs
/// only the packet's tests and none of them was skipped on the sample, or
/// no step does.
pub fn skipped_on_sample(m: &Manifest, card: &Scorecard) -> Option<CheckItem> {
    let mut skipped = Vec::new();
    let mut any = false;
    for step in &m.steps {
        if !crate::grade::fixed_tests(step, &crate::trusted::plan(&step.run)) {
            continue;
        }
        any = true;
        let run_id = format!("step:{}", step.id);
        let Some(run) = card.receipt.runs.iter().find(|r| r.id == run_id) else { continue };
        for t in run.tests.iter().flatten().filter(|t| t.status == TestStatus::Skipped) {
            let why = t.message.as_deref().filter(|m| !m.is_empty());
            skipped.push(format!(
                "{}: {}::{}{}",
                step.id,
                t.classname,
                t.name,
                why.map(|w| format!(" ({w})")).unwrap_or_default()
            ));
        }
    }
    any.then(|| CheckItem {
        name: "no hidden test is skipped on the sample".into(),
        ok: skipped.is_empty(),
        detail: if skipped.is_empty() {
            "every hidden test ran on the sample".into()
        } else {
            format!(
                "{} hidden test(s) skipped when the packet's sample is graded, so they score no candidate: {} (drop the skip, or the test)",
                skipped.len(),
                skipped.join("; ")
            )
        },
        warning: false,
    })
}

/// Grades one variant; also returns a warning when the variant's failures
/// do not keep it from the best decision.
fn check_variant(
    grader: &Grader,
    packet: &Packet,
    v: &crate::manifest::Variant,
    work: &Path,
    opts: &GradeOptions,
) -> Vec<CheckItem> {
    let name = format!("variant {} triggers exactly {}", v.name, v.expect.join(", "));
    let item = |ok: bool, detail: String| {
        vec![CheckItem { name: name.clone(), ok, detail, warning: false }]
    };
    let m = &packet.manifest;
    let dir = work.join("variants").join(&v.name);
    if let Err(e) = packet.write_variant(v, &dir) {
        return item(false, format!("building the variant: {e}"));
    }
    let mut times = m.sample.times.clone();
    times.extend(v.times.clone());
    match grader.grade_overlay(packet, &dir, &times, opts) {
        Ok(card) => {
            let got: BTreeSet<&str> = card.findings.iter().map(|f| f.id.as_str()).collect();
            let want: BTreeSet<&str> = v.expect.iter().map(String::as_str).collect();
            if !card.unevaluated.is_empty() {
                let why: Vec<String> =
                    card.unevaluated.iter().map(|u| format!("{}: {}", u.id, u.reason)).collect();
                return item(false, format!("unevaluated: {}", why.join("; ")));
            }
            // Every failing test of a step with a `[proves.<step>]` table
            // proves an id the variant declares.
            let proof = (!m.proves.is_empty()).then(|| {
                let problems = variant_proof_problems(m, &card, &v.expect);
                CheckItem {
                    name: format!("variant {}'s failing hidden tests prove only its ids", v.name),
                    ok: problems.is_empty(),
                    detail: if problems.is_empty() {
                        format!("steps {}", m.proves.keys().cloned().collect::<Vec<_>>().join(", "))
                    } else {
                        problems.join("; ")
                    },
                    warning: false,
                }
            });
            if got == want {
                let best = match m.rubric.aggregate {
                    crate::manifest::Aggregate::Sum => m.bands.first().map(|b| b.decision.clone()),
                    crate::manifest::Aggregate::Separate => Some(m.rubric.pass_decision.clone()),
                };
                let warning = (best.as_deref() == Some(card.scoring.decision.as_str())).then(|| CheckItem {
                    name: format!("variant {} is kept from the best decision", v.name),
                    ok: false,
                    detail: format!("it triggers {} and still reaches {:?}: do those failures matter to the rubric?", v.expect.join(", "), card.scoring.decision),
                    warning: true,
                });
                return std::iter::once(CheckItem {
                    name,
                    ok: true,
                    detail: format!("decision {}", card.scoring.decision),
                    warning: false,
                })
                .chain(proof)
                .chain(warning)
                .collect();
            }
            let missing: Vec<&str> = want.difference(&got).copied().collect();
            let extra: Vec<String> = card
                .findings
                .iter()
                .filter(|f| !want.contains(f.id.as_str()))
                .map(|f| format!("{} ({})", f.id, f.evidence.join("; ")))
                .collect();
            let mut items = item(
                false,
                format!("missing [{}], unexpected [{}]", missing.join(", "), extra.join(", ")),
            );
            items.extend(proof);
            items
        }
        Err(e) => item(false, e.to_string()),
    }
}

fn tail(s: &str) -> String {
    let last: Vec<&str> = s.lines().rev().filter(|l| !l.trim().is_empty()).take(1).collect();
    last.first().map(|l| format!(" — {}", l.trim())).unwrap_or_default()
}

/// Grades alternate `name` as a candidate would hand it back: the tree a
/// candidate unpacks (starter, brief, pin file) overlaid by the alternate
/// (its folder, then its diff), zipped whole. It must pass the packet's test command, draw no finding,
/// leave nothing unevaluated and fail no hidden test that proves a failure.
fn check_alternate(
    grader: &Grader,
    packet: &Packet,
    name: &str,
    probe: &crate::env::EnvProbe,
    gate: &crate::starter::Gate,
    work: &Path,
    opts: &GradeOptions,
) -> Vec<CheckItem> {
    let m = &packet.manifest;
    let item = |ok: bool, detail: String| CheckItem {
        name: format!("alternate {name} grades clean"),
        ok,
        detail,
        warning: false,
    };
    let tree: PathBuf = work.join("alternates").join(name);
    let built = crate::starter::lay_received(packet, CHECK_SEED, probe, gate, &tree)
        .and_then(|()| packet.write_alternate(name, &tree));
    if let Err(e) = built {
        return vec![item(false, format!("building the alternate: {e}"))];
    }
    let mut problems = Vec::new();
    let limits = m.limits.apply(&default_limits());
    // Honest work need not pass the candidate's test command (a packet may
    // ask for a diff and keep the tree red): a failing run is a warning for
    // the author, and only what grading says can fail the alternate.
    let warning = match run_on_copy(
        grader.sandbox(),
        &tree,
        &work.join("alternates-run").join(name),
        |_| Ok(()),
        &m.commands.test,
        &limits,
        Vec::new(),
    ) {
        Ok(r) if r.report.success() && r.runner.as_ref().is_none_or(|r| r.passed()) => None,
        Ok(r) => Some(format!(
            "`{}` does not pass: {}{}",
            m.commands.test,
            r.report.describe(),
            tail(&r.report.stdout_tail)
        )),
        Err(e) => Some(format!("running `{}`: {e}", m.commands.test)),
    };
    let warning = warning.map(|detail| CheckItem {
        name: format!("alternate {name} passes the test command"),
        ok: false,
        detail,
        warning: true,
    });
    match grader.grade_overlay(packet, &tree, &BTreeMap::new(), opts) {
        Ok(card) => {
            problems.extend(
                card.findings
                    .iter()
                    .map(|f| format!("finding {} ({})", f.id, f.evidence.join("; "))),
            );
            problems.extend(
                card.unevaluated.iter().map(|u| format!("{} unevaluated ({})", u.id, u.reason)),
            );
            for (step, test, ids) in failing_proofs(m, &card) {
                problems.push(format!(
                    "hidden test {test} of step {step} fails (it proves {})",
                    if ids.is_empty() { "no listed id".into() } else { ids.join(" or ") }
                ));
            }
            if problems.is_empty() {
                let ok = item(
                    true,
                    format!(
                        "decision {}, score {}",
                        card.scoring.decision,
                        card.scoring
                            .score
                            .map_or("-".into(), |s| format!("{s}/{}", card.scoring.max_score))
                    ),
                );
                return std::iter::once(ok).chain(warning).collect();
            }
        }
        Err(e) => problems.push(format!("grading: {e}")),
    }
    std::iter::once(item(false, problems.join("; "))).chain(warning).collect()
}

/// The failing tests of every step with a `[proves.<step>]` table in
/// `card`: (step, test, the ids it proves).
fn failing_proofs(m: &Manifest, card: &Scorecard) -> Vec<(String, String, Vec<String>)> {
    let mut out = Vec::new();
    for (step, map) in &m.proves {
        let run_id = format!("step:{step}");
        let Some(tests) =
            card.receipt.runs.iter().find(|r| r.id == run_id).and_then(|r| r.tests.as_ref())
        else {
            continue;
        };
        for (test, ids) in proofs(map, tests) {
            out.push((step.clone(), test, ids));
        }
    }
    out
}

/// The failing (failed or errored) tests among `tests`, each with the
/// failure ids that the patterns of `map` say it proves (empty when no
/// pattern names it), in the order of `tests`.
pub fn proofs(map: &BTreeMap<String, Proves>, tests: &[TestOutcome]) -> Vec<(String, Vec<String>)> {
    tests
        .iter()
        .filter(|t| matches!(t.status, TestStatus::Failed | TestStatus::Error))
        .map(|t| {
            let mut ids: Vec<String> = map
                .iter()
                .filter(|(p, _)| crate::detect::test_matches(t, p))
                .flat_map(|(_, ids)| ids.ids().iter().cloned())
                .collect();
            ids.sort();
            ids.dedup();
            (format!("{}::{}", t.classname, t.name), ids)
        })
        .collect()
}

/// What is wrong with how a variant's failing tests map to the ids it
/// declares (`declared`): a failing test that proves no id, or only ids the
/// variant does not declare.
pub fn proof_problems(
    step: &str,
    proofs: &[(String, Vec<String>)],
    declared: &[String],
) -> Vec<String> {
    proofs
        .iter()
        .filter_map(|(test, ids)| {
            if ids.is_empty() {
                Some(format!(
                    "{test} (step {step}) fails and [proves.{step}] names no failure it proves"
                ))
            } else if !ids.iter().any(|id| declared.contains(id)) {
                Some(format!(
                    "{test} (step {step}) fails, proving {}, which the variant does not declare",
                    ids.join(" or ")
                ))
            } else {
                None
            }
        })
        .collect()
}

fn variant_proof_problems(m: &Manifest, card: &Scorecard, declared: &[String]) -> Vec<String> {
    let mut by_step: BTreeMap<String, Vec<(String, Vec<String>)>> = BTreeMap::new();
    for (step, test, ids) in failing_proofs(m, card) {
        by_step.entry(step).or_default().push((test, ids));
    }
    by_step.iter().flat_map(|(step, proofs)| proof_problems(step, proofs, declared)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, status: TestStatus) -> TestOutcome {
        TestOutcome { classname: "test_hidden".into(), name: name.into(), status, message: None }
    }

    fn map(entries: &[(&str, &[&str])]) -> BTreeMap<String, Proves> {
        entries
            .iter()
            .map(|(p, ids)| {
                let proves = if ids.len() == 1 {
                    Proves::One(ids[0].into())
                } else {
                    Proves::Any(ids.iter().map(|s| s.to_string()).collect())
                };
                (p.to_string(), proves)
            })
            .collect()
    }

    #[test]
    fn failing_tests_map_to_the_ids_they_prove() {
        use TestStatus::*;
        let m = map(&[
            ("test_restart_*", &["conflict-amnesia"]),
            ("test_hidden.py::test_replay", &["phantom-cache"]),
            ("test_shape", &["schema-generosity", "no-intent"]),
        ]);
        let check = |tests: Vec<TestOutcome>, expect: &[(&str, &[&str])]| {
            let got = proofs(&m, &tests);
            let want: Vec<(String, Vec<String>)> = expect
                .iter()
                .map(|(t, ids)| {
                    (format!("test_hidden::{t}"), ids.iter().map(|s| s.to_string()).collect())
                })
                .collect();
            assert_eq!(got, want, "{tests:?}");
        };
        check(
            vec![t("test_restart_conflict", Failed), t("test_replay", Passed)],
            &[("test_restart_conflict", &["conflict-amnesia"])],
        );
        // Errors count as failures; skipped and passed tests prove nothing.
        check(
            vec![t("test_replay", Error), t("test_restart_x", Skipped)],
            &[("test_replay", &["phantom-cache"])],
        );
        // A parametrised test is named by its base name; a list proves any of its ids.
        check(
            vec![t("test_shape[extra]", Failed)],
            &[("test_shape[extra]", &["no-intent", "schema-generosity"])],
        );
        // No pattern names it: it proves nothing listed.
        check(vec![t("test_other", Failed)], &[("test_other", &[])]);
        // Two patterns naming one test merge their ids.
        let m2 = map(&[("test_*", &["a"]), ("test_x", &["b"])]);
        assert_eq!(
            proofs(&m2, &[t("test_x", Failed)]),
            vec![("test_hidden::test_x".to_string(), vec!["a".to_string(), "b".to_string()])]
        );
    }

    #[test]
    fn proof_problems_name_undeclared_and_unmapped_failures() {
        let declared = vec!["phantom-cache".to_string()];
        let check = |proofs: &[(&str, &[&str])], expect: &[&str]| {
            let proofs: Vec<(String, Vec<String>)> = proofs
                .iter()
                .map(|(t, ids)| (t.to_string(), ids.iter().map(|s| s.to_string()).collect()))
                .collect();
            assert_eq!(
                proof_problems("hidden", &proofs, &declared),
                expect.iter().map(|s| s.to_string()).collect::<Vec<_>>()
            );
        };
        check(&[("a", &["phantom-cache"])], &[]);
        check(&[("a", &["conflict-amnesia", "phantom-cache"])], &[]);
        check(
            &[("a", &["conflict-amnesia"])],
            &[
                "a (step hidden) fails, proving conflict-amnesia, which the variant does not declare",
            ],
        );
        check(
            &[("b", &[])],
            &["b (step hidden) fails and [proves.hidden] names no failure it proves"],
        );
        check(&[], &[]);
    }
}
