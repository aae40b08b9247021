//! The starter workspace a candidate receives.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

use crate::manifest::TIME_BASE;
use crate::packet::{Packet, apply_seed, copy_path};

/// Writes the starter zip for `seed` to `out`: the starter files with
/// `{{seed}}` filled in the packet's seed files, plus the prompt as
/// `[packet] brief` (`PROMPT.md` unless the packet says otherwise). The same
/// packet and seed always give the same bytes.
pub fn write_starter(packet: &Packet, seed: &str, out: &Path) -> io::Result<()> {
    let work = tempfile::Builder::new().prefix("gatehouse-starter-").tempdir()?;
    let tree = work.path().join("starter");
    copy_path(&packet.starter_dir(), &tree)?;
    for f in &packet.manifest.packet.seed_files {
        let path = tree.join(f);
        let text = fs::read_to_string(&path)?;
        fs::write(&path, apply_seed(&text, seed))?;
    }
    let prompt = packet.prompt()?;
    fs::write(tree.join(&packet.manifest.packet.brief), apply_seed(&prompt, seed))?;
    crate::ingest::write_zip_from_dir(&tree, out, &BTreeMap::new(), TIME_BASE)
}
