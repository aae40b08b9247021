//! The grading pipeline: ingest, assemble, replay steps and scripts, run
//! mutants, detect, score, and write the scorecard and its receipt.
//!
//! This file holds `Grader`, `GradeOptions`, `GradeError` and the entry points
//! (`grade_zip`, `grade_overlay`); `pipeline` is one grading of an ingested
//! submission (steps, detector scripts, mutants, detection, the receipt);
//! `calibration` what grading the sample teaches (the hidden tests' ids, the
//! grading time the default budget derives from, each command's time its
//! default wall limit derives from) and the limits derived from it; `memo` the
//! mutant runs one self-test's gradings share (`GradeOptions::memo`, set only
//! by `check`, the calibration it measures included: keyed by the whole
//! workspace with the mutant in place and the command; a mutant run plants no
//! twin, so calibrating changes nothing it measures; a run cut at a limit is
//! not kept); `probe` the environment probe; `receipt` the scorecard and
//! receipt types and the receipt digest; `scoring` the one scoring of grading
//! and rescoring. Everything public is re-exported from `grade`
//! (`grader::grade::Scorecard`, `Calibration`, ...).
//!
//! `rescore` applies reviewer levels to a stored scorecard without running
//! anything; the first rescoring by a reviewer keeps the grader's digest as
//! `Receipt::graded_digest`, which the new digest covers, so a receipt says
//! what it was before any human changed it.
//!
//! The probe runs once per `Grader` (each caller runs it with no lock held, so
//! a grading never waits behind a background self-test's probe that idle
//! priority starves; two callers at once both probe, and the first answer kept
//! is final). The calibration runs once per packet version
//! (`Grader::calibration`). `packet check` records it in its report; the server
//! stores the report with the version and hands the calibration back at grading
//! (`GradeOptions::calibration`, `grading::recorded_calibration` in the
//! server), so the ids a published version's gradings enforce are the ones its
//! self-test saw. Built-in versions are self-tested by the server too (in the
//! background), so theirs are recorded the same way once that check has run.
//!
//! Each `[[step]]` runs on a fresh copy of the workspace with its hidden files
//! and the harness laid in; JUnit XML is read where the step writes it, and the
//! files it names in `keep` (request logs, recomputed ledgers) are kept for
//! detectors. Each distinct detector script runs once, with what the steps kept
//! under `.gatehouse/kept/`, and the candidate's tests run against each mutant
//! of the sample.

mod calibration;
pub mod memo;
mod pipeline;
mod probe;
mod receipt;
mod scoring;

pub use calibration::{
    BUDGET_FLOOR, Calibration, Observed, WALL_FACTOR, WALL_FLOOR, WITNESS_RUN_ID,
};
pub use pipeline::{UNCONFINED_EVIDENCE, fixed_tests};
pub use receipt::{
    FrozenEntry, LimitsView, PacketRef, Receipt, RunEntry, RunTiming, Scorecard, SubmissionRef,
    Timings, receipt_digest,
};
pub use scoring::{rescore, reviewer_levels};

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use crate::ingest::{IngestError, IngestLimits, IngestOptions, ingest_with};
use crate::manifest::TIME_BASE;
use crate::packet::Packet;
use crate::run::RunError;
use crate::sandbox::{Limits, Sandbox, SandboxError};
use crate::score::HumanScore;

/// Why grading did not produce a scorecard.
#[derive(Debug, thiserror::Error)]
pub enum GradeError {
    /// The submission was refused at ingestion; the message says why.
    #[error("submission refused: {0}")]
    Refused(#[from] IngestError),
    /// The sandbox machinery failed (not the submission).
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The packet is broken (a detector script crashed, a lay is missing).
    #[error("packet error: {0}")]
    Packet(String),
    /// The grader's own file work failed; `context` says what it was doing.
    #[error("grader I/O error: {context}: {source}")]
    Io { context: String, source: std::io::Error },
}

impl From<RunError> for GradeError {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Sandbox(s) => GradeError::Sandbox(s),
            RunError::Io { context, source } => GradeError::Io { context, source },
        }
    }
}

/// What ingestion must know of `packet`'s workspace: the top-level names of
/// its starter and sample, so that a submission of only `taxlib/` is not
/// mistaken for a folder zipped around the workspace.
pub fn ingest_options(packet: &Packet) -> Result<IngestOptions, GradeError> {
    IngestOptions::for_workspace(&[packet.starter_dir(), packet.sample_dir()])
        .map_err(io("listing the starter and sample"))
}

fn io(context: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> GradeError {
    move |source| GradeError::Io { context: context.to_string(), source }
}

/// A failure whose detector could not be evaluated, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unevaluated {
    pub id: String,
    pub reason: String,
}

/// Options for one grading.
#[derive(Debug, Clone, Default)]
pub struct GradeOptions {
    /// Reviewer levels for human and auto-override criteria.
    pub human: BTreeMap<String, HumanScore>,
    /// What the platform witnessed for this submission (runs and the model
    /// meter's ledger); `None` when the candidate worked offline or the
    /// grading is not the platform's (the CLI, self-tests).
    pub witness: Option<crate::witness::Witness>,
    /// The calibration recorded when the packet version was self-tested
    /// (`CheckReport::calibration`, stored with the published version): the
    /// hidden tests' ids a grading must report, and the sample's times the
    /// budget and the per-command wall limits derive from. `None`, or one
    /// recorded for another digest: this grader measures its own, once.
    pub calibration: Option<Arc<Calibration>>,
    /// Mutant runs shared by the gradings of one self-test (`memo`); only
    /// `packet check` sets it.
    pub memo: Option<Arc<RunMemo>>,
}

/// One self-test's memo of mutant runs (`GradeOptions::memo`).
pub type RunMemo = memo::Memo<crate::run::Ran>;

/// What the probe found once per grader: the interpreter's version, its
/// standard library and the modules the test runner loads.
type Probed = (Option<String>, BTreeSet<String>, BTreeSet<String>);

pub struct Grader {
    sandbox: Sandbox,
    pub ingest_limits: IngestLimits,
    /// The interpreter, its standard library and the modules the test
    /// runner loads, probed once.
    python: OnceLock<Probed>,
    /// The host folder mounted read-only at `/gatehouse` (the trusted
    /// runner and the harness); kept for the grader's life.
    _tools: Option<crate::workdir::WorkDir>,
    /// What grading the sample taught about each packet version, by digest.
    calibrations: Mutex<BTreeMap<String, Arc<OnceLock<Arc<Calibration>>>>>,
    /// Tool versions, probed once each.
    tools: Mutex<BTreeMap<String, Option<String>>>,
    /// The Go judge's builds kept between runs (`lang::go::cache`).
    go_cache: Option<crate::lang::go::cache::GoCache>,
}

/// Default caps for every command, before the packet's `[limits]`.
pub fn default_limits() -> Limits {
    Limits::default()
}

impl Grader {
    /// The Go judge's builds kept between runs (`lang::go::cache`), when
    /// this grader keeps them.
    pub fn go_cache(&self) -> Option<&crate::lang::go::cache::GoCache> {
        self.go_cache.as_ref()
    }

    /// A grader over `sandbox`. Without the tools mount (see
    /// [`Grader::for_host`]) commands run as written, not through the
    /// trusted runner.
    pub fn new(sandbox: Sandbox) -> Grader {
        Grader {
            sandbox,
            ingest_limits: IngestLimits::default(),
            python: OnceLock::new(),
            _tools: None,
            calibrations: Mutex::new(BTreeMap::new()),
            tools: Mutex::new(BTreeMap::new()),
            go_cache: crate::lang::go::cache::GoCache::new().ok(),
        }
    }

    /// A grader with the host's default sandbox and the trusted runner
    /// mounted read-only at `/gatehouse`.
    pub fn for_host() -> Result<Grader, SandboxError> {
        let tools = crate::trusted::tools_dir().map_err(|e| SandboxError {
            call: "writing the grader's tools folder".into(),
            detail: e.to_string(),
        })?;
        let mut config = Sandbox::host_default_config();
        // The tools' bytecode, for the sandbox's interpreter (best effort:
        // without it each run compiles what it imports).
        if let Some(python) =
            config.path_dirs.iter().map(|d| d.join("python3")).find(|p| p.is_file())
        {
            let _ = crate::trusted::compile_tools(&python, tools.path());
        }
        config.tool_dir = Some(tools.path().to_path_buf());
        let mut grader = Grader::new(Sandbox::new(config)?);
        grader._tools = Some(tools);
        Ok(grader)
    }

    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// This grader over a sandbox that reports the Landlock ABI `abi`
    /// ([`Sandbox::assume_landlock_abi`]); for tests of a host without
    /// Landlock.
    #[doc(hidden)]
    pub fn assume_landlock_abi(self, abi: u32) -> Grader {
        Grader { sandbox: self.sandbox.assume_landlock_abi(abi), ..self }
    }

    /// Grades the submission archive `zip` against `packet`.
    pub fn grade_zip(
        &self,
        packet: &Packet,
        zip: &Path,
        opts: &GradeOptions,
    ) -> Result<Scorecard, GradeError> {
        let work = crate::workdir::WorkDir::new("gatehouse-grade-")
            .map_err(io("creating a work folder"))?;
        let ingested = ingest_with(
            zip,
            &work.path().join("submission"),
            &self.ingest_limits,
            &ingest_options(packet)?,
        )?;
        let calibration = self.calibration_for(packet, opts);
        let canaries = crate::guard::Canaries {
            steps: &calibration.canaries,
            calibrating: false,
            salt: &calibration.salt,
            submission: &ingested.archive_sha256,
            apart: packet.manifest.judge_apart(),
            packet: &packet.manifest.packet.slug,
            go_cache: self.go_cache.as_ref(),
        };
        Ok(self
            .grade_ingested(packet, &ingested, work.path(), opts, Some(&calibration), &canaries)?
            .0)
    }

    /// Grades the folder `overlay` (laid over the starter) as if it were a
    /// submission: it is zipped with `times` and goes through ingestion.
    pub fn grade_overlay(
        &self,
        packet: &Packet,
        overlay: &Path,
        times: &BTreeMap<String, i64>,
        opts: &GradeOptions,
    ) -> Result<Scorecard, GradeError> {
        let work = crate::workdir::WorkDir::new("gatehouse-grade-")
            .map_err(io("creating a work folder"))?;
        let zip = work.path().join("submission.zip");
        let absolute: BTreeMap<String, i64> =
            times.iter().map(|(k, v)| (k.clone(), TIME_BASE + v)).collect();
        crate::ingest::write_zip_from_dir(overlay, &zip, &absolute, TIME_BASE)
            .map_err(io(format!("zipping {}", overlay.display())))?;
        let ingested = ingest_with(
            &zip,
            &work.path().join("submission"),
            &self.ingest_limits,
            &ingest_options(packet)?,
        )?;
        let calibration = self.calibration_for(packet, opts);
        let canaries = crate::guard::Canaries {
            steps: &calibration.canaries,
            calibrating: false,
            salt: &calibration.salt,
            submission: &ingested.archive_sha256,
            apart: packet.manifest.judge_apart(),
            packet: &packet.manifest.packet.slug,
            go_cache: self.go_cache.as_ref(),
        };
        Ok(self
            .grade_ingested(packet, &ingested, work.path(), opts, Some(&calibration), &canaries)?
            .0)
    }
}
