//! The copying threads: a pool kept for the process, started at the first staged copy,
//! parked between copies, and ended when no context has a staging any more (the teardown
//! that retires the last entry of the registry, `registry.rs`), or, if a copy is running
//! then, by the last copy to leave.
//!
//! A copy posts one *job* (a closure borrowing the copy's stack) with a number of
//! *tickets*; each parked thread that takes a ticket runs the closure once. The copy
//! returns only after every ticket is either taken and finished or withdrawn ([`Job`]'s
//! `Drop`, which also runs while a panic unwinds), so no thread touches the copy's host
//! memory or staging after the copy returned. A panic in the closure is caught on the
//! thread (which stays in the pool) and raised again on the copying thread once every
//! ticket is done.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

/// A job's closure with its lifetime erased: valid until the [`Job`] that posted it is
/// dropped, which waits until no thread runs it.
#[derive(Clone, Copy)]
struct Work(*const (dyn Fn() + Sync + 'static));

// SAFETY: the closure is `Sync` (called from several threads at once through `&`), and the
// pointer is only dereferenced while the `Job` that owns the borrow waits for it (see
// `Job::drop`).
unsafe impl Send for Work {}

struct Posted {
    id: u64,
    work: Work,
    /// Tickets not taken yet.
    tickets: usize,
    /// Threads running the closure now.
    running: usize,
    /// A run of the closure panicked.
    panicked: bool,
}

struct State {
    jobs: VecDeque<Posted>,
    next_id: u64,
    /// Threads started and not told to exit.
    threads: usize,
    handles: Vec<JoinHandle<()>>,
    /// Set while the threads are being ended: they exit instead of parking.
    exit: bool,
    /// Copies using the pool now ([`Pool::job`] to the `Job`'s drop).
    users: usize,
    /// End the threads when the last user leaves.
    end_when_idle: bool,
}

/// A pool of copying threads. The crate has one ([`POOL`]); the tests make their own.
pub(super) struct Pool {
    size: usize,
    state: Mutex<State>,
    /// Parked threads wait on it for a ticket or the exit.
    work: Condvar,
    /// Copies wait on it for their job's runs to finish; `end` waits for threads to stop.
    done: Condvar,
}

/// The crate's pool: [`super::pipeline`]'s threads for every context.
pub(super) static POOL: Pool = Pool::new(0);

impl Pool {
    /// A pool of `size` threads (`0`: sized to the machine at the first job, see
    /// [`threads_for_machine`]), none started yet.
    pub(super) const fn new(size: usize) -> Pool {
        Pool {
            size,
            state: Mutex::new(State {
                jobs: VecDeque::new(),
                next_id: 0,
                threads: 0,
                handles: Vec::new(),
                exit: false,
                users: 0,
                end_when_idle: false,
            }),
            work: Condvar::new(),
            done: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The number of threads the pool has now (started and not ended).
    pub(super) fn threads(&self) -> usize {
        self.lock().threads
    }

    /// Posts `work` with up to `tickets` tickets (no more than the pool's threads) and
    /// returns the job and how many tickets it has: 0 when no thread could be started
    /// (the copy then takes the driver's path). The threads are started here the first
    /// time (or the first time after [`Pool::end`]).
    ///
    /// The returned `Job` must be dropped before anything `work` borrows: its drop waits
    /// for every run of `work` to finish (it is only ever a local of the copy that borrows
    /// what `work` uses, dropped at the end of that scope, also by a panic).
    pub(super) fn job<'a>(
        &'static self,
        tickets: usize,
        work: &'a (dyn Fn() + Sync + 'a),
    ) -> (Job<'a>, usize) {
        let mut st = self.lock();
        while st.exit {
            // another thread is ending the threads: wait until they are gone
            st = self.done.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
        if st.threads == 0 {
            self.start(&mut st);
        }
        st.users += 1;
        let tickets = tickets.min(st.threads);
        st.next_id += 1;
        let id = st.next_id;
        // SAFETY: only the lifetime is erased (same fat-pointer layout); the pointer is
        // dereferenced only by runs that `Job::drop` waits for, and the returned `Job`
        // borrows `work` for `'a`, so `work` outlives every run.
        let erased: *const (dyn Fn() + Sync + 'static) = unsafe {
            std::mem::transmute::<*const (dyn Fn() + Sync + 'a), *const (dyn Fn() + Sync + 'static)>(
                work,
            )
        };
        st.jobs.push_back(Posted {
            id,
            work: Work(erased),
            tickets,
            running: 0,
            panicked: false,
        });
        drop(st);
        if tickets > 0 {
            self.work.notify_all();
        }
        (
            Job {
                pool: self,
                id,
                _work: std::marker::PhantomData,
            },
            tickets,
        )
    }

    /// Starts the pool's threads (as many as can be started).
    fn start(&'static self, st: &mut State) {
        let size = if self.size == 0 {
            threads_for_machine()
        } else {
            self.size
        };
        for _ in 0..size {
            let spawned = std::thread::Builder::new()
                .name("cuda-brand-copy".to_owned())
                .stack_size(256 << 10)
                .spawn(move || self.run());
            match spawned {
                Ok(handle) => {
                    st.handles.push(handle);
                    st.threads += 1;
                }
                // at a thread limit: fewer threads
                Err(_) => break,
            }
        }
    }

    /// A thread of the pool: takes tickets until told to exit.
    fn run(&self) {
        let mut st = self.lock();
        loop {
            if st.exit {
                return;
            }
            let Some(job) = st.jobs.iter_mut().find(|j| j.tickets > 0) else {
                st = self.work.wait(st).unwrap_or_else(PoisonError::into_inner);
                continue;
            };
            job.tickets -= 1;
            job.running += 1;
            let (id, work) = (job.id, job.work);
            drop(st);
            // SAFETY: the job is posted (it is removed only by its `Job::drop`, which waits
            // while `running` is not 0), so the closure is alive until this run is counted
            // out below.
            let ok = catch_unwind(AssertUnwindSafe(|| unsafe { (*work.0)() })).is_ok();
            st = self.lock();
            if let Some(job) = st.jobs.iter_mut().find(|j| j.id == id) {
                job.running -= 1;
                job.panicked |= !ok;
            }
            self.done.notify_all();
        }
    }

    /// Ends the threads now if no copy uses the pool, or else when the last copy leaves.
    /// Returns at once in the second case; in the first, after every thread has exited.
    pub(super) fn end(&self) {
        let mut st = self.lock();
        if st.users > 0 {
            st.end_when_idle = true;
            return;
        }
        self.end_locked(st);
    }

    fn end_locked(&self, mut st: MutexGuard<'_, State>) {
        st.end_when_idle = false;
        if st.threads == 0 || st.exit {
            return;
        }
        st.exit = true;
        st.threads = 0;
        let handles = std::mem::take(&mut st.handles);
        drop(st);
        self.work.notify_all();
        for handle in handles {
            // a thread catches the panics of the closures it runs, so it ends normally
            let _ = handle.join();
        }
        self.lock().exit = false;
        self.done.notify_all();
    }
}

/// Threads for this machine: one fewer than the cores (the copying thread runs the DMA),
/// at most [`super::MAX_WORKERS`], at least one.
pub(super) fn threads_for_machine() -> usize {
    super::MAX_WORKERS
        .min(super::pipeline::cores().saturating_sub(1))
        .max(1)
}

/// A posted job: dropping it withdraws the tickets not taken, waits for the runs in
/// progress, and raises a panic of any run on this thread.
pub(super) struct Job<'a> {
    pool: &'static Pool,
    id: u64,
    _work: std::marker::PhantomData<&'a ()>,
}

impl Drop for Job<'_> {
    fn drop(&mut self) {
        let pool = self.pool;
        let mut st = pool.lock();
        let at = |st: &State| st.jobs.iter().position(|j| j.id == self.id);
        let Some(i) = at(&st) else {
            unreachable!("a job is removed only by its own drop");
        };
        st.jobs[i].tickets = 0;
        let i = loop {
            let Some(i) = at(&st) else {
                unreachable!("still posted");
            };
            if st.jobs[i].running == 0 {
                break i;
            }
            st = pool.done.wait(st).unwrap_or_else(PoisonError::into_inner);
        };
        let panicked = st.jobs.remove(i).is_some_and(|j| j.panicked);
        st.users -= 1;
        if st.users == 0 && st.end_when_idle && super::registry::entries() == 0 {
            pool.end_locked(st);
        } else {
            drop(st);
        }
        if panicked && !std::thread::panicking() {
            panic!("a cuda-brand copying thread panicked during a staged copy");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn leak(size: usize) -> &'static Pool {
        Box::leak(Box::new(Pool::new(size)))
    }

    #[test]
    fn threads_are_kept_between_jobs_and_ended_by_end() {
        let pool = leak(3);
        assert_eq!(pool.threads(), 0, "started at the first job");
        let runs = AtomicUsize::new(0);
        let work = || {
            runs.fetch_add(1, Ordering::SeqCst);
        };
        for round in 1..=5 {
            let (job, tickets) = pool.job(8, &work);
            assert_eq!(tickets, 3, "no more tickets than threads");
            // wait until every ticket ran (the job's drop would withdraw the rest)
            while runs.load(Ordering::SeqCst) < 3 * round {
                std::thread::yield_now();
            }
            drop(job);
            assert_eq!(pool.threads(), 3, "the same threads, parked");
        }
        pool.end();
        assert_eq!(pool.threads(), 0);
        // and started again by the next job
        let (job, tickets) = pool.job(1, &work);
        assert_eq!(tickets, 1);
        drop(job);
        assert_eq!(pool.threads(), 3);
        pool.end();
        assert_eq!(pool.threads(), 0);
    }

    #[test]
    fn a_job_returns_only_after_its_runs_finish() {
        let pool = leak(2);
        let finished = AtomicUsize::new(0);
        let started = AtomicUsize::new(0);
        let work = || {
            started.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(30));
            finished.fetch_add(1, Ordering::SeqCst);
        };
        let (job, _) = pool.job(2, &work);
        while started.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        drop(job);
        assert_eq!(
            finished.load(Ordering::SeqCst),
            started.load(Ordering::SeqCst),
            "every run that started has finished when the job is dropped"
        );
        pool.end();
    }

    #[test]
    fn a_panicking_run_is_raised_on_the_copying_thread_and_the_thread_survives() {
        let pool = leak(2);
        let work = || panic!("boom");
        let r = std::panic::catch_unwind(|| {
            let (job, tickets) = pool.job(2, &work);
            assert_eq!(tickets, 2);
            std::thread::sleep(std::time::Duration::from_millis(20));
            drop(job);
        });
        // a ticket may have been withdrawn before any thread ran it; if one ran, it panicked
        // and the drop raised it
        let ran = r.is_err();
        assert_eq!(pool.threads(), 2, "the threads stay");
        let ok = AtomicUsize::new(0);
        let work = || {
            ok.fetch_add(1, Ordering::SeqCst);
        };
        let (job, _) = pool.job(2, &work);
        while ok.load(Ordering::SeqCst) < 2 {
            std::thread::yield_now();
        }
        drop(job);
        let _ = ran;
        pool.end();
    }

    #[test]
    fn end_with_a_copy_running_waits_for_it_and_leaves_no_thread() {
        let pool = leak(2);
        let work = || std::thread::sleep(std::time::Duration::from_millis(20));
        let (job, _) = pool.job(2, &work);
        pool.end();
        assert_eq!(pool.threads(), 2, "deferred: a copy uses the pool");
        drop(job);
        // ended by the job's drop when no context has a staging; the unit tests' registry
        // may hold fake entries of other tests, so end it here in any case
        pool.end();
        assert_eq!(pool.threads(), 0);
    }
}
