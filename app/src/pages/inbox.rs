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
}

fn candidate_cell(r: &InboxRow) -> impl IntoView + use<> {
    let href = format!("/submissions/{}", r.submission_id);
    let class = if r.blind { "candidate blind" } else { "candidate" };
    view! { <td class=class><a href=href>{r.candidate.clone()}</a></td> }
}

#[component]
pub fn InboxPage(vm: InboxView) -> impl IntoView {
    let waiting = if vm.waiting.is_empty() {
        view! { <p class="empty">"Nothing is waiting for a human score."</p> }.into_any()
    } else {
        let rows = vm
            .waiting
            .iter()
            .map(|r| {
                view! {
                    <tr class="waiting">
                        {candidate_cell(r)}
                        <td class="packet">{r.packet_title.clone()}" "<span class="muted">"("{r.slug.clone()}" "{r.version.clone()}")"</span></td>
                        <td class="to-score num">{r.pending}</td>
                        <td class="age" title=r.when.clone()>{r.age.clone()}</td>
                    </tr>
                }
            })
            .collect_view();
        view! {
            <table class="inbox waiting">
                <thead><tr><th>"Candidate"</th><th>"Packet"</th><th class="num">"Criteria to score"</th><th>"Waiting for"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        }
        .into_any()
    };
    let recent = if vm.recent.is_empty() {
        view! { <p class="empty">"No graded submission yet."</p> }.into_any()
    } else {
        let rows = vm
            .recent
            .iter()
            .map(|r| {
                let class = format!("decision {}", r.decision);
                view! {
                    <tr class="recent">
                        {candidate_cell(r)}
                        <td class="packet">{r.packet_title.clone()}" "<span class="muted">"("{r.slug.clone()}" "{r.version.clone()}")"</span></td>
                        <td><span class=class>{r.decision.clone()}</span></td>
                        <td class="score">{r.score.clone()}</td>
                        <td>{r.when.clone()}</td>
                    </tr>
                }
            })
            .collect_view();
        view! {
            <table class="inbox recent">
                <thead><tr><th>"Candidate"</th><th>"Packet"</th><th>"Decision"</th><th>"Score"</th><th>"Graded"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        }
        .into_any()
    };
    view! {
        <h1>"Inbox"</h1>
        <h2>"Waiting for a human score"</h2>
        <div class="table-scroll">{waiting}</div>
        <h2>"Recently graded"</h2>
        <div class="table-scroll">{recent}</div>
    }
}
