//! Grading one stored submission against its assignment's packet version.
//!
//! The worker calls [`grade_submission`] and stores the outcome with
//! `complete_grade_job`, which only succeeds while the worker still holds
//! the job's lease. Regrading is enqueueing another `grade` job.
//!
//! The receipt a platform grading writes names the published version (`v2`) in
//! its `packet.version`, and its digest is taken again; the CLI, which has no
//! published versions, writes the packet.toml's `version`. The witnessed runs
//! and the ledger go to the grader as a `Witness`, and the version's recorded
//! calibration as `GradeOptions::calibration` (`recorded_calibration`).

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::Context;
use grader::grade::{GradeError, GradeOptions};
use grader::packet::Packet;
use grader::score::HumanScore;
use grader::witness::{MeteredCall, Witness, WitnessedRun};

use crate::library::version_path;
use crate::state::AppState;

/// What grading produced.
#[derive(Debug)]
pub enum GradeOutcome {
    Graded {
        /// Exactly what `gatehouse grade --format json` prints.
        scorecard_json: String,
        receipt_json: String,
        decision: String,
        score: Option<f64>,
    },
    /// The grader refused the zip; the reason says what was wrong.
    Refused(String),
}

/// Grades the submission with the latest reviewer score of each criterion.
/// An error means the grader or its sandbox failed (not the submission); the
/// queue retries it.
pub async fn grade_submission(
    state: &AppState,
    submission_id: &str,
) -> anyhow::Result<GradeOutcome> {
    let started = Instant::now();
    let submission = state
        .db
        .submission_by_id(submission_id)
        .await?
        .with_context(|| format!("submission {submission_id} does not exist"))?;
    let assignment =
        state.db.assignment_by_id(&submission.assignment_id).await?.with_context(|| {
            format!(
                "assignment {} of submission {submission_id} does not exist",
                submission.assignment_id
            )
        })?;
    let version =
        state.db.version_by_id(assignment.packet_version_id).await?.with_context(|| {
            format!("packet version {} does not exist", assignment.packet_version_id)
        })?;
    // The version's folder: local, or materialised from the database.
    let dir = version_path(state, &version).await?;

    // The latest score per criterion applies; rows are oldest first.
    let mut human = BTreeMap::new();
    for row in state.db.human_scores(submission_id).await? {
        let level = u32::try_from(row.level).unwrap_or(0);
        human
            .insert(row.criterion, HumanScore { level, reason: row.reason, by: row.reviewer_name });
    }

    // What the platform witnessed up to the submission is an input of the
    // grading, like the zip; the receipt records its digest.
    let witness = witness_of(state, &assignment.id, submission.received_at).await?;

    // With Postgres the zip comes from the database into this worker's
    // own cache; with SQLite it is in the data folder.
    let zip = state
        .blobs()
        .local_copy(&submission.blob_sha256)
        .await
        .with_context(|| format!("reading the stored zip of submission {submission_id}"))?
        .with_context(|| {
            format!(
                "the stored zip {} of submission {submission_id} is missing",
                submission.blob_sha256
            )
        })?;
    // The calibration recorded when the version was self-tested (the
    // hidden tests' ids every grading must report, the sample's times).
    // Built-in versions are self-tested in the background too
    // (`library::load_builtin`); until theirs has run, or when it is
    // turned off, a version has none and the grader measures its own.
    let calibration = recorded_calibration(version.check_report.as_deref());
    let grader = state.grader.clone();
    let result = tokio::task::spawn_blocking(move || {
        let packet = Packet::load(&dir)
            .with_context(|| format!("loading the packet version at {}", dir.display()))?;
        Ok::<_, anyhow::Error>(grader.grade_zip(
            &packet,
            &zip,
            &GradeOptions { human, witness, calibration, memo: None },
        ))
    })
    .await
    .context("the grading thread panicked")??;
    metrics::histogram!("gatehouse_grading_seconds").record(started.elapsed().as_secs_f64());
    match result {
        Ok(mut card) => {
            // The receipt names the version as the pages do ("v2"), not the
            // packet.toml's own version string; the digest is taken again.
            if let Some(n) = version.version {
                card.packet.version = format!("v{n}");
                card.receipt.packet.version = card.packet.version.clone();
                card.receipt.digest = String::new();
                card.receipt.digest = grader::grade::receipt_digest(&card.receipt);
            }
            Ok(GradeOutcome::Graded {
                scorecard_json: serde_json::to_string_pretty(&card)?,
                receipt_json: serde_json::to_string_pretty(&card.receipt)?,
                decision: card.scoring.decision.clone(),
                score: card.scoring.score.map(f64::from),
            })
        }
        // Ingestion that could not write its files (the work folder's disk
        // is full) failed on the machine, not on the zip: retried, never a
        // refusal of the candidate's work.
        Err(GradeError::Refused(why)) if !matches!(why, grader::ingest::IngestError::Io { .. }) => {
            Ok(GradeOutcome::Refused(why.to_string()))
        }
        Err(e) => Err(anyhow::Error::new(e).context("grading failed")),
    }
}

/// The calibration in a version's stored self-test report, if it has one.
pub fn recorded_calibration(
    check_report: Option<&str>,
) -> Option<std::sync::Arc<grader::grade::Calibration>> {
    let report: grader::check::CheckReport = serde_json::from_str(check_report?).ok()?;
    report.calibration.map(std::sync::Arc::new)
}

/// What the platform witnessed for an assignment up to `submitted_at` (Unix
/// ms): its red and green runs and the model meter's ledger, as the grader
/// takes them. `None` when it witnessed nothing (the candidate worked
/// offline), so the witnessed checks are reported as not applicable.
pub async fn witness_of(
    state: &AppState,
    assignment_id: &str,
    submitted_at: i64,
) -> anyhow::Result<Option<Witness>> {
    let runs: Vec<WitnessedRun> = state
        .db
        .witness_runs_of(assignment_id)
        .await?
        .into_iter()
        .filter(|r| r.at <= submitted_at)
        .map(|r| WitnessedRun {
            id: r.id,
            kind: r.kind,
            at: r.at,
            accepted: r.accepted,
            exit_code: r.exit_code,
            log: r.log,
            tree_sha256: r.tree_sha256,
        })
        .collect();
    let calls: Vec<MeteredCall> = state
        .db
        .model_calls_of(assignment_id)
        .await?
        .into_iter()
        .filter(|c| c.at <= submitted_at)
        .map(|c| MeteredCall {
            id: c.id,
            at: c.at,
            status: c.status,
            refused: c.refused,
            prompt_tokens: c.prompt_tokens,
            completion_tokens: c.completion_tokens,
            tokens_estimated: c.tokens_estimated,
            request_bytes: c.request_bytes,
            request_sha256: c.request_sha256,
            duplicate_of: c.duplicate_of,
            client_retry: c.client_retry,
            request_body_sha256: c.request_body_sha256,
            response_body_sha256: c.response_body_sha256,
            transcript_cut: c.transcript_cut,
        })
        .collect();
    if runs.is_empty() && calls.is_empty() {
        return Ok(None);
    }
    Ok(Some(Witness { runs, calls, submitted_at }))
}

#[cfg(test)]
mod tests {
    use super::recorded_calibration;

    #[test]
    fn the_recorded_calibration_is_read_from_the_stored_check_report() {
        let report = r#"{"packet":"p","items":[],"calibration":{"digest":"d1","expected":{"hidden":["t.py::test_a"]},"sample_ms":7,"run_ms":{"step:hidden":3}}}"#;
        let c = recorded_calibration(Some(report)).expect("a calibration");
        assert_eq!(c.digest, "d1");
        assert_eq!(c.expected["hidden"].iter().collect::<Vec<_>>(), ["t.py::test_a"]);
        assert_eq!(c.run_ms["step:hidden"], 3);
        // No report, a report from before calibrations were recorded, or
        // one that does not parse: the grader measures its own.
        assert!(recorded_calibration(None).is_none());
        assert!(recorded_calibration(Some(r#"{"packet":"p","items":[]}"#)).is_none());
        assert!(recorded_calibration(Some("not json")).is_none());
    }
}
