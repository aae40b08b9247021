//! Assignments: inviting a candidate, the link shown once, reissue, the list.

use gatehouse::auth::password::token_hash;
use gatehouse::db::Role;
use reqwest::StatusCode;

use crate::auth::{page, signed_in};
use crate::library::null_status;
use crate::support::TestApp;

/// An app with null-status published as a built-in.
async fn app_with_packet() -> (TestApp, tempfile::TempDir) {
    let packets = tempfile::tempdir().unwrap();
    grader::tree::copy_path(&null_status(), &packets.path().join("null-status")).unwrap();
    let dir = packets.path().to_path_buf();
    let app = TestApp::spawn_with(move |c| c.packets_dir = dir).await;
    gatehouse::library::load_builtin(&app.state).await.unwrap();
    (app, packets)
}

/// The invite link on an "invited" page, if shown (the copyable field's value).
pub fn invite_url(html: &str) -> Option<String> {
    let at = html.find(r#"id="invite-url""#)?;
    let start = html[..at].rfind('<')?;
    let tag = &html[start..at + html[at..].find('>')?];
    let v = tag.find(r#"value=""#)? + r#"value=""#.len();
    Some(tag[v..].split('"').next().unwrap().to_string())
}

#[tokio::test]
async fn invite_stores_only_the_token_hash_and_shows_the_link_once() {
    let (app, _packets) = app_with_packet().await;
    let (client, csrf) = signed_in(&app, Role::Author).await;
    let html =
        page(&client, app.url("/assignments/new?packet=null-status")).await.text().await.unwrap();
    assert!(html.contains(r#"type="datetime-local""#) && html.contains("null-status"));

    let post = async |name: &str, deadline: &str, time_box: &str| {
        client
            .post(app.url("/assignments"))
            .form(&[
                ("csrf", csrf.as_str()),
                ("packet", "null-status"),
                ("candidate_name", name),
                ("email", "cand@example.test"),
                ("deadline", deadline),
                ("time_box_minutes", time_box),
            ])
            .send()
            .await
            .unwrap()
    };
    let check = async |name: &str, deadline: &str, time_box: &str, message: &str| {
        let r = post(name, deadline, time_box).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{name} {deadline} {time_box}");
        let body = r.text().await.unwrap();
        assert!(body.contains(message), "{message} in {body}");
    };
    check("Cy", "next week", "", "is not a date and time").await;
    check("Cy", "2001-01-01T00:00", "", "the deadline is in the past").await;
    check("Cy", "2099-01-01T00:00", "ninety", "is not a whole number of minutes").await;
    check("  ", "2099-01-01T00:00", "", "candidate name is empty").await;
    assert!(app.state.db.list_assignments(None).await.unwrap().is_empty());

    let r = post("Cy Candidate", "2099-01-01T12:30", "90").await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let to = r.headers()["location"].to_str().unwrap().to_string();
    let html = page(&client, app.url(&to)).await.text().await.unwrap();
    let url =
        invite_url(&html).unwrap_or_else(|| panic!("the link is shown the first time: {html}"));
    let token = url.rsplit_once("/c/").unwrap().1.to_string();
    assert!(url.starts_with(&app.base), "{url}");
    assert_eq!(token.len(), 64);
    assert!(html.contains("it will not be shown again"), "said before it is gone: {html}");
    let again = page(&client, app.url(&to)).await.text().await.unwrap();
    assert!(invite_url(&again).is_none(), "shown once");
    assert!(again.contains("The link was shown once") && again.contains("reissue"), "{again}");

    let a = app
        .state
        .db
        .assignment_by_token_hash(&token_hash(&token))
        .await
        .unwrap()
        .expect("found by the token's hash");
    assert!(
        app.state.db.assignment_by_token_hash(&token).await.unwrap().is_none(),
        "the token itself is not stored"
    );
    assert_eq!(
        (a.candidate_name.as_str(), a.state.as_str(), a.time_box_secs),
        ("Cy Candidate", "invited", Some(5400))
    );
    assert_eq!(
        a.deadline,
        gatehouse::web::assignments::parse_datetime_local("2099-01-01T12:30").unwrap()
    );
    assert_eq!(a.version, Some(1));

    // The list, filtered by packet, links to the assignment.
    let html =
        page(&client, app.url("/assignments?packet=null-status")).await.text().await.unwrap();
    assert!(
        html.contains("Cy Candidate")
            && html.contains(&format!("/assignments/{}", a.id))
            && html.contains("invited")
    );
    assert!(html.contains("2099-01-01 12:30 UTC"));
    let html = page(&client, app.url("/assignments?packet=other")).await.text().await.unwrap();
    assert!(!html.contains("Cy Candidate"));

    // Reissue is a secondary action that asks for a confirmation: without
    // it nothing changes.
    assert!(html_reissue_is_secondary(&page(&client, app.url(&to)).await.text().await.unwrap()));
    let r = client
        .post(app.url(&format!("/assignments/{}/reissue", a.id)))
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("to confirm"));
    assert!(
        app.state.db.assignment_by_token_hash(&token_hash(&token)).await.unwrap().is_some(),
        "an unconfirmed reissue keeps the link"
    );
    // Reissue: a new link, the old one dies.
    let r = client
        .post(app.url(&format!("/assignments/{}/reissue", a.id)))
        .form(&[("csrf", csrf.as_str()), ("confirm", "yes")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let html = page(&client, app.url(&to)).await.text().await.unwrap();
    let new_url = invite_url(&html).expect("the new link is shown");
    let new_token = new_url.rsplit_once("/c/").unwrap().1;
    assert_ne!(new_token, token);
    assert!(app.state.db.assignment_by_token_hash(&token_hash(&token)).await.unwrap().is_none());
    assert_eq!(
        app.state.db.assignment_by_token_hash(&token_hash(new_token)).await.unwrap().unwrap().id,
        a.id
    );
    let actions: Vec<String> = app
        .state
        .db
        .audit_entries(Some(&format!("assignment:{}", a.id)), 10)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect();
    assert_eq!(actions, ["assignment.reissue", "assignment.create"]);
}

/// The reissue form sits in a closed `<details>`, its button is secondary,
/// and it needs the confirmation box.
fn html_reissue_is_secondary(html: &str) -> bool {
    let Some(at) = html.find(r#"<details class="secondary-action reissue""#) else { return false };
    let part = &html[at..];
    part.contains(r#"name="confirm""#)
        && part.contains("required")
        && part.contains(r#"class="secondary""#)
}

#[tokio::test]
async fn a_packet_without_a_published_version_cannot_be_assigned() {
    let app = TestApp::spawn().await;
    let (client, csrf) = signed_in(&app, Role::Author).await;
    crate::library::import_draft(&app, &client, &csrf, |_, b| Some(b)).await;
    let r = client
        .post(app.url("/assignments"))
        .form(&[
            ("csrf", csrf.as_str()),
            ("packet", "null-status"),
            ("candidate_name", "Cy"),
            ("email", "c@example.test"),
            ("deadline", "2099-01-01T00:00"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("has no published version"));
}
