//! The gate, witnessed: red and green runs on the real sandbox through the
//! candidate's form and the terminal API, the witness section of the page,
//! the submission's record of preceding runs, and the pin file in the
//! starter. They use `packets/refund-invoices` (red on the starter, green on
//! the sample, `model_waits_for_red = true`).

use std::io::Read;
use std::time::{Duration, Instant};

use gatehouse::db::PacketVersion;
use gatehouse::invites::{self, Invite, Invited};
use gatehouse::state::AppState;
use serde_json::Value;

use crate::candidate::{form, zip_of};
use crate::support::{TestApp, repo_root};

const SLUG: &str = "refund-invoices";

/// Copies the packet into the data directory (in a folder named after the
/// slug, as `Packet::load` wants), lets `edit` change its manifest, and
/// publishes it.
async fn publish(state: &AppState, edit: impl FnOnce(String) -> String) -> PacketVersion {
    crate::support::publish_copy(state, SLUG, "1", edit).await
}

async fn invite(state: &AppState, name: &str, deadline: Option<i64>) -> Invited {
    let email = format!("{}@example.com", name.to_lowercase());
    invites::create(
        state,
        None,
        Invite { slug: SLUG, candidate_name: name, email: &email, deadline, time_box_secs: None },
    )
    .await
    .unwrap()
}

/// A zip of every file under the packet's `folder` (recursively).
fn tree_zip(folder: &str) -> Vec<u8> {
    let root = repo_root().join("packets").join(SLUG).join(folder);
    let mut files = Vec::new();
    for path in crate::candidate::files_under(&root) {
        let rel = path.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        files.push((rel, std::fs::read(&path).unwrap()));
    }
    files.sort();
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
    zip_of(&refs)
}

/// Witnesses `kind` through the candidate form, asking for JSON.
async fn witness_json(app: &TestApp, token: &str, kind: &str, zip: Vec<u8>) -> (u16, Value) {
    let request = TestApp::client()
        .post(app.url(&format!("/c/{token}/witness/{kind}")))
        .header("accept", "application/json");
    status_and_json(request, zip).await
}

/// Witnesses `kind` through the terminal API with `token` as the bearer.
async fn witness_api(app: &TestApp, token: &str, kind: &str, zip: Vec<u8>) -> (u16, Value) {
    status_and_json(
        TestApp::client().post(app.url(&format!("/api/v1/witness/{kind}"))).bearer_auth(token),
        zip,
    )
    .await
}

/// Sends `zip` as the upload form's file; the status and the JSON answer.
async fn status_and_json(request: reqwest::RequestBuilder, zip: Vec<u8>) -> (u16, Value) {
    let r = request.multipart(form(zip)).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

/// A fresh app with the packet published as it is, and `name` invited.
async fn app_with_invite(name: &str) -> (TestApp, Invited) {
    let app = TestApp::spawn().await;
    publish(&app.state, |s| s).await;
    let invited = invite(&app.state, name, None).await;
    (app, invited)
}

async fn page(app: &TestApp, token: &str) -> String {
    let r = TestApp::client().get(app.url(&format!("/c/{token}"))).send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.text().await.unwrap()
}

#[tokio::test]
async fn red_on_the_starter_is_accepted_through_the_plain_form() {
    let (app, invited) = app_with_invite("Ada").await;
    let token = &invited.token;
    let before = page(&app, token).await;
    assert!(before.contains("Closed: it opens after a witnessed red."), "{before}");
    assert!(before.contains(&format!("curl -fsS -H &quot;Authorization: Bearer {token}&quot; -F file=@tree.zip {}/api/v1/witness/red", app.base))
        || before.contains(&format!("curl -fsS -H \"Authorization: Bearer {token}\" -F file=@tree.zip {}/api/v1/witness/red", app.base)), "{before}");
    assert!(
        before.contains("/api/v1/witness/green") && before.contains("/api/v1/submissions"),
        "{before}"
    );
    // The steps are numbered once (by the list), with the command as code;
    // each terminal line says what it is for.
    let steps = &before[before.find("class=\"gate-steps\"").unwrap()..];
    let steps = &steps[..steps.find("</ol>").unwrap()];
    assert!(!steps.contains("1. ") && !steps.contains("2. ") && !steps.contains('`'), "{steps}");
    assert!(steps.contains("<code>") && steps.matches("<li>").count() == 3, "{steps}");
    let terminal = &before[before.find("class=\"terminal\"").expect("a labelled terminal list")..];
    for label in
        ["Zip your tree", "Witness red (before the fix)", "Witness green (after the fix)", "Submit"]
    {
        assert!(terminal.contains(label), "{label} in {terminal}");
    }
    assert!(
        terminal.contains("curl-red")
            && terminal.contains("curl-green")
            && terminal.contains("curl-submit"),
        "{terminal}"
    );

    let started = Instant::now();
    let r = TestApp::client()
        .post(app.url(&format!("/c/{token}/witness/red")))
        .multipart(form(tree_zip("starter")))
        .send()
        .await
        .unwrap();
    eprintln!("witnessed red through the form in {:?}", started.elapsed());
    assert_eq!(r.status(), 303);
    let runs = app.state.db.witness_runs_of(&invited.assignment.id).await.unwrap();
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!((run.kind.as_str(), run.accepted, run.refusal.as_deref()), ("red", true, None));
    assert_ne!(run.exit_code, Some(0));
    assert_eq!(r.headers()["location"].to_str().unwrap(), format!("/c/{token}#witness-{}", run.id));
    assert!(run.log.contains("failed"), "{}", run.log);
    assert_eq!(run.tree_sha256.len(), 64);
    let env: Value = serde_json::from_str(&run.env_json).unwrap();
    assert!(
        env["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "python" && t["probed"].is_string()),
        "{env}"
    );
    assert_eq!(
        app.state.db.first_accepted_red_at(&invited.assignment.id).await.unwrap(),
        Some(run.at)
    );

    let after = page(&app, token).await;
    assert!(after.contains(&format!("id=\"witness-{}\"", run.id)), "{after}");
    assert!(after.contains("accepted") && after.contains("<details"), "{after}");
    assert!(after.contains("Open since the witnessed red at"), "{after}");
}

#[tokio::test]
async fn a_passing_red_is_refused_but_recorded_with_its_log() {
    let (app, invited) = app_with_invite("Bea").await;
    let (status, body) = witness_json(&app, &invited.token, "red", tree_zip("sample")).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("the gate wants a failure"), "{body}");
    assert_eq!(body["accepted"], false);
    assert_eq!(body["passed"], true);
    assert_eq!(body["exit_code"], 0);
    assert!(body["log"].as_str().unwrap().contains("passed"), "{body}");
    let runs = app.state.db.witness_runs_of(&invited.assignment.id).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert!(!runs[0].accepted);
    assert!(runs[0].refusal.as_deref().unwrap().contains("the gate wants a failure"));
    assert_eq!(app.state.db.first_accepted_red_at(&invited.assignment.id).await.unwrap(), None);
    let html = page(&app, &invited.token).await;
    assert!(html.contains("refused") && html.contains("the gate wants a failure"), "{html}");
    assert!(html.contains("Closed: it opens after a witnessed red."), "{html}");
}

#[tokio::test]
async fn green_counts_only_after_red_and_only_when_it_passes() {
    let (app, invited) = app_with_invite("Cy").await;
    let token = &invited.token;

    let (status, body) = witness_json(&app, token, "green", tree_zip("sample")).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("only after an accepted red"), "{body}");
    assert_eq!(body["passed"], true);

    let started = Instant::now();
    let (status, red) = witness_json(&app, token, "red", tree_zip("starter")).await;
    eprintln!("witnessed red in {:?} (sandbox wall {} ms)", started.elapsed(), red["wall_ms"]);
    assert_eq!(status, 201, "{red}");
    assert_eq!(red["accepted"], true);

    let (status, body) = witness_json(&app, token, "green", tree_zip("starter")).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("did not pass"), "{body}");

    let started = Instant::now();
    let (status, green) = witness_json(&app, token, "green", tree_zip("sample")).await;
    eprintln!("witnessed green in {:?} (sandbox wall {} ms)", started.elapsed(), green["wall_ms"]);
    assert_eq!(status, 201, "{green}");
    assert_eq!(
        (green["kind"].as_str(), green["accepted"].as_bool(), green["exit_code"].as_i64()),
        (Some("green"), Some(true), Some(0))
    );
    assert_ne!(green["tree_sha256"], red["tree_sha256"]);

    let runs = app.state.db.witness_runs_of(&invited.assignment.id).await.unwrap();
    let summary: Vec<(&str, bool)> = runs.iter().map(|r| (r.kind.as_str(), r.accepted)).collect();
    assert_eq!(summary, vec![("green", false), ("red", true), ("green", false), ("green", true)]);
    assert!(runs.windows(2).all(|w| w[0].at <= w[1].at), "oldest first");
}

#[tokio::test]
async fn the_api_takes_the_link_token_and_keeps_assignments_apart() {
    let app = TestApp::spawn().await;
    publish(&app.state, |s| s).await;
    let one = invite(&app.state, "Dee", None).await;
    let two = invite(&app.state, "Eve", None).await;

    let (status, body) = witness_api(&app, &one.token, "red", tree_zip("starter")).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["accepted"], true);

    // The other assignment sees none of it and cannot add to it.
    assert!(app.state.db.witness_runs_of(&two.assignment.id).await.unwrap().is_empty());
    assert!(!page(&app, &two.token).await.contains(&format!("witness-{}", body["id"])));
    let (status, other) = witness_api(&app, &two.token, "green", tree_zip("sample")).await;
    assert_eq!(status, 422, "another assignment's red does not open this one's green: {other}");
    assert_eq!(app.state.db.witness_runs_of(&one.assignment.id).await.unwrap().len(), 1);

    // No bearer, or a bearer that is no link token: 401.
    let r = TestApp::client()
        .post(app.url("/api/v1/witness/red"))
        .multipart(form(tree_zip("starter")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let (status, body) = witness_api(&app, "not-a-token", "red", tree_zip("starter")).await;
    assert_eq!(status, 401, "{body}");
    let (status, _) = witness_api(&app, &one.token, "blue", tree_zip("starter")).await;
    assert_eq!(status, 404);

    // An expired link: 410 on both doors, nothing recorded.
    let late = invite(&app.state, "Fay", Some(gatehouse::now_ms() + 400)).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (status, body) = witness_api(&app, &late.token, "red", tree_zip("starter")).await;
    assert_eq!(status, 410, "{body}");
    let (status, _) = witness_json(&app, &late.token, "red", tree_zip("starter")).await;
    assert_eq!(status, 410);
    assert!(app.state.db.witness_runs_of(&late.assignment.id).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_submission_records_the_runs_that_preceded_it() {
    let (app, invited) = app_with_invite("Gus").await;
    let (_, red) = witness_api(&app, &invited.token, "red", tree_zip("starter")).await;
    let (_, green) = witness_api(&app, &invited.token, "green", tree_zip("sample")).await;
    assert_eq!(green["accepted"], true, "{green}");

    let r = TestApp::client()
        .post(app.url("/api/v1/submissions"))
        .bearer_auth(&invited.token)
        .multipart(form(tree_zip("sample")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let body: Value = r.json().await.unwrap();
    let witnessed = app
        .state
        .db
        .witnessed_of(body["id"].as_str().unwrap())
        .await
        .unwrap()
        .expect("witnessed_json is set");
    let ids: Vec<i64> = serde_json::from_str(&witnessed).unwrap();
    assert_eq!(ids, vec![red["id"].as_i64().unwrap(), green["id"].as_i64().unwrap()]);

    // A later run does not rewrite what preceded the earlier submission.
    witness_api(&app, &invited.token, "red", tree_zip("starter")).await;
    let again: Vec<i64> = serde_json::from_str(
        &app.state.db.witnessed_of(body["id"].as_str().unwrap()).await.unwrap().unwrap(),
    )
    .unwrap();
    assert_eq!(again, ids);
}

#[tokio::test]
async fn a_hostile_zip_is_refused_with_the_ingest_reason() {
    let (app, invited) = app_with_invite("Hal").await;
    let (status, body) =
        witness_json(&app, &invited.token, "red", zip_of(&[("../escape.py", b"print(1)")])).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("escape.py"), "{body}");
    assert!(app.state.db.witness_runs_of(&invited.assignment.id).await.unwrap().is_empty());
    let (status, body) = witness_json(&app, &invited.token, "red", Vec::new()).await;
    assert_eq!(status, 422, "{body}");
    // The plain form (JavaScript off) shows the page again with the reason.
    let r = TestApp::client()
        .post(app.url(&format!("/c/{}/witness/red", invited.token)))
        .multipart(form(zip_of(&[("../escape.py", b"print(1)")])))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let html = r.text().await.unwrap();
    assert!(html.contains("escape.py") && html.contains("id=\"witness\""), "{html}");
}

#[tokio::test]
async fn a_pin_the_sandbox_does_not_meet_shows_on_the_witness_log() {
    let app = TestApp::spawn().await;
    publish(&app.state, |s| s.replace("python = \"3.11\"", "python = \"2.7\"")).await;
    let invited = invite(&app.state, "Ida", None).await;
    let (status, body) = witness_json(&app, &invited.token, "red", tree_zip("starter")).await;
    assert_eq!(status, 201, "{body}");
    let mismatches = body["environment"]["mismatches"].as_array().unwrap();
    assert!(
        mismatches.iter().any(|m| m
            .as_str()
            .unwrap()
            .starts_with("python is pinned to 2.7 but the sandbox has")),
        "{body}"
    );
    let html = page(&app, &invited.token).await;
    assert!(html.contains("python is pinned to 2.7 but the sandbox has"), "{html}");
}

#[tokio::test]
async fn the_starter_carries_the_pin_file_with_the_probed_python() {
    let (app, invited) = app_with_invite("Jo").await;
    let r = TestApp::client()
        .get(app.url(&format!("/c/{}/starter.zip", invited.token)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let bytes = r.bytes().await.unwrap();
    let mut z = zip::ZipArchive::new(std::io::Cursor::new(bytes.to_vec())).unwrap();
    let mut pin = String::new();
    z.by_name("GATEHOUSE_PIN.toml").unwrap().read_to_string(&mut pin).unwrap();
    let pin: toml_edit::DocumentMut = pin.parse().unwrap();
    let probe = app.state.grader.probe(&["pytest".to_string()]).unwrap();
    assert_eq!(pin["environment"]["probed"]["python"].as_str(), probe.python.as_deref());
    assert_eq!(pin["environment"]["pinned"]["python"].as_str(), Some("3.11"));
    assert_eq!(pin["gate"]["model_waits_for_red"].as_bool(), Some(true));
    let red = pin["gate"]["red"].as_str().unwrap();
    // The link token never goes into the starter (it comes back inside
    // every submission): the curl lines read it from the shell.
    assert_eq!(
        red,
        format!(
            "curl -fsS -H \"Authorization: Bearer $GATEHOUSE_TOKEN\" -F file=@tree.zip {}/api/v1/witness/red",
            app.base
        )
    );
    assert!(!pin.to_string().contains(&invited.token), "the pin file carries the link token");
}

#[tokio::test]
async fn one_witnessed_run_at_a_time_per_assignment() {
    let (app, invited) = app_with_invite("Kim").await;
    let other = invite(&app.state, "Lou", None).await;
    // Warm the probe so the first run's length is the test run alone.
    app.state.grader.probe(&["pytest".to_string()]).unwrap();
    let (base, token) = (app.base.clone(), invited.token.clone());
    let first = tokio::spawn(async move {
        let r = TestApp::client()
            .post(format!("{base}/api/v1/witness/red"))
            .bearer_auth(&token)
            .multipart(form(tree_zip("starter")))
            .send()
            .await
            .unwrap();
        r.status().as_u16()
    });
    tokio::time::sleep(Duration::from_millis(250)).await;
    let (status, body) = witness_api(&app, &invited.token, "red", tree_zip("starter")).await;
    assert_eq!(status, 429, "{body}");
    assert!(body["error"].as_str().unwrap().contains("already in progress"), "{body}");
    // Another assignment is not held up by it.
    let (status, body) = witness_api(&app, &other.token, "red", tree_zip("starter")).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(first.await.unwrap(), 201);
    assert_eq!(app.state.db.witness_runs_of(&invited.assignment.id).await.unwrap().len(), 1);
}
