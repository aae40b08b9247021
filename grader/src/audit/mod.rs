//! `packet audit`: a mutation audit of a packet's hidden tests.
//!
//! Mutants of the sample's target file (Python, TypeScript or Go:
//! [`parser::Language`]) come from a fixed grammar of rules (`--rules`) or
//! from a model (the server's CLI asks it, see `gatehouse::audit`); either
//! way each is a replacement of one top-level definition, applied and
//! validated by the language's own parser ([`parser`]: Python's `ast` in
//! `harness/gatehouse_audit.py` ([`helper`]), the grader's TypeScript
//! compiler in `harness/gatehouse_audit_ts.js`, `go/ast` and `go/types` in
//! `harness/gatehouse_audit_go.go`), then laid over the sample and run
//! through the packet's hidden-test steps in the grading sandbox with the
//! packet's limits ([`run`]), and classified ([`classify`]):
//!
//! - **invalid**: the replacement does not parse as one definition, renames
//!   it, changes its signature or the file's public names, imports a module
//!   the pinned environment lacks (Python), no longer type-checks
//!   (TypeScript, Go: an error the sample lacks), or equals the sample
//!   after normalisation;
//! - **crashed**: the mutated file fails to import, or every hidden test
//!   errors rather than fails;
//! - **killed**: at least one hidden test fails (or the run hits its limit);
//! - **survived**: every hidden test passes: a hole, or an equivalent mutant;
//! - **explained**: a survivor the packet's `mutants/EQUIVALENT.md` lists with
//!   why no hidden test should kill it ([`explain`]).
//!
//! A kept mutant ([`save`]) is a `mutants/audit/<id>.diff` against the sample
//! file it mutates ([`kept`]), so `packet check` requires the hidden tests to
//! kill it (or the list to explain it). A target the candidate hands back as
//! a diff is audited through that diff ([`deliver`]).
//!
//! The modules: `parser` is the language front: which language a target
//! is, its canary, its context (the package's other files) and one
//! interface over the three helpers (the TypeScript and Go helpers run in
//! the grading sandbox, one run per call, a batch of proposals per call).
//! `helper` runs `harness/gatehouse_audit.py` (as `python3 -I`,
//! JSON on stdin and stdout, under `HelperLimits`: `RLIMIT_AS` and `RLIMIT_CPU`
//! set before exec, its own process group killed at a wall-clock deadline and
//! before the leader is reaped, its answer capped, since it parses the packet's
//! untrusted source) to list the target's top-level definitions, generate rule
//! mutants, and replace one definition by a mutant's code with validation and a
//! unified diff. `run::Audit` resolves target and hidden-test steps, lays the
//! sample over the starter a candidate receives, runs a green baseline, then
//! runs each mutant through the steps as `check` runs packet mutants
//! (`run::run_hidden`, in order, stopping at the first step that notices it,
//! for the audit and for `check`). `classify` (pure) turns the runs into
//! outcomes with the reason and the killing tests; `model` (pure) is the prompt
//! and the strict reading of a model's answer; `save` writes
//! `mutants/audit/<id>.diff` and reads it back; `kept` lists and applies kept
//! mutants; `explain` parses `mutants/EQUIVALENT.md` (entries matched to a
//! survivor by the mutated file their diff yields, not by id), marks explained
//! survivors and appends entries; `deliver` finds sample diffs that deliver the
//! target (tax-rounding's `patch.diff`) and rewrites them for each mutant
//! (`similar`'s unified diff). The model calls themselves are the server's
//! (`gatehouse::audit`): the grader does no network I/O.
//!
//! The audit never imports or runs the code it mutates outside the sandbox: the
//! Python helper only parses (`ast`) and resolves module names with
//! `importlib.util.find_spec` on top-level names, which imports nothing; the
//! TypeScript and Go helpers only parse and type-check, inside the sandbox; a
//! mutant is applied on the parser's spans, never by text search, runs
//! only through `run::run_on_copy` with the step's limits, and is classified
//! from the trusted runner's stream, never from files in the workspace.

pub mod classify;
pub mod deliver;
pub mod explain;
pub mod helper;
pub mod kept;
pub mod model;
pub mod parser;
pub mod run;
pub mod save;

use serde::{Deserialize, Serialize};

pub use classify::{Outcome, StepResult, classify};
pub use helper::{Def, Helper};
pub use parser::{Language, Parser};
pub use run::{Audit, AuditError};

/// One proposed mutant: the full replacement of one top-level definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    pub id: String,
    pub code: String,
    pub fault: String,
}

/// One mutant's verdict, as in the audit's JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MutantReport {
    pub id: String,
    pub fault: String,
    pub outcome: Outcome,
    pub reason: String,
    /// Unified diff against the sample's target (empty when invalid).
    pub diff: String,
    /// The hidden tests that failed (`step: classname::name`); the steps
    /// run in order and stop at the first that kills the mutant.
    pub killed_by: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub killed: usize,
    /// Survivors no entry of `mutants/EQUIVALENT.md` explains.
    pub survived: usize,
    #[serde(default)]
    pub explained: usize,
    pub crashed: usize,
    pub invalid: usize,
}

impl Counts {
    pub fn of(mutants: &[MutantReport]) -> Counts {
        let mut c = Counts::default();
        for m in mutants {
            match m.outcome {
                Outcome::Killed => c.killed += 1,
                Outcome::Survived => c.survived += 1,
                Outcome::Explained => c.explained += 1,
                Outcome::Crashed => c.crashed += 1,
                Outcome::Invalid => c.invalid += 1,
            }
        }
        c
    }
}

/// The audit's result: `{"target", "mutants", "counts", "calls"}` plus the
/// steps that ran and what went wrong outside any one mutant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditReport {
    pub packet: String,
    pub target: String,
    /// `rules` or `model`.
    pub mode: String,
    /// The hidden-test steps every mutant ran through.
    pub steps: Vec<String>,
    pub mutants: Vec<MutantReport>,
    pub counts: Counts,
    /// The author ledger: one object per model call (empty for `--rules`).
    pub calls: Vec<serde_json::Value>,
    /// Problems that are no mutant's: a malformed model answer, an upstream
    /// that is down, a call refused by the cap.
    #[serde(default)]
    pub errors: Vec<String>,
    /// About the audit itself: hidden steps that never run the target.
    #[serde(default)]
    pub warnings: Vec<String>,
}
