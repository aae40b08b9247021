//! Witnessed evidence through the real pipeline: the `refund-invoices`
//! sample graded with a `Witness` (red runs and the model meter's ledger),
//! and without one.

use std::path::Path;
use std::sync::OnceLock;

use grader::evidence::Provenance;
use grader::grade::{GradeOptions, Scorecard};
use grader::packet::Packet;
use grader::witness::{MeteredCall, Witness, WitnessKind, WitnessedRun};

use crate::detectors::{grader, zip_submission};

fn refund() -> &'static Packet {
    static PACKET: OnceLock<Packet> = OnceLock::new();
    PACKET.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packets/refund-invoices");
        Packet::load(&dir).unwrap_or_else(|e| panic!("loading refund-invoices: {e}"))
    })
}

/// The sample's own red log, which the platform witnessed as it is.
fn sample_red_log() -> String {
    std::fs::read_to_string(refund().sample_dir().join("artifacts/red.log"))
        .expect("the sample's red log")
}

const RED_AT: i64 = 1_767_603_600_000;

fn red(log: &str) -> WitnessedRun {
    WitnessedRun {
        id: 3,
        kind: WitnessKind::Red,
        at: RED_AT,
        accepted: true,
        exit_code: Some(1),
        log: log.into(),
        tree_sha256: "ab".repeat(32),
    }
}

fn call(id: i64, at: i64) -> MeteredCall {
    MeteredCall {
        id,
        at,
        status: 200,
        refused: None,
        prompt_tokens: 120,
        completion_tokens: 40,
        tokens_estimated: false,
        request_bytes: 900,
        request_sha256: format!("{id:064}"),
        duplicate_of: None,
        client_retry: 0,
        request_body_sha256: None,
        response_body_sha256: None,
        transcript_cut: None,
    }
}

/// Grades the sample, zipped with the packet's sample times, with `witness`.
fn grade(witness: Option<Witness>) -> Scorecard {
    let times: Vec<(&str, i64)> =
        refund().manifest.sample.times.iter().map(|(p, t)| (p.as_str(), *t)).collect();
    let (_tmp, zip) = zip_submission(refund(), &[], &times);
    grader()
        .grade_zip(refund(), &zip, &GradeOptions { witness, ..Default::default() })
        .unwrap_or_else(|e| panic!("grading: {e}"))
}

fn finding<'a>(card: &'a Scorecard, id: &str) -> Option<&'a grader::score::Finding> {
    card.findings.iter().find(|f| f.id == id)
}

#[test]
fn calls_before_the_witnessed_red_are_a_witnessed_finding() {
    let before = Witness {
        runs: vec![red(&sample_red_log())],
        calls: vec![call(11, RED_AT - 60_000), call(12, RED_AT + 1)],
        submitted_at: RED_AT + 600_000,
    };
    let card = grade(Some(before.clone()));
    let f = finding(&card, "model-before-red")
        .unwrap_or_else(|| panic!("no model-before-red in {:?}", card.findings));
    assert_eq!(f.provenance, Provenance::Witnessed);
    let evidence = f.evidence.join("\n");
    assert!(evidence.contains("model call 11") && evidence.contains("run 3"), "{evidence}");
    assert!(!evidence.contains("model call 12"), "{evidence}");
    // The claimed red log is the witnessed one, so they agree.
    assert!(finding(&card, "forged-red-log").is_none(), "{:?}", card.findings);
    assert!(card.not_witnessed.is_empty());
    assert_eq!(card.receipt.witness_sha256.as_deref(), Some(before.digest().as_str()));

    // The same calls after the red are quiet, and the witness is part of
    // what the receipt digests.
    let after =
        Witness { calls: vec![call(11, RED_AT + 60_000), call(12, RED_AT + 61_000)], ..before };
    let quiet = grade(Some(after));
    assert!(finding(&quiet, "model-before-red").is_none(), "{:?}", quiet.findings);
    assert!(finding(&quiet, "forged-red-log").is_none(), "{:?}", quiet.findings);
    assert_ne!(card.receipt.digest, quiet.receipt.digest);
}

#[test]
fn a_claimed_red_log_that_disagrees_with_the_witnessed_one() {
    let other = sample_red_log().replace("test_charges_only", "test_something_else");
    let card =
        grade(Some(Witness { runs: vec![red(&other)], calls: vec![], submitted_at: RED_AT + 1 }));
    let f = finding(&card, "forged-red-log")
        .unwrap_or_else(|| panic!("no forged-red-log in {:?}", card.findings));
    assert_eq!(f.provenance, Provenance::Witnessed);
    assert!(f.evidence.join("\n").contains("test_something_else"), "{:?}", f.evidence);
}

#[test]
fn without_a_witness_the_witnessed_checks_are_listed_as_not_applicable() {
    let card = grade(None);
    let ids: Vec<&str> = card.not_witnessed.iter().map(|u| u.id.as_str()).collect();
    assert_eq!(ids, ["forged-red-log", "model-before-red"]);
    assert!(card.not_witnessed[1].reason.contains("model-before-red"), "{:?}", card.not_witnessed);
    assert!(card.findings.is_empty(), "{:?}", card.findings);
    assert!(card.unevaluated.is_empty(), "{:?}", card.unevaluated);
    let json = serde_json::to_value(&card).expect("to JSON");
    assert!(json.get("not_witnessed").is_some());
    assert!(json["receipt"].get("witness_sha256").is_none());
}
