//! The packet library on disk and its self-test. Packet versions live under
//! `<data_dir>/packets/<slug>/<id>/`; a published version's folder never
//! changes.

use std::path::PathBuf;

use anyhow::Context;
use grader::check::check_packet;

use crate::state::AppState;

/// The folder of a packet version, from its stored relative `dir`.
pub fn version_dir(state: &AppState, dir: &str) -> PathBuf {
    state.config.data_dir.join(dir)
}

/// Runs `packet check` on a version (the `check` job) and stores the report.
/// Returns whether the check passed.
pub async fn run_check(state: &AppState, version_id: i64) -> anyhow::Result<bool> {
    let version = state.db.version_by_id(version_id).await?.with_context(|| format!("packet version {version_id} does not exist"))?;
    state.db.set_check(version_id, "running", None).await?;
    let dir = version_dir(state, &version.dir);
    let grader = state.grader.clone();
    let report = tokio::task::spawn_blocking(move || check_packet(&grader, &dir)).await?;
    let ok = report.ok();
    let json = serde_json::to_string(&report)?;
    state.db.set_check(version_id, if ok { "passed" } else { "failed" }, Some(&json)).await?;
    Ok(ok)
}
