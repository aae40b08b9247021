//! The built-in library's background self-tests, which run at idle CPU
//! priority (`gatehouse::lowly`): a `SCHED_IDLE` check gets only the CPU
//! nothing else wants, so beside a busy test lane it waits minutes for
//! every slice while using almost none. `scripts/test` leaves this module
//! out of the web binary's main pass and runs it as a phase of its own,
//! queued last (after the grader's `it` binary has the cores), so these
//! waits hold neither a test thread of the main pass nor the suite's wall.

use std::time::Duration;

use gatehouse::db::Role;

use crate::auth::{page, signed_in};
use crate::library::{app_with_builtin, tiny};
use crate::support::TestApp;

/// The built-in library is self-tested in the background (issue #14): a
/// low-priority `check` job per built-in version, once per digest; the
/// packet page follows it live like an author's self-test, and its
/// calibration is recorded for the gradings of the version.
#[tokio::test]
async fn built_in_versions_are_self_tested_in_the_background_once_per_digest() {
    // The tiny packet, each of whose hidden runs waits 4 s (no CPU), so that
    // its self-test (three such runs) outlasts a grading started beside it.
    let packets = tempfile::tempdir().unwrap();
    let dir = packets.path().join("tiny-answer");
    grader::tree::copy_path(&tiny(), &dir).unwrap();
    let hidden = dir.join("hidden/test_hidden_answer.py");
    let text = std::fs::read_to_string(&hidden).unwrap();
    std::fs::write(&hidden, format!("import time\n\ntime.sleep(4)\n{text}")).unwrap();
    // The production default: every built-in packet.
    let app =
        app_with_builtin(&packets, &gatehouse::config::Config::default().builtin_self_test).await;
    assert_eq!(gatehouse::library::load_builtin(&app.state).await.unwrap(), 1);
    let v = app.state.db.latest_published("tiny-answer").await.unwrap().unwrap();
    let jobs =
        app.state.db.jobs_for(app::contract::JobKind::Check, &v.id.to_string()).await.unwrap();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(
        (jobs[0].state.as_str(), jobs[0].priority),
        ("queued", gatehouse::db::BUILTIN_CHECK_PRIORITY)
    );

    // The page shows it queued and follows it live.
    let (client, _) = signed_in(&app, Role::Reviewer).await;
    let status_url = format!("/packets/tiny-answer/versions/{}/check/status", v.id);
    let html = page(&client, app.url("/packets/tiny-answer")).await.text().await.unwrap();
    assert!(html.contains("check-queued") && !html.contains(">not run<"), "{html}");
    assert!(
        html.contains(&format!("url&quot;:&quot;{status_url}")) || html.contains(&status_url),
        "the live status: {html}"
    );
    let html = page(&client, app.url("/packets")).await.text().await.unwrap();
    assert!(html.contains("queued") && !html.contains(">not run<"), "{html}");

    // A restart with the same digest queues nothing more.
    assert_eq!(gatehouse::library::load_builtin(&app.state).await.unwrap(), 0);
    assert_eq!(
        app.state
            .db
            .jobs_for(app::contract::JobKind::Check, &v.id.to_string())
            .await
            .unwrap()
            .len(),
        1,
        "not queued twice"
    );

    // A worker runs it, for real, in the sandbox. A candidate who uploads
    // while it runs is graded at once, by the grading lane, not after it.
    let _workers = gatehouse::queue::spawn_workers(&app.state, 1);
    let started = std::time::Instant::now();
    let mut seen = Vec::new();
    let mut graded_during_check = None;
    let last = loop {
        let status: serde_json::Value =
            client.get(app.url(&status_url)).send().await.unwrap().json().await.unwrap();
        let state = status["state"].as_str().unwrap().to_string();
        if seen.last() != Some(&state) {
            seen.push(state.clone());
        }
        if state == "running" && graded_during_check.is_none() {
            let invite = gatehouse::invites::Invite {
                slug: "tiny-answer",
                candidate_name: "Early Candidate",
                email: "early@example.com",
                deadline: None,
                time_box_secs: None,
            };
            let invited = gatehouse::invites::create(&app.state, None, invite).await.unwrap();
            let sample = crate::candidate::zip_of(&[(
                "answer.py",
                &std::fs::read(tiny().join("sample/answer.py")).unwrap(),
            )]);
            let r = crate::candidate::upload(&app.base, &invited.token, sample, true).await;
            assert_eq!(r.status(), 201);
            let id =
                r.json::<serde_json::Value>().await.unwrap()["id"].as_str().unwrap().to_string();
            let uploaded = std::time::Instant::now();
            let graded = crate::ops::wait_all_final(
                &app.state,
                std::slice::from_ref(&id),
                Duration::from_secs(120),
            )
            .await;
            let subject = v.id.to_string();
            let check = app.state.db.jobs_for(app::contract::JobKind::Check, &subject).await;
            let check = check.unwrap()[0].state;
            assert_eq!(graded[&id].state.to_string(), "graded", "{:?}", graded[&id].error);
            graded_during_check = Some((check, uploaded.elapsed()));
            continue;
        }
        if state == "passed" || state == "failed" {
            break state;
        }
        // Idle priority runs only on a core nothing else wants: this bound
        // is for a hang, not a timing (as in the test below).
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "the built-in self-test did not finish: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        last,
        "passed",
        "{seen:?}: {:?}",
        app.state.db.version_by_id(v.id).await.unwrap().unwrap().check_report
    );
    let (check_then, took) = graded_during_check.expect("an upload while the self-test ran");
    assert_eq!(check_then.as_str(), "running", "graded only after the self-test ({took:?})");
    let html = page(&client, app.url("/packets/tiny-answer")).await.text().await.unwrap();
    assert!(
        html.contains("check-passed")
            && html.contains("check-item ok")
            && !html.contains(&status_url),
        "{html}"
    );
    assert!(!html.contains("Code(") && !html.contains(">not run<"), "{html}");

    // Its calibration is the one gradings of the built-in version now use:
    // recorded for its digest (what `GradeOptions::calibration` requires).
    let checked = app.state.db.version_by_id(v.id).await.unwrap().unwrap();
    let recorded = gatehouse::grading::recorded_calibration(checked.check_report.as_deref())
        .expect("a recorded calibration");
    assert_eq!(recorded.digest, checked.digest);
    assert!(recorded.expected.values().any(|ids| !ids.is_empty()), "{recorded:?}");

    // Checked once: another start queues nothing, and the result stays.
    assert_eq!(gatehouse::library::load_builtin(&app.state).await.unwrap(), 0);
    let jobs =
        app.state.db.jobs_for(app::contract::JobKind::Check, &v.id.to_string()).await.unwrap();
    assert_eq!((jobs.len(), jobs[0].state.as_str()), (1, "done"));
}

/// A background self-test runs at idle priority, where a busy machine can
/// starve its runs past their wall limits (CI once recorded the built-in
/// null-status as failing that way): a failure there is confirmed at normal
/// priority before it is recorded, and a packet that fails at any priority
/// is still recorded failing.
#[tokio::test]
async fn a_background_check_failing_only_at_idle_priority_is_confirmed_at_normal_priority() {
    let packets = tempfile::tempdir().unwrap();
    // Copies of the tiny packet whose hidden module refuses to load when `when`
    // holds in the sandboxed process.
    let lay = |slug: &str, when: &str| {
        let dir = packets.path().join(slug);
        grader::tree::copy_path(&tiny(), &dir).unwrap();
        let toml = std::fs::read_to_string(dir.join("packet.toml")).unwrap();
        let toml = toml.replace("slug = \"tiny-answer\"", &format!("slug = \"{slug}\""));
        std::fs::write(dir.join("packet.toml"), toml).unwrap();
        let hidden = dir.join("hidden/test_hidden_answer.py");
        let text = std::fs::read_to_string(&hidden).unwrap();
        let guard = format!(
            "import os as _gh_os\nif {when}:\n    raise RuntimeError(\"refused: {slug}\")\n"
        );
        std::fs::write(&hidden, guard + &text).unwrap();
        dir
    };
    let starved = lay("tiny-answer", "_gh_os.sched_getscheduler(0) == _gh_os.SCHED_IDLE");
    lay("tiny-answer-broken", "True");
    let dir = packets.path().to_path_buf();
    let app = TestApp::spawn_with(move |c| {
        c.packets_dir = dir;
        c.builtin_self_test = "all".into();
    })
    .await;

    // At idle priority alone the first one fails: what is confirmed below.
    let grader = app.state.grader.clone();
    let alone = gatehouse::lowly::run(move || grader::check::check_packet(&grader, &starved))
        .await
        .unwrap();
    assert!(!alone.ok(), "{alone:?}");

    assert_eq!(gatehouse::library::load_builtin(&app.state).await.unwrap(), 2);
    let db = &app.state.db;
    let mut versions = Vec::new();
    for slug in ["tiny-answer", "tiny-answer-broken"] {
        let v = db.latest_published(slug).await.unwrap().unwrap();
        let jobs = db.jobs_for(app::contract::JobKind::Check, &v.id.to_string()).await.unwrap();
        assert_eq!(jobs[0].priority, gatehouse::db::BUILTIN_CHECK_PRIORITY, "{slug}: background");
        versions.push(v.id);
    }
    let _workers = gatehouse::queue::spawn_workers(&app.state, 2);
    let started = std::time::Instant::now();
    let states = loop {
        let mut states = Vec::new();
        for id in &versions {
            states.push(db.version_by_id(*id).await.unwrap().unwrap().check_state);
        }
        if states.iter().all(|s| s == "passed" || s == "failed") {
            break states;
        }
        // Idle priority runs only on a core nothing else wants: beside the
        // grader's test lane (both cores busy) a check can wait 10 minutes
        // and more to start, so this bound is for a hang, not a timing.
        assert!(started.elapsed() < Duration::from_secs(1800), "not finished: {states:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(states, ["passed", "failed"]);
    // The kept reports are the confirming ones: the first passes whole and
    // its calibration is recorded; the second names its failing items.
    let passed = db.version_by_id(versions[0]).await.unwrap().unwrap();
    assert!(gatehouse::grading::recorded_calibration(passed.check_report.as_deref()).is_some());
    let failed = db.version_by_id(versions[1]).await.unwrap().unwrap();
    let report: serde_json::Value =
        serde_json::from_str(failed.check_report.as_deref().unwrap()).unwrap();
    assert!(report["items"].as_array().unwrap().iter().any(|i| i["ok"] == false), "{report}");
}
