//! `packet check`'s propositions on the `[proves.<step>]` tables, the map
//! from a failing hidden test to the failure ids it proves: every pattern of
//! a table names at least one test the sample's grading of that step
//! reported (a pattern that names nothing,
//! a typo or a renamed test, would leave a variant's failing test unproven
//! and pass silently on every alternate); and a lint names every step that
//! runs the packet's hidden tests (lays a `hidden/.../test_*.py`) with no
//! table. How variants' failing tests map to their ids is checked with each
//! variant (`check`).

use crate::audit::run::lays_hidden_test;
use crate::check::CheckItem;
use crate::evidence::TestOutcome;
use crate::grade::Scorecard;
use crate::manifest::Manifest;

/// The propositions for `m`, read from the sample's scorecard `card`.
pub fn check(m: &Manifest, card: &Scorecard) -> Vec<CheckItem> {
    let mut items = Vec::new();
    let hidden: Vec<&str> = m
        .steps
        .iter()
        .filter(|s| s.lay.iter().any(lays_hidden_test))
        .map(|s| s.id.as_str())
        .collect();
    let missing: Vec<&str> =
        hidden.iter().copied().filter(|s| !m.proves.contains_key(*s)).collect();
    // A lint: an author's draft may still be growing its tables.
    if !missing.is_empty() {
        items.push(CheckItem {
            name: "every hidden-test step has a [proves] table".into(),
            ok: false,
            detail: format!(
                "no [proves.<step>] table for step {}: a variant's failing test there is never checked against the ids it declares (an empty table says its tests prove no id)",
                missing.join(", ")
            ),
            warning: true,
        });
    }
    for (step, map) in &m.proves {
        let run_id = format!("step:{step}");
        let tests: &[TestOutcome] = card
            .receipt
            .runs
            .iter()
            .find(|r| r.id == run_id)
            .and_then(|r| r.tests.as_deref())
            .unwrap_or_default();
        let unmatched: Vec<&str> = map
            .keys()
            .filter(|p| !tests.iter().any(|t| crate::detect::test_matches(t, p)))
            .map(String::as_str)
            .collect();
        items.push(CheckItem {
            name: format!("[proves.{step}] names tests the step runs"),
            ok: unmatched.is_empty() && !tests.is_empty(),
            detail: if tests.is_empty() {
                format!("the sample's grading reported no test for step {step}")
            } else if unmatched.is_empty() {
                format!("{} patterns over {} tests", map.len(), tests.len())
            } else {
                format!(
                    "pattern {} names no test the sample's grading of step {step} reported",
                    unmatched.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>().join(", ")
                )
            },
            warning: false,
        });
    }
    items
}
