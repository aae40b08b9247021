//! The pictures in the README and docs/hiring-teams.md, from a real run:
//! the `gatehouse serve` binary on a fresh SQLite database with one
//! built-in packet, the first admin made through the one-time setup link
//! the server prints, an invite, the packet's sample handed in through the
//! candidate's page in headless Chromium, and the candidate's page, the
//! receipt and the reviewer's scorecard saved as PNGs in
//! `docs/screenshots/`. Ignored in the suite (it writes into the source
//! tree); `scripts/screenshots` runs it.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::browser::require_bundle;
use crate::children::{Server, Settings};
use crate::e2e::{walk, zip_tree};
use crate::support::repo_root;
use crate::webdriver::{Browser, exclusive};

/// The packet the walkthrough uses.
const PACKET: &str = "refund-invoices";

/// Copies the folder `from` to `to`.
fn copy_tree(from: &Path, to: &Path) {
    for file in walk(from) {
        let dest = to.join(file.strip_prefix(from).unwrap());
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(&file, &dest).unwrap();
    }
}

/// Saves the browser's window as `docs/screenshots/<name>.png`, 1280 by
/// `height` pixels, scrolled so that the element `top` (a CSS selector)
/// is at the top, when given.
async fn save(b: &Browser, name: &str, height: u32, top: Option<&str>) {
    b.client.set_window_size(1280, height).await.expect("the window resized");
    if let Some(css) = top {
        b.wait(css).await;
        b.script(&format!("document.querySelector({css:?}).scrollIntoView()")).await;
    }
    let png = b.client.screenshot().await.expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG"), "{name}: not a PNG");
    let dir = repo_root().join("docs/screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    eprintln!("wrote docs/screenshots/{name}.png");
}

/// The setup link `gatehouse serve` prints on a database with no accounts.
async fn setup_link(server: &Server) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = server.log_text();
        if let Some(at) = log.find("/setup/") {
            let start = log[..at].rfind(char::is_whitespace).map_or(0, |i| i + 1);
            let end = log[at..].find(char::is_whitespace).map_or(log.len(), |i| at + i);
            return log[start..end].to_string();
        }
        assert!(Instant::now() < deadline, "no setup link was printed:\n{log}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
#[ignore = "writes docs/screenshots/; scripts/screenshots runs it"]
async fn the_first_hour() {
    let _one = exclusive().await;
    require_bundle();
    let dir = tempfile::tempdir().unwrap();
    let packets = dir.path().join("packets");
    copy_tree(&repo_root().join("packets").join(PACKET), &packets.join(PACKET));
    let settings = Settings {
        database_url: format!("sqlite://{}", dir.path().join("data/gatehouse.db").display()),
        data_dir: dir.path().join("data"),
        lease_secs: 60,
        env: vec![("GATEHOUSE_PACKETS_DIR".into(), packets.display().to_string())],
    };
    let mut server = Server::new(settings, 1, dir.path().join("serve.log"));
    server.start().await;
    let base = server.base();

    // The first admin, through the setup link.
    let link = setup_link(&server).await;
    assert!(link.starts_with(&base), "{link}");
    let admin = Browser::new(&base).await;
    admin.goto(&link).await;
    admin.fill("input[name='email']", "ada@example.com").await;
    admin.fill("input[name='name']", "Ada Admin").await;
    admin.fill("input[name='password']", "a-long-password").await;
    admin.click("form button[type='submit']").await;
    admin.wait(".signout").await;

    // The built-in packet is published at start: invite a candidate.
    admin.goto(&format!("/assignments/new?packet={PACKET}")).await;
    admin.wait(&format!("select[name='packet'] option[value='{PACKET}']")).await;
    admin.fill("input[name='candidate_name']", "Grace Candidate").await;
    admin.fill("input[name='email']", "grace@example.com").await;
    admin.click("form[action='/assignments'] button[type='submit']").await;
    admin.wait_path("/assignments/").await;
    let invite =
        admin.find("input.invite-url").await.prop("value").await.unwrap().expect("an invite URL");

    // The candidate starts, and hands in the packet's sample.
    let sample = dir.path().join("sample.zip");
    zip_tree(&repo_root().join("packets").join(PACKET).join("sample"), "", &sample);
    let candidate = Browser::new(&base).await;
    candidate.goto(&invite).await;
    if candidate.exists("#start-time-box").await {
        candidate.click("#start-time-box").await;
        candidate.wait("a.starter").await;
    }
    candidate.wait("#upload-form[data-hydrated='true']").await;
    save(&candidate, "candidate", 1000, Some("#time-heading")).await;
    candidate.choose_file("#upload-file", &sample).await;
    candidate.click("#upload-submit").await;
    let page = invite.trim_start_matches(&base).to_string();
    let receipt = candidate.wait_path(&format!("{page}/submissions/")).await;
    candidate.wait_for("#live-state[data-state='graded']", Duration::from_secs(300)).await;
    candidate.goto(&receipt).await;
    candidate.wait("#live-state[data-state='graded']").await;
    save(&candidate, "receipt", 560, None).await;
    candidate.close().await;

    // The reviewer (the admin here) reads the scorecard.
    let submission = receipt.rsplit('/').next().unwrap().to_string();
    admin.goto(&format!("/submissions/{submission}")).await;
    admin.wait(".summary .score").await;
    assert!(admin.exists("section.findings").await, "{}", admin.source().await);
    save(&admin, "scorecard", 1300, None).await;
    admin.close().await;
}
