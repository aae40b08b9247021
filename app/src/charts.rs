//! The SVG charts, drawn as Leptos `<svg>` views: text and attribute values
//! are escaped by construction, never pasted into markup by hand.
//!
//! Each chart takes plain data (no grader types) and returns the finished
//! SVG document as a string, for a standalone `.svg` response or for a page
//! that embeds it.

use leptos::prelude::*;

/// The decision colors of the score histogram, best decision first; other
/// decisions (and `pending`) are grey.
const PALETTE: [&str; 5] = ["#2e7d32", "#f9a825", "#c62828", "#6a1b9a", "#00838f"];
const GREY: &str = "#9e9e9e";

/// The number of buckets of the histogram (10 % of the maximum each).
pub const BUCKETS: usize = 10;

fn f1(v: f64) -> String {
    format!("{v:.1}")
}

/// The SVG document of `view`, less the `<!>` list markers the renderer
/// leaves for hydration (a standalone SVG is XML and is never hydrated;
/// text that reads `<!>` is escaped, so only the markers are removed).
fn svg_document(view: impl RenderHtml) -> String {
    view.to_html().replace("<!>", "")
}

/// One stacked piece of a histogram bar.
struct Piece {
    y: f64,
    height: f64,
    color: &'static str,
    title: String,
}

/// A histogram of `scores` (each a percentage of its maximum, with its
/// decision) in [`BUCKETS`] buckets, each bar stacked by decision.
/// `ranked` names the packet's decisions best first, for their colors and
/// the legend; `pending` is the decision that is always grey. With no
/// score it draws a short message instead of bars.
pub fn distribution_svg(
    title: &str,
    scores: &[(f64, String)],
    ranked: &[String],
    pending: &str,
) -> String {
    let (w, h) = (640.0_f64, 300.0_f64);
    let (left, right, top, bottom) = (40.0, 150.0, 30.0, 40.0);
    let plot_w = w - left - right;
    let plot_h = h - top - bottom;
    let title = title.to_string();
    let frame = move |body: AnyView| {
        let view = view! {
            <svg xmlns="http://www.w3.org/2000/svg" width=w.to_string() height=h.to_string() viewBox=format!("0 0 {w} {h}") role="img" aria-label=title.clone()>
                <title>{title.clone()}</title>
                <rect class="frame" x="0" y="0" width=w.to_string() height=h.to_string() fill="#ffffff"></rect>
                {body}
            </svg>
        };
        svg_document(view)
    };
    if scores.is_empty() {
        return frame(
            view! {
                <text class="empty" x=(w / 2.0).to_string() y=(h / 2.0).to_string() text-anchor="middle" font-family="sans-serif" font-size="14" fill="#555555">
                    "No graded submission with a score yet."
                </text>
            }
            .into_any(),
        );
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
            Some(i) if d != pending => PALETTE[i % PALETTE.len()],
            _ => GREY,
        }
    };
    let mut buckets: Vec<std::collections::BTreeMap<usize, usize>> =
        vec![Default::default(); BUCKETS];
    for (pct, d) in scores {
        let b =
            (((pct.clamp(0.0, 100.0) / 100.0) * BUCKETS as f64).floor() as usize).min(BUCKETS - 1);
        let rank = order.iter().position(|o| o == d).unwrap_or(0);
        *buckets[b].entry(rank).or_insert(0) += 1;
    }
    let most = buckets.iter().map(|b| b.values().sum::<usize>()).max().unwrap_or(1).max(1);
    let bar_w = plot_w / BUCKETS as f64;
    let ticks: Vec<_> = (0..=BUCKETS)
        .filter(|i| i % 2 == 0)
        .map(|i| {
            view! {
                <text x=f1(left + bar_w * i as f64) y=(top + plot_h + 16.0).to_string() text-anchor="middle" font-family="sans-serif" font-size="11" fill="#333333">
                    {format!("{}%", i * 100 / BUCKETS)}
                </text>
            }
        })
        .collect();
    let bars: Vec<_> = buckets
        .iter()
        .enumerate()
        .filter(|(_, b)| !b.is_empty())
        .map(|(i, bucket)| {
            let total: usize = bucket.values().sum();
            let (lo, hi) = (i * 100 / BUCKETS, (i + 1) * 100 / BUCKETS);
            let mut y = top + plot_h;
            let pieces: Vec<Piece> = bucket
                .iter()
                .map(|(rank, n)| {
                    let d = &order[*rank];
                    let height = plot_h * *n as f64 / most as f64;
                    y -= height;
                    Piece { y, height, color: color(d), title: format!("{lo}–{hi}%: {n} {d}") }
                })
                .collect();
            let x = f1(left + bar_w * i as f64 + 2.0);
            let width = f1(bar_w - 4.0);
            view! {
                <g class="bar" data-bucket=format!("{lo}-{hi}") data-count=total.to_string()>
                    {pieces
                        .into_iter()
                        .map(|p| {
                            view! {
                                <rect x=x.clone() y=f1(p.y) width=width.clone() height=f1(p.height) fill=p.color>
                                    <title>{p.title}</title>
                                </rect>
                            }
                        })
                        .collect::<Vec<_>>()}
                </g>
            }
        })
        .collect();
    // The legend, one line per decision present.
    let legend: Vec<_> = order
        .iter()
        .filter(|d| scores.iter().any(|(_, x)| x == *d))
        .enumerate()
        .map(|(i, d)| {
            let y = top + 18.0 * i as f64;
            view! {
                <g class="legend">
                    <rect x=(w - right + 16.0).to_string() y=y.to_string() width="12" height="12" fill=color(d)></rect>
                    <text x=(w - right + 34.0).to_string() y=(y + 10.0).to_string() font-family="sans-serif" font-size="12" fill="#333333">
                        {d.clone()}
                    </text>
                </g>
            }
        })
        .collect();
    let base = (top + plot_h).to_string();
    frame(
        view! {
            <line x1=left.to_string() y1=base.clone() x2=(left + plot_w).to_string() y2=base.clone() stroke="#333333"></line>
            <line x1=left.to_string() y1=top.to_string() x2=left.to_string() y2=base stroke="#333333"></line>
            <text x=(left - 4.0).to_string() y=(top + 4.0).to_string() text-anchor="end" font-family="sans-serif" font-size="11" fill="#333333">
                {most.to_string()}
            </text>
            {ticks}
            {bars}
            {legend}
        }
        .into_any(),
    )
}

/// A witnessed run on the timeline.
pub struct TimelineRun {
    pub id: i64,
    /// `red` or `green`.
    pub kind: String,
    pub at: i64,
    pub accepted: bool,
}

/// A model call on the timeline: its time, and why the meter refused it
/// (None: forwarded), with its hover text.
pub struct TimelineCall {
    pub id: i64,
    pub at: i64,
    pub refused: bool,
    pub title: String,
}

/// What the witnessed timeline shows; times in Unix milliseconds, with
/// `label` turning one into the text the marks' titles show.
pub struct Timeline<'a> {
    pub runs: Vec<TimelineRun>,
    pub calls: Vec<TimelineCall>,
    pub submitted_at: i64,
    pub label: &'a dyn Fn(i64) -> String,
    /// The span from the first to the last mark, in words (e.g. `3m05s`).
    pub span: &'a dyn Fn(i64) -> String,
}

/// The witnessed timeline: on one time axis, the red and green runs (filled
/// when accepted, hollow when not), each model call (a tick; a cross when
/// the meter refused it) and the submission (a dashed line). Every mark has
/// a `<title>` naming its id and time.
pub fn timeline_svg(t: &Timeline) -> String {
    const WIDTH: f64 = 760.0;
    const LEFT: f64 = 70.0;
    const RIGHT: f64 = 20.0;
    let times: Vec<i64> = t
        .runs
        .iter()
        .map(|r| r.at)
        .chain(t.calls.iter().map(|c| c.at))
        .chain([t.submitted_at])
        .collect();
    let t0 = times.iter().copied().min().unwrap_or(t.submitted_at);
    let t1 = times.iter().copied().max().unwrap_or(t.submitted_at).max(t0 + 1);
    let x = |at: i64| LEFT + (at - t0) as f64 / (t1 - t0) as f64 * (WIDTH - LEFT - RIGHT);
    let runs: Vec<_> = t
        .runs
        .iter()
        .map(|r| {
            let color = if r.kind == "green" { "#2a8a3a" } else { "#c0392b" };
            let (fill, accepted, state) = if r.accepted { (color, "accepted", "accepted") } else { ("none", "not-accepted", "not accepted") };
            view! {
                <circle class=format!("run {} {accepted}", r.kind) data-id=r.id.to_string() cx=f1(x(r.at)) cy="30" r="6" fill=fill stroke=color stroke-width="2">
                    <title>{format!("{} run {} at {}, {state}", r.kind, r.id, (t.label)(r.at))}</title>
                </circle>
            }
        })
        .collect();
    let calls: Vec<_> = t
        .calls
        .iter()
        .map(|c| {
            let cx = x(c.at);
            let mark = if c.refused {
                view! { <path d=format!("M{a:.1} 64 L{b:.1} 76 M{a:.1} 76 L{b:.1} 64", a = cx - 5.0, b = cx + 5.0) stroke="#b9770e" stroke-width="2"></path> }
                    .into_any()
            } else {
                view! { <line x1=f1(cx) y1="60" x2=f1(cx) y2="80" stroke="#2c5aa0" stroke-width="2"></line> }.into_any()
            };
            let class = if c.refused { "call refused" } else { "call forwarded" };
            view! {
                <g class=class data-id=c.id.to_string()>
                    {mark}
                    <title>{c.title.clone()}</title>
                </g>
            }
        })
        .collect();
    let sx = f1(x(t.submitted_at));
    svg_document(view! {
        <svg xmlns="http://www.w3.org/2000/svg" class="witness-timeline" viewBox=format!("0 0 {WIDTH} 130") width=WIDTH.to_string() height="130" role="img" aria-label="Witnessed timeline">
            <title>"Witnessed timeline: red and green runs, model calls, submission"</title>
            <text x="4" y="34" font-size="11">"runs"</text>
            <text x="4" y="74" font-size="11">"model"</text>
            <line class="axis" x1=LEFT.to_string() y1="100" x2=(WIDTH - RIGHT).to_string() y2="100" stroke="#888"></line>
            <text x=LEFT.to_string() y="118" font-size="10">{(t.label)(t0)}</text>
            <text x=(WIDTH - RIGHT).to_string() y="118" font-size="10" text-anchor="end">
                {format!("{} (+{})", (t.label)(t1), (t.span)((t1 - t0) / 1000))}
            </text>
            {runs}
            {calls}
            <g class="submission">
                <line x1=sx.clone() y1="14" x2=sx.clone() y2="100" stroke="#222" stroke-dasharray="4 3"></line>
                <text x=sx y="10" font-size="10" text-anchor="end">"submitted"</text>
                <title>{format!("submitted at {}", (t.label)(t.submitted_at))}</title>
            </g>
        </svg>
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_text_is_escaped_and_bars_counted() {
        let scores = vec![
            (95.0, "advance".to_string()),
            (99.0, "<x>".to_string()),
            (10.0, "no".to_string()),
        ];
        let svg = distribution_svg(
            "a & b",
            &scores,
            &["advance".into(), "conversation".into(), "no".into()],
            "pending",
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"), "{svg}");
        assert_eq!(svg.matches(r#"class="bar""#).count(), 2, "{svg}");
        assert!(svg.contains(r#"data-bucket="90-100" data-count="2" class="bar""#), "{svg}");
        assert!(svg.contains("a &amp; b") && svg.contains(r#"aria-label="a &amp; b""#), "{svg}");
        assert!(svg.contains("&lt;x&gt;") && !svg.contains("<x>"), "{svg}");
        assert!(svg.contains(r#"viewBox="0 0 640 300""#), "{svg}");
        assert!(!svg.contains("<!"), "no hydration markers in a standalone SVG: {svg}");
    }

    #[test]
    fn an_empty_histogram_says_so() {
        let svg = distribution_svg("t", &[], &[], "pending");
        assert!(
            svg.starts_with("<svg") && svg.contains("No graded submission with a score yet."),
            "{svg}"
        );
        assert!(!svg.contains(r#"class="bar""#), "{svg}");
    }

    #[test]
    fn pending_is_grey_wherever_it_ranks() {
        let svg =
            distribution_svg("t", &[(50.0, "pending".to_string())], &["pending".into()], "pending");
        assert!(
            svg.contains(r##"fill="#9e9e9e""##) && !svg.contains(r##"fill="#2e7d32""##),
            "{svg}"
        );
    }

    #[test]
    fn timeline_marks_and_escaped_titles() {
        let label = |ms: i64| format!("t{ms}");
        let span = |s: i64| format!("{s}s");
        let t = Timeline {
            runs: vec![
                TimelineRun { id: 1, kind: "red".into(), at: 0, accepted: true },
                TimelineRun { id: 2, kind: "green".into(), at: 5_000, accepted: false },
            ],
            calls: vec![
                TimelineCall { id: 7, at: 1_000, refused: false, title: "model call 7".into() },
                TimelineCall {
                    id: 8,
                    at: 2_000,
                    refused: true,
                    title: "refused: <budget> & more".into(),
                },
            ],
            submitted_at: 10_000,
            label: &label,
            span: &span,
        };
        let svg = timeline_svg(&t);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"), "{svg}");
        assert!(
            svg.contains(r#"<circle data-id="1" cx="70.0""#)
                && svg.contains(r#"class="run red accepted""#),
            "{svg}"
        );
        assert!(
            svg.contains(
                r##"fill="none" stroke="#2a8a3a" stroke-width="2" class="run green not-accepted""##
            ),
            "{svg}"
        );
        assert!(
            svg.contains(r#"<g data-id="8" class="call refused">"#)
                && svg.contains(r#"<g data-id="7" class="call forwarded">"#),
            "{svg}"
        );
        assert!(svg.contains("refused: &lt;budget&gt; &amp; more"), "{svg}");
        assert!(svg.contains("t10000 (+10s)") && svg.contains("submitted at t10000"), "{svg}");
        assert!(!svg.contains("<!"), "{svg}");
    }
}
