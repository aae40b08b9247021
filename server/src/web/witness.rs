//! The gate, witnessed: the candidate uploads the current tree and the
//! platform runs the packet's workspace test command on it in the grading
//! sandbox, once, and records the run. A red run must fail; a green run must
//! pass and counts only after an accepted red. Every run is stored, accepted
//! or not, with its log, tree digest and environment probe.
//!
//! Two doors to the same function: the candidate page's form
//! (`POST /c/{token}/witness/{red|green}`, JSON with `Accept:
//! application/json`) and the terminal (`POST /api/v1/witness/{red|green}`
//! with the link token as the bearer).

use axum::extract::multipart::MultipartRejection;
use axum::extract::{DefaultBodyLimit, Multipart, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::post;
use grader::grade::GradeError;

use grader::witness::WitnessKind;

use crate::blobs::BlobError;
use crate::db::{Assignment, NewWitnessRun, WitnessRunRow};
use crate::error::AppError;
use crate::now_ms;
use crate::state::AppState;
use crate::web::candidate::{
    PageExtras, Refusal, assignment_for, closed_reason, gone_refusal_page, load_packet,
    render_page, wants_json,
};

/// What a passing red run is refused with.
pub const RED_PASSED: &str = "the gate wants a failure: the tests passed on this tree, so it cannot be the witnessed red; upload the tree before your fix";
/// What a green run before any accepted red is refused with.
pub const GREEN_BEFORE_RED: &str =
    "a green run counts only after an accepted red; witness a failing run first";
/// What a failing green run is refused with.
pub const GREEN_FAILED: &str =
    "the tests did not pass on this tree, so it cannot be the witnessed green";

pub fn routes() -> crate::routes::Routes {
    crate::routes::Routes::new()
        .route("/c/{token}/witness/{kind}", post(form_witness).layer(DefaultBodyLimit::disable()))
        .route("/api/v1/witness/{kind}", post(api_witness).layer(DefaultBodyLimit::disable()))
}

/// A witnessed run and whether it was accepted.
struct Witnessed {
    row: WitnessRunRow,
    passed: bool,
    wall_ms: u64,
}

/// Receives the tree, runs it, and records the run. Refusals before the run
/// (closed link, bad upload, a zip ingestion refuses) record nothing.
async fn witness(
    state: &AppState,
    a: &Assignment,
    kind: &str,
    headers: &HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Witnessed, Refusal> {
    let Ok(kind) = WitnessKind::parse(kind) else {
        return Err(AppError::NotFound(format!(
            "witness step {kind:?} (there are `red` and `green`)"
        ))
        .into());
    };
    let packet = load_packet(state, a).await?;
    if let Some(r) = closed_reason(
        a,
        crate::assignment::time_box_secs(a, packet.manifest.budgets.time_box_minutes),
        now_ms(),
    ) {
        return Err(r);
    }
    let Some(_slot) = crate::state::Slot::take(&state.memo, &a.id) else {
        return Err(Refusal::new(
            StatusCode::TOO_MANY_REQUESTS,
            "a witnessed run of this assignment is already in progress; wait for it to finish",
        ));
    };
    let done = state.db.witness_runs_of(&a.id).await?.len();
    if done >= state.config.max_witness_runs {
        return Err(Refusal::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "this assignment has used its {} witnessed runs; no further run is taken",
                state.config.max_witness_runs
            ),
        ));
    }
    let _upload = crate::state::Gates::try_take(&state.gates.uploads, "uploads")?;
    let _sandbox = crate::state::Gates::try_take(&state.gates.sandbox_runs, "sandbox runs")?;

    // Receive the zip into a temporary file that is never committed.
    let cap = state.config.max_upload_bytes();
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > cap + (64 << 10)) {
        return Err(Refusal::too_large(cap));
    }
    let mut multipart = multipart.map_err(|e| {
        Refusal::new(
            StatusCode::BAD_REQUEST,
            format!("expected a multipart/form-data upload with a `file` field: {e}"),
        )
    })?;
    let mut pending = None;
    while let Some(mut field) =
        multipart.next_field().await.map_err(|e| Refusal::multipart(e, cap))?
    {
        if field.name() != Some("file") {
            continue;
        }
        let mut writer = state
            .blobs()
            .writer(cap)
            .await
            .map_err(|e| Refusal::from(AppError::Internal(e.into())))?;
        while let Some(chunk) = field.chunk().await.map_err(|e| Refusal::multipart(e, cap))? {
            match writer.write(&chunk).await {
                Ok(()) => {}
                Err(BlobError::TooLarge { .. }) => return Err(Refusal::too_large(cap)),
                Err(e) => return Err(AppError::Internal(e.into()).into()),
            }
        }
        pending =
            Some(writer.finish().await.map_err(|e| Refusal::from(AppError::Internal(e.into())))?);
        break;
    }
    let Some(pending) = pending else {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "the upload has no `file` field; choose a zip of your current tree",
        ));
    };
    if pending.size == 0 {
        return Err(Refusal::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "the uploaded file is empty; choose a zip of your current tree",
        ));
    }

    // The version's recorded calibration times the sample's witnessed
    // run; a witnessed run's default wall limit derives from it.
    let calibration = state
        .db
        .version_by_id(a.packet_version_id)
        .await?
        .and_then(|v| crate::grading::recorded_calibration(v.check_report.as_deref()));
    let grader = state.grader.clone();
    let zip = pending.path().to_path_buf();
    let started = std::time::Instant::now();
    let outcome =
        tokio::task::spawn_blocking(move || grader.witness_run_with(&packet, &zip, calibration))
            .await
            .map_err(|e| Refusal::from(AppError::Internal(e.into())))?;
    drop(pending);
    let outcome = match outcome {
        Ok(o) => o,
        // An ingestion that could not write (the server's disk) is the
        // machine's failure, not the tree's.
        Err(GradeError::Refused(why)) if !matches!(why, grader::ingest::IngestError::Io { .. }) => {
            return Err(Refusal::new(StatusCode::UNPROCESSABLE_ENTITY, why.to_string()));
        }
        Err(e) => {
            return Err(AppError::Internal(
                anyhow::Error::new(e).context("a witnessed run failed"),
            )
            .into());
        }
    };
    metrics::histogram!("gatehouse_witness_seconds").record(started.elapsed().as_secs_f64());

    let refusal = match (kind, outcome.passed) {
        (WitnessKind::Red, true) => Some(RED_PASSED),
        (WitnessKind::Red, false) => None,
        (WitnessKind::Green, false) => Some(GREEN_FAILED),
        (WitnessKind::Green, true) if state.db.first_accepted_red_at(&a.id).await?.is_none() => {
            Some(GREEN_BEFORE_RED)
        }
        (WitnessKind::Green, true) => None,
    };
    let env_json = serde_json::to_string(&outcome.environment)
        .map_err(|e| Refusal::from(AppError::Internal(e.into())))?;
    let recorded = state
        .db
        .add_witness_run(NewWitnessRun {
            assignment_id: &a.id,
            kind,
            at: now_ms(),
            accepted: refusal.is_none(),
            exit_code: outcome.exit_code.map(i64::from),
            log: &outcome.log,
            tree_sha256: &outcome.tree_sha256,
            env_json: &env_json,
            refusal,
        })
        .await;
    let row = match recorded {
        Ok(row) => row,
        // The candidate was erased while the run ran: nothing of it is
        // kept, and the link says so.
        Err(sqlx::Error::RowNotFound) => {
            return Err(match state.db.erasure_of(&a.id).await? {
                Some(e) => AppError::Gone(crate::assignment::erased_message(e.at)).into(),
                None => AppError::NotFound("invite link".into()).into(),
            });
        }
        Err(e) => return Err(e.into()),
    };
    tracing::info!(assignment = %a.id, kind = %kind, accepted = row.accepted, wall_ms = outcome.wall_ms, "witnessed run");
    Ok(Witnessed { row, passed: outcome.passed, wall_ms: outcome.wall_ms })
}

/// The JSON answer: 201 for an accepted run, 422 with `error` for a refused
/// one (the run is recorded either way and the body carries its log).
/// A witnessed run as JSON (the API's answer, and the candidate page's
/// with `Accept: application/json`).
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct WitnessRunView {
    id: i64,
    /// red or green.
    #[schema(value_type = WitnessStep)]
    kind: String,
    /// Unix milliseconds.
    at: i64,
    /// Whether it counts for the gate.
    accepted: bool,
    /// Whether the tests passed.
    passed: bool,
    exit_code: Option<i64>,
    /// Why it does not count, when it does not.
    refusal: Option<String>,
    tree_sha256: String,
    /// The sandbox's environment probe.
    #[schema(value_type = Object)]
    environment: serde_json::Value,
    wall_ms: u64,
    /// The test command's output (capped).
    log: String,
    /// The refusal again, as every refusal carries it.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

fn run_json(w: &Witnessed) -> Response {
    let r = &w.row;
    let body = WitnessRunView {
        id: r.id,
        kind: r.kind.to_string(),
        at: r.at,
        accepted: r.accepted,
        passed: w.passed,
        exit_code: r.exit_code,
        refusal: r.refusal.clone(),
        tree_sha256: r.tree_sha256.clone(),
        environment: serde_json::from_str(&r.env_json).unwrap_or_default(),
        wall_ms: w.wall_ms,
        log: r.log.clone(),
        error: r.refusal.clone(),
    };
    let status =
        if r.refusal.is_some() { StatusCode::UNPROCESSABLE_ENTITY } else { StatusCode::CREATED };
    (status, axum::Json(body)).into_response()
}

/// A 422: the run recorded, not counting, or a tree refused before any run.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // The schema of a 422; `run_json` and `Refusal` write them.
enum WitnessRefused {
    Run(WitnessRunView),
    Refused(crate::web::candidate::ApiError),
}

/// The sandbox run of a witness step, as the schema names it.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)] // The schema of the path's `kind`, parsed by `WitnessKind::parse`.
enum WitnessStep {
    Red,
    Green,
}

async fn form_witness(
    State(state): State<AppState>,
    Path((token, kind)): Path<(String, String)>,
    headers: HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Response, Refusal> {
    let a = assignment_for(&state, &token).await?;
    let result = witness(&state, &a, &kind, &headers, multipart).await;
    if wants_json(&headers) {
        return result.map(|w| run_json(&w));
    }
    // The plain form: back to the page, where the run and its log are listed;
    // a refusal before any run re-renders the page with the reason.
    match result {
        Ok(w) => Ok(Redirect::to(&format!("/c/{token}#witness-{}", w.row.id)).into_response()),
        Err(r) if r.status == StatusCode::GONE => gone_refusal_page(&state, &a, &token, r).await,
        Err(r) if r.status == StatusCode::NOT_FOUND => Err(r),
        Err(r) => {
            let a = state.db.assignment_by_id(&a.id).await?.unwrap_or(a);
            let html =
                render_page(&state, &token, &a, PageExtras { error: Some(r.message) }).await?;
            Ok((r.status, Html(html)).into_response())
        }
    }
}

/// Runs the packet's workspace tests on the uploaded tree in the grading
/// sandbox, once, and records the run: a `red` run must fail, a `green`
/// run must pass after an accepted red.
#[utoipa::path(
    post,
    path = "/api/v1/witness/{kind}",
    tag = "witness",
    params(("kind" = WitnessStep, Path, description = "red or green")),
    request_body(content = crate::web::candidate::ZipUpload, content_type = "multipart/form-data"),
    security(("bearer" = [])),
    responses(
        (status = 201, description = "The run, accepted", body = WitnessRunView),
        (status = 400, description = "No `file` field, a malformed multipart body, or an unknown step", body = crate::web::candidate::ApiError),
        (status = 401, description = "No bearer token, or not a valid link token", body = crate::web::candidate::ApiError),
        (status = 403, description = "The time box is over", body = crate::web::candidate::ApiError),
        (status = 404, description = "No such step (there are `red` and `green`)", body = crate::web::candidate::ApiError),
        (status = 410, description = "The deadline has passed, or the candidate's data was erased (also while the run ran: nothing of it is kept)", body = crate::web::candidate::ApiError),
        (status = 413, description = "Over the upload cap", body = crate::web::candidate::ApiError),
        (status = 422, description = "The run does not count (its `refusal` says why), or the tree was refused before any run", body = WitnessRefused),
        (status = 429, description = "A run of this assignment is under way, or its runs are used up", body = crate::web::candidate::ApiError),
        (status = 503, description = "The sandbox is busy", body = crate::web::candidate::ApiError),
        (status = 507, description = "Out of storage", body = crate::web::candidate::ApiError),
    )
)]
pub(crate) async fn api_witness(
    State(state): State<AppState>,
    Path(kind): Path<String>,
    headers: HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Response, Refusal> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            Refusal::new(
                StatusCode::UNAUTHORIZED,
                "send `Authorization: Bearer <token>` with the assignment's link token",
            )
        })?;
    // An erased candidate's link is 410, as on its pages; a token no link
    // ever had is 401.
    let a = match assignment_for(&state, &token).await {
        Ok(a) => a,
        Err(AppError::NotFound(_)) => {
            return Err(Refusal::new(
                StatusCode::UNAUTHORIZED,
                "the bearer token is not a valid link token (revoked, mistyped or expired)",
            ));
        }
        Err(e) => return Err(e.into()),
    };
    let w = witness(&state, &a, &kind, &headers, multipart).await?;
    Ok(run_json(&w))
}
