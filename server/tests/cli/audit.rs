//! `gatehouse packet audit`: rule mutants offline, model mutants from a fake
//! OpenAI-format upstream started here (127.0.0.1, port 0) answering canned
//! mutants, `--save` making `packet check` require a kill, `--explain`
//! recording a survivor in `mutants/EQUIVALENT.md`, and a target handed back
//! as a diff audited through that diff.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../grader/tests/fixtures/audit-demo")
}

/// A private copy of the audit-demo packet (a test may add mutants to it).
fn demo_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("audit-demo");
    grader::tree::copy_path(&fixture(), &p).unwrap();
    (dir, p)
}

fn audit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(["packet", "audit"])
        .args(args)
        .env_remove("GATEHOUSE_AUDIT_API_KEY")
        .output()
        .expect("running gatehouse")
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn by_id<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["mutants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no mutant {id} in {v:#}"))
}

pub use crate::fake_openai::fake_upstream;

fn mutants(items: &[(&str, &str)]) -> String {
    Value::Array(
        items.iter().map(|(code, fault)| json!({ "code": code, "fault": fault })).collect(),
    )
    .to_string()
}

#[test]
fn audit_model_mutants_are_killed_survived_crashed_or_invalid() {
    let (url, seen) = fake_upstream(|prompt| {
        if prompt.contains("`Counter`") {
            // Importing the mutated file fails: the class body divides by zero.
            mutants(&[(
                "class Counter:\n    start = 1 // 0\n\n    def bump(self, n=1):\n        self.start += n\n        return self.start\n",
                "the class fails to build",
            )])
        } else {
            mutants(&[
                ("def add(a, b):\n    return a - b\n", "subtracts instead of adding"),
                ("def add(a, b):\n    return b + a\n", "adds in the other order"),
                ("def add(a, b):\n    return (a +\n", "does not parse"),
                ("def add(a, b):\n    return a\n\ndef helper():\n    pass\n", "two definitions"),
                ("def plus(a, b):\n    return a - b\n", "renamed"),
                ("def add(a, b, c=0):\n    return a + b + c\n", "new parameter"),
                (
                    "def add(a, b):\n    import not_a_module_anywhere\n    return a + b + 1\n",
                    "imports a missing module",
                ),
                ("def add(a, b):\n    return (a + b)  # same\n", "only cosmetic"),
            ])
        }
    });
    let out = audit(&[
        fixture().to_str().unwrap(),
        "--upstream",
        &url,
        "--model",
        "fake-m",
        "--function",
        "add",
        "--function",
        "Counter",
        "--mutants",
        "8",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json_of(&out);
    assert_eq!(v["target"], "calc.py");
    let check = |id: &str, outcome: &str, reason: &str| {
        let m = by_id(&v, id);
        assert_eq!(m["outcome"], outcome, "{id}: {m:#}");
        assert!(m["reason"].as_str().unwrap().contains(reason), "{id}: {m:#}");
        assert!(m["fault"].as_str().is_some_and(|f| !f.is_empty()));
    };
    check("model-add-1", "killed", "2 of 5 hidden tests fail");
    assert_eq!(
        by_id(&v, "model-add-1")["killed_by"],
        json!(["hidden: test_hidden::test_add_small", "hidden: test_hidden::test_add_negative"])
    );
    assert!(
        by_id(&v, "model-add-1")["diff"]
            .as_str()
            .unwrap()
            .contains("-    return a + b\n+    return a - b\n")
    );
    check("model-add-2", "survived", "all 5 hidden tests pass");
    assert_eq!(by_id(&v, "model-add-2")["killed_by"], json!([]));
    check("model-add-3", "invalid", "does not parse");
    check("model-add-4", "invalid", "not one function or class definition");
    check("model-add-5", "invalid", "'plus', which is not a top-level definition");
    check("model-add-6", "invalid", "changes the signature of 'add'");
    check(
        "model-add-7",
        "invalid",
        "not_a_module_anywhere, which does not exist in the pinned environment",
    );
    check("model-add-8", "invalid", "identical to the sample");
    check("model-Counter-1", "crashed", "fails to import");
    assert_eq!(
        v["counts"],
        json!({ "killed": 1, "survived": 1, "explained": 0, "crashed": 1, "invalid": 6 })
    );
    // The author ledger: one row per call, with its tokens.
    let calls = v["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert!(
        calls.iter().all(|c| c["outcome"] == "answered"
            && c["prompt_tokens"] == 100
            && c["completion_tokens"] == 50
            && c["model"] == "fake-m"),
        "{calls:#?}"
    );
    // The prompt follows the seed's specification and carries only the definition.
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0]["path"], "/v1/chat/completions");
    let prompt = seen[0]["body"]["messages"][0]["content"].as_str().unwrap();
    assert!(
        prompt.contains("Generate 8 mutant versions")
            && prompt.contains("def add(a, b):\n    return a + b")
            && !prompt.contains("clamp"),
        "{prompt}"
    );

    // Text output: outcome, fault, reason and counts.
    let (url, _) = fake_upstream(|_| {
        mutants(&[("def add(a, b):\n    return a - b\n", "subtracts instead of adding")])
    });
    let out = audit(&[fixture().to_str().unwrap(), "--upstream", &url, "--function", "add"]);
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(
        t.contains("killed   model-add-1: subtracts instead of adding")
            && t.contains("counts: 1 killed, 0 survived, 0 explained, 0 crashed, 0 invalid"),
        "{t}"
    );
}

#[test]
fn audit_reports_a_malformed_answer_the_call_cap_and_an_upstream_that_is_down() {
    // A chatty answer is malformed, not guessed at; the cap refuses the second call.
    let (url, seen) = fake_upstream(|_| {
        "Sure! Here are the mutants:\n[{\"code\": \"def add(a, b):\\n    return a - b\\n\", \"fault\": \"minus\"}]".into()
    });
    let out = audit(&[
        fixture().to_str().unwrap(),
        "--upstream",
        &url,
        "--max-calls",
        "1",
        "--function",
        "add",
        "--function",
        "clamp",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1), "no mutant came back");
    let v = json_of(&out);
    assert_eq!(v["mutants"], json!([]));
    let errors = v["errors"].to_string();
    assert!(
        errors.contains("the model's answer for add is malformed: the answer is not a JSON array"),
        "{errors}"
    );
    assert!(errors.contains("cap of 1 model calls is reached"), "{errors}");
    assert_eq!(v["calls"][0]["outcome"], "malformed");
    assert_eq!(v["calls"][1]["outcome"], "refused");
    assert_eq!(seen.lock().unwrap().len(), 1, "a refused call never reaches the upstream");

    // An upstream that is down: the call is in the ledger, the reason named.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = audit(&[
        fixture().to_str().unwrap(),
        "--upstream",
        &format!("http://127.0.0.1:{port}/v1"),
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v = json_of(&out);
    assert_eq!(
        v["calls"].as_array().unwrap().len(),
        1,
        "the calls stop at the first failure: {v:#}"
    );
    assert_eq!(v["calls"][0]["outcome"], "unreachable");
    assert!(v["errors"][0].as_str().unwrap().contains("could not be reached"), "{v:#}");

    // No upstream at all: a clear error before anything runs.
    let cfg = tempfile::tempdir().unwrap();
    let file = cfg.path().join("gatehouse.toml");
    std::fs::write(&file, "").unwrap();
    let out = audit(&[fixture().to_str().unwrap(), "--config", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no model upstream for audit-demo: pass --upstream URL"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn audit_rules_find_the_untested_bound_and_a_saved_survivor_fails_packet_check() {
    let (_dir, p) = demo_copy();
    let out = audit(&[p.to_str().unwrap(), "--rules", "--mutants", "0", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json_of(&out);
    assert_eq!(v["mode"], "rules");
    assert_eq!(v["calls"], json!([]));
    // The hole: removing the upper guard of clamp goes unnoticed.
    let hole = by_id(&v, "rule-clamp-5-guard");
    assert_eq!(hole["outcome"], "survived", "{hole:#}");
    assert!(
        hole["diff"].as_str().unwrap().contains("-    if x > hi:\n-        return hi\n"),
        "{hole:#}"
    );
    assert_eq!(by_id(&v, "rule-add-1-arithmetic")["outcome"], "killed");
    assert_eq!(v["counts"]["invalid"], 0);

    // Kept, it is a mutant of the hidden tests (`mutants/audit/`, never run
    // against a candidate's tests); `packet check` now fails on it.
    let out = audit(&[
        p.to_str().unwrap(),
        "--rules",
        "--mutants",
        "0",
        "--function",
        "clamp",
        "--save",
        "rule-clamp-5-guard",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let saved = std::fs::read_to_string(p.join("mutants/audit/rule-clamp-5-guard.diff")).unwrap();
    assert!(saved.starts_with("--- a/calc.py\n+++ b/calc.py\n@@"), "{saved}");
    assert!(!p.join("mutants/rule-clamp-5-guard.diff").exists());
    let checked = |p: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_gatehouse"))
            .args(["packet", "check", p.to_str().unwrap(), "--format", "json"])
            .output()
            .unwrap();
        (out.status.code(), json_of(&out)[0].clone())
    };
    let item = |report: &Value, name: &str| -> Value {
        report["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no item {name:?}: {report:#}"))
    };
    let (code, report) = checked(&p);
    assert_eq!(code, Some(1));
    assert_eq!(
        item(&report, "mutant audit/rule-clamp-5-guard is killed by step hidden")["ok"],
        false
    );
    assert_eq!(item(&report, "mutant minus is killed by step hidden")["ok"], true);
    assert_eq!(report["mutants"], json!({ "killed": 1, "survived": 1, "explained": 0 }));

    // Saving twice, an unknown id, or an invalid name is refused with the reason.
    let check = |args: &[&str], want: &str| {
        let out = audit(
            &[&[p.to_str().unwrap(), "--rules", "--mutants", "0", "--function", "clamp"], args]
                .concat(),
        );
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    };
    check(&["--save", "rule-clamp-5-guard"], "already has a mutant of that id");
    check(&["--save", "rule-nope"], "the audit has no mutant of that id");
    check(&["--explain", "rule-clamp-5-guard"], "give the reason after `=`");
    check(&["--explain", "rule-nope=why"], "the audit has no mutant of that id");

    // Explained instead: the audit shows it as explained (with the reason),
    // and `packet check` passes it, counting it.
    let why = "The upper bound is out of scope for this demo: nothing above hi is ever passed.";
    let out = audit(&[
        p.to_str().unwrap(),
        "--rules",
        "--mutants",
        "0",
        "--function",
        "clamp",
        "--format",
        "json",
        "--explain",
        &format!("rule-clamp-5-guard={why}"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let list = std::fs::read_to_string(p.join("mutants/EQUIVALENT.md")).unwrap();
    assert!(list.contains(why) && list.contains("```diff\n--- a/calc.py\n"), "{list}");
    let out = audit(&[
        p.to_str().unwrap(),
        "--rules",
        "--mutants",
        "0",
        "--function",
        "clamp",
        "--format",
        "json",
    ]);
    let v = json_of(&out);
    let hole = by_id(&v, "rule-clamp-5-guard");
    assert_eq!(hole["outcome"], "explained", "{hole:#}");
    assert!(hole["reason"].as_str().unwrap().contains(why), "{hole:#}");
    // What still survives are the boundary mutants (`<=` for `<`, `>=` for
    // `>`): equivalent, as at the bound both branches return the bound.
    assert_eq!(v["counts"]["survived"], 2, "{v:#}");
    for id in ["rule-clamp-3-boundary", "rule-clamp-7-boundary"] {
        assert_eq!(by_id(&v, id)["outcome"], "survived", "{v:#}");
    }
    assert_eq!(v["counts"]["explained"], 1, "{v:#}");
    let (code, report) = checked(&p);
    assert_eq!(code, Some(0), "{report:#}");
    let kept = item(&report, "mutant audit/rule-clamp-5-guard is killed by step hidden");
    assert_eq!(kept["ok"], true);
    assert!(
        kept["detail"].as_str().unwrap().contains("explained in mutants/EQUIVALENT.md"),
        "{kept:#}"
    );
    assert_eq!(report["mutants"], json!({ "killed": 1, "survived": 0, "explained": 1 }));
    let out = Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(["packet", "check", p.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .starts_with("audit-demo: ok (mutants: 1 killed, 0 survived, 1 explained)"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // An entry whose diff no longer applies to the sample explains nothing,
    // and the self-test says which.
    let stale = list.replace("-    if x > hi:", "-    if x >= hi:");
    std::fs::write(p.join("mutants/EQUIVALENT.md"), &stale).unwrap();
    let (code, report) = checked(&p);
    assert_eq!(code, Some(1));
    let entries = item(&report, "every entry of mutants/EQUIVALENT.md applies to the sample");
    assert_eq!(entries["ok"], false);
    assert!(
        entries["detail"]
            .as_str()
            .unwrap()
            .contains("its diff no longer applies to the sample's calc.py"),
        "{entries:#}"
    );
    assert_eq!(
        item(&report, "mutant audit/rule-clamp-5-guard is killed by step hidden")["ok"],
        false
    );
}

#[test]
fn audit_names_bad_input() {
    let check = |args: &[&str], want: &str| {
        let out = audit(&[&[fixture().to_str().unwrap(), "--rules"], args].concat());
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    };
    check(
        &["--function", "nope"],
        "--function \"nope\": calc.py has no top-level function or class of that name (it has add, clamp, Counter)",
    );
    check(
        &["--target", "missing.py"],
        "--target \"missing.py\": neither the sample nor the starter of audit-demo has that file",
    );
    check(
        &["--target", "prompt.md"],
        "--target \"prompt.md\": packet audit mutates Python (.py), TypeScript (.ts) and Go (.go) source files",
    );
    check(
        &["--target", "calc_test.go"],
        "mutates Python (.py), TypeScript (.ts) and Go (.go) source files, not tests",
    );
    check(&["--step", "nope"], "--step \"nope\" is not a step of audit-demo (its steps: hidden)");
    let out = audit(&["/nonexistent/packet", "--rules"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn audit_warns_when_the_hidden_steps_never_run_the_target() {
    // The hidden tests here never import calc.py: every mutant would survive
    // for nothing, and the canary says so.
    let (_dir, p) = demo_copy();
    std::fs::write(
        p.join("hidden/test_hidden.py"),
        "def test_nothing_imported():\n    assert True\n",
    )
    .unwrap();
    let out = audit(&[p.to_str().unwrap(), "--rules", "--function", "add", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json_of(&out);
    assert!(
        v["warnings"][0]
            .as_str()
            .unwrap()
            .contains("pass even when calc.py cannot be imported: they never run it"),
        "{v:#}"
    );
    // Quiet where the hidden tests import the target.
    let out =
        audit(&[fixture().to_str().unwrap(), "--rules", "--function", "add", "--format", "json"]);
    assert_eq!(json_of(&out)["warnings"], json!([]));
}

#[test]
fn audit_runs_a_target_handed_back_as_a_diff_through_that_diff() {
    // tax-rounding's oracle applies the candidate's patch.diff to a pristine
    // starter: the tree's compute.py is never what its hidden tests run. The
    // sample's patch.diff delivers compute.py, so each mutant (and the
    // canary) is laid with that diff rewritten to deliver it.
    let packet = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packets/tax-rounding");
    let out = audit(&[packet.to_str().unwrap(), "--rules", "--mutants", "1", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v = json_of(&out);
    assert_eq!(v["target"], "taxlib/compute.py");
    assert_eq!(v["warnings"], json!([]), "the canary is noticed: {v:#}");
    let m = &v["mutants"][0];
    assert_eq!(m["outcome"], "killed", "{m:#}");
    assert!(
        m["killed_by"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t.as_str().unwrap().starts_with("oracle: ")),
        "{m:#}"
    );
}
