//! The grading queue's workers.
//!
//! Jobs are database rows (they survive restarts). A worker claims one with
//! a lease, renews the lease every third of its length while it works, and
//! completes the job only while it still holds the lease. A worker that dies
//! stops renewing; once the lease expires another worker claims the job
//! again. A job claimed more than its `max_attempts` times is failed.
//!
//! A failure of the machine rather than of the work (the disk or the
//! database is full: `error::storage_full`) uses up no attempt: the job
//! goes back to the queue and the worker waits ([`STORAGE_BACKOFF`],
//! doubling) before claiming again; a grading whose result cannot be
//! stored keeps it and tries again while it holds the lease. So a full
//! disk delays gradings and loses none; they resume once there is room.
//! Two lanes: the workers that grade claim gradings and everything an
//! author asked for, never the built-in library's background self-tests;
//! one more worker per process claims only those, and runs them at the
//! lowest CPU and I/O priority, so a grading never waits behind one and
//! barely shares the machine with it.
//!
//! A claim takes the highest `priority` first (0 for gradings and an author's
//! checks and audits, lower for the built-in library's background checks,
//! raised to 0 when an author asks for one), then gradings by their
//! assignment's turn (how many grading jobs it had before, fixed at enqueue, so
//! assignments take turns), then the oldest; a running job is never preempted.
//! A `check` job that fails for good (or is interrupted too often) stores a
//! failed report whose one item says why (`library::fail_check`), shown like
//! any failing item. A background check runs at idle CPU and I/O priority
//! (`crate::lowly`) and measures its calibration apart
//! (`check::check_packet_with(.., true)`, `Grader::calibration_apart`), so a
//! grading of the same version never waits behind that starved measurement; one
//! that fails there is run again at normal priority, its calibration measured
//! anew (`Grader::forget_calibration`), and that report is kept. `grading`
//! grades a submission, `library::run_check` self-tests a packet version,
//! `audit::run_job` audits one (an `audit` job has one attempt: a model is
//! never called twice for it).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use app::contract::{JobKind, SubmissionState};
use tokio::task::JoinHandle;

use crate::db::jobs::Released;
use crate::db::{BUILTIN_CHECK_PRIORITY, GradeResult, Job, Lane};
use crate::grading::{GradeOutcome, grade_submission};
use crate::now_ms;
use crate::state::AppState;

/// How often an idle worker looks for work without being woken (jobs whose
/// lease expired are found this way; so are jobs queued by other processes
/// when the database has no LISTEN/NOTIFY).
const POLL: Duration = Duration::from_secs(1);

/// The fallback poll when the database wakes workers (Postgres `LISTEN`).
const SLOW_POLL: Duration = Duration::from_secs(3);

/// How long a worker waits after a job failed for want of storage before
/// it claims again; doubled on each such failure in a row, up to
/// [`STORAGE_BACKOFF_MAX`].
pub const STORAGE_BACKOFF: Duration = Duration::from_secs(2);
const STORAGE_BACKOFF_MAX: Duration = Duration::from_secs(60);

/// Starts `n` workers on the current runtime, for as long as it runs.
pub fn spawn_workers(state: &AppState, n: usize) -> Vec<JoinHandle<()>> {
    let (_never, stop) = tokio::sync::watch::channel(false);
    // The sender is dropped here: a closed channel never reads as "stop".
    spawn_workers_until(state, n, stop)
}

/// Starts `n` workers, plus the background lane's one (when `n > 0`),
/// that stop claiming once `stop` reads true; each finishes the job it
/// holds, then its task ends. On Postgres one `LISTEN` per call wakes them
/// when any process queues a job.
pub fn spawn_workers_until(
    state: &AppState,
    n: usize,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "local".into());
    let run = &crate::auth::password::random_token()[..8];
    let listening = Arc::new(AtomicBool::new(false));
    {
        let (state, listening) = (state.clone(), listening.clone());
        tokio::spawn(async move {
            let memo = state.memo.clone();
            match state.db.listen_for_jobs(Arc::new(move || memo.wake.notify_waiters())).await {
                Ok(on) => listening.store(on, Ordering::SeqCst),
                Err(e) => tracing::warn!(error = %e, "listening for jobs failed; the workers poll"),
            }
        });
    }
    let background = (n > 0).then_some(Lane::Background);
    (0..n)
        .map(|_| Lane::Foreground)
        .chain(background)
        .enumerate()
        .map(|(i, lane)| {
            let kind = if lane == Lane::Background { "background" } else { "worker" };
            let owner = format!("{host}:{}:{run}:{kind}{i}", std::process::id());
            let (state, stop, listening) = (state.clone(), stop.clone(), listening.clone());
            tokio::spawn(async move { worker_loop(state, owner, lane, stop, listening).await })
        })
        .collect()
}

async fn worker_loop(
    state: AppState,
    owner: String,
    lane: Lane,
    mut stop: tokio::sync::watch::Receiver<bool>,
    listening: Arc<AtomicBool>,
) {
    tracing::info!(%owner, ?lane, "grading worker started");
    let mut backoff = STORAGE_BACKOFF;
    loop {
        if *stop.borrow() {
            tracing::info!(%owner, "grading worker stopped");
            return;
        }
        let poll = if listening.load(Ordering::SeqCst) { SLOW_POLL } else { POLL };
        let notified = state.memo.wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let lease_ms = lease_ms(&state);
        match state.db.claim_job_in(&owner, now_ms(), lease_ms, lane).await {
            Ok(Some(job)) => {
                metrics::counter!("gatehouse_jobs_claimed_total", "kind" => job.kind.as_str())
                    .increment(1);
                if run_job(&state, &owner, job).await == Ended::StorageFull {
                    tracing::warn!(%owner, wait = ?backoff, "out of storage; waiting before the next claim");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {},
                        _ = stopped(&mut stop) => {},
                    }
                    backoff = (backoff * 2).min(STORAGE_BACKOFF_MAX);
                } else {
                    backoff = STORAGE_BACKOFF;
                }
            }
            Ok(None) => {
                update_depth(&state).await;
                tokio::select! {
                    _ = notified => {},
                    _ = tokio::time::sleep(poll) => {},
                    _ = stopped(&mut stop) => {},
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "claiming a job failed");
                let full = crate::error::error_is_storage_full(&e);
                tokio::time::sleep(if full { backoff } else { POLL }).await;
                if full {
                    backoff = (backoff * 2).min(STORAGE_BACKOFF_MAX);
                }
            }
        }
    }
}

/// Resolves when `stop` changes; never when its sender is gone.
async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    if stop.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

fn lease_ms(state: &AppState) -> i64 {
    (state.config.lease_secs.max(1) * 1000) as i64
}

async fn update_depth(state: &AppState) {
    if let Ok(jobs) = state.db.pending_jobs().await {
        metrics::gauge!("gatehouse_queue_depth").set(jobs.len() as f64);
    }
}

/// How a job's run ended, for the worker's pace.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    Ran,
    /// The attempt failed for want of storage; it is queued again.
    StorageFull,
}

/// Stores a grading's result, trying again (with a growing wait) while the
/// storage is full and the worker still holds the lease: a full disk or
/// database delays the result, never loses it. `Ok(false)` when the lease
/// was lost (another worker owns the job).
async fn store_grade(
    state: &AppState,
    owner: &str,
    job: &Job,
    outcome: &GradeOutcome,
    lost: &AtomicBool,
) -> anyhow::Result<bool> {
    let mut wait = STORAGE_BACKOFF;
    loop {
        let r = match outcome {
            GradeOutcome::Graded { scorecard_json, receipt_json, decision, score } => {
                let r =
                    GradeResult::Graded { scorecard_json, receipt_json, decision, score: *score };
                state.db.complete_grade_job(job.id, owner, &job.subject, r).await
            }
            GradeOutcome::Refused(reason) => {
                let r = GradeResult::Refused { reason };
                state.db.complete_grade_job(job.id, owner, &job.subject, r).await
            }
        };
        match r {
            Err(e) if crate::error::error_is_storage_full(&e) && !lost.load(Ordering::SeqCst) => {
                metrics::counter!("gatehouse_results_delayed_total").increment(1);
                tracing::warn!(job = job.id, wait = ?wait, error = %e, "out of storage; the grading result is kept and stored once there is room");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(STORAGE_BACKOFF_MAX);
            }
            Err(e) => return Err(anyhow::Error::new(e).context("storing the grading result")),
            Ok(stored) => return Ok(stored),
        }
    }
}

/// Runs one claimed job to completion, retry or failure.
async fn run_job(state: &AppState, owner: &str, job: Job) -> Ended {
    tracing::info!(job = job.id, kind = %job.kind, subject = %job.subject, attempt = job.attempts, "job claimed");
    if job.attempts > job.max_attempts {
        let message = format!("grading was interrupted {} times", job.attempts - 1);
        if state.db.finish_job(job.id, owner, false, Some(&message)).await.unwrap_or(false) {
            if job.kind == JobKind::Grade {
                grading_state(state, &job, SubmissionState::Failed, &message).await;
            } else if job.kind == JobKind::Audit
                && let Ok(id) = job.subject.parse::<i64>()
            {
                let message =
                    "the audit was interrupted (the worker running it stopped); start it again";
                logged(job.id, "fail_packet_audit", state.db.fail_packet_audit(id, message).await);
            } else if job.kind == JobKind::Check
                && let Ok(id) = job.subject.parse::<i64>()
            {
                let reason = format!(
                    "the self-test was interrupted {} times (the worker running it stopped); run it again",
                    job.attempts - 1
                );
                logged(job.id, "fail_check", crate::library::fail_check(state, id, &reason).await);
            }
        }
        metrics::counter!("gatehouse_jobs_failed_total", "kind" => job.kind.as_str()).increment(1);
        tracing::warn!(job = job.id, "{message}; failed");
        return Ended::Ran;
    }

    // The heartbeat renews the lease until the work is over; if the lease
    // was lost the result will not be stored.
    let lost = Arc::new(AtomicBool::new(false));
    let heartbeat = {
        let state = state.clone();
        let owner = owner.to_string();
        let lost = lost.clone();
        let id = job.id;
        tokio::spawn(async move {
            let lease = lease_ms(&state);
            let every = Duration::from_millis((lease / 3).max(100) as u64);
            loop {
                tokio::time::sleep(every).await;
                match state.db.renew_lease(id, &owner, now_ms() + lease).await {
                    Ok(true) => {}
                    Ok(false) => {
                        lost.store(true, Ordering::SeqCst);
                        tracing::warn!(job = id, "lost the lease; the result will be discarded");
                        return;
                    }
                    Err(e) => tracing::warn!(job = id, error = %e, "renewing the lease failed"),
                }
            }
        })
    };

    let result = match job.kind {
        JobKind::Grade => {
            logged(
                job.id,
                "set_submission_state",
                state.db.set_submission_state(&job.subject, SubmissionState::Grading, None).await,
            );
            let started = std::time::Instant::now();
            let graded = grade_submission(state, &job.subject).await;
            if graded.is_ok() {
                state.memo.record_grading(started.elapsed());
            }
            match graded {
                // Another worker owns the job now; its result is the one kept.
                Ok(_) if lost.load(Ordering::SeqCst) => {
                    tracing::warn!(
                        job = job.id,
                        "the lease was lost while grading; the result is discarded"
                    );
                    heartbeat.abort();
                    return Ended::Ran;
                }
                Ok(outcome) => match store_grade(state, owner, &job, &outcome, &lost).await {
                    Ok(true) => {
                        let ended = match outcome {
                            GradeOutcome::Graded { .. } => SubmissionState::Graded,
                            GradeOutcome::Refused(_) => SubmissionState::Refused,
                        };
                        grading_ended(state, &job.subject, ended).await;
                        Ok(())
                    }
                    Ok(false) => {
                        tracing::warn!(
                            job = job.id,
                            "the lease was lost before completion; another worker owns the job"
                        );
                        heartbeat.abort();
                        return Ended::Ran;
                    }
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            }
        }
        // A packet version's self-test or one of its audits: the subject
        // is the row's id, and the job ends with the work.
        kind @ (JobKind::Check | JobKind::Audit) => match job.subject.parse::<i64>() {
            Ok(id) => {
                let worked = if kind == JobKind::Check {
                    // A background self-test runs at the lowest priority.
                    let background = job.priority <= BUILTIN_CHECK_PRIORITY;
                    crate::library::run_check_in(state, id, background).await.map(drop)
                } else {
                    crate::audit::run_job(state, id).await
                };
                match worked {
                    Ok(())
                        if state
                            .db
                            .finish_job(job.id, owner, true, None)
                            .await
                            .unwrap_or(false) =>
                    {
                        Ok(())
                    }
                    Ok(()) => {
                        heartbeat.abort();
                        return Ended::Ran;
                    }
                    Err(e) => Err(e),
                }
            }
            Err(_) => Err(anyhow::anyhow!("{kind} job subject {:?} is not an id", job.subject)),
        },
    };
    heartbeat.abort();

    match result {
        Ok(()) => {
            metrics::counter!("gatehouse_jobs_done_total", "kind" => job.kind.as_str())
                .increment(1);
            tracing::info!(job = job.id, "job done");
        }
        Err(e) if crate::error::storage_full(&e) => {
            let message = format!("{e:#}");
            tracing::warn!(job = job.id, error = %message, "job attempt failed for want of storage; queued again (no attempt used)");
            metrics::counter!("gatehouse_jobs_retried_total", "kind" => job.kind.as_str())
                .increment(1);
            match state.db.release_job_uncounted(job.id, owner, &message).await {
                Ok(Released::Lost) => {
                    tracing::warn!(job = job.id, "the lease was lost before release")
                }
                Ok(_) => {
                    grading_state(state, &job, SubmissionState::Queued, &message).await;
                }
                // The database itself is full: the lease runs out and the
                // job is claimed again.
                Err(e) => tracing::error!(job = job.id, error = %e, "releasing the job failed"),
            }
            return Ended::StorageFull;
        }
        Err(e) => {
            let message = format!("{e:#}");
            tracing::warn!(job = job.id, error = %message, "job attempt failed");
            match state.db.release_job(job.id, owner, &message).await {
                Ok(Released::Failed) => {
                    metrics::counter!("gatehouse_jobs_failed_total", "kind" => job.kind.as_str())
                        .increment(1);
                    if job.kind == JobKind::Grade {
                        grading_state(state, &job, SubmissionState::Failed, &message).await;
                    } else if job.kind == JobKind::Audit
                        && let Ok(id) = job.subject.parse::<i64>()
                    {
                        logged(
                            job.id,
                            "fail_packet_audit",
                            state.db.fail_packet_audit(id, &message).await,
                        );
                    } else if let Ok(id) = job.subject.parse::<i64>() {
                        let reason = format!("the self-test could not run: {message}");
                        logged(
                            job.id,
                            "fail_check",
                            crate::library::fail_check(state, id, &reason).await,
                        );
                    }
                }
                Ok(Released::Requeued) => {
                    metrics::counter!("gatehouse_jobs_retried_total", "kind" => job.kind.as_str())
                        .increment(1);
                    grading_state(state, &job, SubmissionState::Queued, &message).await;
                    state.wake_workers();
                }
                Ok(Released::Lost) => {
                    tracing::warn!(job = job.id, "the lease was lost before release")
                }
                Err(e) => tracing::error!(job = job.id, error = %e, "releasing the job failed"),
            }
        }
    }
    Ended::Ran
}

/// Logs a database write of job `id` that failed: the job goes on (its own
/// state is the queue's), but the failure is never dropped silently.
fn logged<T, E: std::fmt::Display>(id: i64, what: &str, result: Result<T, E>) {
    if let Err(e) = result {
        tracing::error!(job = id, error = %e, "{what} failed");
    }
}

/// Where a queued submission stands in line and about how long it will
/// take, as the candidate's pages say it; None once it is no longer queued.
pub async fn wait_of(state: &AppState, submission_id: &str) -> Option<app::contract::QueueWait> {
    let job = state
        .db
        .jobs_for(JobKind::Grade, submission_id)
        .await
        .ok()?
        .into_iter()
        .rev()
        .find(|j| j.state == app::contract::JobState::Queued)?;
    let place = state.db.queue_place(job.id).await.ok()??;
    // How long a grading takes here: the recent ones, else the sample's
    // grading in the version's recorded self-test.
    let typical = match state.memo.typical_grading() {
        Some(t) => Some(t),
        None => recorded_sample_time(state, submission_id).await,
    };
    Some(wait_words(place.ahead, place.running, state.config.workers.max(1), typical))
}

async fn recorded_sample_time(state: &AppState, submission_id: &str) -> Option<Duration> {
    let s = state.db.submission_by_id(submission_id).await.ok()??;
    let a = state.db.assignment_by_id(&s.assignment_id).await.ok()??;
    let v = state.db.version_by_id(a.packet_version_id).await.ok()??;
    let c = crate::grading::recorded_calibration(v.check_report.as_deref())?;
    (c.sample_ms > 0).then(|| Duration::from_millis(c.sample_ms))
}

/// The wait in words: `ahead` queued before it, `running` being graded,
/// `workers` grading at once, each taking about `typical`.
pub fn wait_words(
    ahead: i64,
    running: i64,
    workers: usize,
    typical: Option<Duration>,
) -> app::contract::QueueWait {
    let (ahead, running) = (ahead.max(0) as u64, running.max(0) as u64);
    let position = ahead + 1;
    let line = match (ahead, running) {
        (0, 0) => "Your submission is next in line for a grader.".to_string(),
        (0, r) => format!(
            "Your submission is next in line; {r} {} being graded now.",
            if r == 1 { "submission is" } else { "submissions are" }
        ),
        (a, _) => format!(
            "Your submission is number {position} in line ({a} {} ahead of it).",
            if a == 1 { "submission" } else { "submissions" }
        ),
    };
    let estimate_secs = typical.map(|t| {
        let each = t.as_secs_f64().max(1.0);
        // Those ahead and those running share the workers; a running one
        // is half done on average.
        let before = (ahead as f64 + running as f64 * 0.5) / workers as f64;
        ((before + 1.0) * each).ceil() as u64
    });
    let sentence = match estimate_secs {
        Some(s) => format!("{line} It should be graded in about {}.", about(s)),
        None => format!(
            "{line} No grading has finished on this server yet, so there is no estimate of the wait."
        ),
    };
    app::contract::QueueWait { position, running, estimate_secs, sentence }
}

/// Seconds as people round them: "10 s", "40 s", "2 min", "1 h 5 min".
fn about(secs: u64) -> String {
    match secs {
        0..=9 => "10 s".into(),
        10..=59 => format!("{} s", secs.div_ceil(5) * 5),
        60..=3599 => format!("{} min", secs.div_ceil(60)),
        _ => {
            let m = secs.div_ceil(60);
            format!("{} h {} min", m / 60, m % 60)
        }
    }
}

/// A grading job's submission follows its job: queued again or failed,
/// with why. Other jobs' subjects are not submissions: nothing to do.
async fn grading_state(state: &AppState, job: &Job, to: SubmissionState, message: &str) {
    if job.kind == JobKind::Grade {
        logged(
            job.id,
            "set_submission_state",
            state.db.set_submission_state(&job.subject, to, Some(message)).await,
        );
        if to == SubmissionState::Failed {
            grading_ended(state, &job.subject, to).await;
        }
    }
}

/// The webhook events of a grading that ended `to`: `submission.graded`,
/// and `results.released` if the grading released them.
async fn grading_ended(state: &AppState, submission_id: &str, to: SubmissionState) {
    let assignment = match state.db.submission_by_id(submission_id).await {
        Ok(Some(s)) => s.assignment_id,
        Ok(None) => return,
        Err(e) => {
            tracing::error!(submission = submission_id, error = %e, "reading a graded submission failed");
            return;
        }
    };
    let mut data = crate::webhooks::submission_data(state, submission_id, &assignment);
    data["state"] = serde_json::Value::from(to.as_str());
    crate::webhooks::emit(state, crate::webhooks::Event::SubmissionGraded, data).await;
    if to == SubmissionState::Graded {
        crate::webhooks::released_now(state, submission_id, crate::webhooks::Release::Grading)
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_is_said_in_words_with_an_estimate_when_one_is_known() {
        let s = Some(Duration::from_secs(20));
        let check = |ahead, running, workers, typical, position, secs: Option<u64>, says: &str| {
            let w = wait_words(ahead, running, workers, typical);
            assert_eq!((w.position, w.estimate_secs), (position, secs), "{w:?}");
            assert!(w.sentence.contains(says), "{w:?} should say {says:?}");
        };
        check(
            0,
            0,
            1,
            s,
            1,
            Some(20),
            "next in line for a grader. It should be graded in about 20 s.",
        );
        check(0, 1, 1, s, 1, Some(30), "1 submission is being graded now");
        check(
            2,
            1,
            1,
            s,
            3,
            Some(70),
            "number 3 in line (2 submissions ahead of it). It should be graded in about 2 min.",
        );
        check(2, 0, 2, s, 3, Some(40), "about 40 s");
        check(1, 0, 1, None, 2, None, "no estimate");
        assert_eq!(about(3), "10 s");
        assert_eq!(about(3725), "1 h 3 min");
    }
}
