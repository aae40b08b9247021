//! The manifest's data model: every table and key of `packet.toml` as a type.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::pattern::{Globs, Pattern};
use crate::sandbox::Limits;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub packet: PacketMeta,
    #[serde(default)]
    pub environment: Environment,
    #[serde(default)]
    pub budgets: Budgets,
    #[serde(default)]
    pub limits: LimitSpec,
    pub commands: Commands,
    #[serde(default)]
    pub workspace: WorkspaceSpec,
    #[serde(default)]
    pub policy: Policy,
    #[serde(default, rename = "step")]
    pub steps: Vec<Step>,
    #[serde(default)]
    pub mutation: Option<Mutation>,
    #[serde(default)]
    pub rubric: RubricMeta,
    #[serde(default, rename = "criterion")]
    pub criteria: Vec<Criterion>,
    #[serde(default, rename = "gate")]
    pub gates: Vec<Gate>,
    #[serde(default, rename = "cap")]
    pub caps: Vec<Cap>,
    #[serde(default, rename = "band")]
    pub bands: Vec<Band>,
    #[serde(default, rename = "failure")]
    pub failures: Vec<Failure>,
    #[serde(default)]
    pub sample: SampleMeta,
    #[serde(default, rename = "variant")]
    pub variants: Vec<Variant>,
    /// `[proves.<step id>]`: a test-name pattern (as for `test-failing`) to
    /// the failure id, or ids, that a failing test of that step proves.
    #[serde(default)]
    pub proves: BTreeMap<String, BTreeMap<String, Proves>>,
    /// `[cites.<step id>]`: a test-name pattern to the quote, or quotes, of
    /// the brief that the step's matching hidden tests enforce
    /// (`check::brief`), for tests whose own text cites nothing.
    #[serde(default)]
    pub cites: BTreeMap<String, BTreeMap<String, Cites>>,
}

/// The sentence, or sentences, of the brief a hidden test enforces: quotes
/// of `prompt.md`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Cites {
    One(String),
    Any(Vec<String>),
}

impl Cites {
    pub fn all(&self) -> &[String] {
        match self {
            Cites::One(q) => std::slice::from_ref(q),
            Cites::Any(qs) => qs,
        }
    }
}

/// What a failing hidden test proves: one failure id, or several (any one
/// of them explains the failure).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Proves {
    One(String),
    Any(Vec<String>),
}

impl Proves {
    pub fn ids(&self) -> &[String] {
        match self {
            Proves::One(id) => std::slice::from_ref(id),
            Proves::Any(ids) => ids,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PacketMeta {
    pub slug: String,
    pub version: String,
    pub title: String,
    #[serde(default)]
    pub summary: String,
    #[serde(default)]
    pub seed_files: Vec<String>,
    /// The name the prompt is shipped under in the starter zip.
    #[serde(default = "default_brief")]
    pub brief: String,
    /// How the hidden tests meet the candidate's code (JUDGE.md). Absent:
    /// apart, the judge and the host in two processes under two uids.
    /// `judge = "shared"` (with `judge_reason`) runs them in one process
    /// as before: `packet check` warns, and the scorecard and receipt say
    /// that this packet's correctness lane is weaker against forgery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeMode>,
    /// Why a packet's hidden tests must share the candidate's process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_reason: Option<String>,
}

/// `[packet] judge`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JudgeMode {
    /// The hidden tests in the judge, the candidate's code in the host.
    Apart,
    /// Both in one process (a packet whose tests truly need it).
    Shared,
}

fn default_brief() -> String {
    "PROMPT.md".into()
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    pub python: Option<String>,
    /// Node.js and the grader's TypeScript compiler (`lang_node`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typescript: Option<String>,
    /// The Go toolchain, a version prefix of `go version` in the sandbox
    /// (`go = "1.19"`); a packet that sets it runs `go test` through the
    /// trusted Go runner (`lang_go`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub go: Option<String>,
    #[serde(default)]
    pub tools: BTreeMap<String, String>,
}

impl Environment {
    /// The language toolchains the packet pins, by their key in
    /// `env::TOOLCHAINS`.
    pub fn toolchains(&self) -> Vec<(&'static str, &String)> {
        let pins = [("node", &self.node), ("typescript", &self.typescript), ("go", &self.go)];
        pins.into_iter().filter_map(|(k, v)| v.as_ref().map(|v| (k, v))).collect()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    pub model_calls: Option<u64>,
    pub tokens: Option<u64>,
    pub tool_calls: Option<u64>,
    pub wall_clock_secs: Option<u64>,
    pub time_box_minutes: Option<u64>,
    pub request_bytes: Option<u64>,
    /// The model names a candidate may request through the meter (unset: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<Vec<String>>,
    /// The meter's `max_tokens` for a call that sends none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens_default: Option<u64>,
    /// The most `max_tokens` one call may ask for; more is lowered to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens_ceiling: Option<u64>,
}

impl Budgets {
    /// Looks a budget up by its manifest name (`"tokens"`, ...).
    pub fn get(&self, name: &str) -> Option<u64> {
        match name {
            "model_calls" => self.model_calls,
            "tokens" => self.tokens,
            "tool_calls" => self.tool_calls,
            "wall_clock_secs" => self.wall_clock_secs,
            "time_box_minutes" => self.time_box_minutes,
            "request_bytes" => self.request_bytes,
            _ => None,
        }
    }
}

/// Sandbox caps as written in a manifest; unset keys inherit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitSpec {
    pub wall_secs: Option<u64>,
    pub cpu_secs: Option<u64>,
    pub memory_mb: Option<u64>,
    pub processes: Option<u64>,
    pub file_size_mb: Option<u64>,
    pub open_files: Option<u64>,
    pub disk_mb: Option<u64>,
    pub output_kb: Option<u64>,
    /// The whole grading's budget in seconds (`[limits]` only).
    pub grading_secs: Option<u64>,
}

impl LimitSpec {
    /// Applies these keys over `base`.
    pub fn apply(&self, base: &Limits) -> Limits {
        let mut l = base.clone();
        if let Some(v) = self.wall_secs {
            l.wall = Duration::from_secs(v);
        }
        if let Some(v) = self.cpu_secs {
            l.cpu_secs = v;
        }
        if let Some(v) = self.memory_mb {
            l.memory_bytes = v << 20;
        }
        if let Some(v) = self.processes {
            l.processes = v;
        }
        if let Some(v) = self.file_size_mb {
            l.file_size_bytes = v << 20;
        }
        if let Some(v) = self.open_files {
            l.open_files = v;
        }
        if let Some(v) = self.disk_mb {
            l.disk_bytes = v << 20;
        }
        if let Some(v) = self.output_kb {
            l.output_tail_bytes = (v as usize) << 10;
        }
        l
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Commands {
    pub test: String,
}

/// The pinned workspace: how the platform witnesses a candidate's red and
/// green runs (`[workspace]`, all optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceSpec {
    /// The command a witnessed run executes; `[commands] test` when unset.
    pub test: Option<String>,
    /// Whether the metered model endpoint stays closed until a witnessed red.
    #[serde(default)]
    pub model_waits_for_red: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    #[serde(default)]
    pub frozen: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub id: String,
    #[serde(default)]
    pub title: String,
    pub run: String,
    #[serde(default)]
    pub lay: Vec<Lay>,
    pub junit: Option<String>,
    #[serde(default)]
    pub limits: LimitSpec,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Globs of files the step leaves behind for detectors (`step = ...`).
    #[serde(default)]
    pub keep: Vec<String>,
}

/// A packet file laid into a step's workspace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Lay {
    /// `hidden/P` to `P`.
    Hidden(String),
    /// Any packet path to any workspace path. `host = true`: readable by
    /// the candidate's uid even when it comes from `hidden/` or
    /// `detectors/` (a fixture a candidate's program reads by path, code
    /// the packet loads into the candidate's process); every other file
    /// laid from those folders is the judge's alone.
    Map {
        from: String,
        to: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        host: bool,
    },
}

impl Step {
    /// Whether the grader learns this step's per-test results: from its
    /// JUnit file, or from the trusted runner.
    pub fn reports_tests(&self) -> bool {
        self.junit.is_some()
            || matches!(
                crate::trusted::plan(&self.run).runner(),
                Some(
                    crate::trusted::RunnerKind::Pytest
                        | crate::trusted::RunnerKind::Unittest
                        | crate::trusted::RunnerKind::NodeTest
                        | crate::trusted::RunnerKind::GoTest
                )
            )
    }
}

impl Lay {
    /// (packet-relative source, workspace-relative destination).
    pub fn paths(&self) -> (String, String) {
        match self {
            Lay::Hidden(p) => (format!("hidden/{p}"), p.clone()),
            Lay::Map { from, to, .. } => (from.clone(), to.clone()),
        }
    }

    /// Whether what this lays is the judge's alone (JUDGE.md): unreadable
    /// to the candidate's uid in a run judged apart. Files from the
    /// packet's `hidden/` and `detectors/` folders are, unless the lay says
    /// `host = true`; the starter's and the sample's are not secrets the
    /// judge keeps (the sample is laid only into runs of the candidate's
    /// own tests, which are never judged apart).
    pub fn judge_only(&self) -> bool {
        match self {
            Lay::Hidden(_) => true,
            Lay::Map { from, host, .. } => {
                !host && (from.starts_with("hidden/") || from.starts_with("detectors/"))
            }
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mutation {
    pub target: String,
    pub run: String,
    pub hidden_step: String,
    #[serde(default)]
    pub limits: LimitSpec,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Aggregate {
    #[default]
    Sum,
    Separate,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RubricMeta {
    #[serde(default)]
    pub aggregate: Aggregate,
    #[serde(default = "default_pass")]
    pub pass_decision: String,
    #[serde(default = "default_fail")]
    pub fail_decision: String,
}

fn default_pass() -> String {
    "pass".into()
}
fn default_fail() -> String {
    "hold".into()
}

impl Default for RubricMeta {
    fn default() -> Self {
        RubricMeta {
            aggregate: Aggregate::Sum,
            pass_decision: default_pass(),
            fail_decision: default_fail(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Auto,
    Human,
    AutoOverride,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Criterion {
    pub id: String,
    pub title: String,
    pub max: u32,
    pub levels: Vec<String>,
    pub mode: Mode,
    #[serde(default)]
    pub from: Source,
    #[serde(default = "one")]
    pub weight: u32,
    /// The submitted file reviewers read to score this criterion, shown
    /// beside its form (default: the first file its title, else its levels,
    /// name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

fn one() -> u32 {
    1
}

fn workspace_scope() -> Scope {
    Scope::Workspace
}

/// Where an auto criterion's level comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Source {
    #[default]
    #[serde(skip)]
    Failures,
    Named(NamedSource),
    Tests {
        tests: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NamedSource {
    Failures,
    Mutation,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gate {
    pub criterion: Option<String>,
    pub min: Option<u32>,
    pub failure: Option<String>,
    pub decision: String,
    #[serde(default)]
    pub message: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cap {
    #[serde(default)]
    pub when: Vec<Condition>,
    pub failure: Option<String>,
    pub decision: String,
    #[serde(default)]
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    pub criterion: String,
    pub at_most: Option<u32>,
    pub at_least: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Band {
    pub min: u32,
    pub decision: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    pub id: String,
    pub title: String,
    pub description: String,
    #[serde(default)]
    pub effect: Effects,
    pub detect: Detector,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Effects {
    #[default]
    #[serde(skip)]
    None,
    One(Effect),
    Many(Vec<Effect>),
}

impl Effects {
    pub fn list(&self) -> &[Effect] {
        match self {
            Effects::None => &[],
            Effects::One(e) => std::slice::from_ref(e),
            Effects::Many(v) => v,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Effect {
    pub criterion: String,
    pub set: Option<u32>,
    pub minus: Option<u32>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    #[default]
    Submission,
    Workspace,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
    #[default]
    Both,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogExpect {
    Failed,
    Passed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OrderBy {
    ZipTime,
    Stamp,
}

/// A number, or the name of a budget (`"budget.tokens"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Limit {
    Number(f64),
    Budget(String),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SumCondition {
    pub field: String,
    pub over: Limit,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsecutiveCondition {
    pub key: Vec<String>,
    pub over: Limit,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompareCondition {
    /// A numeric field of the candidate's ledger, or `"rows"`.
    pub field: String,
    pub with_step: String,
    pub with_file: String,
    pub with_field: String,
    pub tolerance_pct: f64,
    /// Only rows of the other ledger whose fields equal these values count.
    #[serde(default, rename = "with_where")]
    pub with_filter: BTreeMap<String, serde_json::Value>,
}

/// The type a ledger field must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FieldType {
    Int,
    Number,
    String,
    Bool,
    NullOrString,
    NullOrInt,
}

impl FieldType {
    pub fn accepts(self, v: &serde_json::Value) -> bool {
        use serde_json::Value;
        match self {
            FieldType::Int => v.as_i64().is_some() || v.as_u64().is_some(),
            FieldType::Number => v.is_number(),
            FieldType::String => v.is_string(),
            FieldType::Bool => v.is_boolean(),
            FieldType::NullOrString => v.is_null() || v.is_string(),
            FieldType::NullOrInt => matches!(v, Value::Null) || v.as_i64().is_some(),
        }
    }
}

/// The checks of the `witness` detector kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WitnessCheck {
    ModelBeforeRed,
    RedDisagrees,
    UsageDishonest,
    UsageMissing,
    RetryStorm,
}

/// A failure detector. See `packets/FORMAT.md` for each kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
#[expect(
    clippy::large_enum_variant,
    reason = "parsed once per packet; boxing `Ledger` would only complicate every match"
)]
pub enum Detector {
    Missing {
        paths: Globs,
        step: Option<String>,
    },
    Present {
        paths: Globs,
        #[serde(default, rename = "in")]
        scope: Scope,
        step: Option<String>,
    },
    OutsideAllowlist {
        allow: Globs,
    },
    Pattern {
        files: Globs,
        regex: Pattern,
        #[serde(default)]
        absent: bool,
        #[serde(default = "workspace_scope", rename = "in")]
        scope: Scope,
        step: Option<String>,
    },
    Frozen {
        #[serde(default)]
        paths: Option<Vec<String>>,
    },
    TestFailing {
        step: String,
        #[serde(default, deserialize_with = "Globs::lenient")]
        tests: Globs,
    },
    Exit {
        step: String,
        equals: Option<i32>,
        not_equals: Option<i32>,
        timed_out: Option<bool>,
    },
    Output {
        step: String,
        #[serde(default)]
        stream: Stream,
        contains: Option<Pattern>,
        /// Matched against the whole output, `^` and `$` at line boundaries.
        absent: Option<Pattern<true>>,
    },
    PytestLog {
        file: String,
        expect: LogExpect,
        nodes_from: Option<String>,
    },
    Order {
        before: String,
        after: String,
        by: OrderBy,
        stamp: Option<Pattern>,
    },
    DiffAllowlist {
        diff: String,
        #[serde(default)]
        allow: Vec<String>,
        allow_file: Option<String>,
    },
    DiffInvalid {
        diff: String,
    },
    StdlibOnly {
        files: Globs,
        /// Third-party modules that are allowed (e.g. `pytest` in tests).
        #[serde(default)]
        allow: Vec<String>,
    },
    Ledger {
        file: String,
        step: Option<String>,
        /// Only rows whose fields equal these values count.
        #[serde(default, rename = "where")]
        filter: BTreeMap<String, serde_json::Value>,
        #[serde(default)]
        required: Vec<String>,
        #[serde(default)]
        schema: BTreeMap<String, FieldType>,
        rows_over: Option<Limit>,
        rows_under: Option<Limit>,
        sum: Option<SumCondition>,
        duplicates: Option<Vec<String>>,
        consecutive: Option<ConsecutiveCondition>,
        #[serde(default)]
        invalid: bool,
        compare: Option<CompareCondition>,
    },
    Leftovers {
        step: String,
    },
    Digest {
        files: Vec<String>,
        claimed_in: String,
        regex: Pattern,
        step: Option<String>,
    },
    MutantsSurvive {
        #[serde(default = "one")]
        at_least: u32,
    },
    Script {
        run: String,
        #[serde(default)]
        lay: Vec<Lay>,
        #[serde(default)]
        limits: LimitSpec,
    },
    /// A check on what the platform witnessed (runs and the model meter's
    /// ledger); quiet when grading has no witness (see grader/src/witness.rs).
    Witness {
        check: WitnessCheck,
        /// The claimed file compared with the witness, for checks that read one.
        file: Option<String>,
        /// For `usage-dishonest`: the allowed difference, as a fraction.
        tolerance: Option<f64>,
        /// For `retry-storm`: the smallest group of identical calls that fires.
        min_chain: Option<u32>,
    },
    All {
        of: Vec<Detector>,
    },
    Any {
        of: Vec<Detector>,
    },
    Not {
        of: Box<Detector>,
    },
}

impl Detector {
    /// Calls `f` on this detector and every sub-detector.
    pub fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Detector)) {
        f(self);
        match self {
            Detector::All { of } | Detector::Any { of } => of.iter().for_each(|d| d.walk(f)),
            Detector::Not { of } => of.walk(f),
            _ => {}
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleMeta {
    #[serde(default)]
    pub times: BTreeMap<String, i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    pub name: String,
    pub expect: Vec<String>,
    #[serde(default)]
    pub remove: Vec<String>,
    #[serde(default)]
    pub times: BTreeMap<String, i64>,
}

/// The fixed base time (2026-01-05T09:00:00Z) to which `times` offsets are
/// added when the grader zips a sample or a variant.
pub const TIME_BASE: i64 = 1_767_603_600;
