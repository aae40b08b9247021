//! The grading queue page.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRow {
    pub id: i64,
    pub kind: crate::contract::JobKind,
    pub subject: String,
    /// A link to what the job works on, when there is a page for it.
    pub subject_href: Option<String>,
    /// The subject in words: "Ada Lovelace · null-status v1".
    #[serde(default)]
    pub label: Option<String>,
    pub state: crate::contract::JobState,
    pub attempts: i64,
    pub max_attempts: i64,
    pub lease: Option<String>,
    pub last_error: Option<String>,
    pub created: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueView {
    /// Queued and running jobs, oldest first.
    pub pending: Vec<JobRow>,
    /// Recently finished jobs, newest first.
    pub recent: Vec<JobRow>,
}

fn job_table(rows: Vec<JobRow>) -> impl IntoView {
    let body = rows
        .into_iter()
        .map(|j| {
            let text = j.label.clone().unwrap_or_else(|| j.subject.clone());
            let id = j.label.is_some().then(
                || view! { " " <code class="subject-id muted small">{j.subject.clone()}</code> },
            );
            let subject = match j.subject_href {
                Some(h) => view! { <a href=h class="subject">{text}</a>{id} }.into_any(),
                None => view! { <span class="subject">{text}</span>{id} }.into_any(),
            };
            view! {
                <tr class=format!("job {}", j.state)>
                    <td>{j.id}</td>
                    <td>{j.kind.as_str()}</td>
                    <td>{subject}</td>
                    <td class="state">{j.state.as_str()}</td>
                    <td>{j.attempts}" / "{j.max_attempts}</td>
                    <td>{j.lease.unwrap_or_default()}</td>
                    <td class="error">{j.last_error.unwrap_or_default()}</td>
                    <td>{j.created}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="jobs">
            <thead><tr><th>"Job"</th><th>"Kind"</th><th>"Subject"</th><th>"State"</th><th>"Attempts"</th><th>"Lease"</th><th>"Last error"</th><th>"Created"</th></tr></thead>
            <tbody>{body}</tbody>
        </table>
    }
}

#[component]
pub fn QueuePage(page: QueueView) -> impl IntoView {
    let pending = if page.pending.is_empty() {
        view! { <p class="empty">"No job is waiting or running."</p> }.into_any()
    } else {
        job_table(page.pending).into_any()
    };
    let recent = (!page.recent.is_empty()).then(|| job_table(page.recent));
    view! {
        <section class="queue" data-status-url="/queue/status">
            <h1>"Grading queue"</h1>
            <crate::islands::LiveQueue url="/queue/status".to_string() />
            <h2>"Waiting and running"</h2>
            {pending}
            <h2>"Recent jobs"</h2>
            {recent}
        </section>
    }
}
