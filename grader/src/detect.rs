//! Failure detectors: each manifest `detect` table is evaluated against the
//! evidence the pipeline gathered (the assembled workspace, the submission's
//! file list, step runs, script outputs, mutation results).
//!
//! Pure functions of the evidence; the only I/O is reading files of the
//! assembled workspace (capped in size, never through symbolic links). A
//! detector script that crashes leaves its failures `unevaluated` and the
//! decision `pending`; it does not fail the grading.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::LazyLock;

use globset::{Glob, GlobSet, GlobSetBuilder};
use regex::Regex;

use crate::clock::{format_time, parse_time};
use crate::diff::{excerpt, parse_unified_diff};
use crate::evidence::{Hit, MutationOutcome, Provenance, ScriptFinding, StepOutcome, TestOutcome};
use crate::manifest::{Detector, Limit, Manifest, OrderBy, Scope, Stream};
use crate::pattern::Globs;
use crate::pytest::{pytest_log_problems, unknown_nodes};
use crate::tree::Tree;

/// Everything detectors may look at.
pub struct Evidence<'a> {
    pub manifest: &'a Manifest,
    /// The assembled workspace (starter overlaid by the submission), before
    /// any step ran.
    pub workspace: &'a Path,
    /// Paths the submission itself contained, with the times it claims.
    pub submission: &'a BTreeMap<String, Option<i64>>,
    pub starter: &'a Tree,
    pub starter_dir: &'a Path,
    pub steps: &'a BTreeMap<String, StepOutcome>,
    /// For each step with `keep`, the folder holding the files it kept.
    pub kept: &'a BTreeMap<String, std::path::PathBuf>,
    /// Script findings keyed by the script's `run` text plus its lays, or
    /// why the script gave none (it crashed, or printed something else).
    pub scripts: &'a BTreeMap<String, Result<Vec<ScriptFinding>, String>>,
    pub mutation: Option<&'a MutationOutcome>,
    /// Module names of the interpreter's standard library.
    pub stdlib: &'a BTreeSet<String>,
    /// What the platform witnessed; `None` when grading offline, and then
    /// `witness` detectors stay quiet.
    pub witness: Option<&'a crate::witness::Witness>,
}

/// A detector could not be evaluated (the packet is wrong, not the
/// submission).
#[derive(Debug, thiserror::Error)]
#[error("detector for {failure:?}: {message}")]
pub struct DetectError {
    pub failure: String,
    pub message: String,
}

/// The key under which a script detector's output is stored.
pub fn script_key(run: &str, lay: &[crate::manifest::Lay]) -> String {
    format!("{run}\u{0}{lay:?}")
}

/// Largest file a detector reads, so a huge submitted file cannot stall it.
const READ_CAP: u64 = 4 << 20;

impl Evidence<'_> {
    /// Evaluates `d` for failure `id`.
    pub fn eval(&self, id: &str, d: &Detector) -> Result<Option<Hit>, DetectError> {
        let fail = |message: String| DetectError { failure: id.to_string(), message };
        Ok(match d {
            Detector::Missing { paths, step } => {
                let root = self.root(id, step)?;
                let files = crate::tree::list_paths(root);
                let missing: Vec<String> = paths
                    .each()
                    .filter(|(_, glob)| !files.iter().any(|f| glob.is_match(f)))
                    .map(|(p, _)| match step {
                        Some(s) => format!("{p}: step {s} left no such file"),
                        None => format!("{p}: no such file in the submission"),
                    })
                    .collect();
                if missing.is_empty() { None } else { Hit::new(provenance_of(step), missing) }
            }
            Detector::Present { paths: set, scope, step } => {
                let files = match step {
                    Some(_) => crate::tree::list_paths(self.root(id, step)?),
                    None => self.scoped_files(*scope),
                };
                let hits: Vec<String> = files
                    .into_iter()
                    .filter(|f| set.is_match(f))
                    .map(|f| format!("{f}: present"))
                    .collect();
                if hits.is_empty() { None } else { Hit::new(provenance_of(step), hits) }
            }
            Detector::OutsideAllowlist { allow: set } => {
                let hits: Vec<String> = self
                    .submission
                    .keys()
                    .filter(|f| !set.is_match(f.as_str()))
                    .map(|f| format!("{f}: not on the allowlist"))
                    .collect();
                if hits.is_empty() { None } else { Hit::new(Provenance::Claimed, hits) }
            }
            Detector::Pattern { files, regex, absent, scope, step } => {
                let (re, set) = (regex, files);
                let root = self.root(id, step)?;
                let candidates = match step {
                    Some(_) => crate::tree::list_paths(root),
                    None => self.scoped_files(*scope),
                };
                let mut hits = Vec::new();
                for f in candidates.into_iter().filter(|f| set.is_match(f)) {
                    let text = read_text(root, &f).unwrap_or_default();
                    for (n, line) in text.lines().enumerate() {
                        if re.is_match(line) {
                            hits.push(format!("{f}:{}: {}", n + 1, excerpt(line)));
                        }
                    }
                }
                match (absent, hits.is_empty()) {
                    (false, false) => Hit::new(provenance_of(step), hits),
                    (true, true) => Hit::new(
                        provenance_of(step),
                        vec![format!("no line of {} matches /{regex}/", files.join(", "))],
                    ),
                    _ => None,
                }
            }
            Detector::Frozen { paths } => {
                let paths = paths.as_ref().unwrap_or(&self.manifest.policy.frozen);
                let mut hits = Vec::new();
                for p in paths {
                    let starter = self.starter.get(p).map(|(_, sha)| sha.as_str());
                    let now = self.read_bytes(p).map(|b| crate::tree::sha256_hex(&b));
                    match (starter, now) {
                        (Some(a), Some(b)) if a == b => {}
                        (Some(a), Some(b)) => hits.push(format!(
                            "{p}: sha256 {} differs from the starter's {}",
                            short(&b),
                            short(a)
                        )),
                        (Some(_), None) => hits.push(format!("{p}: deleted")),
                        (None, _) => {
                            return Err(fail(format!("frozen path {p:?} is not in the starter")));
                        }
                    }
                }
                if hits.is_empty() { None } else { Hit::new(Provenance::Replayed, hits) }
            }
            Detector::TestFailing { step, tests } => {
                let outcome = self.step(id, step)?;
                let hits = failing_tests(outcome, tests);
                if hits.is_empty() { None } else { Hit::new(Provenance::Replayed, hits) }
            }
            Detector::Exit { step, equals, not_equals, timed_out } => {
                let outcome = self.step(id, step)?;
                let report = &outcome.report;
                let code = match report.exit {
                    crate::sandbox::Exit::Code(c) => Some(c),
                    crate::sandbox::Exit::Signal(_) => None,
                };
                let fired = equals.is_some_and(|e| code == Some(e))
                    || not_equals.is_some_and(|e| code != Some(e))
                    || timed_out.is_some_and(|t| report.timed_out == t);
                fired.then(|| Hit {
                    provenance: Provenance::Replayed,
                    evidence: vec![format!("step {step}: {}", outcome.report.describe())],
                })
            }
            Detector::Output { step, stream, contains, absent } => {
                let outcome = self.step(id, step)?;
                let text = match stream {
                    Stream::Stdout => outcome.report.stdout_tail.clone(),
                    Stream::Stderr => outcome.report.stderr_tail.clone(),
                    Stream::Both => {
                        format!("{}\n{}", outcome.report.stdout_tail, outcome.report.stderr_tail)
                    }
                };
                if let Some(re) = contains {
                    let lines: Vec<String> = text
                        .lines()
                        .filter(|l| re.is_match(l))
                        .take(5)
                        .map(|l| format!("step {step}: {}", excerpt(l)))
                        .collect();
                    if lines.is_empty() { None } else { Hit::new(Provenance::Replayed, lines) }
                } else if let Some(r) = absent {
                    // Multi-line mode: `^` and `$` are line boundaries, as they
                    // are for `contains`, which matches line by line.
                    if r.is_match(&text) {
                        None
                    } else {
                        Hit::new(
                            Provenance::Replayed,
                            vec![format!("step {step}: output never matches /{r}/")],
                        )
                    }
                } else {
                    None
                }
            }
            Detector::PytestLog { file, expect, nodes_from } => {
                let problems = match self.read(file) {
                    None => vec![format!("{file}: missing")],
                    Some(text) => {
                        let mut p = pytest_log_problems(&text, *expect);
                        if nodes_from.as_deref() == Some("starter") {
                            p.extend(unknown_nodes(&text, self.starter_dir));
                        }
                        p.into_iter().map(|m| format!("{file}: {m}")).collect()
                    }
                };
                if problems.is_empty() { None } else { Hit::new(Provenance::Claimed, problems) }
            }
            Detector::Order { before, after, by, stamp } => {
                let time_of = |p: &str| -> Result<Option<i64>, DetectError> {
                    match by {
                        OrderBy::ZipTime => Ok(self.submission.get(p).copied().flatten()),
                        OrderBy::Stamp => {
                            // Validation requires a stamp regex for `by = "stamp"`.
                            let Some(re) = stamp else { return Ok(None) };
                            Ok(self.read(p).and_then(|t| {
                                re.captures(&t)
                                    .and_then(|c| c.get(1))
                                    .and_then(|m| parse_time(m.as_str()))
                            }))
                        }
                    }
                };
                match (time_of(before)?, time_of(after)?) {
                    (Some(b), Some(a)) if a < b => Hit::new(
                        Provenance::Claimed,
                        vec![format!(
                            "{after} ({}) is {} s earlier than {before} ({})",
                            format_time(a),
                            b - a,
                            format_time(b)
                        )],
                    ),
                    _ => None,
                }
            }
            Detector::DiffInvalid { diff } => match self.read(diff) {
                None => Hit::new(Provenance::Claimed, vec![format!("{diff}: missing")]),
                Some(text) => match parse_unified_diff(&text) {
                    Ok(_) => None,
                    Err(e) => Hit::new(Provenance::Claimed, vec![format!("{diff}: {e}")]),
                },
            },
            Detector::DiffAllowlist { diff, allow, allow_file } => {
                let Some(text) = self.read(diff) else { return Ok(None) };
                let Ok(paths) = parse_unified_diff(&text) else { return Ok(None) };
                let mut allowed = allow.clone();
                if let Some(f) = allow_file {
                    let list = self.read(f).unwrap_or_default();
                    allowed.extend(
                        list.lines()
                            .map(str::trim)
                            .filter(|l| !l.is_empty() && !l.starts_with('#'))
                            .map(String::from),
                    );
                }
                let set = globs(&allowed);
                let hits: Vec<String> = paths
                    .iter()
                    .filter(|p| !set.is_match(p.as_str()))
                    .map(|p| format!("{diff} touches {p}, which is not on the allowlist"))
                    .collect();
                if hits.is_empty() { None } else { Hit::new(Provenance::Claimed, hits) }
            }
            Detector::StdlibOnly { files: set, allow } => {
                let local = local_modules(&self.workspace_files());
                let mut hits = Vec::new();
                for f in self
                    .workspace_files()
                    .into_iter()
                    .filter(|f| set.is_match(f) && f.ends_with(".py"))
                {
                    let text = self.read(&f).unwrap_or_default();
                    for (n, module) in imports(&text) {
                        if !self.stdlib.contains(&module)
                            && !local.contains(&module)
                            && !allow.contains(&module)
                        {
                            hits.push(format!(
                                "{f}:{n}: imports {module}, which is not in the standard library"
                            ));
                        }
                    }
                }
                if hits.is_empty() { None } else { Hit::new(Provenance::Claimed, hits) }
            }
            Detector::Ledger {
                file,
                step,
                filter,
                required,
                schema,
                rows_over,
                rows_under,
                sum,
                duplicates,
                consecutive,
                invalid,
                compare,
            } => {
                let root = self.root(id, step)?;
                let Some(text) = read_text(root, file) else { return Ok(None) };
                let limit = |l: &Limit| -> Result<f64, DetectError> {
                    match l {
                        Limit::Number(n) => Ok(*n),
                        Limit::Budget(name) => name
                            .strip_prefix("budget.")
                            .and_then(|b| self.manifest.budgets.get(b))
                            .map(|v| v as f64)
                            .ok_or_else(|| fail(format!("{name:?} names no budget"))),
                    }
                };
                let (rows, bad) = parse_ledger(&text, required, schema);
                let rows = filtered(rows, filter);
                let mut hits = Vec::new();
                if *invalid {
                    hits = bad.iter().map(|m| format!("{file}: {m}")).collect();
                } else if let Some(l) = rows_over {
                    let l = limit(l)?;
                    if rows.len() as f64 > l {
                        hits.push(format!("{file}: {} rows, over the limit of {l}", rows.len()));
                    }
                } else if let Some(l) = rows_under {
                    let l = limit(l)?;
                    if (rows.len() as f64) < l {
                        hits.push(format!("{file}: {} rows, under the minimum of {l}", rows.len()));
                    }
                } else if let Some(s) = sum {
                    let l = limit(&s.over)?;
                    let total = field_sum(&rows, &s.field);
                    if total > l {
                        hits.push(format!(
                            "{file}: sum of {} is {total}, over the limit of {l}",
                            s.field
                        ));
                    }
                } else if let Some(key) = duplicates {
                    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
                    for (i, r) in rows.iter().enumerate() {
                        let k = ledger_key(r, key);
                        if let Some(first) = seen.get(&k) {
                            hits.push(format!(
                                "{file}: row {} repeats row {} ({k})",
                                i + 1,
                                first + 1
                            ));
                        } else {
                            seen.insert(k, i);
                        }
                    }
                } else if let Some(c) = consecutive {
                    let l = limit(&c.over)?;
                    let (mut run, mut best, mut prev) = (0usize, (0usize, 0usize), None::<String>);
                    for (i, r) in rows.iter().enumerate() {
                        let k = ledger_key(r, &c.key);
                        run = if prev.as_deref() == Some(k.as_str()) { run + 1 } else { 1 };
                        if run > best.0 {
                            best = (run, i + 1);
                        }
                        prev = Some(k);
                    }
                    if best.0 as f64 > l {
                        hits.push(format!("{file}: {} identical rows in a row ending at row {}, over the limit of {l}", best.0, best.1));
                    }
                } else if let Some(c) = compare {
                    let other_root = self.root(id, &Some(c.with_step.clone()))?;
                    let other = read_text(other_root, &c.with_file).unwrap_or_default();
                    let (other_rows, _) = parse_ledger(&other, &[], &BTreeMap::new());
                    let other_rows = filtered(other_rows, &c.with_filter);
                    let claimed = if c.field == "rows" {
                        rows.len() as f64
                    } else {
                        field_sum(&rows, &c.field)
                    };
                    let recomputed = if c.with_field == "rows" {
                        other_rows.len() as f64
                    } else {
                        field_sum(&other_rows, &c.with_field)
                    };
                    let allowed = recomputed.abs() * c.tolerance_pct / 100.0;
                    if (claimed - recomputed).abs() > allowed {
                        let pct = if recomputed != 0.0 {
                            format!("{:+.1}%", (claimed - recomputed) / recomputed * 100.0)
                        } else {
                            "∞".into()
                        };
                        hits.push(format!(
                            "{file}: {} claims {claimed}, step {} recomputed {recomputed} ({pct}, tolerance {}%)",
                            c.field, c.with_step, c.tolerance_pct
                        ));
                    }
                }
                if hits.is_empty() {
                    None
                } else {
                    Hit::new(
                        provenance_of(step).max(if compare.is_some() {
                            Provenance::Replayed
                        } else {
                            Provenance::Claimed
                        }),
                        hits,
                    )
                }
            }
            Detector::Leftovers { step } => {
                let outcome = self.step(id, step)?;
                let left = &outcome.report.leftovers;
                if left.is_empty() {
                    None
                } else {
                    let mut ev: Vec<String> = left
                        .iter()
                        .map(|l| {
                            format!("step {step} left `{}` running (killed)", excerpt(&l.cmdline))
                        })
                        .collect();
                    ev.truncate(10);
                    Hit::new(Provenance::Replayed, ev)
                }
            }
            Detector::Digest { files, claimed_in, regex, step } => {
                let re = regex;
                let Some(text) = read_text(self.root(id, step)?, claimed_in) else {
                    return Ok(None);
                };
                let mut tree = crate::tree::Tree::new();
                for f in files {
                    match self.read_bytes(f) {
                        Some(b) => {
                            tree.insert(f.clone(), (b.len() as u64, crate::tree::sha256_hex(&b)));
                        }
                        None => {
                            return Ok(Hit::new(
                                Provenance::Replayed,
                                vec![format!("{f}: missing, so its digest cannot match")],
                            ));
                        }
                    }
                }
                let actual = if tree.len() == 1 {
                    tree.values().next().map(|(_, sha)| sha.clone()).unwrap_or_default()
                } else {
                    crate::tree::tree_digest(&tree)
                };
                match re
                    .captures(&text)
                    .and_then(|c| c.get(1))
                    .map(|m| m.as_str().to_ascii_lowercase())
                {
                    None => Hit::new(
                        Provenance::Claimed,
                        vec![format!("{claimed_in} carries no digest matching /{regex}/")],
                    ),
                    Some(claimed) if claimed == actual => None,
                    Some(claimed) => Hit::new(
                        Provenance::Replayed,
                        vec![format!(
                            "{claimed_in} claims {} for {}, the submitted code has {}",
                            short(&claimed),
                            files.join(", "),
                            short(&actual)
                        )],
                    ),
                }
            }
            Detector::MutantsSurvive { at_least } => {
                let m = self.mutation.ok_or_else(|| fail("no mutation run".into()))?;
                let survivors: Vec<String> = m
                    .mutants
                    .iter()
                    .filter(|r| !r.killed)
                    .map(|r| format!("mutant {} survived the candidate's tests", r.id))
                    .collect();
                if survivors.len() >= *at_least as usize {
                    Hit::new(Provenance::Replayed, survivors)
                } else {
                    None
                }
            }
            Detector::Script { run, lay, .. } => {
                let key = script_key(run, lay);
                let found = match self.scripts.get(&key) {
                    None => return Err(fail(format!("script `{run}` did not run"))),
                    Some(Err(why)) => return Err(fail(why.clone())),
                    Some(Ok(found)) => found,
                };
                let mine: Vec<&ScriptFinding> = found.iter().filter(|f| f.id == id).collect();
                let provenance =
                    mine.iter().map(|f| f.provenance.unwrap_or(Provenance::Replayed)).min();
                provenance.map(|p| Hit {
                    provenance: p,
                    evidence: mine.iter().map(|f| f.evidence.clone()).collect(),
                })
            }
            Detector::All { of } => {
                let mut all = Vec::new();
                for d in of {
                    match self.eval(id, d)? {
                        Some(h) => all.push(h),
                        None => return Ok(None),
                    }
                }
                merge(all)
            }
            Detector::Any { of } => {
                let mut any = Vec::new();
                for d in of {
                    any.extend(self.eval(id, d)?);
                }
                // One witnessed hit is enough to establish an `any` on its
                // own, so the finding keeps that provenance even when a
                // claimed detector fired too.
                let witnessed = any.iter().any(|h| h.provenance == Provenance::Witnessed);
                merge(any).map(|h| {
                    if witnessed { Hit { provenance: Provenance::Witnessed, ..h } } else { h }
                })
            }
            Detector::Witness { check, file, tolerance, min_chain } => match self.witness {
                None => None,
                Some(w) => {
                    let spec = crate::witness::CheckSpec {
                        check: *check,
                        file: file.clone(),
                        tolerance: *tolerance,
                        min_chain: *min_chain,
                    };
                    let claimed = spec.claimed_file().and_then(|f| self.read(&f));
                    crate::witness::check(&spec, w, &claimed)
                }
            },
            Detector::Not { of } => match self.eval(id, of)? {
                Some(_) => None,
                None => Hit::new(
                    Provenance::Replayed,
                    vec![format!("expected evidence absent: {}", describe(of))],
                ),
            },
        })
    }

    fn step(&self, id: &str, step: &str) -> Result<&StepOutcome, DetectError> {
        self.steps.get(step).ok_or_else(|| DetectError {
            failure: id.into(),
            message: format!("step {step:?} did not run"),
        })
    }

    /// The folder a file-reading detector reads: the assembled workspace,
    /// or what `step` kept.
    fn root(&self, id: &str, step: &Option<String>) -> Result<&Path, DetectError> {
        match step {
            None => Ok(self.workspace),
            Some(s) => self.kept.get(s).map(|p| p.as_path()).ok_or_else(|| DetectError {
                failure: id.into(),
                message: format!("step {s:?} kept no files"),
            }),
        }
    }

    fn workspace_files(&self) -> Vec<String> {
        crate::tree::list_paths(self.workspace)
    }

    fn scoped_files(&self, scope: Scope) -> Vec<String> {
        match scope {
            Scope::Submission => self.submission.keys().cloned().collect(),
            Scope::Workspace => self.workspace_files(),
        }
    }

    fn read_bytes(&self, rel: &str) -> Option<Vec<u8>> {
        crate::tree::Root::open(self.workspace).ok()?.read_max(rel, READ_CAP).ok()
    }

    fn read(&self, rel: &str) -> Option<String> {
        read_text(self.workspace, rel)
    }
}

fn provenance_of(step: &Option<String>) -> Provenance {
    if step.is_some() { Provenance::Replayed } else { Provenance::Claimed }
}

/// Reads `rel` under `root` as text: regular files only, never through a
/// symbolic link, at most READ_CAP bytes.
fn read_text(root: &Path, rel: &str) -> Option<String> {
    let bytes = crate::tree::Root::open(root).ok()?.read_max(rel, READ_CAP).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The rows whose fields equal every value of `filter`.
fn filtered(rows: Vec<Row>, filter: &BTreeMap<String, serde_json::Value>) -> Vec<Row> {
    rows.into_iter().filter(|r| filter.iter().all(|(k, v)| r.get(k) == Some(v))).collect()
}

fn field_sum(rows: &[Row], field: &str) -> f64 {
    rows.iter().filter_map(|r| r.get(field).and_then(|v| v.as_f64())).sum()
}

fn merge(hits: Vec<Hit>) -> Option<Hit> {
    let provenance = hits.iter().map(|h| h.provenance).min()?;
    Some(Hit { provenance, evidence: hits.into_iter().flat_map(|h| h.evidence).collect() })
}

/// A short human description of a detector, for `not` evidence.
pub fn describe(d: &Detector) -> String {
    match d {
        Detector::PytestLog { file, expect, .. } => {
            format!("{file} is a real pytest log of a {expect:?} run").to_lowercase()
        }
        Detector::Missing { paths, .. } => format!("missing {}", paths.join(", ")),
        Detector::Present { paths, .. } => format!("present {}", paths.join(", ")),
        Detector::Pattern { files, regex, .. } => format!("/{regex}/ in {}", files.join(", ")),
        Detector::TestFailing { step, tests } => {
            format!("failing tests {} in step {step}", tests.join(", "))
        }
        Detector::Order { before, after, .. } => format!("{after} earlier than {before}"),
        other => format!("{other:?}").split_whitespace().next().unwrap_or_default().to_string(),
    }
}

fn globs(patterns: &[String]) -> GlobSet {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        // Patterns were validated when the manifest was parsed.
        if let Ok(g) = globset::GlobBuilder::new(p).literal_separator(true).build() {
            b.add(g);
        } else if let Ok(g) = Glob::new(p) {
            b.add(g);
        }
    }
    b.build().unwrap_or_else(|_| GlobSet::empty())
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

/// The names a test pattern is matched against.
fn test_names(t: &TestOutcome) -> Vec<String> {
    let mut names = vec![t.name.clone(), format!("{}::{}", t.classname, t.name)];
    // pytest reports `tests.test_compute` for tests/test_compute.py, and
    // `test_x.TestCase` for a method of a class.
    let as_path = t.classname.replace('.', "/");
    names.push(format!("{as_path}.py::{}", t.name));
    if let Some((module, class)) = t.classname.rsplit_once('.') {
        names.push(format!("{}.py::{class}::{}", module.replace('.', "/"), t.name));
    }
    names
}

/// Whether test pattern `pattern` (as `test-failing` matches it: `name`,
/// `file::name` or `classname::name`, globs allowed) names test `t`.
pub fn test_matches(t: &TestOutcome, pattern: &str) -> bool {
    let g = globs(&[pattern.to_string()]);
    // `test_x` also names the parametrised `test_x[1]`.
    let unparam = |n: &str| {
        n.strip_suffix(']').and_then(|n| n.rsplit_once('[')).map(|(base, _)| base.to_string())
    };
    test_names(t).iter().any(|n| {
        n == pattern || g.is_match(n) || unparam(n).is_some_and(|b| b == pattern || g.is_match(&b))
    })
}

fn failing_tests(outcome: &StepOutcome, patterns: &Globs) -> Vec<String> {
    let Some(tests) = &outcome.tests else {
        let why = outcome.junit_error.as_deref().unwrap_or("no JUnit report");
        return vec![format!("no test results: {why} ({})", outcome.report.describe())];
    };
    let failed = |t: &&TestOutcome| {
        t.status == crate::evidence::TestStatus::Failed
            || t.status == crate::evidence::TestStatus::Error
    };
    let line = |t: &TestOutcome| {
        format!(
            "{}::{} {}{}",
            t.classname,
            t.name,
            t.status.word(),
            t.message.as_deref().map(|m| format!(": {}", excerpt(m))).unwrap_or_default()
        )
    };
    if patterns.is_empty() {
        if tests.is_empty() {
            return vec!["no tests ran".into()];
        }
        return tests.iter().filter(failed).map(line).collect();
    }
    let mut hits = Vec::new();
    for (p, g) in patterns.each() {
        let matching: Vec<&TestOutcome> = tests
            .iter()
            .filter(|t| test_names(t).iter().any(|n| n == p || g.is_match(n)))
            .collect();
        if matching.is_empty() {
            hits.push(format!("{p}: not run"));
        }
        hits.extend(matching.into_iter().filter(|t| failed(t)).map(line));
    }
    hits
}

/// Top-level modules imported by a Python source, with line numbers.
/// Relative imports are left out.
fn imports(src: &str) -> Vec<(usize, String)> {
    static IMPORT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^\s*import\s+(.+)$").expect("static regex"));
    static FROM: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^\s*from\s+([A-Za-z_][\w.]*)\s+import\b").expect("static regex")
    });
    let (import, from) = (&*IMPORT, &*FROM);
    let mut out = Vec::new();
    for (n, line) in src.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default();
        if let Some(c) = from.captures(line) {
            out.push((n + 1, c[1].split('.').next().unwrap_or_default().to_string()));
        } else if let Some(c) = import.captures(line) {
            for part in c[1].split(',') {
                let name = part.split_whitespace().next().unwrap_or_default();
                let top = name.split('.').next().unwrap_or_default();
                if !top.is_empty() && top.chars().all(|c| c.is_alphanumeric() || c == '_') {
                    out.push((n + 1, top.to_string()));
                }
            }
        }
    }
    out
}

/// Module names a workspace provides itself: top-level `.py` files and
/// folders (packages) at any depth's first component.
fn local_modules(files: &[String]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for f in files {
        for (i, part) in f.split('/').enumerate() {
            let is_last = i == f.split('/').count() - 1;
            if is_last {
                if let Some(stem) = part.strip_suffix(".py") {
                    out.insert(stem.to_string());
                }
            } else {
                out.insert(part.to_string());
            }
        }
    }
    out
}

type Row = serde_json::Map<String, serde_json::Value>;

/// Parses a JSONL ledger; returns the rows that are objects and a message
/// for every line that is not a valid row.
pub fn parse_ledger(
    text: &str,
    required: &[String],
    schema: &BTreeMap<String, crate::manifest::FieldType>,
) -> (Vec<Row>, Vec<String>) {
    let mut rows = Vec::new();
    let mut bad = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(serde_json::Value::Object(map)) => {
                let missing: Vec<&str> =
                    required.iter().filter(|f| !map.contains_key(*f)).map(String::as_str).collect();
                if !missing.is_empty() {
                    bad.push(format!("line {}: missing {}", n + 1, missing.join(", ")));
                }
                for (field, ty) in schema {
                    if let Some(v) = map.get(field)
                        && !ty.accepts(v)
                    {
                        bad.push(format!(
                            "line {}: {field} is {v}, not {}",
                            n + 1,
                            format!("{ty:?}").to_lowercase()
                        ));
                    }
                }
                rows.push(map);
            }
            Ok(_) => bad.push(format!("line {}: not a JSON object", n + 1)),
            Err(e) => bad.push(format!("line {}: not JSON ({e})", n + 1)),
        }
    }
    (rows, bad)
}

fn ledger_key(row: &Row, fields: &[String]) -> String {
    fields
        .iter()
        .map(|f| format!("{f}={}", row.get(f).map(|v| v.to_string()).unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_imports() {
        let src = "import os, sys\nimport json as j\nfrom urllib.request import urlopen\nfrom . import x\n# import requests\nimport requests  # third party\n";
        let got: Vec<String> = imports(src).into_iter().map(|(n, m)| format!("{n}:{m}")).collect();
        assert_eq!(got, ["1:os", "1:sys", "2:json", "3:urllib", "6:requests"]);
    }
}
