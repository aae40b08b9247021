//! The packet library pages: list, detail, import, the draft editor,
//! self-test and publish. Every signed-in user may read; authors change.

use std::collections::HashMap;

use axum::extract::{DefaultBodyLimit, Multipart, Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Form;
use grader::check::CheckReport;
use grader::packet::Packet;
use grader::tree::list_paths;
use leptos::prelude::*;
use serde::Deserialize;
use tokio::io::AsyncWriteExt;

use app::pages::library::{
    BudgetView, CheckItemView, CriterionView, FailureView, FileGroup, PacketDetailPage, PacketDetailView, PacketListPage, PacketListRow,
    PacketListView, VersionLink,
};

use crate::db::{PacketVersion, Role, VersionState};
use crate::error::AppError;
use crate::library::{self, BUDGETS, DraftEdit};
use crate::state::AppState;
use crate::web::page::markdown;
use crate::web::auth::{page_meta, render, set_flash, take_flash};
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
        _ => format!("draft of v{}", versions.iter().filter_map(|o| o.version).max().unwrap_or(0) + 1),
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
                let digits: String = tail.chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
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
    let jobs = state.db.jobs_for("check", &v.id.to_string()).await?;
    if v.check_state == "running" || jobs.iter().any(|j| j.state == "running") {
        return Ok("running".into());
    }
    if jobs.iter().any(|j| j.state == "queued") {
        return Ok("queued".into());
    }
    Ok(if v.check_state == "none" { "not run".into() } else { v.check_state.clone() })
}

/// `GET /packets/{slug}/versions/{id}/check/status`: `{"state"}` of the
/// version's self-test, which its page follows live.
async fn check_status(State(state): State<AppState>, _signed_in: SignedIn, Path((slug, id)): Path<(String, i64)>) -> Result<Response, AppError> {
    let (_, version, _) = find_version(&state, &slug, Some(id)).await?;
    Ok(axum::Json(serde_json::json!({ "state": check_state(&state, &version).await? })).into_response())
}

async fn list(State(state): State<AppState>, signed_in: SignedIn) -> Result<Response, AppError> {
    let mut rows = Vec::new();
    for p in state.db.list_packets().await? {
        let versions = state.db.versions_of(p.id).await?;
        let newest_published = versions.iter().filter(|v| v.state == VersionState::Published).max_by_key(|v| v.version);
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
    let vm = PacketListView { csrf: signed_in.csrf.clone(), can_import: signed_in.user.role >= Role::Author, packets: rows };
    let flash = take_flash(&signed_in.session).await;
    Ok(render(page_meta(&state, Some(&signed_in), "Packets", flash), move || view! { <PacketListPage vm=vm /> }).into_response())
}

#[derive(Deserialize)]
struct VersionQuery {
    version: Option<i64>,
}

/// The version of `slug` a page or action is about.
async fn find_version(state: &AppState, slug: &str, id: Option<i64>) -> Result<(crate::db::PacketRow, PacketVersion, Vec<PacketVersion>), AppError> {
    let packet = state.db.packet_by_slug(slug).await?.ok_or_else(|| AppError::NotFound(format!("packet {slug:?}")))?;
    let versions = state.db.versions_of(packet.id).await?;
    let version = match id {
        Some(id) => versions.iter().find(|v| v.id == id).cloned().ok_or_else(|| AppError::NotFound(format!("version {id} of packet {slug:?}")))?,
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

async fn detail(State(state): State<AppState>, signed_in: SignedIn, Path(slug): Path<String>, Query(q): Query<VersionQuery>) -> Result<Response, AppError> {
    let (packet, version, versions) = find_version(&state, &slug, q.version).await?;
    let dir = library::version_dir(&state, &version.dir);
    let d = dir.clone();
    let loaded = tokio::task::spawn_blocking(move || (Packet::load(&d), list_paths(&d))).await.map_err(|e| AppError::Internal(e.into()))?;
    let mut vm = PacketDetailView {
        csrf: signed_in.csrf.clone(),
        slug: packet.slug.clone(),
        title: packet.title.clone(),
        version_id: version.id,
        label: label_in(&version, &versions),
        is_draft: version.state == VersionState::Draft,
        can_edit: signed_in.user.role >= Role::Author,
        versions: versions.iter().map(|v| VersionLink { id: v.id, label: label_in(v, &versions), current: v.id == version.id }).collect(),
        check_state: check_state(&state, &version).await?,
        check_status_url: None,
        publish_pending: state.db.publish_request(version.id).await?.is_some(),
        can_invite: signed_in.user.role >= Role::Author && versions.iter().any(|v| v.state == VersionState::Published),
        ..PacketDetailView::default()
    };
    if vm.check_state == "queued" || vm.check_state == "running" {
        vm.check_status_url = Some(format!("/packets/{}/versions/{}/check/status", packet.slug, version.id));
    }
    if let Some(json) = &version.check_report
        && let Ok(report) = serde_json::from_str::<CheckReport>(json)
    {
        vm.check_items = report
            .items
            .iter()
            .map(|i| CheckItemView {
                name: i.name.clone(),
                status: if i.ok { "ok" } else if i.warning { "warning" } else { "failed" }.into(),
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
            vm.prompt_html = markdown(&vm.prompt_text);
            vm.criteria = m
                .criteria
                .iter()
                .enumerate()
                .map(|(index, c)| CriterionView {
                    index,
                    id: c.id.clone(),
                    title: c.title.clone(),
                    max: c.max,
                    mode: serde_json::to_value(c.mode).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
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
            vm.budgets = BUDGETS.iter().map(|b| BudgetView { name: b.to_string(), value: m.budgets.get(b) }).collect();
        }
        Err(e) => vm.load_error = Some(library::describe_packet_error(&e, &dir)),
    }
    vm.files = group_files(paths);
    let flash = take_flash(&signed_in.session).await;
    let title = format!("{} {}", packet.slug, vm.label);
    Ok(render(page_meta(&state, Some(&signed_in), &title, flash), move || view! { <PacketDetailPage vm=vm /> }).into_response())
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

async fn import(State(state): State<AppState>, signed_in: SignedIn, mut multipart: Multipart) -> Result<Response, AppError> {
    signed_in.require(Role::Author)?;
    let tmp = tempfile::NamedTempFile::new_in(std::env::temp_dir()).map_err(|e| AppError::Internal(e.into()))?;
    let mut csrf = None;
    let mut got_file = false;
    let limit = state.config.max_upload_bytes();
    while let Some(mut field) = multipart.next_field().await.map_err(|e| AppError::BadRequest(format!("the upload could not be read: {e}")))? {
        match field.name() {
            Some("csrf") => csrf = Some(field.text().await.map_err(|e| AppError::BadRequest(e.to_string()))?),
            Some("file") => {
                let mut out = tokio::fs::File::create(tmp.path()).await.map_err(|e| AppError::Internal(e.into()))?;
                let mut written = 0u64;
                while let Some(chunk) = field.chunk().await.map_err(|e| AppError::BadRequest(format!("the upload could not be read: {e}")))? {
                    written += chunk.len() as u64;
                    if written > limit {
                        return Err(AppError::TooLarge(format!("the zip is larger than the {} MiB limit", state.config.max_upload_mb)));
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
        return Err(AppError::BadRequest("choose a zip of a packet folder to import (the file field was empty)".into()));
    }
    let version = library::import_zip(&state, tmp.path(), Some(signed_in.user.id)).await?;
    set_flash(&signed_in.session, format!("Imported {} as a {}.", version.slug, label_of(&state, &version).await?)).await;
    Ok(Redirect::to(&format!("/packets/{}?version={}", version.slug, version.id)).into_response())
}

#[derive(Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

/// Checks role and CSRF, then finds the version an action is about.
async fn action_target(state: &AppState, signed_in: &SignedIn, csrf: &str, slug: &str, id: i64) -> Result<PacketVersion, AppError> {
    signed_in.require(Role::Author)?;
    signed_in.verify_csrf(Some(csrf)).await?;
    let (_, version, _) = find_version(state, slug, Some(id)).await?;
    Ok(version)
}

fn back_to(v: &PacketVersion) -> Response {
    Redirect::to(&format!("/packets/{}?version={}", v.slug, v.id)).into_response()
}

async fn publish(State(state): State<AppState>, signed_in: SignedIn, Path((slug, id)): Path<(String, i64)>, Form(f): Form<CsrfForm>) -> Result<Response, AppError> {
    let v = action_target(&state, &signed_in, &f.csrf, &slug, id).await?;
    library::request_publish(&state, &v, Some(signed_in.user.id)).await?;
    set_flash(&signed_in.session, "Publish requested: the self-test is queued, and the draft is published when it passes.").await;
    Ok(back_to(&v))
}

async fn run_check(State(state): State<AppState>, signed_in: SignedIn, Path((slug, id)): Path<(String, i64)>, Form(f): Form<CsrfForm>) -> Result<Response, AppError> {
    let v = action_target(&state, &signed_in, &f.csrf, &slug, id).await?;
    let job = library::enqueue_check(&state, v.id).await?;
    state.db.audit(&format!("user:{}", signed_in.user.id), "packet.check", &format!("packet:{slug}"), &format!("version id {} (job {job})", v.id)).await?;
    set_flash(&signed_in.session, "Self-test queued.").await;
    Ok(back_to(&v))
}

async fn new_draft(State(state): State<AppState>, signed_in: SignedIn, Path((slug, id)): Path<(String, i64)>, Form(f): Form<CsrfForm>) -> Result<Response, AppError> {
    let v = action_target(&state, &signed_in, &f.csrf, &slug, id).await?;
    let draft = library::new_draft_from(&state, &v, Some(signed_in.user.id)).await?;
    set_flash(&signed_in.session, format!("Made a {} from {}.", label_of(&state, &draft).await?, label(&v))).await;
    Ok(back_to(&draft))
}

#[derive(Deserialize)]
struct PromptForm {
    #[serde(default)]
    csrf: String,
    prompt: String,
}

async fn edit_prompt(State(state): State<AppState>, signed_in: SignedIn, Path((slug, id)): Path<(String, i64)>, Form(f): Form<PromptForm>) -> Result<Response, AppError> {
    let v = action_target(&state, &signed_in, &f.csrf, &slug, id).await?;
    library::edit_draft(&state, &v, DraftEdit::Prompt(f.prompt), Some(signed_in.user.id)).await?;
    set_flash(&signed_in.session, "Prompt saved.").await;
    Ok(back_to(&v))
}

async fn edit_budgets(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path((slug, id)): Path<(String, i64)>,
    Form(f): Form<HashMap<String, String>>,
) -> Result<Response, AppError> {
    let v = action_target(&state, &signed_in, f.get("csrf").map(String::as_str).unwrap_or(""), &slug, id).await?;
    let mut values = Vec::new();
    for name in BUDGETS {
        let Some(raw) = f.get(name) else { continue };
        let raw = raw.trim();
        let value = if raw.is_empty() {
            None
        } else {
            Some(raw.parse::<u64>().map_err(|_| AppError::BadRequest(format!("budget {name}: {raw:?} is not a whole number")))?)
        };
        values.push((name.to_string(), value));
    }
    library::edit_draft(&state, &v, DraftEdit::Budgets(values), Some(signed_in.user.id)).await?;
    set_flash(&signed_in.session, "Budgets saved.").await;
    Ok(back_to(&v))
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
    let levels: Vec<String> = f.levels.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect();
    library::edit_draft(&state, &v, DraftEdit::Criterion { index, title: f.title, max: f.max, levels }, Some(signed_in.user.id)).await?;
    set_flash(&signed_in.session, format!("Rubric row #{} saved.", index + 1)).await;
    Ok(back_to(&v))
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
    library::edit_draft(&state, &v, DraftEdit::Failure { index, title: f.title, description: f.description }, Some(signed_in.user.id)).await?;
    set_flash(&signed_in.session, format!("Failure catalog entry #{} saved.", index + 1)).await;
    Ok(back_to(&v))
}

#[cfg(test)]
mod tests {
    #[test]
    fn debug_exits_read_as_words() {
        assert_eq!(super::readable_exit("`pytest -q`: Code(1)\n1 failed"), "`pytest -q`: exit code 1\n1 failed");
        assert_eq!(super::readable_exit("Signal(9)"), "killed by signal 9");
        assert_eq!(super::readable_exit("exit code 0; NoCode(3), Code(x)"), "exit code 0; NoCode(3), Code(x)");
    }
}
