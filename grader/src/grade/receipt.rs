//! The scorecard and its receipt: the record of one grading, and its digest.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::env::EnvReport;
use crate::evidence::{MutationOutcome, TestOutcome};
use crate::ingest::{IngestedFile, Normalised};
use crate::sandbox::{Features, LimitHit, Limits};
use crate::score::{Finding, Scoring};

use super::*;

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
    /// How the process that ran the tests crashed (a Go panic, a test
    /// process that died), when it did: every test it did not report
    /// failed for this reason, each saying so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crash: Option<String>,
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
    /// Characters a reviewer cannot see in the submitted text files
    /// (bidirectional controls, invisible characters: `hidden_text`), at
    /// most `hidden_text::MAX_LISTED`, and how many more there were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden_text: Vec<crate::hidden_text::HiddenChar>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hidden_text_unlisted: usize,
    /// What the runs' runtime audit saw that is shown without a verdict
    /// (`runtime::judge`), each as `run: what`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runtime_notes: Vec<String>,
    /// How many canary tests the runs carried (issue #25), by run.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub canaries: BTreeMap<String, usize>,
    /// How each run of the packet's tests and scripts met the candidate's
    /// code (JUDGE.md), by run: `apart`, or `shared` and why.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub judged: BTreeMap<String, String>,
    /// The rubric's scoring; its fields sit at the top level of the JSON.
    #[serde(flatten)]
    pub scoring: Scoring,
    /// The digest the grader gave this receipt, before any reviewer's score
    /// rescored it (and changed `digest`); absent until a reviewer scores.
    /// `digest` covers it, so the chain from grading to now is one receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graded_digest: Option<String>,
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

fn is_zero(n: &usize) -> bool {
    *n == 0
}

pub(super) fn ms(d: Duration) -> f64 {
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
