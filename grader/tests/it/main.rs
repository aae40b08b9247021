//! The grader's one integration-test binary.
//!
//! It uses the real sandbox (tests run as root), real zips and real pytest
//! runs: the sandbox's containment against hostile programs, ingestion refusals
//! and normalisation (the same files zipped flat, in a folder, by Finder and by
//! PowerShell ingest and grade alike), property tests (`fuzz.rs`, proptest) of
//! every parser of candidate bytes (zip ingestion, JUnit XML, JSONL ledgers,
//! unified diffs, pytest logs, manifests), every detector kind firing and
//! staying quiet, receipt determinism, and `packet check` of every built-in
//! packet (which also proves every failure id fires on its variant and stays
//! quiet on the sample). The largest areas are folders of one module per area:
//! `sandbox/` (basics, limits, channel, isolation, init, graders) and `ingest/`
//! (good, paths, entries, sizes, damaged, zip_styles), their shared helpers in
//! `mod.rs`.

mod audit_langs;
mod check;
mod crashes;
mod detectors;
mod forgery;
mod fuzz;
mod hostile_packets;
mod ingest;
mod judge;
mod judge_go;
mod judge_hacks;
mod judge_node;
mod lang_go;
mod lang_node;
mod leftovers;
mod mechanisms;
mod packets;
mod pipeline;
mod reward_hacks;
mod sandbox;
mod tidy;
mod witness;

use std::sync::OnceLock;

use grader::grade::Grader;

/// One grader (and one host probe) for the whole test binary.
pub fn grader() -> &'static Grader {
    static GRADER: OnceLock<Grader> = OnceLock::new();
    GRADER.get_or_init(|| Grader::for_host().expect("the host sandbox works"))
}

/// Zips the folder `dir` into `zip` as a desktop would, every entry at
/// `TIME_BASE` (no entry times of its own).
pub fn zip_dir(dir: &std::path::Path, zip: &std::path::Path) {
    grader::ingest::write_zip_from_dir(dir, zip, &Default::default(), grader::manifest::TIME_BASE)
        .unwrap_or_else(|e| panic!("zipping {}: {e}", dir.display()));
}

/// A copy of the packet at `root` that declares `judge = "shared"` (its
/// tests beside the candidate's code, with the canaries and the runners'
/// cross-checks): the control that shows a forgery the judge apart
/// contains is live, and the shared path's own defences at work.
pub fn shared_copy(root: &std::path::Path) -> (tempfile::TempDir, grader::packet::Packet) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(root.file_name().unwrap());
    grader::tree::copy_path(root, &dir).unwrap();
    let text = std::fs::read_to_string(dir.join("packet.toml")).unwrap();
    let line = "[packet]\njudge = \"shared\"\njudge_reason = \"the tests' control\"\n";
    let manifest = match text.strip_prefix("[packet]\n") {
        Some(rest) => format!("{line}{rest}"),
        None => text.replacen("\n[packet]\n", &format!("\n{line}"), 1),
    };
    assert_ne!(manifest, text, "a [packet] table");
    std::fs::write(dir.join("packet.toml"), manifest).unwrap();
    let p = grader::packet::Packet::load(&dir).expect("the shared copy loads");
    (tmp, p)
}

/// Lays `files` over the folder `dir`: each path gets its text (folders
/// made as needed), or is removed when the text is `None`.
pub fn lay(dir: &std::path::Path, files: &[(&str, Option<&str>)]) {
    for (path, text) in files {
        let target = dir.join(path);
        match text {
            Some(t) => {
                std::fs::create_dir_all(target.parent().unwrap()).unwrap();
                std::fs::write(&target, t).unwrap();
            }
            None => {
                let _ = std::fs::remove_file(&target);
            }
        }
    }
}

/// The receipt as pretty JSON without its `timings` (what its digest
/// covers), and the unified diff of two such texts: for the message of a
/// failed determinism check.
pub fn receipt_diff(a: &grader::grade::Scorecard, b: &grader::grade::Scorecard) -> String {
    let text = |card: &grader::grade::Scorecard| {
        let mut v = serde_json::to_value(&card.receipt).expect("receipt to JSON");
        v.as_object_mut().expect("an object").remove("timings");
        serde_json::to_string_pretty(&v).expect("JSON text")
    };
    let (a, b) = (text(a), text(b));
    similar::TextDiff::from_lines(&a, &b).unified_diff().context_radius(2).to_string()
}
