//! The OpenAPI contract of `/api/v1` (#31, part 4): the document the server
//! generates covers every `/api/v1` route with its auth and error shapes,
//! and `schemathesis` (PyPI), run against a live server with an API token
//! and with a link token, finds no 5xx and no answer the document does not
//! describe (status, content type, body schema).

use std::collections::BTreeSet;
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

/// `schemathesis run` of the document at `schema` (a path) against the
/// live server with `token` as the bearer, and `extra` arguments; its
/// output, `Err` when it found a failure.
fn schemathesis(
    app: &TestApp,
    schema: &str,
    token: &str,
    examples: u32,
    extra: &[&str],
) -> Result<String, String> {
    // Its database of examples (`.hypothesis/`) goes to a folder of its own.
    let scratch = tempfile::tempdir().unwrap();
    let out = Command::new(crate::support::tool("schemathesis"))
        .current_dir(scratch.path())
        .args(["run", &app.url(schema)])
        .args(["--url", &app.url("")])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
        ])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args(["--max-examples", &examples.to_string()])
        .args(["--phases", "examples,coverage,fuzzing"])
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error_and_nothing_off_the_document() {
    let app = TestApp::spawn_routes(
        |_| {},
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
    crate::candidate::publish_packet(&app.state).await;
    let author = api_token(&app, "author@example.com", Role::Author).await;
    let invited = crate::candidate::invite(&app.state, "Ada Lovelace").await;
    let examples =
        std::env::var("SCHEMATHESIS_EXAMPLES").ok().and_then(|v| v.parse().ok()).unwrap_or(25);
    for (who, token) in [("an API token", author.as_str()), ("a link token", &invited.token)] {
        let (app, token) = (&app, token.to_string());
        let run = tokio::task::block_in_place(|| {
            schemathesis(app, "/api/v1/openapi.json", &token, examples, &[])
        });
        match run {
            Err(out) => panic!("schemathesis with {who} found answers off the document:\n{out}"),
            // It ran: every operation, and a case at least per operation.
            Ok(out) => assert!(out.contains("Tested: 5") && out.contains(" passed"), "{out}"),
        }
    }
    // The same fuzzer flags a status the document leaves out.
    let run = tokio::task::block_in_place(|| {
        let only = ["--include-path", "/api/v1/assignments"];
        schemathesis(&app, WITHOUT_400, &author, 10, &only)
    });
    let out = run.expect_err("an undocumented 400 is found");
    assert!(out.contains("Undocumented status code") && out.contains("Received: 400"), "{out}");
}
