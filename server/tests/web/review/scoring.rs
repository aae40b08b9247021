//! Human scoring: CSRF and reasons, rescoring and its audit, the
//! tampering veto's override, regrade.

#[allow(unused_imports)]
use super::*;

#[tokio::test]
async fn human_score_needs_csrf_and_a_reason_then_rescores_and_is_audited() {
    let f = fixture().await;
    let db = &f.app.state.db;
    let path = format!("/submissions/{}/human", f.good);
    let before = db.submission_by_id(&f.good).await.unwrap().unwrap();
    assert_eq!(before.decision.as_deref(), Some("advance"));

    let r = f
        .post(&path, &[("criterion", "unknowns_stop"), ("level", "0"), ("reason", "guessed")])
        .await;
    assert_eq!(r.status(), 403, "no CSRF token");
    let r = f
        .post(
            &path,
            &[
                ("csrf", "wrong"),
                ("criterion", "unknowns_stop"),
                ("level", "0"),
                ("reason", "guessed"),
            ],
        )
        .await;
    assert_eq!(r.status(), 403, "wrong CSRF token");
    let r = f
        .post(
            &path,
            &[
                ("csrf", &f.reviewer.csrf),
                ("criterion", "unknowns_stop"),
                ("level", "0"),
                ("reason", "   "),
            ],
        )
        .await;
    assert_eq!(r.status(), 400);
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("reason"), "{body}");
    let r = f
        .post(
            &path,
            &[
                ("csrf", &f.reviewer.csrf),
                ("criterion", "isolation_replay"),
                ("level", "0"),
                ("reason", "x"),
            ],
        )
        .await;
    assert_eq!(r.status(), 400, "an auto criterion takes no level");
    let r = f
        .post(
            &path,
            &[
                ("csrf", &f.reviewer.csrf),
                ("criterion", "narrative"),
                ("level", "9"),
                ("reason", "x"),
            ],
        )
        .await;
    assert_eq!(r.status(), 400, "above the maximum");
    assert!(db.human_scores(&f.good).await.unwrap().is_empty(), "refused posts store nothing");
    assert_eq!(
        db.submission_by_id(&f.good).await.unwrap().unwrap().scorecard_json,
        before.scorecard_json
    );

    // An override to 0 on the 70-point criterion: 20 points, decision no.
    let r = f
        .post(
            &path,
            &[
                ("csrf", &f.reviewer.csrf),
                ("criterion", "unknowns_stop"),
                ("level", "0"),
                ("reason", "The gate guesses the owner on a hand-made incident."),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    // Saving keeps the reader where they were: back at the criterion's row.
    assert_eq!(
        r.headers()["location"],
        format!("/submissions/{}?scored=unknowns_stop#criterion-unknowns_stop", f.good)
    );
    let after = db.submission_by_id(&f.good).await.unwrap().unwrap();
    assert_eq!((after.decision.as_deref(), after.score), (Some("no"), Some(20.0)));
    let card: Scorecard = serde_json::from_str(after.scorecard_json.as_deref().unwrap()).unwrap();
    assert_eq!(card.receipt.scoring.decision, "no");
    assert_eq!(card.receipt.digest, grader::grade::receipt_digest(&card.receipt));
    // The digest changed; the receipt keeps the grader's and both pages say why.
    let graded: Scorecard =
        serde_json::from_str(before.scorecard_json.as_deref().unwrap()).unwrap();
    assert_ne!(card.receipt.digest, graded.receipt.digest);
    assert_eq!(card.receipt.graded_digest.as_deref(), Some(graded.receipt.digest.as_str()));
    for page in [format!("/submissions/{}", f.good), format!("/submissions/{}/receipt", f.good)] {
        let html = f.page(&page).await;
        assert!(
            html.contains(&card.receipt.digest) && html.contains(&graded.receipt.digest),
            "{page}: both digests"
        );
        assert!(html.contains("after reviewer scores"), "{page}: says why");
    }
    assert_eq!(
        after.receipt_json.as_deref().unwrap(),
        serde_json::to_string(&card.receipt).unwrap()
    );

    // The narrative scored too: the latest level per criterion applies.
    let r = f
        .post(
            &path,
            &[
                ("csrf", &f.reviewer.csrf),
                ("criterion", "narrative"),
                ("level", "2"),
                ("reason", "Names the blanks and one limitation."),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    let r = f
        .post(
            &path,
            &[
                ("csrf", &f.reviewer.csrf),
                ("criterion", "unknowns_stop"),
                ("level", "7"),
                ("reason", "Re-read: the owner came from a confirmation."),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    let last = db.submission_by_id(&f.good).await.unwrap().unwrap();
    assert_eq!((last.decision.as_deref(), last.score), (Some("advance"), Some(100.0)));
    assert_eq!(db.human_scores(&f.good).await.unwrap().len(), 3, "append-only");

    let (_, page) = f.get(&format!("/submissions/{}?scored=unknowns_stop", f.good)).await;
    in_order(
        &page,
        &[
            "Score history",
            "Re-read: the owner came from a confirmation.",
            "Names the blanks and one limitation.",
            "The gate guesses the owner",
        ],
    );
    assert!(page.contains("rita"), "{page}");
    assert!(page.contains("Score for unknowns_stop saved"), "{page}");

    let audit = db.audit_entries(Some(&format!("submission:{}", f.good)), 10).await.unwrap();
    assert_eq!(audit.iter().filter(|a| a.action == "submission.human_score").count(), 3);
    assert!(
        audit
            .iter()
            .any(|a| a.detail.contains("unknowns_stop = 0") && a.detail.contains("advance → no")),
        "{audit:?}"
    );
}

#[tokio::test]
async fn regrade_enqueues_a_grade_job() {
    let f = fixture().await;
    let db = &f.app.state.db;
    let jobs_before = db.jobs_for(app::contract::JobKind::Grade, &f.bad).await.unwrap().len();
    let path = format!("/submissions/{}/regrade", f.bad);
    let r = f.post(&path, &[]).await;
    assert_eq!(r.status(), 403);
    assert_eq!(
        db.jobs_for(app::contract::JobKind::Grade, &f.bad).await.unwrap().len(),
        jobs_before
    );

    let r = f.post(&path, &[("csrf", &f.reviewer.csrf)]).await;
    assert_eq!(r.status(), 303);
    let jobs = db.jobs_for(app::contract::JobKind::Grade, &f.bad).await.unwrap();
    assert_eq!(jobs.len(), jobs_before + 1);
    let sub = db.submission_by_id(&f.bad).await.unwrap().unwrap();
    assert_eq!(sub.state.as_str(), "queued");
    let a = db.assignment_by_id(&f.bad_assignment).await.unwrap().unwrap();
    assert_eq!(a.state, "submitted");
    // A second regrade while one is queued is refused.
    let r = f.post(&path, &[("csrf", &f.reviewer.csrf)]).await;
    assert_eq!(r.status(), 409);
    let (_, page) = f.get(&format!("/submissions/{}", f.bad)).await;
    assert!(page.contains("data-state=\"queued\""), "{page}");
    let audit = db.audit_entries(Some(&format!("submission:{}", f.bad)), 10).await.unwrap();
    assert!(audit.iter().any(|a| a.action == "submission.regrade"));
}

/// The platform-wide `evidence-tampering` veto sends a scorecard to the
/// lowest decision; a reviewer overrides it on the page with a reason (and
/// cannot "override" it on a scorecard that has no such finding).
#[tokio::test]
async fn a_reviewer_overrides_the_tampering_veto_with_a_reason() {
    let f = fixture().await;
    let db = &f.app.state.db;
    let (good_card, _) = cards(&f.app).await;
    let packet = Packet::load(&repo_root().join("packets").join(SLUG)).unwrap();
    let mut tampered = good_card.clone();
    tampered.findings.push(grader::score::Finding {
        id: "evidence-tampering".into(),
        title: "Evidence tampering".into(),
        provenance: grader::evidence::Provenance::Replayed,
        evidence: vec!["pytest.py: shadows the test runner's own module `pytest`".into()],
    });
    tampered.receipt.findings = tampered.findings.clone();
    let tampered = grader::grade::rescore(&packet.manifest, &tampered, &BTreeMap::new());
    assert_eq!(
        tampered.scoring.decision, "no",
        "the veto goes to the lowest decision: {:?}",
        tampered.scoring.caps
    );
    db.set_graded(
        &f.good,
        &serde_json::to_string(&tampered).unwrap(),
        &serde_json::to_string(&tampered.receipt).unwrap(),
        &tampered.scoring.decision,
        0.0,
    )
    .await
    .unwrap();

    let page = f.page(&format!("/submissions/{}", f.good)).await;
    assert!(page.contains("value=\"evidence-tampering\""), "the page offers the override: {page}");
    let path = format!("/submissions/{}/human", f.good);
    let r = f
        .post(
            &path,
            &[
                ("csrf", &f.reviewer.csrf),
                ("criterion", "evidence-tampering"),
                ("level", "1"),
                ("reason", " "),
            ],
        )
        .await;
    assert_eq!(r.status(), 400, "an override needs a reason");
    let r = f
        .post(
            &path,
            &[
                ("csrf", &f.reviewer.csrf),
                ("criterion", "evidence-tampering"),
                ("level", "2"),
                ("reason", "x"),
            ],
        )
        .await;
    assert_eq!(r.status(), 400, "0 or 1 only");
    let r = f
        .post(
            &path,
            &[
                ("csrf", &f.reviewer.csrf),
                ("criterion", "evidence-tampering"),
                ("level", "1"),
                ("reason", "pytest.py holds notes; it is never imported."),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    let after = db.submission_by_id(&f.good).await.unwrap().unwrap();
    assert_eq!(after.decision.as_deref(), Some("advance"));
    let card: Scorecard = serde_json::from_str(after.scorecard_json.as_deref().unwrap()).unwrap();
    assert!(
        card.scoring
            .caps
            .iter()
            .any(|c| c.contains("overridden by") && c.contains("never imported")),
        "{:?}",
        card.scoring.caps
    );
    // The bad submission has no such finding to override.
    let r = f
        .post(
            &format!("/submissions/{}/human", f.bad),
            &[
                ("csrf", &f.reviewer.csrf),
                ("criterion", "evidence-tampering"),
                ("level", "1"),
                ("reason", "x"),
            ],
        )
        .await;
    assert_eq!(r.status(), 400);
}
