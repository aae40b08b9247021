//! The packet library pages: list, detail, import, the draft editor,
//! self-test and publish. Every signed-in user may read; authors change.

use app::contract::{JobKind, JobState};
use std::collections::HashMap;

use axum::Form;
use axum::extract::{DefaultBodyLimit, Multipart, Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use grader::check::CheckReport;
use grader::packet::Packet;
use grader::tree::list_paths;
use leptos::prelude::*;
use serde::Deserialize;
use tokio::io::AsyncWriteExt;

use app::pages::library::{
    AuditCallView, AuditLink, AuditMutantView, AuditView, BudgetView, CheckItemView, CriterionView,
    FailureView, FileGroup, PacketDetailPage, PacketDetailView, PacketListPage, PacketListRow,
    PacketListView, VersionLink,
};

use crate::db::{PacketVersion, Role, VersionState};
use crate::error::AppError;
use crate::library::{self, BUDGETS, DraftEdit};
use crate::state::AppState;
use crate::web::auth::{page_meta, render, set_flash, take_flash};
use crate::web::session::CsrfForm;
use crate::web::session::SignedIn;

pub fn routes() -> crate::routes::Routes {
    crate::routes::Routes::new()
        .route("/packets", get(list))
        // The import streams to disk under `max_upload_mb`, checked as it reads.
        .route("/packets/import", post(import).layer(DefaultBodyLimit::disable()))
        .route("/packets/{slug}", get(detail))
        .route("/packets/{slug}/versions/{id}/publish", post(publish))
        .route("/packets/{slug}/versions/{id}/check", post(run_check))
        .route("/packets/{slug}/versions/{id}/check/status", get(check_status))
        .route("/packets/{slug}/versions/{id}/draft", post(new_draft))
        .route("/packets/{slug}/versions/{id}/prompt", post(edit_prompt))
        .route("/packets/{slug}/versions/{id}/budgets", post(edit_budgets))
        .route("/packets/{slug}/versions/{id}/criteria/{index}", post(edit_criterion))
        .route("/packets/{slug}/versions/{id}/failures/{index}", post(edit_failure))
        .route("/packets/{slug}/versions/{id}/audit", post(start_audit))
        .route("/packets/{slug}/versions/{id}/audits/{audit}/status", get(audit_status))
        .route("/packets/{slug}/versions/{id}/audits/{audit}/keep", post(keep_mutant))
}

/// The label of a version on its own: "v2", or "draft" (see [`label_in`]).
pub fn label(v: &PacketVersion) -> String {
    match (v.state, v.version) {
        (VersionState::Published, Some(n)) => format!("v{n}"),
        _ => "draft".to_string(),
    }
}

/// The label of a version among its packet's versions, one scheme
/// everywhere: "v2", or "draft of v3" for a draft (the number it gets when
/// published), never a database id.
pub fn label_in(v: &PacketVersion, versions: &[PacketVersion]) -> String {
    match (v.state, v.version) {
        (VersionState::Published, Some(n)) => format!("v{n}"),
        _ => format!(
            "draft of v{}",
            versions.iter().filter_map(|o| o.version).max().unwrap_or(0) + 1
        ),
    }
}

/// [`label_in`], reading the packet's versions.
pub async fn label_of(state: &AppState, v: &PacketVersion) -> Result<String, AppError> {
    Ok(label_in(v, &state.db.versions_of(v.packet_id).await?))
}

/// Self-test details stored before they were written in words say how a
/// command ended as Rust debug text (`Code(1)`, `Signal(9)`): read them as
/// "exit code 1", "killed by signal 9".
pub fn readable_exit(detail: &str) -> String {
    let mut out = String::with_capacity(detail.len());
    let mut rest = detail;
    'scan: while !rest.is_empty() {
        for (word, say) in [("Code(", "exit code "), ("Signal(", "killed by signal ")] {
            let after_word = out.chars().last().is_none_or(|c| !c.is_alphanumeric() && c != '_');
            if after_word && let Some(tail) = rest.strip_prefix(word) {
                let digits: String =
                    tail.chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
                if !digits.is_empty() && tail[digits.len()..].starts_with(')') {
                    out.push_str(say);
                    out.push_str(&digits);
                    rest = &tail[digits.len() + 1..];
                    continue 'scan;
                }
            }
        }
        let c = rest.chars().next().expect("not empty");
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// A version's self-test state as shown: "running" while a check runs,
/// "queued" while one waits (also over an earlier result), else the last
/// result or "not run".
async fn check_state(state: &AppState, v: &PacketVersion) -> Result<String, AppError> {
    let jobs = state.db.jobs_for(JobKind::Check, &v.id.to_string()).await?;
    if v.check_state == "running" || jobs.iter().any(|j| j.state == JobState::Running) {
        return Ok("running".into());
    }
    if jobs.iter().any(|j| j.state == JobState::Queued) {
        return Ok("queued".into());
    }
    Ok(if v.check_state == "none" { "not run".into() } else { v.check_state.clone() })
}

/// `GET /packets/{slug}/versions/{id}/check/status`: `{"state"}` of the
/// version's self-test, which its page follows live.
async fn check_status(
    State(state): State<AppState>,
    _signed_in: SignedIn,
    Path((slug, id)): Path<(String, i64)>,
) -> Result<Response, AppError> {
    let (_, version, _) = find_version(&state, &slug, Some(id)).await?;
    Ok(axum::Json(serde_json::json!({ "state": check_state(&state, &version).await? }))
        .into_response())
}

async fn list(State(state): State<AppState>, signed_in: SignedIn) -> Result<Response, AppError> {
    let mut rows = Vec::new();
    for p in state.db.list_packets().await? {
        let versions = state.db.versions_of(p.id).await?;
        let newest_published = versions
            .iter()
            .filter(|v| v.state == VersionState::Published)
            .max_by_key(|v| v.version);
        let draft = versions.iter().find(|v| v.state == VersionState::Draft);
        let shown = versions.first();
        let check = match shown {
            Some(v) => check_state(&state, v).await?,
            None => "not run".into(),
        };
        rows.push(PacketListRow {
            slug: p.slug.clone(),
            title: p.title.clone(),
            newest: newest_published.map(label).unwrap_or_else(|| "none".into()),
            draft: draft.map(|d| d.id),
            draft_label: draft.map(|d| label_in(d, &versions)).unwrap_or_default(),
            check,
            builtin: p.builtin,
        });
    }
    let vm = PacketListView {
        csrf: signed_in.csrf.clone(),
        can_import: signed_in.user.role >= Role::Author,
        packets: rows,
    };
    let flash = take_flash(&signed_in.session).await;
    Ok(render(
        page_meta(&state, Some(&signed_in), "Packets", flash),
        move || view! { <PacketListPage vm=vm /> },
    )
    .into_response())
}

#[derive(Deserialize)]
struct VersionQuery {
    version: Option<i64>,
    /// The audit to show (default: the newest).
    audit: Option<i64>,
}

/// The version of `slug` a page or action is about.
async fn find_version(
    state: &AppState,
    slug: &str,
    id: Option<i64>,
) -> Result<(crate::db::PacketRow, PacketVersion, Vec<PacketVersion>), AppError> {
    let packet = state
        .db
        .packet_by_slug(slug)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("packet {slug:?}")))?;
    let versions = state.db.versions_of(packet.id).await?;
    let version = match id {
        Some(id) => versions
            .iter()
            .find(|v| v.id == id)
            .cloned()
            .ok_or_else(|| AppError::NotFound(format!("version {id} of packet {slug:?}")))?,
        None => versions
            .iter()
            .filter(|v| v.state == VersionState::Published)
            .max_by_key(|v| v.version)
            .or_else(|| versions.first())
            .cloned()
            .ok_or_else(|| AppError::NotFound(format!("a version of packet {slug:?}")))?,
    };
    Ok((packet, version, versions))
}

async fn detail(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(slug): Path<String>,
    Query(q): Query<VersionQuery>,
) -> Result<Response, AppError> {
    let (packet, version, versions) = find_version(&state, &slug, q.version).await?;
    let dir = library::version_dir(&state, &version.dir);
    let d = dir.clone();
    let loaded = tokio::task::spawn_blocking(move || (Packet::load(&d), list_paths(&d)))
        .await
        .map_err(|e| AppError::Internal(e.into()))?;
    let mut vm = PacketDetailView {
        csrf: signed_in.csrf.clone(),
        slug: packet.slug.clone(),
        title: packet.title.clone(),
        version_id: version.id,
        label: label_in(&version, &versions),
        is_draft: version.state == VersionState::Draft,
        can_edit: signed_in.user.role >= Role::Author,
        versions: versions
            .iter()
            .map(|v| VersionLink {
                id: v.id,
                label: label_in(v, &versions),
                current: v.id == version.id,
            })
            .collect(),
        check_state: check_state(&state, &version).await?,
        check_status_url: None,
        publish_pending: state.db.publish_request(version.id).await?.is_some(),
        can_invite: signed_in.user.role >= Role::Author
            && versions.iter().any(|v| v.state == VersionState::Published),
        ..PacketDetailView::default()
    };
    if vm.check_state == "queued" || vm.check_state == "running" {
        vm.check_status_url =
            Some(format!("/packets/{}/versions/{}/check/status", packet.slug, version.id));
    }
    if let Some(json) = &version.check_report
        && let Ok(report) = serde_json::from_str::<CheckReport>(json)
    {
        vm.check_items = report
            .items
            .iter()
            .map(|i| CheckItemView {
                name: i.name.clone(),
                status: if i.ok {
                    "ok"
                } else if i.warning {
                    "warning"
                } else {
                    "failed"
                }
                .into(),
                detail: readable_exit(&i.detail),
            })
            .collect();
    }
    let (packet_loaded, paths) = loaded;
    match packet_loaded {
        Ok(p) => {
            let m = &p.manifest;
            vm.title = m.packet.title.clone();
            vm.summary = m.packet.summary.trim().to_string();
            vm.prompt_text = p.prompt().unwrap_or_default();
            vm.prompt_html = crate::web::page::markdown_below(&vm.prompt_text, &vm.title);
            vm.criteria = m
                .criteria
                .iter()
                .enumerate()
                .map(|(index, c)| CriterionView {
                    index,
                    id: c.id.clone(),
                    title: c.title.clone(),
                    max: c.max,
                    mode: serde_json::to_value(c.mode)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                    levels: c.levels.clone(),
                })
                .collect();
            vm.failures = m
                .failures
                .iter()
                .enumerate()
                .map(|(index, f)| FailureView {
                    index,
                    id: f.id.clone(),
                    title: f.title.clone(),
                    description: f.description.trim().to_string(),
                    effect: f
                        .effect
                        .list()
                        .iter()
                        .map(|e| match (e.set, e.minus) {
                            (Some(s), _) => format!("{} = {s}", e.criterion),
                            (None, Some(n)) => format!("{} − {n}", e.criterion),
                            _ => e.criterion.clone(),
                        })
                        .collect::<Vec<_>>()
                        .join(", "),
                })
                .collect();
            vm.budgets = BUDGETS
                .iter()
                .map(|b| BudgetView { name: b.to_string(), value: m.budgets.get(b) })
                .collect();
        }
        Err(e) => vm.load_error = Some(library::describe_packet_error(&e, &dir)),
    }
    let kept: Vec<String> = paths
        .iter()
        .filter_map(|p| {
            p.strip_prefix("mutants/audit/")
                .or_else(|| p.strip_prefix("mutants/"))
                .and_then(|f| f.strip_suffix(".diff"))
                .map(str::to_string)
        })
        .collect();
    vm.files = group_files(paths);
    let audits = state.db.packet_audits_of(version.id, 50).await?;
    let shown = match q.audit {
        Some(id) => Some(
            audits
                .iter()
                .find(|a| a.id == id)
                .ok_or_else(|| AppError::NotFound(format!("audit {id} of this version")))?,
        ),
        None => audits.first(),
    };
    vm.audits = audits
        .iter()
        .map(|a| AuditLink {
            id: a.id,
            label: format!("#{} {} ({})", a.id, a.mode, a.state),
            current: shown.is_some_and(|s| s.id == a.id),
        })
        .collect();
    if let Some(a) = shown {
        let editable = vm.can_edit && vm.is_draft;
        vm.audit = Some(audit_view(&state, &packet.slug, a, editable, &kept).await?);
    }
    vm.audit_model = state.config.model_upstream(&packet.slug).is_some();
    vm.audit_max_calls = state.config.audit_max_calls;
    vm.audit_max_tokens = state.config.audit_max_tokens;
    let flash = take_flash(&signed_in.session).await;
    let title = format!("{} {}", packet.slug, vm.label);
    Ok(render(
        page_meta(&state, Some(&signed_in), &title, flash),
        move || view! { <PacketDetailPage vm=vm /> },
    )
    .into_response())
}

/// An audit as the packet page shows it: its report and its author ledger.
async fn audit_view(
    state: &AppState,
    slug: &str,
    a: &crate::db::PacketAudit,
    editable: bool,
    kept: &[String],
) -> Result<AuditView, AppError> {
    let when = |ms: Option<i64>| ms.map(crate::times::utc).unwrap_or_default();
    let mut asked = format!("{} per definition", a.mutants);
    if !a.functions.is_empty() {
        asked.push_str(&format!(" of {}", a.functions));
    }
    if a.mode == "model" {
        asked.push_str(&format!(
            "; model {}, at most {} calls and {} tokens",
            a.model, a.max_calls, a.max_tokens
        ));
    }
    let mut v = AuditView {
        id: a.id,
        state: a.state.to_string(),
        status_url: format!("/packets/{slug}/versions/{}/audits/{}/status", a.version_id, a.id),
        mode: a.mode.clone(),
        asked,
        requested: crate::times::utc(a.created_at),
        finished: when(a.finished_at),
        error: a.error.clone(),
        ..AuditView::default()
    };
    if let Some(report) = a
        .report_json
        .as_deref()
        .and_then(|j| serde_json::from_str::<grader::audit::AuditReport>(j).ok())
    {
        v.target = report.target.clone();
        v.steps = report.steps.join(", ");
        let c = report.counts;
        (v.killed, v.survived, v.explained, v.crashed, v.invalid) =
            (c.killed, c.survived, c.explained, c.crashed, c.invalid);
        v.mutants = report
            .mutants
            .iter()
            .map(|m| {
                let alive = matches!(
                    m.outcome,
                    grader::audit::Outcome::Killed
                        | grader::audit::Outcome::Survived
                        | grader::audit::Outcome::Explained
                );
                let kept = kept.contains(&m.id);
                AuditMutantView {
                    id: m.id.clone(),
                    fault: m.fault.clone(),
                    outcome: m.outcome.word().to_string(),
                    reason: m.reason.clone(),
                    diff: m.diff.clone(),
                    killed_by: m.killed_by.clone(),
                    keepable: editable && alive && !kept,
                    kept,
                }
            })
            .collect();
        v.errors = report.errors.clone();
        v.warnings = report.warnings.clone();
    }
    v.calls = state
        .db
        .audit_calls(a.id)
        .await?
        .into_iter()
        .map(|c| AuditCallView {
            n: c.n,
            function: c.function,
            model: c.model,
            outcome: c.outcome,
            status: c.status.map(|s| s.to_string()).unwrap_or_else(|| "—".into()),
            prompt_tokens: c.prompt_tokens,
            completion_tokens: c.completion_tokens,
            tokens_estimated: c.tokens_estimated,
            request_bytes: c.request_bytes,
            response_bytes: c.response_bytes,
            started: crate::times::utc(c.started_at),
            ended: crate::times::utc(c.ended_at),
            error: c.error.unwrap_or_default(),
        })
        .collect();
    Ok(v)
}

/// Groups a packet's files by their top folder, the packet's own files first.
fn group_files(paths: Vec<String>) -> Vec<FileGroup> {
    let names = |top: &str| match top {
        "starter" => "starter (what the candidate gets)".to_string(),
        "hidden" => "hidden tests and fixtures".to_string(),
        "sample" => "sample solution".to_string(),
        "variants" => "known-bad variants".to_string(),
        "mutants" => "mutants".to_string(),
        "detectors" => "detector scripts".to_string(),
        other => other.to_string(),
    };
    let mut groups: Vec<FileGroup> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for p in paths {
        let top = match p.split_once('/') {
            Some((top, _)) => top.to_string(),
            None => "packet".to_string(),
        };
        let i = *index.entry(top.clone()).or_insert_with(|| {
            groups.push(FileGroup { name: names(&top), files: Vec::new() });
            groups.len() - 1
        });
        groups[i].files.push(p);
    }
    groups
}

async fn import(
    State(state): State<AppState>,
    signed_in: SignedIn,
    mut multipart: Multipart,
) -> Result<Response, AppError> {
    signed_in.require(Role::Author)?;
    let tmp = tempfile::NamedTempFile::new_in(std::env::temp_dir())
        .map_err(|e| AppError::Internal(e.into()))?;
    let mut csrf = None;
    let mut got_file = false;
    let limit = state.config.max_upload_bytes();
    while let Some(mut field) = multipart
        .next_field()
        .await
        .map_err(|e| AppError::BadRequest(format!("the upload could not be read: {e}")))?
    {
        match field.name() {
            Some("csrf") => {
                csrf = Some(field.text().await.map_err(|e| AppError::BadRequest(e.to_string()))?)
            }
            Some("file") => {
                let mut out = tokio::fs::File::create(tmp.path())
                    .await
                    .map_err(|e| AppError::Internal(e.into()))?;
                let mut written = 0u64;
                while let Some(chunk) = field.chunk().await.map_err(|e| {
                    AppError::BadRequest(format!("the upload could not be read: {e}"))
                })? {
                    written += chunk.len() as u64;
                    if written > limit {
                        return Err(AppError::TooLarge(format!(
                            "the zip is larger than the {} MiB limit",
                            state.config.max_upload_mb
                        )));
                    }
                    out.write_all(&chunk).await.map_err(|e| AppError::Internal(e.into()))?;
                }
                out.flush().await.map_err(|e| AppError::Internal(e.into()))?;
                got_file = written > 0;
            }
            _ => {}
        }
    }
    signed_in.verify_csrf(csrf.as_deref()).await?;
    if !got_file {
        return Err(AppError::BadRequest(
            "choose a zip of a packet folder to import (the file field was empty)".into(),
        ));
    }
    let version = library::import_zip(&state, tmp.path(), Some(signed_in.user.id)).await?;
    set_flash(
        &signed_in.session,
        format!("Imported {} as a {}.", version.slug, label_of(&state, &version).await?),
    )
    .await;
    Ok(Redirect::to(&format!("/packets/{}?version={}", version.slug, version.id)).into_response())
}

/// Checks role and CSRF, then finds the version an action is about.
async fn action_target(
    state: &AppState,
    signed_in: &SignedIn,
    csrf: &str,
    slug: &str,
    id: i64,
) -> Result<PacketVersion, AppError> {
    signed_in.require(Role::Author)?;
    signed_in.verify_csrf(Some(csrf)).await?;
    let (_, version, _) = find_version(state, slug, Some(id)).await?;
    Ok(version)
}

fn back_to(v: &PacketVersion) -> Response {
    Redirect::to(&format!("/packets/{}?version={}", v.slug, v.id)).into_response()
}

/// Applies `edit` to the draft `v`, says `done` on the next page, and goes
/// back to the draft.
async fn save_edit(
    state: &AppState,
    signed_in: &SignedIn,
    v: &PacketVersion,
    edit: DraftEdit,
    done: impl Into<String>,
) -> Result<Response, AppError> {
    library::edit_draft(state, v, edit, Some(signed_in.user.id)).await?;
    set_flash(&signed_in.session, done).await;
    Ok(back_to(v))
}

async fn publish(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path((slug, id)): Path<(String, i64)>,
    Form(f): Form<CsrfForm>,
) -> Result<Response, AppError> {
    let v = action_target(&state, &signed_in, &f.csrf, &slug, id).await?;
    library::request_publish(&state, &v, Some(signed_in.user.id)).await?;
    set_flash(
        &signed_in.session,
        "Publish requested: the self-test is queued, and the draft is published when it passes.",
    )
    .await;
    Ok(back_to(&v))
}

async fn run_check(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path((slug, id)): Path<(String, i64)>,
    Form(f): Form<CsrfForm>,
) -> Result<Response, AppError> {
    let v = action_target(&state, &signed_in, &f.csrf, &slug, id).await?;
    let job = library::enqueue_check(&state, v.id).await?;
    state
        .db
        .audit(
            &format!("user:{}", signed_in.user.id),
            "packet.check",
            &format!("packet:{slug}"),
            &format!("version id {} (job {job})", v.id),
        )
        .await?;
    set_flash(&signed_in.session, "Self-test queued.").await;
    Ok(back_to(&v))
}

async fn new_draft(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path((slug, id)): Path<(String, i64)>,
    Form(f): Form<CsrfForm>,
) -> Result<Response, AppError> {
    let v = action_target(&state, &signed_in, &f.csrf, &slug, id).await?;
    let draft = library::new_draft_from(&state, &v, Some(signed_in.user.id)).await?;
    set_flash(
        &signed_in.session,
        format!("Made a {} from {}.", label_of(&state, &draft).await?, label(&v)),
    )
    .await;
    Ok(back_to(&draft))
}

#[derive(Deserialize)]
struct PromptForm {
    #[serde(default)]
    csrf: String,
    prompt: String,
}

async fn edit_prompt(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path((slug, id)): Path<(String, i64)>,
    Form(f): Form<PromptForm>,
) -> Result<Response, AppError> {
    let v = action_target(&state, &signed_in, &f.csrf, &slug, id).await?;
    save_edit(&state, &signed_in, &v, DraftEdit::Prompt(f.prompt), "Prompt saved.").await
}

async fn edit_budgets(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path((slug, id)): Path<(String, i64)>,
    Form(f): Form<HashMap<String, String>>,
) -> Result<Response, AppError> {
    let v = action_target(
        &state,
        &signed_in,
        f.get("csrf").map(String::as_str).unwrap_or(""),
        &slug,
        id,
    )
    .await?;
    let mut values = Vec::new();
    for name in BUDGETS {
        let Some(raw) = f.get(name) else { continue };
        let raw = raw.trim();
        let value = if raw.is_empty() {
            None
        } else {
            Some(raw.parse::<u64>().map_err(|_| {
                AppError::BadRequest(format!("budget {name}: {raw:?} is not a whole number"))
            })?)
        };
        values.push((name.to_string(), value));
    }
    save_edit(&state, &signed_in, &v, DraftEdit::Budgets(values), "Budgets saved.").await
}

#[derive(Deserialize)]
struct CriterionForm {
    #[serde(default)]
    csrf: String,
    title: String,
    max: u32,
    levels: String,
}

async fn edit_criterion(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path((slug, id, index)): Path<(String, i64, usize)>,
    Form(f): Form<CriterionForm>,
) -> Result<Response, AppError> {
    let v = action_target(&state, &signed_in, &f.csrf, &slug, id).await?;
    let levels: Vec<String> =
        f.levels.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect();
    save_edit(
        &state,
        &signed_in,
        &v,
        DraftEdit::Criterion { index, title: f.title, max: f.max, levels },
        format!("Rubric row #{} saved.", index + 1),
    )
    .await
}

#[derive(Deserialize)]
struct FailureForm {
    #[serde(default)]
    csrf: String,
    title: String,
    description: String,
}

async fn edit_failure(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path((slug, id, index)): Path<(String, i64, usize)>,
    Form(f): Form<FailureForm>,
) -> Result<Response, AppError> {
    let v = action_target(&state, &signed_in, &f.csrf, &slug, id).await?;
    save_edit(
        &state,
        &signed_in,
        &v,
        DraftEdit::Failure { index, title: f.title, description: f.description },
        format!("Failure catalog entry #{} saved.", index + 1),
    )
    .await
}

#[derive(Deserialize)]
struct AuditForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    mode: String,
    #[serde(default)]
    mutants: String,
    #[serde(default)]
    functions: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    max_calls: String,
    #[serde(default)]
    max_tokens: String,
}

/// Reads a whole-number field of the audit form within `lo..=hi`; empty is `default`.
fn audit_number(name: &str, raw: &str, lo: i64, hi: i64, default: i64) -> Result<i64, AppError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(default);
    }
    match raw.parse::<i64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(AppError::BadRequest(format!(
            "{name}: {raw:?} must be a whole number from {lo} to {hi}"
        ))),
    }
}

/// "Audit the hidden tests": queues an `audit` job of the version.
async fn start_audit(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path((slug, id)): Path<(String, i64)>,
    Form(f): Form<AuditForm>,
) -> Result<Response, AppError> {
    let v = action_target(&state, &signed_in, &f.csrf, &slug, id).await?;
    let mode = match f.mode.trim() {
        "" | "rules" => "rules",
        "model" => "model",
        other => {
            return Err(AppError::BadRequest(format!(
                "mode {other:?}: an audit's mutants come from \"rules\" or a \"model\""
            )));
        }
    };
    let mutants = audit_number("mutants", &f.mutants, 1, 50, 8)?;
    let names: Vec<&str> = f
        .functions
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|n| !n.is_empty())
        .collect();
    if names.len() > 50 {
        return Err(AppError::BadRequest(format!("functions: {} names, at most 50", names.len())));
    }
    if let Some(bad) = names.iter().find(|n| {
        n.starts_with(|c: char| c.is_ascii_digit())
            || !n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    }) {
        return Err(AppError::BadRequest(format!(
            "functions: {bad:?} is not the name of a Python function or class"
        )));
    }
    let (model, max_calls, max_tokens) = if mode == "model" {
        if state.config.model_upstream(&slug).is_none() {
            return Err(AppError::BadRequest(format!(
                "no model upstream is configured for {slug} (model_upstreams.{slug} or model_upstream_url); audit with rules instead"
            )));
        }
        let model = f.model.trim();
        let model = if model.is_empty() { "default" } else { model };
        if model.len() > 200 || model.chars().any(char::is_control) {
            return Err(AppError::BadRequest(
                "model: a model name is at most 200 characters, with no control characters".into(),
            ));
        }
        let cap_calls = state.config.audit_max_calls as i64;
        let cap_tokens = state.config.audit_max_tokens;
        (
            model.to_string(),
            audit_number("max_calls", &f.max_calls, 1, cap_calls, cap_calls)?,
            audit_number("max_tokens", &f.max_tokens, 1, cap_tokens, cap_tokens)?,
        )
    } else {
        (String::new(), 0, 0)
    };
    if state.db.packet_audits_of(v.id, 50).await?.iter().any(|a| a.state.is_pending()) {
        return Err(AppError::Conflict(
            "an audit of this version is already queued or running; wait for it to finish".into(),
        ));
    }
    let functions = names.join(" ");
    let new = crate::db::NewPacketAudit {
        version_id: v.id,
        requested_by: Some(signed_in.user.id),
        mode,
        functions: &functions,
        mutants,
        model: &model,
        max_calls,
        max_tokens,
        digest: &v.digest,
    };
    let (audit, job) = state.db.queue_packet_audit(new).await?;
    state.wake_workers();
    state
        .db
        .audit(
            &format!("user:{}", signed_in.user.id),
            "packet.audit-request",
            &format!("packet:{slug}"),
            &format!("audit {audit} of version id {} ({mode}, job {job})", v.id),
        )
        .await?;
    set_flash(
        &signed_in.session,
        "Audit queued: the hidden tests run against each mutant in the sandbox.",
    )
    .await;
    Ok(Redirect::to(&format!("/packets/{}?version={}&audit={audit}", v.slug, v.id)).into_response())
}

/// The audit's state for the live status: `{"state", "counts", "error"}`.
async fn audit_status(
    State(state): State<AppState>,
    _signed_in: SignedIn,
    Path((slug, id, audit)): Path<(String, i64, i64)>,
) -> Result<Response, AppError> {
    let (_, v, _) = find_version(&state, &slug, Some(id)).await?;
    let a = state
        .db
        .packet_audit(audit)
        .await?
        .filter(|a| a.version_id == v.id)
        .ok_or_else(|| AppError::NotFound(format!("audit {audit} of this version")))?;
    let counts = a
        .report_json
        .as_deref()
        .and_then(|j| serde_json::from_str::<grader::audit::AuditReport>(j).ok())
        .map(|r| r.counts);
    Ok(axum::Json(serde_json::json!({ "state": a.state, "counts": counts, "error": a.error }))
        .into_response())
}

#[derive(Deserialize)]
struct KeepForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    mutant: String,
}

/// Keeps a killed or survived mutant of an audit as `mutants/<id>.diff` of the draft.
async fn keep_mutant(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path((slug, id, audit)): Path<(String, i64, i64)>,
    Form(f): Form<KeepForm>,
) -> Result<Response, AppError> {
    let v = action_target(&state, &signed_in, &f.csrf, &slug, id).await?;
    let a = state
        .db
        .packet_audit(audit)
        .await?
        .filter(|a| a.version_id == v.id)
        .ok_or_else(|| AppError::NotFound(format!("audit {audit} of this version")))?;
    let report = a
        .report_json
        .as_deref()
        .and_then(|j| serde_json::from_str::<grader::audit::AuditReport>(j).ok())
        .ok_or_else(|| {
            AppError::Conflict(format!("audit {audit} has no result yet ({})", a.state))
        })?;
    let mutant = f.mutant.trim().to_string();
    library::edit_draft(
        &state,
        &v,
        DraftEdit::KeepMutant { id: mutant.clone(), report: Box::new(report) },
        Some(signed_in.user.id),
    )
    .await?;
    set_flash(&signed_in.session, format!("Kept {mutant} as mutants/{mutant}.diff: the self-test now requires the hidden tests to kill it.")).await;
    Ok(Redirect::to(&format!("/packets/{}?version={}&audit={audit}", v.slug, v.id)).into_response())
}

#[cfg(test)]
mod tests {
    #[test]
    fn debug_exits_read_as_words() {
        assert_eq!(
            super::readable_exit("`pytest -q`: Code(1)\n1 failed"),
            "`pytest -q`: exit code 1\n1 failed"
        );
        assert_eq!(super::readable_exit("Signal(9)"), "killed by signal 9");
        assert_eq!(
            super::readable_exit("exit code 0; NoCode(3), Code(x)"),
            "exit code 0; NoCode(3), Code(x)"
        );
    }
}
