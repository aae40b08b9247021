//! The packet manifest (`packet.toml`): its data model, parsing and
//! validation. `packets/FORMAT.md` is the user-facing description of every
//! key; keep the two in step.
//!
//! Every reference (criterion, step, failure, decision, budget, regex, glob) is
//! checked at parse time. Validation reports every problem, not the first, each
//! with the line of the value it is about (a key path such as
//! `failure[3].effect` looked up in toml's spanned parse), so a duplicate id
//! points at the duplicate.
//!
//! This file parses (`Manifest::parse`) and holds the accessors; `types` is the
//! data model (every table and key), `validate` the reference and rule checks,
//! `paths` path safety (every path a manifest names stays inside its folder),
//! `problems` the errors and how each is located at its line. Every type is
//! re-exported from `manifest`.

mod paths;
mod problems;
mod types;
mod validate;

pub use problems::{ManifestError, Problem};
pub use types::*;

pub use crate::tree::{is_safe_path, is_safe_relative};

use problems::line_of;

impl Manifest {
    /// Whether the packet's tests are judged apart from the candidate's
    /// code (JUDGE.md): every packet but one that declares
    /// `judge = "shared"`.
    pub fn judge_apart(&self) -> bool {
        self.packet.judge != Some(JudgeMode::Shared)
    }

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
    fn cites_tables_are_checked() {
        let with = |table: &str| {
            let table = table.to_string();
            move |s: String| format!("{s}\n{table}\n")
        };
        check(with("[cites.hidden]\n\"test_*\" = \"a quote of the brief\""), "ok");
        check(with("[cites.hidden]\n\"test_a\" = [\"one quote here\", \"and another one\"]"), "ok");
        check(
            with("[cites.other]\n\"test_*\" = \"a quote of the brief\""),
            "[cites.other] names step \"other\", which is not a step",
        );
        check(with("[cites.hidden]\n\"test_[\" = \"a quote of it\""), "is not a valid glob");
        check(with("[cites.hidden]\n\"test_*\" = []"), "quotes nothing");
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
            "ok",
        );
        // Only a step whose tests the grader reads can prove anything: one
        // with a `junit` file or a trusted test runner.
        check(
            |s| {
                format!(
                    "{}\n[proves.hidden]\n\"t\" = \"broken\"\n",
                    s.replace("junit = \".gatehouse/hidden.xml\"\n", "")
                        .replace("run = \"python3 -m pytest -q", "run = \"cd . && pytest -q; true")
                )
            },
            "has no `junit` and no trusted test runner",
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
            ("mode = \"auto\"", "mode = \"auto\"\nfile = \"../../etc/passwd\"", "criterion file"),
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
    fn a_shared_judge_needs_its_reason_and_a_lay_may_be_the_hosts() {
        let m = Manifest::parse("packet.toml", MINIMAL).unwrap();
        assert!(m.judge_apart());
        let shared = |s: &str| {
            s.replacen("version = ", "judge = \"shared\"\njudge_reason = \"it pickles the candidate's objects\"\nversion = ", 1)
        };
        let m = Manifest::parse("packet.toml", &shared(MINIMAL)).unwrap();
        assert!(!m.judge_apart());
        check(
            |s| s.replacen("version = ", "judge = \"shared\"\nversion = ", 1),
            "needs judge_reason",
        );
        check(
            |s| s.replacen("version = ", "judge_reason = \"why\"\nversion = ", 1),
            "means nothing without it",
        );
        check(
            |s| s.replacen("version = ", "judge = \"together\"\nversion = ", 1),
            "unknown variant `together`",
        );
        // What a lay from hidden/ or detectors/ lays is the judge's, unless
        // the lay says host = true; the starter's never is.
        let lays: Vec<Lay> = toml::from_str::<std::collections::BTreeMap<String, Vec<Lay>>>(
            "l = [\"t.py\", { from = \"hidden/in.json\", to = \"in.json\", host = true }, { from = \"detectors/d.py\", to = \".gatehouse/d.py\" }, { from = \"starter/tools.py\", to = \"tools.py\" }]",
        )
        .unwrap()
        .remove("l")
        .unwrap();
        assert_eq!(
            lays.iter().map(Lay::judge_only).collect::<Vec<_>>(),
            [true, false, true, false]
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
