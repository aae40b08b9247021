//! The admin page of candidate data (`/admin/retention`): the global
//! retention, each packet's own, the assignments the retention will erase
//! and when, and the record of every erasure (who, when, why, how much).

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::shell::CsrfField;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PacketRetentionRow {
    pub slug: String,
    pub title: String,
    /// The packet's own days, empty when the global setting applies.
    pub days: String,
    /// What applies, in words.
    pub effective: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DueRow {
    pub assignment_id: String,
    pub slug: String,
    pub deadline: String,
    pub days: i64,
    pub due: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErasureRow {
    pub at: String,
    pub actor: String,
    pub reason: String,
    pub assignment_id: String,
    pub slug: String,
    pub removed: String,
    pub final_result: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RetentionView {
    pub csrf: String,
    /// The global retention in days, empty when unset.
    pub global_days: String,
    pub packets: Vec<PacketRetentionRow>,
    pub due: Vec<DueRow>,
    pub erasures: Vec<ErasureRow>,
}

#[component]
pub fn RetentionPage(vm: RetentionView) -> impl IntoView {
    let csrf = vm.csrf.clone();
    let packets = vm
        .packets
        .iter()
        .map(|p| {
            let action = format!("/admin/retention/packets/{}", p.slug);
            let label = format!("Retention days for {}", p.slug);
            view! {
                <tr>
                    <td><a href=format!("/packets/{}", p.slug)>{p.slug.clone()}</a></td>
                    <td>{p.title.clone()}</td>
                    <td>{p.effective.clone()}</td>
                    <td>
                        <form method="post" action=action class="inline">
                            <CsrfField token=csrf.clone() />
                            <input type="number" name="days" min="0" max="3650" value=p.days.clone() aria-label=label placeholder="global" />
                            <button type="submit">"Save"</button>
                        </form>
                    </td>
                </tr>
            }
        })
        .collect_view();
    let due_empty = vm.due.is_empty().then(|| {
        view! { <p class="empty">"Nothing is due: set a retention to have data erased on schedule."</p> }
    });
    let due = vm
        .due
        .iter()
        .map(|d| {
            view! {
                <tr>
                    <td>{d.due.clone()}</td>
                    <td><a href=format!("/assignments/{}", d.assignment_id)><code>{d.assignment_id.clone()}</code></a></td>
                    <td>{d.slug.clone()}</td>
                    <td>{d.deadline.clone()}</td>
                    <td>{d.days}</td>
                </tr>
            }
        })
        .collect_view();
    let erased_empty = vm
        .erasures
        .is_empty()
        .then(|| view! { <p class="empty">"No candidate has been erased."</p> });
    let erasures = vm
        .erasures
        .iter()
        .map(|e| {
            view! {
                <tr class="erasure">
                    <td>{e.at.clone()}</td>
                    <td>{e.actor.clone()}</td>
                    <td>{e.reason.clone()}</td>
                    <td><code>{e.assignment_id.clone()}</code></td>
                    <td>{e.slug.clone()}</td>
                    <td>{e.removed.clone()}</td>
                    <td>{e.final_result.clone()}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <h1>"Candidate data"</h1>
        <section>
            <h2>"Retention"</h2>
            <p class="hint">"A candidate's data (details, uploads, test runs, model calls and their transcripts, scores, the audit entries' details) is erased this many days after the assignment's deadline. A packet's own setting wins over the global one; empty keeps data until an admin erases it from the assignment's page. What stays: the assignment's id, packet and deadline, and its final score and decision, with no name or email."</p>
            <form method="post" action="/admin/retention" class="narrow">
                <CsrfField token=vm.csrf.clone() />
                <label>"Global retention (days after the deadline)" <input type="number" name="days" min="0" max="3650" value=vm.global_days.clone() placeholder="keep until erased by hand" /></label>
                <button type="submit">"Save"</button>
            </form>
            <table class="packet-retention">
                <thead><tr><th>"Packet"</th><th>"Title"</th><th>"Applies"</th><th>"Own retention (days)"</th></tr></thead>
                <tbody>{packets}</tbody>
            </table>
        </section>
        <section>
            <h2>"What will be erased, and when"</h2>
            {due_empty}
            <table class="due-erasures">
                <thead><tr><th>"Erased on"</th><th>"Assignment"</th><th>"Packet"</th><th>"Deadline"</th><th>"Days kept"</th></tr></thead>
                <tbody>{due}</tbody>
            </table>
        </section>
        <section>
            <h2>"Erasures"</h2>
            {erased_empty}
            <table class="erasures">
                <thead><tr><th>"When"</th><th>"By"</th><th>"Why"</th><th>"Assignment"</th><th>"Packet"</th><th>"Removed"</th><th>"Final result"</th></tr></thead>
                <tbody>{erasures}</tbody>
            </table>
        </section>
    }
}
