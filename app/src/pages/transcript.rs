//! The conversation with the model, as the meter kept it: each call's
//! prompt and answer (tool calls shown) in time order beside the witnessed
//! runs, refused calls with their reason. The reviewer's scorecard and the
//! candidate's own transcript page both show it; every text is a Leptos
//! text node, so a `<script>` in a model answer stays text.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// A tool call the model made (or one in the prompt's history).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallView {
    pub name: String,
    pub arguments: String,
}

/// One message of a prompt or an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageView {
    pub role: String,
    pub text: String,
    pub tool_calls: Vec<ToolCallView>,
}

/// One metered call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallView {
    pub id: i64,
    pub at: String,
    /// Time since the first accepted red, as the ledger says it.
    pub since_red: String,
    pub model: String,
    pub status: i64,
    pub stream: bool,
    /// The cap or rule that refused it, and the message the client got.
    pub refused: Option<String>,
    pub reason: Option<String>,
    pub prompt: Vec<MessageView>,
    /// The tools the request offered, by name.
    pub tools_offered: Vec<String>,
    pub answer: Vec<MessageView>,
    /// A body that is not a chat completion (cut, or not JSON), as text.
    pub raw_request: Option<String>,
    pub raw_response: Option<String>,
    pub request_sha256: Option<String>,
    pub response_sha256: Option<String>,
    /// What was cut, or why a body is missing.
    pub cut: Option<String>,
}

/// One entry of the transcript's time line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Entry {
    /// A witnessed run: (id, kind, at, accepted).
    Run {
        id: i64,
        kind: String,
        at: String,
        accepted: bool,
    },
    Call(Box<CallView>),
}

fn messages(list: Vec<MessageView>, class: &'static str) -> impl IntoView {
    list.into_iter()
        .map(|m| {
            let calls = (!m.tool_calls.is_empty()).then(|| {
                view! {
                    <ul class="tool-calls">{m.tool_calls.into_iter().map(|t| view! {
                        <li class="tool-call">"tool call " <code class="tool-name">{t.name}</code><pre tabindex="0" class="tool-arguments">{t.arguments}</pre></li>
                    }).collect_view()}</ul>
                }
            });
            view! {
                <div class=format!("message {class} role-{}", m.role)>
                    <span class="role">{m.role.clone()}</span>
                    {(!m.text.is_empty()).then(|| view! { <pre tabindex="0" class="message-text">{m.text}</pre> })}
                    {calls}
                </div>
            }
        })
        .collect_view()
}

fn call_view(c: CallView) -> impl IntoView {
    let outcome = match &c.refused {
        Some(r) => format!("refused ({r})"),
        None => format!("HTTP {}", c.status),
    };
    let class =
        if c.refused.is_some() { "transcript-call refused" } else { "transcript-call forwarded" };
    let summary = format!(
        "Call {} · {} · {} · {} · {}{}",
        c.id,
        c.at,
        c.since_red,
        if c.model.is_empty() { "no model" } else { &c.model },
        outcome,
        if c.stream { " · stream" } else { "" }
    );
    let reason = c
        .reason
        .clone()
        .map(|r| view! { <p class="refusal-reason"><strong>"Reason: "</strong>{r}</p> });
    let cut = c.cut.clone().map(|n| view! { <p class="note transcript-cut">{n}</p> });
    let tools = (!c.tools_offered.is_empty()).then(
        || view! { <p class="tools-offered">"Tools offered: " {c.tools_offered.join(", ")}</p> },
    );
    let raw_request =
        c.raw_request.clone().map(|t| view! { <pre tabindex="0" class="raw-request">{t}</pre> });
    let raw_response =
        c.raw_response.clone().map(|t| view! { <pre tabindex="0" class="raw-response">{t}</pre> });
    let digests = view! {
        <p class="transcript-digests">"Request SHA-256 " <code>{c.request_sha256.clone().unwrap_or_else(|| "not kept".into())}</code>
            " · response SHA-256 " <code>{c.response_sha256.clone().unwrap_or_else(|| "not kept".into())}</code></p>
    };
    view! {
        <li class=class data-id=c.id>
            <details>
                <summary>{summary}</summary>
                {reason}
                {cut}
                <h4>"Prompt"</h4>
                {tools}
                {messages(c.prompt, "prompt")}
                {raw_request}
                <h4>"Answer"</h4>
                {messages(c.answer, "answer")}
                {raw_response}
                {digests}
            </details>
        </li>
    }
}

/// The transcript section: the entries in time order.
pub fn transcript_section(entries: Vec<Entry>, heading: &'static str) -> impl IntoView {
    let calls = entries.iter().filter(|e| matches!(e, Entry::Call(_))).count();
    let items = entries
        .into_iter()
        .map(|e| match e {
            Entry::Run { id, kind, at, accepted } => {
                let label = format!(
                    "Witnessed {kind} run {id} at {at} ({})",
                    if accepted { "counts" } else { "does not count" }
                );
                view! { <li class=format!("transcript-run {kind}") data-id=id>{label}</li> }
                    .into_any()
            }
            Entry::Call(c) => call_view(*c).into_any(),
        })
        .collect_view();
    view! {
        <section class="transcript" id="transcript">
            <h2>{heading}</h2>
            <p class="transcript-summary">{format!("{calls} model call(s), oldest first, beside the witnessed runs. Open a call to read its prompt and answer.")}</p>
            <ol class="transcript-entries">{items}</ol>
        </section>
    }
}

/// The candidate's own transcript page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TranscriptPageView {
    pub title: String,
    pub back: String,
    pub json_url: String,
    pub entries: Vec<Entry>,
}

#[component]
pub fn TranscriptPage(page: TranscriptPageView) -> impl IntoView {
    view! {
        <main class="candidate transcript-page">
            <h1>{page.title}</h1>
            <p><a href=page.back>"Back to the assignment"</a> " · " <a href=page.json_url>"Download as JSON"</a></p>
            <p>"Every call you made through the metered endpoint, as the platform kept it. The hiring team's reviewers read the same transcript."</p>
            {transcript_section(page.entries, "Your model transcript")}
        </main>
    }
}
