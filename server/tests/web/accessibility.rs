//! Accessibility (#27): axe-core (npm, `server/tests/axe`, installed by
//! scripts/setup) injected into every page type each role reaches, in
//! headless Chromium, with the WCAG 2.1 A and AA rules; a serious or
//! critical violation on any page fails the test, listed with the page, the
//! rule and the elements. The candidate page is also checked at 320 px
//! wide (WCAG 1.4.10, reflow) and photographed there and at 1,400 px.

use std::time::Duration;

use gatehouse::db::{EraseReason, Role};
use serde_json::Value;

use crate::browser::require_bundle;
use crate::candidate::{invite, publish_packet, sample_zip, upload, wait_final};
use crate::e2e::sign_in;
use crate::support::{TestApp, repo_root};
use crate::webdriver::{Browser, exclusive};

/// axe-core's browser build.
fn axe_source() -> String {
    let path = repo_root().join("server/tests/axe/node_modules/axe-core/axe.min.js");
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("{}: {e} (scripts/setup installs axe-core from npm)", path.display())
    })
}

/// The serious and critical violations axe finds on the page the browser
/// shows, each as "rule (impact): help — elements".
async fn violations(b: &Browser, axe: &str) -> Vec<String> {
    let script = format!(
        "{axe}\n;const done = arguments[arguments.length - 1];
         window.axe.run(document, {{ runOnly: {{ type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] }},
                                    resultTypes: ['violations'] }})
           .then(r => done(r.violations
               .filter(v => v.impact === 'serious' || v.impact === 'critical')
               .map(v => v.id + ' (' + v.impact + '): ' + v.help + ' — '
                    + v.nodes.slice(0, 5).map(n => n.target.join(' ')).join(', '))))
           .catch(e => done(['axe failed: ' + e]));"
    );
    let found = b.client.execute_async(&script, vec![]).await.expect("axe runs in the page");
    match found {
        Value::Array(v) => {
            v.into_iter().map(|s| s.as_str().unwrap_or_default().to_string()).collect()
        }
        other => vec![format!("axe answered {other}")],
    }
}

/// Opens `path`, waits for its heading, and returns its violations (and
/// a page without exactly one `h1`: a packet's brief or notes rendered
/// inside a page must not bring their own).
async fn audit(b: &Browser, axe: &str, path: &str) -> Vec<String> {
    b.goto(path).await;
    b.wait("h1").await;
    let mut found: Vec<String> =
        violations(b, axe).await.into_iter().map(|v| format!("{path}: {v}")).collect();
    let h1 = b.script("return document.querySelectorAll('h1').length;").await;
    if h1 != serde_json::json!(1) {
        found.push(format!("{path}: {h1} h1 elements, not one"));
    }
    found
}

#[tokio::test]
async fn no_page_type_has_a_serious_or_critical_axe_violation() {
    let _one = exclusive().await;
    require_bundle();
    let axe = axe_source();
    let app = TestApp::spawn().await;
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    publish_packet(&app.state).await;
    // Two graded submissions of the same code (similar pairs with excerpts
    // on the scorecard and compare), an expired link, an erased one.
    let first = invite(&app.state, "Ada Axe").await;
    let second = invite(&app.state, "Grace Axe").await;
    let expired = invite(&app.state, "Late Axe").await;
    let erased = invite(&app.state, "Gone Axe").await;
    let mut ids = Vec::new();
    for token in [&first.token, &second.token] {
        let r = upload(&app.base, token, sample_zip(), true).await;
        ids.push(r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string());
    }
    for id in &ids {
        wait_final(&app.state, id, Duration::from_secs(120)).await;
    }
    crate::support::raw_exec(
        &app.state.config.database_url,
        "UPDATE assignments SET deadline = ? WHERE id = ?",
        &[crate::support::Arg::I(1), crate::support::Arg::T(&expired.assignment.id)],
    )
    .await;
    gatehouse::erasure::erase(&app.state, &erased.assignment, "system:test", EraseReason::Request)
        .await
        .unwrap();
    app.user("admin@example.com", Role::Admin, "admin-password-1").await;

    let mut found = Vec::new();
    // The candidate's pages, signed out.
    let b = Browser::new(&app.base).await;
    let c = &first.token;
    for path in [
        format!("/c/{c}"),
        format!("/c/{c}/submissions/{}", ids[0]),
        format!("/c/{c}/transcript"),
        format!("/c/{}", expired.token),
        format!("/c/{}", erased.token),
        "/c/not-a-link".into(),
        "/login".into(),
    ] {
        found.extend(audit(&b, &axe, &path).await);
    }
    // Reflow at 320 px: nothing wider than the window.
    b.goto(&format!("/c/{c}")).await;
    b.wait("h1").await;
    b.snapshot("a11y-candidate-1400").await;
    b.client.set_window_size(320, 900).await.expect("resize");
    let wide = b
        .script("return Math.max(document.documentElement.scrollWidth, document.body.scrollWidth);")
        .await;
    b.snapshot("a11y-candidate-320").await;
    let inner = b.script("return window.innerWidth;").await;
    let (wide, inner) = (wide.as_u64().unwrap(), inner.as_u64().unwrap());
    if wide > inner {
        // Name the widest elements that stick out, for the message.
        let culprits = b
            .script(
                "const w = window.innerWidth; return Array.from(document.querySelectorAll('body *'))
                   .filter(e => e.getBoundingClientRect().right > w + 1)
                   .filter(e => !Array.from(e.children).some(c => c.getBoundingClientRect().right > w + 1))
                   .slice(0, 8)
                   .map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className ? '.' + String(e.className).split(' ').join('.') : '')
                             + ' ' + Math.round(e.getBoundingClientRect().right) + 'px');",
            )
            .await;
        found.push(format!(
            "/c/{c}: at {inner} px wide the page is {wide} px wide (WCAG 1.4.10): {culprits}"
        ));
    }
    b.close().await;

    // Every page an admin (and so every role) reaches.
    let b = Browser::new(&app.base).await;
    sign_in(&b, "admin@example.com", "admin-password-1").await;
    let (a, s) = (&first.assignment.id, &ids[0]);
    for path in [
        "/inbox".to_string(),
        "/packets".into(),
        "/packets/null-status".into(),
        "/packets/null-status/compare".into(),
        "/assignments".into(),
        "/assignments/new?packet=null-status".into(),
        format!("/assignments/{a}"),
        format!("/assignments/{}", erased.assignment.id),
        format!("/submissions/{s}"),
        format!("/submissions/{s}/receipt"),
        "/queue".into(),
        "/admin/users".into(),
        "/admin/ats".into(),
        "/admin/webhooks".into(),
        "/admin/retention".into(),
    ] {
        found.extend(audit(&b, &axe, &path).await);
    }
    b.snapshot("a11y-scorecard").await;
    b.close().await;
    assert!(found.is_empty(), "axe (WCAG 2.1 A/AA), serious or critical:\n{}", found.join("\n"));
}
