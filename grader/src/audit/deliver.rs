//! Targets a candidate hands back as a diff. Some packets replay the
//! candidate's unified diff rather than the tree: tax-rounding's oracle
//! applies `patch.diff` to a pristine starter, so the sample's own
//! `taxlib/compute.py` is never what its hidden tests run. A sample file
//! that is a unified diff of exactly the target, and turns the starter's
//! copy into the sample's, *delivers* the target: every mutant (and the
//! audit's canary) is laid with that diff rewritten to deliver the mutated
//! file instead, so the hidden steps run what a candidate's diff would
//! make them run. Pure but for reading the packet.

use crate::diff::{apply_diff, split_diff};
use crate::packet::{Packet, apply_seed};

/// A sample diff (`path`, e.g. `patch.diff`) that delivers the target,
/// and the starter's copy of the target it patches (`base`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub path: String,
    pub base: String,
}

/// The sample's diffs (`*.diff`, `*.patch`) that deliver `target`: each a
/// unified diff of `target` alone that turns the starter's copy (the seed
/// filled in as a candidate receives it) into the sample's.
pub fn deliveries(packet: &Packet, target: &str) -> Result<Vec<Delivery>, String> {
    let pk = packet.files().map_err(|e| format!("{}: {e}", packet.root.display()))?;
    let (Ok(base), Ok(sample)) = (
        pk.read_to_string(&format!("starter/{target}")),
        pk.read_to_string(&format!("sample/{target}")),
    ) else {
        return Ok(Vec::new());
    };
    let base = if packet.manifest.packet.seed_files.iter().any(|f| f == target) {
        apply_seed(&base, crate::starter::CHECK_SEED)
    } else {
        base
    };
    let mut out = Vec::new();
    for path in pk.files("sample").unwrap_or_default() {
        if !(path.ends_with(".diff") || path.ends_with(".patch")) {
            continue;
        }
        let Ok(text) = pk.read_to_string(&format!("sample/{path}")) else { continue };
        let Ok(parts) = split_diff(&text) else { continue };
        if let [(file, part)] = parts.as_slice()
            && file == target
            && apply_diff(&base, part).is_ok_and(|patched| patched == sample)
        {
            out.push(Delivery { path, base: base.clone() });
        }
    }
    Ok(out)
}

/// A unified diff (`a/`, `b/` headers, three lines of context) turning
/// `old` into `new`, as `git apply` and `patch -p1` read it.
pub fn unified(path: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

/// The files to lay for a mutated target: the target itself, and each
/// delivering diff rewritten to deliver the mutated file.
pub fn writes(target: &str, mutated: &str, deliveries: &[Delivery]) -> Vec<(String, Vec<u8>)> {
    std::iter::once((target.to_string(), mutated.as_bytes().to_vec()))
        .chain(
            deliveries
                .iter()
                .map(|d| (d.path.clone(), unified(target, &d.base, mutated).into_bytes())),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewritten_delivery_applies_to_the_base_and_gives_the_mutant() {
        let base = "def f(x):\n    return x\n\n\ndef g():\n    return 1\n";
        let mutated = "def f(x):\n    return x + 1\n\n\ndef g():\n    return 1\n";
        let d = unified("pkg/m.py", base, mutated);
        assert!(d.starts_with("--- a/pkg/m.py\n+++ b/pkg/m.py\n@@"), "{d}");
        assert_eq!(apply_diff(base, &d).unwrap(), mutated);
        let w =
            writes("m.py", mutated, &[Delivery { path: "patch.diff".into(), base: base.into() }]);
        assert_eq!(w[0], ("m.py".to_string(), mutated.as_bytes().to_vec()));
        assert_eq!(w[1].0, "patch.diff");
        assert_eq!(apply_diff(base, std::str::from_utf8(&w[1].1).unwrap()).unwrap(), mutated);
        // Nothing to rewrite: only the target.
        assert_eq!(writes("m.py", mutated, &[]).len(), 1);
    }
}
