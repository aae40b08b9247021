//! Running an audit: the target and the hidden-test steps resolved, a green
//! baseline of the sample, then each mutant laid over the sample and run
//! through every hidden-test step in the grading sandbox, with the packet's
//! limits and through the trusted runner, exactly as `packet check` runs the
//! packet's own mutants.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use super::classify::{Outcome, StepResult, classify};
use super::helper::{Applied, Def};
use super::parser::{Context, Language, Parser};
use super::{AuditReport, Counts, MutantReport, Proposal};
use crate::grade::{Grader, default_limits};
use crate::manifest::{Lay, Step};
use crate::packet::Packet;
use crate::run::{read_junit, run_on_copy, step_env};
use crate::tree::{Root, copy_path};

/// An audit that could not run: bad input (named) or the machinery failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AuditError(pub String);

fn err(s: impl Into<String>) -> AuditError {
    AuditError(s.into())
}

/// A prepared audit of one packet's target file.
pub struct Audit<'a> {
    pub grader: &'a Grader,
    pub packet: &'a Packet,
    /// The workspace path of the mutated file.
    pub target: String,
    /// The sample's copy of the target.
    pub source: String,
    pub defs: Vec<Def>,
    pub steps: Vec<String>,
    /// The target's language and its parser.
    pub parser: Parser<'a>,
    /// Sample diffs that deliver the target (rewritten for each mutant).
    pub deliveries: Vec<super::deliver::Delivery>,
    /// The packet's `mutants/EQUIVALENT.md`: survivors it explains.
    pub explanations: Vec<super::explain::Explanation>,
    work: crate::workdir::WorkDir,
    tree: PathBuf,
    /// What validating a mutant needs besides the target.
    context: Context,
    /// Per step, the test ids the sample's run reported.
    expected: BTreeMap<String, BTreeSet<String>>,
    /// What the author should know about the audit itself (a canary that
    /// survived).
    pub warnings: Vec<String>,
}

/// Whether a lay puts a hidden test file (`hidden/.../test_*.py`, a Go
/// `hidden/..._test.go`, or a TypeScript test file such as
/// `hidden/..._bucket.test.ts`) in place.
pub fn lays_hidden_test(lay: &Lay) -> bool {
    let (from, _) = lay.paths();
    let name = from.rsplit('/').next().unwrap_or_default();
    from.starts_with("hidden/")
        && ((name.starts_with("test_") && name.ends_with(".py"))
            || name.ends_with("_test.go")
            || (Language::of(&from) == Some(Language::TypeScript)
                && crate::lang::node::is_test_file(&from)))
}

/// The steps whose tests judge a mutant: those named, else `[mutation]
/// hidden_step`, else every step that lays a hidden test file.
pub fn hidden_steps(packet: &Packet, named: &[String]) -> Result<Vec<String>, AuditError> {
    let m = &packet.manifest;
    let ids: Vec<&str> = m.steps.iter().map(|s| s.id.as_str()).collect();
    if !named.is_empty() {
        for n in named {
            if m.step(n).is_none() {
                return Err(err(format!(
                    "--step {n:?} is not a step of {} (its steps: {})",
                    m.packet.slug,
                    ids.join(", ")
                )));
            }
        }
        return Ok(named.to_vec());
    }
    if let Some(mu) = &m.mutation {
        return Ok(vec![mu.hidden_step.clone()]);
    }
    let found: Vec<String> = m
        .steps
        .iter()
        .filter(|s| s.lay.iter().any(lays_hidden_test))
        .map(|s| s.id.clone())
        .collect();
    if found.is_empty() {
        return Err(err(format!(
            "{}: no step lays a hidden test file (hidden/test_*.py, hidden/*_test.go, hidden/*.test.ts); name the steps with --step (its steps: {})",
            m.packet.slug,
            ids.join(", ")
        )));
    }
    Ok(found)
}

/// The file the audit mutates: `[mutation] target`, else the first sample
/// file the hidden tests of `steps` import (a Python module, or a
/// TypeScript file a relative import names from where the test is laid;
/// a Go test lives in the package it tests and imports none of it), else
/// the sample's only source file of the parser's language outside its
/// tests (test files, `tests/`, `test/`, `fixtures/` and `testdata/`).
pub fn default_target(
    packet: &Packet,
    steps: &[String],
    parser: &Parser,
) -> Result<String, AuditError> {
    let m = &packet.manifest;
    if let Some(mu) = &m.mutation {
        return Ok(mu.target.clone());
    }
    let lang = parser.language();
    let pk = packet.files().map_err(|e| err(e.to_string()))?;
    for id in steps {
        let Some(step) = m.step(id) else { continue };
        for lay in &step.lay {
            let (from, to) = lay.paths();
            let reads = match lang {
                Language::Python => from.ends_with(".py"),
                Language::TypeScript => Language::of(&from) == Some(Language::TypeScript),
                Language::Go => false,
            };
            if !(from.starts_with("hidden/") && reads) {
                continue;
            }
            if !crate::tree::is_safe_path(&from) {
                return Err(err(format!("{from:?} is not a safe relative path")));
            }
            let Ok(text) = pk.read_to_string(&from) else { continue };
            let Ok(modules) = parser.imports(&text) else { continue };
            for module in modules {
                let candidates = match lang {
                    Language::Python => {
                        let base = module.replace('.', "/");
                        vec![format!("{base}.py"), format!("{base}/__init__.py")]
                    }
                    _ => {
                        let dir = to.rsplit_once('/').map_or("", |(d, _)| d);
                        let Some(base) = relative_import(dir, &module) else { continue };
                        let stem = base
                            .strip_suffix(".js")
                            .or_else(|| base.strip_suffix(".ts"))
                            .unwrap_or(&base)
                            .to_string();
                        vec![format!("{stem}.ts"), format!("{stem}/index.ts")]
                    }
                };
                for cand in candidates {
                    if pk.is_file(&format!("sample/{cand}")) {
                        return Ok(cand);
                    }
                }
            }
        }
    }
    let mut own: Vec<String> = pk
        .files("sample")
        .unwrap_or_default()
        .into_iter()
        .filter(|p| lang.is_own_source(p))
        .collect();
    if own.len() == 1 {
        return Ok(own.remove(0));
    }
    Err(err(format!(
        "{}: the hidden tests of {} import no file of the sample and the sample has {} {} files of its own ({}); name the file to mutate with --target",
        m.packet.slug,
        steps.join(", "),
        own.len(),
        lang.name(),
        own.join(", ")
    )))
}

/// The workspace path a relative import `spec` names from the folder
/// `dir` (`./x`, `../src/x`); `None` for a package name or a path that
/// leaves the workspace.
fn relative_import(dir: &str, spec: &str) -> Option<String> {
    if !(spec.starts_with("./") || spec.starts_with("../")) {
        return None;
    }
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for p in spec.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    let path = parts.join("/");
    crate::tree::is_safe_path(&path).then_some(path)
}

impl<'a> Audit<'a> {
    /// Resolves the target and the steps, lays the sample over the starter a
    /// candidate receives, and runs the hidden tests once on the sample (an
    /// audit needs a green baseline) and once on a canary target that fails
    /// to import (which they must notice, else a warning says so).
    pub fn prepare(
        grader: &'a Grader,
        packet: &'a Packet,
        target: Option<&str>,
        steps: &[String],
    ) -> Result<Audit<'a>, AuditError> {
        let steps = hidden_steps(packet, steps)?;
        let what = |t: &str| {
            format!(
                "--target {t:?}: packet audit mutates Python (.py), TypeScript (.ts) and Go (.go) source files, not tests or other files"
            )
        };
        let named = target.or(packet.manifest.mutation.as_ref().map(|mu| mu.target.as_str()));
        let lang = match named {
            Some(t) => Language::of(t).ok_or_else(|| err(what(t)))?,
            None => Language::of_packet(packet),
        };
        let parser = Parser::new(lang, grader.sandbox()).map_err(err)?;
        let target = match target {
            Some(t) => t.to_string(),
            None => default_target(packet, &steps, &parser)?,
        };
        if Language::of(&target) != Some(lang) {
            return Err(err(what(&target)));
        }
        let pk = packet.files().map_err(|e| err(e.to_string()))?;
        let read = |dir: &str| pk.read_to_string(&format!("{dir}/{target}")).ok();
        let source = read("sample").or_else(|| read("starter")).ok_or_else(|| {
            err(format!(
                "--target {target:?}: neither the sample nor the starter of {} has that file",
                packet.manifest.packet.slug
            ))
        })?;
        let defs = parser.defs(&source, &target).map_err(|e| err(format!("{target}: {e}")))?;
        if defs.is_empty() {
            return Err(err(format!(
                "{target} has no top-level function, class or declaration with a value to mutate"
            )));
        }
        let work = crate::workdir::WorkDir::new("gatehouse-audit-")
            .map_err(|e| err(format!("creating a work folder: {e}")))?;
        let tree = work.path().join("sample-tree");
        let tools: Vec<String> = packet.manifest.environment.tools.keys().cloned().collect();
        let probe = grader.probe(&tools).map_err(|e| err(e.to_string()))?;
        crate::starter::lay_received(
            packet,
            crate::starter::CHECK_SEED,
            &probe,
            &crate::starter::Gate::placeholders(),
            &tree,
        )
        .map_err(|e| err(format!("laying the starter a candidate receives: {e}")))?;
        if packet.sample_dir().is_dir() {
            copy_path(&packet.sample_dir(), &tree)
                .map_err(|e| err(format!("laying the sample: {e}")))?;
        }
        let mut local_modules: BTreeSet<String> = BTreeSet::new();
        for dir in
            [tree.clone(), packet.root.join("hidden")].iter().filter(|_| lang == Language::Python)
        {
            for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
                let name = entry.file_name().to_string_lossy().to_string();
                if let Some(stem) = name.strip_suffix(".py") {
                    local_modules.insert(stem.to_string());
                } else if entry.path().is_dir() {
                    local_modules.insert(name);
                }
            }
        }
        let context = match lang {
            Language::Python => {
                Context { local_modules: local_modules.into_iter().collect(), ..Context::default() }
            }
            _ => Context::of(lang, &tree, &target),
        };
        let deliveries = super::deliver::deliveries(packet, &target).map_err(err)?;
        let mut warnings = Vec::new();
        let explanations = super::explain::load(packet).unwrap_or_else(|e| {
            warnings.push(format!("{e}: no survivor is explained until the list is fixed"));
            Vec::new()
        });
        let mut audit = Audit {
            grader,
            packet,
            target,
            source,
            defs,
            steps,
            parser,
            deliveries,
            explanations,
            work,
            tree,
            context,
            expected: BTreeMap::new(),
            warnings,
        };
        // The baseline: the unmutated sample passes every hidden-test step.
        let baseline = audit.run_steps(None, "baseline")?;
        for (r, ids) in &baseline {
            let (outcome, reason, _) = classify(std::slice::from_ref(r));
            if outcome != Outcome::Survived {
                return Err(err(format!(
                    "the sample does not pass hidden step {} ({reason}): an audit needs the hidden tests green on the sample",
                    r.step
                )));
            }
            audit.expected.insert(r.step.clone(), ids.clone());
        }
        // The canary: a target that cannot even be imported must be
        // noticed, or the steps never run the target and every mutant
        // would survive for nothing.
        let canary = lang.canary(&audit.target, &audit.source);
        let runs: Vec<StepResult> =
            audit.run_steps(Some(&canary), "canary")?.into_iter().map(|(r, _)| r).collect();
        if classify(&runs).0 == Outcome::Survived {
            audit.warnings.push(format!(
                "the hidden steps ({}) pass even when {} cannot be imported: they never run it, so its mutants survive whatever the tests check; audit the file they do run (--target) or other steps (--step)",
                audit.steps.join(", "),
                audit.target
            ));
        }
        Ok(audit)
    }

    /// The definitions named (all when empty); an unknown name is an error
    /// naming the file's definitions.
    pub fn select(&self, functions: &[String]) -> Result<Vec<&Def>, AuditError> {
        let names: Vec<&str> = self.defs.iter().map(|d| d.name.as_str()).collect();
        for f in functions {
            if !names.contains(&f.as_str()) {
                return Err(err(format!(
                    "--function {f:?}: {} has no top-level function or class of that name (it has {})",
                    self.target,
                    names.join(", ")
                )));
            }
        }
        Ok(self
            .defs
            .iter()
            .filter(|d| functions.is_empty() || functions.contains(&d.name))
            .collect())
    }

    /// Rule mutants of the selected definitions, at most `per_function`
    /// each (0: all).
    pub fn rule_proposals(
        &self,
        functions: &[String],
        per_function: usize,
    ) -> Result<Vec<Proposal>, AuditError> {
        self.select(functions)?;
        self.parser
            .rules(&self.source, &self.target, &self.context, functions, per_function)
            .map_err(|e| err(format!("{}: {e}", self.target)))
    }

    /// Runs every hidden-test step on the sample with `mutated` as the
    /// target (`None`: the sample's own), each on a fresh copy. A sample
    /// diff that delivers the target (see [`super::deliver`]) is rewritten
    /// to deliver the mutant.
    fn run_steps(
        &self,
        mutated: Option<&str>,
        label: &str,
    ) -> Result<Vec<(StepResult, BTreeSet<String>)>, AuditError> {
        let writes = match mutated {
            Some(src) => super::deliver::writes(&self.target, src, &self.deliveries),
            None => Vec::new(),
        };
        run_hidden(
            &HiddenRun {
                grader: self.grader,
                packet: self.packet,
                tree: &self.tree,
                scratch: &self.work.path().join("runs").join(label),
                steps: &self.steps,
                expected: &self.expected,
                stop_at_kill: mutated.is_some(),
                fail_fast: false,
            },
            &writes,
        )
    }

    /// Applies, runs and classifies one proposal.
    pub fn judge_one(&self, p: &Proposal, label: &str) -> Result<MutantReport, AuditError> {
        let applied = self
            .parser
            .apply(&self.source, &self.target, &self.context, std::slice::from_ref(p))
            .map_err(err)?
            .pop()
            .ok_or_else(|| err("the audit helper gave no result"))?;
        self.judge_applied(p, applied, label)
    }

    /// Runs and classifies one applied proposal (`Err`: why it is invalid).
    fn judge_applied(
        &self,
        p: &Proposal,
        applied: Result<Applied, String>,
        label: &str,
    ) -> Result<MutantReport, AuditError> {
        let applied = match applied {
            Ok(a) => a,
            Err(reason) => {
                return Ok(MutantReport {
                    id: p.id.clone(),
                    fault: p.fault.clone(),
                    outcome: Outcome::Invalid,
                    reason,
                    diff: String::new(),
                    killed_by: Vec::new(),
                });
            }
        };
        let runs: Vec<StepResult> =
            self.run_steps(Some(&applied.source), label)?.into_iter().map(|(r, _)| r).collect();
        let (outcome, reason, killed_by) = classify(&runs);
        Ok(MutantReport {
            id: p.id.clone(),
            fault: p.fault.clone(),
            outcome,
            reason,
            diff: applied.diff,
            killed_by,
        })
    }

    /// Judges every proposal: all applied first (one helper call for a
    /// batch), then run side by side (one per core), in order.
    pub fn judge(&self, proposals: &[Proposal]) -> Result<Vec<MutantReport>, AuditError> {
        let applied =
            self.parser.apply(&self.source, &self.target, &self.context, proposals).map_err(err)?;
        crate::par::map_indexed(proposals.len(), |i| {
            self.judge_applied(&proposals[i], applied[i].clone(), &format!("m{i}"))
        })
        .into_iter()
        .collect()
    }

    /// The report of judged mutants; survivors the packet explains are
    /// marked `explained`.
    pub fn report(
        &self,
        mode: &str,
        mut mutants: Vec<MutantReport>,
        calls: Vec<serde_json::Value>,
        errors: Vec<String>,
    ) -> AuditReport {
        super::explain::mark(&mut mutants, &self.explanations, &self.target, &self.source);
        AuditReport {
            packet: self.packet.manifest.packet.slug.clone(),
            target: self.target.clone(),
            mode: mode.into(),
            steps: self.steps.clone(),
            counts: Counts::of(&mutants),
            mutants,
            calls,
            errors,
            warnings: self.warnings.clone(),
        }
    }

    /// The packet folder.
    pub fn root(&self) -> &Path {
        &self.packet.root
    }
}

/// Where and how mutants run through the hidden-test steps: laid over
/// `tree` (the sample over the starter a candidate receives), each step on
/// a fresh copy under `scratch`, `expected` the test ids each step reported
/// on the sample (a test it no longer reports counts as an error).
pub struct HiddenRun<'r> {
    pub grader: &'r Grader,
    pub packet: &'r Packet,
    pub tree: &'r Path,
    pub scratch: &'r Path,
    pub steps: &'r [String],
    pub expected: &'r BTreeMap<String, BTreeSet<String>>,
    /// Stop after the first step that notices the mutant (its outcome is
    /// no longer `survived`): the later steps cannot change the verdict, and
    /// a packet's replays are slow. The baseline runs every step.
    pub stop_at_kill: bool,
    /// Stop each step at its first failing test (`trusted::fail_fast`):
    /// for `packet check`, which asks only whether a mutant is killed, not
    /// an audit, which names every test that kills it.
    pub fail_fast: bool,
}

/// Runs every step of `run` with `writes` (workspace path, bytes) laid over
/// the tree after the step's own lays; per step, its result and the test
/// ids the runner reported.
pub fn run_hidden(
    run: &HiddenRun,
    writes: &[(String, Vec<u8>)],
) -> Result<Vec<(StepResult, BTreeSet<String>)>, AuditError> {
    let m = &run.packet.manifest;
    let limits = m.limits.apply(&default_limits());
    let mut out = Vec::new();
    for id in run.steps {
        let step: &Step = m.step(id).ok_or_else(|| err(format!("{id} is not a step")))?;
        let scratch = run.scratch.join(id);
        if let Some(parent) = scratch.parent() {
            fs::create_dir_all(parent).map_err(|e| err(format!("{}: {e}", parent.display())))?;
        }
        let command =
            if run.fail_fast { crate::trusted::fail_fast(&step.run) } else { step.run.clone() };
        let ran = run_on_copy(
            run.grader.sandbox(),
            run.tree,
            &scratch,
            |w| {
                run.packet.lay_into(&step.lay, w)?;
                let root = Root::open(w)?;
                for (path, bytes) in writes {
                    root.write(path, bytes)?;
                }
                Ok(())
            },
            &command,
            &step.limits.apply(&limits),
            step_env(&step.env),
        )
        .map_err(|e| err(format!("running step {id}: {e}")))?;
        let report = &ran.report;
        let mut r = StepResult {
            step: id.clone(),
            exit_ok: report.success() && ran.runner.as_ref().is_none_or(|r| r.passed()),
            limit: (report.timed_out || report.limit_hit.is_some()).then(|| report.describe()),
            ..StepResult::default()
        };
        let mut ids = BTreeSet::new();
        if let Some(runner) = &ran.runner {
            r.collect_errors = runner.collect_errors.clone();
            let kind = ran.plan.runner().unwrap_or(crate::trusted::RunnerKind::Pytest);
            r.tests = runner.outcomes(kind, run.expected.get(id), report);
            ids = runner.cases.iter().map(|(id, _)| id.clone()).collect();
        } else if let Some(junit) = &step.junit
            && crate::tree::is_safe_path(junit)
            && let Ok(tests) = read_junit(&scratch.join(junit))
        {
            r.tests = tests;
        }
        let _ = fs::remove_dir_all(&scratch);
        out.push((r, ids));
        if run.stop_at_kill {
            let so_far: Vec<StepResult> = out.iter().map(|(r, _)| r.clone()).collect();
            if classify(&so_far).0 != Outcome::Survived {
                break;
            }
        }
    }
    Ok(out)
}
