//! What each run of a grading carries besides its command (issue #25):
//! which files are the grader's (laid read-only), which canaries it
//! plants, and how its results are judged afterwards. The grading pipeline
//! asks this module for a [`Guard`] per run and for the judgement of each
//! run; the mechanisms themselves live in `canary`, `runtime`, `run` and the
//! trusted runner.

use std::collections::{BTreeMap, BTreeSet};

use crate::canary::{self, Choose, StepCanaries};
use crate::manifest::{Lay, Step};
use crate::packet::Packet;
use crate::run::{Guard, Ran};
use crate::runtime::{Judged, Whose};

/// The version of the calibration's canary data; a recorded calibration of
/// another version is measured again.
pub const CANARY_FORMAT: u32 = 3;

/// The canaries of one grading.
pub struct Canaries<'a> {
    /// Step id → its modules' templates and calibrated twins.
    pub steps: &'a BTreeMap<String, StepCanaries>,
    /// Plant every twin and report outcomes (grading the sample to
    /// calibrate), instead of one calibrated twin per chosen test.
    pub calibrating: bool,
    /// The calibration's salt: never in a receipt, so the candidate cannot
    /// predict the names and the order.
    pub salt: &'a str,
    /// The submission's digest: another submission, other names.
    pub submission: &'a str,
    /// Judge the packet's tests apart (JUDGE.md; `[packet] judge`).
    pub apart: bool,
    /// The packet's slug (the scope of the Go judge's kept test binaries).
    pub packet: &'a str,
    /// The Go judge's builds kept between runs (`lang::go::cache`).
    pub go_cache: Option<&'a crate::lang::go::cache::GoCache>,
}

impl<'a> Canaries<'a> {
    fn seed(&self, run_id: &str) -> Vec<u8> {
        crate::tree::sha256_hex(format!("{}\n{}\n{run_id}", self.salt, self.submission).as_bytes())
            .into_bytes()
    }

    /// The guard of step `step`. `fixed`: its tests are all the packet's
    /// (twins, and no conftest loads); otherwise it runs tests the
    /// candidate wrote (the generic pair).
    pub fn for_step(&self, step: &'a Step, fixed: bool) -> Guard<'a> {
        let mut laid = protected(laid_paths(&step.lay));
        if let Some(sc) = self.steps.get(&step.id) {
            laid.extend(sc.files.keys().cloned());
        }
        let packet_code = fixed
            || crate::trusted::plan(&step.run).runner() == Some(crate::trusted::RunnerKind::Script);
        let judge = (self.apart && packet_code).then(|| judge_plan(&step.lay, &[]));
        let go_cache =
            self.go_cache.filter(|_| judge.is_some()).map(|cache| crate::lang::go::cache::Scope {
                cache,
                step: &step.id,
                packet: self.packet,
                submission: self.submission,
            });
        let mut guard = Guard {
            judge,
            go_cache,
            laid,
            generic: !fixed,
            noconftest: fixed,
            calibrating: self.calibrating,
            seed: self.seed(&format!("step:{}", step.id)),
            twins: Vec::new(),
            twin_budget: canary::Budget::default(),
        };
        if let Some(sc) = self.steps.get(&step.id) {
            guard.twin_budget = canary::Budget { us: sc.budget_us };
            for (path, template) in &sc.files {
                let choose = if self.calibrating {
                    Choose::All
                } else {
                    match sc.calibrated.get(path) {
                        Some(cal) => Choose::Calibrated(canary::Graded {
                            twins: cal,
                            cost: (sc.cost.get(path).filter(|c| !c.is_empty()))
                                .map(|c| (c, canary::Budget::default())),
                            first: false,
                            run_budget: canary::Budget::default(),
                        }),
                        None => continue,
                    }
                };
                guard.twins.push((path.as_str(), template, choose));
            }
        }
        guard
    }

    /// The guard of another run (`script:N`, `mutant:ID`): its laid files
    /// read-only, and the generic pair when it runs the candidate's tests.
    /// It plants no twin, so calibrating changes nothing it measures: its
    /// generic pair is judged in a calibration too, and a mutant run of
    /// the sample is the same run in the calibration and in the self-test's
    /// grading of the sample (`grade::memo` shares it).
    pub fn for_run(&self, run_id: &str, laid: Vec<String>, generic: bool) -> Guard<'a> {
        Guard { laid, generic, seed: self.seed(run_id), ..Guard::default() }
    }

    /// The guard of a detector script's run: packet code, judged apart
    /// (its lays, and `also`: the folders of what the steps kept).
    pub fn for_script(&self, run_id: &str, lays: &[Lay], also: &[String]) -> Guard<'a> {
        let mut laid = protected(laid_paths(lays));
        laid.extend(also.iter().cloned());
        Guard {
            laid,
            judge: self.apart.then(|| judge_plan(lays, also)),
            seed: self.seed(run_id),
            ..Guard::default()
        }
    }
}

/// The judge's view of what `lays` lay (and `also`, the judge's alone):
/// every path, and those the candidate's uid may not read.
pub fn judge_plan(lays: &[Lay], also: &[String]) -> crate::run::JudgePlan {
    let mut laid = laid_paths(lays);
    laid.push(crate::run::HARNESS_PATH.to_string());
    laid.extend(also.iter().cloned());
    let mut judge_only: Vec<String> =
        lays.iter().filter(|l| l.judge_only()).map(|l| l.paths().1).collect();
    judge_only.extend(also.iter().cloned());
    laid.sort();
    laid.dedup();
    judge_only.sort();
    judge_only.dedup();
    crate::run::JudgePlan { laid, judge_only }
}

/// Whether a step's tests are all the packet's: a run of them loads no
/// conftest and carries twins, and (JUDGE.md) is judged apart.
pub fn fixed_tests(step: &crate::manifest::Step, plan: &crate::trusted::Plan) -> bool {
    if let crate::trusted::Plan::Runner {
        kind: crate::trusted::RunnerKind::NodeTest,
        args,
        prelude: None,
    } = plan
    {
        return crate::lang::node::fixed(args, &crate::guard::laid_paths(&step.lay));
    }
    // A Go step that sets the candidate's test files aside runs only the
    // packet's (see `lang_go`).
    if let crate::trusted::Plan::Runner {
        kind: crate::trusted::RunnerKind::GoTest,
        prelude: None,
        ..
    } = plan
    {
        return step.env.contains_key(crate::lang::go::ONLY_PACKET_TESTS);
    }
    let laid: std::collections::BTreeSet<String> = step.lay.iter().map(|l| l.paths().1).collect();
    match plan {
        crate::trusted::Plan::Runner {
            kind: crate::trusted::RunnerKind::Pytest,
            args,
            prelude: None,
        } => {
            let paths = crate::trusted::pytest_paths(args);
            !paths.is_empty() && paths.iter().all(|p| laid.contains(p))
        }
        // unittest names modules (`test_hidden`, `pkg.test_x`) or files.
        crate::trusted::Plan::Runner {
            kind: crate::trusted::RunnerKind::Unittest,
            args,
            prelude: None,
        } => {
            let named: Vec<String> = (args.iter())
                .filter(|a| !a.starts_with('-'))
                .map(|a| match a.strip_suffix(".py") {
                    Some(_) => a.trim_start_matches("./").to_string(),
                    None => format!("{}.py", a.replace('.', "/")),
                })
                .collect();
            !named.is_empty() && named.iter().all(|p| laid.contains(p))
        }
        _ => false,
    }
}

/// Whether a step runs packet code beside the candidate's, so that it is
/// judged apart in a packet that is (its tests are all the packet's, or it
/// runs a packet script), and its command lets it be (`run::judged_apart`).
pub fn judges_apart(packet: &Packet, step: &Step) -> bool {
    let plan = crate::trusted::plan(&step.run);
    packet.manifest.judge_apart()
        && crate::run::judged_apart(&plan)
        && (fixed_tests(step, &plan) || plan.runner() == Some(crate::trusted::RunnerKind::Script))
}

/// The workspace paths `lays` lay.
pub fn laid_paths(lays: &[Lay]) -> Vec<String> {
    lays.iter().map(|l| l.paths().1).collect()
}

/// Of the laid paths, those bound read-only: the grader's own folder's
/// (helpers and data under `.gatehouse/`). The hidden test modules a step
/// collects are added by [`Canaries::for_step`]. Other laid paths are the
/// packet's fixtures, which the candidate's code may be meant to change.
pub fn protected(laid: Vec<String>) -> Vec<String> {
    laid.into_iter()
        .filter(|p| p.starts_with(".gatehouse/") && p.len() > ".gatehouse/".len())
        .collect()
}

/// The judgement of one run: what its canaries showed, then what the
/// runner saw (`runtime::judge`). `baseline`: the framework changes the
/// sample's grading showed.
pub fn judge(ran: &Ran, whose: Whose, baseline: &BTreeSet<String>) -> Judged {
    let mut out = match &ran.runner {
        Some(r) => crate::runtime::judge(r, whose, baseline),
        None => Judged::default(),
    };
    out.signs.splice(0..0, ran.verdict.signs.iter().cloned());
    out
}

/// What grading the sample with every twin planted teaches: for each step,
/// module and test, the twins that failed while the test passed, and what
/// the test and each of its twins cost.
pub fn calibrated_from(
    templates: &BTreeMap<String, StepCanaries>,
    outcomes: &BTreeMap<String, crate::canary::Verdict>,
) -> BTreeMap<String, StepCanaries> {
    let mut out = templates.clone();
    for (step, sc) in &mut out {
        let Some(v) = outcomes.get(step) else { continue };
        for (file, template) in &sc.files {
            let mut per_test = BTreeMap::new();
            let mut costs = BTreeMap::new();
            for slot in template.slots() {
                let key = slot.key();
                if let Some((test_us, twins_us)) = v.cost.get(file).and_then(|m| m.get(&key)) {
                    let twins_us = (slot.twins.iter().enumerate())
                        .filter_map(|(i, t)| twins_us.get(&t.what).map(|us| (i, *us)))
                        .collect();
                    costs.insert(
                        key.clone(),
                        crate::canary::SlotCost { test_us: *test_us, twins_us },
                    );
                }
                let Some((passed, twins)) = v.twins.get(file).and_then(|m| m.get(&key)) else {
                    continue;
                };
                if !passed {
                    continue;
                }
                let ok: BTreeSet<usize> = slot
                    .twins
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| twins.get(&t.what) == Some(&true))
                    .map(|(i, _)| i)
                    .collect();
                if !ok.is_empty() {
                    per_test.insert(key, ok);
                }
            }
            sc.calibrated.insert(file.clone(), per_test);
            sc.cost.insert(file.clone(), costs);
        }
    }
    out
}

/// The command that runs the canary generator of `lang` in the sandbox,
/// writing `.gatehouse/twins-{lang:?}.json`; the module names follow.
fn generator(lang: crate::canary::Lang) -> String {
    let tools = crate::sandbox::TOOL_MOUNT;
    let out = format!(".gatehouse/twins-{lang:?}.json");
    match lang {
        crate::canary::Lang::Python => format!("python3 -I {tools}/gatehouse_twins.py {out}"),
        // GOPATH mode (no go.mod is read), its caches in the run's /tmp.
        crate::canary::Lang::Go => format!(
            "GO111MODULE=off GOPATH=/tmp/gatehouse-twins GOCACHE=/tmp/gatehouse-twins/cache GOFLAGS= go run {tools}/{} {out}",
            crate::lang::go::TWINS_FILE
        ),
        crate::canary::Lang::TypeScript => format!(
            "node {tools}/gatehouse_ts_twins.js {}/node_modules/typescript {out}",
            crate::lang::node::TS_HOME
        ),
    }
}

/// Writes the module templates of every hidden test module of `packet`
/// (see [`hidden_modules`]), by running each language's generator (`canary::Lang`) in the sandbox on
/// copies of them (no submission is involved). A module the generator
/// cannot read gets a template with its error and no slots.
pub fn generate(
    sandbox: &crate::sandbox::Sandbox,
    packet: &Packet,
) -> Result<BTreeMap<String, StepCanaries>, crate::run::RunError> {
    let io = |context: &str| {
        let context = context.to_string();
        move |source| crate::run::RunError::Io { context: context.clone(), source }
    };
    let modules =
        crate::canary::hidden_modules(packet).map_err(io("reading the packet's hidden tests"))?;
    let mut out: BTreeMap<String, StepCanaries> = BTreeMap::new();
    if modules.is_empty() || sandbox.config().tool_dir.is_none() {
        return Ok(out);
    }
    let work = crate::workdir::WorkDir::new("gatehouse-twins-")
        .map_err(io("creating a folder for the canary generator"))?;
    let empty = work.path().join("empty");
    std::fs::create_dir_all(&empty).map_err(io("creating a folder for the canary generator"))?;
    let pk = packet.files().map_err(io("reading the packet"))?;
    let lang = |laid: &str| crate::canary::Lang::of(laid).unwrap_or(crate::canary::Lang::Python);
    let names: Vec<String> =
        modules.iter().enumerate().map(|(i, (_, laid, _))| lang(laid).scratch_name(i)).collect();
    // One generator per language, each over its modules, in one run.
    let mut langs: BTreeMap<crate::canary::Lang, Vec<&str>> = BTreeMap::new();
    for ((_, laid, _), name) in modules.iter().zip(&names) {
        langs.entry(lang(laid)).or_default().push(name);
    }
    let command: Vec<String> =
        langs.iter().map(|(l, files)| format!("{} {}", generator(*l), files.join(" "))).collect();
    let command = command.join(" && ");
    let scratch = work.path().join("run");
    let ran = crate::run::run_on_copy(
        sandbox,
        &empty,
        &scratch,
        |w| {
            let ws = crate::root::Root::open(w)?;
            for ((_, _, from), name) in modules.iter().zip(&names) {
                pk.copy(from, &ws, name)?;
            }
            Ok(())
        },
        &command,
        &crate::sandbox::Limits {
            wall: std::time::Duration::from_secs(60),
            ..crate::sandbox::Limits::default()
        },
        Vec::new(),
    )?;
    let mut parsed: BTreeMap<String, crate::canary::Template> = BTreeMap::new();
    for l in langs.keys() {
        let json =
            std::fs::read(scratch.join(format!(".gatehouse/twins-{l:?}.json"))).map_err(|e| {
                crate::run::RunError::Io {
                    context: format!(
                        "the {l:?} canary generator wrote no result ({}): {}",
                        ran.report.describe(),
                        ran.report.stderr_tail.lines().last().unwrap_or_default()
                    ),
                    source: e,
                }
            })?;
        let part: BTreeMap<String, crate::canary::Template> = serde_json::from_slice(&json)
            .map_err(|e| crate::run::RunError::Io {
                context: format!("the {l:?} canary generator's result is not a template"),
                source: std::io::Error::other(e),
            })?;
        parsed.extend(part);
    }
    for ((step, laid, _), name) in modules.into_iter().zip(&names) {
        let t = parsed.remove(name).unwrap_or_else(|| crate::canary::Template {
            parts: Vec::new(),
            error: Some("the generator said nothing of it".into()),
        });
        out.entry(step).or_default().files.insert(laid, t);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_graders_own_laid_files_are_read_only() {
        let laid = [".gatehouse/hidden", ".gatehouse", "project/test_slug.py", ".gatehouse/kept/a"];
        assert_eq!(
            protected(laid.iter().map(|s| s.to_string()).collect()),
            [".gatehouse/hidden", ".gatehouse/kept/a"]
        );
    }
    use crate::canary::{Part, Slot, Template, Twin, Verdict};

    #[test]
    fn twins_that_failed_beside_a_passing_test_are_kept() {
        let twin = |what: &str| Twin { code: String::new(), what: what.into() };
        let slot = |n: usize, name: &str| {
            Part::Slot(Slot {
                slot: n,
                indent: String::new(),
                name: name.into(),
                class: None,
                code: String::new(),
                twins: vec![twin("line 1: expects another value"), twin("line 1: negated")],
            })
        };
        let template = Template { parts: vec![slot(0, "test_a"), slot(1, "test_b")], error: None };
        let mut sc = StepCanaries::default();
        sc.files.insert("t.py".into(), template);
        let templates: BTreeMap<String, StepCanaries> = [("hidden".to_string(), sc)].into();
        let mut v = Verdict::default();
        let file = v.twins.entry("t.py".into()).or_default();
        // test_a passed; its value twin failed, its negation passed (not kept).
        file.insert(
            "test_a".into(),
            (
                true,
                [
                    ("line 1: expects another value".to_string(), true),
                    ("line 1: negated".into(), false),
                ]
                .into(),
            ),
        );
        // test_b failed on the sample: no twin of it can be judged.
        file.insert(
            "test_b".into(),
            (false, [("line 1: expects another value".to_string(), true)].into()),
        );
        let out = calibrated_from(&templates, &[("hidden".to_string(), v)].into());
        let cal = &out["hidden"].calibrated["t.py"];
        assert_eq!(cal.get("test_a"), Some(&[0usize].into()));
        assert_eq!(cal.get("test_b"), None);
        assert_eq!(out["hidden"].covered(), 1);
        assert_eq!(out["hidden"].uncovered(), vec!["t.py::test_b".to_string()]);
    }
}
