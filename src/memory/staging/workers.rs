//! The copying threads a staging keeps: parked between copies; a copy lends them one job (a
//! borrowed closure) and takes it back before it returns, as a scoped thread would be
//! joined, without starting a thread per copy.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a thread that finished a job looks for the next one before it sleeps: copies
/// often follow each other, and waking a sleeping thread costs tens of microseconds.
const PARK_SPIN: Duration = Duration::from_micros(100);

/// Spins (never sleeping) until `changed` returns `true` or `budget` has passed; whether it
/// changed.
pub(super) fn spin_until(budget: Duration, changed: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    loop {
        for _ in 0..64 {
            if changed() {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= budget {
            return changed();
        }
    }
}

/// A job as the threads see it: a borrowed closure with its lifetime erased. Only
/// [`Workers::lend`] makes one, and it takes it back (and waits until no thread runs it)
/// before the borrow ends.
#[derive(Clone, Copy)]
struct JobRef(*const (dyn Fn() + Sync + 'static));

// SAFETY: the closure is `Sync`, so calling it from several threads is sound; the pointer
// is dereferenced only while `lend` keeps the borrow alive (see `lend`).
unsafe impl Send for JobRef {}

struct State {
    /// The job being lent, if any.
    job: Option<JobRef>,
    /// Counts the jobs lent; a thread joins each one at most once.
    generation: u64,
    /// How many more threads may join the job.
    wanted: usize,
    /// Threads running the job now.
    inside: usize,
    /// The threads exit (the staging is being freed).
    stop: bool,
    /// Threads asleep on `wake`.
    sleeping: usize,
    /// Threads that have not exited (one that panicked in a job has).
    alive: usize,
}

struct Shared {
    state: Mutex<State>,
    /// `generation`, bumped also by the stop: what a spinning thread watches.
    changes: AtomicU64,
    /// Parked threads wait here for a job or the stop.
    wake: Condvar,
    /// The lender waits here for the threads to leave its job.
    left: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Threads kept for the copies of one staging; stopped and joined when dropped. A thread
/// that has had no job for [`IDLE_EXIT`] exits, and the next copy starts it again: a
/// staging that is never freed (its context destroyed behind the crate's back) keeps no
/// threads for good.
pub(crate) struct Workers {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The threads it keeps at most: those that started when it was made.
    max: usize,
    idle: Duration,
}

/// How long a kept thread waits for a job before it exits.
const IDLE_EXIT: Duration = Duration::from_secs(2);

impl Workers {
    /// No threads: every job runs on the lender alone.
    pub(super) fn none() -> Workers {
        Workers::spawn(0)
    }

    /// Starts up to `n` threads (fewer if the system refuses one: a thread limit).
    pub(super) fn spawn(n: usize) -> Workers {
        Workers::spawn_with(n, IDLE_EXIT)
    }

    fn spawn_with(n: usize, idle: Duration) -> Workers {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                job: None,
                generation: 0,
                wanted: 0,
                inside: 0,
                stop: false,
                sleeping: 0,
                alive: 0,
            }),
            changes: AtomicU64::new(0),
            wake: Condvar::new(),
            left: Condvar::new(),
        });
        let mut workers = Workers {
            shared,
            threads: Mutex::new(Vec::with_capacity(n)),
            max: n,
            idle,
        };
        workers.max = workers.top_up(n);
        workers
    }

    /// Starts threads until `n` are alive (fewer if the system refuses one); how many are.
    fn top_up(&self, n: usize) -> usize {
        let alive = self.shared.lock().alive;
        if alive >= n {
            // the usual case on a copy's path: nothing to start, no handle to look at
            return alive;
        }
        let mut threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
        // the handles of threads that exited (idle, or a panic in a job)
        threads.retain(|handle| !handle.is_finished());
        while self.shared.lock().alive < n {
            let shared = Arc::clone(&self.shared);
            let idle = self.idle;
            self.shared.lock().alive += 1;
            let spawned = std::thread::Builder::new()
                .name("cuda-brand-copy".to_owned())
                .stack_size(256 << 10)
                .spawn(move || park_and_work(&shared, idle));
            match spawned {
                Ok(handle) => threads.push(handle),
                Err(_) => {
                    self.shared.lock().alive -= 1;
                    break;
                }
            }
        }
        self.shared.lock().alive
    }

    /// The number of threads kept at most.
    pub(super) fn count(&self) -> usize {
        self.max
    }

    /// Runs `main` on the calling thread while up to `n` of the kept threads run `job`
    /// (each at most once, joining whenever they wake; threads that exited idle are started
    /// again first). `main` gets how many were lent: with none, it does all the work
    /// itself; else at least one will join. Returns `main`'s result once every thread that
    /// joined has returned from `job`, also when `main` panics.
    pub(super) fn lend<R>(
        &self,
        n: usize,
        job: &(dyn Fn() + Sync),
        main: impl FnOnce(usize) -> R,
    ) -> R {
        let n = n.min(self.max);
        if n == 0 || self.top_up(n) == 0 {
            return main(0);
        }
        let job: *const (dyn Fn() + Sync + '_) = job;
        // SAFETY: only the lifetime changes (same layout). The pointer is dereferenced by a
        // thread only after it joined the job under the mutex while the job was lent;
        // `TakeBack` (dropped before `lend` returns or unwinds) withdraws the job and waits
        // until every thread that joined has returned from it, so no call of `job` is
        // running or starts after `lend` ends, and `job` outlives `lend`.
        let job: *const (dyn Fn() + Sync + 'static) = unsafe { std::mem::transmute(job) };
        // in one critical section with the count: a thread counted here has not exited, and
        // from here on it joins this job rather than exit idle (`park_and_work`)
        let (n, sleeping) = {
            let mut st = self.shared.lock();
            let n = n.min(st.alive);
            st.generation += 1;
            st.job = Some(JobRef(job));
            st.wanted = n;
            self.shared.changes.fetch_add(1, Ordering::Release);
            (n, st.sleeping)
        };
        // the threads still spinning see `changes`; only sleeping ones need a wake
        for _ in 0..n.min(sleeping) {
            self.shared.wake.notify_one();
        }
        let _back = TakeBack(&self.shared);
        main(n)
    }
}

/// Withdraws a lent job and waits until no thread runs it.
struct TakeBack<'a>(&'a Shared);

impl Drop for TakeBack<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.job = None;
        st.wanted = 0;
        while st.inside > 0 {
            st = self.0.left.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Counts a thread out of the job when it returns from it (also by a panic).
struct Leave<'a>(&'a Shared);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        if std::thread::panicking() {
            // the thread exits: a later `lend` must not count on it
            st.alive -= 1;
        }
        st.inside -= 1;
        if st.inside == 0 {
            self.0.left.notify_all();
        }
    }
}

fn park_and_work(shared: &Shared, idle: Duration) {
    let mut seen = 0;
    let mut st = shared.lock();
    loop {
        if st.stop {
            st.alive -= 1;
            return;
        }
        if let (Some(job), true) = (st.job, st.wanted > 0 && st.generation != seen) {
            seen = st.generation;
            st.wanted -= 1;
            st.inside += 1;
            drop(st);
            let leave = Leave(shared);
            // SAFETY: joined under the mutex while the job was lent; `lend` waits for
            // `inside` to drop to zero (`leave`) before the borrow behind `job` ends.
            unsafe { (*job.0)() };
            drop(leave);
            st = shared.lock();
            continue;
        }
        // look for the next job a while before sleeping
        let seen_changes = shared.changes.load(Ordering::Relaxed);
        drop(st);
        let changed = spin_until(PARK_SPIN, || {
            shared.changes.load(Ordering::Acquire) != seen_changes
        });
        st = shared.lock();
        if changed || shared.changes.load(Ordering::Relaxed) != seen_changes {
            continue;
        }
        st.sleeping += 1;
        let (guard, waited) = shared
            .wake
            .wait_timeout(st, idle)
            .unwrap_or_else(PoisonError::into_inner);
        st = guard;
        st.sleeping -= 1;
        let wanted = st.job.is_some() && st.wanted > 0 && st.generation != seen;
        if waited.timed_out() && !wanted && !st.stop {
            // idle: exit, counted out under the lock, so that a `lend` that counts this
            // thread afterwards cannot happen (one that counted it before published its job
            // in the same critical section, and then `wanted` holds here)
            st.alive -= 1;
            return;
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.changes.fetch_add(1, Ordering::Release);
        self.shared.wake.notify_all();
        let threads = self
            .threads
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        for handle in threads.drain(..) {
            // a thread that panicked in a job has nothing left to clean up
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_lent_job_runs_on_the_kept_threads_and_is_taken_back() {
        let workers = Workers::spawn(3);
        assert_eq!(workers.count(), 3);
        for round in 0..50 {
            let calls = AtomicUsize::new(0);
            let job = || {
                calls.fetch_add(1, Ordering::SeqCst);
            };
            // `main` waits until all three threads joined (they must, as nothing else runs)
            let out = workers.lend(3, &job, |_| {
                while calls.load(Ordering::SeqCst) < 3 {
                    std::thread::yield_now();
                }
                round
            });
            assert_eq!(out, round);
            assert_eq!(calls.load(Ordering::SeqCst), 3, "each thread joins once");
        }
    }

    #[test]
    fn no_thread_runs_the_job_after_lend_returns() {
        let workers = Workers::spawn(4);
        for _ in 0..50 {
            let running = AtomicUsize::new(0);
            let job = || {
                running.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_micros(200));
                running.fetch_sub(1, Ordering::SeqCst);
            };
            workers.lend(4, &job, |_| ());
            assert_eq!(running.load(Ordering::SeqCst), 0);
        }
    }

    #[test]
    fn a_panicking_main_still_takes_the_job_back() {
        let workers = Workers::spawn(2);
        let running = AtomicUsize::new(0);
        let job = || {
            running.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(2));
            running.fetch_sub(1, Ordering::SeqCst);
        };
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            workers.lend(2, &job, |_| panic!("main failed"))
        }));
        assert!(caught.is_err());
        assert_eq!(running.load(Ordering::SeqCst), 0);
        // the threads are still there for the next job
        let calls = AtomicUsize::new(0);
        let job = || {
            calls.fetch_add(1, Ordering::SeqCst);
        };
        workers.lend(2, &job, |_| {
            while calls.load(Ordering::SeqCst) < 2 {
                std::thread::yield_now();
            }
        });
    }

    #[test]
    fn idle_threads_exit_and_the_next_job_starts_them_again() {
        let workers = Workers::spawn_with(3, Duration::from_millis(20));
        assert_eq!(workers.count(), 3);
        for _ in 0..3 {
            // every thread exits once it has waited 20 ms for a job
            let deadline = Instant::now() + Duration::from_secs(10);
            while workers.shared.lock().alive > 0 {
                assert!(Instant::now() < deadline, "idle threads did not exit");
                std::thread::sleep(Duration::from_millis(5));
            }
            let calls = AtomicUsize::new(0);
            let job = || {
                calls.fetch_add(1, Ordering::SeqCst);
            };
            let lent = workers.lend(3, &job, |lent| {
                while calls.load(Ordering::SeqCst) < lent {
                    std::thread::yield_now();
                }
                lent
            });
            assert_eq!(lent, 3, "started again for the job");
            assert_eq!(calls.load(Ordering::SeqCst), 3);
        }
    }

    #[test]
    fn a_thread_that_panics_in_a_job_is_not_lent_again() {
        let workers = Workers::spawn(1);
        let job = || panic!("a job's bug");
        workers.lend(1, &job, |lent| {
            assert_eq!(lent, 1);
            // wait until the thread joined, panicked and left
            while workers.shared.lock().alive > 0 {
                std::thread::yield_now();
            }
        });
        // the next job gets a new thread
        let calls = AtomicUsize::new(0);
        let job = || {
            calls.fetch_add(1, Ordering::SeqCst);
        };
        workers.lend(1, &job, |lent| {
            assert_eq!(lent, 1);
            while calls.load(Ordering::SeqCst) < 1 {
                std::thread::yield_now();
            }
        });
    }

    #[test]
    fn without_threads_main_runs_alone() {
        let workers = Workers::none();
        let job = || unreachable!("no thread to run it");
        assert_eq!(workers.lend(8, &job, |lent| lent + 7), 7);
    }
}
