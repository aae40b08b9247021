//! The OpenAPI contract of `/api/v1` (#31, part 4): the document the server
//! generates covers every `/api/v1` route with its auth and error shapes,
//! and `schemathesis` (PyPI), run against a live server with an API token
//! and with a link token, finds no 5xx and no answer the document does not
//! describe (status, content type, body schema).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use gatehouse::db::Role;
use serde_json::Value;

use crate::api::api_token;
use crate::support::TestApp;

#[tokio::test]
async fn the_document_covers_every_api_route_with_its_auth_and_errors() {
    let app = TestApp::spawn().await;
    let r = TestApp::client().get(app.url("/api/v1/openapi.json")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
    let doc: Value = r.json().await.unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"), "{}", doc["openapi"]);
    assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");

    // Every /api/v1 route the server serves, and nothing else.
    let served: BTreeSet<String> = gatehouse::web::routes()
        .paths()
        .iter()
        .filter(|p| p.starts_with("/api/v1/"))
        .map(|p| p.to_string())
        .collect();
    let documented: BTreeSet<String> = doc["paths"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(documented, served);

    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let what = format!("{method} {path}");
            let responses = op["responses"].as_object().unwrap();
            assert!(responses.keys().any(|s| s.starts_with('2')), "{what}: a success");
            if path.ends_with("openapi.json") {
                assert!(op.get("security").is_none(), "{what} is public");
                continue;
            }
            assert_eq!(op["security"], serde_json::json!([{ "bearer": [] }]), "{what}");
            assert!(responses.contains_key("401"), "{what}: 401 documented");
            // Every error is `{"error"}` (a 422 of a witnessed run also
            // carries the run).
            for (status, resp) in responses.iter().filter(|(s, _)| !s.starts_with('2')) {
                let schema = &resp["content"]["application/json"]["schema"];
                let text = schema.to_string();
                assert!(
                    text.contains("#/components/schemas/ApiError")
                        || text.contains("#/components/schemas/WitnessRefused"),
                    "{what} {status}: {text}"
                );
            }
        }
    }
    // The links a client follows from an assignment to its submission and
    // receipt (#46), each naming an operation of the document by its
    // OpenAPI field name.
    let ids: BTreeSet<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|item| item.as_object().unwrap().values())
        .filter_map(|op| op["operationId"].as_str())
        .collect();
    let mut links = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            for (status, resp) in op["responses"].as_object().unwrap() {
                for (name, link) in resp["links"].as_object().into_iter().flatten() {
                    let target = link["operationId"].as_str().unwrap_or_else(|| panic!("{link}"));
                    assert!(ids.contains(target), "{method} {path} {status} {name}: {target}");
                    assert!(link.get("operation_id").is_none(), "{link}");
                    links.insert(format!("{method} {path} {status} -> {target}"));
                }
            }
        }
    }
    for expected in [
        "post /api/v1/assignments 201 -> create_submission",
        "post /api/v1/submissions 201 -> get_submission",
        "post /api/v1/submissions 201 -> get_receipt",
        "get /api/v1/submissions/{id} 200 -> get_receipt",
    ] {
        assert!(links.contains(expected), "{expected} in {links:?}");
    }
    let error = &doc["components"]["schemas"]["ApiError"];
    assert_eq!(error["required"], serde_json::json!(["error"]), "{error}");

    // Text a backend cannot store, and ids no submission has, are the
    // request's fault on both backends (Postgres refuses a NUL byte).
    let token = api_token(&app, "author@example.com", Role::Author).await;
    let client = TestApp::client();
    let create = |body: Value| {
        let (client, url, token) = (client.clone(), app.url("/api/v1/assignments"), token.clone());
        async move { client.post(url).bearer_auth(token).json(&body).send().await.unwrap() }
    };
    for (body, says) in [
        (
            serde_json::json!({"packet": "a\u{0}b", "candidate_name": "Ada", "email": "a@example.com"}),
            "",
        ),
        (
            serde_json::json!({"packet": "x", "candidate_name": "Ada\u{7}", "email": "a@example.com"}),
            "control characters",
        ),
        (
            serde_json::json!({"packet": "x", "candidate_name": "Ada", "email": "a\u{0}@example.com"}),
            "not an email",
        ),
        (
            serde_json::json!({"packet": "x", "candidate_name": "Ada", "email": "a@example.com", "time_box_minutes": i64::MAX}),
            "out of range",
        ),
    ] {
        let r = create(body.clone()).await;
        assert_eq!(r.status(), 400, "{body}");
        let answer: Value = r.json().await.unwrap();
        assert!(answer["error"].as_str().unwrap().contains(says), "{body}: {answer}");
    }
    for id in ["a%00b", "%07", &"a".repeat(65)] {
        let r = client
            .get(app.url(&format!("/api/v1/submissions/{id}")))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{id}");
    }
}

/// `schemathesis run` of the document at `schema` (a file, or a URL)
/// against the live server, with `extra` arguments and environment `env`;
/// its output, `Err` when it found a failure.
fn schemathesis(
    app: &TestApp,
    schema: &str,
    examples: u32,
    extra: &[&str],
    env: &[(&str, String)],
) -> Result<String, String> {
    // Its database of examples (`.hypothesis/`) goes to a folder of its own.
    let scratch = tempfile::tempdir().unwrap();
    let out = Command::new(crate::support::tool("schemathesis"))
        .current_dir(scratch.path())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .args(["run", schema])
        .args(["--url", &app.url("")])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
        ])
        .args(["--max-examples", &examples.to_string()])
        // One worker: with two, hypothesis's lambda descriptions race in
        // CPython 3.11's `ast.parse` ("AST constructor recursion depth
        // mismatch", a runtime error of the tool, not a finding).
        .args(["--seed", "20261204", "--workers", "1", "--no-color"])
        // A witnessed run answers when its sandboxed test run ends: on a
        // loaded 2-core machine that can be longer than the tool's default
        // 10 s, which it reports as an error of the operation.
        .args(["--request-timeout", "180"])
        .args(extra)
        .output()
        .expect("schemathesis (scripts/setup installs it from requirements-tools.txt)");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() { Ok(text) } else { Err(text) }
}

/// The served document with one documented status taken out: `400` of
/// `POST /api/v1/assignments`, which the server does answer.
const WITHOUT_400: &str = "/test/openapi-without-400.json";

/// Every operation of the document (`METHOD /path`), and the statuses the
/// fuzz's log (`schemathesis_hooks.py`) says each answered.
fn reached(doc: &Value, log: &str) -> BTreeMap<String, BTreeSet<u16>> {
    let mut out: BTreeMap<String, BTreeSet<u16>> = BTreeMap::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            out.entry(format!("{} {path}", method.to_uppercase())).or_default();
        }
    }
    for line in log.lines() {
        let (method, path, status): (String, String, u16) = serde_json::from_str(line).unwrap();
        out.entry(format!("{method} {path}")).or_default().insert(status);
    }
    out
}

/// The contract fuzzed in depth (#46): schemathesis runs every phase,
/// stateful included (following the document's links from an assignment
/// to its submission and receipt), each operation with its own credential
/// (`schemathesis_hooks.py`: an API token, or the link token for
/// submitting and witnessed runs) and with the bodies and ids a real client
/// sends beside the made-up ones, on a server whose rate limits are raised
/// for the run. Every operation is reached with a success at least once,
/// none answers 5xx, every answer is as the document says; the statuses
/// each operation answered are printed (the closing note's table).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateful_fuzz_reaches_every_operation_with_its_own_credential() {
    let app = TestApp::spawn_routes(
        |c| {
            c.api_assignments_per_minute = 1_000_000;
            c.max_pending_jobs = 10_000;
            // Each accepted witnessed tree is a sandbox run: two at most.
            c.max_witness_runs = 2;
        },
        |r| {
            r.route(
                WITHOUT_400,
                axum::routing::get(|| async {
                    let mut doc: Value =
                        serde_json::from_str(gatehouse::web::api::openapi_document()).unwrap();
                    let responses = &mut doc["paths"]["/api/v1/assignments"]["post"]["responses"];
                    responses.as_object_mut().unwrap().remove("400").unwrap();
                    axum::Json(doc)
                }),
            )
        },
    )
    .await;
    let state = &app.state;
    crate::candidate::publish_packet(state).await;
    // The packet of the document's example request.
    crate::support::publish_copy(state, "refund-invoices", "1", |toml| toml).await;
    let author = api_token(&app, "author@example.com", Role::Author).await;
    let invited = crate::candidate::invite(state, "Ada Lovelace").await;
    state
        .db
        .set_assignment_policy(&invited.assignment.id, gatehouse::db::ResultsRelease::Never, 100)
        .await
        .unwrap();
    // A graded submission, whose receipt the fuzz may read; then no worker
    // runs (the fuzz's own submissions wait in the queue).
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let workers = gatehouse::queue::spawn_workers_until(state, 1, stopped);
    let sample = crate::candidate::sample_zip();
    let r = crate::candidate::upload(&app.base, &invited.token, sample.clone(), true).await;
    assert_eq!(r.status(), 201);
    let graded = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    let s = crate::candidate::wait_final(state, &graded, std::time::Duration::from_secs(180)).await;
    assert_eq!(s.state.as_str(), "graded", "{:?}", s.error);
    stop.send(true).unwrap();
    for w in workers {
        w.await.unwrap();
    }

    let scratch = tempfile::tempdir().unwrap();
    let file = |name: &str, bytes: &[u8]| {
        let path = scratch.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    };
    let red = crate::erasure::starter_zip();
    let log = scratch.path().join("calls.jsonl");
    let hooks = crate::support::repo_root().join("server/tests/web/schemathesis_hooks.py");
    let env = [
        ("SCHEMATHESIS_HOOKS", hooks.display().to_string()),
        ("GH_FUZZ_API_TOKEN", author.clone()),
        ("GH_FUZZ_LINK_TOKEN", invited.token.clone()),
        ("GH_FUZZ_GRADED_ID", graded.clone()),
        ("GH_FUZZ_SUBMISSION_ZIP", file("submission.zip", &sample)),
        ("GH_FUZZ_RED_ZIP", file("red.zip", &red)),
        ("GH_FUZZ_LOG", log.display().to_string()),
    ];
    let examples =
        std::env::var("SCHEMATHESIS_EXAMPLES").ok().and_then(|v| v.parse().ok()).unwrap_or(25);
    let phases = ["--phases", "examples,coverage,fuzzing,stateful"];
    let started = std::time::Instant::now();
    // The served document, from a file: loaded from its own URL, the
    // fuzzer would leave that operation out.
    let served = TestApp::client().get(app.url("/api/v1/openapi.json")).send().await.unwrap();
    let doc: Value = served.json().await.unwrap();
    let schema = file("openapi.json", doc.to_string().as_bytes());
    let run = tokio::task::block_in_place(|| schemathesis(&app, &schema, examples, &phases, &env));
    let took = started.elapsed();
    let out = match run {
        Ok(out) => out,
        Err(out) => panic!("schemathesis found answers off the document:\n{out}"),
    };
    let table = reached(&doc, &std::fs::read_to_string(&log).unwrap_or_default());
    // The table of the closing note: each operation of the document, and
    // the methods its paths do not take (tried by the coverage phase).
    let documented: BTreeSet<String> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object().unwrap().keys().map(move |m| format!("{} {path}", m.to_uppercase()))
        })
        .collect();
    let show =
        |codes: &BTreeSet<u16>| codes.iter().map(u16::to_string).collect::<Vec<_>>().join(", ");
    let mut shown: Vec<String> =
        documented.iter().map(|op| format!("| `{op}` | {} |", show(&table[op]))).collect();
    let others: BTreeSet<u16> = table
        .iter()
        .filter(|(op, _)| !documented.contains(*op))
        .flat_map(|(_, c)| c)
        .copied()
        .collect();
    let tried = table.keys().filter(|op| !documented.contains(*op)).count();
    shown.push(format!("| any other method on these paths ({tried} tried) | {} |", show(&others)));
    eprintln!("fuzzed in {took:.1?}:\n| operation | statuses |\n|---|---|\n{}", shown.join("\n"));
    // Every operation of the document succeeded at least once; nothing
    // (nor a method a path does not take) answered 5xx.
    for op in &documented {
        let codes = &table[op];
        assert!(
            codes.iter().any(|c| (200..300).contains(c)),
            "{op} never succeeded: {codes:?}\n{out}"
        );
    }
    for (op, codes) in &table {
        assert!(codes.iter().all(|c| *c < 500), "{op} answered {codes:?}\n{out}");
    }
    // The stateful phase ran and followed every link of the document
    // (`API Links: 4 covered / 4 selected / 4 total`).
    let links = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("API Links:"))
        .unwrap_or_else(|| panic!("no stateful phase:\n{out}"));
    let counts: Vec<u32> = links.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    assert!(counts.len() == 3 && counts[0] == counts[2] && counts[0] >= 4, "links: {links}\n{out}");
    eprintln!(
        "{}",
        out.lines()
            .filter(|l| l.contains("passed") || l.contains("API Links") || l.contains(" in "))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // The same fuzzer flags a status the document leaves out.
    let run = tokio::task::block_in_place(|| {
        let auth = format!("Authorization: Bearer {author}");
        let args = [
            "--include-path",
            "/api/v1/assignments",
            "--phases",
            "examples,coverage,fuzzing",
            "--header",
            &auth,
        ];
        schemathesis(&app, &app.url(WITHOUT_400), 10, &args, &[])
    });
    let out = run.expect_err("an undocumented 400 is found");
    assert!(out.contains("Undocumented status code") && out.contains("Received: 400"), "{out}");
}
