//! `packet check`'s mutant propositions: every mutant of the packet is
//! killed by the hidden tests, or explained.
//!
//! Two kinds of mutant run here, both laid over the sample (on the tree a
//! candidate unpacks) exactly as `packet audit` lays them, through the same
//! runner (`audit::run::run_hidden`), side by side:
//!
//! - the packet's own mutants (`mutants/<id>`, `[mutation]`), which also
//!   measure a candidate's tests, through `[mutation] hidden_step`;
//! - the mutants kept from audits (`mutants/audit/<id>.diff`,
//!   `audit::kept`), through the audit's hidden-test steps.
//!
//! A survivor fails the self-test unless `mutants/EQUIVALENT.md` explains
//! it (`audit::explain`); the list itself must parse and every entry must
//! still apply to the sample. The report carries the counts (killed,
//! survived, explained) for the summary.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::audit::classify::{Outcome, classify};
use crate::audit::explain::{self, Explanation};
use crate::audit::run::{HiddenRun, hidden_steps, run_hidden};
use crate::audit::{deliver, kept};
use crate::check::CheckItem;
use crate::grade::Grader;
use crate::packet::Packet;

/// The counts `packet check` reports for a packet's mutants.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MutantCounts {
    /// Mutants (the packet's and the kept ones) the hidden tests kill.
    pub killed: usize,
    /// Mutants every hidden test passes on that no entry explains.
    pub survived: usize,
    /// Entries of `mutants/EQUIVALENT.md`: survivors of an audit explained.
    pub explained: usize,
}

/// One mutant to run.
struct Job {
    /// The item's name.
    name: String,
    file: String,
    /// The sample's copy of `file`, and the mutant (as text when it is).
    source: String,
    mutated: Vec<u8>,
    steps: Vec<String>,
}

fn item(name: impl Into<String>, ok: bool, detail: impl Into<String>) -> CheckItem {
    CheckItem { name: name.into(), ok, detail: detail.into(), warning: false }
}

/// The mutant propositions of `packet` and their counts (`None` when the
/// packet has no mutant and no list). `sample` is the tree a candidate
/// unpacks with the sample laid over it; `expected` the test ids each step
/// reported on the sample.
pub fn check(
    grader: &Grader,
    packet: &Packet,
    sample: &Path,
    work: &Path,
    expected: &BTreeMap<String, BTreeSet<String>>,
) -> (Vec<CheckItem>, Option<MutantCounts>) {
    let mut items = Vec::new();
    let m = &packet.manifest;
    let explanations: Vec<Explanation> = match explain::load(packet) {
        Ok(list) => {
            let stale = explain::stale(packet, &list);
            if !list.is_empty() {
                items.push(item(
                    format!("every entry of {} applies to the sample", explain::FILE),
                    stale.is_empty(),
                    if stale.is_empty() {
                        format!("{} explained survivors", list.len())
                    } else {
                        stale.join("; ")
                    },
                ));
            }
            list
        }
        Err(e) => {
            items.push(item(format!("{} is valid", explain::FILE), false, e));
            Vec::new()
        }
    };

    let mut jobs: Vec<Job> = Vec::new();
    let (mut own, mut audited) = (0, 0);
    if let Some(mu) = &m.mutation {
        match packet.mutants() {
            Ok(list) => {
                let source = explain::sample_source(packet, &mu.target).unwrap_or_default();
                for (id, bytes) in list {
                    own += 1;
                    jobs.push(Job {
                        name: format!("mutant {id} is killed by step {}", mu.hidden_step),
                        file: mu.target.clone(),
                        source: source.clone(),
                        mutated: bytes,
                        steps: vec![mu.hidden_step.clone()],
                    });
                }
            }
            Err(e) => items.push(item("the packet's mutants load", false, e.to_string())),
        }
    }
    match kept::list(packet) {
        Ok(list) if !list.is_empty() => match hidden_steps(packet, &[]) {
            Ok(steps) => {
                for k in list {
                    let name = format!(
                        "mutant audit/{} is killed by step{} {}",
                        k.id,
                        if steps.len() == 1 { "" } else { "s" },
                        steps.join(", ")
                    );
                    match k.apply(packet) {
                        Ok((source, mutated)) => {
                            audited += 1;
                            jobs.push(Job {
                                name,
                                file: k.file,
                                source,
                                mutated: mutated.into_bytes(),
                                steps: steps.clone(),
                            });
                        }
                        Err(e) => items.push(item(name, false, e)),
                    }
                }
            }
            Err(e) => items.push(item("the kept mutants' hidden steps", false, e.0)),
        },
        Ok(_) => {}
        Err(e) => items.push(item("the kept mutants load", false, e)),
    }
    if jobs.is_empty() && explanations.is_empty() && items.is_empty() {
        return (items, None);
    }

    let files: BTreeSet<&str> = jobs.iter().map(|j| j.file.as_str()).collect();
    let deliveries: BTreeMap<&str, Vec<deliver::Delivery>> = files
        .into_iter()
        .map(|f| (f, deliver::deliveries(packet, f).unwrap_or_default()))
        .collect();
    let runs = crate::par::map_indexed(jobs.len(), |i| {
        let job = &jobs[i];
        let mutated = String::from_utf8_lossy(&job.mutated);
        let mut writes = deliver::writes(&job.file, &mutated, &deliveries[job.file.as_str()]);
        writes[0].1.clone_from(&job.mutated);
        let run = HiddenRun {
            grader,
            packet,
            tree: sample,
            scratch: &work.join("mutants").join(format!("m{i}")),
            steps: &job.steps,
            expected,
            stop_at_kill: true,
            fail_fast: true,
        };
        run_hidden(&run, &writes).map(|r| {
            let results: Vec<_> = r.into_iter().map(|(r, _)| r).collect();
            classify(&results)
        })
    });

    let mut counts = MutantCounts { explained: explanations.len(), ..MutantCounts::default() };
    for (job, ran) in jobs.iter().zip(runs) {
        match ran {
            Err(e) => items.push(item(&job.name, false, e.0)),
            Ok((Outcome::Survived, reason, _)) => {
                let text = String::from_utf8_lossy(&job.mutated);
                match explain::find(&explanations, &job.file, &job.source, &text) {
                    Some(e) => items.push(item(
                        &job.name,
                        true,
                        format!("survives, explained in {} ({})", explain::FILE, e.title),
                    )),
                    None => {
                        counts.survived += 1;
                        items.push(item(&job.name, false, reason));
                    }
                }
            }
            Ok((_, reason, _)) => {
                counts.killed += 1;
                items.push(item(&job.name, true, reason));
            }
        }
    }
    items.push(item(
        "the hidden tests' mutants",
        counts.survived == 0,
        format!(
            "{} killed, {} survived, {} explained ({own} packet mutants, {audited} kept from audits, {} entries in {})",
            counts.killed,
            counts.survived,
            counts.explained,
            explanations.len(),
            explain::FILE
        ),
    ));
    (items, Some(counts))
}
