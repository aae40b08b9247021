//! The integration API: bearer tokens, assignments, submissions, receipts.

use std::time::Duration;

use gatehouse::auth::password::{random_token, token_hash};
use gatehouse::db::Role;
use serde_json::{Value, json};

use crate::candidate::{app_with_packet, form, invite, sample_zip, wait_final, zip_of};
use crate::support::TestApp;

/// A new user's API token.
pub async fn api_token(app: &TestApp, email: &str, role: Role) -> String {
    let user = app.user(email, role, "correct horse battery").await;
    let token = random_token();
    app.state.db.create_api_token(user.id, "ci", &token_hash(&token)).await.unwrap();
    token
}

#[tokio::test]
async fn api_creates_an_assignment_takes_a_submission_and_serves_the_scorecard() {
    let app = app_with_packet().await;
    let author = api_token(&app, "author@example.com", Role::Author).await;
    let reviewer = api_token(&app, "reviewer@example.com", Role::Reviewer).await;
    let client = TestApp::client();
    let body = json!({ "packet": "null-status", "candidate_name": "Grace Hopper", "email": "grace@example.com",
                       "deadline": "2099-01-31T17:00:00Z", "time_box_minutes": 120 });

    // No token, a bad token and a reviewer's token are refused.
    let r = client.post(app.url("/api/v1/assignments")).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.json::<Value>().await.unwrap()["error"].as_str().unwrap().contains("Bearer"));
    let r = client
        .post(app.url("/api/v1/assignments"))
        .bearer_auth("nope")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = client
        .post(app.url("/api/v1/assignments"))
        .bearer_auth(&reviewer)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let bad = json!({ "packet": "null-status", "candidate_name": "X", "email": "x@example.com", "deadline": "soon" });
    let r = client
        .post(app.url("/api/v1/assignments"))
        .bearer_auth(&author)
        .json(&bad)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.json::<Value>().await.unwrap()["error"].as_str().unwrap().contains("RFC 3339"));

    let r = client
        .post(app.url("/api/v1/assignments"))
        .bearer_auth(&author)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let created: Value = r.json().await.unwrap();
    let token = created["token"].as_str().unwrap().to_string();
    assert_eq!(created["invite_url"], app.url(&format!("/c/{token}")));
    let a = app.state.db.assignment_by_id(created["id"].as_str().unwrap()).await.unwrap().unwrap();
    assert_eq!(a.deadline, 4_073_562_000_000);
    assert_eq!(a.time_box_secs, Some(7200));

    // A hostile zip is refused with the reason.
    let r = client
        .post(app.url("/api/v1/submissions"))
        .bearer_auth(&token)
        .multipart(form(zip_of(&[("../evil.py", b"x")])))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    assert!(r.json::<Value>().await.unwrap()["error"].as_str().unwrap().contains(".."));

    // A good one is accepted.
    let r = client
        .post(app.url("/api/v1/submissions"))
        .bearer_auth(&token)
        .multipart(form(sample_zip()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let sub: Value = r.json().await.unwrap();
    let id = sub["id"].as_str().unwrap().to_string();
    assert_eq!(sub["state"], "queued");
    assert_eq!(sub["sha256"].as_str().unwrap().len(), 64);

    // No receipt before grading.
    let r = client
        .get(app.url(&format!("/api/v1/submissions/{id}/receipt")))
        .bearer_auth(&reviewer)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    let s = wait_final(&app.state, &id, Duration::from_secs(120)).await;
    assert_eq!(s.state.as_str(), "graded");

    let r: Value = client
        .get(app.url(&format!("/api/v1/submissions/{id}")))
        .bearer_auth(&reviewer)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["id"], id.as_str());
    assert_eq!(r["assignment_id"], a.id.as_str());
    assert_eq!(r["state"], "graded");
    assert!(r["received_at"].as_i64().unwrap() > 0);
    let stored: Value = serde_json::from_str(s.scorecard_json.as_deref().unwrap()).unwrap();
    assert_eq!(r["scorecard"], stored);
    assert_eq!(r["decision"], stored["decision"]);
    // Beside it, the provenance of the change per file (no model call: none model-written).
    assert_eq!(r["provenance"]["model_lines"], 0, "{}", r["provenance"]);
    assert!(r["provenance"]["files"].as_array().is_some_and(|f| !f.is_empty()));

    // The candidate's own token reads the state but not the scorecard or receipt.
    let mine: Value = client
        .get(app.url(&format!("/api/v1/submissions/{id}")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(mine["state"], "graded");
    assert!(mine.get("scorecard").is_none() && mine.get("provenance").is_none(), "{mine}");
    let r = client
        .get(app.url(&format!("/api/v1/submissions/{id}/receipt")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    let receipt: Value = client
        .get(app.url(&format!("/api/v1/submissions/{id}/receipt")))
        .bearer_auth(&reviewer)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(receipt, stored["receipt"]);

    // Another candidate's token cannot see it at all.
    let other = invite(&app.state, "Other").await;
    let r = client
        .get(app.url(&format!("/api/v1/submissions/{id}")))
        .bearer_auth(&other.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}
