//! Mutants kept from an audit: `mutants/audit/<id>.diff`, each a unified
//! diff of one sample file (the file its header names, so a packet keeps
//! mutants of every file the candidate writes, not only `[mutation]
//! target`). `packet check` runs each through the audit's hidden-test
//! steps and requires a kill, unless `mutants/EQUIVALENT.md` explains it.
//! They are the hidden tests' mutants only: unlike the packet's own
//! `mutants/<id>` files, they are never run against a candidate's tests
//! (`[mutation] run`), so keeping one never changes how a candidate's own
//! tests are scored. `save` writes them and imports this module; this
//! module imports nothing of `save`.

use crate::diff::{apply_diff, split_diff};
use crate::packet::Packet;

/// The folder of kept mutants in a packet.
pub const DIR: &str = "mutants/audit";

/// Whether `id` can name a file in `mutants/`.
pub fn plain_id(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// One kept mutant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    pub id: String,
    /// The sample file it mutates.
    pub file: String,
    pub diff: String,
}

impl Kept {
    /// The sample's copy of the file and the mutated file.
    pub fn apply(&self, packet: &Packet) -> Result<(String, String), String> {
        let source = super::explain::sample_source(packet, &self.file)
            .ok_or_else(|| format!("{DIR}/{}.diff: the sample has no {}", self.id, self.file))?;
        let mutated = apply_diff(&source, &self.diff).map_err(|e| {
            format!("{DIR}/{}.diff: does not apply to the sample's {}: {e}", self.id, self.file)
        })?;
        Ok((source, mutated))
    }
}

/// The packet's kept mutants, by id. Anything in the folder but a
/// `<id>.diff` of one file is an error naming it.
pub fn list(packet: &Packet) -> Result<Vec<Kept>, String> {
    let pk = packet.files().map_err(|e| format!("{}: {e}", packet.root.display()))?;
    if !pk.is_dir(DIR) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for (name, kind) in pk.entries(DIR).map_err(|e| format!("{DIR}: {e}"))? {
        let rel = format!("{DIR}/{name}");
        let id = match name.strip_suffix(".diff") {
            Some(id) if kind == crate::tree::Kind::File && plain_id(id) => id,
            _ => return Err(format!("{rel}: a kept mutant is a file <id>.diff (a plain id)")),
        };
        let diff = pk.read_to_string(&rel).map_err(|e| format!("{rel}: {e}"))?;
        let parts = split_diff(&diff).map_err(|e| format!("{rel}: {e}"))?;
        let [(file, _)] = parts.as_slice() else {
            return Err(format!(
                "{rel}: the diff names {} files; a mutant changes one",
                parts.len()
            ));
        };
        out.push(Kept { id: id.to_string(), file: file.clone(), diff });
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
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
