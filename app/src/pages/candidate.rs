//! The candidate's pages: the assignment (prompt, rules, budgets, starter,
//! upload form), the receipt of one submission, and the expired-link page.
//! They show only what the server put in the view models, which never carry
//! the rubric, the sample, hidden tests, the failure catalog or anything of
//! another assignment.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::islands::{BudgetRow, LiveBudget, LiveStatus, UploadForm};

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
pub struct CandidateView {
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
    /// The gate: witnessed runs so far, the forms and the terminal lines.
    #[serde(default)]
    pub witness: Option<WitnessSection>,
    /// The metered model endpoint, its key and what is left of each budget.
    #[serde(default)]
    pub meter: Option<MeterBox>,
}

/// One run the platform witnessed, as the candidate sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WitnessRunView {
    /// `witness-<id>`, the fragment a form submission returns to.
    pub anchor: String,
    /// `red` or `green`.
    pub kind: String,
    pub at: String,
    pub accepted: bool,
    /// "exit 1", or "killed by a signal".
    pub exit: String,
    pub refusal: Option<String>,
    pub tree_sha256: String,
    /// "python 3.11.2, pytest 9.0.1": what the sandbox had.
    pub environment: String,
    /// One sentence per pin the sandbox did not satisfy.
    pub mismatches: Vec<String>,
    pub log: String,
    /// Whether the log starts unfolded (the latest run).
    pub open: bool,
}

/// The witness section of the candidate page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WitnessSection {
    pub red_action: String,
    pub green_action: String,
    pub test_command: String,
    /// The gate's three steps in words.
    pub steps: Vec<String>,
    /// The model window's state in a sentence.
    pub model_window: String,
    pub zip_line: String,
    pub curl_red: String,
    pub curl_green: String,
    pub curl_submit: String,
    pub runs: Vec<WitnessRunView>,
    /// True when the link no longer accepts uploads (no forms then).
    pub closed: bool,
}

/// A step's text without its own "1. " (the list numbers it), with
/// `backticks` as code.
pub fn step_parts(step: &str) -> Vec<(bool, String)> {
    let t = step.trim_start();
    let digits = t.chars().take_while(|c| c.is_ascii_digit()).count();
    let t = if digits > 0 && t[digits..].starts_with(". ") { &t[digits + 2..] } else { t };
    t.split('`')
        .enumerate()
        .filter(|(_, p)| !p.is_empty())
        .map(|(i, p)| (i % 2 == 1, p.to_string()))
        .collect()
}

fn inline_code(step: &str) -> impl IntoView + use<> {
    step_parts(step)
        .into_iter()
        .map(|(code, text)| {
            if code {
                view! { <code>{text}</code> }.into_any()
            } else {
                view! { <span>{text}</span> }.into_any()
            }
        })
        .collect_view()
}

/// The gate: steps, model window, witnessed runs, forms and `curl` lines.
#[component]
pub fn WitnessView(section: WitnessSection) -> impl IntoView {
    let steps = section.steps.iter().map(|s| view! { <li>{inline_code(s)}</li> }).collect_view();
    let runs = (!section.runs.is_empty()).then(|| {
        let items = section
            .runs
            .iter()
            .map(|r| {
                let verdict = if r.accepted { "accepted" } else { "refused" };
                let refusal = r.refusal.clone().map(|why| view! { <p class="refusal">{why}</p> });
                let mismatches = (!r.mismatches.is_empty()).then(|| {
                    let items = r.mismatches.iter().map(|m| view! { <li>{m.clone()}</li> }).collect_view();
                    view! { <ul class="env-mismatch">{items}</ul> }
                });
                let short = r.tree_sha256.chars().take(12).collect::<String>();
                view! {
                    <li id=r.anchor.clone() class=format!("witness-run {} {verdict}", r.kind)>
                        <strong>{r.kind.clone()}</strong>" · "{r.at.clone()}" · "
                        <span class="verdict">{verdict}</span>" · "{r.exit.clone()}" · tree "<code>{short}</code>
                        {refusal}
                        <p class="env">"Environment: "{r.environment.clone()}</p>
                        {mismatches}
                        <details open=r.open><summary>"Log"</summary><pre class="log">{r.log.clone()}</pre></details>
                    </li>
                }
            })
            .collect_view();
        view! { <ol class="witness-runs">{items}</ol> }
    });
    let forms = (!section.closed).then(|| {
        view! {
            <form class="witness red" method="post" action=section.red_action.clone() enctype="multipart/form-data">
                <label>"Witness red (a .zip of your current tree): "
                    <input type="file" name="file" accept=".zip,application/zip" required=true />
                </label>
                <button type="submit">"Witness red"</button>
            </form>
            <form class="witness green" method="post" action=section.green_action.clone() enctype="multipart/form-data">
                <label>"Witness green (a .zip of your current tree): "
                    <input type="file" name="file" accept=".zip,application/zip" required=true />
                </label>
                <button type="submit">"Witness green"</button>
            </form>
        }
    });
    // Each terminal command labelled with what it does, wrapped, never clipped.
    let terminal = [
        ("zip", "1. Zip your tree", section.zip_line.clone()),
        ("red", "2. Witness red (before the fix)", section.curl_red.clone()),
        ("green", "3. Witness green (after the fix)", section.curl_green.clone()),
        ("submit", "4. Submit", section.curl_submit.clone()),
    ]
    .into_iter()
    .map(|(id, label, line)| view! { <dt>{label}</dt><dd><pre class=format!("curl curl-{id}")><code>{line}</code></pre></dd> })
    .collect_view();
    view! {
        <section id="witness" class="witness">
            <h2>"The gate, witnessed"</h2>
            <p>"The platform runs "<code>{section.test_command.clone()}</code>" on your uploaded tree, in the sandbox that grades it."</p>
            <ol class="gate-steps">{steps}</ol>
            <p class="model-window">"Model window: "{section.model_window.clone()}</p>
            {runs}
            {forms}
            <h3>"From a terminal"</h3>
            <dl class="terminal">{terminal}</dl>
        </section>
    }
}

/// The model meter as the candidate sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeterBox {
    /// The assignment's model key; None once it was revoked.
    pub key: Option<String>,
    /// The OpenAI-compatible base URL (`.../v1`).
    pub endpoint: String,
    /// The JSON status the live budget polls (`/c/<token>/meter`).
    pub status_url: String,
    /// Why calls are refused now (window closed, no upstream), if they are.
    pub note: Option<String>,
    pub caps: Vec<BudgetRow>,
    /// The candidate's own transcript page (`/c/<token>/transcript`).
    #[serde(default)]
    pub transcript_url: String,
}

/// The model endpoint section: key, base URL, an example call and the
/// budgets left, updating live.
#[component]
pub fn MeterSection(meter: MeterBox) -> impl IntoView {
    let key = match meter.key.clone() {
        Some(k) => view! { <code class="model-key" id="model-key">{k}</code> }.into_any(),
        None => view! { <span class="revoked">"revoked; ask the hiring team for a new one"</span> }
            .into_any(),
    };
    let example = format!(
        "curl {}/chat/completions \\\n  -H 'Authorization: Bearer {}' -H 'Content-Type: application/json' \\\n  -d '{{\"model\": \"<model>\", \"messages\": [{{\"role\": \"user\", \"content\": \"...\"}}]}}'",
        meter.endpoint,
        meter.key.clone().unwrap_or_else(|| "<key>".into())
    );
    let note =
        meter.note.clone().map(|n| view! { <p class="note meter-note" role="status">{n}</p> });
    let caps = (!meter.caps.is_empty())
        .then(|| view! { <LiveBudget url=meter.status_url.clone() initial=meter.caps.clone() /> });
    view! {
        <section class="meter" id="model-meter">
            <h2>"Model endpoint"</h2>
            <p>"Every model call goes through the platform's metered, OpenAI-compatible endpoint; each call is recorded and counted against your budgets."</p>
            <table class="meter">
                <tbody>
                    <tr><th scope="row">"Base URL"</th><td><code class="model-endpoint">{meter.endpoint.clone()}</code></td></tr>
                    <tr><th scope="row">"Key"</th><td>{key}</td></tr>
                </tbody>
            </table>
            {note}
            <pre class="command wrap"><code>{example}</code></pre>
            {caps}
            <p class="transcript-link"><a href=meter.transcript_url.clone()>"Your model transcript"</a>": every call you made, its prompt and its answer, as the reviewers will read it."</p>
        </section>
    }
}

#[component]
pub fn CandidatePage(page: CandidateView) -> impl IntoView {
    let submit = format!("{}/submit", page.base);
    let start = format!("{}/start", page.base);
    let starter = format!("{}/starter.zip", page.base);
    let time_box = page.time_box.clone().map(|t| {
        let left = page.time_left.clone().map(|l| view! { " · " <strong class="time-left">{l}</strong> });
        let start_form = (!page.started).then(|| {
            let warning = format!(
                "Your clock has not started. Pressing Start begins your time box of {t}; it cannot be paused. \
                 Downloading the starter, a model call with your key, a witnessed run or a submission also start it."
            );
            view! {
                <form method="post" action=start.clone() class="start" id="start-form">
                    <p class="warning" role="note">{warning}</p>
                    <button type="submit" id="start-time-box">"Start the time box"</button>
                </form>
            }
        });
        view! { <p class="time-box">"Time box: "{t}{left}</p>{start_form} }
    });
    let budgets = (!page.budgets.is_empty()).then(|| {
        let rows = page
            .budgets
            .iter()
            .map(|(k, v)| view! { <tr><th scope="row">{k.clone()}</th><td>{v.clone()}</td></tr> })
            .collect_view();
        view! { <h2>"Budgets"</h2><table class="budgets"><tbody>{rows}</tbody></table> }
    });
    let rules = (!page.rules.is_empty()).then(|| {
        let items = page.rules.iter().map(|r| view! { <li>{r.clone()}</li> }).collect_view();
        view! { <h2>"Rules"</h2><ul class="rules">{items}</ul> }
    });
    // With JavaScript off a refused upload answers with this page again: the
    // refusal takes the focus (`autofocus`, focusable by `tabindex`), so the
    // browser scrolls to it instead of showing the top of the page.
    let error = page
        .error
        .clone()
        .map(|e| view! { <p class="error refusal" id="upload-refusal" role="alert" tabindex="-1" autofocus=true>"Your upload was refused: "{e}</p> });
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
            {page.meter.clone().map(|m| view! { <MeterSection meter=m /> })}
            <h2>"Starter workspace"</h2>
            <p><a class="starter" href=starter download="starter.zip">"Download the starter (zip)"</a></p>
            {page.witness.clone().map(|section| view! { <WitnessView section=section /> })}
            <h2>"Submit"</h2>
            {error}
            {upload}
            {submissions}
        </section>
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateReceiptView {
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
    /// Shown only when the hiring team releases results.
    pub decision: Option<String>,
    pub score: Option<String>,
    /// The grading receipt's digest, once graded.
    pub receipt_digest: Option<String>,
}

#[component]
pub fn CandidateReceiptPage(page: CandidateReceiptView) -> impl IntoView {
    let note = page.note.clone().map(|n| view! { <p class="note">{n}</p> });
    let decision = page
        .decision
        .clone()
        .map(|d| view! { <tr><th scope="row">"Decision"</th><td>{d}</td></tr> });
    let score =
        page.score.clone().map(|s| view! { <tr><th scope="row">"Score"</th><td>{s}</td></tr> });
    let digest = page.receipt_digest.clone().map(|d| view! { <tr><th scope="row">"Receipt digest"</th><td><code class="receipt-digest">{d}</code></td></tr> });
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
                    {digest}
                </tbody>
            </table>
            {note}
            <p><a href=page.back.clone()>"Back to the assignment"</a></p>
        </section>
    }
}

/// The page of a link that matches no assignment.
#[component]
pub fn InvalidLinkView() -> impl IntoView {
    view! {
        <section class="gone invalid-link" id="invalid-link">
            <h1>"This invite link is not valid"</h1>
            <p>"The link may be mistyped or cut short, or the hiring team may have replaced it with a new one (an older link stops working when a new one is sent)."</p>
            <p>"Ask the person at the company who invited you for a new link. There is no account to sign in to: the link is all you need."</p>
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
