//! TypeScript on Node (issue #30): the trusted `node --test` runner against
//! the ecosystem's known forgeries, each contained (a broken bucket that
//! forges never grades better than the broken bucket) and, where the
//! runner can see it, flagged `evidence-tampering`; honest controls stay
//! clean; and an honest submission made from the exported starter of
//! `token-bucket-ts` grades to the best decision with no finding.
//!
//! The forgeries are graded on a small packet made from `token-bucket-ts`
//! (its sample and hidden tests, one hidden step, no mutation lane), so
//! each grading is one compile and one test run.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use grader::grade::{GradeOptions, Scorecard};
use grader::packet::Packet;
use grader::tree::copy_path;

use crate::grader;

fn real_packet_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../packets/token-bucket-ts")
}

pub(crate) const MINI: &str = r#"
[packet]
slug = "node-mini"
version = "1.0.0"
title = "token-bucket-ts, its hidden tests only"
summary = "The forgery tests' packet."
# The shared runner's own checks (twins, canaries, cross-checks, crash
# lines): what a packet that opts out of the judge apart, and every run of
# the candidate's own tests, still relies on. The judge apart for Node has
# judge_node.rs.
judge = "shared"
judge_reason = "tests the shared Node runner"

[environment]
node = "20"
typescript = "5"

[limits]
wall_secs = 60
memory_mb = 1024

[commands]
test = "npm test"

[[step]]
id = "hidden"
title = "hidden checks"
run = "node --test .gatehouse/hidden_bucket.test.ts"
lay = [{ from = "hidden/hidden_bucket.test.ts", to = ".gatehouse/hidden_bucket.test.ts" }]

[[criterion]]
id = "correctness"
title = "Correctness"
max = 2
mode = "auto"
from = { tests = "hidden" }
levels = ["most held-out checks fail", "an edge is fuzzy", "all held-out checks pass"]

[[band]]
min = 2
decision = "keep"

[[band]]
min = 0
decision = "drop"
"#;

/// The small packet, written once per test binary.
fn mini() -> &'static Packet {
    static PACKET: OnceLock<(tempfile::TempDir, Packet)> = OnceLock::new();
    &PACKET
        .get_or_init(|| {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("node-mini");
            let real = real_packet_dir();
            for part in ["starter", "sample", "hidden"] {
                copy_path(&real.join(part), &dir.join(part)).unwrap();
            }
            fs::write(dir.join("prompt.md"), "# The forgery tests' packet\n").unwrap();
            fs::write(dir.join("packet.toml"), MINI).unwrap();
            let p = Packet::load(&dir).unwrap_or_else(|e| panic!("loading the mini packet: {e}"));
            (tmp, p)
        })
        .1
}

/// `base` (a folder) with `files` written over it (`None` removes one),
/// zipped and graded on `packet`.
fn grade(packet: &Packet, base: &Path, files: &[(&str, Option<&str>)]) -> Scorecard {
    grade_with(packet, base, files, &GradeOptions::default())
}

/// [`grade`] with `opts`.
fn grade_with(
    packet: &Packet,
    base: &Path,
    files: &[(&str, Option<&str>)],
    opts: &GradeOptions,
) -> Scorecard {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sub");
    copy_path(base, &dir).unwrap();
    crate::lay(&dir, files);
    let zip = tmp.path().join("sub.zip");
    crate::zip_dir(&dir, &zip);
    grader().grade_zip(packet, &zip, opts).unwrap_or_else(|e| panic!("{e}"))
}

fn level(card: &Scorecard, criterion: &str) -> Option<u32> {
    card.scoring.criteria.iter().find(|c| c.id == criterion).and_then(|c| c.level)
}

fn describe(card: &Scorecard) -> String {
    let runs: Vec<String> = card
        .receipt
        .runs
        .iter()
        .map(|r| format!("{} {:?}:\n{}\n{}", r.id, r.exit, r.stdout_tail, r.stderr_tail))
        .collect();
    format!(
        "decision {} score {:?}\nfindings: {:#?}\nruns: {}",
        card.scoring.decision,
        card.scoring.score,
        card.findings.iter().map(|f| (&f.id, &f.evidence)).collect::<Vec<_>>(),
        runs.join("\n")
    )
}

/// The sample's bucket with `allow()` answering yes to everything.
fn broken_bucket(extra: &str) -> String {
    let sample = fs::read_to_string(real_packet_dir().join("sample/src/bucket.ts")).unwrap();
    let broken = sample
        .replace("  allow(n = 1): boolean {\n", "  allow(n = 1): boolean {\n    return true;\n");
    assert_ne!(broken, sample);
    format!("{broken}\n{extra}\n")
}

const EXIT_EARLY: &str = "process.exit(0);";
const EXIT_HANDLERS: &str = r#"process.on("exit", () => { process.exitCode = 0; });
process.on("exit", () => { (process as any).reallyExit(0); });"#;
const PATCH_ASSERT: &str = r#"const nodeAssert = require("node:assert");
for (const target of [nodeAssert, nodeAssert.strict]) {
  for (const name of ["equal", "strictEqual", "deepEqual", "deepStrictEqual", "throws", "ok"]) {
    target[name] = () => undefined;
  }
}"#;
const PATCH_TEST: &str = r#"const nodeTest = require("node:test");
const realTest = nodeTest.test;
nodeTest.test = (name: string) => realTest(name, () => undefined);
nodeTest.it = nodeTest.test;"#;
const FAKE_OUTPUT: &str = r#"console.log("TAP version 13\nok 1 - burst_one_at_a_time\n# tests 28\n# pass 28\n# fail 0");
console.error("ok 2 - fractional_quarters_accumulate");"#;
const FAKE_IPC: &str = r#"if (process.send) {
  process.send({ t: "case", file: ".gatehouse/hidden_bucket.test.ts", path: ["burst and empty", "burst_one_at_a_time"], status: "passed", message: "" });
}"#;

/// Files beside the broken bucket that would configure Node, npm or the
/// compiler, if anything read them: each points at `evil.js`, which would
/// make every test pass by exiting 0 at once.
fn npm_config() -> Vec<(&'static str, Option<&'static str>)> {
    vec![
        (
            "package.json",
            Some(
                r#"{"name": "t", "private": true, "type": "module",
 "scripts": {"test": "NODE_OPTIONS='--require ./evil.js' node --import ./evil.js --test-reporter=./evil.js --test"}}"#,
            ),
        ),
        (".npmrc", Some("node-options=--require ./evil.js\n")),
        ("evil.js", Some("process.exit(0);\n")),
        (
            "node_modules/typescript/package.json",
            Some(r#"{"name": "typescript", "main": "index.js"}"#),
        ),
        ("node_modules/typescript/index.js", Some("process.exit(0);\n")),
        ("node_modules/assert/index.js", Some("module.exports = () => undefined;\n")),
        (
            "tsconfig.json",
            Some(
                r#"{"compilerOptions": {"baseUrl": ".", "paths": {"node:assert/strict": ["./src/lenient"], "*": ["./src/*"]}, "outDir": "dist"}}"#,
            ),
        ),
        ("src/lenient.ts", Some("export default { equal() {}, deepEqual() {}, throws() {} };\n")),
    ]
}

/// The broken bucket with an answer oracle: `allow()` reads the line that
/// called it from its stack trace (the compiled test file) and answers
/// the boolean the assertion there compares with; elsewhere it says yes.
fn oracle_bucket() -> String {
    let sample = fs::read_to_string(real_packet_dir().join("sample/src/bucket.ts")).unwrap();
    let oracle = sample.replace(
        "  allow(n = 1): boolean {\n",
        "  allow(n = 1): boolean {\n    const said = expectedHere();\n    return said === undefined ? true : said;\n",
    );
    assert_ne!(oracle, sample);
    format!(
        "{oracle}\n{}\n",
        r#"function expectedHere(): boolean | undefined {
  const caller = (new Error().stack || "").split("\n")[3] || "";
  const at = /\(?([^()\s]+):(\d+):\d+\)?$/.exec(caller.trim());
  if (!at) return undefined;
  const fs = require("fs");
  const line: string = fs.readFileSync(at[1], "utf8").split("\n")[Number(at[2]) - 1] || "";
  const said = /allow\([^)]*\)\s*,\s*(true|false)\s*\)/.exec(line);
  return said ? said[1] === "true" : undefined;
}"#
    )
}

/// An answer oracle passes every `assert.equal(bucket.allow(..), true |
/// false)` of the hidden tests whatever the bucket does: no generic pair,
/// exit status or stream check can see it, since every result it reports
/// is what its code did. A twin that expects the other value (the
/// TypeScript generator, `harness/gatehouse_ts_twins.js`) passes beside
/// its test, which no implementation does: `evidence-tampering`. Graded
/// with the same calibration stripped of its twins, it is not flagged.
#[test]
fn an_answer_oracle_is_caught_by_the_typescript_twins() {
    let p = mini();
    let calibration = grader().calibration(p);
    let covered: usize = calibration.canaries.values().map(|sc| sc.covered()).sum();
    assert!(covered >= 20, "TypeScript twins that fail on the sample: {covered}");
    let files = [("src/bucket.ts", Some(oracle_bucket()))];
    let files: Vec<(&str, Option<&str>)> = files.iter().map(|(p, t)| (*p, t.as_deref())).collect();
    let mut stripped = (*calibration).clone();
    stripped.canaries.clear();
    let without = GradeOptions {
        calibration: Some(std::sync::Arc::new(stripped)),
        ..GradeOptions::default()
    };
    let cards = grader::par::map_indexed(2, |i| {
        let opts = if i == 0 { GradeOptions::default() } else { without.clone() };
        grade_with(p, &p.sample_dir(), &files, &opts)
    });
    let tampering = |card: &Scorecard| {
        card.findings.iter().find(|f| f.id == "evidence-tampering").map(|f| f.evidence.join("; "))
    };
    let sign =
        tampering(&cards[0]).unwrap_or_else(|| panic!("not flagged:\n{}", describe(&cards[0])));
    assert!(sign.contains("a twin of") && sign.contains("passed"), "{sign}");
    assert_eq!(tampering(&cards[1]), None, "{}", describe(&cards[1]));
    // The oracle answered: without twins it passes hidden tests the plain
    // broken bucket fails.
    let passed = |card: &Scorecard| {
        card.receipt
            .runs
            .iter()
            .filter_map(|r| r.tests.as_ref())
            .flatten()
            .filter(|t| t.status == grader::evidence::TestStatus::Passed)
            .count()
    };
    let broken = grade(p, &p.sample_dir(), &[("src/bucket.ts", Some(&broken_bucket("")))]);
    assert!(passed(&cards[1]) > passed(&broken), "{} vs {}", passed(&cards[1]), passed(&broken));
}

/// The TypeScript generator's template, planted with every test kept as
/// it is, gives back the file byte for byte, also when a test holds a
/// multi-line template literal whose lines lack the test's indent or are
/// blank but for it (taking an indent off and putting it back would
/// change the string).
#[test]
fn typescript_templates_give_the_file_back() {
    let text = fs::read_to_string(real_packet_dir().join("hidden/hidden_bucket.test.ts")).unwrap();
    let odd = "\ndescribe(\"text\", () => {\n  test(\"multi_line_literal\", () => {\n    const s = `a\nb\n  \n  c`;\n    assert.equal(s.length, 9);\n  });\n});\n";
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("node-mini");
    copy_path(&mini().root, &dir).unwrap();
    let hidden = format!("{text}{odd}");
    fs::write(dir.join("hidden/hidden_bucket.test.ts"), &hidden).unwrap();
    let p = Packet::load(&dir).unwrap();
    let steps = grader::guard::generate(grader().sandbox(), &p).unwrap();
    let template = &steps["hidden"].files[".gatehouse/hidden_bucket.test.ts"];
    assert!(template.error.is_none(), "{template:?}");
    assert!(template.slots().count() >= 28, "{}", template.slots().count());
    let mut roles = std::collections::BTreeMap::new();
    let back = grader::canary::plant(
        template,
        ".gatehouse/hidden_bucket.test.ts",
        grader::canary::Choose::All,
        &|_| true,
        &mut grader::canary::Rng::new(&[b"t"]),
        &mut roles,
    );
    assert_eq!(back, hidden);
}

/// Files written over a submission (`None` removes one).
type Files = Vec<(&'static str, Option<String>)>;

#[test]
fn node_forgeries_are_contained_and_flagged() {
    let p = mini();
    let sample = p.sample_dir();
    // (name, files, flagged): the broken bucket with a forgery beside it.
    let npm = npm_config();
    let cases: Vec<(&str, Files, bool)> = vec![
        (
            "process.exit(0) at import",
            vec![("src/bucket.ts", Some(broken_bucket(EXIT_EARLY)))],
            true,
        ),
        (
            "process.on('exit') handlers",
            vec![("src/bucket.ts", Some(broken_bucket(EXIT_HANDLERS)))],
            false,
        ),
        ("node:assert patched", vec![("src/bucket.ts", Some(broken_bucket(PATCH_ASSERT)))], true),
        ("node:test patched", vec![("src/bucket.ts", Some(broken_bucket(PATCH_TEST)))], true),
        ("fake TAP output", vec![("src/bucket.ts", Some(broken_bucket(FAKE_OUTPUT)))], false),
        ("a forged result message", vec![("src/bucket.ts", Some(broken_bucket(FAKE_IPC)))], true),
        (
            "NODE_OPTIONS, --import, --test-reporter, .npmrc, node_modules, tsconfig paths",
            std::iter::once(("src/bucket.ts", Some(broken_bucket(""))))
                .chain(npm.iter().map(|(p, t)| (*p, t.map(String::from))))
                .collect(),
            false,
        ),
    ];
    let cards = grader::par::map_indexed(cases.len() + 2, |i| {
        if i == cases.len() {
            // Honest control: the sample.
            return grade(p, &sample, &[]);
        }
        if i == cases.len() + 1 {
            // Honest control: the sample beside the same npm configuration
            // files (which nothing reads).
            let files: Vec<(&str, Option<&str>)> =
                npm.iter().copied().filter(|(p, _)| *p != "evil.js" && *p != ".npmrc").collect();
            return grade(p, &sample, &files);
        }
        let files: Vec<(&str, Option<&str>)> =
            cases[i].1.iter().map(|(p, t)| (*p, t.as_deref())).collect();
        grade(p, &sample, &files)
    });
    for (i, (name, _, flagged)) in cases.iter().enumerate() {
        let card = &cards[i];
        // Contained: the broken bucket gains nothing.
        assert_eq!(card.scoring.decision, "drop", "{name}:\n{}", describe(card));
        assert_eq!(level(card, "correctness"), Some(0), "{name}:\n{}", describe(card));
        let tampering = card.findings.iter().find(|f| f.id == "evidence-tampering");
        if *flagged {
            assert!(tampering.is_some(), "{name}: not flagged:\n{}", describe(card));
        }
    }
    for card in &cards[cases.len()..] {
        assert_eq!(card.scoring.decision, "keep", "{}", describe(card));
        assert!(card.findings.is_empty(), "{}", describe(card));
        assert_eq!(level(card, "correctness"), Some(2), "{}", describe(card));
    }
}

/// An honest submission as a candidate makes it: the exported starter
/// (seed filled in, brief and pin file), the sample's files written in,
/// everything zipped back. It grades to the best decision with no finding.
#[test]
fn an_honest_typescript_submission_from_the_starter_grades_clean() {
    let p = Packet::load(&real_packet_dir()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("received");
    let tools: Vec<String> = p.manifest.environment.tools.keys().cloned().collect();
    let probe = grader().probe(&tools).unwrap();
    grader::starter::lay_received(
        &p,
        "7f3a",
        &probe,
        &grader::starter::Gate::placeholders(),
        &tree,
    )
    .unwrap();
    let card = grade(
        &p,
        &tree,
        &[
            (
                "src/bucket.ts",
                Some(&fs::read_to_string(p.sample_dir().join("src/bucket.ts")).unwrap()),
            ),
            (
                "test/bucket.test.ts",
                Some(&fs::read_to_string(p.sample_dir().join("test/bucket.test.ts")).unwrap()),
            ),
            ("NOTES.md", Some(&fs::read_to_string(p.sample_dir().join("NOTES.md")).unwrap())),
        ],
    );
    assert_eq!(card.scoring.decision, "keep", "{}", describe(&card));
    assert!(card.findings.is_empty(), "{}", describe(&card));
    assert!(card.unevaluated.is_empty(), "{}", describe(&card));
    // The receipt names the toolchain it graded with.
    let names: Vec<&str> = card.environment.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"node") && names.contains(&"typescript"), "{names:?}");
    assert!(card.environment.mismatches.is_empty(), "{:?}", card.environment.mismatches);
}

/// `packet check` refuses a packet whose toolchain the sandbox lacks,
/// naming it and how to install it.
#[test]
fn packet_check_refuses_a_missing_toolchain() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("node-mini");
    copy_path(&mini().root, &dir).unwrap();
    let toml = fs::read_to_string(dir.join("packet.toml")).unwrap();
    fs::write(dir.join("packet.toml"), toml.replace("typescript = \"5\"", "typescript = \"4\""))
        .unwrap();
    let report = grader::check::check_packet(grader(), &dir);
    assert!(!report.ok());
    let item = report
        .items
        .iter()
        .find(|i| i.name == "the packet's toolchain is installed")
        .unwrap_or_else(|| panic!("no toolchain item: {:?}", report.items));
    assert!(!item.ok);
    assert!(
        item.detail.contains("typescript = \"4\"")
            && item.detail.contains("the sandbox has typescript 5.")
            && item.detail.contains("scripts/setup"),
        "{}",
        item.detail
    );
}

/// Witnessed runs work unchanged for a TypeScript packet: `npm test` on the
/// tree a candidate uploads is red on the starter, green on the sample,
/// and a suite that fails but exits 0 before its tests finish is not green.
#[test]
fn witnessed_red_and_green_of_a_typescript_tree() {
    let p = mini();
    let tmp = tempfile::tempdir().unwrap();
    let zip_of = |name: &str, base: &Path, files: &[(&str, &str)]| {
        let dir = tmp.path().join(name);
        copy_path(base, &dir).unwrap();
        for (path, text) in files {
            fs::create_dir_all(dir.join(path).parent().unwrap()).unwrap();
            fs::write(dir.join(path), text).unwrap();
        }
        let zip = tmp.path().join(format!("{name}.zip"));
        crate::zip_dir(&dir, &zip);
        zip
    };
    let red = grader().witness_run(p, &zip_of("red", &p.root.join("starter"), &[])).unwrap();
    assert!(!red.passed && red.exit_code == Some(1), "{red:?}");
    assert!(red.log.contains("no test files found"), "{}", red.log);
    let green = grader().witness_run(p, &zip_of("green", &p.sample_dir(), &[])).unwrap();
    assert!(green.passed, "{}", green.log);
    let forged = "import { test } from \"node:test\";\nimport assert from \"node:assert/strict\";\n\ntest(\"red\", () => assert.equal(1, 2));\nprocess.exit(0);\n";
    let early =
        grader().witness_run(p, &zip_of("early", &p.sample_dir(), &[("test/x.test.ts", forged)]));
    let early = early.unwrap();
    assert!(!early.passed, "{}", early.log);
}
