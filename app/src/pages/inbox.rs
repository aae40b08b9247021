//! The reviewer's inbox, their landing page: submissions waiting for a human
//! score (oldest first, with their age), then recently graded ones.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxRow {
    pub submission_id: String,
    /// The candidate's name, or "Candidate 3F9A" under blind review.
    pub candidate: String,
    pub blind: bool,
    pub slug: String,
    pub packet_title: String,
    /// "v2".
    pub version: String,
    /// "3 h", "2 d": since it was graded (waiting) or when (recent).
    pub age: String,
    /// "2026-12-01 10:00 UTC".
    pub when: String,
    /// Human criteria still to score.
    pub pending: usize,
    pub decision: String,
    pub score: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InboxView {
    pub waiting: Vec<InboxRow>,
    pub recent: Vec<InboxRow>,
    /// (slug, title) of each packet with a graded submission, for its
    /// compare page and scorecards CSV.
    #[serde(default)]
    pub packets: Vec<(String, String)>,
}

/// The candidate and packet cells every row starts with.
fn lead_cells(r: &InboxRow) -> impl IntoView + use<> {
    let href = format!("/submissions/{}", r.submission_id);
    let class = if r.blind { "candidate blind" } else { "candidate" };
    view! {
        <td class=class><a href=href>{r.candidate.clone()}</a></td>
        <td class="packet">{r.packet_title.clone()}" "<span class="muted">"("{r.slug.clone()}" "{r.version.clone()}")"</span></td>
    }
}

/// `rows` as a table (`inbox <kind>`, each row of class `kind`) under
/// `head`, each row's own cells after [`lead_cells`] from `cells`; or `empty`
/// when there are none.
fn table<V: IntoView + 'static>(
    rows: &[InboxRow],
    kind: &'static str,
    empty: &'static str,
    head: impl IntoView + 'static,
    cells: impl Fn(&InboxRow) -> V,
) -> AnyView {
    if rows.is_empty() {
        return view! { <p class="empty">{empty}</p> }.into_any();
    }
    let rows =
        rows.iter().map(|r| view! { <tr class=kind>{lead_cells(r)}{cells(r)}</tr> }).collect_view();
    view! {
        <table class=format!("inbox {kind}")>
            <thead><tr><th>"Candidate"</th><th>"Packet"</th>{head}</tr></thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

#[component]
pub fn InboxPage(vm: InboxView) -> impl IntoView {
    let waiting = table(
        &vm.waiting,
        "waiting",
        "Nothing is waiting for a human score.",
        view! { <th class="num">"Criteria to score"</th><th>"Waiting for"</th> },
        |r| {
            view! {
                <td class="to-score num">{r.pending}</td>
                <td class="age" title=r.when.clone()>{r.age.clone()}</td>
            }
        },
    );
    let recent = table(
        &vm.recent,
        "recent",
        "No graded submission yet.",
        view! { <th>"Decision"</th><th>"Score"</th><th>"Graded"</th> },
        |r| {
            let class = format!("decision {}", r.decision);
            view! {
                <td><span class=class>{r.decision.clone()}</span></td>
                <td class="score">{r.score.clone()}</td>
                <td>{r.when.clone()}</td>
            }
        },
    );
    view! {
        <h1>"Inbox"</h1>
        <h2>"Waiting for a human score"</h2>
        <div class="table-scroll">{waiting}</div>
        <h2>"Recently graded"</h2>
        <div class="table-scroll">{recent}</div>
        {(!vm.packets.is_empty()).then(|| view! {
            <h2>"By packet"</h2>
            <ul class="packet-links">{vm.packets.into_iter().map(|(slug, title)| view! {
                <li>{title}" "<small><code>{slug.clone()}</code></small>": "
                    <a href=format!("/packets/{slug}/compare")>"Compare"</a>" · "
                    <a href=format!("/packets/{slug}/scorecards.csv")>"Scorecards (CSV)"</a></li>
            }).collect_view()}</ul>
        })}
    }
}
