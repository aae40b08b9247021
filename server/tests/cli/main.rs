//! Tests of the `gatehouse` command line, run as a real process.

mod audit;
#[path = "../common/fake_openai.rs"]
mod fake_openai;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn gatehouse(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gatehouse")).args(args).output().expect("running gatehouse")
}

fn packet(slug: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../packets").join(slug)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Zips the starter overlaid by `overlay` (a packet folder such as
/// `sample`), with `edit` applied, into `out`.
fn submission(slug: &str, overlay: &str, edit: impl FnOnce(&Path), out: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    grader::tree::copy_path(&packet(slug).join("starter"), &tree).unwrap();
    grader::tree::copy_path(&packet(slug).join(overlay), &tree).unwrap();
    edit(&tree);
    let m = grader::packet::Packet::load(&packet(slug)).unwrap().manifest;
    let times: BTreeMap<String, i64> =
        m.sample.times.iter().map(|(k, v)| (k.clone(), grader::manifest::TIME_BASE + v)).collect();
    grader::ingest::write_zip_from_dir(&tree, out, &times, grader::manifest::TIME_BASE).unwrap();
}

#[test]
fn grade_sample_is_clean_json() {
    let dir = tempfile::tempdir().unwrap();
    let zip = dir.path().join("s.zip");
    submission("refund-invoices", "sample", |_| {}, &zip);
    let out = gatehouse(&[
        "grade",
        packet("refund-invoices").to_str().unwrap(),
        zip.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["findings"], serde_json::json!([]));
    assert_eq!(v["decision"], "advance");
    assert!(v["criteria"].as_array().unwrap().len() >= 4);
    assert_eq!(v["receipt"]["packet"]["slug"], "refund-invoices");
    assert!(v["receipt"]["runs"].as_array().unwrap().iter().any(|r| r["id"] == "step:hidden"));
}

#[test]
fn grade_reports_failure_ids_in_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let zip = dir.path().join("bad.zip");
    // A hand-written red log: no pytest session header, no summary.
    submission(
        "refund-invoices",
        "sample",
        |t| std::fs::write(t.join("artifacts/red.log"), "it failed, trust me\n").unwrap(),
        &zip,
    );
    let args = [
        packet("refund-invoices").to_str().unwrap().to_string(),
        zip.to_str().unwrap().to_string(),
    ];
    let out = gatehouse(&["grade", &args[0], &args[1], "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> =
        v["findings"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"forged-red-log"), "{ids:?}");
    assert_ne!(v["decision"], "advance");

    let out = gatehouse(&["grade", &args[0], &args[1]]);
    assert_eq!(out.status.code(), Some(0));
    let t = text(&out.stdout);
    assert!(t.contains("decision:") && t.contains("forged-red-log"), "{t}");
    assert!(t.lines().count() < 40, "text output should be short:\n{t}");
}

#[test]
fn refused_submission_exits_2_with_reason() {
    let dir = tempfile::tempdir().unwrap();
    let zip = dir.path().join("evil.zip");
    let mut w = zip::ZipWriter::new(std::fs::File::create(&zip).unwrap());
    w.start_file("../escape.py", zip::write::SimpleFileOptions::default()).unwrap();
    w.write_all(b"print('out')\n").unwrap();
    w.finish().unwrap();
    let out =
        gatehouse(&["grade", packet("refund-invoices").to_str().unwrap(), zip.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("refused") && err.contains("escape.py"), "{err}");
    assert!(
        !dir.path().join("escape.py").exists()
            && !dir.path().parent().unwrap().join("escape.py").exists()
    );

    // Limits are configurable: a good submission over a lowered entry cap
    // is refused with the rule named.
    let good = dir.path().join("good.zip");
    submission("refund-invoices", "sample", |_| {}, &good);
    let out = gatehouse(&[
        "grade",
        packet("refund-invoices").to_str().unwrap(),
        good.to_str().unwrap(),
        "--max-entries",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("entries"), "{}", text(&out.stderr));

    let not_zip = dir.path().join("notes.zip");
    std::fs::write(&not_zip, "not a zip").unwrap();
    let out = gatehouse(&[
        "grade",
        packet("refund-invoices").to_str().unwrap(),
        not_zip.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn grader_failure_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let zip = dir.path().join("s.zip");
    submission("refund-invoices", "sample", |_| {}, &zip);
    let out = gatehouse(&[
        "grade",
        dir.path().join("no-such-packet").to_str().unwrap(),
        zip.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("packet.toml"), "{}", text(&out.stderr));
}

#[test]
fn packet_check_names_manifest_line() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("refund-invoices");
    grader::tree::copy_path(&packet("refund-invoices"), &copy).unwrap();
    let manifest = copy.join("packet.toml");
    let src = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, src.replacen("[commands]", "[commands]\nlint = true", 1)).unwrap();
    let out = gatehouse(&["packet", "check", copy.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let t = text(&out.stdout);
    let line = src.lines().position(|l| l == "[commands]").unwrap() + 2;
    assert!(t.contains(&format!("packet.toml:{line}: unknown field `lint`")), "{t}");
}

#[test]
fn starter_zip_is_deterministic_and_hides_the_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.zip"), dir.path().join("b.zip"));
    for out in [&a, &b] {
        let o = gatehouse(&[
            "packet",
            "starter",
            packet("refund-invoices").to_str().unwrap(),
            "--seed",
            "7",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let mut names: Vec<String> = zip::ZipArchive::new(std::fs::File::open(&a).unwrap())
        .unwrap()
        .file_names()
        .map(|n| n.unwrap().to_string())
        .collect();
    names.sort();
    assert!(
        names.contains(&"PROMPT.md".to_string()) && names.contains(&"invoices.py".to_string()),
        "{names:?}"
    );
    // The pin file names the sandbox's environment and, from the command
    // line, placeholders for the assignment's URL and token.
    assert!(names.contains(&"GATEHOUSE_PIN.toml".to_string()), "{names:?}");
    let starter: Vec<String> = grader::tree::list_paths(&packet("refund-invoices").join("starter"));
    for n in &names {
        assert!(
            n == "PROMPT.md" || n == "GATEHOUSE_PIN.toml" || starter.contains(n),
            "{n} is not a starter file"
        );
    }
}

#[test]
fn starter_ships_the_brief_under_the_packets_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lc.zip");
    let o = gatehouse(&[
        "packet",
        "starter",
        packet("log-classifier").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let mut zip = zip::ZipArchive::new(std::fs::File::open(&out).unwrap()).unwrap();
    let names: Vec<String> = zip.file_names().map(|n| n.unwrap().to_string()).collect();
    // log-classifier's candidates write their own PROMPT.md.
    assert!(
        names.contains(&"BRIEF.md".to_string()) && !names.contains(&"PROMPT.md".to_string()),
        "{names:?}"
    );
    let mut brief = String::new();
    std::io::Read::read_to_string(&mut zip.by_name("BRIEF.md").unwrap(), &mut brief).unwrap();
    assert_eq!(brief, std::fs::read_to_string(packet("log-classifier").join("prompt.md")).unwrap());
}

#[test]
fn starter_fills_the_seed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tb.zip");
    let o = gatehouse(&[
        "packet",
        "starter",
        packet("token-bucket").to_str().unwrap(),
        "--seed",
        "seed-4711",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let mut zip = zip::ZipArchive::new(std::fs::File::open(&out).unwrap()).unwrap();
    let mut takehome = String::new();
    std::io::Read::read_to_string(&mut zip.by_name("TAKEHOME.md").unwrap(), &mut takehome).unwrap();
    assert!(takehome.contains("seed-4711") && !takehome.contains("{{seed}}"), "{takehome}");
}
