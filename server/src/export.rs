//! Exports of graded work: the standalone HTML receipt (askama, inline CSS,
//! no external asset, so it opens offline from disk), the CSV of a packet's
//! scorecards, and the score distribution as a hand-written SVG.

use std::collections::BTreeMap;

use app::pages::review::CardView;
use askama::Template;
use grader::grade::Scorecard;

/// The standalone receipt document.
#[derive(Template)]
#[template(path = "receipt.html")]
pub struct ReceiptHtml<'a> {
    pub candidate: &'a str,
    pub slug: &'a str,
    /// "v2", as the pages say it.
    pub version: &'a str,
    /// The version an older receipt records instead (the packet.toml
    /// version, e.g. "1.0.0"); empty when the receipt says `version`.
    pub recorded_version: &'a str,
    pub submission_id: &'a str,
    pub received_at: &'a str,
    pub card: &'a CardView,
    /// The receipt JSON, pretty-printed.
    pub json: &'a str,
}

/// Renders the standalone receipt.
pub fn receipt_html(r: &ReceiptHtml<'_>) -> anyhow::Result<String> {
    Ok(r.render()?)
}

/// One row of the scorecards CSV: a submission with its assignment.
pub struct CsvRow<'a> {
    pub assignment_id: &'a str,
    pub candidate: &'a str,
    pub email: &'a str,
    pub submission_id: &'a str,
    pub state: &'a str,
    /// The parsed scorecard, when graded.
    pub card: Option<&'a Scorecard>,
}

/// The CSV of a packet's scorecards: a header, then one row per submission.
/// Criterion columns are the union of the criteria of the rows'
/// scorecards, in the order they first appear; a row without a level for a
/// criterion leaves the cell empty ("pending" when a reviewer must score it).
pub fn scorecards_csv(rows: &[CsvRow<'_>]) -> anyhow::Result<String> {
    let mut criteria: Vec<String> = Vec::new();
    for card in rows.iter().filter_map(|r| r.card) {
        for c in &card.scoring.criteria {
            if !criteria.contains(&c.id) {
                criteria.push(c.id.clone());
            }
        }
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> =
        ["assignment_id", "candidate", "email", "submission_id", "state", "decision", "score", "max_score"].iter().map(|s| s.to_string()).collect();
    header.extend(criteria.iter().map(|c| format!("level:{c}")));
    header.push("failures".into());
    w.write_record(&header)?;
    for r in rows {
        let mut record: Vec<String> =
            vec![r.assignment_id.into(), r.candidate.into(), r.email.into(), r.submission_id.into(), r.state.into()];
        match r.card {
            Some(card) => {
                record.push(card.scoring.decision.clone());
                record.push(card.scoring.score.map(|s| s.to_string()).unwrap_or_default());
                record.push(card.scoring.max_score.to_string());
                for id in &criteria {
                    let cell = card.scoring.criteria.iter().find(|c| &c.id == id).map(|c| match c.level {
                        Some(l) => l.to_string(),
                        None => "pending".into(),
                    });
                    record.push(cell.unwrap_or_default());
                }
                record.push(card.findings.iter().map(|f| f.id.as_str()).collect::<Vec<_>>().join(" "));
            }
            None => {
                record.extend(std::iter::repeat_n(String::new(), 3 + criteria.len() + 1));
            }
        }
        w.write_record(&record)?;
    }
    Ok(String::from_utf8(w.into_inner().map_err(|e| anyhow::anyhow!("writing the CSV: {e}"))?)?)
}

/// Escapes text for XML content and attribute values.
pub use app::text::escape_html as xml_escape;

/// Colors for decisions ranked best first; pending and unknown decisions
/// are grey.
const PALETTE: [&str; 5] = ["#2e7d32", "#f9a825", "#c62828", "#6a1b9a", "#00838f"];
const GREY: &str = "#9e9e9e";

/// The number of buckets of the histogram (10 % of the maximum each).
pub const BUCKETS: usize = 10;

/// A histogram of `scores` (each a percentage of its maximum, with its
/// decision) in `BUCKETS` buckets, each bar stacked by decision. `ranked`
/// names the packet's decisions best first, for their colors and the
/// legend. With no score it draws a short message instead of bars.
pub fn distribution_svg(title: &str, scores: &[(f64, String)], ranked: &[String]) -> String {
    let (w, h) = (640.0_f64, 300.0_f64);
    let (left, right, top, bottom) = (40.0, 150.0, 30.0, 40.0);
    let plot_w = w - left - right;
    let plot_h = h - top - bottom;
    let mut s = String::new();
    s.push_str(&format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{}">"#,
        xml_escape(title)
    ));
    s.push_str(&format!(r#"<title>{}</title>"#, xml_escape(title)));
    s.push_str(&format!(r##"<rect class="frame" x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>"##));
    if scores.is_empty() {
        s.push_str(&format!(
            r##"<text class="empty" x="{}" y="{}" text-anchor="middle" font-family="sans-serif" font-size="14" fill="#555555">No graded submission with a score yet.</text></svg>"##,
            w / 2.0,
            h / 2.0
        ));
        return s;
    }
    // Decisions in legend order: the packet's ranking, then any other.
    let mut order: Vec<String> = ranked.to_vec();
    for (_, d) in scores {
        if !order.contains(d) {
            order.push(d.clone());
        }
    }
    let color = |d: &str| -> &'static str {
        match ranked.iter().position(|r| r == d) {
            Some(i) if d != grader::score::PENDING => PALETTE[i % PALETTE.len()],
            _ => GREY,
        }
    };
    let mut buckets: Vec<BTreeMap<usize, usize>> = vec![BTreeMap::new(); BUCKETS];
    for (pct, d) in scores {
        let b = ((pct.clamp(0.0, 100.0) / 100.0) * BUCKETS as f64).floor() as usize;
        let b = b.min(BUCKETS - 1);
        let rank = order.iter().position(|o| o == d).unwrap_or(0);
        *buckets[b].entry(rank).or_insert(0) += 1;
    }
    let most = buckets.iter().map(|b| b.values().sum::<usize>()).max().unwrap_or(1).max(1);
    let bar_w = plot_w / BUCKETS as f64;
    // Axes and a count scale.
    s.push_str(&format!(
        r##"<line x1="{left}" y1="{}" x2="{}" y2="{}" stroke="#333333"/><line x1="{left}" y1="{top}" x2="{left}" y2="{}" stroke="#333333"/>"##,
        top + plot_h,
        left + plot_w,
        top + plot_h,
        top + plot_h
    ));
    s.push_str(&format!(
        r##"<text x="{}" y="{}" text-anchor="end" font-family="sans-serif" font-size="11" fill="#333333">{most}</text>"##,
        left - 4.0,
        top + 4.0
    ));
    for i in 0..=BUCKETS {
        if i % 2 == 0 {
            s.push_str(&format!(
                r##"<text x="{:.1}" y="{}" text-anchor="middle" font-family="sans-serif" font-size="11" fill="#333333">{}%</text>"##,
                left + bar_w * i as f64,
                top + plot_h + 16.0,
                i * 100 / BUCKETS
            ));
        }
    }
    for (i, bucket) in buckets.iter().enumerate() {
        let total: usize = bucket.values().sum();
        if total == 0 {
            continue;
        }
        let (lo, hi) = (i * 100 / BUCKETS, (i + 1) * 100 / BUCKETS);
        s.push_str(&format!(r#"<g class="bar" data-bucket="{lo}-{hi}" data-count="{total}">"#));
        let mut y = top + plot_h;
        for (rank, n) in bucket {
            let d = &order[*rank];
            let bh = plot_h * *n as f64 / most as f64;
            y -= bh;
            s.push_str(&format!(
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{lo}–{hi}%: {n} {}</title></rect>"#,
                left + bar_w * i as f64 + 2.0,
                y,
                bar_w - 4.0,
                bh,
                color(d),
                xml_escape(d)
            ));
        }
        s.push_str("</g>");
    }
    // The legend, one line per decision present.
    let present: Vec<&String> = order.iter().filter(|d| scores.iter().any(|(_, x)| x == *d)).collect();
    for (i, d) in present.iter().enumerate() {
        let y = top + 18.0 * i as f64;
        s.push_str(&format!(
            r##"<g class="legend"><rect x="{}" y="{y}" width="12" height="12" fill="{}"/><text x="{}" y="{}" font-family="sans-serif" font-size="12" fill="#333333">{}</text></g>"##,
            w - right + 16.0,
            color(d),
            w - right + 34.0,
            y + 10.0,
            xml_escape(d)
        ));
    }
    s.push_str("</svg>");
    s
}

/// One line of a line diff: `' '` unchanged, `'-'` only in the old text,
/// `'+'` only in the new one, `'@'` a run of unchanged lines left out.
pub type DiffLine = (char, String);

/// Most lines a side may have to be diffed here.
const DIFF_LINES: usize = 50_000;

/// A line diff of `old` against `new` (Myers, with the `similar` crate, so
/// linear memory) with `context` unchanged lines kept around each change;
/// None when a text is too long to diff here.
pub fn line_diff(old: &str, new: &str, context: usize) -> Option<Vec<DiffLine>> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    if a.len() > DIFF_LINES || b.len() > DIFF_LINES {
        return None;
    }
    // A page view never waits long on a pathological pair: past the
    // deadline `similar` finishes with a coarser (still correct) diff.
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(250);
    let mut all: Vec<DiffLine> = Vec::with_capacity(a.len().max(b.len()));
    for op in similar::capture_diff_slices_deadline(similar::Algorithm::Myers, &a, &b, Some(deadline)) {
        for change in similar::DiffOp::iter_changes(&op, &a, &b) {
            let mark = match change.tag() {
                similar::ChangeTag::Equal => ' ',
                similar::ChangeTag::Delete => '-',
                similar::ChangeTag::Insert => '+',
            };
            all.push((mark, change.value().to_string()));
        }
    }
    // Keep `context` lines around changes; fold the other unchanged runs.
    let near: Vec<bool> = (0..all.len())
        .map(|k| {
            let lo = k.saturating_sub(context);
            let hi = (k + context + 1).min(all.len());
            all[lo..hi].iter().any(|(c, _)| *c != ' ')
        })
        .collect();
    let mut out = Vec::new();
    let mut skipped = 0usize;
    for (k, line) in all.into_iter().enumerate() {
        if near[k] {
            if skipped > 0 {
                out.push(('@', format!("… {skipped} unchanged line{}", if skipped == 1 { "" } else { "s" })));
                skipped = 0;
            }
            out.push(line);
        } else {
            skipped += 1;
        }
    }
    if skipped > 0 {
        out.push(('@', format!("… {skipped} unchanged line{}", if skipped == 1 { "" } else { "s" })));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_diff_marks_changes_and_folds_unchanged_runs() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nD\ne\nf\ng\nh\ni\n";
        let d = line_diff(old, new, 1).unwrap();
        let text: Vec<String> = d.iter().map(|(c, l)| format!("{c}{l}")).collect();
        assert_eq!(text, ["@… 2 unchanged lines", " c", "-d", "+D", " e", "@… 2 unchanged lines", " h", "+i"]);
        assert_eq!(line_diff("same\n", "same\n", 3).unwrap(), vec![('@', "… 1 unchanged line".to_string())]);
        assert_eq!(line_diff("", "x\ny", 3).unwrap(), vec![('+', "x".to_string()), ('+', "y".to_string())]);
        // Large and wholly different: still a diff (the old table refused
        // 4,000 × 4,000), in linear memory; past the line cap, none.
        let (x, y): (String, String) = ((0..4000).map(|i| format!("old {i}\n")).collect(), (0..4000).map(|i| format!("new {i}\n")).collect());
        let d = line_diff(&x, &y, 3).unwrap();
        assert_eq!((d.iter().filter(|(c, _)| *c == '-').count(), d.iter().filter(|(c, _)| *c == '+').count()), (4000, 4000));
        let huge: String = "l\n".repeat(DIFF_LINES + 1);
        assert!(line_diff(&huge, "l\n", 3).is_none());
    }

    #[test]
    fn svg_has_one_group_per_nonempty_bucket_and_escapes_text() {
        let scores = vec![(95.0, "advance".to_string()), (100.0, "advance".into()), (20.0, "no".into()), (25.0, "<x>".into())];
        let svg = distribution_svg("a & b", &scores, &["advance".into(), "conversation".into(), "no".into()]);
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.ends_with("</svg>"));
        assert_eq!(svg.matches(r#"<g class="bar""#).count(), 2, "{svg}");
        assert!(svg.contains(r#"data-bucket="90-100" data-count="2""#), "{svg}");
        assert!(svg.contains("a &amp; b"));
        assert!(svg.contains("&lt;x&gt;") && !svg.contains("<x>"));
    }

    #[test]
    fn empty_svg_says_so() {
        let svg = distribution_svg("t", &[], &[]);
        assert!(svg.starts_with("<svg") && svg.contains("No graded submission"));
        assert!(!svg.contains(r#"class="bar""#));
    }
}
