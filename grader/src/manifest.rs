//! The packet manifest (`packet.toml`): its data model, parsing and
//! validation. `packets/FORMAT.md` is the user-facing description of every
//! key; keep the two in step.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::pattern::{Globs, Pattern};
use crate::sandbox::Limits;

/// What is wrong with a manifest: every problem found, each located in its
/// file where it has a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    pub file: String,
    /// At least one, in the order of the checks.
    pub problems: Vec<Problem>,
}

/// One manifest problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line, when the problem has one.
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            match p.line {
                Some(line) => write!(f, "{}:{}: {}", self.file, line, p.message)?,
                None => write!(f, "{}: {}", self.file, p.message)?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for ManifestError {}

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
}

fn default_brief() -> String {
    "PROMPT.md".into()
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    pub python: Option<String>,
    #[serde(default)]
    pub tools: BTreeMap<String, String>,
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
    /// Any packet path to any workspace path.
    Map { from: String, to: String },
}

impl Step {
    /// Whether the grader learns this step's per-test results: from its
    /// JUnit file, or from the trusted runner.
    pub fn reports_tests(&self) -> bool {
        self.junit.is_some()
            || matches!(
                crate::trusted::plan(&self.run).runner(),
                Some(crate::trusted::RunnerKind::Pytest | crate::trusted::RunnerKind::Unittest)
            )
    }
}

impl Lay {
    /// (packet-relative source, workspace-relative destination).
    pub fn paths(&self) -> (String, String) {
        match self {
            Lay::Hidden(p) => (format!("hidden/{p}"), p.clone()),
            Lay::Map { from, to } => (from.clone(), to.clone()),
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

impl Manifest {
    /// Parses and validates `src`, the text of the file called `file`.
    pub fn parse(file: &str, src: &str) -> Result<Manifest, ManifestError> {
        let manifest: Manifest = toml::from_str(src).map_err(|e| ManifestError {
            file: file.to_string(),
            problems: vec![Problem {
                line: e.span().map(|s| line_of(src, s.start)),
                message: e.message().trim().to_string(),
            }],
        })?;
        manifest.validate(file, src)?;
        Ok(manifest)
    }

    /// The command the platform runs to witness a red or green run.
    pub fn witness_test(&self) -> &str {
        self.workspace.test.as_deref().unwrap_or(&self.commands.test)
    }

    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.id == id)
    }

    pub fn criterion(&self, id: &str) -> Option<&Criterion> {
        self.criteria.iter().find(|c| c.id == id)
    }

    pub fn failure(&self, id: &str) -> Option<&Failure> {
        self.failures.iter().find(|f| f.id == id)
    }

    /// Decisions ranked best first: the bands', then the `separate` pair.
    pub fn decision_rank(&self, decision: &str) -> Option<usize> {
        match self.rubric.aggregate {
            Aggregate::Sum => self.bands.iter().position(|b| b.decision == decision),
            Aggregate::Separate => [&self.rubric.pass_decision, &self.rubric.fail_decision]
                .iter()
                .position(|d| *d == decision),
        }
    }

    /// The rubric's lowest decision: the last band's, or the `separate`
    /// rubric's failing one.
    pub fn lowest_decision(&self) -> Option<&str> {
        match self.rubric.aggregate {
            Aggregate::Sum => self.bands.last().map(|b| b.decision.as_str()),
            Aggregate::Separate => Some(self.rubric.fail_decision.as_str()),
        }
    }

    fn validate(&self, file: &str, src: &str) -> Result<(), ManifestError> {
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
                Some(s) if s.junit.is_none() => bad.at(
                    &table,
                    format!(
                        "[proves.{step}]: step {step:?} has no `junit`, so it reports no tests"
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
        bad.finish(file)
    }

    /// Checks every path the manifest names: each must stay inside its
    /// folder (relative, no `..`, no absolute path, no backslash), and names
    /// that become path components (step ids, variant names) must be plain
    /// names. Returns (text to locate, message) for each bad one.
    fn check_paths(&self) -> Vec<(String, String)> {
        let path = |what: &str, p: &str| -> Option<(String, String)> {
            (!is_safe_path(p)).then(|| (quoted(p), format!("{what} {p:?} must be a relative path inside the folder (no `..`, no absolute path, no backslash)")))
        };
        let glob = |what: &str, g: &str| -> Option<(String, String)> {
            (g.is_empty() || g.starts_with('/') || g.contains('\\') || g.split('/').any(|c| c == ".." || c == "."))
                .then(|| (quoted(g), format!("{what} {g:?} must be a relative pattern inside the folder (no `..`, no absolute path)")))
        };
        // Files packet code writes in the grader's folder are kept from the
        // evidence folder, which the candidate's confined processes cannot
        // write; anywhere else in `.gatehouse/` they could rewrite them.
        let keep_writable = |g: &str| -> Option<(String, String)> {
            let grader_dir = g == ".gatehouse"
                || g.starts_with(".gatehouse/")
                || g.starts_with(".gatehouse*")
                || g.starts_with(".gatehouse?");
            (grader_dir && !g.starts_with(&format!("{}/", crate::sandbox::EVIDENCE_DIR))).then(|| {
                (quoted(g), format!(
                    "keep pattern {g:?} names files in .gatehouse/ that the candidate's processes can rewrite: packet code writes what a step keeps to the evidence folder ($GATEHOUSE_EVIDENCE, harness `evidence_path`) and the step keeps it as \".gatehouse/evidence/...\""
                ))
            })
        };
        let name = |what: &str, n: &str| -> Option<(String, String)> {
            let ok = !n.is_empty()
                && n != "."
                && n != ".."
                && n.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            (!ok).then(|| (quoted(n), format!("{what} {n:?} must be a plain name (letters, digits, '-', '_', '.'), as it names a folder")))
        };
        let m = self;
        let mut found: Vec<(String, String)> = Vec::new();
        let mut push = |r: Option<(String, String)>| found.extend(r);
        push(path("packet.brief", &m.packet.brief));
        for f in &m.packet.seed_files {
            push(path("seed file", f));
        }
        for f in &m.policy.frozen {
            push(path("frozen file", f));
        }
        for k in m.sample.times.keys() {
            push(path("sample.times key", k));
        }
        for s in &m.steps {
            push(name("step id", &s.id));
            if let Some(j) = &s.junit {
                push(path("junit", j));
            }
            for k in &s.keep {
                push(glob("keep pattern", k));
                push(keep_writable(k));
            }
        }
        if let Some(mu) = &m.mutation {
            push(path("mutation.target", &mu.target));
        }
        for v in &m.variants {
            push(name("variant name", &v.name));
            for r in &v.remove {
                push(path("variant remove", r));
            }
            for k in v.times.keys() {
                push(path("variant times key", k));
            }
        }
        for f in &m.failures {
            f.detect.walk(&mut |d| {
                let r = match d {
                    Detector::Missing { paths, .. } | Detector::Present { paths, .. } => {
                        paths.iter().find_map(|p| glob("path pattern", p))
                    }
                    Detector::OutsideAllowlist { allow } => {
                        allow.iter().find_map(|p| glob("allowlist pattern", p))
                    }
                    Detector::Pattern { files, .. } | Detector::StdlibOnly { files, .. } => {
                        files.iter().find_map(|p| glob("file pattern", p))
                    }
                    Detector::Frozen { paths: Some(paths) } => {
                        paths.iter().find_map(|p| path("frozen file", p))
                    }
                    Detector::PytestLog { file, nodes_from, .. } => path("log file", file)
                        .or_else(|| nodes_from.as_deref().and_then(|n| path("nodes_from", n))),
                    Detector::Order { before, after, .. } => {
                        path("order file", before).or_else(|| path("order file", after))
                    }
                    Detector::DiffAllowlist { diff, allow, allow_file } => path("diff file", diff)
                        .or_else(|| allow.iter().find_map(|p| glob("allowlist pattern", p)))
                        .or_else(|| allow_file.as_deref().and_then(|a| path("allow_file", a))),
                    Detector::DiffInvalid { diff } => path("diff file", diff),
                    Detector::Ledger { file, .. } => path("ledger file", file),
                    Detector::Digest { files, claimed_in, .. } => files
                        .iter()
                        .find_map(|p| glob("digest file", p))
                        .or_else(|| path("claimed_in", claimed_in)),
                    Detector::Witness { file: Some(f), .. } => path("witness file", f),
                    _ => None,
                };
                push(r);
            });
        }
        found
    }

    /// Checks one detector's references; returns (text to locate, message).
    fn check_detector(&self, d: &Detector) -> Option<(String, String)> {
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

fn check_lay(lay: &Lay) -> Result<(), String> {
    let (from, to) = lay.paths();
    for p in [&from, &to] {
        if !is_safe_path(p) {
            return Err(format!("lay path {p:?} must be relative, with no `..`"));
        }
    }
    Ok(())
}

pub use crate::tree::{is_safe_path, is_safe_relative};

fn quoted(s: &str) -> String {
    format!("{s:?}")
}

fn line_of(src: &str, offset: usize) -> usize {
    src[..offset.min(src.len())].bytes().filter(|b| *b == b'\n').count() + 1
}

/// The line of the first occurrence of `needle` in `src`.
fn locate(src: &str, needle: &str) -> Option<usize> {
    src.find(needle).map(|o| line_of(src, o))
}

/// One step of a key path into the manifest: a table key or an array index
/// (`[[step]]` tables are an array).
#[derive(Clone, Copy)]
enum Key<'a> {
    Name(&'a str),
    Index(usize),
}

impl<'a> From<&'a str> for Key<'a> {
    fn from(k: &'a str) -> Self {
        Key::Name(k)
    }
}

impl<'a> From<&'a String> for Key<'a> {
    fn from(k: &'a String) -> Self {
        Key::Name(k)
    }
}

impl From<usize> for Key<'_> {
    fn from(i: usize) -> Self {
        Key::Index(i)
    }
}

/// The problems validation finds, each located by the key path of the value
/// it is about (from toml's spanned parse of the same source), so a
/// duplicate id points at the duplicate, not at the first use.
struct Problems<'a> {
    src: &'a str,
    doc: Option<toml::Spanned<toml::de::DeTable<'a>>>,
    list: Vec<Problem>,
}

impl<'a> Problems<'a> {
    fn new(src: &'a str) -> Self {
        Problems { src, doc: toml::de::DeTable::parse(src).ok(), list: Vec::new() }
    }

    /// The line of the value at `path`, or of the deepest part of it that
    /// exists; none when not even its first key does.
    fn line(&self, path: &[Key]) -> Option<usize> {
        use toml::de::DeValue;
        let doc = self.doc.as_ref()?;
        let mut table = Some(doc.get_ref());
        let mut array = None;
        let mut found = None;
        for key in path {
            let child = match (key, table, array) {
                (Key::Name(n), Some(t), _) => {
                    t.iter().find(|(k, _)| k.get_ref().as_ref() == *n).map(|(_, v)| v)
                }
                (Key::Index(i), _, Some(a)) => <[_]>::get(a, *i),
                _ => None,
            };
            let Some(child) = child else { break };
            found = Some(child.span().start);
            (table, array) = match child.get_ref() {
                DeValue::Table(t) => (Some(t), None),
                DeValue::Array(a) => (None, Some(&a[..])),
                _ => (None, None),
            };
        }
        found.map(|o| line_of(self.src, o))
    }

    fn at(&mut self, path: &[Key], message: String) {
        let line = self.line(path);
        self.list.push(Problem { line, message });
    }

    /// A problem located at the first occurrence of `needle` (for values
    /// that are unique in practice, such as a path).
    fn near(&mut self, needle: &str, message: String) {
        let line = locate(self.src, needle);
        self.list.push(Problem { line, message });
    }

    fn finish(self, file: &str) -> Result<(), ManifestError> {
        if self.list.is_empty() {
            Ok(())
        } else {
            Err(ManifestError { file: file.to_string(), problems: self.list })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
[packet]
slug = "demo"
version = "1"
title = "Demo"

[commands]
test = "python3 -m pytest -q"

[[step]]
id = "hidden"
run = "python3 -m pytest -q --junitxml=.gatehouse/hidden.xml"
junit = ".gatehouse/hidden.xml"

[[criterion]]
id = "correct"
title = "Correct"
max = 2
levels = ["no", "partly", "yes"]
mode = "auto"
from = { tests = "hidden" }

[[band]]
min = 2
decision = "advance"

[[band]]
min = 0
decision = "close"

[[failure]]
id = "broken"
title = "Broken"
description = "A hidden test fails."
effect = { criterion = "correct", set = 0 }
detect = { kind = "test-failing", step = "hidden" }
"#;

    /// Parses MINIMAL with `edit` applied and returns the error text, or "ok".
    fn check(edit: impl FnOnce(String) -> String, expect: &str) {
        let src = edit(MINIMAL.to_string());
        let got = match Manifest::parse("packet.toml", &src) {
            Ok(_) => "ok".to_string(),
            Err(e) => e.to_string(),
        };
        assert!(got.contains(expect), "expected {expect:?} in {got:?}");
    }

    /// Applies `edit` to MINIMAL; the problem must be reported at the line
    /// marked `# <-` in the result.
    fn check_line(edit: impl FnOnce(String) -> String, expect: &str) {
        let src = edit(MINIMAL.to_string());
        let line =
            src.lines().position(|l| l.ends_with("# <-")).expect("the edit marks a line") + 1;
        let e = Manifest::parse("packet.toml", &src).expect_err(expect).to_string();
        let want = format!("packet.toml:{line}: {expect}");
        assert!(
            e.lines().any(|l| l.starts_with(&want)),
            "expected a line starting {want:?} in\n{e}"
        );
    }

    #[test]
    fn semantic_errors_point_at_the_value_they_are_about() {
        let append = |more: &'static str| move |s: String| format!("{s}\n{more}\n");
        let step = "[[step]]\nid = \"hidden\" # <-\nrun = \"true\"";
        check_line(append(step), "step id \"hidden\" is used twice");
        let criterion = "[[criterion]]\nid = \"correct\" # <-\ntitle = \"Again\"\nmax = 1\nlevels = [\"no\", \"yes\"]\nmode = \"auto\"\nfrom = { tests = \"hidden\" }";
        check_line(append(criterion), "criterion id \"correct\" is used twice");
        let failure = "[[failure]]\nid = \"broken\" # <-\ntitle = \"B\"\ndescription = \"B\"\neffect = { criterion = \"correct\", set = 0 }\ndetect = { kind = \"test-failing\", step = \"hidden\" }";
        check_line(append(failure), "failure id \"broken\" is used twice");
        check_line(
            append("[[gate]]\nfailure = \"broken\"\ndecision = \"maybe\" # <-"),
            "gate decision \"maybe\"",
        );
        check_line(
            append("[[variant]]\nname = \"v\"\nexpect = [\"ghost\"] # <-"),
            "variant \"v\" expects failure \"ghost\"",
        );
        check_line(
            append("[mutation]\ntarget = \"a.py\"\nrun = \"true\"\nhidden_step = \"ghost\" # <-"),
            "mutation.hidden_step \"ghost\"",
        );
        let replace =
            |from: &'static str, to: &'static str| move |s: String| s.replacen(from, to, 1);
        check_line(
            replace(
                "effect = { criterion = \"correct\", set = 0 }",
                "effect = { criterion = \"nope\", set = 0 } # <-",
            ),
            "failure \"broken\" affects criterion \"nope\"",
        );
        check_line(
            replace("step = \"hidden\" }", "step = \"other\" } # <-"),
            "failure \"broken\": detector names step \"other\"",
        );
        check_line(
            replace("levels = [\"no\", \"partly\", \"yes\"]", "levels = [\"no\", \"yes\"] # <-"),
            "criterion \"correct\" has max 2",
        );
        check_line(replace("min = 0", "min = 1 # <-"), "the last band must have `min = 0`");
        check_line(replace("slug = \"demo\"", "slug = \"Demo!\" # <-"), "slug \"Demo!\"");
        check_line(
            replace("junit = \".gatehouse/hidden.xml\"", "junit = \"/tmp/hidden.xml\" # <-"),
            "junit \"/tmp/hidden.xml\"",
        );
        // A bad regex is a toml error at its value (it compiles as it is read).
        check_line(
            replace(
                "detect = { kind = \"test-failing\", step = \"hidden\" }",
                "detect = { kind = \"pattern\", files = [\"*.py\"], regex = \"(\" } # <-",
            ),
            "bad regex \"(\"",
        );
    }

    #[test]
    fn every_problem_is_reported_not_only_the_first() {
        let src = MINIMAL.replacen("criterion = \"correct\", set", "criterion = \"nope\", set", 1)
            + "\n[[gate]]\nfailure = \"broken\"\ndecision = \"maybe\"\n\n[[variant]]\nname = \"v\"\nexpect = [\"ghost\"]\n";
        let e = Manifest::parse("packet.toml", &src).unwrap_err();
        let messages: Vec<&str> = e.problems.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert!(messages[0].contains("affects criterion \"nope\""), "{messages:?}");
        assert!(messages[1].contains("gate decision \"maybe\""), "{messages:?}");
        assert!(messages[2].contains("expects failure \"ghost\""), "{messages:?}");
        assert_eq!(e.to_string().lines().count(), 3, "one line per problem: {e}");
        assert!(e.problems.iter().all(|p| p.line.is_some()), "{e}");
    }

    #[test]
    fn every_built_in_manifest_parses_with_its_patterns_compiled_once() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../packets");
        let mut parsed = 0;
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let file = entry.path().join("packet.toml");
            let Ok(src) = std::fs::read_to_string(&file) else { continue };
            Manifest::parse("packet.toml", &src)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            parsed += 1;
        }
        assert!(parsed >= 13, "only {parsed} packets under {}", dir.display());
    }

    #[test]
    fn minimal_manifest_parses() {
        check(|s| s, "ok");
    }

    #[test]
    fn proves_tables_are_checked() {
        let with = |table: &str| {
            let table = table.to_string();
            move |s: String| format!("{s}\n{table}\n")
        };
        check(with("[proves.hidden]\n\"test_*\" = \"broken\""), "ok");
        check(with("[proves.hidden]\n\"test_a\" = [\"broken\"]\n\"test_b*\" = \"broken\""), "ok");
        check(
            with("[proves.other]\n\"test_*\" = \"broken\""),
            "[proves.other] names step \"other\", which is not a step",
        );
        check(
            with("[proves.hidden]\n\"test_*\" = \"nope\""),
            "proves failure \"nope\", which is not in the catalog",
        );
        check(with("[proves.hidden]\n\"test_*\" = []"), "proves no failure id");
        check(with("[proves.hidden]\n\"test_[\" = \"broken\""), "is not a valid glob");
        check(
            |s| {
                format!(
                    "{}\n[proves.hidden]\n\"t\" = \"broken\"\n",
                    s.replace("junit = \".gatehouse/hidden.xml\"\n", "")
                )
            },
            "has no `junit`",
        );
    }

    #[test]
    fn unknown_key_names_line() {
        check(
            |s| s.replace("title = \"Demo\"", "title = \"Demo\"\ncolour = 1"),
            "packet.toml:6: unknown field `colour`",
        );
    }

    #[test]
    fn level_count_must_match_max() {
        check(
            |s| s.replace("[\"no\", \"partly\", \"yes\"]", "[\"no\", \"yes\"]"),
            "needs 3 level descriptions, found 2",
        );
    }

    #[test]
    fn effect_must_name_a_criterion() {
        check(
            |s| s.replace("criterion = \"correct\", set", "criterion = \"nope\", set"),
            "affects criterion \"nope\"",
        );
    }

    #[test]
    fn detector_must_name_a_step() {
        check(
            |s| {
                s.replace(
                    "kind = \"test-failing\", step = \"hidden\"",
                    "kind = \"test-failing\", step = \"other\"",
                )
            },
            "step \"other\", which is not defined",
        );
    }

    #[test]
    fn unknown_detector_kind() {
        check(|s| s.replace("\"test-failing\"", "\"telepathy\""), "unknown variant `telepathy`");
    }

    #[test]
    fn bands_must_end_at_zero() {
        check(|s| s.replace("min = 0", "min = 1"), "the last band must have `min = 0`");
    }

    #[test]
    fn bad_regex_is_named() {
        check(
            |s| {
                s.replace(
                    "detect = { kind = \"test-failing\", step = \"hidden\" }",
                    "detect = { kind = \"pattern\", files = [\"*.py\"], regex = \"(\" }",
                )
            },
            "bad regex",
        );
    }

    #[test]
    fn every_path_a_manifest_names_stays_inside() {
        // (the edit, what the error must say)
        let cases: &[(&str, &str, &str)] = &[
            (
                "[commands]",
                "[mutation]\ntarget = \"/etc/passwd\"\nrun = \"true\"\nhidden_step = \"hidden\"\n\n[commands]",
                "mutation.target \"/etc/passwd\"",
            ),
            (
                "[commands]",
                "[mutation]\ntarget = \"../../../x.py\"\nrun = \"true\"\nhidden_step = \"hidden\"\n\n[commands]",
                "mutation.target \"../../../x.py\"",
            ),
            ("title = \"Demo\"", "title = \"Demo\"\nseed_files = [\"/root/.ssh/id\"]", "seed file"),
            ("title = \"Demo\"", "title = \"Demo\"\nbrief = \"../PROMPT.md\"", "packet.brief"),
            (
                "id = \"hidden\"",
                "id = \"../../hidden\"",
                "step id \"../../hidden\" must be a plain name",
            ),
            (
                "junit = \".gatehouse/hidden.xml\"",
                "junit = \"/tmp/hidden.xml\"",
                "junit \"/tmp/hidden.xml\"",
            ),
            (
                "junit = \".gatehouse/hidden.xml\"",
                "junit = \".gatehouse/hidden.xml\"\nkeep = [\"../*\"]",
                "keep pattern",
            ),
            (
                "junit = \".gatehouse/hidden.xml\"",
                "junit = \".gatehouse/hidden.xml\"\nlay = [{ from = \"/etc/shadow\", to = \"x\" }]",
                "lay path",
            ),
            (
                "junit = \".gatehouse/hidden.xml\"",
                "junit = \".gatehouse/hidden.xml\"\nlay = [{ from = \"hidden/a\", to = \"..\\\\x\" }]",
                "lay path",
            ),
            ("[commands]", "[policy]\nfrozen = [\"/etc/hosts\"]\n\n[commands]", "frozen file"),
        ];
        for (from, to, expect) in cases {
            let src = MINIMAL.replacen(from, to, 1);
            assert_ne!(src, MINIMAL, "the edit {from:?} did not apply");
            let e = Manifest::parse("packet.toml", &src).expect_err(to).to_string();
            assert!(e.contains(expect), "{to}: expected {expect:?} in {e}");
            assert!(e.starts_with("packet.toml:"), "{e}");
        }
        let variant = format!("{MINIMAL}\n[[variant]]\nname = \"/tmp/x\"\nexpect = [\"broken\"]\n");
        assert!(
            Manifest::parse("packet.toml", &variant)
                .unwrap_err()
                .to_string()
                .contains("variant name")
        );
        let remove = format!(
            "{MINIMAL}\n[[variant]]\nname = \"v\"\nexpect = [\"broken\"]\nremove = [\"/home\"]\n"
        );
        assert!(
            Manifest::parse("packet.toml", &remove)
                .unwrap_err()
                .to_string()
                .contains("variant remove \"/home\"")
        );
        let present = MINIMAL.replace(
            "detect = { kind = \"test-failing\", step = \"hidden\" }",
            "detect = { kind = \"present\", paths = [\"/etc/*\"] }",
        );
        assert!(
            Manifest::parse("packet.toml", &present)
                .unwrap_err()
                .to_string()
                .contains("path pattern")
        );
    }

    #[test]
    fn witness_detectors_are_checked() {
        let d = "detect = { kind = \"test-failing\", step = \"hidden\" }";
        let with = |w: &'static str| move |s: String| s.replace(d, &format!("detect = {w}"));
        check(with("{ kind = \"witness\", check = \"model-before-red\" }"), "ok");
        check(
            with(
                "{ kind = \"witness\", check = \"usage-dishonest\", file = \"usage.jsonl\", tolerance = 0.05 }",
            ),
            "ok",
        );
        check(
            with(
                "{ kind = \"any\", of = [{ kind = \"witness\", check = \"retry-storm\", min_chain = 4 }] }",
            ),
            "ok",
        );
        check(
            with("{ kind = \"witness\", check = \"mind-reading\" }"),
            "unknown variant `mind-reading`",
        );
        check(with("{ kind = \"witness\", check = \"usage-missing\" }"), "needs `file`");
        check(
            with("{ kind = \"witness\", check = \"model-before-red\", file = \"x\" }"),
            "reads no claimed file",
        );
        check(
            with(
                "{ kind = \"witness\", check = \"usage-dishonest\", file = \"u.jsonl\", tolerance = 5 }",
            ),
            "a fraction",
        );
        check(with("{ kind = \"witness\", check = \"retry-storm\", min_chain = 1 }"), "at least 2");
        check(
            with("{ kind = \"witness\", check = \"usage-missing\", file = \"../u.jsonl\" }"),
            "must be a relative path inside the folder",
        );
        check(
            with("{ kind = \"not\", of = { kind = \"witness\", check = \"retry-storm\" } }"),
            "cannot sit under `not`",
        );
    }

    #[test]
    fn kept_packet_evidence_must_come_from_the_evidence_folder() {
        let keep = |k: &'static str| {
            move |s: String| {
                s.replace(
                    "junit = \".gatehouse/hidden.xml\"",
                    &format!("junit = \".gatehouse/hidden.xml\"\nkeep = [{k}]"),
                )
            }
        };
        // Files packet code wrote in .gatehouse/, where the candidate's processes can rewrite them: refused.
        for k in [
            "\".gatehouse/recomputed.jsonl\"",
            "\".gatehouse/runs/**\"",
            "\".gatehouse\"",
            "\".gatehouse*/x\"",
            "\".gatehouse/evidence\"",
        ] {
            check(keep(k), "that the candidate's processes can rewrite");
        }
        // From the evidence folder, or the candidate's own products at the top: accepted.
        for k in [
            "\".gatehouse/evidence/recomputed.jsonl\"",
            "\".gatehouse/evidence/runs/**\"",
            "\"usage.jsonl\"",
        ] {
            check(keep(k), "ok");
        }
    }

    #[test]
    fn variant_must_expect_known_ids() {
        check(
            |s| s + "\n[[variant]]\nname = \"v\"\nexpect = [\"ghost\"]\n",
            "expects failure \"ghost\"",
        );
    }

    #[test]
    fn gate_decision_must_be_a_band() {
        check(
            |s| s + "\n[[gate]]\nfailure = \"broken\"\ndecision = \"maybe\"\n",
            "gate decision \"maybe\"",
        );
    }

    #[test]
    fn file_detectors_on_a_step_need_kept_files() {
        let d = "detect = { kind = \"test-failing\", step = \"hidden\" }";
        check(
            |s| s.replace(d, "detect = { kind = \"missing\", step = \"hidden\", paths = [\"x\"] }"),
            "which keeps none",
        );
        check(
            |s| {
                s.replace(d, "detect = { kind = \"missing\", step = \"hidden\", paths = [\"x\"] }")
                    .replace(
                        "junit = \".gatehouse/hidden.xml\"",
                        "junit = \".gatehouse/hidden.xml\"\nkeep = [\"x\"]",
                    )
            },
            "ok",
        );
        check(
            |s| s.replace(d, "detect = { kind = \"leftovers\", step = \"nope\" }"),
            "step \"nope\", which is not defined",
        );
        check(
            |s| {
                s.replace(d, "detect = { kind = \"digest\", files = [\"a.py\"], claimed_in = \"u.jsonl\", regex = \"[0-9a-f]{64}\" }")
            },
            "exactly one capture group",
        );
        check(
            |s| {
                s.replace(d, "detect = { kind = \"ledger\", file = \"u.jsonl\", compare = { field = \"rows\", with_step = \"hidden\", with_file = \"x\", with_field = \"rows\", tolerance_pct = 5 } }")
            },
            "which keeps none",
        );
        check(
            |s| {
                s.replace(d, "detect = { kind = \"ledger\", file = \"u.jsonl\", schema = { a = \"float\" }, invalid = true }")
            },
            "unknown variant `float`",
        );
    }

    #[test]
    fn workspace_table_is_optional_and_checked() {
        let m = Manifest::parse("packet.toml", MINIMAL).unwrap();
        assert_eq!(m.witness_test(), "python3 -m pytest -q");
        assert!(!m.workspace.model_waits_for_red);
        let src = MINIMAL.replace("[[step]]", "[workspace]\ntest = \"python3 -m pytest -q -x\"\nmodel_waits_for_red = true\n\n[[step]]");
        let m = Manifest::parse("packet.toml", &src).unwrap();
        assert_eq!(m.witness_test(), "python3 -m pytest -q -x");
        assert!(m.workspace.model_waits_for_red);
        check(
            |s| s.replace("[[step]]", "[workspace]\nmodel_waits_for_red = \"yes\"\n\n[[step]]"),
            "packet.toml:11: invalid type",
        );
        check(
            |s| s.replace("[[step]]", "[workspace]\nwait = true\n\n[[step]]"),
            "packet.toml:11: unknown field `wait`",
        );
        check(
            |s| s.replace("[[step]]", "[workspace]\ntest = \" \"\n\n[[step]]"),
            "packet.toml:11: workspace.test is empty",
        );
    }

    #[test]
    fn lay_paths_must_stay_inside() {
        check(
            |s| {
                s.replace(
                    "junit = \".gatehouse/hidden.xml\"",
                    "junit = \".gatehouse/hidden.xml\"\nlay = [\"../etc/passwd\"]",
                )
            },
            "must be relative",
        );
    }
}
