//! The side-by-side comparison of a packet's graded submissions: the
//! reviewer's pick of them, their levels, decisions and failures in
//! columns, and their similar pairs. The server builds the view model
//! (`server/src/web/review/compare.rs`).

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use super::review::{SimilarExcerpts, SimilarPair};

/// One candidate's column in the comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareColumn {
    pub candidate: String,
    pub submission_id: String,
    pub decision: String,
    pub score: String,
    /// One entry per row of `CompareView::criteria`.
    pub levels: Vec<String>,
    pub failures: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareView {
    pub slug: String,
    /// (id, title) of each criterion row.
    pub criteria: Vec<(String, String)>,
    pub columns: Vec<CompareColumn>,
    /// The distribution chart's URL.
    pub chart: String,
    /// Pairs of submissions whose code (less the starter's) shares most of
    /// its token fingerprints, with their shared fragments. A signal for the
    /// reviewer, never a finding.
    #[serde(default)]
    pub similar: Vec<SimilarPair>,
    pub csv: String,
    /// Every graded submission of the packet to pick from: (submission id,
    /// the name the viewer may see, picked now).
    #[serde(default)]
    pub choices: Vec<(String, String, bool)>,
    /// Whether the columns are the reviewer's pick (else every graded one).
    #[serde(default)]
    pub picked: bool,
}

/// The form that picks which submissions compare shows: a box per graded
/// submission, sent as repeated `ids`.
fn compare_picker(
    slug: &str,
    choices: &[(String, String, bool)],
    picked: bool,
) -> impl IntoView + use<> {
    let action = format!("/packets/{slug}/compare");
    let all = picked.then(|| view! { " " <a href=action.clone()>"Show all"</a> });
    let boxes = choices
        .iter()
        .map(|(id, name, on)| {
            view! { <li><label><input type="checkbox" name="ids" value=id.clone() checked=*on />" "{name.clone()}</label></li> }
        })
        .collect_view();
    view! {
        <details class="compare-pick" open=picked>
            <summary>{if picked { format!("Showing {} of {}: choose others", choices.iter().filter(|c| c.2).count(), choices.len()) } else { format!("Showing all {}: choose two or more", choices.len()) }}</summary>
            <form method="get" action=action.clone()>
                <ul class="choices">{boxes}</ul>
                <button type="submit">"Compare selected"</button>{all}
            </form>
        </details>
    }
}

#[component]
pub fn ComparePage(view: CompareView) -> impl IntoView {
    let title = format!("Compare: {}", view.slug);
    if view.columns.is_empty() {
        return view! {
            <h1>{title}</h1>
            <p class="empty">"No graded submission of this packet yet."</p>
        }
        .into_any();
    }
    let heads = view
        .columns
        .iter()
        .map(|c| {
            let href = format!("/submissions/{}", c.submission_id);
            view! { <th class="candidate"><a href=href>{c.candidate.clone()}</a></th> }
        })
        .collect_view();
    let rows = view
        .criteria
        .iter()
        .enumerate()
        .map(|(i, (id, t))| {
            let cells = view.columns.iter().map(|c| view! { <td class="level">{c.levels.get(i).cloned().unwrap_or_default()}</td> }).collect_view();
            view! { <tr><th scope="row"><code>{id.clone()}</code> " " {t.clone()}</th>{cells}</tr> }
        })
        .collect_view();
    let decisions = view.columns.iter().map(|c| view! { <td><span class=format!("decision {}", c.decision)>{c.decision.clone()}</span></td> }).collect_view();
    let scores = view
        .columns
        .iter()
        .map(|c| view! { <td class="score">{c.score.clone()}</td> })
        .collect_view();
    let failures = view
        .columns
        .iter()
        .map(|c| view! { <td class="failures">{c.failures.iter().map(|f| view! { <code class="failure-id">{f.clone()}</code> " " }).collect_view()}</td> })
        .collect_view();
    view! {
        <h1>{title}</h1>
        {compare_picker(&view.slug, &view.choices, view.picked)}
        <div class="compare-scroll">
        <table class="compare">
            <thead><tr><th>"Criterion"</th>{heads}</tr></thead>
            <tbody>
                {rows}
                <tr class="decision-row"><th scope="row">"Decision"</th>{decisions}</tr>
                <tr class="score-row"><th scope="row">"Score"</th>{scores}</tr>
                <tr class="failures-row"><th scope="row">"Failures"</th>{failures}</tr>
            </tbody>
        </table>
        </div>
        <h2>"Similar submissions"</h2>
        {if view.similar.is_empty() {
            view! { <p class="empty similar-none">"No pair of these submissions shares most of its code (the starter's excluded)."</p> }.into_any()
        } else {
            view! {
                <p class="hint">"Share of token fingerprints in common, the starter's code excluded; robust to renamed names, reordered functions and comments. A signal to read both, not a finding: it changes no score."</p>
                <table class="similar">
                    <thead><tr><th>"Submission"</th><th>"And"</th><th class="num">"Shared"</th></tr></thead>
                    <tbody>{view.similar.iter().map(|p| view! {
                        <tr class="similar-pair">
                            <td><a href=format!("/submissions/{}", p.a_id)>{p.a.clone()}</a></td>
                            <td><a href=format!("/submissions/{}", p.b_id)>{p.b.clone()}</a></td>
                            <td class="num">{p.share.clone()}</td>
                        </tr>
                        <tr class="similar-excerpts"><td colspan="3"><SimilarExcerpts pair=p.clone() open=true /></td></tr>
                    }.into_any()).collect_view()}</tbody>
                </table>
            }
            .into_any()
        }}
        <h2>"Score distribution"</h2>
        <img class="distribution" src=view.chart alt="Histogram of scores, colored by decision" />
        <p><a href=view.csv>"Download all scorecards (CSV)"</a></p>
    }
    .into_any()
}
