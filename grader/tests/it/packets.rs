//! The built-in packet library passes `packet check`: one test per packet so
//! they run side by side and a failure names its packet.

use std::path::Path;

use grader::check::check_packet;

fn check(slug: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packets").join(slug);
    let report = check_packet(crate::grader(), &dir);
    let failed: Vec<String> =
        report.failures().map(|i| format!("{} — {}", i.name, i.detail)).collect();
    assert!(report.ok(), "{slug} fails packet check:\n  {}", failed.join("\n  "));
    // Every built-in packet that keeps packet-written evidence starts the
    // candidate's code confined (issue #9): the lint stays quiet.
    let unconfined: Vec<String> = report
        .items
        .iter()
        .filter(|i| i.name.contains("starts the candidate's code confined"))
        .map(|i| format!("{} — {}", i.name, i.detail))
        .collect();
    assert!(unconfined.is_empty(), "{slug}:\n  {}", unconfined.join("\n  "));
    // Every hidden-test step maps its failing tests to the ids they prove,
    // and every mutant of the packet is killed or explained (issue #28).
    let tableless: Vec<&str> = report
        .warnings()
        .filter(|w| w.name == "every hidden-test step has a [proves] table")
        .map(|w| w.detail.as_str())
        .collect();
    assert!(tableless.is_empty(), "{slug}: {tableless:?}");
    match report.mutants {
        Some(mutants) => {
            assert_eq!(mutants.survived, 0, "{slug}: {mutants:?}");
            assert!(mutants.killed + mutants.explained > 0, "{slug}: {mutants:?}");
        }
        None => panic!("{slug}: no mutant counts"),
    }
    // A self-test that checked nothing would pass vacuously.
    assert!(report.items.iter().any(|i| i.name.starts_with("variant ")), "{slug} has no variants");
    // What grading the sample measured is recorded with the report, for
    // the platform to store with the version.
    let c =
        report.calibration.as_ref().unwrap_or_else(|| panic!("{slug}: no calibration recorded"));
    assert!(!c.digest.is_empty() && !c.run_ms.is_empty(), "{slug}: {c:?}");
    // The variants that change only the mutated file reuse the sample's
    // mutant runs (`grade::memo`) instead of running them again.
    let packet = grader::packet::Packet::load(&dir).unwrap();
    if packet.manifest.mutation.is_some() {
        assert!(report.reused_runs > 0, "{slug}: no mutant run was reused");
    }
}

#[test]
fn refund_invoices() {
    check("refund-invoices");
}

#[test]
fn retry_ticket() {
    check("retry-ticket");
}

#[test]
fn retry_ticket_go() {
    check("retry-ticket-go");
}

#[test]
fn token_bucket() {
    check("token-bucket");
}

#[test]
fn token_bucket_ts() {
    check("token-bucket-ts");
}

#[test]
fn tax_rounding() {
    check("tax-rounding");
}

#[test]
fn sticky_404() {
    check("sticky-404");
}

#[test]
fn null_status() {
    check("null-status");
}

#[test]
fn room_holds() {
    check("room-holds");
}

#[test]
fn intents_ledger() {
    check("intents-ledger");
}

#[test]
fn resume_download() {
    check("resume-download");
}

#[test]
fn dead_end_deploy() {
    check("dead-end-deploy");
}

#[test]
fn log_classifier() {
    check("log-classifier");
}

#[test]
fn issue_receipt() {
    check("issue-receipt");
}

#[test]
fn agent_contract() {
    check("agent-contract");
}

/// Every packet folder in the library has a test above.
#[test]
fn every_packet_is_checked() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packets");
    let this = include_str!("packets.rs");
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        if path.join("packet.toml").is_file() {
            let slug = path.file_name().unwrap().to_str().unwrap().to_string();
            assert!(
                this.contains(&format!("check(\"{slug}\")")),
                "packet {slug} has no test in packets.rs"
            );
        }
    }
}

/// Every hidden test of every built-in packet names the sentence of the
/// brief it enforces, and every quote is in its brief (issue #49). Cheap:
/// it reads files only, so it runs apart from the full `packet check`.
#[test]
fn every_hidden_test_cites_its_brief() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packets");
    let mut problems = Vec::new();
    let mut packets = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.join("packet.toml").is_file() {
            continue;
        }
        packets += 1;
        let packet = grader::packet::Packet::load(&dir).unwrap();
        for item in grader::check::brief::check(&packet) {
            assert!(!item.detail.is_empty());
            if !item.ok {
                problems.push(format!("{}: {} — {}", dir.display(), item.name, item.detail));
            }
        }
    }
    assert_eq!(packets, 15);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The same propositions fire on a packet whose hidden test cites nothing,
/// or quotes what its brief does not say, naming the test and file:line.
#[test]
fn an_uncited_or_misquoted_hidden_test_fails_the_check() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("check-demo");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/check-demo");
    grader::tree::copy_path(&fixture, &dir).unwrap();
    let items = |dir: &Path| {
        let packet = grader::packet::Packet::load(dir).unwrap();
        grader::check::brief::check(&packet)
    };
    assert!(items(&dir).iter().all(|i| i.ok), "{:?}", items(&dir));
    // One more hidden test, with no quote and no pattern.
    let hidden = dir.join("hidden/test_hidden.py");
    let text = std::fs::read_to_string(&hidden).unwrap();
    let line = text.lines().count() + 3;
    std::fs::write(&hidden, format!("{text}\n\ndef test_sub():\n    assert 1 - 1 == 0\n")).unwrap();
    let got = items(&dir);
    let uncited = got.iter().find(|i| i.name.starts_with("every hidden test names")).unwrap();
    assert!(!uncited.ok);
    assert!(
        uncited.detail.starts_with(&format!(
            "hidden/test_hidden.py:{line}: test_sub names no sentence of the brief"
        )),
        "{}",
        uncited.detail
    );
    // Cited, but with words the brief does not hold.
    std::fs::write(
        &hidden,
        format!("{text}\n\ndef test_sub():\n    \"\"\"brief: \"subtract two numbers exactly\"\"\"\"\n    assert 1 - 1 == 0\n"),
    )
    .unwrap();
    let got = items(&dir);
    assert!(got.iter().find(|i| i.name.starts_with("every hidden test names")).unwrap().ok);
    let wrong = got.iter().find(|i| i.name.starts_with("every quote")).unwrap();
    assert!(!wrong.ok);
    assert!(
        wrong.detail.starts_with(&format!(
            "hidden/test_hidden.py:{}: test_sub's quote \"subtract two numbers exactly\" does not occur in prompt.md",
            line + 1
        )),
        "{}",
        wrong.detail
    );
}
