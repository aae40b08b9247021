//! The reviewer's pages: an assignment with its submissions, a scorecard in
//! evidence order with human scoring, and a receipt (the side-by-side
//! comparison is `compare`). The server builds every view model
//! (`server/src/web/review.rs`); these components only lay them out.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::shell::CsrfField;

/// One submission in an assignment's list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmissionLine {
    pub id: String,
    pub received_at: String,
    pub state: String,
    pub decision: Option<String>,
    pub score: Option<String>,
}

/// An assignment and its submissions, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssignmentView {
    pub id: String,
    pub candidate: String,
    pub email: String,
    pub slug: String,
    pub version: String,
    pub deadline: String,
    pub state: String,
    pub submissions: Vec<SubmissionLine>,
    /// The session's CSRF token and whether the viewer may manage the
    /// assignment (author or admin): reissue the link, revoke the model key.
    pub csrf: String,
    pub can_manage: bool,
    /// Whether the assignment has a model key that still works.
    pub model_key_active: bool,
    /// Uploads refused at the door (never graded): (when, reason), newest first.
    #[serde(default)]
    pub refusals: Vec<(String, String)>,
    /// Whether the viewer may erase the candidate's data (admin).
    #[serde(default)]
    pub can_erase: bool,
    /// When, by whom and why the candidate's data was erased.
    #[serde(default)]
    pub erased: Option<String>,
}

#[component]
pub fn AssignmentPage(view: AssignmentView) -> impl IntoView {
    let empty =
        view.submissions.is_empty().then(|| view! { <p class="empty">"No submission yet."</p> });
    let rows = view
        .submissions
        .into_iter()
        .map(|s| {
            let href = format!("/submissions/{}", s.id);
            view! {
                <tr>
                    <td><a href=href>{s.id}</a></td>
                    <td>{s.received_at}</td>
                    <td><span class=format!("state {}", s.state)>{s.state.clone()}</span></td>
                    <td><span class="decision">{s.decision.unwrap_or_default()}</span></td>
                    <td>{s.score.unwrap_or_default()}</td>
                </tr>
            }
        })
        .collect_view();
    let refused = (!view.refusals.is_empty()).then(|| {
        let rows = view.refusals.iter().map(|(when, why)| view! { <tr><td>{when.clone()}</td><td class="refusal-reason">{why.clone()}</td></tr> }).collect_view();
        view! {
            <section class="refused-uploads">
                <h2>"Refused uploads"</h2>
                <p class="hint">"Uploads turned away before grading (nothing of them is kept but this line)."</p>
                <table class="refusals">
                    <thead><tr><th>"When"</th><th>"Reason"</th></tr></thead>
                    <tbody>{rows}</tbody>
                </table>
            </section>
        }
    });
    let compare = format!("/packets/{}/compare", view.slug);
    let erased = view.erased.clone().map(|e| {
        view! { <p class="erased-notice" id="erased" role="status">{e}</p> }
    });
    let erase = (view.can_erase && view.erased.is_none()).then(|| {
        let action = format!("/assignments/{}/erase", view.id);
        view! {
            <details class="secondary-action erase">
                <summary>"Erase this candidate's data…"</summary>
                <p>"Removes their name and email, every upload, test run, model call and transcript, the reviewers' scores and the audit entries' details, for good. The assignment's id, packet, deadline and final score stay, with no personal data. The candidate can download their copy from their link first."</p>
                <form id="erase-candidate" method="post" action=action>
                    <crate::shell::CsrfField token=view.csrf.clone() />
                    <label>"Type the candidate's email to confirm" <input type="text" name="confirm" required autocomplete="off" /></label>
                    <button type="submit" class="danger">"Erase the candidate's data"</button>
                </form>
            </details>
        }
    });
    let manage = (view.can_manage && view.erased.is_none()).then(|| {
        let reissue = format!("/assignments/{}/reissue", view.id);
        let revoke = format!("/assignments/{}/model-key/revoke", view.id);
        let csrf = view.csrf.clone();
        let revoke_form = view.model_key_active.then(|| {
            view! {
                <form id="revoke-model-key" method="post" action=revoke>
                    <crate::shell::CsrfField token=csrf.clone() />
                    <button type="submit">"Revoke the model key"</button>
                </form>
            }
        });
        view! {
            <div class="actions">
                {revoke_form}
            </div>
            <details class="secondary-action reissue">
                <summary>"Reissue the link (and model key)…"</summary>
                <form id="reissue-link" method="post" action=reissue>
                    <crate::shell::CsrfField token=view.csrf.clone() />
                    <label class="inline"><input type="checkbox" name="confirm" value="yes" required />" Yes, stop the current link and model key"</label>
                    <button type="submit" class="secondary">"Reissue the link"</button>
                </form>
            </details>
        }
    });
    view! {
        <h1>"Assignment: " {view.candidate.clone()}</h1>
        <dl class="facts">
            <dt>"Candidate"</dt><dd>{view.candidate} " <" {view.email} ">"</dd>
            <dt>"Packet"</dt><dd>{view.slug} " " {view.version}</dd>
            <dt>"Deadline"</dt><dd>{view.deadline}</dd>
            <dt>"State"</dt><dd><span class=format!("state {}", view.state)>{view.state.clone()}</span></dd>
        </dl>
        <h2>"Submissions"</h2>
        {empty}
        <table class="submissions">
            <thead><tr><th>"Submission"</th><th>"Received"</th><th>"State"</th><th>"Decision"</th><th>"Score"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
        {erased}
        {refused}
        <p><a href=compare>"Compare this packet's candidates"</a></p>
        {manage}
        {erase}
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateView {
    pub label: String,
    /// passed, failed or pending.
    pub result: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindingView {
    pub id: String,
    pub title: String,
    /// witnessed, replayed or claimed.
    pub provenance: String,
    pub evidence: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriterionView {
    pub id: String,
    pub title: String,
    /// auto, human or auto-override.
    pub mode: String,
    /// The level reached, or "pending" / "not counted".
    pub level: String,
    pub max: u32,
    pub weight: u32,
    /// scored, pending or after-gate.
    pub status: String,
    pub basis: Vec<String>,
    pub level_text: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunView {
    pub id: String,
    pub command: String,
    /// One line: "exit 0", "signal 9", "timed out", with the limit hit.
    pub outcome: String,
    /// ok or failed, for styling.
    pub status: String,
    pub duration: String,
    pub timed_out: bool,
    pub limit_hit: Option<String>,
    pub leftovers: Vec<String>,
    /// "passed / total" of the JUnit report, when the run had one.
    pub tests: Option<String>,
    /// Tests that did not pass, as "name: status (why)".
    pub failed_tests: Vec<String>,
    /// How the process that ran the tests crashed, when it did.
    #[serde(default)]
    pub crash: Option<String>,
    pub stdout_tail: String,
    pub stderr_tail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileChange {
    pub path: String,
    /// added, changed or unchanged (as the starter), frozen-changed.
    pub change: String,
    pub size: u64,
    pub sha256: String,
    /// The line diff against the starter's copy: (' ' | '-' | '+' | '@', line).
    pub diff: Vec<(char, String)>,
    /// Why no diff is shown (binary, too large, the stored zip is gone).
    pub diff_note: Option<String>,
    /// Beside each diff line: the model call whose answer holds this added
    /// line (whitespace aside), if one does.
    #[serde(default)]
    pub model_calls: Vec<Option<i64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolView {
    pub name: String,
    pub pin: String,
    pub probed: String,
    pub matches: bool,
}

/// A graded scorecard, in evidence order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CardView {
    /// What ingestion normalised (a top folder unwrapped, OS metadata left
    /// out, backslash separators), one sentence each.
    #[serde(default)]
    pub normalised: Vec<String>,
    /// The model-written share of the change, as a sentence; None when no
    /// model answer was kept.
    #[serde(default)]
    pub model_share: Option<String>,
    pub decision: String,
    pub score: String,
    pub gates: Vec<GateView>,
    pub caps: Vec<String>,
    pub pending: Vec<String>,
    pub findings: Vec<FindingView>,
    pub unevaluated: Vec<(String, String)>,
    /// Failures whose witnessed checks were not applicable (no platform
    /// record), with the reason.
    #[serde(default)]
    pub not_witnessed: Vec<(String, String)>,
    pub criteria: Vec<CriterionView>,
    pub runs: Vec<RunView>,
    pub frozen: Vec<FileChange>,
    pub mutation: Option<String>,
    pub tools: Vec<ToolView>,
    pub mismatches: Vec<String>,
    pub sandbox_fallbacks: Vec<String>,
    /// The submission against the starter, last.
    pub files: Vec<FileChange>,
    pub archive_sha256: String,
    pub workspace_digest: String,
    pub receipt_digest: String,
    /// The digest the grader gave the receipt, when a reviewer's score
    /// has since rescored it (and changed `receipt_digest`).
    #[serde(default)]
    pub graded_digest: Option<String>,
    pub packet_digest: String,
    /// The SHA-256 of the witnessed record the grading was given, if any.
    #[serde(default)]
    pub witness_sha256: Option<String>,
}

/// A form to score one human or auto-override criterion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HumanForm {
    pub criterion: String,
    pub title: String,
    pub mode: String,
    /// (level, description), 0 to max.
    pub levels: Vec<(u32, String)>,
    pub current: Option<u32>,
    /// The submitted file the criterion is about (named in its title or
    /// levels, e.g. NOTES.md), shown beside the form: (path, text).
    #[serde(default)]
    pub file: Option<(String, String)>,
}

/// One row of the human-score history (the audit trail).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryRow {
    pub when: String,
    pub who: String,
    pub criterion: String,
    pub level: i64,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScorecardView {
    pub id: String,
    pub assignment_id: String,
    pub candidate: String,
    pub slug: String,
    pub version: String,
    pub received_at: String,
    pub graded_at: Option<String>,
    /// queued, grading, graded, failed or refused.
    pub state: String,
    pub error: Option<String>,
    pub refusal: Option<String>,
    pub card: Option<CardView>,
    pub forms: Vec<HumanForm>,
    pub history: Vec<HistoryRow>,
    pub csrf: String,
    /// What the platform witnessed for the assignment up to this
    /// submission; `None` when it witnessed nothing.
    #[serde(default)]
    pub ledger: Option<LedgerView>,
    /// Blind review hides the candidate from this reviewer for now.
    #[serde(default)]
    pub blind: bool,
    /// Other submissions of the packet whose code is similar, this one as
    /// side `a`. A signal, never a finding.
    #[serde(default)]
    pub similar: Vec<SimilarPair>,
    /// The conversation with the model up to this submission, in time
    /// order beside the witnessed runs.
    #[serde(default)]
    pub transcript: Vec<crate::pages::transcript::Entry>,
}

/// One side of an aligned excerpt: where the fragment is and its lines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ExcerptSide {
    /// The file, as in the submission.
    pub path: String,
    /// "lines 12–30".
    pub lines: String,
    pub text: String,
    /// The fragment is longer than the lines shown.
    pub cut: bool,
}

/// A fragment two similar submissions share, side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct SimilarExcerpt {
    pub a: ExcerptSide,
    pub b: ExcerptSide,
}

/// Two submissions whose code (less the starter's) shares most of its token
/// fingerprints, with the fragments they share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct SimilarPair {
    /// The candidates (or pseudonyms under blind review) and submissions.
    pub a: String,
    pub a_id: String,
    pub b: String,
    pub b_id: String,
    /// "87 %".
    pub share: String,
    pub excerpts: Vec<SimilarExcerpt>,
}

/// The shared fragments of a pair, each as two columns (file and line
/// range above each side's lines).
#[component]
pub fn SimilarExcerpts(pair: SimilarPair, #[prop(optional)] open: bool) -> impl IntoView {
    let count = pair.excerpts.len();
    let side = |who: String, s: ExcerptSide| {
        let more =
            s.cut.then(|| view! { <p class="hint">"(the fragment goes on past these lines)"</p> });
        view! {
            <div class="excerpt-side">
                <p class="excerpt-where"><strong>{who}</strong>" · "<code class="excerpt-path">{s.path}</code>" "<span class="excerpt-lines">{s.lines}</span></p>
                <pre tabindex="0" class="excerpt-text">{s.text}</pre>
                {more}
            </div>
        }
        .into_any()
    };
    let rows = pair
        .excerpts
        .into_iter()
        .map(|e| view! { <div class="excerpt">{side(pair.a.clone(), e.a)}{side(pair.b.clone(), e.b)}</div> }.into_any())
        .collect_view();
    let summary = if count == 0 {
        "No single stretch of code is shared; the fingerprints in common are spread out."
            .to_string()
    } else {
        format!("{count} shared fragment(s), side by side")
    };
    view! {
        <details class="excerpts" open=open>
            <summary>{summary}</summary>
            {rows}
        </details>
    }
    .into_any()
}

/// A red or green run the platform witnessed, as the ledger shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerRun {
    pub id: i64,
    pub kind: String,
    pub at: String,
    pub accepted: bool,
    pub exit: String,
    pub tree_sha256: String,
}

/// One call through the model meter, as the ledger table shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerCall {
    pub id: i64,
    pub at: String,
    /// Time since the first accepted red, e.g. `+2m05s`, or `before red`.
    pub since_red: String,
    pub status: i64,
    pub refused: Option<String>,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub tokens_estimated: bool,
    pub request_bytes: i64,
    pub duplicate_of: Option<i64>,
}

/// The witnessed runs and the meter's ledger, with the timeline chart the
/// server drew (an SVG document, trusted: the server escapes every text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerView {
    pub summary: String,
    pub runs: Vec<LedgerRun>,
    pub calls: Vec<LedgerCall>,
    pub timeline_svg: String,
}

/// The witnessed evidence section of a scorecard.
fn ledger_section(l: LedgerView) -> impl IntoView {
    let runs = l
        .runs
        .into_iter()
        .map(|r| {
            let class = format!(
                "witnessed-run {} {}",
                r.kind,
                if r.accepted { "accepted" } else { "not-accepted" }
            );
            view! {
                <tr class=class data-id=r.id>
                    <td>{r.id}</td><td>{r.kind}</td><td>{r.at}</td>
                    <td>{if r.accepted { "accepted" } else { "not accepted" }}</td><td>{r.exit}</td>
                    <td><code>{r.tree_sha256}</code></td>
                </tr>
            }
        })
        .collect_view();
    let calls = l
        .calls
        .into_iter()
        .map(|c| {
            let class =
                if c.refused.is_some() { "model-call refused" } else { "model-call forwarded" };
            let tokens = format!(
                "{} + {}{}",
                c.prompt_tokens,
                c.completion_tokens,
                if c.tokens_estimated { " (estimated)" } else { "" }
            );
            view! {
                <tr class=class data-id=c.id>
                    <td>{c.id}</td><td>{c.at}</td><td>{c.since_red}</td><td>{c.status}</td>
                    <td>{c.refused.unwrap_or_else(|| "forwarded".into())}</td>
                    <td>{tokens}</td><td>{c.request_bytes}</td>
                    <td>{c.duplicate_of.map(|d| d.to_string()).unwrap_or_default()}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <section class="ledger">
            <h2>"Witnessed: runs and the model meter's ledger " <span class="badge witnessed">"witnessed"</span></h2>
            <p class="ledger-summary">{l.summary}</p>
            <figure class="timeline" inner_html=l.timeline_svg></figure>
            <h3>"Witnessed runs"</h3>
            <table class="witnessed-runs">
                <thead><tr><th>"Run"</th><th>"Kind"</th><th>"At"</th><th>"Counts"</th><th>"Exit"</th><th>"Tree SHA-256"</th></tr></thead>
                <tbody>{runs}</tbody>
            </table>
            <h3>"Model calls"</h3>
            <table class="model-calls">
                <thead><tr><th>"Call"</th><th>"At"</th><th>"Since red"</th><th>"HTTP"</th><th>"Outcome"</th><th>"Tokens (prompt + completion)"</th><th>"Request bytes"</th><th>"Duplicate of"</th></tr></thead>
                <tbody>{calls}</tbody>
            </table>
        </section>
    }
}

fn lines(items: Vec<String>) -> impl IntoView {
    items.into_iter().map(|e| view! { <li><code>{e}</code></li> }).collect_view()
}

#[component]
pub fn ScorecardPage(view: ScorecardView) -> impl IntoView {
    let id = view.id.clone();
    let status = (view.state != "graded").then(|| {
        let note = match view.state.as_str() {
            "queued" => "Queued for grading; this page shows the scorecard once a worker has graded it.".to_string(),
            "grading" => "Grading now.".to_string(),
            "failed" => format!("Grading failed: {}", view.error.clone().unwrap_or_else(|| "no error was recorded".into())),
            "refused" => format!("The submission was refused: {}", view.refusal.clone().unwrap_or_default()),
            other => format!("State: {other}"),
        };
        // The pill follows grading live and reloads the page when it ends.
        let status_url = format!("/submissions/{}/status", view.id);
        let live = view! { <crate::islands::LiveStatus url=status_url.clone() initial_state=view.state.clone() /> };
        view! {
            <p class=format!("submission-state state {}", view.state) data-state=view.state.clone() data-status-url=status_url>
                {live}" "{note}
            </p>
        }
    });
    let regrade = {
        let action = format!("/submissions/{id}/regrade");
        let csrf = view.csrf.clone();
        view! {
            <form class="regrade" method="post" action=action>
                <CsrfField token=csrf />
                <button type="submit">"Regrade on the stored packet version"</button>
            </form>
        }
    };
    let links = {
        let receipt = format!("/submissions/{id}/receipt");
        let json = format!("/submissions/{id}/receipt.json");
        let html = format!("/submissions/{id}/receipt.html");
        let assignment = format!("/assignments/{}", view.assignment_id);
        view! {
            <p class="links">
                <a href=assignment>"Assignment"</a> " · "
                <a href=receipt>"Receipt"</a> " · "
                <a href=json>"Receipt JSON"</a> " · "
                <a href=html download="">"Standalone receipt (HTML)"</a>
            </p>
        }
    };
    let card = view.card.map(|c| scorecard_body(c, view.forms, view.csrf.clone(), id.clone()));
    let ledger = view.ledger.map(ledger_section);
    let transcript = (!view.transcript.is_empty()).then(|| {
        crate::pages::transcript::transcript_section(
            view.transcript,
            "The conversation with the model",
        )
    });
    let history = history_view(view.history);
    // After the verdict, folded to one line: how many pairs, the highest
    // share; each pair's fragments folded again behind it.
    let similar = (!view.similar.is_empty()).then(|| {
        let percent = |p: &SimilarPair| {
            p.share.chars().take_while(char::is_ascii_digit).collect::<String>().parse::<u32>().unwrap_or(0)
        };
        let top = view.similar.iter().map(percent).max().unwrap_or(0);
        let summary = format!(
            "Similar submissions: {} pair(s), the most alike sharing {top} % of the fingerprints",
            view.similar.len()
        );
        view! {
            <details class="similar notice" id="similar">
                <summary><h2 class="inline">{summary}</h2></summary>
                <p class="hint">"Code sharing most of its token fingerprints with this one (the starter's excluded): read both. It changes no score."</p>
                <ul>{view.similar.iter().map(|p| {
                    let href = format!("/submissions/{}", p.b_id);
                    let share = format!(" · {} shared", p.share);
                    view! { <li class="similar-pair"><a href=href>{p.b.clone()}</a>{share}<SimilarExcerpts pair=p.clone() /></li> }.into_any()
                }).collect_view()}</ul>
            </details>
        }
    });
    view! {
        <h1>"Scorecard: " {view.candidate} " · " {view.slug} " " {view.version}</h1>
        {view.blind.then(|| view! { <p class="notice blind-review">"Blind review: the candidate's name and email are hidden from you until you have saved your scores."</p> })}
        <p class="meta">"Submission " <code>{view.id.clone()}</code> ", received " {view.received_at}
            {view.graded_at.map(|g| format!(", graded {g}"))}</p>
        {links}
        {status}
        {card}
        {similar}
        {ledger}
        {transcript}
        {history}
        {regrade}
    }
}

fn scorecard_body(c: CardView, forms: Vec<HumanForm>, csrf: String, id: String) -> impl IntoView {
    let decision_class = format!("decision {}", c.decision);
    let caps = (!c.caps.is_empty()).then(|| view! { <ul class="caps">{c.caps.into_iter().map(|x| view! { <li>{x}</li> }).collect_view()}</ul> });
    let pending = (!c.pending.is_empty()).then(
        || view! { <p class="pending">"Waiting for a reviewer: " {c.pending.join(", ")}</p> },
    );
    let gates = if c.gates.is_empty() {
        view! { <p class="empty">"This packet has no gates."</p> }.into_any()
    } else {
        view! {
            <ol class="gates">
                {c.gates.into_iter().map(|g| view! {
                    <li class=format!("gate {}", g.result)>
                        <span class="gate-label">{g.label}</span> " " <span class="result">{g.result.clone()}</span>
                        {(!g.message.is_empty()).then(|| view! { <span class="message">": " {g.message}</span> })}
                    </li>
                }).collect_view()}
            </ol>
        }
        .into_any()
    };
    // A finding a reviewer may override (the platform-wide veto) carries
    // its form beside the evidence.
    let finding_forms: Vec<HumanForm> =
        forms.iter().filter(|f| c.findings.iter().any(|x| x.id == f.criterion)).cloned().collect();
    let findings = if c.findings.is_empty() {
        view! { <p class="empty">"No failure from the catalog was detected."</p> }.into_any()
    } else {
        c.findings
            .into_iter()
            .map(|f| {
                let form = finding_forms.iter().find(|x| x.criterion == f.id).cloned().map(|x| human_form(x, csrf.clone(), id.clone()));
                let more = f.evidence.len().saturating_sub(8);
                let evidence: Vec<String> = f.evidence.into_iter().take(8).collect();
                let anchor = format!("finding-{}", f.id);
                view! {
                    <article class="finding" id=anchor>
                        <h3><code class="failure-id">{f.id}</code> " " {f.title} " "
                            <span class=format!("badge {}", f.provenance)>{f.provenance.clone()}</span></h3>
                        <ul class="evidence">{lines(evidence)}</ul>
                        {(more > 0).then(|| view! { <p class="more">"… and " {more} " more"</p> })}
                        {form}
                    </article>
                }
            })
            .collect_view()
            .into_any()
    };
    let unevaluated = (!c.unevaluated.is_empty()).then(|| {
        view! {
            <section class="unevaluated">
                <h3>"Not evaluated (the decision stays pending)"</h3>
                <ul>{c.unevaluated.into_iter().map(|(id, why)| view! { <li><code>{id}</code> ": " {why}</li> }).collect_view()}</ul>
            </section>
        }
    });
    let not_witnessed = (!c.not_witnessed.is_empty()).then(|| {
        view! {
            <section class="not-witnessed">
                <h3>"Not witnessed (not applicable: the platform has no record, only claimed evidence was graded)"</h3>
                <ul>{c.not_witnessed.into_iter().map(|(id, why)| view! { <li><code>{id}</code> ": " {why}</li> }).collect_view()}</ul>
            </section>
        }
    });
    let criteria = c
        .criteria
        .into_iter()
        .map(|cr| {
            let found = forms.iter().find(|f| f.criterion == cr.id).cloned();
            // A form with its file spans the whole table in a row of its own,
            // the file beside the form; other forms stay in the row's cell.
            let (inline, wide) = match found {
                Some(f) if f.file.is_some() => (None, Some(human_form(f, csrf.clone(), id.clone()))),
                Some(f) => (Some(human_form(f, csrf.clone(), id.clone())), None),
                None => (None, None),
            };
            let anchor = format!("criterion-{}", cr.id);
            let status = cr.status.clone();
            view! {
                <tr class=format!("criterion {}", cr.status) id=anchor>
                    <td><code>{cr.id}</code> " " {cr.title}</td>
                    <td>{cr.mode}</td>
                    <td class="level">{cr.level} " / " {cr.max}</td>
                    <td>{cr.weight}</td>
                    <td>
                        {cr.level_text.map(|t| view! { <p class="level-text">{t}</p> })}
                        <ul class="basis">{cr.basis.into_iter().map(|b| view! { <li>{b}</li> }).collect_view()}</ul>
                        {inline}
                    </td>
                </tr>
                {wide.map(|w| view! { <tr class=format!("criterion-scoring {status}")><td colspan="5">{w}</td></tr> })}
            }
        })
        .collect_view();
    let runs = c
        .runs
        .into_iter()
        .map(|r| {
            view! {
                <article class=format!("command {}", r.status)>
                    <h3><code>{r.id}</code> " " <span class="outcome">{r.outcome}</span> " " <span class="duration">{r.duration}</span>
                        {r.tests.map(|t| view! { " " <span class="tests">"tests " {t}</span> })}</h3>
                    <pre tabindex="0" class="cmdline">{r.command}</pre>
                    {r.crash.map(|c| view! { <p class="crash">"Crashed: " {c}</p> })}
                    {(!r.failed_tests.is_empty()).then(|| view! { <ul class="failed-tests">{lines(r.failed_tests)}</ul> })}
                    {(!r.leftovers.is_empty()).then(|| view! { <p class="leftovers">"Left running, killed: " {r.leftovers.join("; ")}</p> })}
                    {(!r.stdout_tail.is_empty()).then(|| view! { <details><summary>"stdout (tail)"</summary><pre tabindex="0">{r.stdout_tail}</pre></details> })}
                    {(!r.stderr_tail.is_empty()).then(|| view! { <details><summary>"stderr (tail)"</summary><pre tabindex="0">{r.stderr_tail}</pre></details> })}
                </article>
            }
        })
        .collect_view();
    let frozen = (!c.frozen.is_empty()).then(|| {
        view! {
            <section class="frozen">
                <h2>"Frozen files"</h2>
                <ul>{c.frozen.into_iter().map(|f| {
                    let label = match f.change.as_str() {
                        "not-submitted" => "not submitted (the starter's copy was used)".to_string(),
                        other => other.to_string(),
                    };
                    view! { <li class=format!("file {}", f.change)><code>{f.path}</code> " " {label}</li> }
                }).collect_view()}</ul>
            </section>
        }
    });
    let mutation = c
        .mutation
        .map(|m| view! { <section class="mutation"><h2>"Mutation"</h2><p>{m}</p></section> });
    let env = view! {
        <section class="environment">
            <h2>"Environment"</h2>
            <table>
                <thead><tr><th>"Tool"</th><th>"Pinned"</th><th>"Probed"</th></tr></thead>
                <tbody>{c.tools.into_iter().map(|t| view! {
                    <tr class=if t.matches { "tool match" } else { "tool mismatch" }><td>{t.name}</td><td>{t.pin}</td><td>{t.probed}</td></tr>
                }).collect_view()}</tbody>
            </table>
            {(!c.mismatches.is_empty()).then(|| view! { <ul class="mismatches">{c.mismatches.into_iter().map(|m| view! { <li class="mismatch">{m}</li> }).collect_view()}</ul> })}
            {(!c.sandbox_fallbacks.is_empty()).then(|| view! { <ul class="fallbacks">{c.sandbox_fallbacks.into_iter().map(|m| view! { <li class="fallback">{m}</li> }).collect_view()}</ul> })}
        </section>
    };
    let files = view! {
        <section class="diff">
            <h2>"Submission against the starter"</h2>
            {c.model_share.clone().map(|m| view! { <p class="model-share">{m}</p> })}
            {(!c.normalised.is_empty()).then(|| view! { <ul class="normalised">{c.normalised.iter().map(|n| view! { <li>"Normalised at ingestion: " {n.clone()}</li> }).collect_view()}</ul> })}
            <table class="files">
                <thead><tr><th>"File"</th><th>"Change"</th><th>"Bytes"</th><th>"SHA-256"</th></tr></thead>
                <tbody>{c.files.iter().map(|f| view! {
                    <tr class=format!("file {}", f.change)><td><code>{f.path.clone()}</code></td><td>{f.change.clone()}</td><td>{f.size}</td><td><code>{f.sha256.clone()}</code></td></tr>
                }).collect_view()}</tbody>
            </table>
            {c.files.into_iter().filter(|f| !f.diff.is_empty() || f.diff_note.is_some()).map(|f| view! {
                <details class="file-diff" open=true>
                    <summary><code>{f.path}</code> " (" {f.change} ")"</summary>
                    {f.diff_note.map(|n| view! { <p class="note">{n}</p> })}
                    <pre tabindex="0" class="diff-text">{f.diff.into_iter().enumerate().map(|(i, (kind, line))| {
                        let call = f.model_calls.get(i).copied().flatten();
                        let class = match (kind, call) { ('+', Some(_)) => "add model-written", ('+', None) => "add", ('-', _) => "del", ('@', _) => "fold", _ => "ctx" };
                        let mark = if kind == '@' { String::new() } else { kind.to_string() };
                        match call {
                            Some(id) => view! { <span class=class data-call=id>{format!("{mark}{line}")}<span class="model-mark">{format!("  ← model answer, call {id}")}</span>"\n"</span> }.into_any(),
                            None => view! { <span class=class>{format!("{mark}{line}\n")}</span> }.into_any(),
                        }
                    }).collect_view()}</pre>
                </details>
            }).collect_view()}
        </section>
    };
    view! {
        <section class="summary">
            <p>"Decision: " <strong class=decision_class>{c.decision}</strong> " · score " <strong class="score">{c.score}</strong></p>
            {caps}
            {pending}
        </section>
        <section class="gates-section"><h2>"Gates"</h2>{gates}</section>
        <section class="findings"><h2>"Findings"</h2>{findings}{unevaluated}{not_witnessed}</section>
        <section class="criteria">
            <h2>"Criteria"</h2>
            <table class="rubric">
                <thead><tr><th>"Criterion"</th><th>"Mode"</th><th>"Level"</th><th>"Weight"</th><th>"Basis"</th></tr></thead>
                <tbody>{criteria}</tbody>
            </table>
        </section>
        <section class="commands"><h2>"Commands"</h2>{runs}</section>
        {frozen}
        {mutation}
        {env}
        <section class="digests">
            <h2>"Digests"</h2>
            <dl>
                <dt>"Archive"</dt><dd><code>{c.archive_sha256}</code></dd>
                <dt>"Workspace"</dt><dd><code>{c.workspace_digest}</code></dd>
                <dt>"Packet"</dt><dd><code>{c.packet_digest}</code></dd>
                {c.witness_sha256.map(|w| view! { <dt>"Witnessed record"</dt><dd><code class="witness-digest">{w}</code></dd> })}
                <dt>"Receipt"</dt><dd><code class="receipt-digest">{c.receipt_digest}</code>
                    {c.graded_digest.map(|g| view! { <p class="graded-digest">"Recomputed after reviewer scores (listed with each criterion); as graded: " <code>{g}</code></p> })}</dd>
            </dl>
        </section>
        {files}
    }
}

fn human_form(f: HumanForm, csrf: String, id: String) -> impl IntoView {
    let action = format!("/submissions/{id}/human");
    let label = if f.mode == "auto-override" { "Override level" } else { "Level" };
    let placeholder = f
        .current
        .is_none()
        .then(|| view! { <option value="" selected=true>"Choose a level"</option> });
    let options = f
        .levels
        .into_iter()
        .map(|(l, text)| {
            let selected = f.current == Some(l);
            view! { <option value=l.to_string() selected=selected>{format!("{l}: {text}")}</option> }
        })
        .collect_view();
    let form = view! {
        <form class="human-score" method="post" action=action>
            <CsrfField token=csrf />
            <input type="hidden" name="criterion" value=f.criterion.clone() />
            <label>{label} " (" {f.title} ") " <select name="level" required=true>{placeholder}{options}</select></label>
            <label>"Reason (required) " <textarea name="reason" required=true rows="2" maxlength="4000"></textarea></label>
            <button type="submit">"Save score"</button>
        </form>
    };
    match f.file {
        // The file the criterion is about, beside the form that scores it.
        Some((path, text)) => view! {
            <div class="score-beside">
                <figure class="scored-file">
                    <figcaption>"Submitted " <code>{path}</code></figcaption>
                    <pre tabindex="0">{text}</pre>
                </figure>
                {form}
            </div>
        }
        .into_any(),
        None => form.into_any(),
    }
}

fn history_view(rows: Vec<HistoryRow>) -> impl IntoView {
    let body = if rows.is_empty() {
        view! { <p class="empty">"No reviewer has scored this submission yet."</p> }.into_any()
    } else {
        view! {
            <table class="history">
                <thead><tr><th>"When"</th><th>"Who"</th><th>"Criterion"</th><th>"Level"</th><th>"Reason"</th></tr></thead>
                <tbody>{rows.into_iter().map(|h| view! {
                    <tr><td>{h.when}</td><td>{h.who}</td><td><code>{h.criterion}</code></td><td>{h.level}</td><td class="reason">{h.reason}</td></tr>
                }).collect_view()}</tbody>
            </table>
        }
        .into_any()
    };
    view! { <section class="score-history"><h2>"Score history"</h2>{body}</section> }
}

/// The receipt page: its key facts and the exports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReceiptView {
    pub id: String,
    pub candidate: String,
    pub slug: String,
    pub version: String,
    pub decision: String,
    pub score: String,
    pub digest: String,
    pub archive_sha256: String,
    pub json: String,
    /// The standalone receipt's document body (its sections, no JSON),
    /// rendered and escaped by the server's template.
    #[serde(default)]
    pub body_html: String,
}

#[component]
pub fn ReceiptPage(view: ReceiptView) -> impl IntoView {
    let json = format!("/submissions/{}/receipt.json", view.id);
    let html = format!("/submissions/{}/receipt.html", view.id);
    let card = format!("/submissions/{}", view.id);
    view! {
        <h1>"Receipt: " {view.candidate} " · " {view.slug} " " {view.version}</h1>
        <p class="links"><a href=card>"Scorecard"</a> " · " <a href=json class="receipt-json-link">"Receipt JSON"</a> " · " <a href=html download="">"Standalone HTML"</a></p>
        <article class="receipt-doc" inner_html=view.body_html></article>
    }
}
