//! Short terminal renderings of scorecards and self-test reports.

use std::fmt::Write;

use grader::check::CheckReport;
use grader::grade::Scorecard;
use grader::score::Status;

pub fn scorecard(card: &Scorecard) -> String {
    let mut s = String::new();
    let score = card.scoring.score.map_or("signals scored separately".to_string(), |v| {
        format!("{v}/{}", card.scoring.max_score)
    });
    let _ = writeln!(
        s,
        "{} {} — decision: {} — score: {score}",
        card.packet.slug, card.packet.version, card.scoring.decision
    );
    for g in card.scoring.gates.iter().filter(|g| g.result != "passed") {
        let _ = writeln!(
            s,
            "  {} {}{}",
            g.gate,
            g.result,
            if g.message.is_empty() { String::new() } else { format!(": {}", g.message) }
        );
    }
    for c in &card.scoring.caps {
        let _ = writeln!(s, "  cap: {c}");
    }
    if card.findings.is_empty() {
        let _ = writeln!(s, "findings: none");
    } else {
        let _ = writeln!(s, "findings:");
        for f in &card.findings {
            let _ = writeln!(s, "  {} [{:?}] {}", f.id, f.provenance, f.title);
            for e in f.evidence.iter().take(3) {
                let _ = writeln!(s, "      {e}");
            }
            if f.evidence.len() > 3 {
                let _ = writeln!(s, "      … and {} more", f.evidence.len() - 3);
            }
        }
    }
    for u in &card.unevaluated {
        let _ = writeln!(s, "  {} could not be evaluated: {}", u.id, u.reason);
    }
    // Witnessed checks with no platform record are listed, never skipped
    // silently: only the claimed evidence was graded for these.
    for u in &card.not_witnessed {
        let _ = writeln!(s, "  {} {}", u.id, u.reason);
    }
    let _ = writeln!(s, "criteria:");
    let width = card.scoring.criteria.iter().map(|c| c.id.len()).max().unwrap_or(0);
    for c in &card.scoring.criteria {
        let level = match (c.status, c.level) {
            (Status::Pending, _) => "pending".to_string(),
            (_, Some(l)) => format!("{l}/{}", c.max),
            (_, None) => "-".to_string(),
        };
        let note = if c.status == Status::AfterGate { " (after a failed gate)" } else { "" };
        let _ = writeln!(
            s,
            "  {:width$}  {level:>7}  {}{note}",
            c.id,
            c.level_text.as_deref().unwrap_or(&c.title)
        );
    }
    for m in &card.environment.mismatches {
        let _ = writeln!(s, "environment: {m}");
    }
    let leftovers: usize = card.receipt.runs.iter().map(|r| r.leftovers.len()).sum();
    if leftovers > 0 {
        let _ = writeln!(
            s,
            "sandbox: {leftovers} leftover process(es) killed after their command ended"
        );
    }
    for f in &card.receipt.sandbox.fallbacks {
        let _ = writeln!(s, "sandbox fallback: {f}");
    }
    for e in &card.receipt.untrusted_evidence {
        let _ = writeln!(s, "untrusted evidence: {e}");
    }
    let _ = writeln!(
        s,
        "receipt {} — {} runs in {:.0} ms",
        &card.receipt.digest[..16],
        card.receipt.runs.len(),
        card.receipt.timings.total_ms
    );
    s
}

pub fn check_report(r: &CheckReport) -> String {
    let mut s = String::new();
    let mutants = r
        .mutants
        .map(|c| {
            format!(
                " (mutants: {} killed, {} survived, {} explained)",
                c.killed, c.survived, c.explained
            )
        })
        .unwrap_or_default();
    let _ = writeln!(s, "{}: {}{mutants}", r.packet, if r.ok() { "ok" } else { "FAILED" });
    for i in &r.items {
        let mark = if i.ok {
            "ok  "
        } else if i.warning {
            "warn"
        } else {
            "FAIL"
        };
        let _ = writeln!(s, "  {mark} {} — {}", i.name, i.detail);
    }
    s
}
