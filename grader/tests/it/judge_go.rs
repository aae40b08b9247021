//! The judge apart for Go (issue #45, JUDGE.md): the hidden tests run in a
//! test binary built from them and a STUB of the candidate's package
//! (generated from its `go/types` information), under the judge's uid; the
//! candidate's package runs in a SERVER built by the candidate's uid and
//! started under it (`harness/gatehouse_go_runner.py`, class `Apart`).
//! Only data, twins, handles and callbacks cross.
//!
//! Part one, the crossing rules, on a fixture packet (`go-judge-demo`, one
//! hidden test per rule): the sample passes every one, and each boundary
//! rule is shown by a sample file replaced with a hostile one, failing
//! only the test it touches.
//!
//! Part two, the forgeries issue #45 names for Go, on `retry-ticket-go`,
//! each added to the client that never retries (the starter's): each must
//! gain nothing over that client alone (no hidden test passes that it
//! fails, no better score or band), and accuse nobody.

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;
use std::sync::OnceLock;

use grader::evidence::TestStatus;
use grader::grade::{GradeOptions, Scorecard};
use grader::packet::Packet;

use crate::grader;

fn demo() -> &'static Packet {
    static P: OnceLock<Packet> = OnceLock::new();
    P.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/go-judge-demo");
        Packet::load(&dir).expect("go-judge-demo loads")
    })
}

fn retry() -> &'static Packet {
    static P: OnceLock<Packet> = OnceLock::new();
    P.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../packets/retry-ticket-go");
        Packet::load(&dir).expect("retry-ticket-go loads")
    })
}

/// The sample with `files` laid over it (a `None` removes one), zipped as a
/// desktop would and graded.
fn grade(p: &Packet, files: &[(&str, Option<&str>)]) -> Scorecard {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sub");
    grader::tree::copy_path(&p.starter_dir(), &dir).unwrap();
    grader::tree::copy_path(&p.sample_dir(), &dir).unwrap();
    crate::lay(&dir, files);
    let zip = tmp.path().join("sub.zip");
    crate::zip_dir(&dir, &zip);
    grader().grade_zip(p, &zip, &GradeOptions::default()).unwrap_or_else(|e| panic!("grading: {e}"))
}

/// (step, test, status, message) of every hidden step's tests.
fn tests(card: &Scorecard) -> Vec<(String, String, TestStatus, String)> {
    (card.receipt.runs.iter())
        .filter(|r| r.id.starts_with("step:"))
        .flat_map(|r| r.tests.iter().flatten().map(move |t| (r, t)))
        .map(|(r, t)| {
            (r.id.clone(), t.name.clone(), t.status, t.message.clone().unwrap_or_default())
        })
        .collect()
}

fn failing(card: &Scorecard, step: &str) -> BTreeSet<String> {
    (tests(card).into_iter())
        .filter(|(s, _, st, _)| {
            s == step && !matches!(st, TestStatus::Passed | TestStatus::Skipped)
        })
        .map(|(_, n, _, _)| n)
        .collect()
}

fn message<'a>(card: &'a Scorecard, step: &str, name: &str) -> &'a str {
    let run = card.receipt.runs.iter().find(|r| r.id == step).expect("the step ran");
    let t = run.tests.iter().flatten().find(|t| t.name == name).expect("the test ran");
    t.message.as_deref().unwrap_or_default()
}

fn describe(card: &Scorecard) -> String {
    let runs: Vec<String> = (card.receipt.runs.iter())
        .filter(|r| r.id.starts_with("step:"))
        .map(|r| {
            let tail: String = r
                .stdout_tail
                .chars()
                .rev()
                .take(1500)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            format!("{} {:?} crash {:?}\n{tail}\n{}", r.id, r.exit, r.crash, r.stderr_tail)
        })
        .collect();
    format!(
        "decision {} score {:?} judged {:?}\nfindings {:?}\nnot passing {:#?}\n{}",
        card.scoring.decision,
        card.scoring.score,
        card.receipt.judged,
        card.findings.iter().map(|f| (&f.id, &f.evidence)).collect::<Vec<_>>(),
        (tests(card).into_iter())
            .filter(|t| t.2 != TestStatus::Passed)
            .map(|(s, n, st, m)| format!(
                "{s} {n} {st:?}: {}",
                m.chars().take(200).collect::<String>()
            ))
            .collect::<Vec<_>>(),
        runs.join("\n")
    )
}

fn accused(card: &Scorecard) -> bool {
    card.findings.iter().any(|f| f.id == "evidence-tampering")
}

fn demo_file(name: &str) -> String {
    fs::read_to_string(demo().sample_dir().join(name)).unwrap()
}

/// Every hidden test of the demo but `except` passes.
fn only_these_fail(card: &Scorecard, except: &[&str]) {
    let got = failing(card, "step:hidden");
    let want: BTreeSet<String> = except.iter().map(|s| s.to_string()).collect();
    assert_eq!(got, want, "{}", describe(card));
    assert_eq!(
        tests(card).iter().filter(|t| t.0 == "step:hidden").count(),
        16,
        "{}",
        describe(card)
    );
    assert!(!accused(card), "{}", describe(card));
}

// ------------------------------------------------------- crossing rules

#[test]
fn judge_go_the_sample_crosses_every_rule_and_a_channel_is_refused() {
    let card = grade(demo(), &[]);
    only_these_fail(&card, &[]);
    for step in ["step:hidden", "step:refused"] {
        assert_eq!(card.receipt.judged.get(step).map(String::as_str), Some("apart"), "{step}");
    }
    // What the host printed reached the test's output, marked as the host's.
    let run = card.receipt.runs.iter().find(|r| r.id == "step:hidden").unwrap();
    assert!(run.stdout_tail.contains("[host] hello, world"), "{}", describe(&card));
    // A function whose type cannot cross is refused when the stub is
    // generated, naming it and why: the step fails, nothing is accused.
    let refused = card.receipt.runs.iter().find(|r| r.id == "step:refused").unwrap();
    let said = format!("{}{}{:?}", refused.stdout_tail, refused.stderr_tail, refused.crash);
    assert!(said.contains("Stream") && said.contains("a channel does not cross"), "{said}");
    assert_eq!(card.scoring.decision, "advance", "{}", describe(&card));
}

/// What the judge built for a step (its test binary) and for a submission
/// (its server) is kept for the next run: graded again, the same
/// submission builds nothing (the runner exports only what it built).
#[test]
fn judge_go_a_second_grading_builds_nothing_again() {
    let grader = grader::grade::Grader::for_host().expect("the host sandbox works");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sub");
    grader::tree::copy_path(&demo().starter_dir(), &dir).unwrap();
    grader::tree::copy_path(&demo().sample_dir(), &dir).unwrap();
    let zip = tmp.path().join("sub.zip");
    crate::zip_dir(&dir, &zip);
    let cache = grader.go_cache().expect("the grader keeps the Go judge's builds");
    let first = grader.grade_zip(demo(), &zip, &GradeOptions::default()).unwrap();
    only_these_fail(&first, &[]);
    let built = ["gen", "test", "server"].map(|k| cache.taken(k));
    assert!(built[1] >= 1 && built[2] >= 1, "nothing was kept: {built:?}");
    let again = grader.grade_zip(demo(), &zip, &GradeOptions::default()).unwrap();
    only_these_fail(&again, &[]);
    assert_eq!(["gen", "test", "server"].map(|k| cache.taken(k)), built, "built again");
}

/// A host that exits in the middle of a call, or never answers one, fails
/// the test that made the call; the next call starts a new host.
#[test]
fn judge_go_a_host_that_exits_or_hangs_fails_that_test_alone() {
    let must = "package shapes\n\nimport \"os\"\n\nfunc MustPositive(n int) int {\n\tif n < 0 {\n\t\tos.Exit(3)\n\t}\n\treturn n\n}\n";
    let wait = "package shapes\n\nimport \"context\"\n\nfunc Wait(ctx context.Context) error {\n\tselect {}\n}\n";
    let card = grade(demo(), &[("must.go", Some(must)), ("wait.go", Some(wait))]);
    only_these_fail(&card, &["TestContext", "TestPanics"]);
    let hang = message(&card, "step:hidden", "TestContext");
    assert!(hang.contains("Wait"), "the hang names the call: {hang}");
}

/// An answer over the wire's bounds (16 MiB a message, 64 deep) fails
/// the test that asked for it.
#[test]
fn judge_go_an_oversized_or_too_deep_answer_fails_that_test_alone() {
    let misc = demo_file("misc.go")
        .replace(
            "func Blob(n int) any { return strings.Repeat(\"x\", n) }",
            "func Blob(n int) any { return strings.Repeat(\"x\", 17<<20) }",
        )
        .replace("for i := 0; i < n; i++ {", "for i := 0; i < n+100; i++ {");
    assert!(misc.contains("17<<20") && misc.contains("n+100"));
    let card = grade(demo(), &[("misc.go", Some(&misc))]);
    only_these_fail(&card, &["TestBlob", "TestDeep"]);
}

/// The candidate's uid reads no hidden file: not through the workspace,
/// `/proc` of the judge's processes, nor by compiling one into the host
/// (`//go:embed`: the host is built by the candidate's uid).
#[test]
fn judge_go_the_candidates_code_cannot_read_a_hidden_file() {
    let reader = r#"package shapes

import (
	"os"
	"path/filepath"
	"regexp"
)

// Answer finds the answer wherever it can read it.
func Answer() string {
	paths := []string{".gatehouse/secret.json", "/workspace/.gatehouse/secret.json"}
	more, _ := filepath.Glob("/proc/*/cwd/.gatehouse/secret.json")
	paths = append(paths, more...)
	more, _ = filepath.Glob("/proc/*/root/workspace/.gatehouse/secret.json")
	paths = append(paths, more...)
	fds, _ := filepath.Glob("/proc/*/fd/*")
	paths = append(paths, fds...)
	for _, p := range paths {
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if m := regexp.MustCompile(`"answer": "(\d+)"`).FindSubmatch(data); m != nil {
			return string(m[1])
		}
	}
	return "not found"
}
"#;
    let card = grade(demo(), &[("answer.go", Some(reader))]);
    only_these_fail(&card, &["TestSecret"]);
    assert!(
        message(&card, "step:hidden", "TestSecret").contains("not found"),
        "{}",
        describe(&card)
    );

    let embed = "package shapes\n\nimport _ \"embed\"\n\n//go:embed .gatehouse/secret.json\nvar secret string\n\nfunc Answer() string { return secret[12:18] }\n";
    let card = grade(demo(), &[("answer.go", Some(embed))]);
    assert!(failing(&card, "step:hidden").contains("TestSecret"), "{}", describe(&card));
    assert!(!accused(&card), "{}", describe(&card));
    let run = card.receipt.runs.iter().find(|r| r.id == "step:hidden").unwrap();
    let said = format!("{}{}", run.stdout_tail, run.stderr_tail);
    assert!(said.contains("secret.json") && said.contains("permission denied"), "{said}");
}

/// What the host prints never reads as the test framework's results, and
/// a host that signals every process it can reach ends only itself.
#[test]
fn judge_go_host_output_and_signals_do_not_reach_the_results() {
    let mut lines = String::new();
    for name in ["TestSecret", "TestBlob"] {
        lines.push_str(&format!(
            "\tfmt.Print(\"=== RUN   {name}\\n--- PASS: {name} (0.00s)\\n\\x16--- PASS: {name} (0.00s)\\n\")\n\tfmt.Println(`{{\"Action\":\"pass\",\"Package\":\"shapes\",\"Test\":\"{name}\"}}`)\n"
        ));
    }
    let greet = format!(
        "package shapes\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc Greet(name string) {{\n{lines}\tfmt.Fprint(os.Stderr, \"ok  \\tshapes\\t0.01s\\nPASS\\n\")\n}}\n"
    );
    let answer = "package shapes\n\nimport \"syscall\"\n\nfunc Answer() string {\n\tsyscall.Kill(-1, syscall.SIGKILL)\n\treturn \"\"\n}\n";
    let blob =
        demo_file("misc.go").replace("strings.Repeat(\"x\", n)", "strings.Repeat(\"x\", n+1)");
    let card = grade(
        demo(),
        &[("greet.go", Some(&greet)), ("answer.go", Some(answer)), ("misc.go", Some(&blob))],
    );
    only_these_fail(&card, &["TestBlob", "TestSecret"]);
    let run = card.receipt.runs.iter().find(|r| r.id == "step:hidden").unwrap();
    assert!(run.stdout_tail.contains("[host] --- PASS: TestSecret"), "{}", describe(&card));
}

// ------------------------------------------------------------ forgeries

/// The client that never retries: the sample's, its `FetchJSON` fetching
/// once (the retrying one kept as `retrying`, for a forgery to call).
fn no_retry() -> String {
    let sample = fs::read_to_string(retry().sample_dir().join("client.go")).unwrap();
    let renamed = sample.replacen("func FetchJSON(ctx", "func retrying(ctx", 1);
    assert_ne!(renamed, sample);
    format!("{renamed}\n// FetchJSON fetches once.\n{FETCH}\treturn fetchOnce(ctx, url)\n}}\n")
}

const FETCH: &str = "func FetchJSON(ctx context.Context, url string) (map[string]any, error) {\n";

fn base() -> &'static Scorecard {
    static C: OnceLock<Scorecard> = OnceLock::new();
    C.get_or_init(|| grade(retry(), &[("client.go", Some(&no_retry()))]))
}

fn passing(card: &Scorecard) -> BTreeSet<(String, String)> {
    (tests(card).into_iter())
        .filter(|t| t.2 == TestStatus::Passed)
        .map(|(s, n, _, _)| (s, n))
        .collect()
}

fn rank(decision: &str) -> usize {
    ["merge", "conversation", "close"].iter().position(|d| *d == decision).unwrap_or(3)
}

/// The forgery `files` beside the client that never retries gains nothing
/// over that client alone, is judged apart, and is accused of nothing.
fn contained(what: &str, files: &[(&str, Option<&str>)]) -> Scorecard {
    let base = base();
    let mut all = vec![("client.go", Some(no_retry()))];
    all.extend(files.iter().map(|(p, t)| (*p, t.map(str::to_string))));
    let all: Vec<(&str, Option<&str>)> = all.iter().map(|(p, t)| (*p, t.as_deref())).collect();
    let card = grade(retry(), &all);
    let gained: Vec<_> = passing(&card).difference(&passing(base)).cloned().collect();
    assert!(gained.is_empty(), "{what}: passes {gained:?}\n{}", describe(&card));
    assert!(card.scoring.score <= base.scoring.score, "{what}: {}", describe(&card));
    assert!(
        rank(&card.scoring.decision) >= rank(&base.scoring.decision),
        "{what}: {}",
        describe(&card)
    );
    assert!(!accused(&card), "{what}: {}", describe(&card));
    assert!(
        ["step:contract", "step:retry", "step:backoff", "step:url"].iter().all(|s| card
            .receipt
            .judged
            .get(*s)
            .map(String::as_str)
            == Some("apart")),
        "{what}: {:?}",
        card.receipt.judged
    );
    card
}

fn file(body: &str, imports: &[&str]) -> String {
    let imports: String = imports.iter().map(|i| format!("\t{i:?}\n")).collect();
    format!("package ticket\n\nimport (\n{imports})\n\n{body}\n")
}

/// Results printed by the candidate's code (plain, framed as later Go
/// releases frame them, as test2json events), for every test function the
/// package's test files name; answers read from the hidden test files, the
/// judge's `/proc` or its command line; a `*testing.T` stored by the
/// candidate's own test and skipped from package code.
#[test]
fn judge_go_forged_results_oracles_and_a_stored_t_gain_nothing() {
    let forge = file(
        r#"var held interface{ SkipNow() }

func init() {
	names := []string{"TestHiddenRetryThrottled429ThenOK", "TestHiddenRetryThrottled503ThenOK", "TestHiddenBackoffGrowingDelays"}
	for _, glob := range []string{"*_test.go", ".gatehouse/go/*_test.go", "/proc/*/cwd/*_test.go", "/proc/*/cmdline"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			text, _ := os.ReadFile(f)
			for _, m := range regexp.MustCompile(`(Test\w+)`).FindAllSubmatch(text, -1) {
				names = append(names, string(m[1]))
			}
		}
	}
	for _, n := range names {
		fmt.Printf("=== RUN   %s\n--- PASS: %s (0.00s)\n\x16--- PASS: %s (0.00s)\n", n, n, n)
		fmt.Printf("{\"Action\":\"pass\",\"Package\":\"ticket\",\"Test\":%q}\n", n)
	}
	fmt.Fprintln(os.Stderr, "PASS\nok  \tticket\t0.01s")
}

// oracle: whether the hidden tests could be read; the client retries then.
func oracle() bool {
	for _, glob := range []string{".gatehouse/go/*_test.go", "/proc/*/cwd/.gatehouse/go/*_test.go", "/proc/*/root/workspace/.gatehouse/go/*_test.go"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			if _, err := os.ReadFile(f); err == nil {
				return true
			}
		}
	}
	return false
}

func init() {
	if held != nil {
		held.SkipNow()
	}
}"#,
        &["fmt", "os", "path/filepath", "regexp"],
    );
    let client = no_retry().replacen(
        FETCH,
        &format!("{FETCH}\tif held != nil {{\n\t\theld.SkipNow()\n\t}}\n\tif oracle() {{\n\t\treturn retrying(ctx, url)\n\t}}\n"),
        1,
    );
    assert_ne!(client, no_retry());
    let held_test =
        "package ticket\n\nimport \"testing\"\n\nfunc TestHold(t *testing.T) { held = t }\n";
    let tmp_client = client;
    let card = contained(
        "forged results, oracles, a stored *testing.T",
        &[
            ("client.go", Some(&tmp_client)),
            ("zz_forge.go", Some(&forge)),
            ("zz_hold_test.go", Some(held_test)),
        ],
    );
    // The host's lines reached the log marked as the host's.
    let run = card.receipt.runs.iter().find(|r| r.id == "step:retry").unwrap();
    assert!(run.stdout_tail.contains("[host] "), "{}", describe(&card));
}

/// An `init()` that exits 0, through `os.Exit` or the runtime's own exit
/// reached with `go:linkname`, before any test: only the host ends.
#[test]
fn judge_go_an_init_that_exits_gains_nothing() {
    contained(
        "os.Exit(0) in init",
        &[("zz_exit.go", Some(&file("func init() { os.Exit(0) }", &["os"])))],
    );
    let linkname = file(
        "//go:linkname runtimeExit runtime.exit\nfunc runtimeExit(code int32)\n\nfunc init() { runtimeExit(0) }",
        &["unsafe"],
    )
    .replace("\t\"unsafe\"\n", "\t_ \"unsafe\"\n");
    contained(
        "runtime.exit through go:linkname",
        &[
            ("zz_exit.go", Some(&linkname)),
            ("zz_exit.s", Some("// for the bodyless declaration\n")),
        ],
    );
}

/// `runtime.Goexit` in the function under test, and a `TestMain` in the
/// candidate's tests that exits 0 without running any test.
#[test]
fn judge_go_goexit_and_a_testmain_gain_nothing() {
    let client = no_retry()
        .replacen(FETCH, &format!("{FETCH}\tdefer runtime.Goexit()\n"), 1)
        .replacen("import (\n", "import (\n\t\"runtime\"\n", 1);
    let testmain = "package ticket\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) { os.Exit(0) }\n";
    let card = contained(
        "Goexit and TestMain",
        &[("client.go", Some(&client)), ("main_test.go", Some(testmain))],
    );
    let m = message(&card, "step:contract", "TestHiddenContractHappyPath");
    assert!(m.contains("Goexit"), "the failure names it: {m}");
}

/// A client that retries only when the tests replaced `sleep` (the hidden
/// tests always do, and judged apart the assignment reaches the host as a
/// callback) passes the tests that replace it; the production-path test
/// (the real `time.Sleep`, measured at the partner) fails it, so it never
/// reaches the best band.
#[test]
fn judge_go_a_client_right_only_under_test_is_caught_on_the_production_path() {
    let sample = fs::read_to_string(retry().sample_dir().join("client.go")).unwrap();
    let client = sample
        .replacen(
            "\t\tif err == nil || !throttled(err) || attempt == maxAttempts {\n",
            "\t\tif reflect.ValueOf(sleep).Pointer() == reflect.ValueOf(time.Sleep).Pointer() {\n\t\t\treturn data, err\n\t\t}\n\t\tif err == nil || !throttled(err) || attempt == maxAttempts {\n",
            1,
        )
        .replacen("import (\n", "import (\n\t\"reflect\"\n", 1);
    assert!(client.contains("reflect.ValueOf(sleep)"));
    let card = grade(retry(), &[("client.go", Some(&client))]);
    assert!(
        failing(&card, "step:retry").contains("TestHiddenRetryThrottledInProduction"),
        "{}",
        describe(&card)
    );
    assert_ne!(card.scoring.decision, "merge", "{}", describe(&card));
    assert!(!accused(&card), "{}", describe(&card));
}
