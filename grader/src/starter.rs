//! The starter workspace a candidate receives.
//!
//! The zip carries `GATEHOUSE_PIN.toml`, naming the probed environment and the
//! gate's steps. `assemble` is the one way a workspace is built from the
//! starter and an ingested submission (its `.gatehouse/` and the platform's own
//! files set aside), shared by grading and witnessed runs.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

use crate::env::EnvProbe;
use crate::manifest::TIME_BASE;
use crate::packet::{Packet, apply_seed};
use crate::tree::Root;

/// The seed `packet check` (and the audit) fills into seed files when it
/// lays the starter a candidate receives.
pub const CHECK_SEED: &str = "0";

/// Writes the starter zip for `seed` to `out`: the starter files with
/// `{{seed}}` filled in the packet's seed files, plus the prompt as
/// `[packet] brief` (`PROMPT.md` unless the packet says otherwise). The same
/// packet and seed always give the same bytes.
pub fn write_starter(packet: &Packet, seed: &str, out: &Path) -> io::Result<()> {
    let work = crate::workdir::WorkDir::new("gatehouse-starter-")?;
    let tree = work.path().join("starter");
    lay_starter(packet, seed, &tree)?;
    crate::ingest::write_zip_from_dir(&tree, out, &BTreeMap::new(), TIME_BASE)
}

/// Lays the starter files (seed filled in) and the brief into `tree`.
fn lay_starter(packet: &Packet, seed: &str, tree: &Path) -> io::Result<()> {
    let out = Root::create(tree)?;
    packet.files()?.copy("starter", &out, "")?;
    for f in &packet.manifest.packet.seed_files {
        let text = out.read_to_string(f)?;
        out.write(f, apply_seed(&text, seed).as_bytes())?;
    }
    let prompt = packet.prompt()?;
    out.write(&packet.manifest.packet.brief, apply_seed(&prompt, seed).as_bytes())
}

/// The pin file shipped in the starter: the environment the platform uses
/// and the gate's instructions.
pub const PIN_FILE: &str = "GATEHOUSE_PIN.toml";

/// The files the platform adds to every starter of `m` (the pin file and
/// the brief). They are not the candidate's: handed back they are set aside
/// and never graded.
pub fn platform_files(m: &crate::manifest::Manifest) -> std::collections::BTreeSet<String> {
    [PIN_FILE.to_string(), m.packet.brief.clone()].into_iter().collect()
}

/// A workspace as grading and witnessed runs see it.
#[derive(Debug, Clone, Default)]
pub struct Assembled {
    /// Paths the submission itself contained, with the times it claims
    /// (its `.gatehouse/` folder and the platform's files left out).
    pub submission: std::collections::BTreeMap<String, Option<i64>>,
    /// Platform files (the pin file, the brief) the submission handed back:
    /// set aside, listed, never graded.
    pub platform_files: Vec<crate::ingest::IngestedFile>,
}

/// Assembles `workspace` (which must not exist): the packet's starter,
/// overlaid by the ingested submission. The submission's `.gatehouse/`
/// folder (the grader's own) is never taken, and the platform's files it
/// hands back are set aside. The one assembly grading and witnessed runs
/// share, so both see the same tree.
pub fn assemble(
    packet: &Packet,
    ingested: &crate::ingest::Ingested,
    workspace: &Path,
) -> io::Result<Assembled> {
    let io = |what: String| move |e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
    let ws = Root::create(workspace).map_err(io("creating the workspace".into()))?;
    packet
        .files()
        .and_then(|pk| pk.copy("starter", &ws, ""))
        .map_err(io("copying the starter".into()))?;
    let sub = Root::open(&ingested.dir).map_err(io("opening the submission".into()))?;
    let remove = |p: &str| sub.remove(p).map(drop);
    remove(".gatehouse").map_err(io("setting the submission's .gatehouse/ aside".into()))?;
    let platform = platform_files(&packet.manifest);
    let mut platform_handed_back = Vec::new();
    for f in &ingested.files {
        if platform.contains(&f.path) {
            remove(&f.path).map_err(io(format!("setting the platform file {} aside", f.path)))?;
            platform_handed_back.push(f.clone());
        }
    }
    sub.copy("", &ws, "").map_err(io("laying the submission over the starter".into()))?;
    let submission = ingested
        .files
        .iter()
        .filter(|f| !f.path.starts_with(".gatehouse/") && !platform.contains(&f.path))
        .map(|f| (f.path.clone(), f.mtime))
        .collect();
    Ok(Assembled { submission, platform_files: platform_handed_back })
}

/// The environment variable the pin file's `curl` lines read the link
/// token from; the token itself is never written into a starter (it comes
/// back inside submissions, which reviewers read and the blob store keeps).
pub const TOKEN_VAR: &str = "GATEHOUSE_TOKEN";

/// Where a candidate sends witnessed runs and the submission: the platform's
/// public URL and the assignment's link token (placeholders when unknown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    pub base_url: String,
    pub token: String,
}

impl Gate {
    /// The placeholders the command line's starter carries.
    pub fn placeholders() -> Gate {
        Gate { base_url: "<public_url>".into(), token: "<token>".into() }
    }

    fn curl(&self, path: &str) -> String {
        format!(
            "curl -fsS -H \"Authorization: Bearer {}\" -F file=@tree.zip {}{path}",
            self.token,
            self.base_url.trim_end_matches('/')
        )
    }

    /// `curl` witnessing a red run of `tree.zip`.
    pub fn curl_red(&self) -> String {
        self.curl("/api/v1/witness/red")
    }

    /// `curl` witnessing a green run of `tree.zip`.
    pub fn curl_green(&self) -> String {
        self.curl("/api/v1/witness/green")
    }

    /// `curl` submitting `tree.zip` as the final submission.
    pub fn curl_submit(&self) -> String {
        self.curl("/api/v1/submissions")
    }
}

/// How to zip the current tree for the `curl` lines.
pub const ZIP_TREE: &str = "zip -qr tree.zip . -x '.git/*' tree.zip";

/// The three steps of the gate, in words, for the pin file and the page.
pub fn gate_steps(packet: &Packet) -> Vec<String> {
    let m = &packet.manifest;
    let window = if m.workspace.model_waits_for_red {
        "the metered model endpoint opens only after the platform has witnessed a red run; before that it refuses calls"
    } else {
        "the metered model endpoint is open from the start; a witnessed red still comes first in the record"
    };
    vec![
        format!("1. red: upload your tree before the fix; the platform runs `{}` on it and accepts the run only if it fails", m.witness_test()),
        format!("2. model window: {window}"),
        "3. green: upload the fixed tree; the run must pass, and counts only after an accepted red; then submit".into(),
    ]
}

/// The text of `GATEHOUSE_PIN.toml` for `packet`, with the values `probe`
/// found in the sandbox. The same inputs always give the same text.
pub fn pin_file(packet: &Packet, probe: &EnvProbe, gate: &Gate) -> String {
    let m = &packet.manifest;
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let mut out = String::new();
    out.push_str("# The environment Gatehouse runs your tests in (witnessed runs and grading),\n");
    out.push_str("# and the gate: a witnessed red, the model window, a witnessed green.\n");
    out.push_str("# Editing this file changes nothing on the platform.\n\n");
    out.push_str(&format!(
        "[packet]\nslug = {}\nversion = {}\n\n",
        q(&m.packet.slug),
        q(&m.packet.version)
    ));

    out.push_str("# What the packet pins (a version prefix) ...\n[environment.pinned]\n");
    if let Some(py) = &m.environment.python {
        out.push_str(&format!("python = {}\n", q(py)));
    }
    for (name, pin) in m.environment.toolchains() {
        out.push_str(&format!("{} = {}\n", q(name), q(pin)));
    }
    for (name, pin) in &m.environment.tools {
        out.push_str(&format!("{} = {}\n", q(name), q(pin)));
    }
    let report = crate::env::env_report(m, probe);
    out.push_str("\n# ... and what the platform's sandbox has (probed).\n[environment.probed]\n");
    for t in &report.tools {
        out.push_str(&format!(
            "{} = {}\n",
            q(&t.name),
            q(t.probed.as_deref().unwrap_or("unknown"))
        ));
    }
    let mismatches: Vec<String> = report.mismatches.iter().map(|s| q(s)).collect();
    out.push_str(&format!("\n[environment]\nmismatches = [{}]\n\n", mismatches.join(", ")));

    out.push_str("[gate]\n");
    out.push_str(&format!("test = {}\n", q(m.witness_test())));
    out.push_str(&format!("model_waits_for_red = {}\n", m.workspace.model_waits_for_red));
    out.push_str("steps = [\n");
    for s in gate_steps(packet) {
        out.push_str(&format!("  {},\n", q(&s)));
    }
    out.push_str("]\n");
    // The token stays out of the file: the lines read it from the shell.
    let gate = Gate { base_url: gate.base_url.clone(), token: format!("${TOKEN_VAR}") };
    out.push_str(&format!("# The curl lines read your invite link's token from ${TOKEN_VAR}:\n"));
    out.push_str(&format!("#   export {TOKEN_VAR}=<the token at the end of your invite link>\n"));
    out.push_str(&format!("zip = {}\n", q(ZIP_TREE)));
    out.push_str(&format!("red = {}\n", q(&gate.curl_red())));
    out.push_str(&format!("green = {}\n", q(&gate.curl_green())));
    out.push_str(&format!("submit = {}\n", q(&gate.curl_submit())));
    out
}

/// [`write_starter`], plus `GATEHOUSE_PIN.toml` from [`pin_file`]. The same
/// packet, seed, probe and gate always give the same bytes.
pub fn write_starter_pinned(
    packet: &Packet,
    seed: &str,
    probe: &EnvProbe,
    gate: &Gate,
    out: &Path,
) -> io::Result<()> {
    let work = crate::workdir::WorkDir::new("gatehouse-starter-")?;
    let tree = work.path().join("starter");
    lay_starter(packet, seed, &tree)?;
    let pin = tree.join(PIN_FILE);
    if fs::symlink_metadata(&pin).is_ok() {
        return Err(io::Error::other(format!("the starter already has a {PIN_FILE}")));
    }
    fs::write(pin, pin_file(packet, probe, gate))?;
    crate::ingest::write_zip_from_dir(&tree, out, &BTreeMap::new(), TIME_BASE)
}

/// Lays the tree a candidate unpacks from the pinned starter zip into
/// `tree`: the starter files (seed filled in), the brief and the pin file.
/// `packet check` runs the starter and grades alternates on exactly this.
pub fn lay_received(
    packet: &Packet,
    seed: &str,
    probe: &EnvProbe,
    gate: &Gate,
    tree: &Path,
) -> io::Result<()> {
    lay_starter(packet, seed, tree)?;
    let pin = tree.join(PIN_FILE);
    if fs::symlink_metadata(&pin).is_ok() {
        return Err(io::Error::other(format!("the starter already has a {PIN_FILE}")));
    }
    fs::write(pin, pin_file(packet, probe, gate))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn probe() -> EnvProbe {
        EnvProbe {
            python: Some("3.11.9".into()),
            tools: [("pytest".to_string(), Some("8.3.2".to_string()))].into_iter().collect(),
            stdlib: Default::default(),
            runner_modules: Default::default(),
        }
    }

    fn read_zip(path: &Path) -> BTreeMap<String, Vec<u8>> {
        use std::io::Read;
        let mut z = zip::ZipArchive::new(fs::File::open(path).unwrap()).unwrap();
        let mut out = BTreeMap::new();
        for i in 0..z.len() {
            let mut f = z.by_index(i).unwrap();
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes).unwrap();
            out.insert(f.name().unwrap().to_string(), bytes);
        }
        out
    }

    #[test]
    fn pinned_starter_carries_the_probe_and_the_gate() {
        let packet = Packet::load(
            &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../packets/refund-invoices"),
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let gate = Gate { base_url: "https://gh.example/".into(), token: "tok123".into() };
        let (a, b) = (dir.path().join("a.zip"), dir.path().join("b.zip"));
        write_starter_pinned(&packet, "7", &probe(), &gate, &a).unwrap();
        write_starter_pinned(&packet, "7", &probe(), &gate, &b).unwrap();
        assert_eq!(
            fs::read(&a).unwrap(),
            fs::read(&b).unwrap(),
            "the same inputs give the same bytes"
        );
        let files = read_zip(&a);
        assert!(
            files.contains_key("gate.py") && files.contains_key("PROMPT.md"),
            "{:?}",
            files.keys()
        );
        let pin = String::from_utf8(files[PIN_FILE].clone()).unwrap();
        let parsed: toml::Value = toml::from_str(&pin).unwrap();
        assert_eq!(parsed["environment"]["pinned"]["python"].as_str(), Some("3.11"));
        assert_eq!(parsed["environment"]["probed"]["python"].as_str(), Some("3.11.9"));
        assert_eq!(parsed["environment"]["probed"]["pytest"].as_str(), Some("8.3.2"));
        // pytest is pinned to 9 and the probe says 8.3.2.
        let mismatches = parsed["environment"]["mismatches"].as_array().unwrap();
        assert_eq!(mismatches.len(), 1, "{pin}");
        assert_eq!(parsed["gate"]["model_waits_for_red"].as_bool(), Some(true));
        assert_eq!(
            parsed["gate"]["red"].as_str(),
            Some(
                "curl -fsS -H \"Authorization: Bearer $GATEHOUSE_TOKEN\" -F file=@tree.zip https://gh.example/api/v1/witness/red"
            )
        );
        assert!(!pin.contains("tok123"), "the link token is never written into the starter: {pin}");
        assert!(parsed["gate"]["submit"].as_str().unwrap().ends_with("/api/v1/submissions"));
        assert_eq!(parsed["gate"]["steps"].as_array().unwrap().len(), 3);
        // A different probe is a different input, hence different bytes.
        let mut other = probe();
        other.python = Some("3.12.1".into());
        write_starter_pinned(&packet, "7", &other, &gate, &b).unwrap();
        assert_ne!(fs::read(&a).unwrap(), fs::read(&b).unwrap());
        assert!(Gate::placeholders().curl_green().contains("Bearer <token>"));
    }
}
