//! Which twins a graded run plants (issue #25): what they cost on the
//! sample decides how many, within a budget, so that twins stay a small
//! share of a grading whatever the packet's tests cost.

use std::collections::{BTreeMap, BTreeSet};

use super::{Rng, Slot, SlotCost, Template, shuffle};

/// What a graded run plants twins from, in one module.
#[derive(Clone, Copy)]
pub struct Graded<'a> {
    /// Test key → its calibrated twins.
    pub twins: &'a BTreeMap<String, BTreeSet<usize>>,
    /// What the module's tests and twins cost on the sample, and what this
    /// module's twins may cost (its share of the run's budget); `None` (an
    /// older calibration): a third of the tests, at least four.
    pub cost: Option<(&'a BTreeMap<String, SlotCost>, Budget)>,
    /// This module carries the run's first twin ([`first_twin_module`]).
    pub first: bool,
    /// What the run's twins may cost: a first twin that costs more is
    /// planted only with the odds that keep its expected cost within it.
    pub run_budget: Budget,
}

/// The least odds of a run's first twin, whatever it costs: no run is
/// certain to carry none.
pub const MIN_FIRST_ODDS: f64 = 0.25;

/// What twins may cost, in microseconds of the sample's grading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budget {
    pub us: u64,
}

impl Budget {
    /// The share `part / whole` of it.
    pub fn share(self, part: u64, whole: u64) -> Budget {
        Budget { us: (u128::from(self.us) * u128::from(part) / u128::from(whole.max(1))) as u64 }
    }

    /// A calibration's budget for twins: [`TWIN_BUDGET_PERCENT`] of what
    /// grading the sample cost without its twins, in wall or CPU time,
    /// whichever is less (a grading that mostly waits would otherwise buy
    /// twins that cost more CPU than the share allows). Calibration plants
    /// every twin, so what they cost (`twins_us`, by the runner's timing)
    /// comes off both, but never more than half of either.
    pub fn of_sample(wall_us: u64, cpu_us: u64, twins_us: u64) -> Budget {
        let without = |us: u64| us.saturating_sub(twins_us).max(us / 2);
        Budget { us: without(wall_us).min(without(cpu_us)) * TWIN_BUDGET_PERCENT / 100 }
    }

    /// Spends `cost_us` if it can.
    fn spend(&mut self, cost_us: u64) -> bool {
        let ok = cost_us <= self.us;
        if ok {
            self.us -= cost_us;
        }
        ok
    }
}

impl<'a> Graded<'a> {
    /// Twins chosen by count, as before costs were recorded.
    pub fn by_count(twins: &'a BTreeMap<String, BTreeSet<usize>>) -> Graded<'a> {
        Graded { twins, cost: None, first: true, run_budget: Budget::default() }
    }
}

/// What a module's tests cost on the sample, in microseconds.
pub fn module_cost(template: &Template, cost: &BTreeMap<String, SlotCost>) -> u64 {
    template.slots().filter_map(|s| cost.get(&s.key())).map(|c| c.test_us).sum()
}

/// The twins a graded run may plant beside `slot`: its calibrated twins
/// that expect another value when it has such, else the others; and
/// whether they expect another value.
fn twin_pool(slot: &Slot, cal: &BTreeMap<String, BTreeSet<usize>>) -> (Vec<usize>, bool) {
    let ok: Vec<usize> = cal
        .get(&slot.key())
        .map(|set| set.iter().copied().filter(|i| *i < slot.twins.len()).collect())
        .unwrap_or_default();
    let values: Vec<usize> =
        ok.iter().copied().filter(|i| slot.twins[*i].expects_value()).collect();
    if values.is_empty() { (ok, false) } else { (values, true) }
}

/// Which of a run's modules (`template`, calibrated twins) carries its
/// first twin: drawn so that every test with a twin that expects another
/// value is as likely as another to be the one (every test with a twin,
/// when none has such).
pub fn first_twin_module(
    modules: &[(&Template, &BTreeMap<String, BTreeSet<usize>>)],
    rng: &mut Rng,
) -> Option<usize> {
    let counts: Vec<(usize, usize)> = modules
        .iter()
        .map(|(t, cal)| {
            let pools: Vec<(usize, bool)> = t
                .slots()
                .map(|s| twin_pool(s, cal))
                .filter(|(p, _)| !p.is_empty())
                .map(|(p, v)| (p.len(), v))
                .collect();
            (pools.iter().filter(|(_, v)| *v).count(), pools.len())
        })
        .collect();
    let values: usize = counts.iter().map(|c| c.0).sum();
    let weight = |c: &(usize, usize)| if values > 0 { c.0 } else { c.1 };
    let total: usize = counts.iter().map(weight).sum();
    if total == 0 {
        return None;
    }
    let mut n = rng.below(total);
    for (i, c) in counts.iter().enumerate() {
        if n < weight(c) {
            return Some(i);
        }
        n -= weight(c);
    }
    None
}

/// A graded run's twins cost at most this share of what grading the
/// sample cost, shared among the steps that carry twins by their cost
/// ([`choose_twins`]; `grade::calibration` sets each step's share).
pub const TWIN_BUDGET_PERCENT: u64 = 4;

/// Added to every twin's cost when choosing by cost, so that twins of
/// nearly free tests are not all certain picks.
const COST_FLOOR_US: u64 = 2_000;

/// A test that could get a twin in a graded run.
struct Candidate {
    slot: usize,
    twin: usize,
    value: bool,
    cost_us: u64,
}

/// Which tests of a module get a twin in a graded run, and which twin.
///
/// Every test with a calibrated twin is a candidate, with one of its twins
/// drawn at random (one that expects another value when it has one).
///
/// With the sample's costs: in the run's first module (`first`, see
/// [`first_twin_module`]) one candidate with a value twin is drawn
/// uniformly whatever it costs (a blanket forgery, an oracle or a value
/// equal to anything meets it, and every test of the run is as likely as
/// another to be the one). It is planted, or, when it alone costs more than
/// the run's budget, planted with the odds that keep its expected cost
/// within it, at least [`MIN_FIRST_ODDS`] (the candidate cannot tell
/// whether a run carries a twin).
///
/// The others are put in a random order in which cheap twins tend to come
/// first (each one's key is `u^cost`, `u` uniform: weighted sampling
/// without replacement): one negation, the value twins, the other
/// negations; and planted in that order while the module's budget lasts:
/// its share, by its tests' cost, of the run's [`Budget`] (the step's share
/// of [`TWIN_BUDGET_PERCENT`] of what grading the sample cost); up to a
/// third of the tests, at least four.
///
/// Without costs (an older calibration): value twins first, a third of the
/// tests, at least four.
pub(super) fn choose_twins(
    template: &Template,
    graded: Graded,
    rng: &mut Rng,
) -> BTreeMap<usize, usize> {
    let Graded { twins: cal, cost, first, run_budget } = graded;
    let (cost, mut budget) = match cost {
        Some((c, b)) => (Some(c), b),
        None => (None, Budget::default()),
    };
    let mut cands = Vec::new();
    for s in template.slots() {
        let (pool, value) = twin_pool(s, cal);
        if pool.is_empty() {
            continue;
        }
        let twin = pool[rng.below(pool.len())];
        let cost_us = cost
            .and_then(|m| m.get(&s.key()))
            .map_or(0, |c| c.twins_us.get(&twin).copied().unwrap_or(c.test_us));
        cands.push(Candidate { slot: s.slot, twin, value, cost_us });
    }
    let k = cands.len().div_ceil(3).max(4).min(cands.len());
    if cost.is_none() {
        let (mut value, mut other): (Vec<_>, Vec<_>) = cands.into_iter().partition(|c| c.value);
        shuffle(&mut value, rng);
        shuffle(&mut other, rng);
        return value.into_iter().chain(other).take(k).map(|c| (c.slot, c.twin)).collect();
    }
    let mut out = BTreeMap::new();
    let values = cands.iter().filter(|c| c.value).count();
    if first && !cands.is_empty() {
        let nth = rng.below(if values > 0 { values } else { cands.len() });
        let i = (cands.iter().enumerate())
            .filter(|(_, c)| c.value || values == 0)
            .nth(nth)
            .map_or(0, |(i, _)| i);
        let c = cands.remove(i);
        let odds = (run_budget.us as f64 / c.cost_us.max(1) as f64).clamp(MIN_FIRST_ODDS, 1.0);
        if rng.unit() <= odds {
            if !budget.spend(c.cost_us) {
                budget = Budget::default();
            }
            out.insert(c.slot, c.twin);
        }
    }
    let mut keyed: Vec<(f64, Candidate)> = cands
        .into_iter()
        .map(|c| (rng.unit().ln() * (c.cost_us + COST_FLOOR_US) as f64, c))
        .collect();
    // Each kind in its cost-weighted random order: one negation (it catches
    // an oracle that reads which way the assertion goes), then the value
    // twins (they also catch values equal to anything), then the other
    // negations.
    keyed.sort_by(|a, b| b.0.total_cmp(&a.0));
    let (value, mut negation): (Vec<_>, Vec<_>) = keyed.into_iter().partition(|(_, c)| c.value);
    let rest = negation.split_off(negation.len().min(1));
    let order = negation.into_iter().chain(value).chain(rest);
    for (_, c) in order {
        if out.len() >= k {
            break;
        }
        if budget.spend(c.cost_us) {
            out.insert(c.slot, c.twin);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use crate::evidence::{TestOutcome, TestStatus};
    use crate::trusted::RunnerResult;

    fn runner(cases: Vec<(String, TestOutcome)>) -> RunnerResult {
        RunnerResult { started: true, end: Some(1), cases, ..RunnerResult::default() }
    }

    /// A module of `n` plain tests, each with one value twin and one
    /// negation, all calibrated, the first `expensive` costing 100 ms and
    /// the rest 1 ms (their twins likewise).
    fn costly(
        n: usize,
        expensive: usize,
    ) -> (Template, BTreeMap<String, BTreeSet<usize>>, BTreeMap<String, SlotCost>) {
        let mut parts = Vec::new();
        let mut cal = BTreeMap::new();
        let mut cost = BTreeMap::new();
        for i in 0..n {
            let name = format!("test_{i}");
            parts.push(Part::Slot(Slot {
                slot: i,
                indent: String::new(),
                name: name.clone(),
                class: None,
                code: format!("def __GH_NAME__():\n    assert f({i}) == {i}"),
                twins: vec![
                    Twin {
                        code: format!("def __GH_NAME__():\n    assert f({i}) == -1"),
                        what: "line 2: expects another value".into(),
                    },
                    Twin {
                        code: format!("def __GH_NAME__():\n    assert not f({i}) == {i}"),
                        what: "line 2: negated".into(),
                    },
                ],
            }));
            parts.push(Part::Text { text: "\n".into() });
            cal.insert(name.clone(), [0usize, 1].into());
            let us = if i < expensive { 100_000 } else { 1_000 };
            cost.insert(name, SlotCost { test_us: us, twins_us: [(0, us), (1, us)].into() });
        }
        (Template { parts, error: None }, cal, cost)
    }

    #[test]
    fn twins_are_chosen_by_what_they_cost_within_a_budget() {
        let (template, cal, cost) = costly(20, 10);
        let budget = Budget { us: 50_000 };
        let mut planted_at = BTreeMap::<usize, usize>::new();
        for seed in 0..400u32 {
            let mut rng = Rng::new(&[&seed.to_le_bytes()]);
            let chosen = choose_twins(
                &template,
                Graded {
                    twins: &cal,
                    cost: Some((&cost, budget)),
                    first: true,
                    run_budget: budget,
                },
                &mut rng,
            );
            // At least one twin, every one expecting another value here.
            assert!(!chosen.is_empty() && chosen.values().all(|t| *t == 0), "{chosen:?}");
            // Beyond the first, the twins fit the budget (no second costly
            // one, the cheap within it); a third at most.
            let costs: Vec<u64> =
                chosen.keys().map(|s| cost[&format!("test_{s}")].test_us).collect();
            let costly = costs.iter().filter(|c| **c == 100_000).count();
            let cheap: u64 = costs.iter().filter(|c| **c < 100_000).sum();
            assert!(costly <= 1 && cheap <= 51_000, "{chosen:?} over {budget:?}");
            assert!(chosen.len() <= 7, "{chosen:?}");
            for s in chosen.keys() {
                *planted_at.entry(*s).or_default() += 1;
            }
        }
        // Cheap tests are twinned far more often; every test sometimes
        // (the first twin is drawn whatever it costs).
        let expensive: usize = (0..10).map(|s| planted_at.get(&s).copied().unwrap_or(0)).sum();
        let cheap: usize = (10..20).map(|s| planted_at.get(&s).copied().unwrap_or(0)).sum();
        assert!(cheap > 5 * expensive.max(1), "cheap {cheap}, expensive {expensive}");
        assert!((0..20).all(|s| planted_at.contains_key(&s)), "{planted_at:?}");
        // Without costs: a third of the tests, at least four.
        let chosen = choose_twins(&template, Graded::by_count(&cal), &mut Rng::new(&[b"x"]));
        assert_eq!(chosen.len(), 7, "{chosen:?}");
    }

    #[test]
    fn a_run_plants_its_first_twin_in_one_module_and_others_within_budget() {
        // Three tests of 100 ms and a budget of 60 ms: only the run's
        // first twin is planted there.
        let (costly3, cal3, cost3) = costly(3, 3);
        let mut rng = Rng::new(&[b"f"]);
        let graded = |first, any_us| Graded {
            twins: &cal3,
            cost: Some((&cost3, Budget { us: 60_000 })),
            first,
            run_budget: Budget { us: any_us },
        };
        assert_eq!(choose_twins(&costly3, graded(true, 100_000), &mut rng).len(), 1);
        assert!(choose_twins(&costly3, graded(false, 100_000), &mut rng).is_empty());
        // A first twin dearer than the run's budget: planted with the odds
        // budget / cost (a half here), so its expected cost is within it,
        // and never with odds below a quarter (no budget at all).
        let planted = |budget| {
            (0..2000u32)
                .filter(|seed| {
                    let mut rng = Rng::new(&[&seed.to_le_bytes()]);
                    !choose_twins(&costly3, graded(true, budget), &mut rng).is_empty()
                })
                .count()
        };
        let (half, none) = (planted(50_000), planted(0));
        assert!((900..1100).contains(&half), "{half}");
        assert!((400..600).contains(&none), "{none}");
        // The first twin's module: every value-twinned test alike, so a
        // module of three is drawn three times as often as one of one.
        let (one, cal1, _) = costly(1, 1);
        let mut drawn = [0usize; 2];
        for seed in 0..2000u32 {
            let mut rng = Rng::new(&[&seed.to_le_bytes()]);
            let i = first_twin_module(&[(&costly3, &cal3), (&one, &cal1)], &mut rng).unwrap();
            drawn[i] += 1;
        }
        assert!((1350..1650).contains(&drawn[0]), "{drawn:?}");
        // Value twins come first: a module with only negations is drawn
        // only when no module has a value twin.
        let negations: BTreeMap<String, BTreeSet<usize>> =
            cal3.keys().map(|k| (k.clone(), [1usize].into())).collect();
        for seed in 0..50u32 {
            let mut rng = Rng::new(&[&seed.to_le_bytes()]);
            assert_eq!(
                first_twin_module(&[(&costly3, &negations), (&one, &cal1)], &mut rng),
                Some(1)
            );
        }
        let mut rng = Rng::new(&[b"n"]);
        assert_eq!(first_twin_module(&[(&costly3, &negations)], &mut rng), Some(0));
        assert_eq!(first_twin_module(&[], &mut rng), None);
    }

    #[test]
    fn calibration_records_what_tests_and_twins_cost() {
        let (template, _, _) = costly(2, 0);
        let mut roles = BTreeMap::new();
        let text =
            plant(&template, "t.py", Choose::All, &|_| false, &mut Rng::new(&[b"c"]), &mut roles);
        assert_eq!(roles.len(), 6, "{text}");
        let c = RunCanaries { roles: roles.clone(), calibrating: true };
        let mut r = runner(Vec::new());
        for (name, role) in &roles {
            let (us, status) = match role {
                Role::Real { .. } => (500, TestStatus::Passed),
                Role::Twin { what, .. } if what.contains("negated") => (9_000, TestStatus::Failed),
                _ => (7_000, TestStatus::Failed),
            };
            // Two parameters each: the costs add up.
            for p in ["[1]", "[2]"] {
                let id = format!("t.py::{name}{p}");
                r.cost_us.insert(id.clone(), us);
                let o = TestOutcome {
                    classname: "t".into(),
                    name: format!("{name}{p}"),
                    status,
                    message: None,
                };
                r.cases.push((id, o));
            }
        }
        let v = c.resolve(&mut r, false);
        let (test_us, twins) = &v.cost["t.py"]["test_1"];
        assert_eq!(*test_us, 1_000);
        assert_eq!(twins["line 2: expects another value"], 14_000);
        assert_eq!(twins["line 2: negated"], 18_000);
        // Laid into the step's calibration by twin index.
        let steps: BTreeMap<String, StepCanaries> = [(
            "hidden".to_string(),
            StepCanaries {
                files: [("t.py".to_string(), template)].into(),
                ..StepCanaries::default()
            },
        )]
        .into();
        let out = crate::guard::calibrated_from(&steps, &[("hidden".to_string(), v)].into());
        let slot = &out["hidden"].cost["t.py"]["test_0"];
        assert_eq!(slot, &SlotCost { test_us: 1_000, twins_us: [(0, 14_000), (1, 18_000)].into() });
        assert_eq!(out["hidden"].calibrated["t.py"]["test_0"], [0usize, 1].into());
    }

    /// The calibration's twin budget, case by case: (sample's wall µs, its
    /// CPU µs, its twins' µs) → budget µs.
    #[test]
    fn the_twin_budget_is_a_share_of_the_sample_without_its_twins() {
        fn check(wall: u64, cpu: u64, twins: u64, expect: u64) {
            assert_eq!(Budget::of_sample(wall, cpu, twins).us, expect, "({wall}, {cpu}, {twins})");
        }
        // Nothing measured: nothing to spend.
        check(0, 0, 0, 0);
        // No twins: 4 % of the lesser of wall and CPU.
        check(10_000_000, 5_000_000, 0, 200_000);
        check(5_000_000, 10_000_000, 0, 200_000);
        // A grading that mostly waits (resume-download: 1.4 s wall, 0.5 s
        // CPU) buys twins by its CPU time.
        check(1_400_000, 500_000, 0, 20_000);
        // The twins' cost comes off both...
        check(10_000_000, 5_000_000, 1_000_000, 160_000);
        // ...but never more than half of either.
        check(2_000_000, 2_000_000, 1_500_000, 40_000);
        check(10_000_000, 2_000_000, 1_500_000, 40_000);
        check(1_000_000, 1_000_000, 5_000_000, 20_000);
        // Steps share it by what they cost.
        let b = Budget::of_sample(10_000_000, 10_000_000, 0);
        assert_eq!(
            (b.share(3, 4).us, b.share(1, 4).us, b.share(1, 0).us),
            (300_000, 100_000, 400_000)
        );
    }
}
