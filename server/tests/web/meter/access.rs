//! Keys and models: who may call, when, through which upstream; the candidate page.

use gatehouse::now_ms;
use serde_json::{Value, json};

use super::*;

#[tokio::test]
async fn models_are_listed_and_keys_checked() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 5", false, |_| {}).await;
    let r = reqwest::Client::new()
        .get(m.app.url("/v1/models"))
        .bearer_auth(&m.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["data"][0]["id"], "fake-model");

    let r = reqwest::Client::new().get(m.app.url("/v1/models")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let (status, body) =
        call(&m.app, "gh-0000000000000000000000000000000000000000", &chat("hi")).await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["type"], "invalid_api_key");
    // The link token is not a model key.
    let (status, _) = call(&m.app, &m.token, &chat("hi")).await;
    assert_eq!(status, 401);
    assert_eq!(up.hits(), 0);
    assert!(ledger(&m.app, &m.assignment).await.is_empty());
    // The key follows the contract and the upstream gets the operator's key.
    assert_eq!(m.key, gatehouse::meter::model_key(1, &m.token));
    let (status, _) = call(&m.app, &m.key, &chat("hi")).await;
    assert_eq!(status, 200);
    assert_eq!(up.last_auth.lock().unwrap().as_deref(), Some("Bearer sk-upstream"));
}

#[tokio::test]
async fn model_waits_for_a_witnessed_red() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 5", true, |_| {}).await;
    let (status, body) = call(&m.app, &m.key, &chat("too early")).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["type"], "model_window_closed");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("the model window opens after a witnessed red run")
    );
    assert_eq!(up.hits(), 0);
    let status_json: Value = reqwest::get(m.app.url(&format!("/c/{}/meter", m.token)))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status_json["window_open"], false);

    // An unaccepted red does not open it.
    sql(&m.app, &format!("INSERT INTO witness_runs (assignment_id, kind, at, accepted, log, tree_sha256, env_json) VALUES (?, 'red', {}, 0, 'passed', 'abc', '{{}}')", now_ms()), &m.assignment).await;
    assert_eq!(call(&m.app, &m.key, &chat("still early")).await.0, 403);

    witness_red(&m.app, &m.assignment).await;
    let (status, body) = call(&m.app, &m.key, &chat("now")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "Hello there");
    assert_eq!(up.hits(), 1);

    let calls = ledger(&m.app, &m.assignment).await;
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0].refused.as_deref(), Some("model_window"));
    assert_eq!(calls[0].status, 403);
    assert_eq!(calls[1].refused.as_deref(), Some("model_window"));
    assert_eq!(calls[2].refused, None);
    assert_eq!(calls[2].status, 200);
    assert_eq!(
        (calls[2].prompt_tokens, calls[2].completion_tokens, calls[2].tokens_estimated),
        (10, 5, false)
    );
    assert!(calls[2].response_bytes > 0 && calls[2].request_bytes > 0);
    assert_eq!(calls[2].model, "fake-model");
}

#[tokio::test]
async fn a_key_meters_only_its_own_assignment() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 1", false, |_| {}).await;
    let other = invite(&m.app.state, "Grace").await;
    let other_key = key_of(&m.app, &other.token).await;
    assert_ne!(other_key, m.key);
    assert_eq!(call(&m.app, &other_key, &chat("mine")).await.0, 200);
    // The other key's budget is spent; it never spends this one's.
    assert_eq!(call(&m.app, &other_key, &chat("mine again")).await.0, 429);
    assert_eq!(call(&m.app, &m.key, &chat("first")).await.0, 200);
    assert_eq!(up.hits(), 2);
    let mine = ledger(&m.app, &m.assignment).await;
    let theirs = ledger(&m.app, &other.assignment.id).await;
    assert_eq!(mine.len(), 1);
    assert_eq!(theirs.len(), 2);
    assert!(theirs.iter().all(|c| c.assignment_id == other.assignment.id));
    // The same body in two assignments is no duplicate.
    assert_eq!(mine[0].duplicate_of, None);
}

#[tokio::test]
async fn expired_assignment_refuses_its_key() {
    let (url, up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 5", false, |_| {}).await;
    sql(
        &m.app,
        &format!("UPDATE assignments SET deadline = {} WHERE id = ?", now_ms() - 1000),
        &m.assignment,
    )
    .await;
    let (status, body) = call(&m.app, &m.key, &chat("late")).await;
    assert_eq!(status, 401);
    assert!(body["error"]["message"].as_str().unwrap().contains("expired"), "{body}");
    let r = reqwest::Client::new()
        .get(m.app.url("/v1/models"))
        .bearer_auth(&m.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(up.hits(), 0);
    let calls = ledger(&m.app, &m.assignment).await;
    assert_eq!(calls[0].refused.as_deref(), Some("expired"));
}

#[tokio::test]
async fn time_box_over_refuses_with_429() {
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "time_box_minutes = 1", false, |_| {}).await;
    sql(
        &m.app,
        &format!("UPDATE assignments SET started_at = {} WHERE id = ?", now_ms() - 61_000),
        &m.assignment,
    )
    .await;
    let (status, body) = call(&m.app, &m.key, &chat("late")).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["cap"], "time_box_minutes");
    assert_eq!(body["error"]["limit"], 1);
}

#[tokio::test]
async fn revoked_key_is_refused_and_the_new_one_works() {
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 5", false, |_| {}).await;
    // Two calls: the first starts the assignment, after which the meter
    // keeps the key's facts in memory; the second is served from there.
    let hash = gatehouse::auth::password::token_hash(&m.key);
    for i in 0..2 {
        assert_eq!(call(&m.app, &m.key, &chat(&format!("warm {i}"))).await.0, 200);
    }
    assert!(
        m.app.state.memo.meter.key(&hash).is_ok(),
        "the key is kept after the assignment started"
    );
    let a = m.app.state.db.assignment_by_id(&m.assignment).await.unwrap().unwrap();
    let new_key = gatehouse::meter::reissue_key(&m.app.state, &a, &m.token).await.unwrap();
    assert!(m.app.state.memo.meter.key(&hash).is_err(), "revoking forgets the kept key");
    assert_eq!(new_key, gatehouse::meter::model_key(2, &m.token));
    let (status, body) = call(&m.app, &m.key, &chat("old")).await;
    assert_eq!(status, 401);
    assert!(body["error"]["message"].as_str().unwrap().contains("revoked"), "{body}");
    assert_eq!(call(&m.app, &new_key, &chat("new")).await.0, 200);
    assert_eq!(key_of(&m.app, &m.token).await, new_key);
    let calls = ledger(&m.app, &m.assignment).await;
    assert_eq!(calls[2].refused.as_deref(), Some("revoked"));
    assert_eq!(calls[3].refused, None);
}

#[tokio::test]
async fn authors_revoke_the_key_and_a_reissued_link_brings_a_new_one() {
    let (url, _up) = spawn_upstream().await;
    let m = setup(Some(&url), "model_calls = 5", false, |_| {}).await;
    let (reviewer, reviewer_csrf) =
        crate::auth::signed_in(&m.app, gatehouse::db::Role::Reviewer).await;
    let (author, csrf) = crate::auth::signed_in(&m.app, gatehouse::db::Role::Author).await;
    let page = |client: &reqwest::Client| {
        let client = client.clone();
        let url = m.app.url(&format!("/assignments/{}", m.assignment));
        async move { client.get(url).send().await.unwrap().text().await.unwrap() }
    };
    // A reviewer sees no action and cannot revoke; an author sees both forms.
    assert!(!page(&reviewer).await.contains("revoke-model-key"));
    let revoke = m.app.url(&format!("/assignments/{}/model-key/revoke", m.assignment));
    let r = reviewer.post(&revoke).form(&[("csrf", reviewer_csrf.as_str())]).send().await.unwrap();
    assert_eq!(r.status(), 403);
    assert!(page(&author).await.contains("revoke-model-key"));
    let r = author.post(&revoke).form(&[("csrf", "wrong")]).send().await.unwrap();
    assert_eq!(r.status(), 403, "a wrong CSRF token changes nothing");
    assert_eq!(call(&m.app, &m.key, &chat("still on")).await.0, 200);

    let r = author.post(&revoke).form(&[("csrf", csrf.as_str())]).send().await.unwrap();
    assert_eq!(r.status(), 303);
    let (status, body) = call(&m.app, &m.key, &chat("after revoke")).await;
    assert_eq!(status, 401);
    assert!(body["error"]["message"].as_str().unwrap().contains("revoked"), "{body}");
    assert!(!page(&author).await.contains("revoke-model-key"), "no active key is left to revoke");
    let audit = m
        .app
        .state
        .db
        .audit_entries(Some(&format!("assignment:{}", m.assignment)), 10)
        .await
        .unwrap();
    assert!(audit.iter().any(|e| e.action == "assignment.model_key.revoke"), "{audit:?}");

    // Reissuing the link kills the old link and brings a key derived from the new one.
    let r = author
        .post(m.app.url(&format!("/assignments/{}/reissue", m.assignment)))
        .form(&[("csrf", csrf.as_str()), ("confirm", "yes")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let invited = author
        .get(m.app.url(&format!("/assignments/{}/invited", m.assignment)))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let start = invited.find("/c/").expect("the invited page shows the new link");
    let token: String =
        invited[start + 3..].chars().take_while(|c| c.is_ascii_hexdigit()).collect();
    assert_eq!(token.len(), 64, "{invited}");
    assert_ne!(token, m.token);
    let new_key = key_of(&m.app, &token).await;
    assert_eq!(call(&m.app, &new_key, &chat("new link")).await.0, 200);
    assert_eq!(call(&m.app, &m.key, &chat("old key")).await.0, 401);
}

#[tokio::test]
async fn no_upstream_is_a_503() {
    let m = setup(None, "model_calls = 5", false, |_| {}).await;
    let (status, body) = call(&m.app, &m.key, &chat("anyone?")).await;
    assert_eq!(status, 503);
    assert_eq!(body["error"]["type"], "upstream_not_configured");
    let r = reqwest::Client::new()
        .get(m.app.url("/v1/models"))
        .bearer_auth(&m.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
}

#[tokio::test]
async fn per_packet_upstream_overrides_the_global_one() {
    let (url, up) = spawn_upstream().await;
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    let m = setup(Some(&format!("http://{closed}/v1")), "model_calls = 5", false, move |c| {
        c.model_upstreams.insert(
            SLUG.into(),
            gatehouse::config::ModelUpstream { url, key: Some("sk-packet".into()) },
        );
    })
    .await;
    assert_eq!(call(&m.app, &m.key, &chat("hi")).await.0, 200);
    assert_eq!(up.last_auth.lock().unwrap().as_deref(), Some("Bearer sk-packet"));
}

#[tokio::test]
async fn candidate_page_shows_key_endpoint_and_budgets_left() {
    let (url, _up) = spawn_upstream().await;
    let m =
        setup(Some(&url), "model_calls = 3\ntokens = 100\ntime_box_minutes = 90", false, |_| {})
            .await;
    assert_eq!(call(&m.app, &m.key, &chat("one")).await.0, 200);
    let html =
        reqwest::get(m.app.url(&format!("/c/{}", m.token))).await.unwrap().text().await.unwrap();
    assert!(html.contains(&m.key), "the page shows the key");
    assert!(html.contains(&format!("{}/v1", m.app.base)), "the page shows the endpoint");
    assert!(
        html.contains(&format!("/c/{}/meter", m.token)),
        "the live budget polls the meter status"
    );
    let row = html.split("data-cap=\"model_calls\"").nth(1).expect("a model_calls row");
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains(">1<") && row.contains(">2<") && row.contains(">3<"),
        "used 1, left 2, limit 3: {row}"
    );
    assert!(html.contains("data-cap=\"tokens\""));

    let status: Value = reqwest::get(m.app.url(&format!("/c/{}/meter", m.token)))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["caps"][1], json!({"cap": "tokens", "limit": 100, "used": 15, "left": 85}));
    assert_eq!(
        status["caps"][2],
        json!({"cap": "time_box_minutes", "limit": 90, "used": 0, "left": 90})
    );
    assert_eq!(status["window_open"], true);
    assert_eq!(status["endpoint"], format!("{}/v1", m.app.base));
    // An unknown link has no meter.
    assert_eq!(reqwest::get(m.app.url("/c/nope/meter")).await.unwrap().status(), 404);
}

#[tokio::test]
async fn models_outside_the_packets_list_are_refused_and_recorded() {
    let (url, up) = spawn_upstream().await;
    let m = setup(
        Some(&url),
        "model_calls = 5\nmodels = [\"fake-model\", \"fake-mini\"]",
        false,
        |_| {},
    )
    .await;
    assert_eq!(call(&m.app, &m.key, &chat("allowed")).await.0, 200);
    let mut body = chat("not allowed");
    body["model"] = json!("gpt-9-ultra");
    let (status, answer) = call(&m.app, &m.key, &body).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["type"], "model_not_allowed");
    assert_eq!(answer["error"]["allowed"], json!(["fake-model", "fake-mini"]));
    assert!(answer["error"]["message"].as_str().unwrap().contains("\"gpt-9-ultra\""), "{answer}");
    assert_eq!(up.hits(), 1);
    let calls = ledger(&m.app, &m.assignment).await;
    assert_eq!(
        (calls[1].refused.as_deref(), calls[1].status, calls[1].model.as_str()),
        (Some("model"), 400, "gpt-9-ultra")
    );
}
