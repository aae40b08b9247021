//! The grading pipeline: ingest, assemble, replay steps and scripts, run
//! mutants, detect, score, and write the scorecard and its receipt.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::detect::{Evidence, script_key};
use crate::env::{EnvProbe, EnvReport, env_report};
use crate::evidence::{MutantResult, MutationOutcome, StepOutcome, TestOutcome};
use crate::ingest::{
    IngestError, IngestLimits, IngestOptions, Ingested, IngestedFile, Normalised, ingest_with,
};
use crate::manifest::{Detector, Lay, Mode, TIME_BASE};
use crate::packet::Packet;
use crate::run::{RunError, RunRecord, parse_script_output, read_junit, run_on_copy, step_env};
use crate::sandbox::{Features, LimitHit, Limits, Sandbox, SandboxError};
use crate::score::{Finding, HumanScore, Measures, Scoring, score};
use crate::tree::{Root, list_files, tree_digest};
use crate::trusted::{Plan, RunnerKind};

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

/// The environment probe, run as `python3 -c PROBE TOOL...`; prints one
/// JSON object. No single quotes, so it fits in a shell's single quotes.
const PROBE: &str = r#"
import json, subprocess, sys
from importlib import metadata
tools = {}
for name in sys.argv[1:]:
    try:
        tools[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        try:
            done = subprocess.run([name, "--version"], capture_output=True, text=True, timeout=10)
            tools[name] = (done.stdout + done.stderr).strip()
        except (OSError, subprocess.SubprocessError):
            tools[name] = None
runner = []
try:
    import contextlib, io, tempfile, pytest
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        pytest.main(["-q", "-p", "no:cacheprovider", "--collect-only", tempfile.mkdtemp()])
    import unittest
    runner = sorted({m.split(".")[0] for m in sys.modules} & set(sys.stdlib_module_names))
except Exception:
    pass
print(json.dumps({"python": sys.version.split()[0], "stdlib": sorted(sys.stdlib_module_names), "runner": runner, "tools": tools}))
"#;

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
}

pub struct Grader {
    sandbox: Sandbox,
    pub ingest_limits: IngestLimits,
    /// The interpreter, its standard library and the modules the test
    /// runner loads, probed once.
    python: OnceLock<(Option<String>, BTreeSet<String>, BTreeSet<String>)>,
    /// The host folder mounted read-only at `/gatehouse` (the trusted
    /// runner and the harness); kept for the grader's life.
    _tools: Option<tempfile::TempDir>,
    /// What grading the sample taught about each packet version, by digest.
    calibrations: Mutex<BTreeMap<String, Arc<OnceLock<Arc<Calibration>>>>>,
    /// Tool versions, probed once each.
    tools: Mutex<BTreeMap<String, Option<String>>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketRef {
    pub slug: String,
    pub version: String,
    pub digest: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmissionRef {
    pub archive_sha256: String,
    /// Digest of the assembled workspace (starter overlaid by the submission).
    pub workspace_digest: String,
    pub files: Vec<IngestedFile>,
    /// Files the platform adds to every starter (`GATEHOUSE_PIN.toml`, the
    /// brief) that the submission handed back: set aside, never graded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub platform_files: Vec<IngestedFile>,
    /// What ingestion normalised (a top folder unwrapped, OS metadata left
    /// out, `\` separators read as `/`); absent when nothing was.
    #[serde(default, skip_serializing_if = "Normalised::is_empty")]
    pub normalised: Normalised,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimitsView {
    pub wall_secs: f64,
    pub cpu_secs: u64,
    pub memory_mb: u64,
    pub processes: u64,
    pub file_size_mb: u64,
    pub open_files: u64,
    pub disk_mb: u64,
    pub output_kb: u64,
}

impl From<&Limits> for LimitsView {
    fn from(l: &Limits) -> Self {
        LimitsView {
            wall_secs: l.wall.as_secs_f64(),
            cpu_secs: l.cpu_secs,
            memory_mb: l.memory_bytes >> 20,
            processes: l.processes,
            file_size_mb: l.file_size_bytes >> 20,
            open_files: l.open_files,
            disk_mb: l.disk_bytes >> 20,
            output_kb: (l.output_tail_bytes >> 10) as u64,
        }
    }
}

/// One command in the receipt: what ran, under which caps, and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEntry {
    pub id: String,
    pub command: String,
    pub limits: LimitsView,
    pub exit: crate::sandbox::Exit,
    pub timed_out: bool,
    pub limit_hit: Option<LimitHit>,
    /// Command lines of processes still alive after the command; killed.
    pub leftovers: Vec<String>,
    pub stdout_tail: String,
    pub stderr_tail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tests: Option<Vec<TestOutcome>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrozenEntry {
    pub path: String,
    pub starter_sha256: String,
    /// None when the submission left the file out (the starter's copy was
    /// used, and this says so).
    pub submitted_sha256: Option<String>,
    pub changed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunTiming {
    pub id: String,
    pub wall_ms: f64,
    pub cpu_ms: f64,
    pub peak_memory_bytes: u64,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
}

/// What changes from one grading of the same inputs to the next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    pub total_ms: f64,
    /// The grading budget this grading had (it may derive from measured
    /// time, so it lives here, outside the deterministic part).
    #[serde(default)]
    pub budget_secs: u64,
    pub runs: Vec<RunTiming>,
}

/// The deterministic record of a grading: a second run on the same inputs
/// gives the same receipt, `timings` apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    pub receipt_version: u32,
    pub packet: PacketRef,
    pub submission: SubmissionRef,
    pub environment: EnvReport,
    pub sandbox: Features,
    pub runs: Vec<RunEntry>,
    pub frozen: Vec<FrozenEntry>,
    pub mutation: Option<MutationOutcome>,
    pub findings: Vec<Finding>,
    pub unevaluated: Vec<Unevaluated>,
    /// Runs the grading budget left out, and runs cut at their sample-derived
    /// wall limit, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Unevaluated>,
    /// Failures with `witness` detectors graded without a witness.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_witnessed: Vec<Unevaluated>,
    /// Evidence kept from the evidence folder (`.gatehouse/evidence/`)
    /// that is not trusted, each as `run: path: why`: on a host without
    /// Landlock the candidate's processes ran unconfined beside the packet
    /// code that wrote it, so they could have rewritten it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untrusted_evidence: Vec<String>,
    /// The SHA-256 of the witness the grading was given, which is an input
    /// like the submission; absent when there was none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness_sha256: Option<String>,
    /// The SHA-256 of each metered call's kept request and response body
    /// (the transcript the platform stores), from the witness; absent when
    /// none was kept (receipts from before transcripts keep their digest).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transcript: Vec<crate::witness::TranscriptDigest>,
    /// The rubric's scoring; its fields sit at the top level of the JSON.
    #[serde(flatten)]
    pub scoring: Scoring,
    /// SHA-256 of this receipt's JSON with `digest` empty and `timings`
    /// left out.
    pub digest: String,
    pub timings: Timings,
}

/// The result of grading one submission.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scorecard {
    pub packet: PacketRef,
    pub findings: Vec<Finding>,
    /// Failures whose detector could not run on this submission (for
    /// instance a detector script that crashed); the decision is `pending`.
    pub unevaluated: Vec<Unevaluated>,
    /// Runs the grading budget left out or cut at their sample-derived wall
    /// limit; the decision stays pending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Unevaluated>,
    /// Failures whose `witness` detectors had nothing to look at because
    /// the grading had no witness (an offline candidate, the CLI): they are
    /// not applicable rather than passed, and do not hold the decision.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_witnessed: Vec<Unevaluated>,
    /// The rubric's scoring; its fields sit at the top level of the JSON.
    #[serde(flatten)]
    pub scoring: Scoring,
    pub environment: EnvReport,
    pub receipt: Receipt,
}

/// Default caps for every command, before the packet's `[limits]`.
pub fn default_limits() -> Limits {
    Limits::default()
}

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

    /// Probes the interpreter, its standard library and `tools` in the
    /// sandbox; each is probed once per grader.
    pub fn probe(&self, tools: &[String]) -> Result<EnvProbe, GradeError> {
        for t in tools {
            if t.is_empty()
                || !t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
            {
                return Err(GradeError::Packet(format!(
                    "tool name {t:?} is not a plain command or package name"
                )));
            }
        }
        let mut cache = self.tools.lock().map_err(|_| GradeError::Io {
            context: "reading the tool cache".into(),
            source: std::io::Error::other("a panic poisoned its lock"),
        })?;
        let missing: Vec<&String> = tools.iter().filter(|t| !cache.contains_key(*t)).collect();
        if self.python.get().is_none() || !missing.is_empty() {
            // One sandbox run answers everything: the interpreter, its
            // standard library, and each tool (a Python distribution's
            // version from its metadata, else `TOOL --version`).
            let names: Vec<&str> = missing.iter().map(|t| t.as_str()).collect();
            let report = self.probe_run(&format!("python3 -c '{PROBE}' {}", names.join(" ")))?;
            let parsed: serde_json::Value = serde_json::from_str(report.trim()).map_err(|e| {
                GradeError::Packet(format!(
                    "the environment probe printed something other than JSON ({e}): {}",
                    report.trim()
                ))
            })?;
            let version = parsed["python"].as_str().map(String::from);
            let names = |key: &str| -> BTreeSet<String> {
                parsed[key]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            };
            let _ = self.python.set((version, names("stdlib"), names("runner")));
            let number = regex::Regex::new(r"\d+(?:\.\d+)+").expect("static regex");
            for t in missing {
                let found = parsed["tools"][t.as_str()]
                    .as_str()
                    .and_then(|s| number.find(s))
                    .map(|m| m.as_str().to_string());
                cache.insert(t.clone(), found);
            }
        }
        let (python, stdlib, runner_modules) = self.python.get().cloned().unwrap_or_default();
        let tools = tools.iter().map(|t| (t.clone(), cache.get(t).cloned().flatten())).collect();
        Ok(EnvProbe { python, tools, stdlib, runner_modules })
    }

    fn probe_run(&self, script: &str) -> Result<String, GradeError> {
        let dir = tempfile::tempdir().map_err(io("creating a probe folder"))?;
        let limits = Limits { wall: Duration::from_secs(30), ..Limits::default() };
        let empty = dir.path().join("empty");
        fs::create_dir(&empty).map_err(io("creating a probe workspace"))?;
        let ran = run_on_copy(
            &self.sandbox,
            &empty,
            &dir.path().join("w"),
            |_| Ok(()),
            script,
            &limits,
            Vec::new(),
        )?;
        Ok(ran.report.stdout_tail)
    }

    /// Grades the submission archive `zip` against `packet`.
    pub fn grade_zip(
        &self,
        packet: &Packet,
        zip: &Path,
        opts: &GradeOptions,
    ) -> Result<Scorecard, GradeError> {
        let work = tempfile::Builder::new()
            .prefix("gatehouse-grade-")
            .tempdir()
            .map_err(io("creating a work folder"))?;
        let ingested = ingest_with(
            zip,
            &work.path().join("submission"),
            &self.ingest_limits,
            &ingest_options(packet)?,
        )?;
        let calibration = self.calibration_for(packet, opts);
        Ok(self.grade_ingested(packet, &ingested, work.path(), opts, Some(&calibration))?.0)
    }

    /// The calibration a grading uses: the one recorded for this digest in
    /// `opts`, else this grader's own measurement.
    fn calibration_for(&self, packet: &Packet, opts: &GradeOptions) -> Arc<Calibration> {
        match &opts.calibration {
            Some(c) if c.digest == packet.digest => c.clone(),
            _ => self.calibration(packet),
        }
    }

    /// What grading `packet`'s sample teaches (its hidden tests' ids, its
    /// grading time), measured once per packet version and grader. A
    /// sample that cannot be graded gives an empty calibration: no test
    /// ids are enforced and the budget is the floor.
    pub fn calibration(&self, packet: &Packet) -> Arc<Calibration> {
        // One cell per version: concurrent gradings of a new version wait
        // for one calibration instead of each running their own.
        let cell = match self.calibrations.lock() {
            Ok(mut map) => map.entry(packet.digest.clone()).or_default().clone(),
            Err(_) => Arc::new(OnceLock::new()),
        };
        cell.get_or_init(|| Arc::new(self.calibrate(packet))).clone()
    }

    fn calibrate(&self, packet: &Packet) -> Calibration {
        let measured = (|| -> Result<Calibration, GradeError> {
            let work = tempfile::Builder::new()
                .prefix("gatehouse-grade-")
                .tempdir()
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
            let started = Instant::now();
            let (card, collected) = self.grade_ingested(
                packet,
                &ingested,
                work.path(),
                &GradeOptions::default(),
                None,
            )?;
            let sample_ms = started.elapsed().as_millis() as u64;
            let expected = collected
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
            Ok(Calibration { digest: packet.digest.clone(), expected, sample_ms, run_ms })
        })();
        measured.unwrap_or_else(|_| Calibration {
            digest: packet.digest.clone(),
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

    /// Grades the folder `overlay` (laid over the starter) as if it were a
    /// submission: it is zipped with `times` and goes through ingestion.
    pub fn grade_overlay(
        &self,
        packet: &Packet,
        overlay: &Path,
        times: &BTreeMap<String, i64>,
        opts: &GradeOptions,
    ) -> Result<Scorecard, GradeError> {
        let work = tempfile::Builder::new()
            .prefix("gatehouse-grade-")
            .tempdir()
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
        Ok(self.grade_ingested(packet, &ingested, work.path(), opts, Some(&calibration))?.0)
    }

    /// Grades an ingested submission. `calibration` is `None` only while
    /// calibrating (grading the sample to learn its test ids): then no ids
    /// are enforced and the budget is the packet's limits alone. Returns
    /// the scorecard and the test ids each trusted pytest step collected.
    fn grade_ingested(
        &self,
        packet: &Packet,
        ingested: &Ingested,
        work: &Path,
        opts: &GradeOptions,
        calibration: Option<&Calibration>,
    ) -> Result<(Scorecard, BTreeMap<String, Vec<String>>), GradeError> {
        let started = Instant::now();
        let m = &packet.manifest;
        let base_limits = m.limits.apply(&default_limits());
        let budget = match calibration {
            Some(c) => Grader::budget(packet, c),
            None => Duration::from_secs(24 * 3600),
        };
        let mut skipped: Vec<Unevaluated> = Vec::new();
        // The wall limit run `id` gets: its own when the manifest gives the
        // command one (`own_wall`), else the sample-derived default (never
        // above the packet's `[limits]`), and never past the budget. With
        // the limits, the note to record when the run is cut at the
        // derived limit (`None` when another limit binds).
        let within_budget = |id: &str,
                             own_wall: Option<u64>,
                             limits: &Limits|
         -> Option<(Limits, Option<String>)> {
            let left = budget.checked_sub(started.elapsed())?;
            if left < Duration::from_millis(500) {
                return None;
            }
            let mut l = limits.clone();
            let mut note = None;
            if own_wall.is_none()
                && let Some((derived, ms)) = calibration.and_then(|c| c.derived_wall(id))
                && derived < l.wall
                && derived < left
            {
                l.wall = derived;
                note = Some(format!(
                    "cut: stopped at its wall limit of {} s, derived from the sample ({WALL_FACTOR}× its {:.1} s, at least {} s); what the rest of the run would have shown is unevaluated, never passed",
                    derived.as_secs(),
                    ms as f64 / 1000.0,
                    WALL_FLOOR.as_secs()
                ));
            }
            l.wall = l.wall.min(left);
            l.cpu_secs = l.cpu_secs.min(left.as_secs().max(1));
            Some((l, note))
        };
        let cut = |id: &str,
                   note: &Option<String>,
                   report: &crate::sandbox::RunReport|
         -> Option<Unevaluated> {
            note.as_ref()
                .filter(|_| report.timed_out)
                .map(|n| Unevaluated { id: id.to_string(), reason: n.clone() })
        };
        let budget_note = |id: &str| Unevaluated {
            id: id.to_string(),
            reason: format!(
                "not run: the grading budget of {} s was spent before this run (its failures are unevaluated, never passed)",
                budget.as_secs()
            ),
        };

        let workspace = work.join("workspace");
        let crate::starter::Assembled { submission, platform_files } =
            crate::starter::assemble(packet, ingested, &workspace)
                .map_err(io("assembling the workspace"))?;
        let platform = crate::starter::platform_files(m);
        let workspace_tree = list_files(&workspace).map_err(io("listing the workspace"))?;
        let starter_tree = list_files(&packet.starter_dir()).map_err(io("listing the starter"))?;

        let tools: Vec<String> = m.environment.tools.keys().cloned().collect();
        let probe = self.probe(&tools)?;
        let environment = env_report(m, &probe);

        let mut records: Vec<(RunRecord, Option<Vec<TestOutcome>>)> = Vec::new();
        let runs_dir = work.join("runs");
        fs::create_dir_all(&runs_dir).map_err(io("creating the runs folder"))?;
        let mut next = 0usize;
        let mut scratch = || {
            next += 1;
            runs_dir.join(next.to_string())
        };

        // Replay every step.
        let mut steps = BTreeMap::new();
        let mut kept = BTreeMap::new();
        let mut collected: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut tamper_runs: BTreeMap<String, Vec<String>> = BTreeMap::new();
        // Without Landlock the harness cannot keep the candidate's
        // processes from `/evidence`: what is kept from there is listed as
        // untrusted.
        let confined = self.sandbox.features().landlock_abi > 0;
        let evidence_dir = format!("{}/", crate::sandbox::EVIDENCE_DIR);
        let mut untrusted_evidence: Vec<String> = Vec::new();
        for step in &m.steps {
            let run_id = format!("step:{}", step.id);
            let Some((limits, cut_note)) =
                within_budget(&run_id, step.limits.wall_secs, &step.limits.apply(&base_limits))
            else {
                skipped.push(budget_note(&run_id));
                continue;
            };
            let dir = scratch();
            let env = with_platform_env(step_env(&step.env), &platform);
            let ran = run_on_copy(
                &self.sandbox,
                &workspace,
                &dir,
                |w| packet.lay_into(&step.lay, w),
                &step.run,
                &limits,
                env,
            )?;
            let mut report = ran.report;
            skipped.extend(cut(&run_id, &cut_note, &report));
            // The result file: the step's `junit`, or the one the trusted
            // runner was told to write in the workspace.
            let junit_path = step.junit.clone().or_else(|| match &ran.plan {
                Plan::Runner { kind: RunnerKind::Pytest, args, prelude: None } => {
                    crate::trusted::pytest_junit(args)
                }
                _ => None,
            });
            let junit = junit_path.as_ref().map(|j| {
                read_junit(&dir.join(j))
                    .map_err(|e| e.replace(&dir.display().to_string(), "/workspace"))
            });
            let (tests, junit_error) = match (&ran.runner, ran.plan.runner()) {
                (Some(r), Some(kind)) => {
                    let expected = calibration
                        .and_then(|c| c.expected.get(&step.id))
                        .filter(|_| fixed_tests(step, &ran.plan));
                    // A file the runner wrote elsewhere (after a `cd`) is not comparable.
                    let comparable = junit.as_ref().filter(|_| ran.plan.in_workspace());
                    let signs = r.cross_check(kind, &report, comparable, expected);
                    if fixed_tests(step, &ran.plan)
                        && let Some(ids) = &r.collected
                    {
                        collected.insert(step.id.clone(), ids.clone());
                    }
                    if !signs.is_empty() {
                        contain(&mut report);
                        tamper_runs.insert(format!("step:{}", step.id), signs);
                    } else if !r.passed() && report.exit == crate::sandbox::Exit::Code(0) {
                        contain(&mut report);
                    }
                    (Some(r.outcomes(expected, &report)), None)
                }
                _ => match junit {
                    Some(Ok(t)) => (Some(t), None),
                    Some(Err(e)) => (None, Some(e)),
                    None => (None, None),
                },
            };
            if !step.keep.is_empty() {
                let to = work.join("kept").join(&step.id);
                let files = keep_files(&dir, &to, &step.keep)
                    .map_err(io(format!("keeping the files of step {}", step.id)))?;
                kept.insert(step.id.clone(), to);
                if !confined {
                    untrusted_evidence.extend(
                        files
                            .iter()
                            .filter(|f| f.starts_with(&evidence_dir))
                            .map(|f| format!("step:{}: {f}: {UNCONFINED_EVIDENCE}", step.id)),
                    );
                }
            }
            if !confined
                && let Some(j) = junit_path.as_ref().filter(|j| j.starts_with(&evidence_dir))
            {
                untrusted_evidence.push(format!("step:{}: {j}: {UNCONFINED_EVIDENCE}", step.id));
            }
            let _ = fs::remove_dir_all(&dir);
            records.push((
                RunRecord {
                    id: format!("step:{}", step.id),
                    command: ran.plan.command(),
                    limits,
                    report: report.clone(),
                },
                tests.clone(),
            ));
            steps.insert(step.id.clone(), StepOutcome { report, tests, junit_error });
        }

        // Run each distinct detector script once.
        let mut scripts = BTreeMap::new();
        let mut script_specs: Vec<(String, Vec<Lay>, crate::manifest::LimitSpec)> = Vec::new();
        for f in &m.failures {
            f.detect.walk(&mut |d| {
                if let Detector::Script { run, lay, limits } = d
                    && !script_specs.iter().any(|(r, l, _)| r == run && l == lay)
                {
                    script_specs.push((run.clone(), lay.clone(), limits.clone()));
                }
            });
        }
        for (i, (run, lay, limit_spec)) in script_specs.iter().enumerate() {
            let run_id = format!("script:{}", i + 1);
            let Some((limits, cut_note)) =
                within_budget(&run_id, limit_spec.wall_secs, &limit_spec.apply(&base_limits))
            else {
                skipped.push(budget_note(&run_id));
                scripts.insert(
                    script_key(run, lay),
                    Err(format!(
                        "detector script `{run}` was not run: the grading budget was spent"
                    )),
                );
                continue;
            };
            let dir = scratch();
            let lay_all = |w: &Path| -> std::io::Result<()> {
                packet.lay_into(lay, w)?;
                // What the steps kept, for scripts that judge a replay.
                let ws = Root::open(w)?;
                for (step, from) in &kept {
                    Root::open(from)?.copy("", &ws, &format!(".gatehouse/kept/{step}"))?;
                }
                Ok(())
            };
            let ran = run_on_copy(
                &self.sandbox,
                &workspace,
                &dir,
                lay_all,
                run,
                &limits,
                with_platform_env(Vec::new(), &platform),
            )?;
            let mut report = ran.report;
            skipped.extend(cut(&run_id, &cut_note, &report));
            if let (Some(r), Some(kind)) = (&ran.runner, ran.plan.runner()) {
                let signs = r.cross_check(kind, &report, None, None);
                if !signs.is_empty() {
                    contain(&mut report);
                    tamper_runs.insert(format!("script:{}", i + 1), signs);
                }
            }
            let _ = fs::remove_dir_all(&dir);
            // A script that crashes (a submission can provoke that) leaves
            // its failures unevaluated; grading goes on and says so.
            let found = if report.success() {
                parse_script_output(&report.stdout_tail).map_err(|e| {
                    format!("detector script `{run}` printed something other than findings: {e}")
                })
            } else {
                let stderr: Vec<&str> = report.stderr_tail.lines().rev().take(3).collect();
                Err(format!(
                    "detector script `{run}` failed ({}): {}",
                    report.describe(),
                    stderr.into_iter().rev().collect::<Vec<_>>().join(" | ")
                ))
            };
            records.push((
                RunRecord {
                    id: format!("script:{}", i + 1),
                    command: ran.plan.command(),
                    limits,
                    report,
                },
                None,
            ));
            scripts.insert(script_key(run, lay), found);
        }

        // Run the candidate's tests against each mutant of the sample.
        let mutation = match &m.mutation {
            None => None,
            Some(mu) => {
                let limits = mu.limits.apply(&base_limits);
                let mut mutants = Vec::new();
                let mut complete = true;
                let mut cut_at: Option<String> = None;
                for (id, mutant) in packet.mutants().map_err(io("reading mutants"))? {
                    let run_id = format!("mutant:{id}");
                    // Once one mutant run was cut the mutation run is
                    // incomplete: the rest would prove nothing either way.
                    if let Some(first) = &cut_at {
                        skipped.push(Unevaluated { id: run_id, reason: format!("not run: the mutation run is already incomplete ({first} was cut at its wall limit)") });
                        continue;
                    }
                    let Some((limits, cut_note)) =
                        within_budget(&run_id, mu.limits.wall_secs, &limits)
                    else {
                        skipped.push(budget_note(&run_id));
                        complete = false;
                        continue;
                    };
                    let dir = scratch();
                    let target = mu.target.clone();
                    let ran = run_on_copy(
                        &self.sandbox,
                        &workspace,
                        &dir,
                        |w| Root::open(w)?.write(&target, &mutant),
                        &mu.run,
                        &limits,
                        Vec::new(),
                    )?;
                    let mut report = ran.report;
                    // A run cut at its derived limit neither killed the
                    // mutant nor spared it: the mutation run is incomplete.
                    if let Some(note) = cut(&run_id, &cut_note, &report) {
                        skipped.push(note);
                        complete = false;
                        cut_at = Some(run_id.clone());
                    }
                    let mut passed = report.success();
                    if let (Some(r), Some(kind)) = (&ran.runner, ran.plan.runner()) {
                        let signs = r.cross_check(kind, &report, None, None);
                        passed = passed && r.passed() && signs.is_empty();
                        if !signs.is_empty() {
                            contain(&mut report);
                            tamper_runs.insert(format!("mutant:{id}"), signs);
                        }
                    }
                    let _ = fs::remove_dir_all(&dir);
                    mutants.push(MutantResult { id: id.clone(), killed: !passed });
                    records.push((
                        RunRecord {
                            id: format!("mutant:{id}"),
                            command: ran.plan.command(),
                            limits: limits.clone(),
                            report,
                        },
                        None,
                    ));
                }
                // An incomplete mutation run proves nothing either way.
                complete.then_some(MutationOutcome { mutants })
            }
        };

        // The platform-wide failure: the submission interfered with the
        // grader's own evidence (static signs in its files, and every run
        // whose results disagreed with themselves).
        let changed: BTreeSet<String> = ingested
            .files
            .iter()
            .filter(|f| !f.path.starts_with(".gatehouse/") && !platform.contains(&f.path))
            .filter(|f| starter_tree.get(&f.path).is_none_or(|(_, sha)| sha != &f.sha256))
            .map(|f| f.path.clone())
            .collect();
        let tamper_static = crate::tamper::scan(&workspace, &changed, &probe.runner_modules);
        let tamper_evidence = crate::tamper::evidence(tamper_static, &tamper_runs);

        // Detect.
        let evidence = Evidence {
            manifest: m,
            workspace: &workspace,
            submission: &submission,
            starter: &starter_tree,
            starter_dir: &packet.starter_dir(),
            steps: &steps,
            kept: &kept,
            scripts: &scripts,
            mutation: mutation.as_ref(),
            stdlib: &probe.stdlib,
            witness: opts.witness.as_ref(),
        };
        let mut findings = Vec::new();
        let mut unevaluated = Vec::new();
        let not_witnessed = not_witnessed(m, opts.witness.is_some());
        for f in &m.failures {
            match evidence.eval(&f.id, &f.detect) {
                Ok(Some(hit)) => findings.push(Finding {
                    id: f.id.clone(),
                    title: f.title.clone(),
                    provenance: hit.provenance,
                    evidence: hit.evidence,
                }),
                Ok(None) => {}
                Err(e) => unevaluated.push(Unevaluated { id: f.id.clone(), reason: e.message }),
            }
        }
        if !tamper_evidence.is_empty() {
            match findings.iter_mut().find(|f| f.id == crate::tamper::ID) {
                Some(f) => f.evidence.extend(tamper_evidence),
                None => findings.push(Finding {
                    id: crate::tamper::ID.into(),
                    title: crate::tamper::TITLE.into(),
                    provenance: crate::evidence::Provenance::Replayed,
                    evidence: tamper_evidence,
                }),
            }
        }
        let evidence_cap = 200;
        for f in &mut findings {
            if f.evidence.len() > evidence_cap {
                let more = f.evidence.len() - evidence_cap;
                f.evidence.truncate(evidence_cap);
                f.evidence.push(format!("... and {more} more not shown"));
            }
        }

        // Score. A failure that could not be evaluated may have happened,
        // and a run the budget skipped may have failed: no decision is
        // final until a reviewer has looked.
        let tests_of = |step: &str| steps.get(step).and_then(|s| s.tests.as_deref());
        let scoring = scoring(
            m,
            &findings,
            &tests_of,
            mutation.as_ref(),
            &opts.human,
            !unevaluated.is_empty() || !skipped.is_empty(),
        );

        let frozen = m
            .policy
            .frozen
            .iter()
            .filter_map(|p| {
                let (_, starter_sha) = starter_tree.get(p)?;
                let submitted =
                    ingested.files.iter().find(|f| &f.path == p).map(|f| f.sha256.clone());
                let changed = submitted.as_ref().is_some_and(|s| s != starter_sha);
                Some(FrozenEntry {
                    path: p.clone(),
                    starter_sha256: starter_sha.clone(),
                    submitted_sha256: submitted,
                    changed,
                })
            })
            .collect();

        let packet_ref = PacketRef {
            slug: m.packet.slug.clone(),
            version: m.packet.version.clone(),
            digest: packet.digest.clone(),
        };
        let timings = Timings {
            total_ms: ms(started.elapsed()),
            budget_secs: budget.as_secs(),
            runs: records
                .iter()
                .map(|(r, _)| RunTiming {
                    id: r.id.clone(),
                    wall_ms: ms(r.report.wall),
                    cpu_ms: ms(r.report.cpu),
                    peak_memory_bytes: r.report.peak_memory_bytes,
                    stdout_bytes: r.report.stdout_bytes,
                    stderr_bytes: r.report.stderr_bytes,
                })
                .collect(),
        };
        let mut receipt = Receipt {
            receipt_version: 1,
            packet: packet_ref.clone(),
            submission: SubmissionRef {
                archive_sha256: ingested.archive_sha256.clone(),
                workspace_digest: tree_digest(&workspace_tree),
                files: ingested
                    .files
                    .iter()
                    .filter(|f| !platform.contains(&f.path))
                    .cloned()
                    .collect(),
                platform_files,
                normalised: ingested.normalised.clone(),
            },
            environment: environment.clone(),
            sandbox: self.sandbox.features().clone(),
            runs: records
                .into_iter()
                .map(|(r, tests)| RunEntry {
                    id: r.id,
                    command: r.command,
                    limits: LimitsView::from(&r.limits),
                    exit: r.report.exit,
                    timed_out: r.report.timed_out,
                    limit_hit: r.report.limit_hit,
                    leftovers: r.report.leftovers.iter().map(|l| l.cmdline.clone()).collect(),
                    stdout_tail: r.report.stdout_tail,
                    stderr_tail: r.report.stderr_tail,
                    tests,
                })
                .collect(),
            frozen,
            mutation,
            findings: findings.clone(),
            unevaluated: unevaluated.clone(),
            skipped: skipped.clone(),
            not_witnessed: not_witnessed.clone(),
            untrusted_evidence,
            witness_sha256: opts.witness.as_ref().map(|w| w.digest()),
            transcript: opts.witness.as_ref().map(|w| w.transcript()).unwrap_or_default(),
            scoring: scoring.clone(),
            digest: String::new(),
            timings,
        };
        receipt.digest = receipt_digest(&receipt);
        let card = Scorecard {
            packet: packet_ref,
            findings,
            unevaluated,
            skipped,
            not_witnessed,
            scoring,
            environment,
            receipt,
        };
        Ok((card, collected))
    }
}

/// Whether a step's test ids are the packet's alone: a trusted pytest run
/// whose every named test file is one the step lays from the packet.
pub fn fixed_tests(step: &crate::manifest::Step, plan: &Plan) -> bool {
    let Plan::Runner { kind: RunnerKind::Pytest, args, prelude: None } = plan else { return false };
    let paths = crate::trusted::pytest_paths(args);
    let laid: BTreeSet<String> = step.lay.iter().map(|l| l.paths().1).collect();
    !paths.is_empty() && paths.iter().all(|p| laid.contains(p))
}

/// A run whose results cannot be trusted never counts as a pass: its exit
/// status 0 is recorded as 1 for the detectors and the scoring (the
/// receipt's run entry keeps the runner's view in its tests and findings).
fn contain(report: &mut crate::sandbox::RunReport) {
    if report.exit == crate::sandbox::Exit::Code(0) {
        report.exit = crate::sandbox::Exit::Code(1);
    }
}

/// Tells packet scripts which workspace files are the platform's.
fn with_platform_env(
    mut env: Vec<(String, String)>,
    platform: &BTreeSet<String>,
) -> Vec<(String, String)> {
    env.push((
        "GATEHOUSE_PLATFORM_FILES".into(),
        platform.iter().cloned().collect::<Vec<_>>().join("\n"),
    ));
    env
}

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

/// The failures that use a `witness` detector, each with the checks it
/// could not run, when grading has no witness; empty when it has one.
fn not_witnessed(m: &crate::manifest::Manifest, witnessed: bool) -> Vec<Unevaluated> {
    if witnessed {
        return Vec::new();
    }
    m.failures
        .iter()
        .filter_map(|f| {
            let mut checks = Vec::new();
            f.detect.walk(&mut |d| {
                if let Detector::Witness { check, .. } = d {
                    checks.push(serde_json::to_value(check).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default());
                }
            });
            (!checks.is_empty()).then(|| Unevaluated {
                id: f.id.clone(),
                reason: format!("not witnessed: no platform record for witness check {}; only the claimed evidence was graded", checks.join(", ")),
            })
        })
        .collect()
}

/// Why kept evidence is untrusted on a host without Landlock.
pub const UNCONFINED_EVIDENCE: &str = "not trusted: Landlock is unavailable, so the candidate's processes ran unconfined and could write the evidence folder";

/// Copies the regular files under `from` matching `globs` to `to`, keeping
/// their relative paths, and returns those paths. `to` always exists
/// afterwards.
fn keep_files(from: &Path, to: &Path, globs: &[String]) -> std::io::Result<Vec<String>> {
    let mut b = globset::GlobSetBuilder::new();
    for g in globs {
        b.add(
            globset::GlobBuilder::new(g)
                .literal_separator(true)
                .build()
                .map_err(std::io::Error::other)?,
        );
    }
    let set = b.build().map_err(std::io::Error::other)?;
    let (src, dst) = (Root::open(from)?, Root::create(to)?);
    let mut kept = Vec::new();
    for rel in src.files("")? {
        if set.is_match(&rel) {
            src.copy(&rel, &dst, &rel)?;
            kept.push(rel);
        }
    }
    Ok(kept)
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// The digest of a receipt's deterministic part.
pub fn receipt_digest(r: &Receipt) -> String {
    let mut value = serde_json::to_value(r).unwrap_or_default();
    if let Some(obj) = value.as_object_mut() {
        obj.remove("timings");
        obj.insert("digest".into(), serde_json::Value::String(String::new()));
    }
    crate::tree::sha256_hex(value.to_string().as_bytes())
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
    out.receipt.digest = String::new();
    out.receipt.digest = receipt_digest(&out.receipt);
    out
}

/// The one scoring of grading and rescoring: the rubric over `findings`,
/// the steps' tests (skipped tests not counted) and the mutation results,
/// with reviewer levels for the criteria a reviewer may set. `held` (a
/// failure unevaluated, a run skipped) keeps the decision pending.
fn scoring<'a>(
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
    use crate::evidence::Provenance;
    use crate::evidence::TestStatus;
    use crate::manifest::Manifest;
    use crate::score::Status;

    const RUBRIC: &str = include_str!("../tests/fixtures/rubrics/rescore.toml");

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
