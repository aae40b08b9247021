//! The reviewer's landing: sessions required, the inbox, the queue, blind
//! review, the file a criterion names beside its form.

#[allow(unused_imports)]
use super::*;

#[tokio::test]
async fn reviewer_pages_need_a_session() {
    let f = fixture().await;
    let anon = TestApp::client();
    for path in [
        format!("/submissions/{}", f.good),
        format!("/assignments/{}", f.good_assignment),
        format!("/packets/{SLUG}/compare"),
        format!("/submissions/{}/receipt", f.good),
    ] {
        let r = anon.get(f.app.url(&path)).header("accept", "text/html").send().await.unwrap();
        assert_eq!(r.status(), 303, "{path}");
        assert!(r.headers()["location"].to_str().unwrap().starts_with("/login?next="), "{path}");
    }
    for path in [
        format!("/submissions/{}/receipt.json", f.good),
        format!("/submissions/{}/receipt.html", f.good),
        format!("/packets/{SLUG}/scorecards.csv"),
        format!("/packets/{SLUG}/distribution.svg"),
    ] {
        let r = anon.get(f.app.url(&path)).send().await.unwrap();
        assert_eq!(r.status(), 401, "{path}");
    }
    let r = anon
        .post(f.app.url(&format!("/submissions/{}/human", f.good)))
        .form(&[("criterion", "narrative"), ("level", "2"), ("reason", "x")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = anon.post(f.app.url(&format!("/submissions/{}/regrade", f.good))).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert!(f.app.state.db.human_scores(&f.good).await.unwrap().is_empty());
    assert_eq!(f.get("/submissions/no-such-submission").await.0, 404);
}

/// Where a `GET` answers with a redirect.
async fn landing(client: &reqwest::Client, url: String) -> String {
    let r = client.get(url).header("accept", "text/html").send().await.unwrap();
    assert_eq!(r.status(), 303);
    r.headers()["location"].to_str().unwrap().to_string()
}

#[tokio::test]
async fn the_inbox_lists_waiting_then_recently_graded_and_is_a_reviewers_landing_page() {
    let f = fixture().await;
    assert_eq!(landing(&f.reviewer.client, f.app.url("/")).await, "/inbox");
    let author = sign_in(&f.app, "arthur@example.com", Role::Author).await;
    assert_eq!(
        landing(&author.client, f.app.url("/")).await,
        "/packets",
        "authors land on their packets"
    );

    let page = f.page("/inbox").await;
    // Both graded submissions wait for the human `narrative` score, by
    // candidate and packet name, with their age.
    let waiting = &page
        [page.find("Waiting for a human score").unwrap()..page.find("Recently graded").unwrap()];
    for want in [
        "Ada Lovelace",
        "Bob Guesser",
        "null-status",
        "Don&#x27;t page on a null status",
        "under a minute",
        &format!("/submissions/{}", f.good),
    ] {
        assert!(
            waiting.contains(want) || waiting.contains(&want.replace("&#x27;", "'")),
            "{want} waiting in {page}"
        );
    }
    assert!(page.contains("No graded submission yet."), "nothing is fully scored yet: {page}");

    // Scored, Ada moves to "recently graded" with her decision.
    let r = f
        .post(
            &format!("/submissions/{}/human", f.good),
            &[
                ("csrf", &f.reviewer.csrf),
                ("criterion", "narrative"),
                ("level", "2"),
                ("reason", "Names the blanks."),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    let (_, page) = f.get("/inbox").await;
    let split = page.find("Recently graded").unwrap();
    assert!(
        page[..split].contains("Bob Guesser") && !page[..split].contains("Ada Lovelace"),
        "{page}"
    );
    assert!(
        page[split..].contains("Ada Lovelace") && page[split..].contains("class=\"decision"),
        "{page}"
    );

    // Without a session: the sign-in page, like every reviewer page.
    let r = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(f.app.url("/inbox"))
        .send()
        .await
        .unwrap();
    assert!(r.status() == 303 || r.status() == 401, "{}", r.status());
}

#[tokio::test]
async fn the_queue_names_the_candidate_and_packet_of_each_job() {
    let f = fixture().await;
    let page = f.page("/queue").await;
    assert!(
        page.contains("Ada Lovelace · null-status v1")
            && page.contains("Bob Guesser · null-status v1"),
        "{page}"
    );
    // The id is still there, small, for whoever needs it.
    assert!(
        page.contains(&format!("<code class=\"subject-id muted small\">{}</code>", f.good)),
        "{page}"
    );
}

#[tokio::test]
async fn blind_review_hides_the_candidate_until_the_reviewer_has_scored() {
    let f = fixture().await;
    let db = &f.app.state.db;
    db.set_blind_review(&f.good_assignment, true).await.unwrap();
    let alias = gatehouse::web::review::blind_label(&f.good);
    assert!(alias.starts_with("Candidate ") && alias.len() == "Candidate ".len() + 6, "{alias}");
    for path in [
        format!("/submissions/{}", f.good),
        format!("/submissions/{}/receipt.html", f.good),
        "/inbox".into(),
        format!("/packets/{SLUG}/compare"),
        format!("/assignments/{}", f.good_assignment),
        format!("/submissions/{}/receipt", f.good),
        "/queue".into(),
        "/assignments".into(),
        format!("/packets/{SLUG}/scorecards.csv"),
    ] {
        let (status, page) = f.get(&path).await;
        assert_eq!(status, 200, "{path}");
        assert!(
            !page.contains("Ada Lovelace") && !page.contains("ada@example.com"),
            "{path} shows the candidate under blind review:\n{page}"
        );
        assert!(
            page.contains("Bob Guesser")
                || path.contains(&f.good)
                || path.contains(&f.good_assignment),
            "{path}: other candidates are named"
        );
    }
    let (_, card) = f.get(&format!("/submissions/{}", f.good)).await;
    assert!(card.contains(&alias) && card.contains("Blind review: the candidate"), "{card}");

    // The assignments list: blind rows after the others, in a stable
    // pseudo-random order (not invite order), with days and no times.
    let mut blind = vec![f.good_assignment.clone()];
    for n in 0..4 {
        let email = format!("blind{n}@example.com");
        let invited = invites::create(
            &f.app.state,
            None,
            Invite {
                slug: SLUG,
                candidate_name: "Blind Person",
                email: &email,
                deadline: None,
                time_box_secs: None,
            },
        )
        .await
        .unwrap();
        db.set_blind_review(&invited.assignment.id, true).await.unwrap();
        blind.push(invited.assignment.id);
    }
    let (_, list) = f.get("/assignments").await;
    let at = |id: &str| list.find(&format!("href=\"/assignments/{id}\"")).unwrap();
    let mut shown = blind.clone();
    shown.sort_by_key(|id| at(id));
    let mut keyed = blind.clone();
    keyed.sort_by_key(|id| gatehouse::web::review::blind_key(id));
    assert_eq!(shown, keyed, "blind rows in their pseudo-random order");
    assert!(at(&f.bad_assignment) < at(&shown[0]), "the named rows first");
    let rows = &list[at(&shown[0])..list.find("</tbody>").unwrap()];
    assert!(!rows.contains(" UTC") && !rows.contains("Blind Person"), "{rows}");
    assert!(list[..at(&shown[0])].contains(" UTC"), "named rows keep their times");

    // Scoring the human row is not enough: every row the reviewer may score
    // (the auto-override one too) is theirs to score before the name shows.
    let score = async |who: &Browser, criterion: &str| {
        let r = who
            .client
            .post(f.app.url(&format!("/submissions/{}/human", f.good)))
            .form(&[
                ("csrf", who.csrf.as_str()),
                ("criterion", criterion),
                ("level", "1"),
                ("reason", "Read it through."),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 303);
    };
    score(&f.reviewer, "narrative").await;
    let (_, card) = f.get(&format!("/submissions/{}", f.good)).await;
    assert!(!card.contains("Ada Lovelace") && card.contains(&alias), "unmasked early: {card}");
    let (_, inbox) = f.get("/inbox").await;
    assert!(!inbox.contains("Ada Lovelace"), "{inbox}");
    score(&f.reviewer, "unknowns_stop").await;
    let (_, card) = f.get(&format!("/submissions/{}", f.good)).await;
    assert!(
        card.contains("Ada Lovelace") && !card.contains("Blind review: the candidate"),
        "revealed once their scores are saved: {card}"
    );
    // The CSV export follows the same rule: named, with the email, now.
    let (_, csv) = f.get(&format!("/packets/{SLUG}/scorecards.csv")).await;
    assert!(
        csv.contains("Ada Lovelace") && csv.contains("ada@example.com") && !csv.contains(&alias),
        "{csv}"
    );
    // Who scored what is recorded, by name, in the history and the audit log.
    assert!(card.contains("rita") && card.contains("Read it through."), "{card}");
    let audit = db.audit_entries(Some(&format!("submission:{}", f.good)), 10).await.unwrap();
    assert!(
        audit.iter().filter(|e| e.action == "submission.human_score").count() == 2,
        "{audit:?}"
    );

    // Another reviewer still sees the pseudonym.
    let other = sign_in(&f.app, "otto@example.com", Role::Reviewer).await;
    let page = other
        .client
        .get(f.app.url(&format!("/submissions/{}", f.good)))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!page.contains("Ada Lovelace") && page.contains(&alias), "{page}");
    let csv = other
        .client
        .get(f.app.url(&format!("/packets/{SLUG}/scorecards.csv")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !csv.contains("Ada Lovelace")
            && !csv.contains("ada@example.com")
            && csv.contains(&alias)
            && csv.contains("Bob Guesser"),
        "{csv}"
    );

    // Blind columns come in a stable pseudo-random order, not by arrival:
    // the same on every load, sorted by the submission's blind key.
    db.set_blind_review(&f.bad_assignment, true).await.unwrap();
    let order = async || {
        let page = other
            .client
            .get(f.app.url(&format!("/packets/{SLUG}/compare")))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let (a, b) = (
            page.find(&format!("/submissions/{}", f.good)).unwrap(),
            page.find(&format!("/submissions/{}", f.bad)).unwrap(),
        );
        a < b
    };
    let want =
        gatehouse::web::review::blind_key(&f.good) < gatehouse::web::review::blind_key(&f.bad);
    assert_eq!(order().await, want);
    assert_eq!(order().await, want);
}

#[tokio::test]
async fn the_file_a_criterion_names_is_shown_beside_its_form() {
    let f = fixture().await;
    let (_, page) = f.get(&format!("/submissions/{}", f.good)).await;
    assert_eq!(
        page.matches("class=\"score-beside\"").count(),
        1,
        "only `narrative` names a file (NOTES.md): {page}"
    );
    let at = page.find("class=\"score-beside\"").unwrap();
    let beside = &page[at..];
    let form = beside.find("class=\"human-score\"").unwrap();
    let notes =
        std::fs::read_to_string(repo_root().join("packets").join(SLUG).join("sample/NOTES.md"))
            .unwrap();
    let first = notes.lines().nth(2).unwrap();
    assert!(
        beside[..form].contains("<code>NOTES.md</code>")
            && beside[..form].contains(first.split('`').next().unwrap()),
        "{beside}"
    );
    assert!(beside[form..].contains("value=\"narrative\""), "the form beside it scores narrative");
    assert!(page.contains("id=\"criterion-narrative\""), "the row is an anchor to come back to");
}

#[test]
fn the_file_a_criterion_is_about_is_found_by_name() {
    use gatehouse::web::review::file_named_by;
    let paths =
        ["gate.py", "NOTES.md", "docs/NOTES.md", "transcript.jsonl", "test_bucket.py", "bucket.py"];
    let named = |explicit: Option<&str>, title: &str, levels: &[&str]| {
        file_named_by(
            explicit,
            title,
            &levels.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            paths.iter().copied(),
        )
    };
    let find = |title: &str, levels: &[&str]| named(None, title, levels);
    assert_eq!(find("Narrative: NOTES.md says what blocked", &[]), Some("docs/NOTES.md"));
    assert_eq!(
        find("Replay", &["transcript.jsonl is exactly what the CLI prints."]),
        Some("transcript.jsonl")
    );
    assert_eq!(
        find(
            "Unknowns and stop (70): a record for every missing field",
            &["no AssumptionRecord at all."]
        ),
        None
    );
    assert_eq!(find("Notes in `gate.py`", &[]), Some("gate.py"));
    // Several files named: the title's, else the first in reading order
    // (token-bucket's discipline is about the limiter, not its tests).
    let discipline = [
        "Sleeps in the limiter, reads the real clock in the bucket or the tests.",
        "Reviewer: small unrequested extras (extra files).",
        "Exactly the brief: bucket.py, test_bucket.py and NOTES.md, standard library only.",
    ];
    assert_eq!(find("Discipline: standard library, no sleep", &discipline), Some("bucket.py"));
    assert_eq!(find("Tests: test_bucket.py goes red", &discipline), Some("test_bucket.py"));
    // The packet's own choice wins, and is not guessed when not submitted.
    assert_eq!(named(Some("NOTES.md"), "About gate.py", &[]), Some("NOTES.md"));
    assert_eq!(named(Some("missing.py"), "About gate.py", &[]), None);
}

/// The reviewer's day in Chromium: signing in lands on the inbox; the
/// scorecard shows NOTES.md beside the form that scores it; saving comes
/// back to the criterion, not the top of the page. Screenshots: inbox,
/// scorecard with the file beside the form.
#[tokio::test]
async fn a_reviewer_lands_on_the_inbox_and_scores_beside_the_file_in_a_real_browser() {
    let _one = crate::webdriver::exclusive().await;
    let f = fixture().await;
    let b = browser_sign_in(&f.app, "rita@example.com").await;
    b.wait_path("/inbox").await;
    b.wait("table.inbox.waiting").await;
    b.snapshot("inbox").await;
    b.click(&format!("table.inbox.waiting a[href='/submissions/{}']", f.good)).await;
    b.wait_path(&format!("/submissions/{}", f.good)).await;
    b.wait(".score-beside figure.scored-file").await;
    let boxes = b
        .script(
            "const f = document.querySelector('.score-beside figure.scored-file').getBoundingClientRect();
             const m = document.querySelector('.score-beside form.human-score').getBoundingClientRect();
             document.querySelector('.score-beside').scrollIntoView();
             return { file: [f.left, f.right, f.top, f.bottom], form: [m.left, m.right, m.top, m.bottom] };",
        )
        .await;
    let (file, form) = (&boxes["file"], &boxes["form"]);
    let n = |v: &serde_json::Value, i: usize| v[i].as_f64().unwrap();
    assert!(n(file, 1) <= n(form, 0) + 1.0, "the file is left of the form: {boxes}");
    assert!(
        n(form, 2) < n(file, 3) && n(file, 2) < n(form, 3),
        "side by side, not one under the other: {boxes}"
    );
    b.snapshot("scorecard-file-beside").await;
    // The decision is a status, not something to press: it looks nothing
    // like the page's buttons (no box, no pointer).
    let look = b
        .script(
            "const s = e => getComputedStyle(document.querySelector(e));
             const d = s('section.summary .decision'), k = s('form.human-score button');
             return { d: [d.borderTopWidth, d.borderRadius, d.cursor], b: [k.borderTopWidth, k.borderRadius, k.cursor] };",
        )
        .await;
    assert_eq!(look["d"], serde_json::json!(["0px", "0px", "default"]), "{look}");
    assert_eq!(look["b"][2], "pointer", "{look}");
    let form = b.find(".score-beside form.human-score").await;
    form.find(fantoccini::Locator::Css("select[name='level']"))
        .await
        .unwrap()
        .select_by_value("2")
        .await
        .unwrap();
    form.find(fantoccini::Locator::Css("textarea[name='reason']"))
        .await
        .unwrap()
        .send_keys("Names the blanks and a limitation.")
        .await
        .unwrap();
    form.find(fantoccini::Locator::Css("button[type='submit']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_text(".score-history .reason", "Names the blanks", std::time::Duration::from_secs(20))
        .await;
    let url = b.client.current_url().await.unwrap();
    assert_eq!(url.fragment(), Some("criterion-narrative"), "{url}");
    let y = b.script("return window.scrollY;").await;
    assert!(y.as_f64().unwrap() > 200.0, "the page came back at the criterion, not the top: {y}");
    b.close().await;
}
