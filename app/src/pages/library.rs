//! The packet library: the list, a version's detail page and its editor.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::islands::LiveStatus;
use crate::shell::CsrfField;

/// Escapes text for a `<textarea>`, whose children Leptos writes unescaped
/// (a prompt holding `</textarea><script>` must stay text).
pub use crate::text::escape_html as escape_text;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PacketListRow {
    pub slug: String,
    pub title: String,
    /// "v3", or "none" before the first publish.
    pub newest: String,
    /// The id of the newest draft, when there is one.
    pub draft: Option<i64>,
    /// Its label: "draft of v3".
    #[serde(default)]
    pub draft_label: String,
    /// The newest version's self-test: not run, queued, running, passed, failed.
    pub check: String,
    pub builtin: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PacketListView {
    pub csrf: String,
    pub can_import: bool,
    pub packets: Vec<PacketListRow>,
}

#[component]
pub fn PacketListPage(vm: PacketListView) -> impl IntoView {
    let rows = vm
        .packets
        .into_iter()
        .map(|p| {
            let href = format!("/packets/{}", p.slug);
            let draft_label = p.draft_label.clone();
            let draft = p.draft.map(|id| {
                let href = format!("/packets/{}?version={id}", p.slug);
                view! { <a href=href>{draft_label}</a> }
            });
            let check_class = format!("check check-{}", p.check.replace(' ', "-"));
            view! {
                <tr>
                    <td><a href=href>{p.slug.clone()}</a>{p.builtin.then(|| view! { <span class="badge">"built-in"</span> })}</td>
                    <td>{p.title}</td>
                    <td>{p.newest}</td>
                    <td>{draft}</td>
                    <td class=check_class>{p.check}</td>
                </tr>
            }
        })
        .collect_view();
    let import = vm.can_import.then(|| {
        view! {
            <section>
                <h2>"Import a packet"</h2>
                <p>"A zip of a packet folder: packet.toml at the root or in one top folder. It becomes a draft."</p>
                <form method="post" action="/packets/import" enctype="multipart/form-data">
                    <CsrfField token=vm.csrf.clone() />
                    <label>"Packet zip" <input type="file" name="file" accept=".zip,application/zip" required /></label>
                    <button type="submit">"Import"</button>
                </form>
            </section>
        }
    });
    view! {
        <h1>"Packets"</h1>
        <table class="packets">
            <thead><tr><th>"Slug"</th><th>"Title"</th><th>"Newest"</th><th>"Draft"</th><th>"Self-test"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
        {import}
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionLink {
    pub id: i64,
    pub label: String,
    pub current: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriterionView {
    pub index: usize,
    pub id: String,
    pub title: String,
    pub max: u32,
    pub mode: String,
    pub levels: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureView {
    pub index: usize,
    pub id: String,
    pub title: String,
    pub description: String,
    pub effect: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetView {
    pub name: String,
    pub value: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileGroup {
    pub name: String,
    pub files: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckItemView {
    pub name: String,
    /// ok, failed or warning.
    pub status: String,
    pub detail: String,
}

/// One mutant of an audit as its page shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditMutantView {
    pub id: String,
    pub fault: String,
    /// killed, survived, explained, crashed or invalid.
    pub outcome: String,
    pub reason: String,
    pub diff: String,
    pub killed_by: Vec<String>,
    /// A killed or survived mutant of a draft the viewer may edit.
    pub keepable: bool,
    /// The draft already has `mutants/audit/<id>.diff` (or `mutants/<id>.diff`).
    pub kept: bool,
}

/// One row of an audit's author ledger.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditCallView {
    pub n: i64,
    pub function: String,
    pub model: String,
    pub outcome: String,
    /// The upstream's HTTP status, or "—".
    pub status: String,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub tokens_estimated: bool,
    pub request_bytes: i64,
    pub response_bytes: i64,
    pub started: String,
    pub ended: String,
    pub error: String,
}

/// A mutation audit of the version ("Audit the hidden tests").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditView {
    pub id: i64,
    /// queued, running, done or failed.
    pub state: String,
    /// The JSON status endpoint the live status polls.
    pub status_url: String,
    /// rules or model.
    pub mode: String,
    /// "8 per definition", the definitions and, for a model, its caps.
    pub asked: String,
    pub requested: String,
    pub finished: String,
    /// Why a failed audit could not run.
    pub error: Option<String>,
    pub target: String,
    pub steps: String,
    pub killed: usize,
    pub survived: usize,
    /// Survivors the packet's `mutants/EQUIVALENT.md` explains.
    pub explained: usize,
    pub crashed: usize,
    pub invalid: usize,
    pub mutants: Vec<AuditMutantView>,
    pub calls: Vec<AuditCallView>,
    /// Problems no one mutant's (a malformed answer, an upstream down).
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
}

/// An earlier audit of the version, linked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditLink {
    pub id: i64,
    pub label: String,
    pub current: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PacketDetailView {
    pub csrf: String,
    pub slug: String,
    pub title: String,
    pub summary: String,
    pub version_id: i64,
    /// "v2" or "draft of v3".
    pub label: String,
    pub is_draft: bool,
    /// Authors may edit, publish and run the self-test.
    pub can_edit: bool,
    pub versions: Vec<VersionLink>,
    /// The prompt rendered from Markdown (raw HTML escaped).
    pub prompt_html: String,
    pub prompt_text: String,
    pub criteria: Vec<CriterionView>,
    pub failures: Vec<FailureView>,
    pub budgets: Vec<BudgetView>,
    pub files: Vec<FileGroup>,
    /// not run, queued, running, passed, failed.
    pub check_state: String,
    pub check_items: Vec<CheckItemView>,
    pub publish_pending: bool,
    /// Why the version's folder could not be read, if it could not.
    pub load_error: Option<String>,
    /// The packet has a published version, so candidates can be invited.
    #[serde(default)]
    pub can_invite: bool,
    /// While the self-test is queued or running: its status URL, which the
    /// page follows live (`{"state"}`); with JavaScript off, a reload shows
    /// the state.
    #[serde(default)]
    pub check_status_url: Option<String>,
    /// The audit shown (the newest, or the one asked for).
    #[serde(default)]
    pub audit: Option<AuditView>,
    /// Every audit of the version, newest first.
    #[serde(default)]
    pub audits: Vec<AuditLink>,
    /// A model upstream is configured for the packet, so an audit may ask a model.
    #[serde(default)]
    pub audit_model: bool,
    /// The audit caps an author may ask for at most.
    #[serde(default)]
    pub audit_max_calls: usize,
    #[serde(default)]
    pub audit_max_tokens: i64,
}

#[component]
fn AuditSection(vm: PacketDetailView) -> impl IntoView {
    let base = format!("/packets/{}/versions/{}", vm.slug, vm.version_id);
    let form = vm.can_edit.then(|| {
        let model = vm.audit_model.then(|| {
            view! {
                <label>"Mutants from"
                    <select name="mode">
                        <option value="rules" selected=true>"rules (offline)"</option>
                        <option value="model">"the packet's model upstream"</option>
                    </select>
                </label>
                <label>"Model" <input type="text" name="model" value="default" /></label>
                <label>"Most model calls" <input type="number" name="max_calls" min="1" max=vm.audit_max_calls.to_string() value=vm.audit_max_calls.to_string() /></label>
                <label>"Most tokens" <input type="number" name="max_tokens" min="1" max=vm.audit_max_tokens.to_string() value=vm.audit_max_tokens.to_string() /></label>
            }
        });
        let rules_only = (!vm.audit_model).then(|| {
            view! {
                <input type="hidden" name="mode" value="rules" />
                <p class="hint">"Rule mutants (comparison and boundary flips, operator swaps, constant nudges, negated conditions, removed guards). Configure a model upstream for this packet to ask a model too."</p>
            }
        });
        view! {
            <form method="post" action=format!("{base}/audit") class="edit audit-form">
                <CsrfField token=vm.csrf.clone() />
                {rules_only}
                {model}
                <label>"Mutants per definition" <input type="number" name="mutants" min="1" max="50" value="8" /></label>
                <label>"Only these definitions (space-separated; empty: all)" <input type="text" name="functions" value="" /></label>
                <button type="submit">"Audit the hidden tests"</button>
            </form>
        }
    });
    let history = (vm.audits.len() > 1).then(|| {
        let items = vm
            .audits
            .iter()
            .map(|l| {
                let href = format!("/packets/{}?version={}&audit={}", vm.slug, vm.version_id, l.id);
                let class = if l.current { "current" } else { "" };
                view! { <li class=class><a href=href>{l.label.clone()}</a></li> }
            })
            .collect_view();
        view! { <nav class="audits"><ul>{items}</ul></nav> }
    });
    let shown = vm.audit.clone().map(|a| {
        let keep_base = format!("{base}/audits/{}/keep", a.id);
        let mutants = a
            .mutants
            .iter()
            .map(|m| {
                let class = format!("mutant outcome-{}", m.outcome);
                let killed_by = (!m.killed_by.is_empty()).then(|| view! { <p class="killed-by">{format!("Killed by: {}", m.killed_by.join(", "))}</p> });
                let diff = (!m.diff.is_empty()).then(|| view! { <pre tabindex="0" class="diff">{m.diff.clone()}</pre> });
                let keep = if m.kept {
                    Some(view! { <p class="kept">{format!("Kept as mutants/audit/{}.diff", m.id)}</p> }.into_any())
                } else if m.keepable {
                    Some(
                        view! {
                            <form method="post" action=keep_base.clone() class="keep">
                                <CsrfField token=vm.csrf.clone() />
                                <input type="hidden" name="mutant" value=m.id.clone() />
                                <button type="submit">"Keep as a packet mutant"</button>
                            </form>
                        }
                        .into_any(),
                    )
                } else {
                    None
                };
                view! {
                    <li class=class data-mutant=m.id.clone()>
                        <strong class="outcome">{m.outcome.clone()}</strong>" "<code>{m.id.clone()}</code>": "{m.fault.clone()}
                        <p class="reason">{m.reason.clone()}</p>
                        {killed_by}
                        {diff}
                        {keep}
                    </li>
                }
            })
            .collect_view();
        let calls = (!a.calls.is_empty()).then(|| {
            let rows = a
                .calls
                .iter()
                .map(|c| {
                    let tokens = format!("{} + {}{}", c.prompt_tokens, c.completion_tokens, if c.tokens_estimated { " (estimated)" } else { "" });
                    view! {
                        <tr class=format!("call call-{}", c.outcome)>
                            <td>{c.n}</td><td><code>{c.function.clone()}</code></td><td>{c.model.clone()}</td><td>{c.outcome.clone()}</td>
                            <td>{c.status.clone()}</td><td>{tokens}</td><td>{c.request_bytes}" / "{c.response_bytes}</td>
                            <td>{c.started.clone()}</td><td>{c.ended.clone()}</td><td>{c.error.clone()}</td>
                        </tr>
                    }
                })
                .collect_view();
            view! {
                <h3>"Author ledger"</h3>
                <table class="audit-calls">
                    <thead><tr><th>"#"</th><th>"Definition"</th><th>"Model"</th><th>"Outcome"</th><th>"Status"</th><th>"Tokens (prompt + completion)"</th><th>"Bytes (sent / received)"</th><th>"Started"</th><th>"Ended"</th><th>"Error"</th></tr></thead>
                    <tbody>{rows}</tbody>
                </table>
            }
        });
        let errors = a.errors.iter().map(|e| view! { <li class="audit-error">{e.clone()}</li> }).collect_view();
        let warnings = a.warnings.iter().map(|w| view! { <li class="audit-warning">{w.clone()}</li> }).collect_view();
        let done = a.state == "done";
        let counts = done.then(|| {
            view! {
                <p class="audit-counts">{format!("{} killed, {} survived, {} explained, {} crashed, {} invalid", a.killed, a.survived, a.explained, a.crashed, a.invalid)}</p>
                <p class="audit-target">"Target "<code>{a.target.clone()}</code>"; hidden steps: "{a.steps.clone()}</p>
            }
        });
        let reload = (a.state == "queued" || a.state == "running").then(|| view! { <p class="hint">"Reload the page to see the result."</p> });
        view! {
            <div class="audit" id=format!("audit-{}", a.id)>
                <p>"Audit #"{a.id}" ("{a.mode.clone()}", "{a.asked.clone()}"), requested "{a.requested.clone()}": "
                    <crate::islands::LiveStatus url=a.status_url.clone() initial_state=a.state.clone() />
                    {(!a.finished.is_empty()).then(|| view! { " finished "{a.finished.clone()} })}
                </p>
                {reload}
                {a.error.clone().map(|e| view! { <p class="error" role="alert">{e}</p> })}
                {counts}
                <ul class="audit-problems">{errors}{warnings}</ul>
                <ol class="mutants">{mutants}</ol>
                {calls}
            </div>
        }
    });
    view! {
        <section class="mutation-audit">
            <h2>"Mutation audit of the hidden tests"</h2>
            {form}
            {history}
            {shown}
        </section>
    }
}

#[component]
pub fn PacketDetailPage(vm: PacketDetailView) -> impl IntoView {
    let base = format!("/packets/{}/versions/{}", vm.slug, vm.version_id);
    let editable = vm.can_edit && vm.is_draft;
    let versions = vm
        .versions
        .iter()
        .map(|v| {
            let href = format!("/packets/{}?version={}", vm.slug, v.id);
            let class = if v.current { "current" } else { "" };
            view! { <li class=class><a href=href>{v.label.clone()}</a></li> }
        })
        .collect_view();

    let actions = vm.can_edit.then(|| {
        let csrf = vm.csrf.clone();
        let check = view! {
            <form method="post" action=format!("{base}/check")>
                <CsrfField token=csrf.clone() />
                <button type="submit">"Run self-test"</button>
            </form>
        };
        let publish = (vm.is_draft && !vm.publish_pending).then(|| {
            view! {
                <form method="post" action=format!("{base}/publish")>
                    <CsrfField token=csrf.clone() />
                    <button type="submit">"Publish (runs the self-test)"</button>
                </form>
            }
        });
        let new_draft = (!vm.is_draft).then(|| {
            view! {
                <form method="post" action=format!("{base}/draft")>
                    <CsrfField token=csrf.clone() />
                    <button type="submit">"Edit as new draft"</button>
                </form>
            }
        });
        let invite = vm.can_invite.then(|| {
            let href = format!("/assignments/new?packet={}", vm.slug);
            view! { <a class="button invite" href=href>"Invite a candidate"</a> }
        });
        view! { <div class="actions">{invite}{check}{publish}{new_draft}</div> }
    });

    let check_items = vm
        .check_items
        .iter()
        .map(|i| {
            let class = format!("check-item {}", i.status);
            view! { <li class=class><strong>{i.status.clone()}</strong>" "{i.name.clone()}" — "{i.detail.clone()}</li> }
        })
        .collect_view();
    let pending = vm.publish_pending.then(|| view! { <p class="pending">"Publish requested: the draft is published when the self-test passes."</p> });
    let check_class = format!("check check-{}", vm.check_state.replace(' ', "-"));

    let prompt_edit = editable.then(|| {
        let prompt = escape_text(&vm.prompt_text);
        view! {
            <EditForm action=format!("{base}/prompt") csrf=vm.csrf.clone() save="Save prompt">
                <label>"Prompt (Markdown)" <textarea name="prompt" rows="16" inner_html=prompt></textarea></label>
            </EditForm>
        }
    });

    let criteria = vm
        .criteria
        .iter()
        .map(|c| {
            let levels = c.levels.iter().enumerate().map(|(n, l)| view! { <li value=n.to_string()>{l.clone()}</li> }).collect_view();
            let edit = editable.then(|| {
                let (title, max, levels) = (c.title.clone(), c.max.to_string(), escape_text(&c.levels.join("\n")));
                view! {
                    <RowEditor action=format!("{base}/criteria/{}", c.index) csrf=vm.csrf.clone() save="Save row">
                        <label>"Title" <input type="text" name="title" value=title /></label>
                        <label>"Max level" <input type="number" name="max" min="0" value=max /></label>
                        <label>"Levels, one per line (0 first)" <textarea name="levels" rows="5" inner_html=levels></textarea></label>
                    </RowEditor>
                }
            });
            view! {
                <tr>
                    <td><code>{c.id.clone()}</code></td>
                    <td>{c.title.clone()}</td>
                    <td>{c.mode.clone()}</td>
                    <td>{c.max}</td>
                    <td><ol start="0">{levels}</ol>{edit}</td>
                </tr>
            }
        })
        .collect_view();

    let failures = vm
        .failures
        .iter()
        .map(|f| {
            let edit = editable.then(|| {
                let (title, description) = (f.title.clone(), escape_text(&f.description));
                view! {
                    <RowEditor action=format!("{base}/failures/{}", f.index) csrf=vm.csrf.clone() save="Save entry">
                        <label>"Title" <input type="text" name="title" value=title /></label>
                        <label>"Description" <textarea name="description" rows="4" inner_html=description></textarea></label>
                    </RowEditor>
                }
            });
            view! {
                <tr>
                    <td><code>{f.id.clone()}</code></td>
                    <td>{f.title.clone()}</td>
                    <td>{f.description.clone()}{edit}</td>
                    <td>{f.effect.clone()}</td>
                </tr>
            }
        })
        .collect_view();

    let budgets_table = vm
        .budgets
        .iter()
        .map(|b| {
            let shown = b.value.map(|v| v.to_string()).unwrap_or_else(|| "—".into());
            view! { <tr><th>{b.name.clone()}</th><td class="budget" data-budget=b.name.clone()>{shown}</td></tr> }
        })
        .collect_view();
    let budgets_edit = editable.then(|| {
        let fields = vm
            .budgets
            .iter()
            .map(|b| {
                let v = b.value.map(|v| v.to_string()).unwrap_or_default();
                view! { <label>{b.name.clone()} <input type="number" min="0" name=b.name.clone() value=v /></label> }
            })
            .collect_view();
        view! {
            <EditForm action=format!("{base}/budgets") csrf=vm.csrf.clone() save="Save budgets">
                {fields}
            </EditForm>
        }
    });

    let files = vm
        .files
        .iter()
        .map(|g| {
            let items = g.files.iter().map(|f| view! { <li><code>{f.clone()}</code></li> }).collect_view();
            view! { <details><summary>{g.name.clone()}" ("{g.files.len()}")"</summary><ul>{items}</ul></details> }
        })
        .collect_view();

    view! {
        <h1>{vm.title.clone()}" "<small>{vm.slug.clone()}" · "{vm.label.clone()}</small></h1>
        <p class="summary">{vm.summary.clone()}</p>
        <p class="review-links">
            <a href=format!("/packets/{}/compare", vm.slug)>"Compare graded submissions"</a>
            " · "
            <a href=format!("/packets/{}/scorecards.csv", vm.slug)>"Scorecards (CSV)"</a>
            " · "
            <a href=format!("/assignments?packet={}", vm.slug)>"Assignments"</a>
        </p>
        {vm.load_error.clone().map(|e| view! { <p class="error" role="alert">{e}</p> })}
        <nav class="versions"><ul>{versions}</ul></nav>
        {actions}
        <section class="self-test">
            <h2>"Self-test: "{match vm.check_status_url.clone() {
                Some(url) => view! {
                    <span class=check_class>
                        <LiveStatus url=url initial_state=vm.check_state.clone() final_states=vec!["passed".to_string(), "failed".to_string(), "not run".to_string()] />
                    </span>
                    <noscript>" (reload the page to see it change)"</noscript>
                }.into_any(),
                None => view! { <span class=check_class>{vm.check_state.clone()}</span> }.into_any(),
            }}</h2>
            {pending}
            <ul>{check_items}</ul>
        </section>
        <AuditSection vm=vm.clone() />
        <section><h2>"Prompt"</h2><div class="prompt" inner_html=vm.prompt_html.clone()></div>{prompt_edit}</section>
        <section>
            <h2>"Rubric"</h2>
            <table class="rubric"><thead><tr><th>"Criterion"</th><th>"Title"</th><th>"Mode"</th><th>"Max"</th><th>"Levels"</th></tr></thead><tbody>{criteria}</tbody></table>
        </section>
        <section>
            <h2>"Failure catalog"</h2>
            <table class="failures"><thead><tr><th>"Id"</th><th>"Title"</th><th>"Description"</th><th>"Effect"</th></tr></thead><tbody>{failures}</tbody></table>
        </section>
        <section><h2>"Budgets"</h2><table class="budgets">{budgets_table}</table>{budgets_edit}</section>
        <section><h2>"Files"</h2>{files}</section>
    }
}

/// One form of the draft editor: posted to `action` with the CSRF token,
/// `children`'s fields, and a submit button saying `save`.
#[component]
fn EditForm(action: String, csrf: String, save: &'static str, children: Children) -> impl IntoView {
    view! {
        <form method="post" action=action class="edit">
            <CsrfField token=csrf />
            {children()}
            <button type="submit">{save}</button>
        </form>
    }
}

/// An [`EditForm`] behind an "Edit" disclosure, in a row of a table.
#[component]
fn RowEditor(
    action: String,
    csrf: String,
    save: &'static str,
    children: Children,
) -> impl IntoView {
    view! {
        <details>
            <summary>"Edit"</summary>
            <EditForm action=action csrf=csrf save=save>{children()}</EditForm>
        </details>
    }
}
