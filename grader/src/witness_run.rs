//! A witnessed run: the platform runs a packet's workspace test command once
//! on a candidate's current tree, in the grading sandbox, and reports how it
//! ended. The server stores the outcome as a red or green step of the gate.
//!
//! Its wall limit derives from the calibration like a step's (ten times the
//! sample's witnessed run, `Calibration::run_ms["witness"]`, at least 30 s,
//! never above `[limits]`); a run stopped there fails and its log says so. Its
//! workspace is built by `starter::assemble`, as a grading's is.

use std::path::Path;

use serde::{Deserialize, Serialize};

use std::sync::Arc;

use crate::env::{EnvReport, env_report};
use crate::grade::{
    Calibration, GradeError, Grader, WALL_FACTOR, WALL_FLOOR, WITNESS_RUN_ID, default_limits,
};
use crate::ingest::ingest_with;
use crate::packet::Packet;
use crate::run::run_guarded;
use crate::sandbox::Exit;
use crate::tree::{list_files, tree_digest};

/// The most log text a witnessed run keeps (the end of it).
pub const LOG_LIMIT: usize = 64 << 10;

/// How one witnessed run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WitnessOutcome {
    /// The command that ran, in `/workspace`.
    pub command: String,
    /// The exit code; None when a signal ended the command.
    pub exit_code: Option<i32>,
    /// Whether the command passed: exit 0, in time and under every cap.
    pub passed: bool,
    pub timed_out: bool,
    /// The wall limit the run had, in seconds: the packet's `[limits]`, or
    /// the sample-derived default when that is lower (see
    /// [`crate::grade::WITNESS_RUN_ID`]).
    #[serde(default)]
    pub wall_limit_secs: u64,
    /// Whether `wall_limit_secs` is the sample-derived default.
    #[serde(default)]
    pub derived_wall: bool,
    /// Output with durations and addresses masked: stdout, then stderr
    /// under a `--- stderr ---` line, at most [`LOG_LIMIT`] bytes.
    pub log: String,
    /// Digest of the assembled tree (starter overlaid by the upload), as the
    /// receipt's `workspace_digest` computes it.
    pub tree_sha256: String,
    /// SHA-256 of the uploaded zip.
    pub archive_sha256: String,
    /// The interpreter and tool versions probed in the sandbox, against the
    /// packet's pins.
    pub environment: EnvReport,
    pub wall_ms: u64,
}

impl Grader {
    /// Runs `packet`'s workspace test command once on the tree in
    /// `tree_zip`, laid over the starter as a submission would be. The zip
    /// goes through the same ingestion (and refusals) as a submission; no
    /// hidden file is laid, and the packet's `[limits]` apply, with the wall
    /// limit derived from this grader's calibration of the packet (see
    /// [`Grader::witness_run_with`]).
    pub fn witness_run(
        &self,
        packet: &Packet,
        tree_zip: &Path,
    ) -> Result<WitnessOutcome, GradeError> {
        self.witness_run_with(packet, tree_zip, None)
    }

    /// [`Grader::witness_run`] with the calibration recorded when the
    /// packet version was self-tested (used when its digest matches, else
    /// this grader's own measurement). The wall limit is the sample-derived
    /// one (ten times the sample's witnessed run, at least 30 s) when that
    /// is below the packet's `[limits]`; a run stopped there fails and says
    /// so in its log.
    pub fn witness_run_with(
        &self,
        packet: &Packet,
        tree_zip: &Path,
        calibration: Option<Arc<Calibration>>,
    ) -> Result<WitnessOutcome, GradeError> {
        let calibration = match calibration {
            Some(c) if c.digest == packet.digest => c,
            _ => self.calibration(packet),
        };
        let io = |what: &'static str| {
            move |source: std::io::Error| GradeError::Io { context: what.to_string(), source }
        };
        let m = &packet.manifest;
        let work = crate::workdir::WorkDir::new("gatehouse-witness-")
            .map_err(io("creating a work folder"))?;
        let ingested = ingest_with(
            tree_zip,
            &work.path().join("submission"),
            &self.ingest_limits,
            &crate::grade::ingest_options(packet)?,
        )?;

        // Assembled exactly as grading does.
        let workspace = work.path().join("workspace");
        crate::starter::assemble(packet, &ingested, &workspace)
            .map_err(io("assembling the workspace"))?;
        let tree_sha256 =
            tree_digest(&list_files(&workspace).map_err(io("listing the workspace"))?);

        let tools: Vec<String> = m.environment.tools.keys().cloned().collect();
        let probe = self.probe(&tools)?;
        let environment = env_report(m, &probe);

        let mut limits = m.limits.apply(&default_limits());
        let derived = calibration.derived_wall(WITNESS_RUN_ID).filter(|(d, _)| *d < limits.wall);
        if let Some((d, _)) = derived {
            limits.wall = d;
        }
        let command = m.witness_test().to_string();
        // The candidate's own tests, with the generic canary pair planted
        // beside them.
        let guard = crate::run::Guard {
            generic: true,
            seed: crate::trusted::nonce().into_bytes(),
            ..crate::run::Guard::default()
        };
        let ran = run_guarded(
            self.sandbox(),
            &workspace,
            &work.path().join("run"),
            |_| Ok(()),
            &command,
            &limits,
            Vec::new(),
            &guard,
        )?;
        let report = ran.report;
        // Through the trusted runner, a run passes only when the runner
        // itself says so, its stream agrees with the process, and its
        // canaries held.
        let tampered = match (&ran.runner, ran.plan.runner()) {
            (Some(r), Some(kind)) => {
                let mut signs = ran.verdict.signs.clone();
                signs.extend(r.cross_check(kind, &report, None, None));
                (!signs.is_empty() || (report.success() && !r.passed())).then(|| signs.join("; "))
            }
            _ => None,
        };
        let exit_code = match report.exit {
            Exit::Code(c) => Some(c),
            Exit::Signal(_) => None,
        };
        let mut log = report.stdout_tail.clone();
        if !report.stderr_tail.trim().is_empty() {
            if !log.is_empty() && !log.ends_with('\n') {
                log.push('\n');
            }
            log.push_str("--- stderr ---\n");
            log.push_str(&report.stderr_tail);
        }
        if report.timed_out {
            match derived {
                Some((d, ms)) => log.push_str(&format!(
                    "\n--- stopped after the wall-clock limit of {} s, derived from the sample ({WALL_FACTOR}× its witnessed run of {:.1} s, at least {} s); not a pass ---\n",
                    d.as_secs(),
                    ms as f64 / 1000.0,
                    WALL_FLOOR.as_secs()
                )),
                None => log.push_str(&format!("\n--- stopped after the wall-clock limit of {} s ---\n", limits.wall.as_secs())),
            }
        } else if let Some(hit) = report.limit_hit {
            log.push_str(&format!("\n--- stopped by the sandbox: {hit:?} ---\n"));
        }
        if let Some(signs) = &tampered {
            log.push_str(&format!(
                "\n--- the results disagree with themselves; not a pass: {signs} ---\n"
            ));
        }
        Ok(WitnessOutcome {
            command,
            exit_code,
            passed: report.success() && tampered.is_none(),
            timed_out: report.timed_out,
            wall_limit_secs: limits.wall.as_secs(),
            derived_wall: derived.is_some(),
            log: tail(&log, LOG_LIMIT),
            tree_sha256,
            archive_sha256: ingested.archive_sha256,
            environment,
            wall_ms: report.wall.as_millis() as u64,
        })
    }
}

/// The last `limit` bytes of `text`, cut at a character boundary.
fn tail(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let mut start = text.len() - limit;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("[... earlier output cut ...]\n{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use super::*;
    use crate::manifest::TIME_BASE;

    fn packet() -> Packet {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../packets/refund-invoices");
        Packet::load(&root).unwrap()
    }

    fn zip_of(dir: &Path, out: &Path) {
        crate::ingest::write_zip_from_dir(dir, out, &BTreeMap::new(), TIME_BASE).unwrap();
    }

    #[test]
    fn tail_keeps_the_end_on_a_char_boundary() {
        assert_eq!(tail("abc", 10), "abc");
        let cut = tail("ééééé", 3);
        assert!(cut.ends_with("é"), "{cut}");
        assert!(cut.starts_with("[... earlier output cut ...]"), "{cut}");
    }

    /// The starter is red and the sample is green, in the real sandbox.
    #[test]
    fn starter_is_red_and_sample_is_green() {
        let grader = Grader::for_host().unwrap();
        let packet = packet();
        let dir = tempfile::tempdir().unwrap();
        let red_zip = dir.path().join("red.zip");
        zip_of(&packet.starter_dir(), &red_zip);
        let red = grader.witness_run(&packet, &red_zip).unwrap();
        assert!(!red.passed, "{}", red.log);
        assert_ne!(red.exit_code, Some(0));
        assert!(red.log.contains("failed"), "{}", red.log);
        assert_eq!(red.command, "python3 -m pytest -q -p no:cacheprovider");
        assert!(
            red.environment.tools.iter().any(|t| t.name == "python" && t.probed.is_some()),
            "{:?}",
            red.environment
        );

        let green_zip = dir.path().join("green.zip");
        zip_of(&packet.sample_dir(), &green_zip);
        let green = grader.witness_run(&packet, &green_zip).unwrap();
        assert!(green.passed, "{}", green.log);
        assert_eq!(green.exit_code, Some(0));
        assert_ne!(green.tree_sha256, red.tree_sha256);
        // No hidden test was laid: the log names only the candidate's tests.
        assert!(!green.log.contains("test_hidden"), "{}", green.log);
    }

    #[test]
    fn a_hostile_zip_is_refused_like_a_submission() {
        let grader = Grader::for_host().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let zip = dir.path().join("evil.zip");
        {
            use std::io::Write;
            let mut z = zip::ZipWriter::new(std::fs::File::create(&zip).unwrap());
            z.start_file("../escape.py", zip::write::SimpleFileOptions::default()).unwrap();
            z.write_all(b"x").unwrap();
            z.finish().unwrap();
        }
        match grader.witness_run(&packet(), &zip) {
            Err(GradeError::Refused(why)) => {
                assert!(why.to_string().contains("escape.py"), "{why}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}
