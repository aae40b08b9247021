//! Receipts (JSON and standalone HTML), CSV, compare and distribution,
//! and compare's columns in a real browser.

#[allow(unused_imports)]
use super::*;

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
    let shipped = grader::packet::Packet::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../packets/null-status"),
    )
    .expect("the built-in null-status loads")
    .manifest
    .packet
    .version;
    assert_eq!(card.receipt.packet.version, shipped);
    assert!(html.contains("null-status v1 (") && !html.contains("version 1 ("), "{html}");
    assert!(
        html.contains(&format!("records the packet.toml version <code>{shipped}</code>")),
        "{html}"
    );
    assert_eq!(
        grader::grade::receipt_digest(&card.receipt),
        card.receipt.digest,
        "an old receipt still verifies"
    );

    let page = f.page(&format!("/submissions/{}/receipt", f.bad)).await;
    assert!(page.contains(&card.receipt.digest) && page.contains("receipt.json"), "{page}");
    // Decision, score and digest once each: the page is the receipt's document.
    for once in ["<th>Decision</th>", "<th>Score</th>", "<th>Receipt digest</th>"] {
        assert_eq!(page.matches(once).count(), 1, "{once} on the receipt page: {page}");
    }
    assert_eq!(page.matches(&card.receipt.digest).count(), 1, "the digest twice: {page}");
    assert!(!page.contains("Digest as graded"), "no reviewer scored: {page}");
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
    let table = |page: &str| {
        let at = page.find("<table class=\"compare\"").expect("a compare table");
        page[at..at + page[at..].find("</table>").unwrap()].to_string()
    };
    let t = table(&only_bob);
    assert!(t.contains("Bob Guesser") && !t.contains("Ada Lovelace"), "{t}");
    // The picker offers every graded submission, Bob's ticked.
    let picker = &only_bob[only_bob.find("compare-pick").unwrap()..];
    let picker = &picker[..picker.find("</form>").unwrap()];
    assert!(picker.contains("Ada Lovelace") && picker.contains("Show all"), "{picker}");
    let ticked = |who: &str| {
        let li = &picker[picker.find(&format!("value=\"{who}\"")).unwrap()..];
        li[..li.find('>').unwrap()].contains("checked")
    };
    assert!(ticked(&f.bad) && !ticked(&f.good), "{picker}");
    // Repeated `ids` (the form's boxes) and comma-separated ones both pick.
    for q in [format!("ids={}&ids={}", f.good, f.bad), format!("ids={},{}", f.good, f.bad)] {
        let t = table(&f.get(&format!("/packets/{SLUG}/compare?{q}")).await.1);
        assert!(t.contains("Bob Guesser") && t.contains("Ada Lovelace"), "{q}: {t}");
    }
    let many = (0..51).map(|i| format!("ids=x{i}")).collect::<Vec<_>>().join("&");
    let (status, body) = f.get(&format!("/packets/{SLUG}/compare?{many}")).await;
    assert!(status == 400 && body.contains("at most 50"), "{status} {body}");
    // Compare and the CSV are a click away from the inbox and the packet page.
    for path in ["/inbox".to_string(), format!("/packets/{SLUG}")] {
        let page = f.page(&path).await;
        for link in [
            format!("href=\"/packets/{SLUG}/compare\""),
            format!("href=\"/packets/{SLUG}/scorecards.csv\""),
        ] {
            assert!(page.contains(&link), "{path}: {link}");
        }
    }
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
        // The verdict comes first; similarity is folded after it, to one line.
        let decision = card.find("class=\"summary\"").expect("the decision");
        let folded = card
            .find("<details id=\"similar\" class=\"similar notice\">")
            .expect("a folded (not open) similarity section");
        assert!(decision < folded, "the decision comes before similarity");
        assert!(
            card[folded..].contains("1 pair(s), the most alike sharing"),
            "{}",
            &card[folded..]
        );
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
    // Picking: tick one candidate, compare, and the table has their column only.
    b.click("details.compare-pick summary").await;
    b.click(&format!("details.compare-pick input[value='{}']", f.bad)).await;
    b.click("details.compare-pick button[type='submit']").await;
    b.wait_path(&format!("/packets/{SLUG}/compare?ids={}", f.bad)).await;
    let heads = b
        .script("return document.querySelectorAll('table.compare thead th.candidate').length;")
        .await;
    assert_eq!(heads, serde_json::json!(1), "one picked column");
    b.snapshot("compare-picked").await;
    b.close().await;
}
