//! Calibration: what grading the sample teaches, and the budget and wall limits it derives.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::ingest::ingest_with;
use crate::manifest::TIME_BASE;
use crate::packet::Packet;
use crate::run::run_on_copy;

use super::*;

/// What grading a packet version's sample measured: the test ids its
/// hidden tests define (per step whose test files the packet lays), how
/// long grading took, from which the default grading budget derives, and
/// how long each command took, from which a command's default wall limit
/// derives. `packet check` records it (`CheckReport::calibration`) and the
/// platform stores it with the published version.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Calibration {
    /// The packet digest the sample was graded under.
    #[serde(default)]
    pub digest: String,
    pub expected: BTreeMap<String, BTreeSet<String>>,
    pub sample_ms: u64,
    /// Wall time of each command of the sample's grading, by run id
    /// (`step:ID`, `script:N`, `mutant:ID`, and [`WITNESS_RUN_ID`] for its
    /// witnessed run), in milliseconds.
    #[serde(default)]
    pub run_ms: BTreeMap<String, u64>,
    /// The version of the canary data below (`guard::CANARY_FORMAT`); a
    /// calibration recorded before canaries has 0 and is measured again.
    #[serde(default)]
    pub canary_format: u32,
    /// The salt of every grading's canary names and choices; never shown
    /// to a candidate (a published version's self-test records a random
    /// one).
    #[serde(default)]
    pub salt: String,
    /// Each step's hidden test modules as canary templates, with the twins
    /// that failed on the sample while their test passed.
    #[serde(default)]
    pub canaries: BTreeMap<String, crate::canary::StepCanaries>,
    /// The hidden tests the sample passes, per step: for them only a pass
    /// counts (`runtime::only_a_pass`).
    #[serde(default)]
    pub passed: BTreeMap<String, BTreeSet<String>>,
    /// Framework changes the trusted runner saw while grading the sample:
    /// the packet's or pytest's own doing, never the candidate's.
    #[serde(default)]
    pub baseline: BTreeSet<String>,
}

/// What one grading observed that a calibration keeps: the test ids each
/// fixed step collected, each step's twins, the tests it passed, and the
/// framework changes its runs saw.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub collected: BTreeMap<String, Vec<String>>,
    pub twins: BTreeMap<String, crate::canary::Verdict>,
    pub passed: BTreeMap<String, BTreeSet<String>>,
    pub integrity: BTreeSet<String>,
}

/// The run id under which a calibration times the witnessed run of the
/// sample (`Calibration::run_ms`; the workspace test command on the
/// starter overlaid by the sample, no hidden file laid): a witnessed run's
/// default wall limit is [`WALL_FACTOR`] times that, at least
/// [`WALL_FLOOR`], like a step's, and never above the packet's `[limits]`.
pub const WITNESS_RUN_ID: &str = "witness";

/// The floor of the default grading budget.
pub const BUDGET_FLOOR: Duration = Duration::from_secs(120);

/// The floor of a command's sample-derived wall limit.
pub const WALL_FLOOR: Duration = Duration::from_secs(30);

/// How many times the sample's time a command's derived wall limit is.
pub const WALL_FACTOR: u64 = 10;

impl Calibration {
    /// The sample-derived wall limit of run `id`: ten times what the same
    /// command took on the sample, whole seconds, at least [`WALL_FLOOR`];
    /// a mutant run takes the slowest mutant run of the sample. `None` when
    /// the sample's grading did not time the command.
    pub fn derived_wall(&self, id: &str) -> Option<(Duration, u64)> {
        let ms = if id.starts_with("mutant:") {
            self.run_ms.iter().filter(|(k, _)| k.starts_with("mutant:")).map(|(_, v)| *v).max()
        } else {
            self.run_ms.get(id).copied()
        }?;
        let secs = ms.saturating_mul(WALL_FACTOR).div_ceil(1000);
        Some((WALL_FLOOR.max(Duration::from_secs(secs)), ms))
    }
}

impl Grader {
    /// The calibration a grading uses: the one recorded for this digest in
    /// `opts`, else this grader's own measurement.
    pub(super) fn calibration_for(&self, packet: &Packet, opts: &GradeOptions) -> Arc<Calibration> {
        match &opts.calibration {
            Some(c)
                if c.digest == packet.digest && c.canary_format == crate::guard::CANARY_FORMAT =>
            {
                c.clone()
            }
            _ => self.calibration(packet),
        }
    }

    /// What grading `packet`'s sample teaches (its hidden tests' ids, its
    /// grading time), measured once per packet version and grader. A
    /// sample that cannot be graded gives an empty calibration: no test
    /// ids are enforced and the budget is the floor.
    pub fn calibration(&self, packet: &Packet) -> Arc<Calibration> {
        self.calibration_with(packet, None)
    }

    /// [`Grader::calibration`]; a measurement it makes takes its mutant
    /// runs from `memo` and leaves them there (`grade::memo`), for the
    /// self-test's grading of the sample, which runs the very same ones.
    pub fn calibration_with(
        &self,
        packet: &Packet,
        memo: Option<&Arc<RunMemo>>,
    ) -> Arc<Calibration> {
        // One cell per version: concurrent gradings of a new version wait
        // for one calibration instead of each running their own.
        let cell = match self.calibrations.lock() {
            Ok(mut map) => map.entry(packet.digest.clone()).or_default().clone(),
            Err(_) => Arc::new(OnceLock::new()),
        };
        cell.get_or_init(|| Arc::new(self.calibrate(packet, memo))).clone()
    }

    /// [`Grader::calibration`] measured for the caller alone: neither taken
    /// from this grader's cell for the version nor kept in it. A self-test
    /// at idle priority measures so, so that a grading (at normal priority)
    /// never waits behind a measurement a busy machine starves.
    /// Its mutant runs go through `memo` as [`Grader::calibration_with`]'s.
    pub fn calibration_apart(
        &self,
        packet: &Packet,
        memo: Option<&Arc<RunMemo>>,
    ) -> Arc<Calibration> {
        Arc::new(self.calibrate(packet, memo))
    }

    /// Whether this grader keeps a calibration of the version `digest`
    /// (measured, or being measured).
    pub fn holds_calibration(&self, digest: &str) -> bool {
        self.calibrations.lock().is_ok_and(|map| map.contains_key(digest))
    }

    /// Drops this grader's calibration of the version `digest`, so the
    /// next grading or self-test of it measures anew (one measured while
    /// starved at idle priority, say, is no measure; gradings already
    /// holding it keep theirs).
    pub fn forget_calibration(&self, digest: &str) {
        if let Ok(mut map) = self.calibrations.lock() {
            map.remove(digest);
        }
    }

    fn calibrate(&self, packet: &Packet, memo: Option<&Arc<RunMemo>>) -> Calibration {
        let measured = (|| -> Result<Calibration, GradeError> {
            let work = crate::workdir::WorkDir::new("gatehouse-grade-")
                .map_err(io("creating a work folder"))?;
            let zip = work.path().join("sample.zip");
            let absolute: BTreeMap<String, i64> = packet
                .manifest
                .sample
                .times
                .iter()
                .map(|(k, v)| (k.clone(), TIME_BASE + v))
                .collect();
            crate::ingest::write_zip_from_dir(&packet.sample_dir(), &zip, &absolute, TIME_BASE)
                .map_err(io("zipping the sample"))?;
            let ingested = ingest_with(
                &zip,
                &work.path().join("submission"),
                &self.ingest_limits,
                &ingest_options(packet)?,
            )?;
            // The canary templates of the hidden test modules; the sample
            // is graded with every twin planted.
            let templates = crate::guard::generate(&self.sandbox, packet)?;
            let salt = crate::canary::local_salt(&packet.digest);
            let canaries = crate::guard::Canaries {
                steps: &templates,
                calibrating: true,
                salt: &salt,
                submission: &ingested.archive_sha256,
                apart: packet.manifest.judge_apart(),
                packet: &packet.manifest.packet.slug,
                go_cache: self.go_cache.as_ref(),
            };
            let started = Instant::now();
            let (card, observed) = self.grade_ingested(
                packet,
                &ingested,
                work.path(),
                &GradeOptions { memo: memo.cloned(), ..GradeOptions::default() },
                None,
                &canaries,
            )?;
            let sample_ms = started.elapsed().as_millis() as u64;
            let mut canaries = crate::guard::calibrated_from(&templates, &observed.twins);
            let expected = observed
                .collected
                .into_iter()
                .filter(|(_, ids)| !ids.is_empty())
                .map(|(step, ids)| (step, ids.into_iter().collect()))
                .collect();
            // A command of the sample that hit a cap is no measure of it.
            let mut run_ms: BTreeMap<String, u64> = card
                .receipt
                .timings
                .runs
                .iter()
                .zip(&card.receipt.runs)
                .filter(|(_, r)| !r.timed_out && r.limit_hit.is_none())
                .map(|(t, _)| (t.id.clone(), t.wall_ms.ceil() as u64))
                .collect();
            // A run that carried every twin (calibration plants them all)
            // ran more tests than a graded run does: time it per real test.
            for (id, ms) in run_ms.iter_mut() {
                let Some(twins) = card.receipt.canaries.get(id) else { continue };
                let real = card
                    .receipt
                    .runs
                    .iter()
                    .find(|r| &r.id == id)
                    .and_then(|r| r.tests.as_ref())
                    .map_or(0, |t| t.len());
                if real > 0 {
                    *ms = (*ms * real as u64).div_ceil((real + twins) as u64);
                }
            }
            // Each step's twins budget: its share, by what its run cost
            // without its twins, of a share of the grading without twins.
            let twins_us = |sc: &crate::canary::StepCanaries| -> u64 {
                sc.cost.values().flat_map(|m| m.values()).flat_map(|c| c.twins_us.values()).sum()
            };
            let step_us: BTreeMap<String, u64> = canaries
                .iter()
                .map(|(step, sc)| {
                    let wall = (card.receipt.timings.runs.iter())
                        .find(|t| t.id == format!("step:{step}"))
                        .map_or(0, |t| (t.wall_ms * 1000.0) as u64);
                    let tests: u64 = (sc.files.iter())
                        .filter_map(|(p, t)| {
                            sc.cost.get(p).map(|c| crate::canary::module_cost(t, c))
                        })
                        .sum();
                    (step.clone(), wall.saturating_sub(twins_us(sc)).max(tests))
                })
                .collect();
            let all_twins: u64 = canaries.values().map(twins_us).sum();
            let cpu_us =
                (card.receipt.timings.runs.iter().map(|t| t.cpu_ms).sum::<f64>() * 1000.0) as u64;
            let budget = crate::canary::Budget::of_sample(sample_ms * 1000, cpu_us, all_twins);
            let steps_us: u64 = step_us.values().sum();
            for (step, sc) in canaries.iter_mut() {
                sc.budget_us = budget.share(step_us[step], steps_us).us;
            }
            // The witnessed run of the sample, timed after the grading (not
            // part of `sample_ms`).
            let workspace = work.path().join("witness");
            crate::starter::assemble(packet, &ingested, &workspace)
                .map_err(io("assembling the sample's witnessed run"))?;
            let limits = packet.manifest.limits.apply(&default_limits());
            let ran = run_on_copy(
                &self.sandbox,
                &workspace,
                &work.path().join("witness-run"),
                |_| Ok(()),
                packet.manifest.witness_test(),
                &limits,
                Vec::new(),
            )?;
            if !ran.report.timed_out && ran.report.limit_hit.is_none() {
                run_ms.insert(WITNESS_RUN_ID.to_string(), ran.report.wall.as_millis() as u64);
            }
            Ok(Calibration {
                digest: packet.digest.clone(),
                expected,
                sample_ms,
                run_ms,
                canary_format: crate::guard::CANARY_FORMAT,
                salt,
                canaries,
                passed: observed.passed,
                baseline: observed.integrity,
            })
        })();
        measured.unwrap_or_else(|_| Calibration {
            digest: packet.digest.clone(),
            canary_format: crate::guard::CANARY_FORMAT,
            salt: crate::canary::local_salt(&packet.digest),
            ..Calibration::default()
        })
    }

    /// The grading budget: `[limits] grading_secs`, else ten times the
    /// sample's grading time, at least twice the longest command's wall
    /// limit and at least [`BUDGET_FLOOR`].
    pub fn budget(packet: &Packet, calibration: &Calibration) -> Duration {
        let m = &packet.manifest;
        if let Some(s) = m.limits.grading_secs {
            return Duration::from_secs(s);
        }
        let base = m.limits.apply(&default_limits());
        let mut longest = base.wall;
        for s in &m.steps {
            longest = longest.max(s.limits.apply(&base).wall);
        }
        if let Some(mu) = &m.mutation {
            longest = longest.max(mu.limits.apply(&base).wall);
        }
        BUDGET_FLOOR
            .max(Duration::from_millis(calibration.sample_ms.saturating_mul(10)))
            .max(longest * 2)
    }
}
