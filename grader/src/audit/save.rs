//! Keeping an audited mutant as a packet mutant: `mutants/<id>.diff`, a
//! unified diff against the sample's `[mutation] target`, the format
//! `packet check` already reads (`packets/FORMAT.md`), so from then on the
//! hidden tests must kill it.

use std::fs;
use std::path::PathBuf;

use super::classify::Outcome;
use super::{AuditReport, MutantReport};
use crate::packet::Packet;

/// Whether `id` can name a file in `mutants/`.
pub fn plain_id(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Writes mutant `id` of `report` (`source`: the sample's target) into the packet at `packet.root` and
/// checks the packet reads it back as the same mutated file. Refuses an
/// unknown, invalid or crashed mutant, a packet whose `[mutation] target`
/// is not the audited file, and an id already taken.
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
    if !matches!(m.outcome, Outcome::Killed | Outcome::Survived) {
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
    let slug = &packet.manifest.packet.slug;
    let Some(mu) = &packet.manifest.mutation else {
        return Err(format!(
            "--save {id:?}: {slug} has no [mutation] table, and a kept mutant is a diff against `[mutation] target`; add [mutation] (target = {:?}, run, hidden_step) to packet.toml first",
            report.target
        ));
    };
    if mu.target != report.target {
        return Err(format!(
            "--save {id:?}: the audit mutated {} but {slug}'s [mutation] target is {}; audit that file to keep its mutants",
            report.target, mu.target
        ));
    }
    let mutated = crate::diff::apply_diff(source, &m.diff).map_err(|e| {
        format!(
            "--save {id:?}: the mutant's diff does not apply to the sample's {}: {e}",
            report.target
        )
    })?;
    let dir = packet.root.join("mutants");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let stem_taken = fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .any(|e| e.path().file_stem().is_some_and(|s| s == id));
    if stem_taken {
        return Err(format!("--save {id:?}: {} already has a mutant of that id", dir.display()));
    }
    let path = dir.join(format!("{id}.diff"));
    fs::write(&path, &m.diff).map_err(|e| format!("{}: {e}", path.display()))?;
    // Read back as `packet check` will.
    let back = Packet::load(&packet.root)
        .map_err(|e| e.to_string())
        .and_then(|p| p.mutants().map_err(|e| e.to_string()))
        .map(|all| all.into_iter().find(|(i, _)| i == id).map(|(_, b)| b));
    match back {
        Ok(Some(bytes)) if bytes == mutated.as_bytes() => Ok(path),
        other => {
            let _ = fs::remove_file(&path);
            Err(format!(
                "--save {id:?}: the packet does not read {} back as the audited mutant ({other:?}); nothing was kept",
                path.display()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_must_be_plain_file_names() {
        let check = |id: &str, ok: bool| assert_eq!(super::plain_id(id), ok, "{id}");
        check("rule-total-3-boundary", true);
        check("model-add-1", true);
        check("../x", false);
        check("a/b", false);
        check(".hidden", false);
        check("", false);
    }
}
