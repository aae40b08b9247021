//! Independent jobs side by side, one thread per core, results in job
//! order. A leaf. A job that panics panics the caller (its result is never
//! silently left out).

use std::sync::atomic::{AtomicUsize, Ordering};

/// `f(0)`, `f(1)`, … `f(jobs - 1)`, run on up to one thread per core, in
/// that order in the result.
pub fn map_indexed<R: Send>(jobs: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(jobs.max(1));
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= jobs {
                            break;
                        }
                        done.push((i, f(i)));
                    }
                    done
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_job_runs_once_and_results_keep_job_order() {
        let runs = AtomicUsize::new(0);
        let out = map_indexed(50, |i| {
            runs.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(std::time::Duration::from_millis((50 - i as u64) % 7));
            i * 2
        });
        assert_eq!(out, (0..50).map(|i| i * 2).collect::<Vec<_>>());
        assert_eq!(runs.load(Ordering::Relaxed), 50);
        assert!(map_indexed(0, |i| i).is_empty());
    }

    #[test]
    fn a_panicking_job_is_not_dropped_silently() {
        let r = std::panic::catch_unwind(|| {
            map_indexed(4, |i| if i == 2 { panic!("job 2") } else { i })
        });
        assert!(r.is_err());
    }
}
