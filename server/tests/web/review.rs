//! The reviewer's side over HTTP: scorecards in evidence order, human
//! scoring with reasons, receipts and exports, compare and distribution,
//! regrade, and refusals without a session or CSRF token.
//!
//! Submissions are graded directly with the app's grader (not through the
//! queue): the `null-status` sample (clean) and its `invented-guess` variant
//! (a known failure). The two gradings are done once per test binary and
//! stored into each test's fresh database.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use gatehouse::db::{NewSubmission, NewVersion, Role};
use gatehouse::invites::{self, Invite};
use gatehouse::web::session::DbSessionStore;
use grader::grade::Scorecard;
use grader::manifest::TIME_BASE;
use grader::packet::Packet;
use tokio::sync::OnceCell;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::SessionStore;

use crate::support::{TestApp, repo_root};

const SLUG: &str = "null-status";

/// The clean sample's and the bad variant's scorecards with their zips,
/// graded once.
static GRADED: OnceCell<(Graded, Graded)> = OnceCell::const_new();

/// A scorecard and the zip it graded.
type Graded = (Scorecard, Vec<u8>);

fn zip_tree(packet: &Packet, dir: &Path, times: &BTreeMap<String, i64>, out: &Path) {
    let absolute: BTreeMap<String, i64> =
        times.iter().map(|(k, v)| (k.clone(), TIME_BASE + v)).collect();
    grader::ingest::write_zip_from_dir(dir, out, &absolute, TIME_BASE).unwrap();
    assert!(out.is_file(), "zipping {} for {}", dir.display(), packet.manifest.packet.slug);
}

async fn graded(app: &TestApp) -> &'static (Graded, Graded) {
    let grader = app.state.grader.clone();
    GRADED
        .get_or_init(|| async move {
            tokio::task::spawn_blocking(move || {
                let packet = Packet::load(&repo_root().join("packets").join(SLUG)).unwrap();
                let work = tempfile::tempdir().unwrap();
                let m = &packet.manifest;
                let good_zip = work.path().join("good.zip");
                zip_tree(&packet, &packet.sample_dir(), &m.sample.times, &good_zip);
                let variant = m.variants.iter().find(|v| v.name == "invented-guess").unwrap();
                let bad_dir = work.path().join("bad");
                packet.write_variant(variant, &bad_dir).unwrap();
                let mut times = m.sample.times.clone();
                times.extend(variant.times.clone());
                let bad_zip = work.path().join("bad.zip");
                zip_tree(&packet, &bad_dir, &times, &bad_zip);
                let opts = grader::grade::GradeOptions::default();
                let good = grader.grade_zip(&packet, &good_zip, &opts).unwrap();
                let bad = grader.grade_zip(&packet, &bad_zip, &opts).unwrap();
                ((good, std::fs::read(&good_zip).unwrap()), (bad, std::fs::read(&bad_zip).unwrap()))
            })
            .await
            .unwrap()
        })
        .await
}

async fn cards(app: &TestApp) -> (&'static Scorecard, &'static Scorecard) {
    let ((good, _), (bad, _)) = graded(app).await;
    (good, bad)
}

/// A signed-in browser: a session stored directly in the database, sent
/// as the session cookie, with its CSRF token.
pub(crate) struct Browser {
    pub(crate) client: reqwest::Client,
    pub(crate) csrf: String,
}

pub(crate) async fn sign_in(app: &TestApp, email: &str, role: Role) -> Browser {
    let user = app.user(email, role, "correct horse battery").await;
    let csrf = gatehouse::auth::password::random_token();
    let id = Id::default();
    let data: HashMap<String, serde_json::Value> = HashMap::from([
        ("user_id".to_string(), serde_json::json!(user.id)),
        ("csrf".to_string(), serde_json::json!(csrf)),
    ]);
    let record = Record {
        id,
        data,
        expiry_date: tower_sessions::cookie::time::OffsetDateTime::now_utc()
            + tower_sessions::cookie::time::Duration::hours(1),
    };
    DbSessionStore(app.state.db.clone()).save(&record).await.unwrap();
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::COOKIE, format!("gatehouse_session={id}").parse().unwrap());
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    Browser { client, csrf }
}

struct Fixture {
    app: TestApp,
    reviewer: Browser,
    good: String,
    bad: String,
    good_assignment: String,
    bad_assignment: String,
}

async fn fixture() -> Fixture {
    let app = TestApp::spawn().await;
    let ((good_card, good_zip), (bad_card, bad_zip)) = graded(&app).await.clone();
    crate::support::publish_copy_with(&app.state, SLUG, "1", |_| {}).await;
    let db = &app.state.db;
    let mut ids = Vec::new();
    for (name, email, card, zip, sub) in [
        ("Ada Lovelace", "ada@example.com", &good_card, &good_zip, "sub-good-0001"),
        ("Bob Guesser", "bob@example.com", &bad_card, &bad_zip, "sub-bad-00001"),
    ] {
        // The zip where the blob store keeps it: `blobs/<aa>/<sha256>`.
        let sha = &card.receipt.submission.archive_sha256;
        let blob = app.state.config.data_dir.join("blobs").join(&sha[..2]).join(sha);
        std::fs::create_dir_all(blob.parent().unwrap()).unwrap();
        std::fs::write(&blob, zip).unwrap();
        let invited = invites::create(
            &app.state,
            None,
            Invite { slug: SLUG, candidate_name: name, email, deadline: None, time_box_secs: None },
        )
        .await
        .unwrap();
        db.create_submission(NewSubmission {
            id: sub,
            assignment_id: &invited.assignment.id,
            blob_sha256: &card.receipt.submission.archive_sha256,
            size_bytes: zip.len() as i64,
        })
        .await
        .unwrap();
        db.set_graded(
            sub,
            &serde_json::to_string(card).unwrap(),
            &serde_json::to_string(&card.receipt).unwrap(),
            &card.scoring.decision,
            card.scoring.score.unwrap_or(0) as f64,
        )
        .await
        .unwrap();
        ids.push((sub.to_string(), invited.assignment.id.clone()));
    }
    // The grading jobs `create_submission` queued are done already: take
    // them off the queue so no worker grades these blob-less submissions.
    while let Some(job) = db.claim_job("review-test", gatehouse::now_ms(), 600_000).await.unwrap() {
        db.finish_job(job.id, "review-test", true, None).await.unwrap();
    }
    let reviewer = sign_in(&app, "rita@example.com", Role::Reviewer).await;
    let (bad, bad_assignment) = ids.pop().unwrap();
    let (good, good_assignment) = ids.pop().unwrap();
    Fixture { app, reviewer, good, bad, good_assignment, bad_assignment }
}

impl Fixture {
    async fn get(&self, path: &str) -> (u16, String) {
        let r = self
            .reviewer
            .client
            .get(self.app.url(path))
            .header("accept", "text/html")
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    /// The page at `path`, which must answer 200.
    async fn page(&self, path: &str) -> String {
        let (status, page) = self.get(path).await;
        assert_eq!(status, 200, "{path}: {page}");
        page
    }

    async fn post(&self, path: &str, form: &[(&str, &str)]) -> reqwest::Response {
        self.reviewer.client.post(self.app.url(path)).form(form).send().await.unwrap()
    }
}

/// Asserts that `page` shows an aligned excerpt whose two sides are both
/// `gate.py` with a line range, side `sample_side`'s lines being those
/// lines of `gate` (the sample's file).
fn excerpts_shown(page: &str, gate: &str, sample_side: usize, what: &str) {
    let at = page
        .find("class=\"excerpt\"")
        .unwrap_or_else(|| panic!("no aligned excerpt on the {what} page: {page}"));
    let excerpt = &page[at..];
    let sides: Vec<&str> = excerpt.split("class=\"excerpt-side\"").skip(1).take(2).collect();
    assert_eq!(sides.len(), 2, "two sides: {excerpt}");
    for side in &sides {
        assert!(side.contains("class=\"excerpt-path\">gate.py<"), "{what}: {side}");
    }
    let lines = sides[sample_side].split("class=\"excerpt-lines\">").nth(1).unwrap();
    let lines = &lines[..lines.find('<').unwrap()];
    let range = lines.trim_start_matches("lines ").trim_start_matches("line ");
    let (first, last) = range.split_once('–').unwrap_or((range, range));
    let (first, last): (usize, usize) = (first.parse().unwrap(), last.parse().unwrap());
    assert!(last > first, "{what}: a fragment of several lines, not {lines}");
    let text = sides[sample_side].split("class=\"excerpt-text\">").nth(1).unwrap();
    let text = &text[..text.find("</pre>").unwrap()];
    // At most 40 lines are shown, then a note says the fragment goes on.
    let shown = (last - first + 1).min(40);
    assert_eq!(
        last - first + 1 > 40,
        sides[sample_side].contains("goes on past these lines"),
        "{what}: {lines}"
    );
    let want: Vec<&str> = gate.lines().skip(first - 1).take(shown).collect();
    let text = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    assert_eq!(text, want.join("\n"), "{what}: the excerpt shows {lines} of gate.py");
}

/// Asserts that `parts` occur in `text` in this order.
fn in_order(text: &str, parts: &[&str]) {
    let mut at = 0;
    for p in parts {
        match text[at..].find(p) {
            Some(i) => at += i + p.len(),
            None => panic!("{p:?} missing after byte {at} (or out of order) in:\n{text}"),
        }
    }
}

#[tokio::test]
async fn scorecard_shows_evidence_in_order_with_provenance_and_commands() {
    let f = fixture().await;
    let (good_card, bad_card) = cards(&f.app).await;
    assert_eq!(good_card.findings, vec![], "the sample grades clean");
    assert!(bad_card.findings.iter().any(|x| x.id == "invented-value"));

    let good = f.page(&format!("/submissions/{}", f.good)).await;
    in_order(
        &good,
        &[
            "class=\"decision",
            "<h2>Gates</h2>",
            "class=\"gate ",
            "<h2>Findings</h2>",
            "<h2>Criteria</h2>",
            "<h2>Commands</h2>",
            "step:unknowns",
            "exit 0",
            "<h2>Environment</h2>",
            "receipt-digest",
            "class=\"diff\"",
            "gate.py",
        ],
    );
    assert!(good.contains("tests 8 / 8 passed") || good.contains(" passed</span>"), "{good}");
    assert!(!good.contains("invented-value"), "{good}");
    assert!(good.contains(&good_card.receipt.digest));
    assert!(good.contains("No reviewer has scored this submission yet."));
    // One scoring form per human or auto-override criterion, with CSRF.
    assert_eq!(good.matches("class=\"human-score\"").count(), 2, "{good}");
    assert!(good.contains("name=\"csrf\""));

    let bad = f.page(&format!("/submissions/{}", f.bad)).await;
    let finding = bad_card.findings.iter().find(|x| x.id == "invented-value").unwrap();
    let badge = format!(
        "class=\"badge {}\"",
        serde_json::to_value(finding.provenance).unwrap().as_str().unwrap()
    );
    in_order(
        &bad,
        &[
            "<h2>Gates</h2>",
            "<h2>Findings</h2>",
            "class=\"finding\"",
            "invented-value",
            &badge,
            "<h2>Commands</h2>",
            "class=\"diff\"",
        ],
    );
    assert!(bad.contains(&format!("decision {}", bad_card.scoring.decision)), "{bad}");
    // The diff against the starter shows the variant's guess table.
    in_order(
        &bad,
        &[
            "class=\"diff\"",
            "class=\"diff-text\"",
            "<span class=\"add\">+# what an outage on checkout usually looks like",
        ],
    );
    // A failing held-out test names itself in the commands section.
    assert!(bad.contains("test_no_invented_values"), "{bad}");

    // The assignment page lists its submission and links to it.
    let page = f.page(&format!("/assignments/{}", f.bad_assignment)).await;
    assert!(
        page.contains("Bob Guesser") && page.contains(&format!("href=\"/submissions/{}\"", f.bad)),
        "{page}"
    );
}

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
async fn receipt_json_and_standalone_html() {
    let f = fixture().await;
    let stored = f.app.state.db.submission_by_id(&f.bad).await.unwrap().unwrap();
    let r = f
        .reviewer
        .client
        .get(f.app.url(&format!("/submissions/{}/receipt.json", f.bad)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
    assert_eq!(r.text().await.unwrap(), stored.receipt_json.clone().unwrap());

    let r = f
        .reviewer
        .client
        .get(f.app.url(&format!("/submissions/{}/receipt.html", f.bad)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let disposition = r.headers()["content-disposition"].to_str().unwrap().to_string();
    assert!(
        disposition.starts_with("attachment;") && disposition.contains(".html"),
        "{disposition}"
    );
    let html = r.text().await.unwrap();
    let card: Scorecard = serde_json::from_str(stored.scorecard_json.as_deref().unwrap()).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<style>"));
    for external in
        ["src=\"http", "src=\"/", "href=\"http", "href=\"/", "src='", "href='", "@import", "url("]
    {
        assert!(!html.contains(external), "{external} in the standalone receipt");
    }
    assert!(html.contains(&card.receipt.digest));
    assert!(html.contains(&card.receipt.submission.archive_sha256));
    assert!(
        html.contains("invented-value") && html.contains("class=\"badge "),
        "findings with provenance"
    );
    assert!(html.contains("step:unknowns"), "commands");
    assert!(html.contains(&card.scoring.decision));
    // One version scheme: "null-status v1" as on the pages. This fixture's
    // receipt was graded outside the platform, as receipts were before they
    // named the published version: it keeps its packet.toml version (its
    // digest covers it), and the receipt says so.
    assert_eq!(card.receipt.packet.version, "1.0.0");
    assert!(html.contains("null-status v1 (") && !html.contains("version 1 ("), "{html}");
    assert!(html.contains("records the packet.toml version <code>1.0.0</code>"), "{html}");
    assert_eq!(
        grader::grade::receipt_digest(&card.receipt),
        card.receipt.digest,
        "an old receipt still verifies"
    );

    let page = f.page(&format!("/submissions/{}/receipt", f.bad)).await;
    assert!(page.contains(&card.receipt.digest) && page.contains("receipt.json"), "{page}");
    assert!(
        page.contains("null-status<!> <!>v1</h1>")
            && !page.contains("vv1")
            && !page.contains("version 1"),
        "{page}"
    );
    // Readable, in the standalone receipt's layout; the JSON is a link away.
    let doc = &page[page.find("class=\"receipt-doc\"").expect("the receipt document")..];
    in_order(
        doc,
        &[
            "<h2>Gates</h2>",
            "<h2>Criteria</h2>",
            "<h2>Findings</h2>",
            "<h2>Commands</h2>",
            "<h2>Digests</h2>",
        ],
    );
    assert!(doc.contains("invented-value") && doc.contains("step:unknowns"), "{doc}");
    assert!(
        !page.contains("<h2>Receipt JSON</h2>")
            && !page.contains("&quot;archive_sha256&quot;")
            && !page.contains("\"archive_sha256\":"),
        "no raw JSON on the page: {page}"
    );

    // A submission not graded yet has no receipt.
    f.app
        .state
        .db
        .set_submission_state(&f.good, app::contract::SubmissionState::Grading, None)
        .await
        .unwrap();
    let r = f
        .reviewer
        .client
        .get(f.app.url(&format!("/submissions/{}/receipt.json", f.good)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let page = f.page(&format!("/submissions/{}", f.good)).await;
    assert!(page.contains("data-state=\"grading\"") && page.contains("Grading now."), "{page}");
}

#[tokio::test]
async fn csv_compare_and_distribution() {
    let f = fixture().await;
    let (good_card, bad_card) = cards(&f.app).await;
    let r = f
        .reviewer
        .client
        .get(f.app.url(&format!("/packets/{SLUG}/scorecards.csv")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/csv"));
    let text = r.text().await.unwrap();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(
        &header[..7],
        ["assignment_id", "candidate", "email", "submission_id", "state", "decision", "score"]
    );
    assert!(
        header.contains(&"level:unknowns_stop".to_string()) && header.last().unwrap() == "failures",
        "{header:?}"
    );
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 2, "{text}");
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let ada = rows.iter().find(|r| &r[col("candidate")] == "Ada Lovelace").unwrap();
    let bob = rows.iter().find(|r| &r[col("candidate")] == "Bob Guesser").unwrap();
    assert_eq!(&ada[col("assignment_id")], f.good_assignment);
    assert_eq!(&ada[col("score")], good_card.scoring.score.unwrap().to_string());
    assert_eq!(&bob[col("score")], bad_card.scoring.score.unwrap().to_string());
    assert_eq!(&bob[col("decision")], bad_card.scoring.decision);
    assert_eq!(&ada[col("level:narrative")], "pending");
    assert!(
        bob[col("failures")].contains("invented-value")
            && !ada[col("failures")].contains("invented-value")
    );

    let page = f.page(&format!("/packets/{SLUG}/compare")).await;
    assert!(page.contains("Ada Lovelace") && page.contains("Bob Guesser"), "{page}");
    assert!(
        page.contains("invented-value")
            && page.contains(&format!("/packets/{SLUG}/distribution.svg"))
    );
    // The fingerprints are kept: viewing the page again reads no zip anew.
    let computed = f.app.state.memo.similarity.computed();
    assert!(computed >= 4, "a starter, two submissions and their pairs: {computed}");
    let (_, again) = f.get(&format!("/packets/{SLUG}/compare")).await;
    assert_eq!(f.app.state.memo.similarity.computed(), computed, "the second view computed again");
    assert!(again.contains("class=\"similar-pair\""), "{again}");
    let (_, only_bob) = f.get(&format!("/packets/{SLUG}/compare?ids={}", f.bad_assignment)).await;
    assert!(only_bob.contains("Bob Guesser") && !only_bob.contains("Ada Lovelace"), "{only_bob}");
    // Similarity: the variant is the sample with a few lines changed, so
    // the pair is shown; alone, Bob has no pair.
    let similar = &page[page.find("Similar submissions").expect("a similarity section")..];
    let row = &similar[similar
        .find("class=\"similar-pair\"")
        .unwrap_or_else(|| panic!("the near-copy pair is shown: {similar}"))..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains("Ada Lovelace") && row.contains("Bob Guesser") && row.contains(" %"),
        "{row}"
    );
    assert!(
        only_bob.contains("No pair of these submissions shares most of its code"),
        "{only_bob}"
    );
    // With aligned excerpts: the shared fragments of both, side by side,
    // each side naming its file and line range and showing those lines.
    let sample_gate =
        std::fs::read_to_string(repo_root().join("packets").join(SLUG).join("sample/gate.py"))
            .unwrap();
    excerpts_shown(similar, &sample_gate, 0, "compare");
    // And on both scorecards, each naming the other.
    for (me, other, name, sample_side) in
        [(&f.good, &f.bad, "Bob Guesser", 0), (&f.bad, &f.good, "Ada Lovelace", 1)]
    {
        let (_, card) = f.get(&format!("/submissions/{me}")).await;
        let at = card
            .find("class=\"similar-pair\"")
            .unwrap_or_else(|| panic!("no similar pair on {me}: {card}"));
        let li = &card[at..at + card[at..].find("</li>").unwrap()];
        assert!(
            li.contains(name)
                && li.contains(&format!("/submissions/{other}"))
                && li.contains(" % shared"),
            "{li}"
        );
        excerpts_shown(&card[at..], &sample_gate, sample_side, "scorecard");
    }

    let r = f
        .reviewer
        .client
        .get(f.app.url(&format!("/packets/{SLUG}/distribution.svg")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("image/svg+xml"));
    let svg = r.text().await.unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");
    let pct = |c: &Scorecard| (10 * c.scoring.score.unwrap() / c.scoring.max_score).min(9);
    let buckets = if pct(good_card) == pct(bad_card) { 1 } else { 2 };
    assert_eq!(svg.matches(" class=\"bar\"").count(), buckets, "{svg}");
    assert_eq!(svg.matches('<').count(), svg.matches('>').count());

    // A packet with no graded submission: an empty chart and compare page.
    f.app
        .state
        .db
        .create_version(NewVersion {
            slug: "empty",
            title: "Empty",
            builtin: false,
            dir: "x",
            digest: "d",
            created_by: None,
            publish: true,
        })
        .await
        .unwrap();
    let r =
        f.reviewer.client.get(f.app.url("/packets/empty/distribution.svg")).send().await.unwrap();
    let svg = r.text().await.unwrap();
    assert!(
        svg.starts_with("<svg")
            && svg.contains("No graded submission")
            && !svg.contains("class=\"bar\""),
        "{svg}"
    );
    let page = f.page("/packets/empty/compare").await;
    assert!(page.contains("No graded submission of this packet yet."));
    assert_eq!(f.get("/packets/nope/compare").await.0, 404);
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

#[tokio::test]
async fn scorecard_shows_unevaluated_mismatches_and_grading_failures() {
    let f = fixture().await;
    let db = &f.app.state.db;
    // A stored scorecard with an unevaluated failure and a tool mismatch,
    // as a grading on a host with another interpreter would leave it.
    let mut card = cards(&f.app).await.1.clone();
    card.environment.mismatches.push("python is pinned to 3.11 but the sandbox has 3.9.2".into());
    card.unevaluated.push(grader::grade::Unevaluated {
        id: "sentinel-laundering".into(),
        reason: "detector script crashed: exit 1".into(),
    });
    db.update_scorecard(
        &f.bad,
        &serde_json::to_string(&card).unwrap(),
        &serde_json::to_string(&card.receipt).unwrap(),
        &card.scoring.decision,
        Some(0.0),
    )
    .await
    .unwrap();
    let page = f.page(&format!("/submissions/{}", f.bad)).await;
    in_order(
        &page,
        &[
            "<h2>Findings</h2>",
            "class=\"unevaluated\"",
            "sentinel-laundering",
            "detector script crashed: exit 1",
            "<h2>Environment</h2>",
            "class=\"mismatch\"",
            "python is pinned to 3.11 but the sandbox has 3.9.2",
        ],
    );

    // A grading that failed says so, with its error, and takes no score.
    db.set_submission_state(
        &f.good,
        app::contract::SubmissionState::Failed,
        Some("sandbox failure: clone: EPERM"),
    )
    .await
    .unwrap();
    let page = f.page(&format!("/submissions/{}", f.good)).await;
    assert!(
        page.contains("data-state=\"failed\"")
            && page.contains("Grading failed: sandbox failure: clone: EPERM"),
        "{page}"
    );
    assert!(!page.contains("class=\"human-score\""), "no scoring form without a scorecard");
    let r = f
        .post(
            &format!("/submissions/{}/human", f.good),
            &[
                ("csrf", &f.reviewer.csrf),
                ("criterion", "narrative"),
                ("level", "1"),
                ("reason", "r"),
            ],
        )
        .await;
    assert_eq!(r.status(), 409);
    // A failed grading may be regraded.
    let r =
        f.post(&format!("/submissions/{}/regrade", f.good), &[("csrf", &f.reviewer.csrf)]).await;
    assert_eq!(r.status(), 303);
    assert_eq!(db.submission_by_id(&f.good).await.unwrap().unwrap().state.as_str(), "queued");

    // The assignment page shows its candidate, packet and state.
    let page = f.page(&format!("/assignments/{}", f.good_assignment)).await;
    assert!(
        page.contains("Ada Lovelace")
            && page.contains("ada@example.com")
            && page.contains("null-status"),
        "{page}"
    );
    assert_eq!(f.get("/assignments/nope").await.0, 404);
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

/// A submission cannot make a reviewer's page enormous: the scorecard's
/// diffs stop at a total, and say how many files were not shown; the
/// platform's own files are listed as such, never diffed.
#[tokio::test]
async fn scorecard_diffs_are_capped_in_total() {
    let f = fixture().await;
    let db = &f.app.state.db;
    let (good_card, good_zip) = &graded(&f.app).await.0;
    // The sample's zip plus 40 added files of 1,000 lines each.
    let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(good_zip.clone())).unwrap();
    for i in 0..archive.len() {
        use std::io::Read;
        let mut e = archive.by_index(i).unwrap();
        let mut bytes = Vec::new();
        e.read_to_end(&mut bytes).unwrap();
        entries.push((e.name().unwrap().to_string(), bytes));
    }
    let big: String = (0..1000).map(|n| format!("line {n}\n")).collect();
    let mut card = good_card.clone();
    for i in 0..40 {
        let path = format!("flood/f{i:02}.txt");
        card.receipt.submission.files.push(grader::ingest::IngestedFile {
            path: path.clone(),
            size: big.len() as u64,
            sha256: grader::tree::sha256_hex(big.as_bytes()),
            mtime: None,
        });
        entries.push((path, big.clone().into_bytes()));
    }
    card.receipt.submission.platform_files.push(grader::ingest::IngestedFile {
        path: "GATEHOUSE_PIN.toml".into(),
        size: 3,
        sha256: "ab".repeat(32),
        mtime: None,
    });
    let mut zip_bytes = std::io::Cursor::new(Vec::new());
    {
        let mut w = zip::ZipWriter::new(&mut zip_bytes);
        for (name, bytes) in &entries {
            w.start_file(name.as_str(), zip::write::SimpleFileOptions::default()).unwrap();
            std::io::Write::write_all(&mut w, bytes).unwrap();
        }
        w.finish().unwrap();
    }
    let zip_bytes = zip_bytes.into_inner();
    let sha = grader::tree::sha256_hex(&zip_bytes);
    card.receipt.submission.archive_sha256 = sha.clone();
    let blob = f.app.state.config.data_dir.join("blobs").join(&sha[..2]).join(&sha);
    std::fs::create_dir_all(blob.parent().unwrap()).unwrap();
    std::fs::write(&blob, &zip_bytes).unwrap();
    db.set_graded(
        &f.good,
        &serde_json::to_string(&card).unwrap(),
        &serde_json::to_string(&card.receipt).unwrap(),
        &card.scoring.decision,
        0.0,
    )
    .await
    .unwrap();
    // The stored submission points at the new zip.
    let page = f.page(&format!("/submissions/{}", f.good)).await;
    let shown = page.matches("<span class=\"add\">").count();
    assert!(shown <= 20_000, "{shown} diff lines shown");
    assert!(page.contains("more file(s) not shown"), "no note on the files left out");
    assert!(
        page.contains("GATEHOUSE_PIN.toml") && page.contains(">platform<"),
        "the pin file is listed as the platform's"
    );
}

/// Signs `email` (password "correct horse battery") in through the real
/// sign-in form of a headless Chromium.
async fn browser_sign_in(app: &TestApp, email: &str) -> crate::webdriver::Browser {
    let b = crate::webdriver::Browser::new(&app.base).await;
    b.goto("/login").await;
    b.fill("form[action^='/login'] input[name='email']", email).await;
    b.fill("form[action^='/login'] input[name='password']", "correct horse battery").await;
    b.click("form[action^='/login'] button[type='submit']").await;
    b.wait(".signout").await;
    b
}

/// The compare table, rendered by Chromium: every header cell sits over the
/// cells of its column (same left edge and width), for every body row.
#[tokio::test]
async fn compare_columns_line_up_in_a_real_browser() {
    let _one = crate::webdriver::exclusive().await;
    let f = fixture().await;
    let b = browser_sign_in(&f.app, "rita@example.com").await;
    b.goto(&format!("/packets/{SLUG}/compare")).await;
    b.wait("table.compare tbody tr").await;
    let boxes = b
        .script(
            "const t = document.querySelector('table.compare');
             const rows = [...t.querySelectorAll('tr')];
             return { display: getComputedStyle(t).display,
                      rows: rows.map(r => [...r.children].map(c => { const b = c.getBoundingClientRect(); return [b.left, b.width, b.top]; })) };",
        )
        .await;
    assert_eq!(boxes["display"], "table", "the compare table is laid out as a table: {boxes}");
    let rows = boxes["rows"].as_array().unwrap();
    assert!(rows.len() >= 4, "a header row and criterion, decision, score, failures rows: {boxes}");
    let head = rows[0].as_array().unwrap();
    assert_eq!(head.len(), 3, "Criterion and two candidates: {boxes}");
    for (r, row) in rows.iter().enumerate().skip(1) {
        let row = row.as_array().unwrap();
        assert_eq!(row.len(), head.len(), "row {r} has one cell per column: {boxes}");
        for (c, (cell, th)) in row.iter().zip(head).enumerate() {
            for (k, what) in [(0, "left edge"), (1, "width")] {
                let (a, b) = (cell[k].as_f64().unwrap(), th[k].as_f64().unwrap());
                assert!(
                    (a - b).abs() < 1.0,
                    "row {r} column {c}: {what} {a} under a header at {b}: {boxes}"
                );
            }
        }
        // Each body row is below the one before it (no grid flow).
        let prev = rows[r - 1].as_array().unwrap()[0][2].as_f64().unwrap();
        assert!(row[0][2].as_f64().unwrap() > prev, "row {r} is below row {}: {boxes}", r - 1);
    }
    b.snapshot("compare").await;
    // The similar pair's shared fragments sit side by side: each excerpt's
    // two sides on one row, left then right, neither overflowing the other.
    let sides = b
        .script(
            "const e = document.querySelector('.excerpt'); e.scrollIntoView();
             return [...e.querySelectorAll('.excerpt-side')].map(s => { const r = s.getBoundingClientRect(); return [r.left, r.right, r.top]; });",
        )
        .await;
    let sides = sides.as_array().unwrap();
    assert_eq!(sides.len(), 2, "{sides:?}");
    let (a, c) = (sides[0].as_array().unwrap(), sides[1].as_array().unwrap());
    assert!(
        (a[2].as_f64().unwrap() - c[2].as_f64().unwrap()).abs() < 1.0,
        "both sides start on one row: {sides:?}"
    );
    assert!(
        a[1].as_f64().unwrap() <= c[0].as_f64().unwrap(),
        "the first side is left of the second: {sides:?}"
    );
    b.snapshot("compare-excerpts").await;
    b.close().await;
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

    // Scoring the auto-override row is not enough: the human row is theirs to score.
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
    score(&f.reviewer, "unknowns_stop").await;
    assert!(!f.get(&format!("/submissions/{}", f.good)).await.1.contains("Ada Lovelace"));
    score(&f.reviewer, "narrative").await;
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
    let paths = ["gate.py", "NOTES.md", "docs/NOTES.md", "transcript.jsonl"];
    let find = |title: &str, levels: &[&str]| {
        file_named_by(
            title,
            &levels.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            paths.iter().copied(),
        )
    };
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
