//! Exports of graded work: the standalone HTML receipt (askama, inline CSS,
//! no external asset, so it opens offline from disk), the CSV of a packet's
//! scorecards, and the score distribution as a hand-written SVG.

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
    /// The transcript digests the receipt lists, one row per call.
    pub transcript: &'a [TranscriptRow],
    /// Whether the rows carry the calls' text.
    pub with_text: bool,
}

/// One call of the receipt's transcript list.
pub struct TranscriptRow {
    pub call: i64,
    pub request_sha256: String,
    pub response_sha256: String,
    pub cut: String,
    /// The prompt and answer as plain text (empty unless asked for).
    pub text: String,
}

/// A call's prompt and answer as plain text, for the standalone receipt.
pub fn transcript_text(t: &crate::transcript::CallTranscript) -> String {
    let view = crate::transcript::call_view(t, String::new());
    let mut out = String::new();
    let mut push = |label: &str, m: &app::pages::transcript::MessageView| {
        out.push_str(&format!("[{label} {}]\n", m.role));
        if !m.text.is_empty() {
            out.push_str(&m.text);
            out.push('\n');
        }
        for c in &m.tool_calls {
            out.push_str(&format!("tool call {}({})\n", c.name, c.arguments));
        }
    };
    for m in &view.prompt {
        push("prompt", m);
    }
    for m in &view.answer {
        push("answer", m);
    }
    for raw in [&view.raw_request, &view.raw_response].into_iter().flatten() {
        out.push_str(raw);
        out.push('\n');
    }
    if let Some(reason) = view.reason.as_ref().filter(|_| view.refused.is_some()) {
        out.push_str(&format!(
            "refused ({}): {reason}\n",
            view.refused.as_deref().unwrap_or_default()
        ));
    }
    out
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
    /// For an erased candidate (no card): the final decision and score
    /// the erasure kept.
    pub erased: Option<(Option<&'a str>, Option<f64>)>,
}

/// The CSV of a packet's scorecards: a header, then one row per submission
/// (and one per erased candidate: state `erased`, the final decision and
/// score, no name, email or levels).
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
    let mut header: Vec<String> = [
        "assignment_id",
        "candidate",
        "email",
        "submission_id",
        "state",
        "decision",
        "score",
        "max_score",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    header.extend(criteria.iter().map(|c| format!("level:{c}")));
    header.push("failures".into());
    w.write_record(&header)?;
    for r in rows {
        let mut record: Vec<String> = vec![
            r.assignment_id.into(),
            r.candidate.into(),
            r.email.into(),
            r.submission_id.into(),
            r.state.into(),
        ];
        match r.card {
            Some(card) => {
                record.push(card.scoring.decision.clone());
                record.push(card.scoring.score.map(|s| s.to_string()).unwrap_or_default());
                record.push(card.scoring.max_score.to_string());
                for id in &criteria {
                    let cell =
                        card.scoring.criteria.iter().find(|c| &c.id == id).map(|c| match c.level {
                            Some(l) => l.to_string(),
                            None => "pending".into(),
                        });
                    record.push(cell.unwrap_or_default());
                }
                record.push(
                    card.findings.iter().map(|f| f.id.as_str()).collect::<Vec<_>>().join(" "),
                );
            }
            None => {
                let (decision, score) = r.erased.unwrap_or((None, None));
                record.push(decision.unwrap_or_default().to_string());
                record.push(score.map(|s| s.to_string()).unwrap_or_default());
                record.extend(std::iter::repeat_n(String::new(), 1 + criteria.len() + 1));
            }
        }
        w.write_record(&record)?;
    }
    Ok(String::from_utf8(w.into_inner().map_err(|e| anyhow::anyhow!("writing the CSV: {e}"))?)?)
}

/// The number of buckets of the histogram (10 % of the maximum each).
pub use app::charts::BUCKETS;

/// A histogram of `scores` (each a percentage of its maximum, with its
/// decision) in `BUCKETS` buckets, each bar stacked by decision, drawn by
/// `app::charts` (`pending` always grey). `ranked` names the packet's
/// decisions best first, for their colors and the legend.
pub fn distribution_svg(title: &str, scores: &[(f64, String)], ranked: &[String]) -> String {
    app::charts::distribution_svg(title, scores, ranked, grader::score::PENDING)
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
    for op in
        similar::capture_diff_slices_deadline(similar::Algorithm::Myers, &a, &b, Some(deadline))
    {
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
                out.push((
                    '@',
                    format!("… {skipped} unchanged line{}", if skipped == 1 { "" } else { "s" }),
                ));
                skipped = 0;
            }
            out.push(line);
        } else {
            skipped += 1;
        }
    }
    if skipped > 0 {
        out.push((
            '@',
            format!("… {skipped} unchanged line{}", if skipped == 1 { "" } else { "s" }),
        ));
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
        assert_eq!(
            text,
            ["@… 2 unchanged lines", " c", "-d", "+D", " e", "@… 2 unchanged lines", " h", "+i"]
        );
        assert_eq!(
            line_diff("same\n", "same\n", 3).unwrap(),
            vec![('@', "… 1 unchanged line".to_string())]
        );
        assert_eq!(
            line_diff("", "x\ny", 3).unwrap(),
            vec![('+', "x".to_string()), ('+', "y".to_string())]
        );
        // Large and wholly different: still a diff (the old table refused
        // 4,000 × 4,000), in linear memory; past the line cap, none.
        let (x, y): (String, String) = (
            (0..4000).map(|i| format!("old {i}\n")).collect(),
            (0..4000).map(|i| format!("new {i}\n")).collect(),
        );
        let d = line_diff(&x, &y, 3).unwrap();
        assert_eq!(
            (
                d.iter().filter(|(c, _)| *c == '-').count(),
                d.iter().filter(|(c, _)| *c == '+').count()
            ),
            (4000, 4000)
        );
        let huge: String = "l\n".repeat(DIFF_LINES + 1);
        assert!(line_diff(&huge, "l\n", 3).is_none());
    }
}
