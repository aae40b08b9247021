//! Work that must never slow a grading down: the built-in library's
//! background self-tests. [`run`] runs a closure on a thread of its own
//! whose CPU policy is `SCHED_IDLE` (nice 19 where that is refused) and
//! whose I/O class is idle. On Linux these are per-thread attributes that
//! every thread it starts (the self-test's parallel gradings) and every
//! process it forks (the sandboxed commands) inherits, so the whole
//! self-test only gets the CPU and disk time nothing else wants. The
//! sandbox puts its commands in memory, pids and cpuacct cgroups, not in
//! a cpu cgroup of their own, so the scheduler weighs them by these
//! attributes against the gradings' commands.

/// Runs `work` on a new thread at the lowest priority and waits for it
/// without holding an async worker.
pub async fn run<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> anyhow::Result<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("gatehouse-background".into())
        .spawn(move || {
            lower_this_thread();
            let _ = tx.send(work());
        })
        .map_err(|e| anyhow::anyhow!("starting a background thread: {e}"))?;
    rx.await.map_err(|_| anyhow::anyhow!("the background work panicked"))
}

/// What [`lower_this_thread`] achieved, for the log and the tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lowered {
    pub idle_policy: bool,
    pub nice: i32,
    pub idle_io: bool,
}

/// Lowers the calling thread's CPU and I/O priority as far as the kernel
/// lets it (best effort: a refusal is logged, the work runs anyway).
pub fn lower_this_thread() -> Lowered {
    // SAFETY: plain system calls on the calling thread (tid 0 / who 0 name
    // it), with a parameter struct that lives across the call.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        let idle_policy = libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) == 0;
        let niced = libc::setpriority(libc::PRIO_PROCESS, 0, 19) == 0;
        // ioprio_set(IOPRIO_WHO_PROCESS, 0: this thread, IOPRIO_CLASS_IDLE << 13).
        const IOPRIO_WHO_PROCESS: libc::c_long = 1;
        const IOPRIO_CLASS_IDLE: libc::c_long = 3;
        let idle_io =
            libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, IOPRIO_CLASS_IDLE << 13)
                == 0;
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, 0);
        let lowered = Lowered { idle_policy, nice, idle_io };
        if !idle_policy || !niced || !idle_io {
            tracing::warn!(?lowered, "background work could not be lowered fully; it runs anyway");
        }
        lowered
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn background_work_runs_at_the_lowest_priority_and_the_caller_keeps_its_own() {
        let before = unsafe { libc::sched_getscheduler(0) };
        let (lowered, policy, child_nice) = super::run(|| {
            let lowered = super::lower_this_thread();
            let policy = unsafe { libc::sched_getscheduler(0) };
            // A thread it starts inherits the priority.
            let child = std::thread::spawn(|| unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) });
            (lowered, policy, child.join().unwrap())
        })
        .await
        .unwrap();
        assert!(lowered.idle_policy && policy == libc::SCHED_IDLE, "{lowered:?}");
        assert_eq!((lowered.nice, child_nice), (19, 19));
        assert_eq!(unsafe { libc::sched_getscheduler(0) }, before, "the caller is untouched");
    }
}
