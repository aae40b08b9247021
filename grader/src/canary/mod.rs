//! Canary tests: tests planted in every trusted test run that the
//! candidate's code cannot tell apart from the real ones, whose outcome the
//! grader knows in advance.
//!
//! TWINS. A generator per language ([`Lang`]: `harness/gatehouse_twins.py`
//! for Python, `gatehouse_go_twins.go` for Go, `gatehouse_ts_twins.js` for
//! TypeScript, each over its language's own parser; run once per packet
//! version, in the sandbox, on the hidden test modules the steps lay)
//! writes a template of each module: its text, with every test function as
//! a slot holding the function and up to two twins, each the same function
//! with one assertion changed to contradict the original (an equality
//! expects another literal, or the assertion is negated).
//! Calibration plants every twin in the sample's grading and keeps the
//! twins that fail there while their test passes, with what each test and
//! twin cost ([`StepCanaries`]). A graded run plants at most one calibrated
//! twin per test, in some of the tests ([`choose_twins`]: one drawn
//! whatever it costs, more within a share of the module's cost), gives every
//! test of the module, real or twin, a fresh random name and shuffles each
//! test with its twin ([`plant`]), all from a seed the candidate cannot
//! know (the calibration's salt and the submission's digest). A twin and
//! its test both passing is a contradiction no implementation produces:
//! the results were forged, the assertion neutered, or the value compares
//! equal to anything (`evidence-tampering`, naming the test). A twin the
//! run never reported although the module ran is one too. When the test
//! itself fails the twin proves nothing and is not judged, so a buggy
//! honest implementation is never accused.
//!
//! THE GENERIC PAIR. Runs of tests the candidate wrote (mutants, the
//! reference step, witnessed runs, the self-test's red and green) get a
//! module of two tests that do not touch the candidate's code, one that
//! must pass and one that must fail ([`generic_module`]): reported the
//! other way round, the results were forged.
//!
//! Results are mapped back before anything reads them ([`RunCanaries::
//! resolve`]): real tests get their own ids again, canaries leave the
//! outcomes, their names are written back in the run's output, and a run
//! that failed only because of its canaries counts as the pass it is.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::evidence::{TestOutcome, TestStatus};
use crate::packet::Packet;
use crate::trusted::{RunnerKind, RunnerResult};

mod choose;

use choose::choose_twins;
pub use choose::{
    Budget, Graded, MIN_FIRST_ODDS, TWIN_BUDGET_PERCENT, first_twin_module, module_cost,
};

/// The generator's placeholder for a test function's name.
pub const NAME_PLACEHOLDER: &str = "__GH_NAME__";

/// The language of a hidden test module, by its file name: which generator
/// reads it (`guard::generate`) and how a planted test is named. One place
/// per language: a new one adds a variant, its generator and its runner's
/// rule in [`collects`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lang {
    /// `test*.py`, `*_test.py`: `harness/gatehouse_twins.py`.
    Python,
    /// `*_test.go`: `harness/gatehouse_go_twins.go` (`go/ast`).
    Go,
    /// `*.ts` test files (`lang_node::is_test_file`):
    /// `harness/gatehouse_ts_twins.js` (the TypeScript compiler's parser).
    TypeScript,
}

impl Lang {
    /// The language of the test module at `path`, if it is one.
    pub fn of(path: &str) -> Option<Lang> {
        let name = path.rsplit('/').next().unwrap_or(path);
        if name.ends_with(".py") && (name.starts_with("test") || name.ends_with("_test.py")) {
            Some(Lang::Python)
        } else if name.ends_with("_test.go") {
            Some(Lang::Go)
        } else if name.ends_with(".ts") && !name.ends_with(".d.ts") {
            Some(Lang::TypeScript)
        } else {
            None
        }
    }

    /// A fresh planted test name: `test_` and ten lowercase letters
    /// (`Test_` in Go, whose runner runs only `Test` functions).
    fn test_name(self, rng: &mut Rng) -> String {
        let n = rng.test_name();
        match self {
            Lang::Go => format!("Test{}", &n[4..]),
            Lang::Python | Lang::TypeScript => n,
        }
    }

    /// The module name the generator reads a module under, `m{i}` and an
    /// extension of the language.
    pub fn scratch_name(self, i: usize) -> String {
        match self {
            Lang::Python => format!("m{i}.py"),
            Lang::Go => format!("m{i}.go.txt"),
            Lang::TypeScript => format!("m{i}.ts"),
        }
    }
}

/// One twin of a test: its code (named [`NAME_PLACEHOLDER`]) and what it
/// changed (`line 44: expects another value`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Twin {
    pub code: String,
    pub what: String,
}

impl Twin {
    /// A twin that expects another value (which also catches values equal
    /// to anything and answers read from the test) rather than a negation.
    pub fn expects_value(&self) -> bool {
        self.what.contains("expects another")
    }
}

/// One test function of a module template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slot {
    pub slot: usize,
    pub indent: String,
    pub name: String,
    #[serde(default)]
    pub class: Option<String>,
    pub code: String,
    #[serde(default)]
    pub twins: Vec<Twin>,
}

impl Slot {
    /// `Class::name` or `name`: the test's key within its module.
    pub fn key(&self) -> String {
        match &self.class {
            Some(c) => format!("{c}::{}", self.name),
            None => self.name.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Part {
    Slot(Slot),
    Text { text: String },
}

/// A hidden test module, as the generator split it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Template {
    #[serde(default)]
    pub parts: Vec<Part>,
    /// Why the module could not be read (a syntax error): it is laid as
    /// the packet has it, without canaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Template {
    pub fn slots(&self) -> impl Iterator<Item = &Slot> {
        self.parts.iter().filter_map(|p| match p {
            Part::Slot(s) => Some(s),
            Part::Text { .. } => None,
        })
    }
}

/// What one test and its twins cost when the sample was graded, in
/// microseconds from each one's start to its report (a failing twin's
/// failure report included), summed over its parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotCost {
    pub test_us: u64,
    /// Twin index → its cost.
    #[serde(default)]
    pub twins_us: BTreeMap<usize, u64>,
}

/// The canaries of one step: each hidden test module it lays (by the
/// path it is laid at) and, after calibration, which twins of which test
/// failed on the sample while the test passed, and what each cost there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepCanaries {
    pub files: BTreeMap<String, Template>,
    /// `file` → test key → indices of its calibrated twins.
    #[serde(default)]
    pub calibrated: BTreeMap<String, BTreeMap<String, BTreeSet<usize>>>,
    /// `file` → test key → what it and its twins cost on the sample.
    #[serde(default)]
    pub cost: BTreeMap<String, BTreeMap<String, SlotCost>>,
    /// What the step's twins may cost in a graded run, in microseconds: its
    /// share, by what its run cost without twins, of [`TWIN_BUDGET_PERCENT`]
    /// of what grading the sample cost without twins (its wall or its CPU
    /// time, whichever is less).
    #[serde(default)]
    pub budget_us: u64,
}

impl StepCanaries {
    /// How many tests have at least one calibrated twin.
    pub fn covered(&self) -> usize {
        self.calibrated.values().map(|m| m.values().filter(|s| !s.is_empty()).count()).sum()
    }

    /// The tests of the step's modules that have no calibrated twin.
    pub fn uncovered(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (file, t) in &self.files {
            for s in t.slots() {
                let ok = self
                    .calibrated
                    .get(file)
                    .and_then(|m| m.get(&s.key()))
                    .is_some_and(|set| !set.is_empty());
                if !ok {
                    out.push(format!("{file}::{}", s.key()));
                }
            }
        }
        out
    }
}

/// A deterministic stream of random bytes: SHA-256 of a key and a counter.
pub struct Rng {
    key: [u8; 32],
    counter: u64,
    buf: [u8; 32],
    pos: usize,
}

impl Rng {
    pub fn new(parts: &[&[u8]]) -> Rng {
        let mut h = Sha256::new();
        for p in parts {
            h.update((p.len() as u64).to_le_bytes());
            h.update(p);
        }
        Rng { key: h.finalize().into(), counter: 0, buf: [0; 32], pos: 32 }
    }

    fn byte(&mut self) -> u8 {
        if self.pos == 32 {
            let mut h = Sha256::new();
            h.update(self.key);
            h.update(self.counter.to_le_bytes());
            self.buf = h.finalize().into();
            self.counter += 1;
            self.pos = 0;
        }
        self.pos += 1;
        self.buf[self.pos - 1]
    }

    pub fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        let mut v: u64 = 0;
        for _ in 0..8 {
            v = (v << 8) | u64::from(self.byte());
        }
        (v % n as u64) as usize
    }

    /// A number in (0, 1].
    pub fn unit(&mut self) -> f64 {
        const SPAN: usize = 1 << 53;
        (self.below(SPAN) + 1) as f64 / SPAN as f64
    }

    /// `test_` and ten lowercase letters.
    pub fn test_name(&mut self) -> String {
        let mut s = String::from("test_");
        for _ in 0..10 {
            s.push((b'a' + (self.byte() % 26)) as char);
        }
        s
    }
}

/// What a planted test is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// A real test of the packet, under a planted name.
    Real { file: String, key: String, name: String },
    /// A twin of the real test `of` (its planted name).
    Twin { file: String, key: String, of: String, what: String },
    /// The generic pair: `must_pass` tells which.
    Generic { must_pass: bool },
}

/// Which twins to plant.
#[derive(Clone, Copy)]
pub enum Choose<'a> {
    /// Every twin (calibration).
    All,
    /// At most one calibrated twin per test, for some of the tests (a
    /// graded run; see [`choose_twins`]).
    Calibrated(Graded<'a>),
}

/// The module text for one planting of `template`, and the role of every
/// name it planted. Tests named in `keep` (the step's command selects them
/// by name) keep their names and get no twin.
pub fn plant(
    template: &Template,
    file: &str,
    choose: Choose,
    keep: &dyn Fn(&str) -> bool,
    rng: &mut Rng,
    roles: &mut BTreeMap<String, Role>,
) -> String {
    // Which tests get a twin in a graded run, and which twin.
    let chosen: BTreeMap<usize, usize> = match choose {
        Choose::All => BTreeMap::new(),
        Choose::Calibrated(graded) => choose_twins(template, graded, rng),
    };
    let mut out = String::new();
    let all_text: String = template
        .parts
        .iter()
        .map(|p| match p {
            Part::Text { text } => text.as_str(),
            Part::Slot(s) => s.code.as_str(),
        })
        .collect();
    let lang = Lang::of(file).unwrap_or(Lang::Python);
    let fresh = |rng: &mut Rng, roles: &BTreeMap<String, Role>| loop {
        let n = lang.test_name(rng);
        if !roles.contains_key(&n) && !all_text.contains(&n) {
            return n;
        }
    };
    for part in &template.parts {
        let slot = match part {
            Part::Text { text } => {
                out.push_str(text);
                continue;
            }
            Part::Slot(s) => s,
        };
        let key = slot.key();
        if keep(&slot.name) {
            push_block(&mut out, &slot.indent, &slot.code, &slot.name);
            continue;
        }
        let real = fresh(rng, roles);
        roles.insert(
            real.clone(),
            Role::Real { file: file.to_string(), key: key.clone(), name: slot.name.clone() },
        );
        let twins: Vec<usize> = match choose {
            Choose::All => (0..slot.twins.len()).collect(),
            Choose::Calibrated(..) => chosen.get(&slot.slot).copied().into_iter().collect(),
        };
        let mut blocks: Vec<(String, &str)> = vec![(real.clone(), slot.code.as_str())];
        for i in twins {
            let name = fresh(rng, roles);
            roles.insert(
                name.clone(),
                Role::Twin {
                    file: file.to_string(),
                    key: key.clone(),
                    of: real.clone(),
                    what: slot.twins[i].what.clone(),
                },
            );
            blocks.push((name, slot.twins[i].code.as_str()));
        }
        shuffle(&mut blocks, rng);
        for (n, (name, code)) in blocks.iter().enumerate() {
            if n > 0 {
                out.push('\n');
            }
            push_block(&mut out, &slot.indent, code, name);
        }
    }
    out
}

/// A random order (Fisher-Yates).
fn shuffle<T>(items: &mut [T], rng: &mut Rng) {
    for i in (1..items.len()).rev() {
        let j = rng.below(i + 1);
        items.swap(i, j);
    }
}

fn push_block(out: &mut String, indent: &str, code: &str, name: &str) {
    for line in code.replace(NAME_PLACEHOLDER, name).lines() {
        if !line.is_empty() {
            out.push_str(indent);
        }
        out.push_str(line);
        out.push('\n');
    }
}

/// The generic pair: a module of one test class with a test that must
/// pass and one that must fail, neither touching the candidate's code.
pub fn generic_module(rng: &mut Rng, roles: &mut BTreeMap<String, Role>) -> String {
    let class = format!("Test{}", &rng.test_name()[5..]);
    let pass = rng.test_name();
    let fail = rng.test_name();
    let (a, b, c, d) =
        (rng.below(900) + 10, rng.below(900) + 10, rng.below(90) + 3, rng.below(90) + 3);
    roles.insert(pass.clone(), Role::Generic { must_pass: true });
    roles.insert(fail.clone(), Role::Generic { must_pass: false });
    let (first, second) = if rng.below(2) == 0 {
        (format!("{a} + {b}, {}", a + b), format!("{c} * {d}, {}", c * d + 1))
    } else {
        (format!("{c} * {d}, {}", c * d), format!("{a} + {b}, {}", a + b + 1))
    };
    let mut tests = [(pass, first), (fail, second)];
    if rng.below(2) == 0 {
        tests.swap(0, 1);
    }
    let mut s = format!("import unittest\n\n\nclass {class}(unittest.TestCase):\n");
    for (i, (name, args)) in tests.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        s.push_str(&format!("    def {name}(self):\n        self.assertEqual({args})\n"));
    }
    s
}

/// The planted names of one run and what each is.
#[derive(Debug, Clone, Default)]
pub struct RunCanaries {
    pub roles: BTreeMap<String, Role>,
    /// Calibration: report every twin's outcome instead of judging them.
    pub calibrating: bool,
}

/// One test as calibration saw it: whether it passed, and per twin index
/// whether that twin failed.
pub type TwinsSeen = (bool, BTreeMap<String, bool>);

/// What the canaries of one run showed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Contradictions and missing canaries: signs of tampering.
    pub signs: Vec<String>,
    /// How many canaries the run carried, and how many were judged.
    pub planted: usize,
    /// Calibration: file → test key → (test passed, twin index → twin failed).
    pub twins: BTreeMap<String, BTreeMap<String, TwinsSeen>>,
    /// Calibration: file → test key → (its cost, twin → its cost), in
    /// microseconds as the runner timed them.
    pub cost: BTreeMap<String, BTreeMap<String, CostSeen>>,
}

/// One test's cost as calibration saw it, and each of its twins' (by what
/// the twin changed), in microseconds.
pub type CostSeen = (u64, BTreeMap<String, u64>);

/// The last name segment of a test id (`a.py::C::test_x[1]` or
/// `mod.C.test_x`), where it starts, and where its parameters start.
fn name_span(id: &str) -> (usize, usize) {
    let base_end = id.find('[').unwrap_or(id.len());
    let head = &id[..base_end];
    let start = head.rfind("::").map(|i| i + 2).or_else(|| head.rfind('.').map(|i| i + 1));
    (start.unwrap_or(0), base_end)
}

fn name_of(id: &str) -> &str {
    let (s, e) = name_span(id);
    &id[s..e]
}

impl RunCanaries {
    pub fn is_empty(&self) -> bool {
        self.roles.is_empty()
    }

    fn role_of(&self, id: &str) -> Option<(&str, &Role)> {
        let (s, e) = name_span(id);
        let name = &id[s..e];
        self.roles.get_key_value(name).map(|(k, r)| (k.as_str(), r))
    }

    /// `id` with a real test's planted name put back.
    pub fn real_id(&self, id: &str) -> String {
        let (s, e) = name_span(id);
        match self.roles.get(&id[s..e]) {
            Some(Role::Real { name, .. }) => format!("{}{}{}", &id[..s], name, &id[e..]),
            _ => id.to_string(),
        }
    }

    /// The test `id` stands for, as a reviewer reads it: a real test's own
    /// name put back, a twin as its test (the same test, one assertion
    /// changed: what crashed in it is the code its test calls), the generic
    /// pair as `gatehouse_canary`.
    pub fn shown_id(&self, id: &str) -> String {
        let (s, e) = name_span(id);
        match self.roles.get(&id[s..e]) {
            Some(Role::Twin { key, .. }) => {
                format!("{}{}{}", &id[..s], key.rsplit("::").next().unwrap_or(key), &id[e..])
            }
            Some(Role::Generic { .. }) => format!("{}gatehouse_canary{}", &id[..s], &id[e..]),
            _ => self.real_id(id),
        }
    }

    fn real_outcome(&self, mut o: TestOutcome) -> TestOutcome {
        o.name = self.real_id(&o.name);
        o
    }

    fn is_canary(&self, id: &str) -> bool {
        matches!(self.role_of(id), Some((_, Role::Twin { .. } | Role::Generic { .. })))
    }

    /// Maps `r` back in place: real tests get their ids again, canary
    /// cases leave it. Returns what the canaries showed.
    pub fn resolve(&self, r: &mut RunnerResult, stopped: bool) -> Verdict {
        let mut verdict = Verdict::default();
        if self.roles.is_empty() {
            return verdict;
        }
        // Calibration: what each planted name cost, over its parameters.
        let mut spent: BTreeMap<String, u64> = BTreeMap::new();
        if self.calibrating {
            for (id, us) in &r.cost_us {
                if let Some((name, _)) = self.role_of(id) {
                    *spent.entry(name.to_string()).or_default() += us;
                }
            }
        }
        let mut canary_cases: BTreeMap<String, TestStatus> = BTreeMap::new();
        let mut real_cases: BTreeMap<String, TestStatus> = BTreeMap::new();
        let mut cases = Vec::with_capacity(r.cases.len());
        for (id, outcome) in std::mem::take(&mut r.cases) {
            match self.role_of(&id) {
                Some((name, Role::Twin { .. } | Role::Generic { .. })) => {
                    let status = canary_cases.entry(name.to_string()).or_insert(outcome.status);
                    *status = worst(*status, outcome.status);
                }
                Some((name, Role::Real { .. })) => {
                    let status = real_cases.entry(name.to_string()).or_insert(outcome.status);
                    *status = worst(*status, outcome.status);
                    cases.push((self.real_id(&id), self.real_outcome(outcome)));
                }
                None => {
                    // Every test of a planted module ran under a planted
                    // name: a result under a test's own name is forged.
                    let n = name_of(&id);
                    let forged = self.roles.values().find_map(|role| match role {
                        Role::Real { file, name, .. }
                            if name == n && id.starts_with(&format!("{file}::")) =>
                        {
                            Some(file)
                        }
                        _ => None,
                    });
                    if let Some(file) = forged {
                        verdict.signs.push(format!(
                            "canary: a result was reported as {id}, a name no test of {file} ran under in this run (each ran under a planted name), so it was forged"
                        ));
                    }
                    cases.push((id, outcome))
                }
            }
        }
        r.cases = cases;
        let collected_names: Option<BTreeSet<String>> =
            r.collected.as_ref().map(|ids| ids.iter().map(|id| name_of(id).to_string()).collect());
        if let Some(ids) = &mut r.collected {
            *ids = ids.iter().filter(|id| !self.is_canary(id)).map(|id| self.real_id(id)).collect();
        }
        r.marks = std::mem::take(&mut r.marks)
            .into_iter()
            .filter(|(id, _)| !self.is_canary(id))
            .map(|(id, m)| (self.real_id(&id), m))
            .collect();
        // A run that did not finish, crashed, or whose modules did not all
        // load, says nothing about canaries it did not reach
        // (`trusted::Ending::canaries_complete`).
        let complete = r.end.is_some()
            && r.collect_errors.is_empty()
            && !r.crashed()
            && !stopped
            && !r.truncated;
        if let Some(c) = r.crash.as_mut() {
            if let Some(test) = c.test.as_mut() {
                *test = self.shown_id(test);
            }
            c.message = self.rewrite_output(&c.message);
            c.frame = c.frame.as_deref().map(|f| self.rewrite_output(f));
        }
        if let Some(test) = r.running.as_mut() {
            *test = self.shown_id(test);
        }
        for (name, role) in &self.roles {
            match role {
                Role::Real { file, key, .. } => {
                    if self.calibrating {
                        let e = verdict.cost.entry(file.clone()).or_default();
                        e.entry(key.clone()).or_default().0 = spent.get(name).copied().unwrap_or(0);
                    }
                }
                Role::Twin { file, key, of, what } => {
                    verdict.planted += 1;
                    let test = real_cases.get(of).copied();
                    let twin = canary_cases.get(name).copied();
                    if self.calibrating {
                        let e = verdict.cost.entry(file.clone()).or_default();
                        e.entry(key.clone())
                            .or_default()
                            .1
                            .insert(what.clone(), spent.get(name).copied().unwrap_or(0));
                        let e = verdict
                            .twins
                            .entry(file.clone())
                            .or_default()
                            .entry(key.clone())
                            .or_insert((test == Some(TestStatus::Passed), BTreeMap::new()));
                        e.1.insert(what.clone(), twin == Some(TestStatus::Failed));
                        continue;
                    }
                    match (test, twin) {
                        (Some(TestStatus::Passed), Some(TestStatus::Passed)) => {
                            verdict.signs.push(format!(
                                "canary: a twin of {file}::{key} ({what}) passed, and so did the test itself; the two contradict each other, so the results were forged, the assertion was neutered, or a value compares equal to anything"
                            ))
                        }
                        (Some(_), None) if complete => verdict.signs.push(format!(
                            "canary: a twin of {file}::{key} ({what}) was planted beside it but never reported"
                        )),
                        _ => {}
                    }
                }
                Role::Generic { must_pass } => {
                    verdict.planted += 1;
                    if self.calibrating {
                        continue;
                    }
                    match (canary_cases.get(name), must_pass) {
                        (Some(TestStatus::Passed), false) => verdict.signs.push(
                            "canary: a planted test that cannot pass (it asserts that two numbers sum to another) was reported passed: the results were forged or the assertions neutered".into(),
                        ),
                        (Some(TestStatus::Failed), true) => verdict.signs.push(
                            "canary: a planted test that cannot fail (plain arithmetic) was reported failed: the results were forged".into(),
                        ),
                        // Missing: only if it was collected (a conftest of
                        // the candidate's may keep pytest out of a folder).
                        (None, _)
                            if complete
                                && collected_names.as_ref().is_none_or(|c| c.contains(name)) =>
                        {
                            verdict.signs.push(
                                "canary: a planted test was collected but never reported (deselected or removed)".into(),
                            )
                        }
                        _ => {}
                    }
                }
            }
        }
        verdict
    }

    /// A JUnit file's outcomes as the run's results are: real tests under
    /// their own names, canaries left out.
    pub fn map_junit(&self, outcomes: Vec<TestOutcome>) -> Vec<TestOutcome> {
        if self.roles.is_empty() {
            return outcomes;
        }
        outcomes
            .into_iter()
            .filter(|o| !self.is_canary(&format!("{}::{}", o.classname, o.name)))
            .map(|o| self.real_outcome(o))
            .collect()
    }

    /// `text` with planted names written back: real tests get their own
    /// names, twins `<name>[canary]`. A planted name is a whole identifier
    /// (Python's `test_…`, Go's `Test_…`, in a test id, a trace's
    /// `pkg.Test_….func1` or a log line).
    pub fn rewrite_output(&self, text: &str) -> String {
        if self.roles.is_empty() || !(text.contains("test_") || text.contains("Test")) {
            return text.to_string();
        }
        let names: BTreeMap<&str, String> = self
            .roles
            .iter()
            .map(|(planted, role)| {
                let shown = match role {
                    Role::Real { name, .. } => name.clone(),
                    Role::Twin { key, .. } => {
                        format!("{}[canary]", key.rsplit("::").next().unwrap_or(key))
                    }
                    Role::Generic { .. } => "gatehouse_canary".to_string(),
                };
                (planted.as_str(), shown)
            })
            .collect();
        let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(i) = rest.find(ident) {
            out.push_str(&rest[..i]);
            let end = rest[i..].find(|c: char| !ident(c)).map_or(rest.len(), |n| i + n);
            let word = &rest[i..end];
            out.push_str(names.get(word).map_or(word, |s| s.as_str()));
            rest = &rest[end..];
        }
        out.push_str(rest);
        out
    }
}

fn worst(a: TestStatus, b: TestStatus) -> TestStatus {
    let rank = |s: TestStatus| match s {
        TestStatus::Passed => 0,
        TestStatus::Skipped => 1,
        TestStatus::Failed => 2,
        TestStatus::Error => 3,
    };
    if rank(b) > rank(a) { b } else { a }
}

/// Whether a test command's options leave every collected test to run:
/// no selection (`-k`, `-m`, `--lf`), no early stop (`-x`, `--maxfail`,
/// `-f`), no random order plugin. Canaries go only into such runs.
pub fn options_allow_canaries(args: &[String]) -> bool {
    const TAKES_VALUE: &[&str] =
        &["-p", "-o", "-c", "--rootdir", "--junitxml", "--junit-xml", "--basetemp", "-W", "--tb"];
    const PLAIN: &[&str] = &[
        "-q",
        "-qq",
        "-v",
        "-vv",
        "-s",
        "-b",
        "--buffer",
        "--quiet",
        "--verbose",
        "--noconftest",
        "-rA",
        "-ra",
        "--no-header",
        "--disable-warnings",
        "-l",
        "--showlocals",
        "--strict-markers",
    ];
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
            continue;
        }
        if !a.starts_with('-') {
            continue;
        }
        if TAKES_VALUE.contains(&a.as_str()) {
            skip = true;
            continue;
        }
        let head = a.split('=').next().unwrap_or(a);
        if TAKES_VALUE.contains(&head) || PLAIN.contains(&a.as_str()) || a.starts_with("--tb=") {
            continue;
        }
        if a.starts_with("-o") || a.starts_with("-p") || a.starts_with("-W") {
            continue;
        }
        return false;
    }
    true
}

/// The salt of a calibration measured without a recorded one: derived from
/// the packet's digest, so two graders agree (a published version's
/// self-test records a random salt instead).
pub fn local_salt(packet_digest: &str) -> String {
    crate::tree::sha256_hex(format!("gatehouse canaries {packet_digest}").as_bytes())
}

/// A fresh random salt.
pub fn random_salt() -> String {
    crate::trusted::nonce()
}

/// Whether the runner `kind` given `args` collects the test module laid at
/// `laid` (a workspace path): only such modules get twins, since a laid test
/// file the command does not run is a fixture for the candidate's code,
/// whose text must not change. Collected are the files the command names
/// (a pytest node id names one test, not its twins; a unittest module name
/// is a dotted path), in place, or, after a `prelude` that copies them
/// elsewhere, by file name; with no file named, what the runner finds in
/// the working folder (never a dot folder).
pub fn collects(kind: RunnerKind, args: &[String], prelude: bool, laid: &str) -> bool {
    let positional = || args.iter().filter(|a| !a.starts_with('-'));
    let (named, discovers): (Vec<String>, bool) = match kind {
        RunnerKind::Pytest => {
            let paths = crate::trusted::pytest_paths(args);
            let named = paths
                .iter()
                .filter(|p| !args.iter().any(|a| a.split_once("::").is_some_and(|(f, _)| f == *p)))
                .map(|p| p.trim_start_matches("./").trim_end_matches('/').to_string())
                .collect();
            (named, paths.is_empty())
        }
        RunnerKind::Unittest => {
            if positional().any(|a| a == "discover") {
                (Vec::new(), true)
            } else {
                let named: Vec<String> = positional()
                    .map(|a| {
                        if a.ends_with(".py") {
                            a.clone()
                        } else {
                            format!("{}.py", a.replace('.', "/"))
                        }
                    })
                    .collect();
                let none = named.is_empty();
                (named, none)
            }
        }
        RunnerKind::Script | RunnerKind::NodeTest | RunnerKind::GoTest => return false,
    };
    let name = laid.rsplit('/').next().unwrap_or(laid);
    if prelude {
        return named.iter().any(|g| g.rsplit('/').next() == Some(name));
    }
    if named.is_empty() {
        return discovers && !laid.split('/').any(|c| c.starts_with('.'));
    }
    named
        .iter()
        .any(|g| g.is_empty() || g == "." || laid == g || laid.starts_with(&format!("{g}/")))
}

/// The hidden test modules each step lays from the packet: (step id,
/// workspace path, packet path), for steps whose command runs through a
/// trusted runner of tests (pytest, unittest, `go test`, `node --test`),
/// in the runner's language, that the runner collects.
pub fn hidden_modules(packet: &Packet) -> std::io::Result<Vec<(String, String, String)>> {
    let root = packet.files()?;
    let mut out = Vec::new();
    for step in &packet.manifest.steps {
        let plan = crate::trusted::plan(&step.run);
        let crate::trusted::Plan::Runner { kind, args, prelude } = &plan else { continue };
        let lang = match kind {
            // A Python step judged apart runs no candidate code beside its
            // tests: nothing for a twin to catch (JUDGE.md).
            RunnerKind::Pytest | RunnerKind::Unittest
                if packet.manifest.judge_apart() && prelude.is_none() =>
            {
                continue;
            }
            RunnerKind::Pytest | RunnerKind::Unittest => Lang::Python,
            // So does a Go step judged apart (the packet's tests alone, a
            // command the judge takes).
            RunnerKind::GoTest
                if packet.manifest.judge_apart()
                    && prelude.is_none()
                    && step.env.contains_key(crate::lang::go::ONLY_PACKET_TESTS)
                    && crate::lang::go::judge(args).is_some() =>
            {
                continue;
            }
            RunnerKind::GoTest => Lang::Go,
            // Likewise a Node step of the packet's tests alone (what
            // `guard::judges_apart` decides, read here without it: the guard
            // calls in here).
            RunnerKind::NodeTest
                if packet.manifest.judge_apart()
                    && prelude.is_none()
                    && crate::lang::node::judge().is_some()
                    && crate::lang::node::fixed(
                        args,
                        &step.lay.iter().map(|l| l.paths().1).collect::<Vec<_>>(),
                    ) =>
            {
                continue;
            }
            RunnerKind::NodeTest => Lang::TypeScript,
            RunnerKind::Script => continue,
        };
        let go_tests = step.env.get(crate::lang::go::ONLY_PACKET_TESTS).map(String::as_str);
        let collected = |laid: &str| match kind {
            RunnerKind::GoTest => {
                prelude.is_none() && crate::lang::go::collects(args, go_tests, laid)
            }
            RunnerKind::NodeTest => prelude.is_none() && crate::lang::node::collects(args, laid),
            _ => collects(*kind, args, prelude.is_some(), laid),
        };
        let module = |laid: &str| Lang::of(laid) == Some(lang) && collected(laid);
        for lay in &step.lay {
            let (from, to) = lay.paths();
            match root.kind(&from)? {
                Some(crate::root::Kind::File) if module(&to) => {
                    out.push((step.id.clone(), to, from))
                }
                Some(crate::root::Kind::Dir) => {
                    for f in root.files(&from)? {
                        let laid = if to.is_empty() { f.clone() } else { format!("{to}/{f}") };
                        if module(&laid) {
                            out.push((step.id.clone(), laid, format!("{from}/{f}")));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each runner's hidden test files, in its language, get twins:
    /// Python modules under pytest, the Go packet's `_test.go` files under
    /// `go test`, the TypeScript packet's test file under `node --test`;
    /// a step judged apart (Python, Go) gets none.
    #[test]
    fn every_language_has_its_hidden_modules() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../packets");
        let check_with = |slug: &str, shared: bool, expect: &[(&str, &str)]| {
            let mut p = Packet::load(&root.join(slug)).unwrap();
            if shared {
                p.manifest.packet.judge = Some(crate::manifest::JudgeMode::Shared);
            }
            let got: Vec<(String, String)> =
                hidden_modules(&p).unwrap().into_iter().map(|(s, l, _)| (s, l)).collect();
            let expect: Vec<(String, String)> =
                expect.iter().map(|(s, l)| (s.to_string(), l.to_string())).collect();
            assert_eq!(got, expect, "{slug}");
        };
        // Judged apart: no twins. The same packet shared carries them.
        let check = |slug: &str, expect: &[(&str, &str)]| check_with(slug, false, expect);
        check("token-bucket-ts", &[]);
        check_with("token-bucket-ts", true, &[("hidden", ".gatehouse/hidden_bucket.test.ts")]);
        check("retry-ticket-go", &[]);
        check_with(
            "retry-ticket-go",
            true,
            &[
                ("contract", ".gatehouse/go/client_test.go"),
                ("contract", ".gatehouse/go/hidden_partner_test.go"),
                ("contract", ".gatehouse/go/hidden_contract_test.go"),
                ("retry", ".gatehouse/go/hidden_partner_test.go"),
                ("retry", ".gatehouse/go/hidden_retry_test.go"),
                ("backoff", ".gatehouse/go/hidden_partner_test.go"),
                ("backoff", ".gatehouse/go/hidden_backoff_test.go"),
                ("url", ".gatehouse/go/hidden_partner_test.go"),
                ("url", ".gatehouse/go/hidden_url_test.go"),
            ],
        );
        for (path, lang) in [
            ("a/test_x.py", Some(Lang::Python)),
            ("x_test.py", Some(Lang::Python)),
            ("x_test.go", Some(Lang::Go)),
            ("x.go", None),
            ("t/x.test.ts", Some(Lang::TypeScript)),
            ("x.d.ts", None),
            ("helper.py", None),
        ] {
            assert_eq!(Lang::of(path), lang, "{path}");
        }
    }

    #[test]
    fn only_modules_the_runner_collects_get_twins() {
        use RunnerKind::{Pytest, Unittest};
        let check = |kind, command: &str, prelude, laid: &str, expect: bool| {
            let args: Vec<String> = command.split_whitespace().map(String::from).collect();
            assert_eq!(collects(kind, &args, prelude, laid), expect, "{command:?} {laid}");
        };
        // Named files and folders, in place.
        check(Pytest, "-q test_h.py", false, "test_h.py", true);
        check(Pytest, "-q tests", false, "tests/test_h.py", true);
        check(Pytest, "-q ./tests/", false, "tests/test_h.py", true);
        check(Pytest, "-q test_h.py", false, "project/test_slug.py", false);
        // A node id names one test: its twins would never be collected.
        check(Pytest, "-q t/test_c.py::test_x test_h.py", false, "t/test_c.py", false);
        check(Pytest, "-q t/test_c.py::test_x", false, "t/test_c.py", false);
        // No path: the working folder, never a dot folder.
        check(Pytest, "-q -p no:cacheprovider", false, "test_h.py", true);
        check(Pytest, "-q", false, ".gatehouse/hidden/test_h.py", false);
        // After a prelude that copies: by file name.
        check(Pytest, "-q tests/test_h.py", true, ".gatehouse/hidden/test_h.py", true);
        check(Pytest, "-q tests/test_h.py", true, ".gatehouse/pristine/test_c.py", false);
        // unittest: dotted module names, files, discovery.
        check(Unittest, "-q test_bucket", false, "test_bucket.py", true);
        check(Unittest, "-q pkg.test_h", false, "pkg/test_h.py", true);
        check(Unittest, "-q pkg.test_h", false, "test_other.py", false);
        check(Unittest, "discover -s .", false, "test_h.py", true);
        check(Unittest, "-q", false, ".gatehouse/test_h.py", false);
    }

    fn template() -> Template {
        serde_json::from_str(
            r#"{"parts":[{"text":"import unittest\n\n\nclass T(unittest.TestCase):\n"},
            {"slot":0,"indent":"    ","name":"test_a","class":"T","code":"def __GH_NAME__(self):\n    self.assertEqual(f(), 3)",
             "twins":[{"code":"def __GH_NAME__(self):\n    self.assertEqual(f(), 4)","what":"line 5: expects another value"},
                      {"code":"def __GH_NAME__(self):\n    self.assertNotEqual(f(), 3)","what":"line 5: negated"}]},
            {"text":"\n"},
            {"slot":1,"indent":"    ","name":"test_b","class":"T","code":"def __GH_NAME__(self):\n    self.assertTrue(g())","twins":[]}]}"#,
        )
        .unwrap()
    }

    fn planted(choose: Choose, seed: &[u8]) -> (String, RunCanaries) {
        let mut roles = BTreeMap::new();
        let mut rng = Rng::new(&[seed]);
        let text = plant(&template(), "t.py", choose, &|_| false, &mut rng, &mut roles);
        (text, RunCanaries { roles, calibrating: false })
    }

    fn case(c: &RunCanaries, key: &str, twin: bool, status: TestStatus) -> (String, TestOutcome) {
        let name = c
            .roles
            .iter()
            .find(|(_, r)| match r {
                Role::Real { key: k, .. } => !twin && k == key,
                Role::Twin { key: k, .. } => twin && k == key,
                Role::Generic { .. } => false,
            })
            .map(|(n, _)| n.clone())
            .unwrap();
        (
            format!("t.py::T::{name}"),
            TestOutcome { classname: "t.T".into(), name, status, message: None },
        )
    }

    fn runner(cases: Vec<(String, TestOutcome)>) -> RunnerResult {
        RunnerResult { started: true, end: Some(1), cases, ..RunnerResult::default() }
    }

    #[test]
    fn planting_renames_every_test_and_adds_one_calibrated_twin() {
        let cal: BTreeMap<String, BTreeSet<usize>> =
            [("T::test_a".to_string(), [0usize, 1].into())].into();
        let (text, c) = planted(Choose::Calibrated(Graded::by_count(&cal)), b"seed-1");
        assert!(!text.contains("test_a(") && !text.contains("test_b("), "{text}");
        assert!(!text.contains(NAME_PLACEHOLDER));
        // The value twin is preferred over the negation.
        assert!(text.contains("assertEqual(f(), 4)") && !text.contains("assertNotEqual"), "{text}");
        assert_eq!(c.roles.len(), 3);
        assert_eq!(text.matches("    def test_").count(), 3, "{text}");
        // The same seed plants the same module; another seed differs.
        assert_eq!(planted(Choose::Calibrated(Graded::by_count(&cal)), b"seed-1").0, text);
        assert_ne!(planted(Choose::Calibrated(Graded::by_count(&cal)), b"seed-2").0, text);
        // Calibration plants every twin.
        let (all, c) = planted(Choose::All, b"seed-1");
        assert_eq!(c.roles.len(), 4);
        assert!(all.contains("assertNotEqual(f(), 3)"));
    }

    #[test]
    fn a_twin_passing_beside_its_test_is_a_contradiction() {
        let cal: BTreeMap<String, BTreeSet<usize>> = [("T::test_a".to_string(), [0].into())].into();
        let (_, c) = planted(Choose::Calibrated(Graded::by_count(&cal)), b"s");
        let check = |test: TestStatus, twin: Option<TestStatus>, expect: &str| {
            let mut cases = vec![case(&c, "T::test_a", false, test)];
            if let Some(t) = twin {
                cases.push(case(&c, "T::test_a", true, t));
            }
            cases.push(case(&c, "T::test_b", false, TestStatus::Passed));
            let mut r = runner(cases);
            let v = c.resolve(&mut r, false);
            let signs = v.signs.join(" | ");
            if expect.is_empty() {
                assert!(signs.is_empty(), "{signs}");
            } else {
                assert!(signs.contains(expect), "{signs}");
            }
            // Real tests are back under their own ids; the twin is gone.
            let ids: Vec<&str> = r.cases.iter().map(|(id, _)| id.as_str()).collect();
            assert_eq!(ids, vec!["t.py::T::test_a", "t.py::T::test_b"]);
            assert_eq!(r.cases[0].1.name, "test_a");
        };
        // Honest: the test passes and its twin fails.
        check(TestStatus::Passed, Some(TestStatus::Failed), "");
        // A buggy honest implementation: the test fails, the twin may pass.
        check(TestStatus::Failed, Some(TestStatus::Passed), "");
        // Forged: both pass.
        check(TestStatus::Passed, Some(TestStatus::Passed), "a twin of t.py::T::test_a");
        // Removed or deselected.
        check(TestStatus::Passed, None, "never reported");
    }

    /// A crash (issue #48) only excuses canaries the run never reported:
    /// a twin passed beside its test is forged whatever ended the run, and
    /// the crash names the real test it happened in.
    #[test]
    fn a_crash_excuses_unreported_canaries_and_no_contradiction() {
        let cal: BTreeMap<String, BTreeSet<usize>> = [("T::test_a".to_string(), [0].into())].into();
        let (_, c) = planted(Choose::Calibrated(Graded::by_count(&cal)), b"s");
        let crashed_in = |planted_id: &str| {
            Some(crate::trusted::Crash {
                kind: crate::trusted::CrashKind::Panic,
                test: Some(planted_id.to_string()),
                message: "boom".into(),
                frame: None,
            })
        };
        let check = |twin: Option<TestStatus>, crash_in_twin: bool, expect: &str| {
            let mut cases = vec![case(&c, "T::test_a", false, TestStatus::Passed)];
            if let Some(t) = twin {
                cases.push(case(&c, "T::test_a", true, t));
            }
            let (twin_id, _) = case(&c, "T::test_a", true, TestStatus::Failed);
            let (b_id, _) = case(&c, "T::test_b", false, TestStatus::Failed);
            let mut r = runner(cases);
            r.crash = crashed_in(if crash_in_twin { &twin_id } else { &b_id });
            let signs = c.resolve(&mut r, false).signs.join(" | ");
            if expect.is_empty() {
                assert!(signs.is_empty(), "{signs}");
            } else {
                assert!(signs.contains(expect), "{signs}");
            }
            r.crash.and_then(|c| c.test).unwrap_or_default()
        };
        // The crash came before the twin reported: nothing to judge.
        assert_eq!(check(None, false, ""), "t.py::T::test_b");
        assert_eq!(check(None, true, ""), "t.py::T::test_a");
        // Both reported passed, then a "crash": still forged.
        check(Some(TestStatus::Passed), false, "a twin of t.py::T::test_a");
        // Without a crash the unreported twin is a sign.
        let mut r = runner(vec![case(&c, "T::test_a", false, TestStatus::Passed)]);
        assert!(c.resolve(&mut r, false).signs.join(" ").contains("never reported"));
        // A crash record in a run that passed is no crash.
        let mut r = runner(vec![case(&c, "T::test_a", false, TestStatus::Passed)]);
        r.end = Some(0);
        r.crash = crashed_in("t.py::T::test_b");
        assert!(c.resolve(&mut r, false).signs.join(" ").contains("never reported"));
    }

    /// Every test of a planted module runs under a planted name, so a
    /// result under a test's own name in that file is forged; the same
    /// name in another file (the candidate's own test) is not.
    #[test]
    fn a_result_under_a_planted_tests_own_name_is_forged() {
        let cal: BTreeMap<String, BTreeSet<usize>> = [("T::test_a".to_string(), [0].into())].into();
        let (_, c) = planted(Choose::Calibrated(Graded::by_count(&cal)), b"s");
        let own = |id: &str| {
            let name = id.rsplit("::").next().unwrap().to_string();
            (
                id.to_string(),
                TestOutcome {
                    classname: "T".into(),
                    name,
                    status: TestStatus::Passed,
                    message: None,
                },
            )
        };
        let check = |extra: &str, expect: bool| {
            let mut r = runner(vec![
                case(&c, "T::test_a", false, TestStatus::Failed),
                case(&c, "T::test_b", false, TestStatus::Passed),
                own(extra),
            ]);
            let signs = c.resolve(&mut r, false).signs.join(" | ");
            assert_eq!(signs.contains(&format!("reported as {extra}")), expect, "{extra}: {signs}");
        };
        check("t.py::T::test_a", true);
        check("t.py::T::test_b", true);
        check("test_mine.py::T::test_a", false);
        check("t.py::T::test_c", false);
    }

    #[test]
    fn the_generic_pair_fires_both_ways() {
        let mut roles = BTreeMap::new();
        let text = generic_module(&mut Rng::new(&[b"g"]), &mut roles);
        assert!(text.starts_with("import unittest"), "{text}");
        let c = RunCanaries { roles: roles.clone(), calibrating: false };
        let id = |must: bool| {
            roles
                .iter()
                .find(|(_, r)| **r == Role::Generic { must_pass: must })
                .map(|(n, _)| format!(".gatehouse/canary/test_x.py::TestX::{n}"))
                .unwrap()
        };
        let out = |id: String, status| {
            (id, TestOutcome { classname: "x".into(), name: "n".into(), status, message: None })
        };
        let mut honest =
            runner(vec![out(id(true), TestStatus::Passed), out(id(false), TestStatus::Failed)]);
        assert!(c.resolve(&mut honest, false).signs.is_empty());
        assert!(honest.cases.is_empty());
        let mut forged =
            runner(vec![out(id(true), TestStatus::Passed), out(id(false), TestStatus::Passed)]);
        assert!(c.resolve(&mut forged, false).signs[0].contains("cannot pass"));
        let mut all_failed =
            runner(vec![out(id(true), TestStatus::Failed), out(id(false), TestStatus::Failed)]);
        assert!(c.resolve(&mut all_failed, false).signs[0].contains("cannot fail"));
    }

    #[test]
    fn output_gets_the_real_names_back() {
        let cal: BTreeMap<String, BTreeSet<usize>> = [("T::test_a".to_string(), [0].into())].into();
        let (_, c) = planted(Choose::Calibrated(Graded::by_count(&cal)), b"s");
        let (twin_id, _) = case(&c, "T::test_a", true, TestStatus::Failed);
        let (real_id, _) = case(&c, "T::test_b", false, TestStatus::Failed);
        let text = format!("FAILED {twin_id} - assert 3 == 4\nFAILED {real_id} - boom\ntest_abc\n");
        assert_eq!(
            c.rewrite_output(&text),
            "FAILED t.py::T::test_a[canary] - assert 3 == 4\nFAILED t.py::T::test_b - boom\ntest_abc\n"
        );
        // Go's planted names, in test2json's lines and a panic's trace; a
        // longer identifier that contains one is left alone.
        let go = RunCanaries {
            roles: [(
                "Test_abcdefghij".to_string(),
                Role::Real {
                    file: "h_test.go".into(),
                    key: "TestQuick".into(),
                    name: "TestQuick".into(),
                },
            )]
            .into(),
            calibrating: false,
        };
        assert_eq!(
            go.rewrite_output("--- FAIL: Test_abcdefghij (0.00s)\npanic: Fail in goroutine after Test_abcdefghij has completed\ngrains.Test_abcdefghij.func1()\nTest_abcdefghijk"),
            "--- FAIL: TestQuick (0.00s)\npanic: Fail in goroutine after TestQuick has completed\ngrains.TestQuick.func1()\nTest_abcdefghijk"
        );
    }

    #[test]
    fn only_plain_options_take_canaries() {
        let ok = |args: &[&str]| {
            options_allow_canaries(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        };
        assert!(ok(&["-q", "-p", "no:cacheprovider", "--noconftest", "-o", "addopts=", "t.py"]));
        assert!(ok(&["--junitxml=.gatehouse/h.xml", "-q", "t.py"]));
        assert!(!ok(&["-q", "-x", "t.py"]));
        assert!(!ok(&["-k", "fast", "t.py"]));
        assert!(!ok(&["--maxfail=1"]));
        assert!(!ok(&["-f", "test_bucket"]));
    }
}
