//! The reviewer's side over HTTP: scorecards in evidence order, human
//! scoring with reasons, receipts and exports, compare and distribution,
//! regrade, and refusals without a session or CSRF token.
//!
//! Submissions are graded directly with the app's grader (not through the
//! queue): the `null-status` sample (clean) and its `invented-guess` variant
//! (a known failure). The two gradings are done once per test binary and
//! stored into each test's fresh database.

mod exports;
mod inbox;
mod scorecard;
mod scoring;

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

pub(super) const SLUG: &str = "null-status";

/// The clean sample's and the bad variant's scorecards with their zips,
/// graded once.
pub(super) static GRADED: OnceCell<(Graded, Graded)> = OnceCell::const_new();

/// A scorecard and the zip it graded.
type Graded = (Scorecard, Vec<u8>);

pub(super) fn zip_tree(packet: &Packet, dir: &Path, times: &BTreeMap<String, i64>, out: &Path) {
    let absolute: BTreeMap<String, i64> =
        times.iter().map(|(k, v)| (k.clone(), TIME_BASE + v)).collect();
    grader::ingest::write_zip_from_dir(dir, out, &absolute, TIME_BASE).unwrap();
    assert!(out.is_file(), "zipping {} for {}", dir.display(), packet.manifest.packet.slug);
}

pub(super) async fn graded(app: &TestApp) -> &'static (Graded, Graded) {
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

pub(super) async fn cards(app: &TestApp) -> (&'static Scorecard, &'static Scorecard) {
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

pub(super) struct Fixture {
    app: TestApp,
    reviewer: Browser,
    good: String,
    bad: String,
    good_assignment: String,
    bad_assignment: String,
}

pub(super) async fn fixture() -> Fixture {
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
pub(super) fn excerpts_shown(page: &str, gate: &str, sample_side: usize, what: &str) {
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
pub(super) fn in_order(text: &str, parts: &[&str]) {
    let mut at = 0;
    for p in parts {
        match text[at..].find(p) {
            Some(i) => at += i + p.len(),
            None => panic!("{p:?} missing after byte {at} (or out of order) in:\n{text}"),
        }
    }
}

/// Signs `email` (password "correct horse battery") in through the real
/// sign-in form of a headless Chromium.
pub(super) async fn browser_sign_in(app: &TestApp, email: &str) -> crate::webdriver::Browser {
    let b = crate::webdriver::Browser::new(&app.base).await;
    b.goto("/login").await;
    b.fill("form[action^='/login'] input[name='email']", email).await;
    b.fill("form[action^='/login'] input[name='password']", "correct horse battery").await;
    b.click("form[action^='/login'] button[type='submit']").await;
    b.wait(".signout").await;
    b
}
