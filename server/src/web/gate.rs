//! The witnessed gate as the candidate's page and submissions see it: the
//! page's witness section (the runs so far, the model window, the terminal
//! commands) and the record of which runs preceded a submission. The
//! witnessed runs themselves are `web::witness`.

use app::pages::candidate::{WitnessRunView, WitnessSection};
use grader::env::EnvReport;
use grader::packet::Packet;
use grader::starter::Gate;

use crate::db::Assignment;
use crate::error::AppError;
use crate::state::AppState;
use crate::times::utc as fmt_time;

/// Records on a new submission which witnessed runs preceded it: a JSON
/// array of `witness_runs` ids, oldest first (accepted or not).
pub async fn record_witnessed(
    state: &AppState,
    assignment_id: &str,
    submission_id: &str,
) -> Result<(), AppError> {
    let ids: Vec<i64> =
        state.db.witness_runs_of(assignment_id).await?.into_iter().map(|r| r.id).collect();
    let text = serde_json::to_string(&ids).map_err(|e| AppError::Internal(e.into()))?;
    state.db.set_witnessed(submission_id, &text).await?;
    Ok(())
}

/// The candidate page's witness section for the assignment behind `token`.
pub async fn section(
    state: &AppState,
    token: &str,
    a: &Assignment,
    packet: &Packet,
    closed: bool,
) -> Result<WitnessSection, AppError> {
    let runs = state.db.witness_runs_of(&a.id).await?;
    let red_at = state.db.first_accepted_red_at(&a.id).await?;
    let m = &packet.manifest;
    let model_window = match (m.workspace.model_waits_for_red, red_at) {
        (false, _) => "Open: this packet does not make the model wait for a red run.".to_string(),
        (true, Some(t)) => format!("Open since the witnessed red at {}.", fmt_time(t)),
        (true, None) => "Closed: it opens after a witnessed red.".to_string(),
    };
    let gate = Gate { base_url: state.config.public_url.clone(), token: token.to_string() };
    let last = runs.last().map(|r| r.id);
    let runs = runs
        .into_iter()
        .map(|r| {
            let env: Option<EnvReport> = serde_json::from_str(&r.env_json).ok();
            let environment = env
                .as_ref()
                .map(|e| {
                    e.tools
                        .iter()
                        .map(|t| {
                            format!("{} {}", t.name, t.probed.as_deref().unwrap_or("not found"))
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            WitnessRunView {
                anchor: format!("witness-{}", r.id),
                kind: r.kind.to_string(),
                at: fmt_time(r.at),
                accepted: r.accepted,
                exit: r
                    .exit_code
                    .map(|c| format!("exit {c}"))
                    .unwrap_or_else(|| "killed by a signal".into()),
                refusal: r.refusal,
                tree_sha256: r.tree_sha256,
                environment,
                mismatches: env.map(|e| e.mismatches).unwrap_or_default(),
                log: r.log,
                open: Some(r.id) == last,
            }
        })
        .collect();
    Ok(WitnessSection {
        red_action: format!("/c/{token}/witness/red"),
        green_action: format!("/c/{token}/witness/green"),
        test_command: m.witness_test().to_string(),
        steps: grader::starter::gate_steps(packet),
        model_window,
        zip_line: grader::starter::ZIP_TREE.to_string(),
        curl_red: gate.curl_red(),
        curl_green: gate.curl_green(),
        curl_submit: gate.curl_submit(),
        runs,
        closed,
    })
}
