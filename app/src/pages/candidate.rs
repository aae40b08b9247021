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
    /// While it waits for a grader: its place in line and the estimate.
    #[serde(default)]
    pub wait: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateView {
    /// `/c/<token>`, the base of every link on the page.
    pub base: String,
    pub title: String,
    pub candidate_name: String,
    /// The prompt rendered from Markdown with raw HTML escaped, its
    /// headings one level down (the page's title is the one `h1`).
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
    /// (name, value) pairs of the budgets shown nowhere else on the page
    /// (the model budgets are in the model key's table, the time box in
    /// the time section).
    pub budgets: Vec<(String, String)>,
    /// Plain-language rules: environment, test command, frozen files, limits
    /// (`backticks` are code).
    pub rules: Vec<String>,
    pub submissions: Vec<SubmissionRow>,
    /// How many submissions the assignment accepts.
    #[serde(default)]
    pub max_submissions: i64,
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

/// A sentence with its `backticks` as code (and a leading "1. " dropped).
pub fn inline_code(step: &str) -> impl IntoView + use<> {
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

/// The witnessed runs of one kind, newest last.
fn runs_list(runs: Vec<WitnessRunView>) -> impl IntoView {
    (!runs.is_empty()).then(|| {
        let items = runs
            .into_iter()
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
                        <details open=r.open><summary>"Log"</summary><pre tabindex="0" class="log wrap">{r.log.clone()}</pre></details>
                    </li>
                }
            })
            .collect_view();
        view! { <ol class="witness-runs">{items}</ol> }
    })
}

/// Terminal commands, each labelled with what it does, wrapped, never
/// clipped, folded under "From a terminal".
fn terminal(lines: Vec<(&'static str, &'static str, String)>) -> impl IntoView {
    let items = lines
        .into_iter()
        .map(|(id, label, line)| view! { <dt>{label}</dt><dd><pre tabindex="0" class=format!("curl curl-{id} wrap")><code>{line}</code></pre></dd> })
        .collect_view();
    view! {
        <details class="from-terminal">
            <summary>"From a terminal"</summary>
            <dl class="terminal">{items}</dl>
        </details>
    }
}

/// One witness form: a zip of the current tree.
fn witness_form(kind: &'static str, action: String) -> impl IntoView {
    let (label, button) = match kind {
        "red" => ("A .zip of your tree before the fix", "Witness red"),
        _ => ("A .zip of your fixed tree", "Witness green"),
    };
    let id = format!("witness-{kind}-file");
    view! {
        <form class=format!("witness {kind}") method="post" action=action enctype="multipart/form-data">
            <label for=id.clone()>{label}</label>
            <input type="file" id=id name="file" accept=".zip,application/zip" required=true />
            <button type="submit">{button}</button>
        </form>
    }
}

/// Step 4 of the page: the gate explained, the witnessed red runs and
/// the red form.
#[component]
pub fn WitnessView(section: WitnessSection) -> impl IntoView {
    let steps = section.steps.iter().map(|s| view! { <li>{inline_code(s)}</li> }).collect_view();
    let reds: Vec<_> = section.runs.iter().filter(|r| r.kind != "green").cloned().collect();
    let form = (!section.closed).then(|| witness_form("red", section.red_action.clone()));
    view! {
        <section id="witness" class="witness step" aria-labelledby="witness-heading">
            <h2 id="witness-heading">"4. Witness red"</h2>
            <p>"The platform runs "<code>{section.test_command.clone()}</code>" on your uploaded tree, in the sandbox that grades it. The gate, in order:"</p>
            <ol class="gate-steps">{steps}</ol>
            {runs_list(reds)}
            {form}
            {terminal(vec![
                ("zip", "1. Zip your tree", section.zip_line.clone()),
                ("red", "2. Witness red (before the fix)", section.curl_red.clone()),
            ])}
        </section>
    }
}

/// In step 6: the witnessed green runs and the green form.
fn witness_green(section: &WitnessSection) -> impl IntoView + use<> {
    let greens: Vec<_> = section.runs.iter().filter(|r| r.kind == "green").cloned().collect();
    let form = (!section.closed).then(|| witness_form("green", section.green_action.clone()));
    view! {
        <div id="witness-green" class="witness-green">
            <h3>"Witness green, then submit"</h3>
            <p>"Upload the fixed tree for a witnessed green run (it counts only after an accepted red), then submit the same work below."</p>
            {runs_list(greens)}
            {form}
        </div>
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

/// Step 5: the model endpoint, its key, an example call and the budgets
/// left, updating live.
#[component]
pub fn MeterSection(
    meter: MeterBox,
    /// The model window's state in a sentence (from the gate).
    #[prop(optional)]
    window: Option<String>,
) -> impl IntoView {
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
        <section class="meter step" id="model-meter" aria-labelledby="model-meter-heading">
            <h2 id="model-meter-heading">"5. Model key"</h2>
            <p>"Every model call goes through the platform's metered, OpenAI-compatible endpoint; each call is recorded and counted against your budgets."</p>
            {window.map(|w| view! { <p class="model-window">"Model window: "{w}</p> })}
            <dl class="meter">
                <dt>"Base URL"</dt><dd><code class="model-endpoint">{meter.endpoint.clone()}</code></dd>
                <dt>"Key"</dt><dd>{key}</dd>
            </dl>
            {note}
            <details class="example-call">
                <summary>"An example call"</summary>
                <pre tabindex="0" class="command wrap"><code>{example}</code></pre>
            </details>
            {caps}
            <p class="transcript-link"><a href=meter.transcript_url.clone()>"Your model transcript"</a>": every call you made, its prompt and its answer, as the reviewers will read it."</p>
        </section>
    }
}

/// The candidate's page, in the order the work goes: what to do, the
/// time, start, the starter, a witnessed red, the model key, submit, the
/// receipts.
#[component]
pub fn CandidatePage(page: CandidateView) -> impl IntoView {
    let submit = format!("{}/submit", page.base);
    let start = format!("{}/start", page.base);
    let starter = format!("{}/starter.zip", page.base);
    let time = {
        let t = page.time_box.clone();
        let line = match (&t, &page.time_left, page.started) {
            (Some(_), Some(left), true) => view! { <p class="time-left-line">"Time left: "<strong class="time-left">{left.clone()}</strong>{format!(" of your {}", t.clone().unwrap_or_default())}</p> }.into_any(),
            (Some(t), _, true) => view! { <p class="time-left-line">{format!("Your time box of {t} is over.")}</p> }.into_any(),
            (Some(t), _, false) => view! { <p class="time-left-line">"Time box: "<strong>{t.clone()}</strong>", not started yet."</p> }.into_any(),
            (None, _, _) => view! { <p class="time-left-line">"No time box: work at your own pace until the deadline."</p> }.into_any(),
        };
        let start_form = t.clone().filter(|_| !page.started && page.closed.is_none()).map(|t| {
            let warning = format!(
                "Pressing Start begins your time box of {t}; it cannot be paused. \
                 Downloading the starter, a model call with your key, a witnessed run or a submission also start it."
            );
            view! {
                <form method="post" action=start.clone() class="start" id="start-form">
                    <p class="warning" role="note">{warning}</p>
                    <button type="submit" id="start-time-box">"Start the time box"</button>
                </form>
            }
        });
        view! {
            <section id="time" class="time-box step" aria-labelledby="time-heading">
                <h2 id="time-heading">"2. Your time"</h2>
                {line}
                <p class="deadline">"Deadline: "{page.deadline.clone()}</p>
                {start_form}
            </section>
        }
    };
    let rules = (!page.rules.is_empty() || !page.budgets.is_empty()).then(|| {
        let items = page.rules.iter().map(|r| view! { <li>{inline_code(r)}</li> }).collect_view();
        let budgets = page
            .budgets
            .iter()
            .map(|(k, v)| view! { <li class="budget">{format!("{k}: {v}")}</li> })
            .collect_view();
        view! { <h3>"How your work is run"</h3><ul class="rules">{items}{budgets}</ul> }
    });
    // With JavaScript off a refused upload answers with this page again: the
    // refusal takes the focus (`autofocus`, focusable by `tabindex`), so the
    // browser scrolls to it instead of showing the top of the page.
    let error = page
        .error
        .clone()
        .map(|e| view! { <p class="error refusal" id="upload-refusal" role="alert" tabindex="-1" autofocus=true>"Your upload was refused: "{e}</p> });
    let made = page.submissions.len() as i64;
    let left = (page.max_submissions - made).max(0);
    let allowance = (page.max_submissions > 0).then(|| {
        view! {
            <p class="submissions-left" id="submissions-left">
                <strong>{format!("{left} of {} submission{} left", page.max_submissions, if page.max_submissions == 1 { "" } else { "s" })}</strong>
                {format!(" ({made} made). Every one is kept; the hiring team reads the last first.")}
            </p>
        }
    });
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
    let green = page.witness.as_ref().map(witness_green);
    let submit_terminal = page.witness.as_ref().map(|w| {
        terminal(vec![
            ("green", "3. Witness green (after the fix)", w.curl_green.clone()),
            ("submit", "4. Submit", w.curl_submit.clone()),
        ])
    });
    let receipts = if page.submissions.is_empty() {
        view! { <p class="empty">"No submission yet. Each one you make gets a receipt here."</p> }
            .into_any()
    } else {
        let rows = page
            .submissions
            .iter()
            .map(|s| {
                let short = s.sha256.chars().take(12).collect::<String>();
                view! {
                    <li class="submission">
                        <a href=s.href.clone()>{format!("Receipt of {}", s.received)}</a>" "
                        <span class=format!("state state-{}", s.state)>{s.state.clone()}</span>
                        <span class="muted">" · SHA-256 "<code>{short}</code>{format!(" · {} bytes", s.size_bytes)}</span>
                        {s.wait.clone().map(|w| view! { <p class="queue-wait">{w}</p> })}
                    </li>
                }
            })
            .collect_view();
        view! { <ol class="submissions">{rows}</ol> }.into_any()
    };
    let window = page.witness.as_ref().map(|w| w.model_window.clone());
    view! {
        <section class="candidate">
            <h1>{page.title.clone()}</h1>
            <p class="who">"For "{page.candidate_name.clone()}</p>
            <section id="task" class="step" aria-labelledby="task-heading">
                <h2 id="task-heading">"1. What to do"</h2>
                <article class="prompt" inner_html=page.prompt_html.clone()></article>
                {rules}
            </section>
            {time}
            <section id="starter" class="step" aria-labelledby="starter-heading">
                <h2 id="starter-heading">"3. Download the starter"</h2>
                <p><a class="starter" href=starter download="starter.zip">"Download the starter workspace (zip)"</a></p>
            </section>
            {page.witness.clone().map(|section| view! { <WitnessView section=section /> })}
            {page.meter.clone().map(|m| match window.clone() {
                Some(w) => view! { <MeterSection meter=m window=w /> }.into_any(),
                None => view! { <MeterSection meter=m /> }.into_any(),
            })}
            <section id="submit" class="step" aria-labelledby="submit-heading">
                <h2 id="submit-heading">"6. Submit"</h2>
                {green}
                {allowance}
                {error}
                {upload}
                {submit_terminal}
            </section>
            <section id="receipts" class="step" aria-labelledby="receipts-heading">
                <h2 id="receipts-heading">"7. Your receipts"</h2>
                {receipts}
            </section>
            <YourData href=format!("{}/my-data.zip", page.base) />
        </section>
    }
}

/// The candidate's copy of everything held about them.
#[component]
pub fn YourData(href: String) -> impl IntoView {
    view! {
        <section id="your-data" aria-labelledby="your-data-heading">
            <h2 id="your-data-heading">"Your data"</h2>
            <p><a id="my-data" href=href download="my-data.zip">"Download everything this platform holds about you"</a>" (one zip: your details, every upload, your test runs, your model calls with their prompts and answers). The hiring team can erase it; after that this link opens nothing."</p>
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
    /// While it waits for a grader: its place in line and the estimate.
    #[serde(default)]
    pub wait: Option<String>,
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
                    <tr><th scope="row">"State"</th><td><LiveStatus url=page.status_url.clone() initial_state=page.state.clone() wait=page.wait.clone().unwrap_or_default() /></td></tr>
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

/// The page an expired or closed link shows; the candidate can still take
/// their data (`download`).
#[component]
pub fn GoneView(message: String, #[prop(optional)] download: Option<String>) -> impl IntoView {
    view! {
        <section class="gone">
            <h1>"This link has expired"</h1>
            <p>{message}</p>
        </section>
        {download.map(|href| view! { <YourData href=href /> })}
    }
}

/// The page of a link whose candidate's data was erased.
#[component]
pub fn ErasedView(message: String) -> impl IntoView {
    view! {
        <section class="gone erased" id="erased">
            <h1>"Your data was erased"</h1>
            <p>{message}</p>
        </section>
    }
}
