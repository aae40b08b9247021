//! The candidate's pages: the assignment (prompt, rules, budgets, starter,
//! upload form), the receipt of one submission, and the expired-link page.
//! They show only what the server put in the view models, which never carry
//! the rubric, the sample, hidden tests, the failure catalog or anything of
//! another assignment.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::islands::{LiveStatus, UploadForm};

/// One of the candidate's own submissions, as listed on the assignment page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmissionRow {
    pub href: String,
    pub sha256: String,
    pub size_bytes: i64,
    pub received: String,
    pub state: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidatePage {
    /// `/c/<token>`, the base of every link on the page.
    pub base: String,
    pub title: String,
    pub candidate_name: String,
    /// The prompt rendered from Markdown with raw HTML escaped.
    pub prompt_html: String,
    pub deadline: String,
    /// The time box, e.g. "90 minutes", when the packet or assignment has one.
    pub time_box: Option<String>,
    /// "1 h 12 min left" while the time box runs.
    pub time_left: Option<String>,
    /// False until the time box starts (then the page offers a start button).
    pub started: bool,
    /// Why submissions are refused now (time box over), if they are.
    pub closed: Option<String>,
    /// (name, value) pairs: model calls, tokens, ...
    pub budgets: Vec<(String, String)>,
    /// Plain-language rules: environment, test command, frozen files, limits.
    pub rules: Vec<String>,
    pub submissions: Vec<SubmissionRow>,
    /// The refusal of the last upload, shown above the form.
    pub error: Option<String>,
    pub max_upload_mb: u64,
}

#[component]
pub fn CandidateView(page: CandidatePage) -> impl IntoView {
    let submit = format!("{}/submit", page.base);
    let start = format!("{}/start", page.base);
    let starter = format!("{}/starter.zip", page.base);
    let time_box = page.time_box.clone().map(|t| {
        let left = page.time_left.clone().map(|l| view! { " · " <strong class="time-left">{l}</strong> });
        let start_form = (!page.started).then(|| {
            view! {
                <form method="post" action=start.clone() class="start">
                    <button type="submit">"Start the time box"</button>
                </form>
            }
        });
        view! { <p class="time-box">"Time box: "{t}{left}</p>{start_form} }
    });
    let budgets = (!page.budgets.is_empty()).then(|| {
        let rows = page.budgets.iter().map(|(k, v)| view! { <tr><th scope="row">{k.clone()}</th><td>{v.clone()}</td></tr> }).collect_view();
        view! { <h2>"Budgets"</h2><table class="budgets"><tbody>{rows}</tbody></table> }
    });
    let rules = (!page.rules.is_empty()).then(|| {
        let items = page.rules.iter().map(|r| view! { <li>{r.clone()}</li> }).collect_view();
        view! { <h2>"Rules"</h2><ul class="rules">{items}</ul> }
    });
    let error = page.error.clone().map(|e| view! { <p class="error refusal" role="alert">"Your upload was refused: "{e}</p> });
    let upload = match page.closed.clone() {
        Some(why) => view! { <p class="closed" role="status">{why}</p> }.into_any(),
        None => view! {
            // A plain multipart form; hydrated, it uploads with a progress
            // bar and shows a refusal without leaving the page.
            <UploadForm
                action=submit
                accept_json=true
                label=format!("Your submission (a .zip, at most {} MiB)", page.max_upload_mb)
            />
        }
        .into_any(),
    };
    let submissions = (!page.submissions.is_empty()).then(|| {
        let rows = page
            .submissions
            .iter()
            .map(|s| {
                let short = s.sha256.chars().take(12).collect::<String>();
                view! {
                    <tr>
                        <td><a href=s.href.clone()>{s.received.clone()}</a></td>
                        <td><code>{short}</code></td>
                        <td>{format!("{} bytes", s.size_bytes)}</td>
                        <td class="state">{s.state.clone()}</td>
                    </tr>
                }
            })
            .collect_view();
        view! {
            <h2>"Your submissions"</h2>
            <table class="submissions">
                <thead><tr><th>"Received"</th><th>"SHA-256"</th><th>"Size"</th><th>"State"</th></tr></thead>
                <tbody>{rows}</tbody>
            </table>
        }
    });
    view! {
        <section class="candidate">
            <h1>{page.title.clone()}</h1>
            <p class="who">"For "{page.candidate_name.clone()}" · deadline "{page.deadline.clone()}</p>
            {time_box}
            <article class="prompt" inner_html=page.prompt_html.clone()></article>
            {budgets}
            {rules}
            <h2>"Starter workspace"</h2>
            <p><a class="starter" href=starter download="starter.zip">"Download the starter (zip)"</a></p>
            <h2>"Submit"</h2>
            {error}
            {upload}
            {submissions}
        </section>
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReceiptPage {
    pub back: String,
    /// The JSON status URL the live island polls.
    pub status_url: String,
    pub id: String,
    pub sha256: String,
    pub size_bytes: i64,
    pub received: String,
    pub state: String,
    /// A sentence about the state (refusal reason, "grading", ...).
    pub note: Option<String>,
    pub decision: Option<String>,
    pub score: Option<String>,
}

#[component]
pub fn ReceiptView(page: ReceiptPage) -> impl IntoView {
    let note = page.note.clone().map(|n| view! { <p class="note">{n}</p> });
    let decision = page.decision.clone().map(|d| view! { <tr><th scope="row">"Decision"</th><td>{d}</td></tr> });
    let score = page.score.clone().map(|s| view! { <tr><th scope="row">"Score"</th><td>{s}</td></tr> });
    view! {
        <section class="receipt" data-status-url=page.status_url.clone()>
            <h1>"Submission received"</h1>
            <table class="receipt">
                <tbody>
                    <tr><th scope="row">"Submission"</th><td><code>{page.id.clone()}</code></td></tr>
                    <tr><th scope="row">"SHA-256"</th><td><code class="sha256">{page.sha256.clone()}</code></td></tr>
                    <tr><th scope="row">"Size"</th><td>{format!("{} bytes", page.size_bytes)}</td></tr>
                    <tr><th scope="row">"Received"</th><td>{page.received.clone()}</td></tr>
                    <tr><th scope="row">"State"</th><td><LiveStatus url=page.status_url.clone() initial_state=page.state.clone() /></td></tr>
                    {decision}
                    {score}
                </tbody>
            </table>
            {note}
            <p><a href=page.back.clone()>"Back to the assignment"</a></p>
        </section>
    }
}

/// The page an expired or closed link shows.
#[component]
pub fn GoneView(message: String) -> impl IntoView {
    view! {
        <section class="gone">
            <h1>"This link has expired"</h1>
            <p>{message}</p>
        </section>
    }
}
