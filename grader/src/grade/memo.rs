//! One self-test's memo of mutant runs: the mutation lane runs the
//! candidate's tests against each mutant of the sample, and within one
//! `packet check` many gradings (the sample, and every variant that only
//! changes the mutated file) hand it the very same tree. Such a run is
//! reused, never run twice.
//!
//! Only `packet check` sets a memo (`GradeOptions::memo`): a platform
//! grading runs every one of its runs itself. The key is everything the
//! run reads: the whole workspace with the mutant in place of its target
//! (path, size and digest of every file) and the command. A mutant run
//! plants no twin, so the calibration's run of a mutant of the sample is
//! the self-test's grading's too (`check` hands the calibration its memo).
//! A run cut at a limit is not kept (its limits were its own).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use sha2::{Digest, Sha256};

use crate::tree::{Tree, sha256_hex};

/// What one run read: see the module's text.
pub type Key = [u8; 32];

/// Results by [`Key`]; a key being computed holds its cell, so a second
/// grading asking for the same run waits for the first instead of running
/// it beside it.
pub struct Memo<T> {
    cells: Mutex<HashMap<Key, Arc<Mutex<Option<T>>>>>,
    reused: Mutex<usize>,
}

impl<T> Default for Memo<T> {
    fn default() -> Self {
        Memo { cells: Mutex::default(), reused: Mutex::new(0) }
    }
}

impl<T> std::fmt::Debug for Memo<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memo").field("reused", &self.reused()).finish_non_exhaustive()
    }
}

impl<T: Clone> Memo<T> {
    /// The result kept under `key`, else `run`'s, kept when `keep` says so
    /// (a failed `run` keeps nothing).
    pub fn get_or_run<E>(
        &self,
        key: Key,
        keep: impl FnOnce(&T) -> bool,
        run: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        let cell = self
            .cells
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key)
            .or_default()
            .clone();
        let mut slot = cell.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(kept) = &*slot {
            *self.reused.lock().unwrap_or_else(PoisonError::into_inner) += 1;
            return Ok(kept.clone());
        }
        let fresh = run()?;
        if keep(&fresh) {
            *slot = Some(fresh.clone());
        }
        Ok(fresh)
    }
}

impl<T> Memo<T> {
    /// How many runs were reused instead of run.
    pub fn reused(&self) -> usize {
        *self.reused.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The key of running `command` on `workspace` (its listing) with
/// `target` replaced by `mutant`.
pub fn mutant_key(workspace: &Tree, target: &str, mutant: &[u8], command: &str) -> Key {
    let mut tree = workspace.clone();
    tree.insert(target.to_string(), (mutant.len() as u64, sha256_hex(mutant)));
    let mut h = Sha256::new();
    for (path, (size, sha)) in &tree {
        h.update(path.as_bytes());
        h.update([0]);
        h.update(size.to_le_bytes());
        h.update(sha.as_bytes());
        h.update([b'\n']);
    }
    h.update([0xff]);
    h.update(command.as_bytes());
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> Tree {
        files
            .iter()
            .map(|(p, text)| (p.to_string(), (text.len() as u64, sha256_hex(text.as_bytes()))))
            .collect()
    }

    const CMD: &str = "python3 -m pytest -q";

    #[test]
    fn trees_that_differ_only_in_the_target_share_a_key() {
        let sample = tree(&[("bucket.py", "good"), ("test_bucket.py", "tests"), ("NOTES.md", "n")]);
        let variant = tree(&[("bucket.py", "bad"), ("test_bucket.py", "tests"), ("NOTES.md", "n")]);
        let k = |t: &Tree| mutant_key(t, "bucket.py", b"mutant", CMD);
        assert_eq!(k(&sample), k(&variant));
        // A target the tree lacks is placed all the same.
        let without = tree(&[("test_bucket.py", "tests"), ("NOTES.md", "n")]);
        assert_eq!(k(&sample), k(&without));
    }

    #[test]
    fn anything_else_the_run_reads_makes_another_key() {
        let base = tree(&[("bucket.py", "good"), ("test_bucket.py", "tests")]);
        let key = mutant_key(&base, "bucket.py", b"mutant", CMD);
        let other_tests = tree(&[("bucket.py", "good"), ("test_bucket.py", "tests!")]);
        let extra_file =
            tree(&[("bucket.py", "good"), ("test_bucket.py", "tests"), ("conftest.py", "")]);
        let renamed = tree(&[("bucket.py", "good"), ("test_bucket2.py", "tests")]);
        for (what, other) in [
            ("another test file", mutant_key(&other_tests, "bucket.py", b"mutant", CMD)),
            ("one more file", mutant_key(&extra_file, "bucket.py", b"mutant", CMD)),
            ("a renamed file", mutant_key(&renamed, "bucket.py", b"mutant", CMD)),
            ("another mutant", mutant_key(&base, "bucket.py", b"mutant2", CMD)),
            ("another target", mutant_key(&base, "test_bucket.py", b"mutant", CMD)),
            ("another command", mutant_key(&base, "bucket.py", b"mutant", "python3 -m pytest")),
        ] {
            assert_ne!(key, other, "{what}");
        }
    }

    #[test]
    fn a_run_is_reused_only_under_its_key_and_only_when_kept() {
        let memo: Memo<u32> = Memo::default();
        let mut runs = 0;
        let mut run = |v: u32| {
            runs += 1;
            Ok::<u32, ()>(v)
        };
        assert_eq!(memo.get_or_run([1; 32], |_| true, || run(7)), Ok(7));
        assert_eq!(memo.get_or_run([1; 32], |_| true, || run(8)), Ok(7));
        assert_eq!(memo.get_or_run([2; 32], |_| true, || run(9)), Ok(9));
        // Not kept (a run cut at its limit): run again next time.
        assert_eq!(memo.get_or_run([3; 32], |_| false, || run(10)), Ok(10));
        assert_eq!(memo.get_or_run([3; 32], |_| true, || run(11)), Ok(11));
        // A failed run keeps nothing.
        assert_eq!(memo.get_or_run([4; 32], |_| true, || Err::<u32, ()>(())), Err(()));
        assert_eq!(memo.get_or_run([4; 32], |_| true, || run(12)), Ok(12));
        assert_eq!(runs, 5);
        assert_eq!(memo.reused(), 1);
    }

    #[test]
    fn concurrent_askers_of_one_key_run_it_once() {
        let memo: Memo<u32> = Memo::default();
        let runs = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    memo.get_or_run(
                        [5; 32],
                        |_| true,
                        || {
                            runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(50));
                            Ok::<u32, ()>(1)
                        },
                    )
                });
            }
        });
        assert_eq!(runs.into_inner(), 1);
        assert_eq!(memo.reused(), 3);
    }
}
