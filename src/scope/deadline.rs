//! Bounded waits: stream scopes with a deadline ([`Stream::scope_within`],
//! [`Stream::scope_all_within`]) and events waited for at most so long
//! ([`Recorded::synchronize_within`](crate::Recorded::synchronize_within)).
//!
//! # A deadline that cannot end the wait early
//!
//! A scope borrows the memory its queued work uses, and releases the borrows when it
//! returns, so it must not return while the GPU may still use them ([`scope`](crate::scope)
//! module). A scope with a deadline keeps that rule: when the deadline passes and its work
//! is still running, it calls the program's overrun handler, and the handler's return type,
//! [`KeepWaiting`], can only say how to go on waiting:
//!
//! * [`KeepWaiting::for_another(duration)`](KeepWaiting::for_another): wait that much
//!   longer, then call the handler again if the work is still running;
//! * [`KeepWaiting::until_idle()`](KeepWaiting::until_idle): wait for the work without
//!   another deadline.
//!
//! Everything else the handler may do is act and go on waiting (log, raise an alarm, put
//! the rest of the system in a safe state) or never return: `std::process::abort()`, or a
//! function returning `!`. A closure `|_| std::process::abort()` is a handler: an
//! expression that never returns fits any return type. There is no value that ends the wait early, and a handler
//! that panics does not end it either: the scope catches the panic, waits for its streams
//! without a deadline, frees what it allocated, and only then resumes the panic. Whatever
//! the handler does, the scope ends as every scope does, through the same function of the
//! [`scope`](crate::scope#what-the-end-of-a-scope-guarantees) module: it waits for each
//! stream (`cuStreamSynchronize`, then `cuStreamQuery` while busy after an error) before
//! any borrow is released, and then resumes a host function's panic
//! ([`host_fn`](crate::scope::host_fn)) like [`Stream::scope`] (a panic of the handler wins over
//! it).
//!
//! The wait before the deadline polls `cuStreamQuery` (the driver has no wait with a time
//! limit). Between polls it yields the thread for the first 6 ms after the scope opened,
//! then sleeps a hundredth of the time since, from 60 µs up to 200 µs, never past the
//! deadline (a sleep shorter than 60 µs would mostly be Linux's timer slack, about 50 µs).
//! So a scope with a deadline sees its work finish at most about 1 % of its time later
//! than [`Stream::scope`] would (plus the slack of one sleep: under 1 % again from 6 ms
//! on), and at most 0.2 ms later for long work; it keeps a core busy (yielding) only for
//! the first 6 ms. [`Recorded::synchronize_within`](crate::Recorded::synchronize_within)
//! waits the same way, counting from its call.
//!
//! The deadline counts from the call that opens the scope: it bounds the whole scope, the
//! closure's own time included.
//!
//! An event's bounded wait guards no borrow, so it simply returns "not yet"
//! (`Ok(false)`).

use std::time::{Duration, Instant};

use super::{Lanes, OpenScopes, ScopeEnd, StreamScope, run_scope};
use crate::driver::{self, CUstream};
use crate::error::{Error, Result};
use crate::stream::{KeepWaiting, Overrun, Stream, settle};

impl<'ctx> Stream<'ctx> {
    /// [`Stream::scope`] with a deadline: opens a scope on this stream, runs `f` with it,
    /// then waits for the stream, calling `on_overrun` if the work is still running
    /// `within` after the call (and again whenever an extension the handler asked for has
    /// passed). Returns only once the stream is idle, like every scope: the handler can
    /// only say how to go on waiting ([`KeepWaiting`]), or never return. A panic in the
    /// handler is resumed after the stream is idle. See the [module documentation](self).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use cuda_brand::prelude::*;
    /// use cuda_brand::KeepWaiting;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let stream = ctx.new_stream()?;
    ///     let mut buf = ctx.zeroed::<f32>(1 << 20)?;
    ///     let mut late = 0;
    ///     stream.scope_within(
    ///         Duration::from_millis(2),
    ///         |overrun| {
    ///             late += 1;
    ///             eprintln!("not done after {:?}", overrun.elapsed());
    ///             if overrun.elapsed() < Duration::from_secs(1) {
    ///                 KeepWaiting::for_another(Duration::from_millis(2))
    ///             } else {
    ///                 std::process::abort() // or: put the system in a safe state first
    ///             }
    ///         },
    ///         |s| s.fill(&mut buf, 1.0f32),
    ///     )?; // the fill is done here, deadline or not
    ///     println!("overran {late} times");
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn scope_within<'env, R, E, F, H>(
        &'env self,
        within: Duration,
        mut on_overrun: H,
        f: F,
    ) -> Result<R, E>
    where
        F: for<'scope> FnOnce(&'scope StreamScope<'scope, 'env, 'ctx>) -> Result<R, E>,
        H: FnMut(Overrun) -> KeepWaiting,
        E: From<Error>,
    {
        let opened = Instant::now();
        let stream = self.raw();
        let scope = StreamScope::open(self, None)?;
        let scopes = OpenScopes {
            scopes: std::slice::from_ref(&scope),
            lanes: None,
        };
        run_within(
            // SAFETY: the stream is alive: `self` is borrowed for the call.
            |_| unsafe { driver::stream_query(stream) },
            1,
            opened,
            within,
            &mut on_overrun,
            &scopes,
            || f(&scope),
        )
    }

    /// [`Stream::scope_all`] with a deadline: one scope over all of `streams`, ended like
    /// [`Stream::scope_within`]. The handler is told which stream was still busy
    /// ([`Overrun::stream_index`]); the streams are waited for in order.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use cuda_brand::prelude::*;
    /// use cuda_brand::KeepWaiting;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let (a, b) = (ctx.new_stream()?, ctx.new_stream()?);
    ///     let mut buf = ctx.zeroed::<u32>(1 << 20)?;
    ///     let mut host = vec![0u32; 1 << 20];
    ///     Stream::scope_all_within(
    ///         &[&a, &b],
    ///         Duration::from_millis(5),
    ///         |overrun| {
    ///             eprintln!("stream {} still busy", overrun.stream_index());
    ///             KeepWaiting::until_idle()
    ///         },
    ///         |s| {
    ///             let d = s[0].bind_mut(&mut buf);
    ///             s[0].fill(d, 7)?;
    ///             s[1].copy_to_host(&mut host, d.into_ref()) // ordered after the fill by the crate
    ///         },
    ///     )?;
    ///     assert!(host.iter().all(|&x| x == 7));
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn scope_all_within<'env, R, E, F, H>(
        streams: &[&'env Stream<'ctx>],
        within: Duration,
        mut on_overrun: H,
        f: F,
    ) -> Result<R, E>
    where
        F: for<'scope> FnOnce(&'scope [StreamScope<'scope, 'env, 'ctx>]) -> Result<R, E>,
        H: FnMut(Overrun) -> KeepWaiting,
        E: From<Error>,
    {
        let opened = Instant::now();
        let raw: Vec<CUstream> = streams.iter().map(|s| s.raw()).collect();
        let lanes = Lanes::new(raw.iter().copied());
        let scopes: Vec<StreamScope<'_, 'env, 'ctx>> = streams
            .iter()
            .enumerate()
            .map(|(i, s)| StreamScope::open(s, Some((&lanes, i))))
            .collect::<Result<_>>()?;
        let open = OpenScopes {
            scopes: &scopes,
            lanes: Some(&lanes),
        };
        run_within(
            // SAFETY: the streams are alive: `streams` borrows them for the call.
            |i| unsafe { driver::stream_query(raw[i]) },
            raw.len(),
            opened,
            within,
            &mut on_overrun,
            &open,
            || f(&scopes),
        )
    }
}

/// Runs `body`, then ends the scope as every scope ends ([`run_scope`]), with the bounded
/// wait ([`settle`]) before the end's unbounded one, also when `body` panics. So a panic of
/// the handler is resumed after the end, unless `body` panicked first; a host function's
/// panic after that, as in [`Stream::scope`].
fn run_within<R, E: From<Error>>(
    idle: impl Fn(usize) -> Result<bool>,
    streams: usize,
    opened: Instant,
    within: Duration,
    on_overrun: &mut dyn FnMut(Overrun) -> KeepWaiting,
    ending: &impl ScopeEnd,
    body: impl FnOnce() -> Result<R, E>,
) -> Result<R, E> {
    let mut bounded_wait = || settle(&idle, streams, opened, within, on_overrun);
    run_scope(ending, Some(&mut bounded_wait), body)
}

#[cfg(test)]
mod tests {
    //! The bounded wait's logic without a GPU. A simulated stream becomes idle once the
    //! handler has been called so many times (times would make the tests depend on the
    //! machine's load); `end` stands for the scope's end, which on a GPU waits for every
    //! stream without a deadline: it records whether one was still busy then.

    use super::*;
    use crate::error::ErrorCode;
    use crate::scope::run::Payload;
    use std::cell::{Cell, RefCell};
    use std::panic::{self, AssertUnwindSafe};

    const MS: Duration = Duration::from_millis(1);
    const NEVER: u64 = u64::MAX;

    struct Fake {
        /// Stream `i` is idle once the handler has been called `idle_after[i]` times.
        idle_after: Vec<u64>,
        calls: Cell<u64>,
        ends: Cell<u32>,
        /// Whether a stream was still busy when the end ran (the real end waits for it).
        busy_at_end: Cell<Option<bool>>,
        /// The panic of a host function that the end finds (the real end finishes the
        /// scope's host functions); taken by the scope's end only after `end`.
        host_panic: RefCell<Option<Payload>>,
    }

    impl Fake {
        fn new(idle_after: &[u64]) -> Self {
            Fake {
                idle_after: idle_after.to_vec(),
                calls: Cell::new(0),
                ends: Cell::new(0),
                busy_at_end: Cell::new(None),
                host_panic: RefCell::new(None),
            }
        }
        /// As [`Fake::new`], with a host function that panicked with `message`.
        fn with_host_panic(idle_after: &[u64], message: &'static str) -> Self {
            let fake = Fake::new(idle_after);
            *fake.host_panic.borrow_mut() = Some(Box::new(message));
            fake
        }
        fn idle(&self, i: usize) -> Result<bool> {
            Ok(self.calls.get() >= self.idle_after[i])
        }
        fn all_idle(&self) -> bool {
            (0..self.idle_after.len()).all(|i| self.idle(i).unwrap())
        }
        fn run<R>(
            &self,
            within: Duration,
            mut on_overrun: impl FnMut(Overrun) -> KeepWaiting,
            body: impl FnOnce() -> Result<R>,
        ) -> Result<R> {
            run_within(
                |i| self.idle(i),
                self.idle_after.len(),
                Instant::now(),
                within,
                &mut |o| {
                    self.calls.set(self.calls.get() + 1);
                    on_overrun(o)
                },
                self,
                body,
            )
        }
    }

    impl ScopeEnd for Fake {
        fn end(&self) -> Result<()> {
            self.ends.set(self.ends.get() + 1);
            self.busy_at_end.set(Some(!self.all_idle()));
            Ok(())
        }
        fn take_host_panic(&self) -> Option<Payload> {
            assert_eq!(self.ends.get(), 1, "taken after the end, once");
            self.host_panic.borrow_mut().take()
        }
    }

    #[test]
    fn work_done_by_the_deadline_never_calls_the_handler() {
        let fake = Fake::new(&[0]);
        let r = fake.run(Duration::ZERO, |_| panic!("not called"), || Ok(7));
        assert_eq!(r.unwrap(), 7);
        assert_eq!(fake.calls.get(), 0);
        assert_eq!(fake.ends.get(), 1);
        assert_eq!(fake.busy_at_end.get(), Some(false));
    }

    #[test]
    fn an_overrun_calls_the_handler_until_the_work_is_done_and_counts_the_calls() {
        let fake = Fake::new(&[4]);
        let mut seen = Vec::new();
        let r = fake.run(
            MS,
            |o| {
                seen.push(o);
                KeepWaiting::for_another(2 * MS)
            },
            || Ok("done"),
        );
        assert_eq!(r.unwrap(), "done");
        assert_eq!(seen.len(), 4, "{seen:?}");
        for (k, o) in seen.iter().enumerate() {
            assert_eq!(o.count(), k as u64 + 1);
            assert_eq!(o.stream_index(), 0);
            // never called before its deadline
            assert!(o.elapsed() >= o.deadline(), "{o:?}");
        }
        assert_eq!(seen[0].deadline(), MS);
        // each later deadline is the extension, counted from the previous call
        for pair in seen.windows(2) {
            assert_eq!(pair[1].deadline(), pair[0].elapsed() + 2 * MS, "{pair:?}");
        }
        assert_eq!(fake.ends.get(), 1);
        assert_eq!(fake.busy_at_end.get(), Some(false));
    }

    #[test]
    fn until_idle_stops_the_calls_and_leaves_the_wait_to_the_end() {
        let fake = Fake::new(&[NEVER]);
        fake.run(Duration::ZERO, |_| KeepWaiting::until_idle(), || Ok(()))
            .unwrap();
        assert_eq!(fake.calls.get(), 1);
        assert_eq!(fake.ends.get(), 1);
        assert_eq!(fake.busy_at_end.get(), Some(true), "the end waits for it");
    }

    #[test]
    fn a_panicking_handler_is_resumed_only_after_the_end() {
        let fake = Fake::new(&[NEVER]);
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            fake.run(Duration::ZERO, |_| panic!("handler gave up"), || Ok(()))
        }))
        .unwrap_err();
        assert_eq!(caught.downcast_ref::<&str>(), Some(&"handler gave up"));
        assert_eq!(fake.calls.get(), 1);
        assert_eq!(
            fake.ends.get(),
            1,
            "the scope's end ran before the panic went on"
        );
        assert_eq!(fake.busy_at_end.get(), Some(true), "the end waits for it");
    }

    #[test]
    fn a_panicking_body_is_resumed_after_the_bounded_wait_and_the_end() {
        let fake = Fake::new(&[3]);
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            fake.run(
                Duration::ZERO,
                |_| KeepWaiting::for_another(Duration::ZERO),
                || -> Result<()> { panic!("body") },
            )
        }))
        .unwrap_err();
        assert_eq!(caught.downcast_ref::<&str>(), Some(&"body"));
        assert_eq!(fake.calls.get(), 3);
        assert_eq!(fake.ends.get(), 1);
        assert_eq!(fake.busy_at_end.get(), Some(false));
        // a handler that panics while the body's panic unwinds: the body's panic goes on
        let fake = Fake::new(&[NEVER]);
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            fake.run(
                Duration::ZERO,
                |_| panic!("handler"),
                || -> Result<()> { panic!("body") },
            )
        }))
        .unwrap_err();
        assert_eq!(caught.downcast_ref::<&str>(), Some(&"body"));
        assert_eq!(fake.ends.get(), 1);
        assert_eq!(fake.busy_at_end.get(), Some(true));
    }

    #[test]
    fn an_error_of_the_body_or_of_a_query_ends_the_scope_all_the_same() {
        let fake = Fake::new(&[2]);
        let r: Result<()> = fake.run(
            Duration::ZERO,
            |_| KeepWaiting::for_another(Duration::ZERO),
            || Err(Error::new("my step", ErrorCode::InvalidInput)),
        );
        assert_eq!(r.unwrap_err().call(), "my step");
        assert_eq!(fake.calls.get(), 2);
        assert_eq!(fake.ends.get(), 1);
        // a failing query: no handler call, the end runs, the query's error is returned
        let fake = Fake::new(&[NEVER]);
        let r = run_within(
            |_| Err(Error::new("cuStreamQuery", ErrorCode::IllegalAddress)),
            1,
            Instant::now(),
            Duration::ZERO,
            &mut |_| panic!("not called"),
            &fake,
            || Ok::<_, Error>(()),
        );
        assert_eq!(r.unwrap_err().code(), ErrorCode::IllegalAddress);
        assert_eq!(fake.ends.get(), 1);
    }

    #[test]
    fn several_streams_are_waited_for_in_order_and_named() {
        let fake = Fake::new(&[0, 2, 4]);
        let mut streams = Vec::new();
        fake.run(
            Duration::ZERO,
            |o| {
                streams.push((o.count(), o.stream_index()));
                KeepWaiting::for_another(Duration::ZERO)
            },
            || Ok(()),
        )
        .unwrap();
        assert_eq!(streams, [(1, 1), (2, 1), (3, 2), (4, 2)]);
        assert_eq!(fake.busy_at_end.get(), Some(false));
    }

    #[test]
    fn a_deadline_or_extension_past_the_clock_means_no_deadline() {
        // `Instant + Duration::MAX` would panic: it is no deadline instead
        let polls = Cell::new(0);
        let r = run_within(
            |_| {
                polls.set(polls.get() + 1);
                Ok(polls.get() > 100)
            },
            1,
            Instant::now(),
            Duration::MAX,
            &mut |_| panic!("not called"),
            &Fake::new(&[0]),
            || Ok::<_, Error>(()),
        );
        assert!(r.is_ok());
        let fake = Fake::new(&[NEVER]);
        let polls = Cell::new(0);
        run_within(
            |_| {
                polls.set(polls.get() + 1);
                Ok(fake.calls.get() == 1 && polls.get() > 100)
            },
            1,
            Instant::now(),
            Duration::ZERO,
            &mut |_| {
                fake.calls.set(fake.calls.get() + 1);
                KeepWaiting::for_another(Duration::MAX)
            },
            &Fake::new(&[0]),
            || Ok::<_, Error>(()),
        )
        .unwrap();
        assert_eq!(fake.calls.get(), 1);
    }

    /// The issue this pins: a deadline scope once caught a host function's panic and
    /// returned `Ok`. It ends as every scope does now (`run_scope`).
    #[test]
    fn a_host_functions_panic_is_resumed_after_the_end_of_a_deadline_scope() {
        let fake = Fake::with_host_panic(&[2], "host function");
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            fake.run(
                Duration::ZERO,
                |_| KeepWaiting::for_another(Duration::ZERO),
                || Ok(()),
            )
        }))
        .unwrap_err();
        assert_eq!(caught.downcast_ref::<&str>(), Some(&"host function"));
        assert_eq!(fake.ends.get(), 1);
        assert_eq!(fake.busy_at_end.get(), Some(false));
        // it wins over an error of the closure, as in `Stream::scope`
        let fake = Fake::with_host_panic(&[0], "host function");
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            fake.run(
                Duration::ZERO,
                |_| KeepWaiting::until_idle(),
                || Err::<(), _>(Error::new("my step", ErrorCode::InvalidInput)),
            )
        }))
        .unwrap_err();
        assert_eq!(caught.downcast_ref::<&str>(), Some(&"host function"));
    }

    #[test]
    fn the_closures_panic_then_the_handlers_win_over_a_host_functions() {
        let fake = Fake::with_host_panic(&[NEVER], "host function");
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            fake.run(
                Duration::ZERO,
                |_| panic!("handler"),
                || -> Result<()> { panic!("body") },
            )
        }))
        .unwrap_err();
        assert_eq!(caught.downcast_ref::<&str>(), Some(&"body"));
        assert_eq!(fake.ends.get(), 1);
        let fake = Fake::with_host_panic(&[NEVER], "host function");
        let caught = panic::catch_unwind(AssertUnwindSafe(|| {
            fake.run(Duration::ZERO, |_| panic!("handler"), || Ok(()))
        }))
        .unwrap_err();
        assert_eq!(caught.downcast_ref::<&str>(), Some(&"handler"));
        assert_eq!(
            fake.ends.get(),
            1,
            "the end ran before the handler's panic went on"
        );
        assert!(
            fake.host_panic.borrow().is_none(),
            "the host function's was taken"
        );
    }

    #[test]
    fn handlers_that_never_return_have_the_handler_type() {
        fn give_up(_: Overrun) -> ! {
            std::process::abort()
        }
        let _closure: &mut dyn FnMut(Overrun) -> KeepWaiting = &mut |_| std::process::abort();
        let _calls_a_never_fn: &mut dyn FnMut(Overrun) -> KeepWaiting = &mut |o| give_up(o);
        let _parks: &mut dyn FnMut(Overrun) -> KeepWaiting = &mut |_| loop {
            std::thread::park();
        };
    }
}
