//! Witnessed evidence: the red and green runs the platform executed for the
//! candidate and the ledger of its model meter, handed to the grader by the
//! server, and the checks the `witness` detector kind runs on them.
//!
//! The grader never reads a database: the server builds a `Witness` from its
//! records and passes it in `GradeOptions`. Offline grading (the CLI, a
//! packet's self-test) passes none, and witness detectors then stay quiet
//! while the scorecard lists them as not witnessed.
//!
//! A metered call carries the digests of its kept transcript bodies (omitted
//! when none, so older witnesses keep their digest), and the receipt lists them
//! (`Receipt::transcript`, skipped when empty, so older receipts still verify).
//! Without a witness the checks are listed as not applicable, never silently
//! skipped.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::clock::format_time;
use crate::evidence::{Hit, Provenance};
use crate::manifest::WitnessCheck;
use crate::pytest::failed_nodes;

/// What the platform witnessed for one assignment up to its submission.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Witness {
    /// Witnessed test runs, oldest first.
    pub runs: Vec<WitnessedRun>,
    /// Calls that went through the model meter, oldest first.
    pub calls: Vec<MeteredCall>,
    /// When the submission was received (Unix ms).
    pub submitted_at: i64,
}

/// Which witnessed run: the one whose tests had to fail before the model
/// could be used, or the one whose tests had to pass afterwards. Stored and
/// sent as `red` or `green`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WitnessKind {
    Red,
    Green,
}

impl WitnessKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WitnessKind::Red => "red",
            WitnessKind::Green => "green",
        }
    }

    /// `red` or `green`; anything else names itself in the error.
    pub fn parse(text: &str) -> Result<WitnessKind, String> {
        match text {
            "red" => Ok(WitnessKind::Red),
            "green" => Ok(WitnessKind::Green),
            other => Err(format!("{other:?} is not a witnessed run kind (red or green)")),
        }
    }
}

impl std::fmt::Display for WitnessKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the server's database rows decode it.
impl TryFrom<String> for WitnessKind {
    type Error = String;
    fn try_from(text: String) -> Result<WitnessKind, String> {
        WitnessKind::parse(&text)
    }
}

/// A red or green test run the platform executed on the candidate's tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WitnessedRun {
    pub id: i64,
    pub kind: WitnessKind,
    /// Unix ms.
    pub at: i64,
    /// Whether the run counts (red: the tests failed; green: they passed).
    pub accepted: bool,
    pub exit_code: Option<i64>,
    pub log: String,
    pub tree_sha256: String,
}

/// One call to the metered model endpoint, forwarded or refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeteredCall {
    pub id: i64,
    /// Unix ms.
    pub at: i64,
    /// The HTTP status the candidate got.
    pub status: i64,
    /// The cap or rule that refused the call; `None` when it was forwarded.
    pub refused: Option<String>,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub tokens_estimated: bool,
    pub request_bytes: i64,
    pub request_sha256: String,
    /// The earlier call with the same request, if any.
    pub duplicate_of: Option<i64>,
    /// The retry number the client library sent with the call
    /// (`x-stainless-retry-count`); 0 for a first attempt.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub client_retry: i64,
    /// The SHA-256 of the request body the meter kept (its transcript);
    /// absent when none was kept or the ledger predates transcripts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_body_sha256: Option<String>,
    /// The SHA-256 of the response body the meter kept (a stream
    /// reassembled; a refusal's error body).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_body_sha256: Option<String>,
    /// What of the bodies was cut and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript_cut: Option<String>,
}

/// One metered call's transcript digests, as the receipt lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TranscriptDigest {
    /// The ledger row.
    pub call: i64,
    pub request_sha256: Option<String>,
    pub response_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl Witness {
    /// The first red run the platform accepted, if any.
    pub fn first_accepted_red(&self) -> Option<&WitnessedRun> {
        self.runs
            .iter()
            .filter(|r| r.kind == WitnessKind::Red && r.accepted)
            .min_by_key(|r| (r.at, r.id))
    }

    /// The calls the meter forwarded upstream (refused ones left out).
    pub fn forwarded(&self) -> impl Iterator<Item = &MeteredCall> {
        self.calls.iter().filter(|c| c.refused.is_none())
    }

    /// The forwarded calls the upstream answered (HTTP 2xx): the ones a
    /// candidate's usage ledger is expected to record.
    pub fn answered(&self) -> impl Iterator<Item = &MeteredCall> {
        self.forwarded().filter(|c| (200..300).contains(&c.status))
    }

    /// The transcript digests of the calls that kept one, oldest first.
    pub fn transcript(&self) -> Vec<TranscriptDigest> {
        self.calls
            .iter()
            .filter(|c| c.request_body_sha256.is_some() || c.response_body_sha256.is_some())
            .map(|c| TranscriptDigest {
                call: c.id,
                request_sha256: c.request_body_sha256.clone(),
                response_sha256: c.response_body_sha256.clone(),
                cut: c.transcript_cut.clone(),
            })
            .collect()
    }

    /// The SHA-256 of this witness's canonical JSON, for the receipt.
    pub fn digest(&self) -> String {
        crate::tree::sha256_hex(serde_json::to_string(self).unwrap_or_default().as_bytes())
    }
}

/// Formats a Unix-ms time as RFC 3339 UTC with milliseconds.
pub fn format_ms(at: i64) -> String {
    let base = format_time(at.div_euclid(1000));
    format!("{}.{:03}Z", base.trim_end_matches('Z'), at.rem_euclid(1000))
}

/// The claimed files a check reads, already read from the workspace: `None`
/// when the file is missing.
pub type ClaimedFile = Option<String>;

/// The parameters of one `witness` detector.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckSpec {
    pub check: WitnessCheck,
    pub file: Option<String>,
    pub tolerance: Option<f64>,
    pub min_chain: Option<u32>,
}

impl CheckSpec {
    /// The claimed file this check compares with, if it reads one.
    pub fn claimed_file(&self) -> Option<String> {
        match self.check {
            WitnessCheck::RedDisagrees => {
                Some(self.file.clone().unwrap_or_else(|| "artifacts/red.log".into()))
            }
            WitnessCheck::UsageDishonest | WitnessCheck::UsageMissing => self.file.clone(),
            WitnessCheck::ModelBeforeRed | WitnessCheck::RetryStorm => None,
        }
    }
}

/// Runs one witness check; `claimed` is the content of `spec.claimed_file()`.
pub fn check(spec: &CheckSpec, w: &Witness, claimed: &ClaimedFile) -> Option<Hit> {
    let evidence = match spec.check {
        WitnessCheck::ModelBeforeRed => model_before_red(w),
        WitnessCheck::RedDisagrees => {
            red_disagrees(w, &spec.claimed_file().unwrap_or_default(), claimed)
        }
        WitnessCheck::UsageDishonest => usage_dishonest(
            w,
            spec.file.as_deref().unwrap_or_default(),
            claimed,
            spec.tolerance.unwrap_or(0.05),
        ),
        WitnessCheck::UsageMissing => {
            usage_missing(w, spec.file.as_deref().unwrap_or_default(), claimed)
        }
        WitnessCheck::RetryStorm => retry_storm(w, spec.min_chain.unwrap_or(3)),
    };
    if evidence.is_empty() {
        None
    } else {
        Some(Hit { provenance: Provenance::Witnessed, evidence })
    }
}

/// Forwarded calls before the first accepted witnessed red, or forwarded
/// calls with no accepted red at all.
fn model_before_red(w: &Witness) -> Vec<String> {
    let red = w.first_accepted_red();
    let early: Vec<&MeteredCall> =
        w.forwarded().filter(|c| red.is_none_or(|r| c.at < r.at)).collect();
    if early.is_empty() {
        return Vec::new();
    }
    let mut out = vec![match red {
        Some(r) => format!(
            "{} forwarded model call(s) before the first accepted witnessed red (run {} at {})",
            early.len(),
            r.id,
            format_ms(r.at)
        ),
        None => format!("{} forwarded model call(s) and no accepted witnessed red", early.len()),
    }];
    out.extend(
        early
            .iter()
            .take(5)
            .map(|c| format!("model call {} at {} (HTTP {})", c.id, format_ms(c.at), c.status)),
    );
    if early.len() > 5 {
        out.push(format!("and {} more", early.len() - 5));
    }
    out
}

/// The claimed red log fails a different set of tests than every accepted
/// witnessed red (a claimed log that shows no failure fails the empty set).
fn red_disagrees(w: &Witness, file: &str, claimed: &ClaimedFile) -> Vec<String> {
    let Some(text) = claimed else { return Vec::new() };
    let reds: Vec<&WitnessedRun> =
        w.runs.iter().filter(|r| r.kind == WitnessKind::Red && r.accepted).collect();
    let Some(last) = reds.last() else { return Vec::new() };
    let mine: BTreeSet<String> = failed_nodes(text);
    if reds.iter().any(|r| failed_nodes(&r.log) == mine) {
        return Vec::new();
    }
    let theirs = failed_nodes(&last.log);
    let list = |s: &BTreeSet<String>| {
        if s.is_empty() {
            "no failing test".to_string()
        } else {
            s.iter().cloned().collect::<Vec<_>>().join(", ")
        }
    };
    vec![
        format!("{file} fails {}", list(&mine)),
        format!("witnessed red run {} at {} fails {}", last.id, format_ms(last.at), list(&theirs)),
    ]
}

/// The claimed usage ledger's totals: rows, and prompt plus completion
/// tokens. Lines that are not JSON objects are counted as rows with no
/// tokens.
fn claimed_usage(text: &str) -> (i64, i64) {
    let mut rows = 0;
    let mut tokens = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        rows += 1;
        if let Ok(serde_json::Value::Object(m)) = serde_json::from_str::<serde_json::Value>(line) {
            let n = |k: &str| m.get(k).and_then(|v| v.as_i64()).unwrap_or(0);
            tokens += n("prompt_tokens") + n("completion_tokens");
        }
    }
    (rows, tokens)
}

/// Whether `claimed` differs from the meter's `metered` by more than the
/// fraction `tolerance` of the metered value.
fn beyond(claimed: i64, metered: i64, tolerance: f64) -> bool {
    (claimed - metered).abs() as f64 > tolerance * metered as f64
}

/// The claimed usage file's call count or token total differs from the
/// meter's answered calls (forwarded, HTTP 2xx) beyond `tolerance`.
fn usage_dishonest(w: &Witness, file: &str, claimed: &ClaimedFile, tolerance: f64) -> Vec<String> {
    let Some(text) = claimed else { return Vec::new() };
    if text.trim().is_empty() {
        return Vec::new();
    }
    let (rows, tokens) = claimed_usage(text);
    let calls = w.answered().count() as i64;
    let metered: i64 = w.answered().map(|c| c.prompt_tokens + c.completion_tokens).sum();
    let pct = tolerance * 100.0;
    let mut out = Vec::new();
    if beyond(rows, calls, tolerance) {
        out.push(format!("{file} claims {rows} call(s); the meter forwarded {calls} that the upstream answered (tolerance {pct}%)"));
    }
    if beyond(tokens, metered, tolerance) {
        let estimated = w.answered().filter(|c| c.tokens_estimated).count();
        let note =
            if estimated > 0 { format!(", {estimated} call(s) estimated") } else { String::new() };
        out.push(format!(
            "{file} claims {tokens} token(s); the meter counted {metered}{note} (tolerance {pct}%)"
        ));
    }
    out
}

/// The meter forwarded calls but the claimed usage file is missing or empty.
fn usage_missing(w: &Witness, file: &str, claimed: &ClaimedFile) -> Vec<String> {
    let calls: Vec<&MeteredCall> = w.forwarded().collect();
    let (Some(first), Some(last)) = (calls.first(), calls.last()) else { return Vec::new() };
    let state = match claimed {
        None => "missing",
        Some(t) if t.trim().is_empty() => "empty",
        Some(_) => return Vec::new(),
    };
    vec![format!(
        "{file} is {state}, but the meter forwarded {} call(s) (ids {}..{}, {} to {})",
        calls.len(),
        first.id,
        last.id,
        format_ms(first.at),
        format_ms(last.at)
    )]
}

/// Groups of identical requests (linked by `duplicate_of`, whether each
/// points at the first occurrence or at the one before) of at least
/// `min_chain` calls. A client library's automatic retry of a refusal (a
/// call the library marked as a retry, right after a refused identical
/// call) is the library's, not the candidate's: it is left out of the
/// count and named in the evidence.
fn retry_storm(w: &Witness, min_chain: u32) -> Vec<String> {
    let parent: BTreeMap<i64, Option<i64>> =
        w.calls.iter().map(|c| (c.id, c.duplicate_of)).collect();
    let root = |mut id: i64| {
        // The walk is bounded so a cycle in the data cannot hang grading.
        for _ in 0..parent.len() {
            match parent.get(&id).copied().flatten() {
                Some(p) if p != id => id = p,
                _ => break,
            }
        }
        id
    };
    let mut groups: BTreeMap<i64, Vec<&MeteredCall>> = BTreeMap::new();
    for c in &w.calls {
        groups.entry(root(c.id)).or_default().push(c);
    }
    groups
        .values()
        .filter_map(|g| {
            let mut g = g.clone();
            g.sort_by_key(|c| (c.at, c.id));
            let auto: Vec<i64> = g
                .windows(2)
                .filter(|p| p[1].client_retry > 0 && p[0].refused.is_some())
                .map(|p| p[1].id)
                .collect();
            let g: Vec<&MeteredCall> = g.into_iter().filter(|c| !auto.contains(&c.id)).collect();
            (g.len() >= min_chain.max(2) as usize).then_some((g, auto))
        })
        .map(|(g, auto)| {
            let refused = g.iter().filter(|c| c.refused.is_some()).count();
            let auto = if auto.is_empty() {
                String::new()
            } else {
                format!(
                    " (not counted: the client library's automatic retries {} of a refusal)",
                    auto.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
                )
            };
            format!(
                "{} identical requests (calls {}), {} to {}, {refused} refused{auto}",
                g.len(),
                g.iter().map(|c| c.id.to_string()).collect::<Vec<_>>().join(", "),
                format_ms(g[0].at),
                format_ms(g[g.len() - 1].at)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn red(id: i64, at: i64, accepted: bool, log: &str) -> WitnessedRun {
        WitnessedRun {
            id,
            kind: WitnessKind::Red,
            at,
            accepted,
            exit_code: Some(1),
            log: log.into(),
            tree_sha256: "t".into(),
        }
    }

    fn call(
        id: i64,
        at: i64,
        refused: Option<&str>,
        tokens: (i64, i64),
        duplicate_of: Option<i64>,
    ) -> MeteredCall {
        MeteredCall {
            id,
            at,
            status: if refused.is_some() { 429 } else { 200 },
            refused: refused.map(String::from),
            prompt_tokens: tokens.0,
            completion_tokens: tokens.1,
            tokens_estimated: false,
            request_bytes: 100,
            request_sha256: format!("r{}", duplicate_of.unwrap_or(id)),
            duplicate_of,
            client_retry: 0,
            request_body_sha256: None,
            response_body_sha256: None,
            transcript_cut: None,
        }
    }

    const LOG_A: &str = "===== test session starts =====\nFAILED tests/test_a.py::test_total - assert 1 == 2\n===== 1 failed in 0.1s =====\n";
    const LOG_B: &str = "===== test session starts =====\nFAILED tests/test_a.py::test_other - assert\n===== 1 failed in 0.1s =====\n";
    const LOG_PASS: &str = "===== test session starts =====\n===== 3 passed in 0.1s =====\n";

    /// Runs `check` and compares whether it fired, and that every evidence
    /// line mentions each of `mentions`.
    fn check_case(
        name: &str,
        spec: CheckSpec,
        w: &Witness,
        claimed: Option<&str>,
        fires: bool,
        mentions: &[&str],
    ) {
        let hit = check(&spec, w, &claimed.map(String::from));
        assert_eq!(hit.is_some(), fires, "{name}: {hit:?}");
        if let Some(h) = hit {
            assert_eq!(h.provenance, Provenance::Witnessed, "{name}");
            let all = h.evidence.join("\n");
            for m in mentions {
                assert!(all.contains(m), "{name}: {m:?} not in {all}");
            }
        }
    }

    fn spec(check: WitnessCheck) -> CheckSpec {
        CheckSpec { check, file: None, tolerance: None, min_chain: None }
    }

    fn file(check: WitnessCheck, f: &str) -> CheckSpec {
        CheckSpec { file: Some(f.into()), ..spec(check) }
    }

    #[test]
    fn model_before_red_cases() {
        let w = |runs, calls| Witness { runs, calls, submitted_at: 9_000 };
        use WitnessCheck::ModelBeforeRed as M;
        check_case(
            "call before red",
            spec(M),
            &w(vec![red(1, 2_000, true, LOG_A)], vec![call(7, 1_000, None, (1, 1), None)]),
            None,
            true,
            &["model call 7", "run 1"],
        );
        check_case(
            "no red at all",
            spec(M),
            &w(vec![], vec![call(7, 1_000, None, (1, 1), None)]),
            None,
            true,
            &["no accepted witnessed red"],
        );
        check_case(
            "only a refused red",
            spec(M),
            &w(vec![red(1, 500, false, LOG_PASS)], vec![call(7, 1_000, None, (1, 1), None)]),
            None,
            true,
            &["model call 7"],
        );
        check_case(
            "refused call before red",
            spec(M),
            &w(
                vec![red(1, 2_000, true, LOG_A)],
                vec![call(7, 1_000, Some("model window closed"), (0, 0), None)],
            ),
            None,
            false,
            &[],
        );
        check_case(
            "calls after red",
            spec(M),
            &w(vec![red(1, 2_000, true, LOG_A)], vec![call(7, 3_000, None, (1, 1), None)]),
            None,
            false,
            &[],
        );
        check_case("no calls", spec(M), &w(vec![], vec![]), None, false, &[]);
    }

    #[test]
    fn red_disagrees_cases() {
        let w =
            Witness { runs: vec![red(1, 2_000, true, LOG_A)], calls: vec![], submitted_at: 9_000 };
        use WitnessCheck::RedDisagrees as R;
        check_case("same failures", spec(R), &w, Some(LOG_A), false, &[]);
        check_case(
            "other failures",
            spec(R),
            &w,
            Some(LOG_B),
            true,
            &["test_other", "test_total", "artifacts/red.log"],
        );
        check_case("claimed log passes", spec(R), &w, Some(LOG_PASS), true, &["no failing test"]);
        check_case("claimed log missing", spec(R), &w, None, false, &[]);
        check_case("nothing witnessed", spec(R), &Witness::default(), Some(LOG_B), false, &[]);
        let two = Witness {
            runs: vec![red(1, 1_000, true, LOG_B), red(2, 2_000, true, LOG_A)],
            ..w.clone()
        };
        check_case("matches an earlier red", spec(R), &two, Some(LOG_B), false, &[]);
    }

    #[test]
    fn usage_cases() {
        let w = Witness {
            runs: vec![],
            calls: vec![
                call(1, 1_000, None, (100, 50), None),
                call(2, 2_000, None, (100, 50), None),
                call(3, 3_000, Some("calls"), (0, 0), None),
                MeteredCall { status: 502, ..call(4, 3_500, None, (0, 0), None) },
            ],
            submitted_at: 9_000,
        };
        let honest = "{\"prompt_tokens\":100,\"completion_tokens\":50}\n{\"prompt_tokens\":100,\"completion_tokens\":50}\n";
        let close = "{\"prompt_tokens\":100,\"completion_tokens\":50}\n{\"prompt_tokens\":104,\"completion_tokens\":50}\n";
        let under = "{\"prompt_tokens\":10,\"completion_tokens\":5}\n{\"prompt_tokens\":10,\"completion_tokens\":5}\n";
        let one = "{\"prompt_tokens\":200,\"completion_tokens\":100}\n";
        use WitnessCheck::{UsageDishonest as D, UsageMissing as M};
        let d = file(D, "usage.jsonl");
        check_case("honest", d.clone(), &w, Some(honest), false, &[]);
        check_case("within tolerance", d.clone(), &w, Some(close), false, &[]);
        check_case(
            "tokens under-claimed",
            d.clone(),
            &w,
            Some(under),
            true,
            &["claims 30 token(s)", "counted 300"],
        );
        check_case(
            "a call left out",
            d.clone(),
            &w,
            Some(one),
            true,
            &["claims 1 call(s)", "forwarded 2"],
        );
        check_case(
            "zero tolerance",
            CheckSpec { tolerance: Some(0.0), ..d.clone() },
            &w,
            Some(close),
            true,
            &["304"],
        );
        check_case("missing is another check", d.clone(), &w, None, false, &[]);
        let m = file(M, "usage.jsonl");
        check_case(
            "usage missing",
            m.clone(),
            &w,
            None,
            true,
            &["usage.jsonl is missing", "3 call(s)"],
        );
        check_case("usage empty", m.clone(), &w, Some("\n"), true, &["is empty"]);
        check_case("usage present", m.clone(), &w, Some(honest), false, &[]);
        let refused_only =
            Witness { calls: vec![call(3, 3_000, Some("calls"), (0, 0), None)], ..w.clone() };
        check_case("nothing forwarded", m, &refused_only, None, false, &[]);
    }

    #[test]
    fn retry_storm_cases() {
        let w = |calls| Witness { runs: vec![], calls, submitted_at: 9_000 };
        use WitnessCheck::RetryStorm as S;
        let star = vec![
            call(1, 1, None, (1, 1), None),
            call(2, 2, Some("calls"), (0, 0), Some(1)),
            call(3, 3, Some("calls"), (0, 0), Some(1)),
        ];
        let line = vec![
            call(1, 1, None, (1, 1), None),
            call(2, 2, None, (1, 1), Some(1)),
            call(3, 3, None, (1, 1), Some(2)),
        ];
        let pair = vec![
            call(1, 1, None, (1, 1), None),
            call(2, 2, None, (1, 1), Some(1)),
            call(3, 3, None, (1, 1), None),
        ];
        check_case(
            "star of three",
            spec(S),
            &w(star.clone()),
            None,
            true,
            &["3 identical requests", "calls 1, 2, 3", "2 refused"],
        );
        check_case("line of three", spec(S), &w(line), None, true, &["3 identical"]);
        check_case("one retry", spec(S), &w(pair), None, false, &[]);
        check_case(
            "higher threshold",
            CheckSpec { min_chain: Some(4), ..spec(S) },
            &w(star),
            None,
            false,
            &[],
        );
        let cycle = vec![call(1, 1, None, (1, 1), Some(2)), call(2, 2, None, (1, 1), Some(1))];
        check_case("a cycle terminates", spec(S), &w(cycle), None, false, &[]);
        // One call past a cap, retried twice by the SDK: the library's, quiet.
        let retried = |n| MeteredCall {
            client_retry: n,
            ..call(1 + n, 1 + n, Some("calls"), (0, 0), if n == 0 { None } else { Some(1) })
        };
        let sdk = vec![retried(0), retried(1), retried(2)];
        check_case("an SDK's retries of a refusal", spec(S), &w(sdk.clone()), None, false, &[]);
        // The candidate's own loop of the same refused request still fires,
        // and the SDK's retries inside it are named and not counted.
        let mut looped = sdk;
        for id in [4, 5, 6] {
            looped.push(call(id, id * 1_000, Some("calls"), (0, 0), Some(1)));
        }
        check_case(
            "a loop around an SDK",
            spec(S),
            &w(looped),
            None,
            true,
            &["4 identical requests", "calls 1, 4, 5, 6", "automatic retries 2, 3"],
        );
        // A retry marked by the SDK after a forwarded (not refused) call counts.
        let after_ok = vec![
            call(1, 1, None, (1, 1), None),
            MeteredCall { client_retry: 1, ..call(2, 2, None, (1, 1), Some(1)) },
            call(3, 3, None, (1, 1), Some(1)),
        ];
        check_case(
            "retries of an answered call",
            spec(S),
            &w(after_ok),
            None,
            true,
            &["3 identical"],
        );
    }

    #[test]
    fn times_print_with_milliseconds() {
        assert_eq!(format_ms(1_767_603_600_123), "2026-01-05T09:00:00.123Z");
    }
}
