//! Keeping an audited mutant: `mutants/audit/<id>.diff`, a unified diff of
//! the sample file the audit mutated ([`super::kept`]), so from then on
//! `packet check` requires the hidden tests to kill it.

use std::fs;
use std::path::PathBuf;

use super::classify::Outcome;
use super::kept::{DIR, plain_id};
use super::{AuditReport, MutantReport};
use crate::packet::Packet;

/// Writes mutant `id` of `report` (`source`: the sample's target) into the
/// packet at `packet.root` and checks the packet reads it back as the same
/// mutated file. Refuses an unknown, invalid or crashed mutant, an audit
/// judged by other steps than the ones `packet check` runs kept mutants
/// through, and an id already taken.
pub fn save(
    packet: &Packet,
    report: &AuditReport,
    id: &str,
    source: &str,
) -> Result<PathBuf, String> {
    let m: &MutantReport = report.mutants.iter().find(|m| m.id == id).ok_or_else(|| {
        let ids: Vec<&str> = report.mutants.iter().map(|m| m.id.as_str()).collect();
        format!("--save {id:?}: the audit has no mutant of that id (it has {})", ids.join(", "))
    })?;
    if !matches!(m.outcome, Outcome::Killed | Outcome::Survived | Outcome::Explained) {
        return Err(format!(
            "--save {id:?}: only a killed or survived mutant can be kept; this one is {} ({})",
            m.outcome.word(),
            m.reason
        ));
    }
    if !plain_id(id) {
        return Err(format!(
            "--save {id:?}: a mutant id must be a plain file name (letters, digits, -, _, .)"
        ));
    }
    let default_steps = super::run::hidden_steps(packet, &[]).map_err(|e| e.0)?;
    if report.steps != default_steps {
        return Err(format!(
            "--save {id:?}: the audit ran steps {} but `packet check` judges kept mutants by {} (`[mutation] hidden_step`, else every step laying a hidden test); audit without --step to keep it",
            report.steps.join(", "),
            default_steps.join(", ")
        ));
    }
    let mutated = crate::diff::apply_diff(source, &m.diff).map_err(|e| {
        format!(
            "--save {id:?}: the mutant's diff does not apply to the sample's {}: {e}",
            report.target
        )
    })?;
    let taken = |dir: &std::path::Path| {
        fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.path().file_stem().is_some_and(|s| s == id))
    };
    let dir = packet.root.join(DIR);
    if taken(&packet.root.join("mutants")) || taken(&dir) {
        return Err(format!(
            "--save {id:?}: {} already has a mutant of that id",
            packet.root.join("mutants").display()
        ));
    }
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(format!("{id}.diff"));
    fs::write(&path, &m.diff).map_err(|e| format!("{}: {e}", path.display()))?;
    // Read back as `packet check` will.
    let back = Packet::load(&packet.root).map_err(|e| e.to_string()).and_then(|p| {
        let kept = super::kept::list(&p)?;
        match kept.into_iter().find(|k| k.id == id) {
            Some(k) if k.file == report.target => k.apply(&p).map(|(_, m)| Some(m)),
            _ => Ok(None),
        }
    });
    match back {
        Ok(Some(back)) if back == mutated => Ok(path),
        other => {
            let _ = fs::remove_file(&path);
            let _ = fs::remove_dir(&dir);
            Err(format!(
                "--save {id:?}: the packet does not read {} back as the audited mutant ({other:?}); nothing was kept",
                path.display()
            ))
        }
    }
}
