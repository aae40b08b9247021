//! `packet check`: the self-test a packet must pass before it is published.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::grade::{GradeOptions, Grader, default_limits};
use crate::packet::{Packet, copy_path};
use crate::run::run_on_copy;

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
}

impl CheckReport {
    pub fn ok(&self) -> bool {
        !self.items.is_empty() && self.items.iter().all(|i| i.ok || i.warning)
    }

    fn push(&mut self, name: impl Into<String>, ok: bool, detail: impl Into<String>) {
        self.items.push(CheckItem { name: name.into(), ok, detail: detail.into(), warning: false });
    }

    fn warn(&mut self, name: impl Into<String>, detail: impl Into<String>) {
        self.items.push(CheckItem { name: name.into(), ok: false, detail: detail.into(), warning: true });
    }

    /// Failed propositions (warnings left out).
    pub fn failures(&self) -> impl Iterator<Item = &CheckItem> {
        self.items.iter().filter(|i| !i.ok && !i.warning)
    }

    pub fn warnings(&self) -> impl Iterator<Item = &CheckItem> {
        self.items.iter().filter(|i| i.warning)
    }
}

/// The seed the self-test fills into the starter.
pub const CHECK_SEED: &str = "0";

/// Runs every proposition of the self-test on the packet at `dir`.
pub fn check_packet(grader: &Grader, dir: &Path) -> CheckReport {
    let mut report = CheckReport { packet: dir.display().to_string(), items: Vec::new() };
    let packet = match Packet::load(dir) {
        Ok(p) => p,
        Err(e) => {
            report.push("manifest is valid", false, e.to_string());
            return report;
        }
    };
    report.packet = packet.manifest.packet.slug.clone();
    report.push("manifest is valid", true, format!("version {}, digest {}", packet.manifest.packet.version, &packet.digest[..12]));
    if let Err(e) = check_all(grader, &packet, &mut report) {
        report.push("self-test ran to the end", false, e);
    }
    report
}

fn check_all(grader: &Grader, packet: &Packet, report: &mut CheckReport) -> Result<(), String> {
    let m = &packet.manifest;
    let work = tempfile::Builder::new().prefix("gatehouse-check-").tempdir().map_err(|e| format!("creating a work folder: {e}"))?;
    let limits = m.limits.apply(&default_limits());
    for (name, detail) in crate::lint::lint(packet) {
        report.warn(name, detail);
    }

    // Every failure id has a variant that triggers it.
    let exercised: BTreeSet<&str> = m.variants.iter().flat_map(|v| v.expect.iter().map(String::as_str)).collect();
    let unexercised: Vec<&str> = m.failures.iter().map(|f| f.id.as_str()).filter(|id| !exercised.contains(id)).collect();
    report.push(
        "every failure id has a known-bad variant",
        unexercised.is_empty(),
        if unexercised.is_empty() { format!("{} ids", m.failures.len()) } else { format!("no variant expects {}", unexercised.join(", ")) },
    );

    // The starter is red, the sample green, under the packet's test command,
    // on the starter exactly as a candidate receives it: seed filled in,
    // the brief and the pin file beside it.
    let starter = work.path().join("starter");
    let tools: Vec<String> = m.environment.tools.keys().cloned().collect();
    let probe = grader.probe(&tools).map_err(|e| e.to_string())?;
    let starter_zip = work.path().join("starter.zip");
    crate::starter::write_starter_pinned(packet, CHECK_SEED, &probe, &crate::starter::Gate::placeholders(), &starter_zip)
        .map_err(|e| format!("writing the starter zip: {e}"))?;
    crate::ingest::ingest(&starter_zip, &starter, &grader.ingest_limits).map_err(|e| format!("the starter zip does not ingest: {e}"))?;
    let red = run_on_copy(grader.sandbox(), &starter, &work.path().join("red"), |_| Ok(()), &m.commands.test, &limits, Vec::new())
        .map_err(|e| e.to_string())?;
    let red_ok = !red.report.success() && !red.report.timed_out && red.report.limit_hit.is_none() && red.runner.as_ref().is_none_or(|r| !r.passed());
    report.push(
        "the starter (as a candidate receives it) is red",
        red_ok,
        format!("`{}`: {:?}{}{}", m.commands.test, red.report.exit, if red.report.timed_out { ", timed out" } else { "" }, tail(&red.report.stdout_tail)),
    );

    let sample = work.path().join("sample-tree");
    copy_path(&starter, &sample).map_err(|e| format!("copying the starter: {e}"))?;
    if packet.sample_dir().is_dir() {
        copy_path(&packet.sample_dir(), &sample).map_err(|e| format!("laying the sample: {e}"))?;
    }
    let green = run_on_copy(grader.sandbox(), &sample, &work.path().join("green"), |_| Ok(()), &m.commands.test, &limits, Vec::new())
        .map_err(|e| e.to_string())?;
    report.push(
        "the sample passes the test command",
        green.report.success() && green.runner.as_ref().is_none_or(|r| r.passed()),
        format!("`{}`: {:?}{}", m.commands.test, green.report.exit, tail(&green.report.stdout_tail)),
    );

    // The sample's hidden tests define the test ids a grading expects.
    let calibration = grader.calibration(packet);
    if !calibration.expected.is_empty() {
        let counts: Vec<String> = calibration.expected.iter().map(|(step, ids)| format!("{step}: {}", ids.len())).collect();
        report.push(
            "the hidden tests' ids are recorded",
            true,
            format!("{}; grading budget {} s (sample graded in {:.1} s)", counts.join(", "), Grader::budget(packet, &calibration).as_secs(), calibration.sample_ms as f64 / 1000.0),
        );
    }

    // The sample grades with no finding.
    let opts = GradeOptions::default();
    let sample_overlay = if packet.sample_dir().is_dir() { packet.sample_dir() } else { work.path().join("empty") };
    fs::create_dir_all(&sample_overlay).map_err(|e| e.to_string())?;
    match grader.grade_overlay(packet, &sample_overlay, &m.sample.times, &opts) {
        Ok(card) => {
            let mut ids: Vec<String> = card.findings.iter().map(|f| format!("{} ({})", f.id, f.evidence.join("; "))).collect();
            ids.extend(card.unevaluated.iter().map(|u| format!("{} unevaluated ({})", u.id, u.reason)));
            report.push(
                "the sample grades clean",
                ids.is_empty(),
                if ids.is_empty() {
                    format!("decision {}, score {}", card.decision, card.score.map_or("-".into(), |s| format!("{s}/{}", card.max_score)))
                } else {
                    format!("findings: {}", ids.join(", "))
                },
            );
        }
        Err(e) => report.push("the sample grades clean", false, e.to_string()),
    }

    // Each known-bad variant triggers exactly what it declares. Variants are
    // independent, so they are graded side by side, one per core.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(m.variants.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut items: Vec<(usize, (CheckItem, Option<CheckItem>))> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(v) = m.variants.get(i) else { break };
                        done.push((i, check_variant(grader, packet, v, work.path())));
                    }
                    done
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    });
    items.sort_by_key(|(i, _)| *i);
    report.items.extend(items.into_iter().flat_map(|(_, (item, warning))| std::iter::once(item).chain(warning)));

    // Every mutant is killed by the hidden tests.
    if let Some(mu) = &m.mutation {
        let step = m.step(&mu.hidden_step).ok_or("mutation.hidden_step is not a step")?;
        let step_limits = step.limits.apply(&limits);
        for (id, mutant) in packet.mutants().map_err(|e| e.to_string())? {
            let dir = work.path().join("mutants").join(&id);
            let r = run_on_copy(
                grader.sandbox(),
                &sample,
                &dir,
                |w| {
                    packet.lay_into(&step.lay, w)?;
                    crate::packet::write_file(&crate::packet::safe_join(w, &mu.target)?, &mutant)
                },
                &step.run,
                &step_limits,
                crate::run::step_env(&step.env),
            )
            .map_err(|e| e.to_string())?;
            let _ = fs::remove_dir_all(&dir);
            let killed = !r.report.success() || r.runner.as_ref().is_some_and(|r| !r.passed());
            report.push(format!("mutant {id} is killed by step {}", step.id), killed, format!("{:?}", r.report.exit));
        }
    }
    Ok(())
}

/// Grades one variant; also returns a warning when the variant's failures
/// do not keep it from the best decision.
fn check_variant(grader: &Grader, packet: &Packet, v: &crate::manifest::Variant, work: &Path) -> (CheckItem, Option<CheckItem>) {
    let name = format!("variant {} triggers exactly {}", v.name, v.expect.join(", "));
    let item = |ok: bool, detail: String| (CheckItem { name: name.clone(), ok, detail, warning: false }, None);
    let m = &packet.manifest;
    let dir = work.join("variants").join(&v.name);
    if let Err(e) = packet.write_variant(v, &dir) {
        return item(false, format!("building the variant: {e}"));
    }
    let mut times = m.sample.times.clone();
    times.extend(v.times.clone());
    match grader.grade_overlay(packet, &dir, &times, &GradeOptions::default()) {
        Ok(card) => {
            let got: BTreeSet<&str> = card.findings.iter().map(|f| f.id.as_str()).collect();
            let want: BTreeSet<&str> = v.expect.iter().map(String::as_str).collect();
            if !card.unevaluated.is_empty() {
                let why: Vec<String> = card.unevaluated.iter().map(|u| format!("{}: {}", u.id, u.reason)).collect();
                return item(false, format!("unevaluated: {}", why.join("; ")));
            }
            if got == want {
                let best = match m.rubric.aggregate {
                    crate::manifest::Aggregate::Sum => m.bands.first().map(|b| b.decision.clone()),
                    crate::manifest::Aggregate::Separate => Some(m.rubric.pass_decision.clone()),
                };
                let warning = (best.as_deref() == Some(card.decision.as_str())).then(|| CheckItem {
                    name: format!("variant {} is kept from the best decision", v.name),
                    ok: false,
                    detail: format!("it triggers {} and still reaches {:?}: do those failures matter to the rubric?", v.expect.join(", "), card.decision),
                    warning: true,
                });
                return (CheckItem { name, ok: true, detail: format!("decision {}", card.decision), warning: false }, warning);
            }
            let missing: Vec<&str> = want.difference(&got).copied().collect();
            let extra: Vec<String> = card
                .findings
                .iter()
                .filter(|f| !want.contains(f.id.as_str()))
                .map(|f| format!("{} ({})", f.id, f.evidence.join("; ")))
                .collect();
            item(false, format!("missing [{}], unexpected [{}]", missing.join(", "), extra.join(", ")))
        }
        Err(e) => item(false, e.to_string()),
    }
}

fn tail(s: &str) -> String {
    let last: Vec<&str> = s.lines().rev().filter(|l| !l.trim().is_empty()).take(1).collect();
    last.first().map(|l| format!(" — {}", l.trim())).unwrap_or_default()
}
