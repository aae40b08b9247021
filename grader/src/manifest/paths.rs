//! Path safety: every path a manifest names stays inside its folder.

use super::problems::quoted;
use super::*;

impl Manifest {
    /// Checks every path the manifest names: each must stay inside its
    /// folder (relative, no `..`, no absolute path, no backslash), and names
    /// that become path components (step ids, variant names) must be plain
    /// names. Returns (text to locate, message) for each bad one.
    pub(super) fn check_paths(&self) -> Vec<(String, String)> {
        let path = |what: &str, p: &str| -> Option<(String, String)> {
            (!is_safe_path(p)).then(|| (quoted(p), format!("{what} {p:?} must be a relative path inside the folder (no `..`, no absolute path, no backslash)")))
        };
        let glob = |what: &str, g: &str| -> Option<(String, String)> {
            (g.is_empty() || g.starts_with('/') || g.contains('\\') || g.split('/').any(|c| c == ".." || c == "."))
                .then(|| (quoted(g), format!("{what} {g:?} must be a relative pattern inside the folder (no `..`, no absolute path)")))
        };
        // Files packet code writes in the grader's folder are kept from the
        // evidence folder, which the candidate's confined processes cannot
        // write; anywhere else in `.gatehouse/` they could rewrite them.
        let keep_writable = |g: &str| -> Option<(String, String)> {
            let grader_dir = g == ".gatehouse"
                || g.starts_with(".gatehouse/")
                || g.starts_with(".gatehouse*")
                || g.starts_with(".gatehouse?");
            (grader_dir && !g.starts_with(&format!("{}/", crate::sandbox::EVIDENCE_DIR))).then(|| {
                (quoted(g), format!(
                    "keep pattern {g:?} names files in .gatehouse/ that the candidate's processes can rewrite: packet code writes what a step keeps to the evidence folder ($GATEHOUSE_EVIDENCE, harness `evidence_path`) and the step keeps it as \".gatehouse/evidence/...\""
                ))
            })
        };
        let name = |what: &str, n: &str| -> Option<(String, String)> {
            let ok = !n.is_empty()
                && n != "."
                && n != ".."
                && n.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            (!ok).then(|| (quoted(n), format!("{what} {n:?} must be a plain name (letters, digits, '-', '_', '.'), as it names a folder")))
        };
        let m = self;
        let mut found: Vec<(String, String)> = Vec::new();
        let mut push = |r: Option<(String, String)>| found.extend(r);
        push(path("packet.brief", &m.packet.brief));
        for f in &m.packet.seed_files {
            push(path("seed file", f));
        }
        for f in &m.policy.frozen {
            push(path("frozen file", f));
        }
        for c in &m.criteria {
            if let Some(f) = &c.file {
                push(path("criterion file", f));
            }
        }
        for k in m.sample.times.keys() {
            push(path("sample.times key", k));
        }
        for s in &m.steps {
            push(name("step id", &s.id));
            if let Some(j) = &s.junit {
                push(path("junit", j));
            }
            for k in &s.keep {
                push(glob("keep pattern", k));
                push(keep_writable(k));
            }
        }
        if let Some(mu) = &m.mutation {
            push(path("mutation.target", &mu.target));
        }
        for v in &m.variants {
            push(name("variant name", &v.name));
            for r in &v.remove {
                push(path("variant remove", r));
            }
            for k in v.times.keys() {
                push(path("variant times key", k));
            }
        }
        for f in &m.failures {
            f.detect.walk(&mut |d| {
                let r = match d {
                    Detector::Missing { paths, .. } | Detector::Present { paths, .. } => {
                        paths.iter().find_map(|p| glob("path pattern", p))
                    }
                    Detector::OutsideAllowlist { allow } => {
                        allow.iter().find_map(|p| glob("allowlist pattern", p))
                    }
                    Detector::Pattern { files, .. } | Detector::StdlibOnly { files, .. } => {
                        files.iter().find_map(|p| glob("file pattern", p))
                    }
                    Detector::Frozen { paths: Some(paths) } => {
                        paths.iter().find_map(|p| path("frozen file", p))
                    }
                    Detector::PytestLog { file, nodes_from, .. } => path("log file", file)
                        .or_else(|| nodes_from.as_deref().and_then(|n| path("nodes_from", n))),
                    Detector::Order { before, after, .. } => {
                        path("order file", before).or_else(|| path("order file", after))
                    }
                    Detector::DiffAllowlist { diff, allow, allow_file } => path("diff file", diff)
                        .or_else(|| allow.iter().find_map(|p| glob("allowlist pattern", p)))
                        .or_else(|| allow_file.as_deref().and_then(|a| path("allow_file", a))),
                    Detector::DiffInvalid { diff } => path("diff file", diff),
                    Detector::Ledger { file, .. } => path("ledger file", file),
                    Detector::Digest { files, claimed_in, .. } => files
                        .iter()
                        .find_map(|p| glob("digest file", p))
                        .or_else(|| path("claimed_in", claimed_in)),
                    Detector::Witness { file: Some(f), .. } => path("witness file", f),
                    _ => None,
                };
                push(r);
            });
        }
        found
    }
}

pub(super) fn check_lay(lay: &Lay) -> Result<(), String> {
    let (from, to) = lay.paths();
    for p in [&from, &to] {
        if !is_safe_path(p) {
            return Err(format!("lay path {p:?} must be relative, with no `..`"));
        }
    }
    Ok(())
}
