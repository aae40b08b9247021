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
