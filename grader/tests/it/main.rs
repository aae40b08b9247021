//! The grader's one integration-test binary.

mod check;
mod crashes;
mod detectors;
mod forgery;
mod fuzz;
mod hostile_packets;
mod ingest;
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
