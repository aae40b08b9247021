//! The judge apart for TypeScript on Node (issue #45, JUDGE.md): the hidden
//! tests of `token-bucket-ts` run in the judge's process (the runner's test
//! process, under the judge's uid) and the candidate's compiled bucket in a
//! host process under the candidate's uid; only data, handles and callbacks
//! cross.
//!
//! Honest work: the sample is judged apart, passes every hidden test and
//! grades at the best band, accused of nothing (the alternates and variants
//! are `packet check`'s: `packets.rs`).
//!
//! Forgeries: the kinds issue #45 names for Node, each spelled a few ways
//! (each spelling guarded, so one that throws does not stop the next) on a
//! broken bucket (`allow()` always says yes), must gain nothing over the
//! same broken bucket without them (contained). The control is the same
//! packet declaring `judge = "shared"` (the tests and the bucket in one
//! process, as before): there each kind either gains or is caught by the
//! runner's cross-checks, so the kind is live and only the judge apart
//! contains it.

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;

use grader::evidence::TestStatus;
use grader::grade::{GradeOptions, Scorecard};
use grader::packet::Packet;

use crate::grader;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../packets/token-bucket-ts")
}

fn apart() -> &'static Packet {
    static P: std::sync::OnceLock<Packet> = std::sync::OnceLock::new();
    P.get_or_init(|| Packet::load(&root()).expect("token-bucket-ts loads"))
}

/// The same packet declaring `judge = "shared"`: the control.
fn shared() -> &'static Packet {
    static P: std::sync::OnceLock<(tempfile::TempDir, Packet)> = std::sync::OnceLock::new();
    &P.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("token-bucket-ts");
        grader::tree::copy_path(&root(), &dir).unwrap();
        let text = fs::read_to_string(dir.join("packet.toml")).unwrap();
        let manifest = text.replacen(
            "seed_files = [\"TAKEHOME.md\"]",
            "seed_files = [\"TAKEHOME.md\"]\njudge = \"shared\"\njudge_reason = \"the control of the judge-apart tests\"",
            1,
        );
        assert_ne!(manifest, text, "the control declares judge = \"shared\"");
        fs::write(dir.join("packet.toml"), manifest).unwrap();
        let p = Packet::load(&dir).expect("the shared copy loads");
        (tmp, p)
    })
    .1
}

fn sample_bucket() -> String {
    fs::read_to_string(root().join("sample/src/bucket.ts")).unwrap()
}

/// The broken bucket: the sample's, with `allow()` saying yes to anything
/// (the real one kept as `__realAllow` for a forgery to put back).
const BROKEN: &str = r#"
declare const require: any;
declare const process: any;
const __realAllow = TokenBucket.prototype.allow;
TokenBucket.prototype.allow = function (_n?: number): boolean {
  return true;
};
"#;

/// The sample with `src/bucket.ts` replaced by `bucket`, zipped and graded.
fn grade(p: &Packet, bucket: &str) -> Scorecard {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sub");
    grader::tree::copy_path(&p.sample_dir(), &dir).unwrap();
    fs::write(dir.join("src/bucket.ts"), bucket).unwrap();
    let zip = tmp.path().join("sub.zip");
    let times = (p.manifest.sample.times.iter())
        .map(|(k, v)| (k.clone(), grader::manifest::TIME_BASE + v))
        .collect();
    grader::ingest::write_zip_from_dir(&dir, &zip, &times, grader::manifest::TIME_BASE).unwrap();
    grader().grade_zip(p, &zip, &GradeOptions::default()).unwrap_or_else(|e| panic!("grading: {e}"))
}

/// The broken bucket graded once for each of `apart()` and `shared()`:
/// every forgery is compared with it, and grading is deterministic.
fn broken_card(p: &'static Packet) -> &'static Scorecard {
    static APART: std::sync::OnceLock<Scorecard> = std::sync::OnceLock::new();
    static SHARED: std::sync::OnceLock<Scorecard> = std::sync::OnceLock::new();
    let cell = if std::ptr::eq(p, apart()) {
        &APART
    } else {
        assert!(std::ptr::eq(p, shared()), "broken_card: apart() or shared() only");
        &SHARED
    };
    cell.get_or_init(|| grade(p, &format!("{}{BROKEN}", sample_bucket())))
}

fn hidden_tests(card: &Scorecard) -> Vec<(String, TestStatus, String)> {
    let run =
        card.receipt.runs.iter().find(|r| r.id == "step:hidden").expect("the hidden step ran");
    (run.tests.iter().flatten())
        .map(|t| (t.name.clone(), t.status, t.message.clone().unwrap_or_default()))
        .collect()
}

fn failing(card: &Scorecard) -> Vec<String> {
    (hidden_tests(card).into_iter())
        .filter(|(_, s, _)| matches!(s, TestStatus::Failed | TestStatus::Error))
        .map(|(n, _, m)| format!("{n}: {}", m.chars().take(120).collect::<String>()))
        .collect()
}

/// Passing tests of the replayed steps: a forgery must pass none the broken
/// bucket alone fails.
fn passing(card: &Scorecard) -> BTreeSet<(String, String)> {
    (card.receipt.runs.iter())
        .filter(|r| r.id.starts_with("step:"))
        .flat_map(|r| r.tests.iter().flatten().map(move |t| (r, t)))
        .filter(|(_, t)| t.status == TestStatus::Passed)
        .map(|(r, t)| (r.id.clone(), format!("{}::{}", t.classname, t.name)))
        .collect()
}

fn describe(card: &Scorecard) -> String {
    let run = card.receipt.runs.iter().find(|r| r.id == "step:hidden");
    format!(
        "decision {} score {:?} judged {:?}\nfindings {:?}\nfailing {:#?}\nstdout: {}\nstderr: {}",
        card.scoring.decision,
        card.scoring.score,
        card.receipt.judged,
        card.findings.iter().map(|f| (&f.id, &f.evidence)).collect::<Vec<_>>(),
        failing(card),
        run.map(|r| r.stdout_tail.as_str()).unwrap_or_default(),
        run.map(|r| r.stderr_tail.as_str()).unwrap_or_default(),
    )
}

fn accused(card: &Scorecard) -> bool {
    card.findings.iter().any(|f| f.id == "evidence-tampering")
}

/// Where `decision` ranks among the packet's bands (0 the best).
fn rank(p: &Packet, decision: &str) -> usize {
    let mut bands: Vec<_> = p.manifest.bands.iter().collect();
    bands.sort_by_key(|b| std::cmp::Reverse(b.min));
    bands.iter().position(|b| b.decision == decision).unwrap_or(bands.len())
}

/// Whether `card` gained anything over `base`: a better score or band, or
/// a test passing that the broken bucket fails.
fn gained(p: &Packet, base: &Scorecard, card: &Scorecard) -> Vec<String> {
    let mut out: Vec<String> = passing(card)
        .difference(&passing(base))
        .map(|(run, test)| format!("{run} {test} passes"))
        .collect();
    if card.scoring.score > base.scoring.score {
        out.push(format!("score {:?} over {:?}", card.scoring.score, base.scoring.score));
    }
    if rank(p, &card.scoring.decision) < rank(p, &base.scoring.decision) {
        out.push(format!("decision {} over {}", card.scoring.decision, base.scoring.decision));
    }
    out
}

#[test]
fn judge_node_the_sample_is_judged_apart_and_kept() {
    let card = grade(apart(), &sample_bucket());
    let tests = hidden_tests(&card);
    assert_eq!(tests.len(), 29, "{}", describe(&card));
    assert!(failing(&card).is_empty(), "{}", describe(&card));
    assert_eq!(
        card.receipt.judged.get("step:hidden").map(String::as_str),
        Some("apart"),
        "{}",
        describe(&card)
    );
    assert_eq!(rank(apart(), &card.scoring.decision), 0, "{}", describe(&card));
    assert!(!accused(&card), "{}", describe(&card));
    assert!(card.findings.is_empty(), "{}", describe(&card));
}

/// The production path: a bucket that limits only when node:test is loaded
/// passes every other hidden test when it shares the tests' process, and
/// the program the production test starts (no test framework) catches it.
#[test]
fn judge_node_the_production_path_catches_a_bucket_right_only_under_test() {
    let bucket = format!(
        "{}{BROKEN}{}",
        sample_bucket(),
        r#"
if (Object.keys(require.cache).some((k: string) => k.includes("node:test") || k.includes("/test/")) ||
    process.execArgv.some((a: string) => a.includes("test")) || "NODE_TEST_CONTEXT" in process.env ||
    require("module").builtinModules && process.moduleLoadList?.some((m: string) => m.includes("test_runner"))) {
  TokenBucket.prototype.allow = __realAllow;
}
"#
    );
    let control = grade(shared(), &bucket);
    let control_failing = failing(&control);
    assert!(
        control_failing.len() == 1
            && control_failing[0].starts_with("production_plain_program_answers_the_same"),
        "shared, only the production test catches it:\n{}",
        describe(&control)
    );
    let card = grade(apart(), &bucket);
    let gain = gained(apart(), broken_card(apart()), &card);
    assert!(gain.is_empty(), "{gain:?}\n{}", describe(&card));
    assert!(!accused(&card), "{}", describe(&card));
}

/// Each spelling in a `try` of its own, so all of them run.
fn guarded(spellings: &[&str]) -> String {
    let mut out = String::new();
    for s in spellings {
        out.push_str(&format!("\ntry {{\n{s}\n}} catch (_e) {{}}\n"));
    }
    out
}

// ------------------------------------------------------------ the kinds

/// Results written on descriptor 3 (the runner's channel when the tests and
/// the bucket share a process), then an early exit 0.
const FD3_RESULTS: [&str; 3] = [
    r#"const fs = require("fs");
const names = ["burst_one_at_a_time", "oversize_on_full_bucket", "refill_whole_one_second", "fractional_quarters_accumulate", "bad_rate", "wallclock_never_read"];
for (const name of names) {
  fs.writeSync(3, JSON.stringify({ t: "case", file: ".gatehouse/hidden_bucket.test.ts", path: [name], status: "passed", message: "" }) + "\n");
}
fs.writeSync(3, JSON.stringify({ t: "end", exit: 0 }) + "\n");
process.exit(0);"#,
    r#"if (typeof process.send === "function") {
  for (const name of ["burst_one_at_a_time", "oversize_on_full_bucket", "bad_n"]) {
    process.send({ t: "case", file: ".gatehouse/hidden_bucket.test.ts", path: [name], status: "passed", message: "" });
  }
  process.send({ t: "end", exit: 0 }, () => process.reallyExit(0));
}"#,
    r#"const fs = require("fs");
const head = Buffer.alloc(8);
const body = Buffer.from(JSON.stringify({ r: 1, v: true }));
head.writeUInt32BE(body.length, 0);
fs.writeSync(3, Buffer.concat([head, body]));
process.reallyExit(0);"#,
];

/// process.exit at import.
const EXIT_AT_IMPORT: [&str; 2] =
    ["process.exitCode = 0;\nprocess.exit(0);", "process.reallyExit(0);"];

/// process.exit after the tests started.
const EXIT_AFTER_START: [&str; 3] = [
    r#"const realAllow = TokenBucket.prototype.allow;
let calls = 0;
TokenBucket.prototype.allow = function (this: any, n?: number): boolean {
  if (++calls > 3) process.exit(0);
  return realAllow.call(this, n);
};"#,
    "setTimeout(() => process.exit(0), 200);",
    "process.on(\"beforeExit\", () => process.exit(0));\nprocess.on(\"exit\", () => { process.exitCode = 0; });",
];

/// node:assert's functions replaced.
const ASSERT_REPLACED: [&str; 3] = [
    r#"for (const id of ["assert", "node:assert", "assert/strict", "node:assert/strict"]) {
  const a = require(id);
  for (const k of Object.keys(a)) {
    if (typeof a[k] === "function" && k !== "AssertionError") a[k] = () => {};
  }
}"#,
    r#"const a = require("node:assert");
a.AssertionError.prototype.toString = () => "";
Object.defineProperty(a.AssertionError.prototype, "name", { get() { throw 0; } });"#,
    r#"const strict = require("node:assert/strict");
strict.equal = strict.deepEqual = strict.throws = strict.strictEqual = strict.deepStrictEqual = () => {};"#,
];

/// node:test neutered.
const TEST_NEUTERED: [&str; 3] = [
    r#"const t = require("node:test");
const nop = () => Promise.resolve();
t.test = t.it = t.describe = t.default = nop;
t.test.skip = t.it.todo = nop;"#,
    r#"const t = require("node:test");
const real = t.test;
for (const k of ["test", "it"]) {
  t[k] = (name: any, opts: any, fn: any) => real(name, () => {});
}"#,
    r#"const m = require("module");
const load = m._load;
m._load = function (request: string, ...rest: any[]) {
  if (request.includes("test")) return { test: () => {}, it: () => {}, describe: () => {}, mock: {} };
  return load.call(this, request, ...rest);
};"#,
];

/// A fake TAP report on the standard streams. The runner never reads the
/// test process's output for results (they come on its own channel), so
/// this gains nothing shared either: no control.
const FAKE_TAP: [&str; 2] = [
    r#"const names = ["burst_one_at_a_time", "oversize_on_full_bucket", "refill_whole_one_second", "bad_rate"];
let tap = "TAP version 13\n";
names.forEach((n, i) => { tap += `ok ${i + 1} - ${n}\n  ---\n  duration_ms: 1\n  ...\n`; });
tap += `1..${names.length}\n# tests 29\n# pass 29\n# fail 0\n`;
process.stdout.write(tap);"#,
    r##"process.on("exit", () => {
  process.stdout.write("# tests 29\n# suites 0\n# pass 29\n# fail 0\n# cancelled 0\n");
  process.stderr.write("ok 29 - production_plain_program_answers_the_same\n");
});"##,
];

/// An answer oracle: the hidden tests read, and the real bucket put back
/// only when they could be.
const ORACLE: [&str; 3] = [
    r#"const fs = require("fs");
const text = fs.readFileSync(".gatehouse/hidden_bucket.test.ts", "utf8");
if (text.includes("burst_one_at_a_time")) TokenBucket.prototype.allow = __realAllow;"#,
    r#"const fs = require("fs");
const path = require("path");
for (const pid of fs.readdirSync("/proc")) {
  if (!/^[0-9]+$/.test(pid)) continue;
  try {
    const cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
    const text = fs.readFileSync(path.join(cwd, ".gatehouse/hidden_bucket.test.ts"), "utf8");
    if (text.includes("burst_one_at_a_time")) TokenBucket.prototype.allow = __realAllow;
  } catch (_e) {}
  try {
    for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
      const text = fs.readFileSync(`/proc/${pid}/fd/${fd}`, "utf8");
      if (text.includes("burst_one_at_a_time")) TokenBucket.prototype.allow = __realAllow;
    }
  } catch (_e) {}
}"#,
    r#"const fs = require("fs");
const found: string[] = [];
const walk = (dir: string, depth: number) => {
  if (depth > 4) return;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = `${dir}/${e.name}`;
    if (e.isDirectory()) { try { walk(p, depth + 1); } catch (_e) {} }
    else if (e.name.includes("hidden")) found.push(p);
  }
};
for (const d of ["/tmp", process.cwd()]) { try { walk(d, 0); } catch (_e) {} }
for (const p of found) {
  try {
    if (fs.readFileSync(p, "utf8").includes("allow(")) TokenBucket.prototype.allow = __realAllow;
  } catch (_e) {}
}"#,
];

/// Right only when node:test is loaded (or anything says "under test").
const RIGHT_UNDER_TEST: [&str; 2] = [
    r#"const under = Object.keys(require.cache).some((k: string) => k.includes("test")) ||
  process.execArgv.some((a: string) => a.includes("test")) || "NODE_TEST_CONTEXT" in process.env ||
  (process.moduleLoadList || []).some((m: string) => m.includes("test_runner"));
if (under) TokenBucket.prototype.allow = __realAllow;"#,
    r#"const stack = new Error().stack || "";
if (/node:test|test_runner|\.test\.js/.test(stack)) TokenBucket.prototype.allow = __realAllow;
TokenBucket.prototype.allow = new Proxy(TokenBucket.prototype.allow, {
  apply(target, self, args) {
    const s = new Error().stack || "";
    if (/node:internal\/test_runner|\.test\.js/.test(s)) return __realAllow.apply(self, args);
    return Reflect.apply(target, self, args);
  },
});"#,
];

/// The forgery `spellings` on the broken bucket: contained apart (nothing
/// gained over the broken bucket, nobody accused, judged apart), and, when
/// `live` says so, live in the control (shared: it gains, or the runner's
/// cross-checks catch it).
fn check_kind(what: &str, spellings: &[&str], live: bool) {
    let broken = format!("{}{BROKEN}", sample_bucket());
    let forged = format!("{broken}{}", guarded(spellings));
    let base = broken_card(apart());
    let card = grade(apart(), &forged);
    let gain = gained(apart(), base, &card);
    assert!(
        gain.is_empty(),
        "{what}: gained apart: {gain:?}\n{}\nbroken alone:\n{}",
        describe(&card),
        describe(base)
    );
    assert!(
        card.receipt.judged.get("step:hidden").map(String::as_str) == Some("apart"),
        "{what}: {}",
        describe(&card)
    );
    if !live {
        return;
    }
    let control = grade(shared(), &forged);
    let live = !gained(shared(), broken_card(shared()), &control).is_empty() || accused(&control);
    assert!(live, "{what}: the control shows no effect of the forgery:\n{}", describe(&control));
}

#[test]
fn judge_node_fd3_results_and_an_early_exit_gain_nothing() {
    check_kind("fd-3 results and an early exit", &FD3_RESULTS, true);
}

#[test]
fn judge_node_exit_at_import_gains_nothing() {
    check_kind("process.exit at import", &EXIT_AT_IMPORT, true);
}

#[test]
fn judge_node_exit_after_start_gains_nothing() {
    check_kind("process.exit after start", &EXIT_AFTER_START, true);
}

#[test]
fn judge_node_replaced_assert_gains_nothing() {
    check_kind("node:assert replaced", &ASSERT_REPLACED, true);
}

#[test]
fn judge_node_neutered_node_test_gains_nothing() {
    check_kind("node:test neutered", &TEST_NEUTERED, true);
}

#[test]
fn judge_node_fake_tap_gains_nothing() {
    check_kind("fake TAP", &FAKE_TAP, false);
}

#[test]
fn judge_node_an_oracle_of_the_hidden_tests_gains_nothing() {
    check_kind("an oracle reading the hidden tests", &ORACLE, true);
}

#[test]
fn judge_node_right_only_under_test_gains_nothing() {
    check_kind("right only when node:test is loaded", &RIGHT_UNDER_TEST, true);
}

// ------------------------------------------------------------ what crosses

// `judge-demo-ts` (grader/tests/fixtures) has one hidden test per rule of
// what crosses. The sample passes them all apart; each adversarial
// `src/shapes.ts` below either breaks its rule's test only when tests and
// candidate share a process (the `judge = "shared"` control), or fails its
// test alone apart (a limit, a host that exits or hangs), accusing no one.

fn demo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/judge-demo-ts")
}

fn demo() -> &'static Packet {
    static P: std::sync::OnceLock<Packet> = std::sync::OnceLock::new();
    P.get_or_init(|| Packet::load(&demo_root()).expect("judge-demo-ts loads"))
}

fn demo_shared() -> &'static Packet {
    static P: std::sync::OnceLock<(tempfile::TempDir, Packet)> = std::sync::OnceLock::new();
    &P.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("judge-demo-ts");
        grader::tree::copy_path(&demo_root(), &dir).unwrap();
        let text = fs::read_to_string(dir.join("packet.toml")).unwrap();
        let manifest = text.replacen(
            "title = \"Judge demo (TypeScript)\"",
            "title = \"Judge demo (TypeScript)\"\njudge = \"shared\"\njudge_reason = \"the control of the judge-apart tests\"",
            1,
        );
        assert_ne!(manifest, text);
        fs::write(dir.join("packet.toml"), manifest).unwrap();
        (tmp, Packet::load(&dir).expect("the shared copy loads"))
    })
    .1
}

/// The sample's `src/shapes.ts` with each `(from, to)` replaced, graded.
fn grade_demo(p: &Packet, edits: &[(&str, &str)]) -> Scorecard {
    let mut text = fs::read_to_string(demo_root().join("sample/src/shapes.ts")).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "the sample has {from:?}");
        text = text.replacen(from, to, 1);
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sub");
    fs::create_dir_all(dir.join("src")).unwrap();
    fs::write(dir.join("src/shapes.ts"), text).unwrap();
    let zip = tmp.path().join("sub.zip");
    grader::ingest::write_zip_from_dir(
        &dir,
        &zip,
        &std::collections::BTreeMap::new(),
        grader::manifest::TIME_BASE,
    )
    .unwrap();
    grader().grade_zip(p, &zip, &GradeOptions::default()).unwrap_or_else(|e| panic!("grading: {e}"))
}

fn failing_names(card: &Scorecard) -> Vec<String> {
    (hidden_tests(card).into_iter())
        .filter(|(_, s, _)| matches!(s, TestStatus::Failed | TestStatus::Error))
        .map(|(n, _, _)| n)
        .collect()
}

#[test]
fn judge_node_demo_sample_passes_every_rule_apart() {
    let card = grade_demo(demo(), &[]);
    assert!(failing(&card).is_empty(), "{}", describe(&card));
    assert_eq!(hidden_tests(&card).len(), 12, "{}", describe(&card));
    assert_eq!(card.receipt.judged.get("step:hidden").map(String::as_str), Some("apart"));
    assert!(!accused(&card), "{}", describe(&card));
    // The control: shared, the candidate's code runs under the judge's uid
    // and in its process: it reads the judge's environment, signals it and
    // reads the hidden files.
    let control = grade_demo(demo_shared(), &[]);
    assert_eq!(
        failing_names(&control),
        ["the_candidates_uid_reaches_nothing_of_the_judges"],
        "{}",
        describe(&control)
    );
}

/// A forgery that makes `test` pass when it shares the tests' process must
/// make it fail apart, accusing no one.
fn check_rule(what: &str, edits: &[(&str, &str)], test: &str) {
    let apart = grade_demo(demo(), edits);
    assert!(
        failing_names(&apart).iter().any(|t| t == test),
        "{what}: apart, {test} should fail:\n{}",
        describe(&apart)
    );
    assert!(!accused(&apart), "{what}: {}", describe(&apart));
    let shared = grade_demo(demo_shared(), edits);
    assert!(
        (hidden_tests(&shared).iter()).any(|(n, s, _)| n == test && *s == TestStatus::Passed),
        "{what}: the control (shared) should let the forgery pass {test}:\n{}",
        describe(&shared)
    );
}

/// Apart, `edits` fail `test` and no other, and accuse no one: the host is
/// the candidate's to break, never the judge's record. With `control` (the
/// edits end the candidate's process), the run's crash line names that,
/// and the same edits shared fail more than `test` (the process they end
/// is the tests' own) or draw an accusation.
fn check_alone(what: &str, edits: &[(&str, &str)], test: &str, control: bool) {
    let card = grade_demo(demo(), edits);
    assert_eq!(failing_names(&card), [test], "{what}:\n{}", describe(&card));
    assert!(!accused(&card), "{what}: {}", describe(&card));
    assert_eq!(card.receipt.judged.get("step:hidden").map(String::as_str), Some("apart"));
    if control {
        // The candidate's process ended: the receipt's crash line names it.
        let run = card.receipt.runs.iter().find(|r| r.id == "step:hidden").unwrap();
        let line = run.crash.as_deref().unwrap_or_default();
        assert!(
            line.contains("the candidate's"),
            "{what}: crash line {line:?}:\n{}",
            describe(&card)
        );
        let shared = grade_demo(demo_shared(), edits);
        assert!(
            failing_names(&shared).len() > 2 || accused(&shared),
            "{what}: the control (shared) should lose more than {test}:\n{}",
            describe(&shared)
        );
    }
}

#[test]
fn judge_node_a_number_subclass_arrives_as_a_number() {
    check_rule(
        "a Number whose valueOf says 3",
        &[(
            "  return 3;\n",
            "  class N extends Number {\n    valueOf(): number {\n      return 3;\n    }\n  }\n  return new N(0) as unknown as number;\n",
        )],
        "data_a_number_is_decided_by_the_judge",
    );
}

#[test]
fn judge_node_an_oversized_answer_fails_its_test_alone() {
    check_alone(
        "a 40 MiB string",
        &[("return \"x\".repeat(10);", "return \"x\".repeat(40 << 20);")],
        "limits_an_oversized_answer_fails_alone",
        false,
    );
}

#[test]
fn judge_node_a_too_deep_answer_fails_its_test_alone() {
    check_alone(
        "an array nested 100000 deep",
        &[(
            "return [[[\"bottom\"]]];",
            "let x: unknown = [\"bottom\"];\n  for (let i = 0; i < 100000; i++) x = [x];\n  return x;",
        )],
        "limits_a_too_deep_answer_fails_alone",
        false,
    );
}

#[test]
fn judge_node_a_host_that_exits_mid_call_fails_that_test_alone() {
    check_alone(
        "process.exit mid-call",
        &[("  return 1;\n", "  process.exit(0);\n")],
        "host_that_exits_fails_alone",
        true,
    );
    // One that announces an endless message on its descriptor instead.
    check_alone(
        "an endless message announced",
        &[(
            "  return 1;\n",
            "  const head = Buffer.alloc(4);\n  head.writeUInt32BE(0xfffffff0, 0);\n  fs.writeSync(3, head);\n  for (;;) fs.writeSync(3, Buffer.alloc(65536, 120));\n",
        )],
        "host_that_exits_fails_alone",
        true,
    );
    // Crashes: a crash of the candidate's process fails the call it was
    // serving, never the judge's record.
    for (what, body) in [
        ("an abort", "  process.abort();\n"),
        ("a SIGKILL of its own", "  process.kill(process.pid, \"SIGKILL\");\n  return 1;\n"),
    ] {
        check_alone(what, &[("  return 1;\n", body)], "host_that_exits_fails_alone", true);
    }
}

#[test]
fn judge_node_a_host_that_hangs_mid_call_fails_that_test_alone() {
    check_alone(
        "an endless loop",
        &[("  return 2;\n", "  for (;;) {}\n")],
        "host_that_hangs_fails_alone",
        true,
    );
}
