//! The candidate's side: the invite link is the only credential. Every
//! handler looks the assignment up by the hash of the link token and shows
//! only that assignment's prompt, rules, budgets, starter and submissions.

use std::path::PathBuf;

use app::contract::{CandidateStatus, ReleasedResult, SubmissionState, SubmissionStatus};
use app::pages::candidate::{
    CandidatePage, CandidateReceiptPage, CandidateReceiptView, CandidateView, GoneView, MeterBox,
    SubmissionRow,
};
use app::shell::PageMeta;
use axum::extract::multipart::MultipartRejection;
use axum::extract::{DefaultBodyLimit, Multipart, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use grader::packet::{Packet, apply_seed};
use leptos::prelude::*;
use serde_json::json;

use crate::auth::password::random_token;
use crate::blobs::BlobError;
use crate::db::{Assignment, NewSubmission, ResultsRelease, Submission};
use crate::error::AppError;
use crate::now_ms;
use crate::state::AppState;

pub fn routes() -> crate::routes::Routes {
    crate::routes::Routes::new()
        .route("/c/{token}", get(page))
        .route("/c/{token}/start", post(start))
        .route("/c/{token}/starter.zip", get(starter))
        .route("/c/{token}/submit", post(submit).layer(DefaultBodyLimit::disable()))
        .route("/c/{token}/submissions/{id}", get(receipt))
        .route("/c/{token}/submissions/{id}/status", get(status))
        .route("/c/{token}/transcript", get(transcript_page))
        .route("/c/{token}/transcript.json", get(transcript_json))
}

/// A refusal with its status; JSON `{"error"}` unless a page is rendered.
#[derive(Debug)]
pub struct Refusal {
    pub status: StatusCode,
    pub message: String,
}

impl Refusal {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Refusal {
        Refusal { status, message: message.into() }
    }

    /// An upload (a submission or a witnessed tree) over `cap` bytes.
    pub fn too_large(cap: u64) -> Refusal {
        Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the upload is larger than the limit of {} MiB", cap >> 20),
        )
    }

    /// A multipart body that broke off or was malformed (or too large).
    pub fn multipart(e: axum::extract::multipart::MultipartError, cap: u64) -> Refusal {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            return Refusal::too_large(cap);
        }
        Refusal::new(e.status(), format!("the upload was cut off or malformed: {}", e.body_text()))
    }
}

impl From<AppError> for Refusal {
    fn from(e: AppError) -> Refusal {
        if let Some(cause) = e.internal_cause() {
            tracing::error!(error = ?cause, "internal error");
        }
        Refusal { status: e.status(), message: e.public_message() }
    }
}

impl From<sqlx::Error> for Refusal {
    fn from(e: sqlx::Error) -> Refusal {
        AppError::from(e).into()
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        (self.status, axum::Json(ApiError { error: self.message })).into_response()
    }
}

/// A zip uploaded as multipart field `file`.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // The schema of the multipart body, read as a stream.
pub struct ZipUpload {
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
}

/// A refusal's JSON: what was wrong, in a sentence (nothing else).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiError {
    pub error: String,
}

/// Whether the client asked for JSON.
pub fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/json"))
}

pub use crate::assignment::by_token as assignment_for;
use crate::assignment::duration as fmt_duration;
/// A UTC time for people: `2026-11-29 10:31 UTC`.
pub use crate::times::utc as fmt_time;

/// The frame of a candidate page: no account, no navigation.
fn meta(state: &AppState, title: &str) -> PageMeta {
    crate::web::page::candidate_meta(state, title)
}

/// The time box in seconds: the assignment's own, else the packet's.
fn time_box_secs(a: &Assignment, packet: Option<&Packet>) -> Option<i64> {
    crate::assignment::time_box_secs(a, packet.and_then(|p| p.manifest.budgets.time_box_minutes))
}

/// Why a submission would be refused now, as a refusal with its status.
pub fn closed_reason(a: &Assignment, time_box: Option<i64>, now: i64) -> Option<Refusal> {
    crate::assignment::closed(a, time_box, now).map(|c| Refusal::new(c.status(), c.message()))
}

/// The packet of an assignment (loaded once per version and app).
pub(crate) async fn load_packet(
    state: &AppState,
    a: &Assignment,
) -> Result<std::sync::Arc<Packet>, AppError> {
    crate::library::packet_of(state, a.packet_version_id).await
}

pub(crate) fn gone_page(state: &AppState, a: &Assignment, token: &str) -> Response {
    let message = crate::assignment::expired_message(a.deadline);
    let download = format!("/c/{token}/my-data.zip");
    let html = app::shell::document(
        meta(state, "Link expired"),
        move || view! { <GoneView message=message download=download /> },
    );
    (StatusCode::GONE, Html(html)).into_response()
}

/// The page of a 410 refusal: the erased-data page when the candidate was
/// erased (while the request came in), else the expired-link page.
pub(crate) async fn gone_refusal_page(
    state: &AppState,
    a: &Assignment,
    token: &str,
    r: Refusal,
) -> Result<Response, Refusal> {
    if state.db.erasure_of(&a.id).await?.is_some() {
        return Ok(erased_page(state, r.message));
    }
    Ok(gone_page(state, a, token))
}

/// The page of a link whose candidate's data was erased.
fn erased_page(state: &AppState, message: String) -> Response {
    let html = app::shell::document(
        meta(state, "Data erased"),
        move || view! { <app::pages::candidate::ErasedView message=message /> },
    );
    (StatusCode::GONE, Html(html)).into_response()
}

fn budgets_of(packet: &Packet) -> Vec<(String, String)> {
    let b = &packet.manifest.budgets;
    let mut out = Vec::new();
    let mut push = |name: &str, v: Option<u64>, unit: &str| {
        if let Some(v) = v {
            out.push((name.to_string(), format!("{v}{unit}")));
        }
    };
    push("Model calls", b.model_calls, "");
    push("Tokens", b.tokens, "");
    push("Tool calls", b.tool_calls, "");
    push("Wall clock", b.wall_clock_secs, " s");
    push("Time box", b.time_box_minutes, " min");
    push("Request size", b.request_bytes, " bytes");
    out
}

/// Whether the meter's cap label and the budget's name are the same budget
/// ("Request bytes" is the meter's "Request size").
fn same_budget(cap_label: &str, budget: &str) -> bool {
    cap_label == budget || (cap_label == "Request bytes" && budget == "Request size")
}

fn rules_of(packet: &Packet) -> Vec<String> {
    let m = &packet.manifest;
    let mut rules = Vec::new();
    if let Some(py) = &m.environment.python {
        let tools: Vec<String> =
            m.environment.tools.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let tools =
            if tools.is_empty() { String::new() } else { format!(" with {}", tools.join(", ")) };
        rules.push(format!("The grader runs Python {py}{tools}."));
    }
    rules.push(format!("The test command is `{}`.", m.commands.test));
    if !m.policy.frozen.is_empty() {
        rules.push(format!(
            "These files are frozen and must stay byte-for-byte as in the starter: {}.",
            m.policy.frozen.join(", ")
        ));
    }
    rules.push("Submit one zip of your workspace; it is laid over the starter. No symlinks, absolute paths or `..` in names.".into());
    rules
}

pub(crate) struct PageExtras {
    pub(crate) error: Option<String>,
}

pub(crate) async fn render_page(
    state: &AppState,
    token: &str,
    a: &Assignment,
    extras: PageExtras,
) -> Result<String, AppError> {
    let packet = load_packet(state, a).await?;
    let now = now_ms();
    let tb = time_box_secs(a, Some(&packet));
    let prompt = packet
        .prompt()
        .map_err(|e| AppError::Internal(anyhow::anyhow!("reading the prompt: {e}")))?;
    let base = format!("/c/{token}");
    let mut submissions = Vec::new();
    for s in state.db.submissions_of(&a.id).await? {
        let wait = match s.state {
            SubmissionState::Queued => {
                crate::queue::wait_of(state, &s.id).await.map(|w| w.sentence)
            }
            _ => None,
        };
        submissions.push(SubmissionRow {
            href: format!("{base}/submissions/{}", s.id),
            sha256: s.blob_sha256,
            size_bytes: s.size_bytes,
            received: fmt_time(s.received_at),
            state: s.state.to_string(),
            wait,
        });
    }
    let meter = meter_box(state, token, a).await?;
    // The budgets the page shows nowhere else: the model's are in the
    // model key's live table, the time box in the time section.
    let shown: Vec<String> = meter.caps.iter().map(|c| c.label.clone()).collect();
    let budgets = budgets_of(&packet)
        .into_iter()
        .filter(|(name, _)| name != "Time box" && !shown.iter().any(|s| same_budget(s, name)))
        .collect();
    let title = packet.manifest.packet.title.clone();
    let page = CandidateView {
        base,
        prompt_html: crate::web::page::markdown_below(&apply_seed(&prompt, &a.seed), &title),
        title,
        candidate_name: a.candidate_name.clone(),
        deadline: fmt_time(a.deadline),
        time_box: tb.map(|t| fmt_duration(t * 1000)),
        time_left: match (tb, a.started_at) {
            (Some(t), Some(s)) if s + t * 1000 > now => {
                Some(format!("{} left", fmt_duration(s + t * 1000 - now)))
            }
            _ => None,
        },
        started: a.started_at.is_some(),
        closed: closed_reason(a, tb, now).map(|r| r.message),
        budgets,
        rules: rules_of(&packet),
        submissions,
        max_submissions: a.max_submissions,
        error: extras.error,
        max_upload_mb: state.config.max_upload_mb,
        witness: Some(
            crate::web::gate::section(
                state,
                token,
                a,
                &packet,
                closed_reason(a, tb, now).is_some(),
            )
            .await?,
        ),
        meter: Some(meter),
    };
    let title = page.title.clone();
    Ok(app::shell::document(meta(state, &title), move || view! { <CandidatePage page=page /> }))
}

/// The model meter's section of the page (creates the first key).
async fn meter_box(state: &AppState, token: &str, a: &Assignment) -> Result<MeterBox, AppError> {
    let m = crate::meter::status_of(state, a, token).await?;
    let note = if !m.upstream_configured {
        Some("No model upstream is configured for this assignment yet; model calls are refused until the hiring team sets one.".to_string())
    } else if !m.window_open {
        Some("The model window opens after a witnessed red run: have the platform witness your failing test first.".to_string())
    } else {
        None
    };
    let caps = app::islands::budget_rows(&m);
    Ok(MeterBox {
        key: m.key,
        endpoint: m.endpoint,
        status_url: format!("/c/{token}/meter"),
        note,
        caps,
        transcript_url: format!("/c/{token}/transcript"),
    })
}

/// The candidate's own transcript: every call of their assignment (found
/// by the link token, so only ever their own), live and after the
/// deadline. Nothing in it is hidden from them: it is what they sent and
/// what they got back.
async fn transcript_page(
    State(state): State<AppState>,
    Path(token): Path<String>,
) -> Result<Response, AppError> {
    let a = assignment_for(&state, &token).await?;
    let (entries, _) = crate::transcript::entries(&state, &a.id, None).await?;
    let packet = load_packet(&state, &a).await?;
    let page = app::pages::transcript::TranscriptPageView {
        title: format!("Model transcript · {}", packet.manifest.packet.title),
        back: format!("/c/{token}"),
        json_url: format!("/c/{token}/transcript.json"),
        entries,
    };
    let html = app::shell::document(
        meta(&state, "Model transcript"),
        move || view! { <app::pages::transcript::TranscriptPage page=page /> },
    );
    Ok(Html(html).into_response())
}

async fn transcript_json(
    State(state): State<AppState>,
    Path(token): Path<String>,
) -> Result<Response, AppError> {
    let a = assignment_for(&state, &token).await?;
    let calls = crate::transcript::load(&state, &a.id, None).await?;
    Ok(axum::Json(crate::transcript::export_json(&a.id, &calls)).into_response())
}

/// The assignment page. Reading it does not start the time box (a link
/// preview's GET must not start a candidate's clock): the Start button, the
/// starter download, a model call, a witnessed run or a submission do.
async fn page(
    State(state): State<AppState>,
    Path(token): Path<String>,
) -> Result<Response, AppError> {
    let a = match assignment_for(&state, &token).await {
        Ok(a) => a,
        // A candidate has no account: say the link is not valid and whom to
        // ask, not "sign in".
        Err(AppError::NotFound(_)) => {
            let html = app::shell::document(
                meta(&state, "Invite link not valid"),
                || view! { <app::pages::candidate::InvalidLinkView /> },
            );
            return Ok((StatusCode::NOT_FOUND, Html(html)).into_response());
        }
        Err(AppError::Gone(message)) => return Ok(erased_page(&state, message)),
        Err(e) => return Err(e),
    };
    if now_ms() >= a.deadline {
        return Ok(gone_page(&state, &a, &token));
    }
    Ok(Html(render_page(&state, &token, &a, PageExtras { error: None }).await?).into_response())
}

async fn start(
    State(state): State<AppState>,
    Path(token): Path<String>,
) -> Result<Response, AppError> {
    let a = assignment_for(&state, &token).await?;
    if now_ms() >= a.deadline {
        return Ok(gone_page(&state, &a, &token));
    }
    state.db.start_assignment(&a.id, now_ms()).await?;
    Ok(Redirect::to(&format!("/c/{token}")).into_response())
}

async fn starter(
    State(state): State<AppState>,
    Path(token): Path<String>,
) -> Result<Response, AppError> {
    let a = assignment_for(&state, &token).await?;
    if now_ms() >= a.deadline {
        return Ok(gone_page(&state, &a, &token));
    }
    let packet = load_packet(&state, &a).await?;
    // The starter carries the prompt and the credentials: taking it starts
    // the time box.
    state.db.start_assignment(&a.id, now_ms()).await?;
    let tmp = crate::blobs::tmp_dir(&state.config.data_dir);
    let seed = a.seed.clone();
    let grader = state.grader.clone();
    let gate =
        grader::starter::Gate { base_url: state.config.public_url.clone(), token: token.clone() };
    let bytes = tokio::task::spawn_blocking(move || -> anyhow::Result<Vec<u8>> {
        std::fs::create_dir_all(&tmp)?;
        let dir = grader::workdir::WorkDir::new_in(&tmp, "gatehouse-starter-")?;
        let out = dir.path().join("starter.zip");
        // The pin file names the probed environment (probed once per grader).
        let tools: Vec<String> = packet.manifest.environment.tools.keys().cloned().collect();
        // Without a working probe the pin says "unknown" rather than
        // withholding the starter.
        let probe = grader.probe(&tools).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "the sandbox probe failed; the pin file says unknown");
            grader::env::EnvProbe {
                python: None,
                tools: Default::default(),
                stdlib: Default::default(),
                runner_modules: Default::default(),
            }
        });
        grader::starter::write_starter_pinned(&packet, &seed, &probe, &gate, &out)?;
        Ok(std::fs::read(&out)?)
    })
    .await
    .map_err(|e| AppError::Internal(e.into()))??;
    let name = format!("attachment; filename=\"{}-starter.zip\"", a.slug);
    Ok((
        [
            (header::CONTENT_TYPE, "application/zip".to_string()),
            (header::CONTENT_DISPOSITION, name),
        ],
        bytes,
    )
        .into_response())
}

/// Refused uploads recorded per assignment for the hiring team; later
/// refusals are only counted in the metrics.
pub const REFUSALS_RECORDED: usize = 50;

/// Streams the multipart field `file` into the blob store, validates it with
/// the grader's ingestion, and records the submission and its grading job.
/// Shared by the upload form and `POST /api/v1/submissions`. A refusal the
/// candidate caused (4xx) is kept in the audit log as `submission.refused`
/// (time and reason, at most [`REFUSALS_RECORDED`] per assignment), so the
/// author sees it on the assignment.
pub async fn receive_upload(
    state: &AppState,
    a: &Assignment,
    headers: &HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Submission, Refusal> {
    let outcome = receive_checked(state, a, headers, multipart).await;
    // (An upload refused because the candidate was erased meanwhile leaves
    // no record of theirs behind.)
    if let Err(r) = &outcome
        && r.status.is_client_error()
        && !(r.status == StatusCode::GONE && state.db.erasure_of(&a.id).await?.is_some())
    {
        let subject = format!("assignment:{}", a.id);
        let recorded = state
            .db
            .audit_entries(Some(&subject), 1000)
            .await
            .map(|e| e.iter().filter(|e| e.action == "submission.refused").count())
            .unwrap_or(0);
        if recorded < REFUSALS_RECORDED {
            let reason: String = r.message.chars().take(500).collect();
            if let Err(e) =
                state.db.audit("candidate", "submission.refused", &subject, &reason).await
            {
                tracing::warn!(assignment = %a.id, "recording a refused upload: {e}");
            }
        }
    }
    outcome
}

async fn receive_checked(
    state: &AppState,
    a: &Assignment,
    headers: &HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Submission, Refusal> {
    let cap = state.config.max_upload_bytes();
    let now = now_ms();
    let tb = match a.time_box_secs {
        Some(t) => Some(t),
        None => time_box_secs(a, load_packet(state, a).await.ok().as_deref()),
    };
    if let Some(r) = closed_reason(a, tb, now) {
        metrics::counter!("gatehouse_uploads_refused_total", "reason" => "closed").increment(1);
        return Err(r);
    }
    limit_reached(state, a).await?;
    let _upload = crate::state::Gates::try_take(&state.gates.uploads, "uploads")?;
    // Refuse early on the declared length (allowing for multipart framing),
    // before reading a byte of the body.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(len) = declared
        && len > cap + (64 << 10)
    {
        metrics::counter!("gatehouse_uploads_refused_total", "reason" => "too_large").increment(1);
        return Err(Refusal::too_large(cap));
    }
    let mut multipart = multipart.map_err(|e| {
        metrics::counter!("gatehouse_uploads_refused_total", "reason" => "bad_form").increment(1);
        Refusal::new(
            StatusCode::BAD_REQUEST,
            format!("expected a multipart/form-data upload with a `file` field: {e}"),
        )
    })?;
    let mut pending = None;
    loop {
        let field = multipart.next_field().await.map_err(|e| Refusal::multipart(e, cap))?;
        let Some(mut field) = field else { break };
        if field.name() != Some("file") {
            continue;
        }
        let mut writer = state
            .blobs()
            .writer(cap)
            .await
            .map_err(|e| Refusal::from(AppError::Internal(e.into())))?;
        loop {
            let chunk = field.chunk().await.map_err(|e| Refusal::multipart(e, cap))?;
            let Some(chunk) = chunk else { break };
            match writer.write(&chunk).await {
                Ok(()) => {}
                Err(BlobError::TooLarge { .. }) => {
                    metrics::counter!("gatehouse_uploads_refused_total", "reason" => "too_large")
                        .increment(1);
                    return Err(Refusal::too_large(cap));
                }
                Err(e) => return Err(AppError::Internal(e.into()).into()),
            }
        }
        metrics::counter!("gatehouse_upload_bytes_total").increment(writer.size());
        pending =
            Some(writer.finish().await.map_err(|e| Refusal::from(AppError::Internal(e.into())))?);
        break;
    }
    let Some(pending) = pending else {
        metrics::counter!("gatehouse_uploads_refused_total", "reason" => "no_file").increment(1);
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "the upload has no `file` field; choose a zip file to upload",
        ));
    };
    if pending.size == 0 {
        metrics::counter!("gatehouse_uploads_refused_total", "reason" => "empty").increment(1);
        return Err(Refusal::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "the uploaded file is empty; choose your submission zip",
        ));
    }

    // Validate with the grader's own ingestion into a scratch folder that is
    // removed at once; a refused zip never reaches the blob store.
    let zip: PathBuf = pending.path().to_path_buf();
    let scratch = crate::blobs::tmp_dir(&state.config.data_dir);
    let limits = state.grader.ingest_limits.clone();
    let checked = tokio::task::spawn_blocking(
        move || -> std::io::Result<Result<(), grader::ingest::IngestError>> {
            std::fs::create_dir_all(&scratch)?;
            let dir = grader::workdir::WorkDir::new_in(&scratch, "gatehouse-validate-")?;
            Ok(grader::ingest::ingest(&zip, &dir.path().join("submission"), &limits).map(|_| ()))
        },
    )
    .await
    .map_err(|e| Refusal::from(AppError::Internal(e.into())))?
    .map_err(|e| Refusal::from(AppError::Internal(e.into())))?;
    if let Err(grader::ingest::IngestError::Io { path, source }) = checked {
        // The server's own file work failed (its disk is full, say), not
        // the zip: no refusal of the candidate's work.
        return Err(AppError::Internal(
            anyhow::Error::new(source).context(format!("checking the upload: writing {path}")),
        )
        .into());
    }
    if let Err(why) = checked {
        metrics::counter!("gatehouse_uploads_refused_total", "reason" => why.rule()).increment(1);
        return Err(Refusal::new(StatusCode::UNPROCESSABLE_ENTITY, why.to_string()));
    }

    // The deadline and the time box again, now that the body is in: an
    // upload begun in time but streamed past the close is refused.
    let fresh = state.db.assignment_by_id(&a.id).await?.unwrap_or_else(|| a.clone());
    if let Some(r) = closed_reason(&fresh, tb, now_ms()) {
        metrics::counter!("gatehouse_uploads_refused_total", "reason" => "closed_during_upload")
            .increment(1);
        return Err(r);
    }
    limit_reached(state, &fresh).await?;
    let (sha256, size) = (pending.sha256.clone(), pending.size);
    let committed =
        pending.commit_new().await.map_err(|e| Refusal::from(AppError::Internal(e.into())))?;
    let id = random_token()[..20].to_string();
    let recorded = async {
        if a.started_at.is_none() {
            state.db.start_assignment(&a.id, now).await?;
        }
        state
            .db
            .create_submission(NewSubmission {
                id: &id,
                assignment_id: &a.id,
                blob_sha256: &sha256,
                size_bytes: size as i64,
            })
            .await
    }
    .await;
    let submission = match recorded {
        Ok(s) => s,
        Err(e) => {
            // No row refers to the blob: what this upload added goes, so a
            // refused upload (a full disk, say) leaves nothing behind.
            if let Err(f) = state.blobs().forget(&sha256, &committed).await {
                tracing::error!(blob = %sha256, error = %f, "removing the blob of an upload that was not recorded failed");
            }
            // The candidate was erased while the upload came in: the store
            // refused it (`create_submission`), and the link says so.
            if let Some(erased) = state.db.erasure_of(&a.id).await? {
                metrics::counter!("gatehouse_uploads_refused_total", "reason" => "erased")
                    .increment(1);
                return Err(AppError::Gone(crate::assignment::erased_message(erased.at)).into());
            }
            return Err(e.into());
        }
    };
    crate::web::gate::record_witnessed(state, &a.id, &submission.id).await?;
    metrics::counter!("gatehouse_uploads_accepted_total").increment(1);
    state.wake_workers();
    tracing::info!(submission = %id, assignment = %a.id, size, "submission accepted");
    crate::webhooks::emit(
        state,
        crate::webhooks::Event::SubmissionReceived,
        crate::webhooks::submission_data(state, &submission.id, &a.id),
    )
    .await;
    Ok(submission)
}

/// Refuses once the assignment holds its limit of submissions (all are
/// kept; reviewers see the last one first).
async fn limit_reached(state: &AppState, a: &Assignment) -> Result<(), Refusal> {
    let all = state.db.submissions_of(&a.id).await?;
    let pending = all.iter().filter(|s| !s.state.is_final()).count();
    if pending >= state.config.max_pending_jobs.max(1) {
        metrics::counter!("gatehouse_uploads_refused_total", "reason" => "pending").increment(1);
        return Err(Refusal::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "{pending} earlier submission(s) of this assignment are still waiting for grading; submit again when they are graded"
            ),
        ));
    }
    let made = all.len() as i64;
    if made >= a.max_submissions {
        metrics::counter!("gatehouse_uploads_refused_total", "reason" => "limit").increment(1);
        return Err(Refusal::new(
            StatusCode::CONFLICT,
            format!(
                "this assignment accepts {} submission{}, and all {made} are in; the hiring team has every one (the last first), so no further upload is taken",
                a.max_submissions,
                if a.max_submissions == 1 { "" } else { "s" }
            ),
        ));
    }
    Ok(())
}

async fn submit(
    State(state): State<AppState>,
    Path(token): Path<String>,
    headers: HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Response, Refusal> {
    let json = wants_json(&headers);
    let a = assignment_for(&state, &token).await?;
    match receive_upload(&state, &a, &headers, multipart).await {
        Ok(s) => {
            let url = format!("/c/{token}/submissions/{}", s.id);
            if json {
                let body = json!({ "id": s.id, "receipt_url": url, "sha256": s.blob_sha256, "received_at": s.received_at });
                Ok((StatusCode::CREATED, axum::Json(body)).into_response())
            } else {
                Ok(Redirect::to(&url).into_response())
            }
        }
        Err(r) if json => Err(r),
        Err(r) if r.status == StatusCode::GONE => gone_refusal_page(&state, &a, &token, r).await,
        Err(r) => {
            // The plain form: the page again, with what was wrong.
            let a = state.db.assignment_by_id(&a.id).await?.unwrap_or(a);
            let html =
                render_page(&state, &token, &a, PageExtras { error: Some(r.message) }).await?;
            Ok((r.status, Html(html)).into_response())
        }
    }
}

/// The candidate's own submission, or 404 for any other.
async fn own_submission(
    state: &AppState,
    a: &Assignment,
    id: &str,
) -> Result<Submission, AppError> {
    state
        .db
        .submission_by_id(id)
        .await?
        .filter(|s| s.assignment_id == a.id)
        .ok_or_else(|| AppError::NotFound("submission".into()))
}

/// The reviewer's status of a submission.
pub fn status_json(s: &Submission) -> SubmissionStatus {
    SubmissionStatus { state: s.state, decision: s.decision.clone(), score: s.score }
}

/// Whether the candidate may see `s`'s decision and score: the assignment's
/// `results` setting (never by default; after a reviewer has scored it; or
/// as soon as it is graded).
pub async fn results_released(
    state: &AppState,
    a: &Assignment,
    s: &Submission,
) -> Result<bool, AppError> {
    if s.state != SubmissionState::Graded {
        return Ok(false);
    }
    Ok(match a.results {
        ResultsRelease::Never => false,
        ResultsRelease::Immediately => true,
        ResultsRelease::AfterReview => !state.db.human_scores(&s.id).await?.is_empty(),
    })
}

/// The digest of a graded submission's receipt.
pub fn receipt_digest(s: &Submission) -> Option<String> {
    let receipt: serde_json::Value = serde_json::from_str(s.receipt_json.as_deref()?).ok()?;
    receipt.get("digest").and_then(|d| d.as_str()).map(str::to_string)
}

/// What the candidate's status poll shows: the state and the receipt
/// digest, and the decision and score only once released.
pub fn candidate_status_json(
    s: &Submission,
    released: bool,
    queue: Option<app::contract::QueueWait>,
) -> CandidateStatus {
    CandidateStatus {
        state: s.state,
        receipt_digest: receipt_digest(s),
        result: released.then(|| ReleasedResult { decision: s.decision.clone(), score: s.score }),
        queue,
    }
}

fn note_for(s: &Submission) -> Option<String> {
    Some(match s.state {
        SubmissionState::Queued => "Your submission is stored and waiting for a grader.".into(),
        SubmissionState::Grading => "Your submission is being graded.".into(),
        SubmissionState::Graded => "Grading is finished; the hiring team has the results.".into(),
        SubmissionState::Refused => {
            format!("The grader refused this zip: {}", s.refusal.clone().unwrap_or_default())
        }
        SubmissionState::Failed => {
            "Grading could not be completed; the hiring team has been told.".into()
        }
    })
}

async fn receipt(
    State(state): State<AppState>,
    Path((token, id)): Path<(String, String)>,
) -> Result<Response, AppError> {
    let a = assignment_for(&state, &token).await?;
    let s = own_submission(&state, &a, &id).await?;
    let released = results_released(&state, &a, &s).await?;
    let page = CandidateReceiptView {
        back: format!("/c/{token}"),
        status_url: format!("/c/{token}/submissions/{}/status", s.id),
        id: s.id.clone(),
        sha256: s.blob_sha256.clone(),
        size_bytes: s.size_bytes,
        received: fmt_time(s.received_at),
        state: s.state.to_string(),
        note: note_for(&s),
        decision: released.then(|| s.decision.clone()).flatten(),
        score: if released { s.score.map(|v| format!("{v}")) } else { None },
        receipt_digest: receipt_digest(&s),
        wait: crate::queue::wait_of(&state, &s.id).await.map(|w| w.sentence),
    };
    Ok(Html(app::shell::document(
        meta(&state, "Receipt"),
        move || view! { <CandidateReceiptPage page=page /> },
    ))
    .into_response())
}

async fn status(
    State(state): State<AppState>,
    Path((token, id)): Path<(String, String)>,
) -> Result<axum::Json<CandidateStatus>, AppError> {
    let a = assignment_for(&state, &token).await?;
    let s = own_submission(&state, &a, &id).await?;
    let released = results_released(&state, &a, &s).await?;
    let queue = crate::queue::wait_of(&state, &s.id).await;
    Ok(axum::Json(candidate_status_json(&s, released, queue)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::page::markdown;

    #[test]
    fn markdown_escapes_raw_html() {
        let html = markdown("# Hi\n\n<script>alert(1)</script>\n\nand <b>x</b>");
        assert!(!html.contains("<script>"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(html.contains("<h1>Hi</h1>"), "{html}");
    }

    #[test]
    fn formats_times() {
        assert_eq!(fmt_time(0), "1970-01-01 00:00 UTC");
        assert_eq!(fmt_time(1_795_000_000_000), "2026-11-18 11:06 UTC");
    }
}
