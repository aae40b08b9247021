//! What a candidate's link can reach: only its own assignment, and never the
//! rubric, the sample, hidden tests, the failure catalog or other candidates.

use std::collections::{BTreeSet, VecDeque};
use std::path::Path;
use std::time::Duration;

use crate::candidate::{
    app_with_packet, files_under, invite, packet_src, sample_zip, upload, wait_final,
};
use crate::support::TestApp;

async fn submit(app: &TestApp, token: &str) -> String {
    let r = upload(&app.base, token, sample_zip(), true).await;
    assert_eq!(r.status(), 201);
    r.json::<serde_json::Value>().await.unwrap()["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_link_token_cannot_read_another_assignment() {
    let app = app_with_packet().await;
    let a = invite(&app.state, "Alice Candidate").await;
    let b = invite(&app.state, "Bob Candidate").await;
    let b_sub = submit(&app, &b.token).await;
    let client = TestApp::client();
    for path in [
        format!("/c/{}/submissions/{b_sub}", a.token),
        format!("/c/{}/submissions/{b_sub}/status", a.token),
    ] {
        let r = client.get(app.url(&path)).send().await.unwrap();
        assert_eq!(r.status(), 404, "{path}");
        let text = r.text().await.unwrap();
        assert!(!text.contains("Bob"), "{text}");
    }
    for path in
        [format!("/api/v1/submissions/{b_sub}"), format!("/api/v1/submissions/{b_sub}/receipt")]
    {
        let r = client.get(app.url(&path)).bearer_auth(&a.token).send().await.unwrap();
        assert_eq!(r.status(), 404, "{path}");
    }
    // A link token is not a session: reviewer pages stay closed.
    let r = client
        .get(app.url(&format!("/submissions/{b_sub}/status")))
        .bearer_auth(&a.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = client.get(app.url("/queue/status")).bearer_auth(&a.token).send().await.unwrap();
    assert_eq!(r.status(), 401);
}

fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#x27;", "'")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Lines of the files under `dir` long enough to be distinctive.
fn distinctive_lines(dir: &Path, allowed: &str) -> Vec<String> {
    let mut out = Vec::new();
    for f in files_under(dir) {
        let Ok(text) = std::fs::read_to_string(&f) else { continue };
        for line in text.lines() {
            let line = line.trim();
            if line.len() >= 25 && !allowed.contains(line) {
                out.push(line.to_string());
            }
        }
    }
    out
}

/// Every same-origin link and form action in `html`.
fn links(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    for attr in ["href=\"", "action=\""] {
        let mut rest = html;
        while let Some(i) = rest.find(attr) {
            rest = &rest[i + attr.len()..];
            let Some(end) = rest.find('"') else { break };
            let url = unescape(&rest[..end]);
            if url.starts_with('/') && !url.starts_with("//") {
                out.push(url);
            }
        }
    }
    out
}

#[tokio::test]
async fn crawling_the_candidate_pages_never_shows_hidden_material() {
    let app = app_with_packet().await;
    let a = invite(&app.state, "Alice Candidate").await;
    let other = invite(&app.state, "Bartholomew Otherperson").await;
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    let mine = submit(&app, &a.token).await;
    submit(&app, &other.token).await;
    let s = wait_final(&app.state, &mine, Duration::from_secs(120)).await;
    assert_eq!(s.state.as_str(), "graded");
    // A refused upload too, so its page state is crawled.
    let r = upload(&app.base, &a.token, b"not a zip".to_vec(), false).await;
    assert_eq!(r.status(), 422);

    // What the candidate may legitimately see: the prompt and the starter.
    let src = packet_src();
    let mut allowed = std::fs::read_to_string(src.join("prompt.md")).unwrap();
    for f in files_under(&src.join("starter")) {
        allowed.push_str(&std::fs::read_to_string(f).unwrap_or_default());
    }
    let packet = grader::packet::Packet::load(&src).unwrap();
    let m = &packet.manifest;
    let mut secrets: Vec<String> = Vec::new();
    for c in &m.criteria {
        secrets.push(c.title.clone());
        secrets.extend(c.levels.iter().cloned());
    }
    for f in &m.failures {
        secrets.push(f.id.clone());
        secrets.push(f.title.clone());
    }
    secrets.extend(distinctive_lines(&src.join("hidden"), &allowed));
    secrets.extend(distinctive_lines(&src.join("detectors"), &allowed));
    secrets.extend(distinctive_lines(&src.join("sample"), &allowed));
    secrets.retain(|s| !allowed.contains(s.as_str()));
    secrets.push("Bartholomew".into());
    secrets.push(other.assignment.id.clone());
    assert!(secrets.len() > 40, "too few hidden strings to check: {}", secrets.len());

    let client = TestApp::client();
    let start = format!("/c/{}", a.token);
    let mut queue =
        VecDeque::from([start.clone(), format!("/c/{}/submissions/{mine}/status", a.token)]);
    let mut seen = BTreeSet::new();
    let mut pages = 0;
    while let Some(path) = queue.pop_front() {
        if !seen.insert(path.clone()) || seen.len() > 200 {
            continue;
        }
        let r = client.get(app.url(&path)).send().await.unwrap();
        let binary = r
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.contains("zip"));
        if binary {
            continue;
        }
        let body = r.text().await.unwrap();
        pages += 1;
        let text = unescape(&body);
        for secret in &secrets {
            assert!(!text.contains(secret.as_str()), "{path} shows hidden material: {secret:?}");
        }
        for link in links(&body) {
            if !link.starts_with("/style/") && !link.starts_with("/pkg/") {
                queue.push_back(link);
            }
        }
    }
    assert!(pages >= 3, "crawled only {pages} pages: {seen:?}");
    assert!(
        seen.iter().any(|p| p.contains("/submissions/")),
        "the receipt was not reached: {seen:?}"
    );
}
