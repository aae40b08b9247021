//! The grader's general mechanisms for services, fake endpoints, kept files,
//! ledgers, leftovers and digests, through the `services-demo` fixture: a
//! counter service the harness starts and restarts, and an agent replayed
//! against the harness's fake OpenAI endpoint.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use grader::grade::{GradeOptions, Scorecard};
use grader::packet::Packet;
use grader::tree::sha256_hex;

use crate::detectors::{fixture, grade_with};

fn demo() -> &'static Packet {
    static PACKET: OnceLock<Packet> = OnceLock::new();
    PACKET.get_or_init(|| Packet::load(&fixture("services-demo")).expect("services-demo loads"))
}

fn starter(file: &str) -> String {
    std::fs::read_to_string(demo().starter_dir().join(file)).expect("starter file")
}

/// The usage.jsonl the agent text `agent` writes against the fake endpoint
/// (prompt tokens are request bytes / 4), for `calls` calls.
fn usage(agent: &str, calls: usize, tweak: impl Fn(usize, &mut serde_json::Value)) -> String {
    let digest = sha256_hex(agent.as_bytes());
    let mut out = String::new();
    for i in 0..calls {
        let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": format!("line {i}")}]});
        // Python's json.dumps puts a space after separators.
        let bytes = serde_json::to_string(&body)
            .unwrap()
            .replace("\":", "\": ")
            .replace(",\"", ", \"")
            .len();
        let mut row = serde_json::json!({"prompt_tokens": bytes / 4, "completion_tokens": 1, "note": null, "code_sha256": digest});
        tweak(i, &mut row);
        out.push_str(&format!("{row}\n"));
    }
    out
}

fn check(files: &[(&str, &str)], expect: &[&str]) -> Scorecard {
    let card = grade_with(demo(), files, &[], &GradeOptions::default())
        .unwrap_or_else(|e| panic!("grading failed: {e}"));
    let got: BTreeSet<&str> = card.findings.iter().map(|f| f.id.as_str()).collect();
    let want: BTreeSet<&str> = expect.iter().copied().collect();
    let render: Vec<String> = card
        .findings
        .iter()
        .map(|f| format!("{} ({:?}): {}", f.id, f.provenance, f.evidence.join(" | ")))
        .collect();
    assert_eq!(got, want, "findings:\n{}", render.join("\n"));
    assert!(card.unevaluated.is_empty(), "{:?}", card.unevaluated);
    card
}

fn evidence(card: &Scorecard, id: &str) -> String {
    card.findings.iter().find(|f| f.id == id).map(|f| f.evidence.join(" | ")).unwrap_or_default()
}

#[test]
fn the_sample_is_quiet_and_usage_matches_the_helper() {
    let agent = starter("agent.py");
    let sample_usage = std::fs::read_to_string(demo().sample_dir().join("usage.jsonl")).unwrap();
    let parse = |t: &str| {
        t.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(parse(&usage(&agent, 2, |_, _| {})), parse(&sample_usage));
    check(&[], &[]);
    // Within the 5% tolerance: 33 tokens claimed against 32 recomputed.
    check(
        &[(
            "usage.jsonl",
            &usage(&agent, 2, |i, r| {
                if i == 1 {
                    r["prompt_tokens"] = 17.into()
                }
            }),
        )],
        &[],
    );
}

#[test]
fn a_service_that_forgets_after_restart_is_caught_by_the_driver() {
    let card = check(&[("app.py", &starter("app.py"))], &["forgets"]);
    assert_eq!(evidence(&card, "forgets"), "count was 2 before the restart and 0 after");
}

#[test]
fn kept_service_log_and_measures_are_read() {
    // A service that prints a traceback but works: the kept log shows it.
    let noisy = std::fs::read_to_string(demo().sample_dir().join("app.py"))
        .unwrap()
        .replace("if __name__ == \"__main__\":\n", "if __name__ == \"__main__\":\n    import sys\n    print(\"Traceback (most recent call last): simulated\", file=sys.stderr, flush=True)\n");
    let card = check(&[("app.py", &noisy)], &["crashed"]);
    assert!(
        evidence(&card, "crashed").starts_with(".gatehouse/evidence/service-8099.log:"),
        "{}",
        evidence(&card, "crashed")
    );
    // A service that never starts: no measurement is kept either.
    check(&[("app.py", "raise SystemExit(3)\n")], &["forgets", "slow-start"]);
}

#[test]
fn claimed_ledger_is_compared_with_the_replay() {
    let agent = starter("agent.py");
    // One call more than the endpoint saw: both the call count and the
    // token sum disagree.
    let card = check(
        &[("usage.jsonl", &usage(&agent, 3, |_, _| {}))],
        &["calls-misreported", "tokens-misreported"],
    );
    assert!(
        evidence(&card, "calls-misreported").contains("rows claims 3, step replay recomputed 2"),
        "{}",
        evidence(&card, "calls-misreported")
    );
    // The right number of calls, inflated tokens.
    let card = check(
        &[("usage.jsonl", &usage(&agent, 2, |_, r| r["prompt_tokens"] = 20.into()))],
        &["tokens-misreported"],
    );
    assert!(
        evidence(&card, "tokens-misreported")
            .contains("claims 40, step replay recomputed 32 (+25.0%, tolerance 5%)"),
        "{}",
        evidence(&card, "tokens-misreported")
    );
}

#[test]
fn schema_types_are_checked() {
    let agent = starter("agent.py");
    let card = check(
        &[(
            "usage.jsonl",
            &usage(&agent, 2, |i, r| {
                if i == 0 {
                    r["note"] = 5.into()
                }
            }),
        )],
        &["bad-rows"],
    );
    assert!(
        evidence(&card, "bad-rows").contains("line 1: note is 5, not nullorstring"),
        "{}",
        evidence(&card, "bad-rows")
    );
}

#[test]
fn replay_over_budget_and_digest_drift() {
    // The agent now makes four calls: the replay's ledger is over the budget
    // of three, the claimed usage no longer matches, and the code changed.
    let greedy = starter("agent.py").replace("CALLS = 2", "CALLS = 4");
    let card = check(
        &[("agent.py", &greedy)],
        &["over-budget", "calls-misreported", "tokens-misreported", "digest-drift"],
    );
    assert!(
        evidence(&card, "over-budget").contains("4 rows, over the limit of 3"),
        "{}",
        evidence(&card, "over-budget")
    );
    assert!(
        evidence(&card, "digest-drift").contains("usage.jsonl claims"),
        "{}",
        evidence(&card, "digest-drift")
    );
    // Honest usage for the new code: only the budget fires... but the
    // replay makes four calls and the claim says four: quiet otherwise.
    check(
        &[("agent.py", &greedy), ("usage.jsonl", &usage(&greedy, 4, |_, _| {}))],
        &["over-budget"],
    );
}

#[test]
fn digest_missing_or_changed() {
    let agent = starter("agent.py");
    let edited = format!("{agent}\n# a comment added after the claimed run\n");
    check(&[("agent.py", &edited)], &["digest-drift"]);
    let card = check(
        &[("usage.jsonl", &usage(&agent, 2, |_, r| r["code_sha256"] = "n/a".into()))],
        &["digest-drift"],
    );
    assert!(
        evidence(&card, "digest-drift").contains("carries no digest"),
        "{}",
        evidence(&card, "digest-drift")
    );
}

#[test]
fn a_process_left_running_by_the_replay_is_reported() {
    let leaky = starter("agent.py").replace(
        "if __name__ == \"__main__\":\n    main()",
        "if __name__ == \"__main__\":\n    import subprocess\n    subprocess.Popen([\"sleep\", \"30\"], start_new_session=True)\n    main()",
    );
    let card = check(
        &[("agent.py", &leaky), ("usage.jsonl", &usage(&leaky, 2, |_, _| {}))],
        &["left-running"],
    );
    assert!(
        evidence(&card, "left-running").contains("sleep 30"),
        "{}",
        evidence(&card, "left-running")
    );
}

/// The harness's fakes, exercised by a script inside the real sandbox: every
/// failure mode of the fake endpoint, recovery, and fixed HTTP routes.
#[test]
fn harness_fakes_fail_and_recover_inside_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(
        ws.join("selftest.py"),
        r#"
import http.client, json, sys, urllib.request, urllib.error
sys.path.insert(0, "/workspace/.gatehouse")
from gatehouse_harness import FakeOpenAI, FakeHTTP, emit, measure

def call(url):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
    try:
        return urllib.request.urlopen(req, timeout=2).status
    except urllib.error.HTTPError as e:
        return e.code
    except urllib.error.URLError:
        return "refused"
    except ConnectionError:
        return "dropped"

fake = FakeOpenAI(reply=lambda body: "WARN")
assert call(fake.url) == 200
for mode, want in (("500", 500), ("429", 429), ("refuse", "refused")):
    fake.down(mode)
    got = call(fake.url)
    assert got == want, (mode, got)
    fake.up()
    assert call(fake.url) == 200, mode
# A refused connection never reaches the fake, so it is not recorded.
assert len(fake.calls) == 6, len(fake.calls)
assert [r["mode"] for r in fake.calls] == [None, "500", None, "429", None, None]
log = [json.loads(l) for l in open(fake.log_path)]
assert len(log) == 6 and log[0]["bytes"] > 0
# Each answer's status and reported usage are recorded with its request.
assert [r["status"] for r in log] == [200, 500, 200, 429, 200, 200], log
assert log[0]["usage"]["prompt_tokens"] == log[0]["bytes"] // 4 and "usage" not in log[1]

# Exactly the next two requests fail, then it serves again.
fake.fail_first(2, "429")
assert [call(fake.url) for _ in range(3)] == [429, 429, 200]
fake.fail_first(1, "drop")
assert call(fake.url) == "dropped" and call(fake.url) == 200
assert [r["mode"] for r in fake.calls][-5:] == ["429", "429", None, "drop", None]

http = FakeHTTP({("GET", "/items"): (200, {"items": []}), ("POST", "/echo"): (201, lambda raw: {"n": len(raw)})})
assert urllib.request.urlopen(http.url + "/items").read() == b'{"items": []}'
try:
    urllib.request.urlopen(http.url + "/secret")
    raise AssertionError("no 404")
except urllib.error.HTTPError as e:
    assert e.code == 404
measure("calls", 6)
emit("demo", "harness ok")
"#,
    )
    .unwrap();
    let report = grader::run::run_on_copy(
        crate::grader().sandbox(),
        &ws,
        &dir.path().join("run"),
        |_| Ok(()),
        "python3 selftest.py",
        &grader::sandbox::Limits { wall: std::time::Duration::from_secs(20), ..Default::default() },
        Vec::new(),
    )
    .unwrap()
    .report;
    assert!(report.success(), "{report:?}");
    assert_eq!(
        report.stdout_tail.trim(),
        r#"{"id": "demo", "evidence": "harness ok", "provenance": "replayed"}"#
    );
    let measures =
        std::fs::read_to_string(dir.path().join("run/.gatehouse/evidence/measures.jsonl")).unwrap();
    assert_eq!(measures, "{\"name\": \"calls\", \"value\": 6}\n");
}

#[test]
fn ledger_rows_filtered_with_where() {
    let agent = starter("agent.py");
    check(
        &[(
            "usage.jsonl",
            &usage(&agent, 2, |i, r| {
                if i == 0 {
                    r["note"] = "model".into()
                }
            }),
        )],
        &[],
    );
    let card = check(
        &[("usage.jsonl", &usage(&agent, 2, |_, r| r["note"] = "model".into()))],
        &["model-notes"],
    );
    assert!(
        evidence(&card, "model-notes").contains("2 rows, over the limit of 1"),
        "{}",
        evidence(&card, "model-notes")
    );
}

#[test]
fn scripts_read_what_steps_kept() {
    // An agent that never calls the model: the replay keeps no usage, which
    // the script sees; the claims no longer match either.
    let lazy = starter("agent.py").replace("    main()", "    pass");
    let card = check(
        &[("agent.py", &lazy)],
        &["replay-silent", "calls-misreported", "tokens-misreported", "digest-drift"],
    );
    assert_eq!(evidence(&card, "replay-silent"), "the replay kept no usage rows");
}

#[test]
fn stdlib_only_allows_listed_modules() {
    check(&[("test_agent.py", "import pytest\n\n\ndef test_nothing():\n    pass\n")], &[]);
    let card = check(&[("helper.py", "import requests\n")], &["third-party"]);
    assert_eq!(
        evidence(&card, "third-party"),
        "helper.py:1: imports requests, which is not in the standard library"
    );
}
