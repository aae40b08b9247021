//! One grading: replay the steps, run detector scripts and mutants, detect, score, write receipt.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::detect::{Evidence, script_key};
use crate::env::env_report;
use crate::evidence::{MutantResult, MutationOutcome, StepOutcome, TestOutcome};
use crate::ingest::Ingested;
use crate::manifest::{Detector, Lay};
use crate::packet::Packet;
use crate::run::{RunRecord, parse_script_output, read_junit, run_guarded, step_env};
use crate::runtime::Whose;
use crate::sandbox::Limits;
use crate::score::Finding;
use crate::tree::{Root, list_files, tree_digest};
use crate::trusted::{Plan, RunnerKind};

use super::receipt::ms;
use super::scoring::scoring;
use super::*;

impl Grader {
    /// Grades an ingested submission. `calibration` is `None` only while
    /// calibrating (grading the sample to learn its test ids): then no ids
    /// are enforced and the budget is the packet's limits alone. Every run
    /// carries what `canaries` plants. Returns the scorecard and what a
    /// calibration keeps of the grading.
    pub(super) fn grade_ingested(
        &self,
        packet: &Packet,
        ingested: &Ingested,
        work: &Path,
        opts: &GradeOptions,
        calibration: Option<&Calibration>,
        canaries: &crate::guard::Canaries,
    ) -> Result<(Scorecard, Observed), GradeError> {
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
        let mut observed = Observed::default();
        let mut tamper_runs: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut runtime_notes: Vec<String> = Vec::new();
        let mut planted: BTreeMap<String, usize> = BTreeMap::new();
        // How each run of packet code met the candidate's code (JUDGE.md).
        let mut judged: BTreeMap<String, String> = BTreeMap::new();
        let empty = BTreeSet::new();
        let baseline = calibration.map_or(&empty, |c| &c.baseline);
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
            let step_plan = crate::trusted::plan(&step.run);
            let fixed = fixed_tests(step, &step_plan);
            let ran = run_guarded(
                &self.sandbox,
                &workspace,
                &dir,
                |w| packet.lay_into(&step.lay, w),
                &step.run,
                &limits,
                env,
                &canaries.for_step(step, fixed),
            )?;
            // Whose tests the step runs: the packet's (its own files, or a
            // packet script), or ones the candidate wrote.
            let whose = match step_plan {
                Plan::Runner { kind: RunnerKind::Script, .. } => Whose::Packet,
                _ if fixed => Whose::Packet,
                _ => Whose::Candidate,
            };
            let judged_run = crate::guard::judge(&ran, whose, baseline);
            if let Some(how) = judged_how(packet, &ran, whose) {
                judged.insert(run_id.clone(), how);
            }
            let judged = judged_run;
            let crash = ran.crash();
            if ran.verdict.planted > 0 {
                planted.insert(run_id.clone(), ran.verdict.planted);
            }
            if canaries.calibrating {
                observed.twins.insert(step.id.clone(), ran.verdict.clone());
                if let Some(r) = &ran.runner {
                    observed.integrity.extend(r.integrity.iter().map(|c| c.what.clone()));
                }
            }
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
                    .map(|o| ran.canaries.map_junit(o))
                    .map_err(|e| e.replace(&dir.display().to_string(), "/workspace"))
            });
            runtime_notes.extend(judged.notes.iter().map(|n| format!("{run_id}: {n}")));
            let (tests, junit_error) = match (&ran.runner, ran.plan.runner()) {
                (Some(r), Some(kind)) => {
                    let mut r = r.clone();
                    let expected = calibration
                        .and_then(|c| c.expected.get(&step.id))
                        .filter(|_| fixed_tests(step, &ran.plan));
                    // A file the runner wrote elsewhere (after a `cd`) is not comparable.
                    // Judged apart, the channel is the only word: the
                    // candidate's uid can write the workspace, where the
                    // JUnit file lies, but never the judge's channel.
                    let comparable =
                        junit.as_ref().filter(|_| ran.plan.in_workspace() && !ran.apart);
                    let mut signs = judged.signs.clone();
                    signs.extend(r.cross_check(kind, &report, comparable, expected));
                    apart_is_no_forgery(
                        ran.apart && report.apart,
                        &run_id,
                        &mut signs,
                        &mut runtime_notes,
                    );
                    if fixed_tests(step, &ran.plan)
                        && let Some(ids) = &r.collected
                    {
                        observed.collected.insert(step.id.clone(), ids.clone());
                    }
                    if fixed {
                        if canaries.calibrating {
                            observed.passed.insert(
                                step.id.clone(),
                                r.cases
                                    .iter()
                                    .filter(|(id, c)| {
                                        c.status == crate::evidence::TestStatus::Passed
                                            && !r.marks.contains_key(id)
                                    })
                                    .map(|(id, _)| id.clone())
                                    .collect(),
                            );
                        } else if let Some(passed) =
                            calibration.and_then(|c| c.passed.get(&step.id))
                        {
                            crate::runtime::only_a_pass(&mut r, passed);
                        }
                    }
                    // Read against how the run really ended, before its
                    // status is contained.
                    let mut outcomes = r.outcomes(kind, expected, &report);
                    let forged = !signs.is_empty();
                    if forged {
                        contain(&mut report);
                        tamper_runs.insert(format!("step:{}", step.id), signs);
                    } else if !r.passed() && report.exit == crate::sandbox::Exit::Code(0) {
                        contain(&mut report);
                    }
                    if forged {
                        distrust(&mut outcomes);
                    }
                    (Some(outcomes), None)
                }
                _ if !judged.signs.is_empty() => {
                    contain(&mut report);
                    tamper_runs.insert(run_id.clone(), judged.signs.clone());
                    let mut outcomes = junit.and_then(|j| j.ok());
                    if let Some(o) = outcomes.as_mut() {
                        distrust(o);
                    }
                    (outcomes, None)
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
                    crash,
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
            let kept_dirs: Vec<String> =
                kept.keys().map(|step| format!(".gatehouse/kept/{step}")).collect();
            let ran = run_guarded(
                &self.sandbox,
                &workspace,
                &dir,
                lay_all,
                run,
                &limits,
                with_platform_env(Vec::new(), &platform),
                &canaries.for_script(&run_id, lay, &kept_dirs),
            )?;
            let judged_run = crate::guard::judge(&ran, Whose::Packet, baseline);
            if let Some(how) = judged_how(packet, &ran, Whose::Packet) {
                judged.insert(run_id.clone(), how);
            }
            let judged = judged_run;
            runtime_notes.extend(judged.notes.iter().map(|n| format!("{run_id}: {n}")));
            let crash = ran.crash();
            let mut report = ran.report;
            skipped.extend(cut(&run_id, &cut_note, &report));
            if let (Some(r), Some(kind)) = (&ran.runner, ran.plan.runner()) {
                let mut signs = judged.signs.clone();
                signs.extend(r.cross_check(kind, &report, None, None));
                apart_is_no_forgery(
                    ran.apart && report.apart,
                    &run_id,
                    &mut signs,
                    &mut runtime_notes,
                );
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
                    crash,
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
                    let guard = canaries.for_run(&run_id, vec![target.clone()], true);
                    let run = || {
                        run_guarded(
                            &self.sandbox,
                            &workspace,
                            &dir,
                            |w| Root::open(w)?.write(&target, &mutant),
                            &mu.run,
                            &limits,
                            Vec::new(),
                            &guard,
                        )
                    };
                    let ran = match &opts.memo {
                        // The same tree, mutant and command ran in another
                        // grading of this self-test: its result is this one's.
                        Some(memo) => memo.get_or_run(
                            super::memo::mutant_key(&workspace_tree, &target, &mutant, &mu.run),
                            |r| !r.report.timed_out && r.report.limit_hit.is_none(),
                            run,
                        )?,
                        None => run()?,
                    };
                    let judged = crate::guard::judge(&ran, Whose::Candidate, baseline);
                    runtime_notes.extend(judged.notes.iter().map(|n| format!("{run_id}: {n}")));
                    if ran.verdict.planted > 0 {
                        planted.insert(run_id.clone(), ran.verdict.planted);
                    }
                    let crash = ran.crash();
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
                        let mut signs = judged.signs.clone();
                        signs.extend(r.cross_check(kind, &report, None, None));
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
                            crash,
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
        let mut tamper_static = crate::tamper::scan(&workspace, &changed, &probe.runner_modules);
        // Only the source runs: bytecode meant to run in its place.
        tamper_static.extend(crate::bytecode::check(&self.sandbox, ingested)?);
        // What the reviewer reads is what runs: direction controls that
        // can reorder a line of code.
        let (hidden_text, hidden_text_unlisted) = crate::hidden_text::scan(
            &ingested.dir,
            ingested.files.iter().filter(|f| !platform.contains(&f.path)).map(|f| f.path.clone()),
        );
        tamper_static.extend(
            hidden_text
                .iter()
                .filter(|h| h.reorders)
                .map(|h| format!("hidden characters: {}", h.describe())),
        );
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
                    crash: r.crash,
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
            hidden_text,
            hidden_text_unlisted,
            runtime_notes,
            canaries: planted,
            judged,
            graded_digest: None,
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
        Ok((card, observed))
    }
}

/// Whether a step's test ids are the packet's alone: a trusted pytest run
/// whose every named test file is one the step lays from the packet.
/// A run judged apart on two uids cannot be forged by the candidate's
/// code: it never ran in the judge's process, and its uid can write neither
/// the channel nor the judge's files. What the cross-checks find there
/// (an id the record names that the run never reported, the judge killed
/// with the rest of the cgroup) is a run that ended short, whose missing
/// tests count as failed ("not run"), never evidence of tampering: the
/// signs become a note for the reviewer.
fn apart_is_no_forgery(
    apart: bool,
    run_id: &str,
    signs: &mut Vec<String>,
    notes: &mut Vec<String>,
) {
    if apart && !signs.is_empty() {
        notes.push(format!(
            "{run_id}: judged apart, the run was inconsistent (not something the candidate's code can cause there): {}",
            signs.join("; ")
        ));
        signs.clear();
    }
}

/// How a run of packet code met the candidate's code, for the receipt:
/// `apart` (two processes, two uids), `apart, one uid` (two processes;
/// the sandbox could not give the host a uid of its own), or `shared` with
/// why (a packet that declares `judge = "shared"`, a command with a
/// prelude); None for runs of the candidate's own tests.
fn judged_how(
    packet: &crate::packet::Packet,
    ran: &crate::run::Ran,
    whose: Whose,
) -> Option<String> {
    if whose != Whose::Packet || ran.plan.runner().is_none() {
        return None;
    }
    Some(if ran.apart && ran.report.apart {
        "apart".to_string()
    } else if ran.apart {
        "apart, one uid (the sandbox could not give the host a uid of its own)".to_string()
    } else if !packet.manifest.judge_apart() {
        format!(
            "shared: the packet declares judge = \"shared\" ({}); this lane is weaker against forgery",
            packet.manifest.packet.judge_reason.as_deref().unwrap_or("no reason given")
        )
    } else {
        "shared: the command runs something before the test runner; this lane is weaker against forgery".to_string()
    })
}

pub fn fixed_tests(step: &crate::manifest::Step, plan: &Plan) -> bool {
    crate::guard::fixed_tests(step, plan)
}

/// A run whose evidence contradicted itself reports nothing a score may
/// rest on: every test it said did not fail counts as failed, so a forgery
/// never grades better than the work without it.
fn distrust(outcomes: &mut [crate::evidence::TestOutcome]) {
    use crate::evidence::TestStatus;
    for o in outcomes.iter_mut() {
        if !matches!(o.status, TestStatus::Failed | TestStatus::Error) {
            o.status = TestStatus::Failed;
            o.message = Some(
                "not trusted: this run's evidence contradicted itself (evidence-tampering)".into(),
            );
        }
    }
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
