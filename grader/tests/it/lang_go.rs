//! Go packets (issue #30): `retry-ticket-go` graded through the trusted
//! `go test` runner. Its hidden steps are judged apart (`judge_go.rs` holds
//! the forgeries against that); here the honest controls (the sample, an
//! alternate) draw nothing, and the packet declaring `judge = "shared"`
//! shows the shared path's defences: each forgery is contained (it never
//! grades better than the work without it) and, where the run's own
//! evidence contradicts itself, flagged as `evidence-tampering`.

use std::fs;
use std::path::PathBuf;
use std::sync::OnceLock;

use grader::grade::{GradeOptions, Scorecard};
use grader::packet::Packet;
use grader::tree::copy_path;

use crate::grader;

const SLUG: &str = "retry-ticket-go";

fn packet() -> &'static Packet {
    static P: OnceLock<Packet> = OnceLock::new();
    P.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../packets").join(SLUG);
        Packet::load(&dir).unwrap_or_else(|e| panic!("loading {SLUG}: {e}"))
    })
}

/// The packet declaring `judge = "shared"`: its hidden tests compiled with
/// the candidate's code, the canaries and the runner's cross-checks their
/// defence (what every Go run was before the judge apart, and what a Go
/// packet that declares it, or runs `./...`, still is). The judge apart's
/// own forgery tests are `judge_go.rs`.
fn shared() -> &'static Packet {
    static P: OnceLock<(tempfile::TempDir, Packet)> = OnceLock::new();
    &P.get_or_init(|| crate::shared_copy(&packet().root)).1
}

fn read(path: &str) -> String {
    fs::read_to_string(packet().root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The starter with the sample laid over it, then `files` (a `None`
/// content removes the file), zipped and graded.
fn grade(files: &[(&str, Option<&str>)]) -> Scorecard {
    grade_in(packet(), files)
}

fn grade_in(p: &Packet, files: &[(&str, Option<&str>)]) -> Scorecard {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sub");
    copy_path(&p.sample_dir(), &dir).unwrap();
    crate::lay(&dir, files);
    let zip = tmp.path().join("sub.zip");
    crate::zip_dir(&dir, &zip);
    grader().grade_zip(p, &zip, &GradeOptions::default()).unwrap_or_else(|e| panic!("grading: {e}"))
}

fn ids(card: &Scorecard) -> Vec<&str> {
    card.findings.iter().map(|f| f.id.as_str()).collect()
}

fn describe(card: &Scorecard) -> String {
    let runs: Vec<String> = card
        .receipt
        .runs
        .iter()
        .map(|r| {
            format!("{} {:?}: {}", r.id, r.exit, r.stderr_tail.lines().last().unwrap_or_default())
        })
        .collect();
    format!(
        "decision {}, findings {:?}\n{}\nnotes {:?}",
        card.scoring.decision,
        card.findings.iter().map(|f| (&f.id, &f.evidence)).collect::<Vec<_>>(),
        runs.join("\n"),
        card.receipt.runtime_notes
    )
}

/// The starter's client.go: it does not retry, so the hidden tests fail.
fn no_retry() -> String {
    read("starter/client.go")
}

/// Go code appended to a client as its own file (package ticket).
fn extra(body: &str, imports: &str) -> String {
    format!("package ticket\n\nimport (\n{imports}\n)\n\n{body}\n")
}

#[test]
fn honest_go_submissions_grade_clean() {
    let card = grade(&[]);
    assert_eq!(card.scoring.decision, "merge", "{}", describe(&card));
    assert!(card.findings.is_empty(), "{}", describe(&card));
    for step in ["contract", "retry", "backoff", "url"] {
        let judged = card.receipt.judged.get(&format!("step:{step}"));
        assert_eq!(judged.map(String::as_str), Some("apart"), "{}", describe(&card));
    }
    // Graded again (the Go judge's builds now kept), the same receipt: test
    // durations are masked, nothing random is planted.
    let again = grade(&[]);
    let diff = crate::receipt_diff(&card, &again);
    assert_eq!(card.receipt.digest, again.receipt.digest, "the receipts differ:\n{diff}");
    // Shared, the hidden steps carry twins of the packet's Go tests
    // (`harness/gatehouse_go_twins.go`) beside the generic pair, and the
    // honest work contradicts none of them.
    let card = grade_in(shared(), &[]);
    assert_eq!(card.scoring.decision, "merge", "{}", describe(&card));
    assert!(card.findings.is_empty(), "{}", describe(&card));
    let calibration = grader().calibration(shared());
    for step in ["contract", "retry", "backoff", "url"] {
        let sc = &calibration.canaries[step];
        assert!(sc.covered() > 0, "{step}: no Go twin fails on the sample: {sc:?}");
    }
    let planted: usize = (card.receipt.canaries.iter())
        .filter(|(id, _)| id.starts_with("step:"))
        .map(|(_, n)| n)
        .sum();
    assert!(planted > 2 * 4, "only the generic pairs were planted: {:?}", card.receipt.canaries);

    // As a candidate would: the tree the platform hands out (the starter,
    // the brief, the pin file naming Go), the work done in it, all of it
    // zipped back.
    let p = packet();
    let probe = grader().probe(&[]).unwrap();
    let go = probe.tools.get("go").cloned().flatten();
    assert!(go.as_deref().is_some_and(|v| v.starts_with("1.19")), "{probe:?}");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("received");
    grader::starter::lay_received(p, "0", &probe, &grader::starter::Gate::placeholders(), &dir)
        .unwrap();
    let pin = fs::read_to_string(dir.join("GATEHOUSE_PIN.toml")).unwrap();
    assert!(pin.contains("\n\"go\" = \"1.19\"\n") && pin.contains("\"go\" = \"1.19."), "{pin}");
    for name in ["client.go", "throttle_test.go"] {
        fs::write(dir.join(name), read(&format!("alternates/errors-as/{name}"))).unwrap();
    }
    // Its own tests also written table-driven, as `t.Run` subtests that
    // run in parallel.
    fs::write(dir.join("table_test.go"), TABLE_TEST).unwrap();
    let zip = tmp.path().join("sub.zip");
    crate::zip_dir(&dir, &zip);
    let card = grader().grade_zip(p, &zip, &GradeOptions::default()).unwrap();
    assert_eq!(card.scoring.decision, "merge", "{}", describe(&card));
    assert!(card.findings.is_empty(), "{}", describe(&card));
}

/// A candidate's table-driven test file: subtests under `t.Run`, each
/// `t.Parallel`.
const TABLE_TEST: &str = r#"package ticket

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestStatusesTable(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		ok     bool
	}{
		{"ok", http.StatusOK, `{"id": 7}`, true},
		{"not found", http.StatusNotFound, `{}`, false},
		{"bad request", http.StatusBadRequest, `{}`, false},
		{"not an object", http.StatusOK, `[1, 2]`, false},
	}
	for _, tc := range cases {
		tc := tc
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			data, err := FetchJSON(context.Background(), srv.URL)
			if tc.ok {
				if err != nil || data["id"] != 7.0 {
					t.Fatalf("want the object, got %v, %v", data, err)
				}
				return
			}
			var fe *FetchError
			if !errors.As(err, &fe) {
				t.Fatalf("want a *FetchError, got %v", err)
			}
			if tc.status != http.StatusOK && fe.Status != tc.status {
				t.Fatalf("status: want %d, got %d", tc.status, fe.Status)
			}
		})
	}
}
"#;

#[test]
fn shared_an_init_that_exits_0_is_tampering() {
    let forged = extra("func init() { os.Exit(0) }", "\t\"os\"");
    let card =
        grade_in(shared(), &[("client.go", Some(&no_retry())), ("zz_exit.go", Some(&forged))]);
    assert_ne!(card.scoring.decision, "merge", "{}", describe(&card));
    let f = card.findings.iter().find(|f| f.id == "evidence-tampering");
    let evidence = f.map(|f| f.evidence.join("\n")).unwrap_or_default();
    assert!(evidence.contains("canary") && evidence.contains("ran no test"), "{}", describe(&card));
}

#[test]
fn shared_fake_pass_lines_on_stdout_are_tampering() {
    // For every hidden test: the runner's result lines as test2json reads
    // them (plain, as Go 1.19 prints them, and with the ^V framing of later
    // releases), and a test2json event printed whole.
    let names: Vec<String> = ["Throttled429ThenOK", "Throttled503ThenOK"]
        .iter()
        .map(|n| format!("TestHiddenRetry{n}"))
        .chain(
            ["CapAtMostThree503", "RetriesWithinTheCap", "GrowingDelays", "EachWaitLonger"]
                .iter()
                .map(|n| format!("TestHiddenBackoff{n}")),
        )
        .collect();
    let mut body = String::from("func init() {\n");
    for n in &names {
        body.push_str(&format!(
            "\tfmt.Print(\"=== RUN   {n}\\n--- PASS: {n} (0.00s)\\n\")\n\tfmt.Print(\"\\x16=== RUN   {n}\\n\\x16--- PASS: {n} (0.00s)\\n\")\n\tfmt.Println(`{{\"Action\":\"pass\",\"Package\":\"ticket\",\"Test\":\"{n}\"}}`)\n"
        ));
    }
    body.push('}');
    let forged = extra(&body, "\t\"fmt\"");
    let card =
        grade_in(shared(), &[("client.go", Some(&no_retry())), ("zz_fake.go", Some(&forged))]);
    assert_eq!(card.scoring.decision, "close", "{}", describe(&card));
    assert!(ids(&card).contains(&"evidence-tampering"), "{}", describe(&card));
}

#[test]
fn candidate_test_files_cannot_reach_the_hidden_steps() {
    // A TestMain that forces exit 0, and a helper the hidden tests use,
    // redefined to make every partner answer 200: the hidden steps set the
    // candidate's test files aside, so the no-retry client still fails.
    let testmain = "package ticket\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) {\n\tm.Run()\n\tos.Exit(0)\n}\n";
    let helper = read("hidden/hidden_partner_test.go")
        .replace("status := p.answers[len(p.answers)-1]", "status := http.StatusOK")
        .replace("status = p.answers[i]", "status = http.StatusOK");
    let card = grade(&[
        ("client.go", Some(&no_retry())),
        ("main_test.go", Some(testmain)),
        ("hidden_partner_test.go", Some(&helper)),
    ]);
    assert_eq!(card.scoring.decision, "close", "{}", describe(&card));
    let found = ids(&card);
    assert!(
        found.contains(&"no-retry") && found.contains(&"tests-rewritten"),
        "{}",
        describe(&card)
    );
    assert!(!found.contains(&"evidence-tampering"), "{}", describe(&card));
}

#[test]
fn build_tags_and_workspace_files_do_not_change_what_compiles() {
    // The reviewer reads a retrying client.go that never compiles on the
    // grader (linux); client_linux.go, which does, does not retry. A
    // go.work that would shadow the module and a vendor/ are ignored.
    let shown = format!("//go:build !linux\n\n{}", read("sample/client.go"));
    let card = grade(&[
        ("client.go", Some(&shown)),
        ("client_linux.go", Some(&no_retry())),
        ("go.work", Some("go 1.19\n\nuse ./shadow\n")),
        ("shadow/go.mod", Some("module ticket\n\ngo 1.19\n")),
        ("vendor/modules.txt", Some("# nothing\n")),
    ]);
    assert_eq!(card.scoring.decision, "close", "{}", describe(&card));
    assert!(ids(&card).contains(&"no-retry"), "{}", describe(&card));
    let notes = card.receipt.runtime_notes.join("\n");
    assert!(
        notes.contains("client.go") && notes.contains("build constraint"),
        "the excluded file is reported: {}",
        describe(&card)
    );
}

/// Witnessed runs work unchanged for a Go packet: `go test` on the tree a
/// candidate uploads is red on the starter and green with the sample's
/// files, and a suite with a failing test is not green when an `init`
/// exits 0 before any test runs or a `TestMain` exits 0 after them.
#[test]
fn witnessed_red_and_green_of_a_go_tree() {
    let p = packet();
    let tmp = tempfile::tempdir().unwrap();
    let zip_of = |name: &str, sample: bool, files: &[(&str, &str)]| {
        let dir = tmp.path().join(name);
        copy_path(&p.root.join("starter"), &dir).unwrap();
        let mut all: Vec<(String, String)> = Vec::new();
        if sample {
            all.push(("client.go".into(), read("sample/client.go")));
        }
        all.extend(files.iter().map(|(f, t)| (f.to_string(), t.to_string())));
        for (path, text) in all {
            fs::write(dir.join(path), text).unwrap();
        }
        let zip = tmp.path().join(format!("{name}.zip"));
        crate::zip_dir(&dir, &zip);
        zip
    };
    let red = grader().witness_run(p, &zip_of("red", false, &[])).unwrap();
    assert!(!red.passed && red.exit_code.is_some_and(|c| c != 0), "{red:?}");
    assert!(red.log.contains("FAIL"), "{}", red.log);
    let green = grader().witness_run(p, &zip_of("green", true, &[])).unwrap();
    assert!(green.passed, "{}", green.log);

    let failing = "package ticket\n\nimport \"testing\"\n\nfunc TestZzRed(t *testing.T) { t.Fatal(\"red\") }\n";
    let init_exit = "package ticket\n\nimport \"os\"\n\nfunc init() { os.Exit(0) }\n";
    let main_exit = "package ticket\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestMain(m *testing.M) {\n\tm.Run()\n\tos.Exit(0)\n}\n";
    let honest_red = grader()
        .witness_run(p, &zip_of("honest-red", true, &[("zz_red_test.go", failing)]))
        .unwrap();
    assert!(!honest_red.passed, "{}", honest_red.log);
    for (name, file, text) in
        [("init-exit", "zz_init.go", init_exit), ("main-exit", "zz_main_test.go", main_exit)]
    {
        let forged = grader()
            .witness_run(p, &zip_of(name, true, &[("zz_red_test.go", failing), (file, text)]))
            .unwrap();
        assert!(!forged.passed, "{name}: {forged:?}");
    }
}
