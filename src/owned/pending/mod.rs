//! Awaited work: [`Owned::submit`] queues a batch of stream work and returns a
//! [`Pending`] future, woken by the driver when the work is done.
//!
//! # Why a batch owns what it touches
//!
//! A stream scope borrows what its work touches and waits for the stream before it
//! returns, so no borrow ends while the GPU uses memory. A future cannot make that promise:
//! it can be forgotten (`mem::forget`, an `Rc` cycle) at any await point, and a borrow it
//! held would end while the GPU still reads or writes (the scoped-task trilemma;
//! cutile-rs #242 is this bug in a GPU crate). So a batch owns everything its work touches
//! ([`Batch`]: owned buffers, host vectors, kernels), as io_uring crates own their buffers,
//! and hands all of it back when the work is done. Forgetting the future leaks the batch;
//! nothing is freed while the GPU may use it. Its closure runs at once, on the calling
//! thread, in a stream scope whose views come from the batch only: a closure that borrows
//! from its surroundings does not compile (`F: 'static`, and `'scope` is higher-ranked).
//!
//! # What completion means
//!
//! The future is ready when an event recorded after the batch's work is complete. Nothing
//! else is queued on the batch's stream. A poll that finds the work still running arms the
//! wake-up: one of the context's notifier streams (one per stream with batches awaited at
//! once, up to 32, made as needed, so that a batch is never woken behind another stream's)
//! waits for the event, then runs a stream callback (`cuStreamAddCallback`) that wakes the
//! future, so the batch's stream never waits for a callback, and no thread of the crate is
//! on this path. The driver calls the callback also after an error of the context (with
//! the error; it runs no host function then), so a failed batch's future is woken too.
//! A future polled inside a host function (an executor that polls in its waker's `wake`),
//! where it cannot finish, is woken again: with the `repoll-thread` feature from one thread
//! of the crate, started the first time this happens; without it at once, so that an
//! executor that runs its tasks on threads of its own polls it again there (one that polls
//! inside `wake` itself would find it pending each time, inside the host function).
//! [`Pending::wait`] and dropping a pending future wait for the event directly. Then, on
//! the thread that polls, the batch's scope ends as every scope does (its host functions
//! are finished, what it allocated is freed, after an error the stream is confirmed idle),
//! and the future gives back `(result, batch)`.
//!
//! **Dropping a pending future waits** for its work (blocking the dropping thread, as a
//! scope would), then frees the batch. Inside a host function, where the crate can make no
//! driver call, the batch is leaked instead. A panic of a host function of the batch is
//! resumed from `poll` (or [`Pending::wait`]), as from a scope.
//!
//! # No entry after `submit`
//!
//! Only [`submit`](Owned::submit) enters the batch's context (its closure queues the work).
//! Polling, waiting and dropping do not: the calls they make (the event's query and wait,
//! arming the wake-up, ending the scope, which frees its allocations in stream order) run
//! with the context made current for those calls alone (`in_context`, as a buffer's drop
//! does), which runs no code of the user. So while another thread's
//! [`with_partitions`](crate::with_partitions) closure has the device, which refuses every
//! entry into another context of it, a batch queued before is still awaited, waited for and
//! handed back: none of those calls queues work that runs on the device's SMs (a notifier
//! stream's wait for the event and its callback, and a free, occupy none). No refusal
//! of the crate reaches those calls (`in_context` refuses only a partition's context off
//! its thread, and an owned context is never a partition's). Where the driver fails to make
//! the context current even so, nothing is waited for and the batch is leaked (never handed
//! back or freed while its work may run), `wait` and `poll` then panicking.

mod batch;
#[cfg(feature = "repoll-thread")]
mod repoll;
pub(crate) mod wake;

use std::fmt;
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

pub use batch::Batch;
use wake::Signal;

use super::handle::Owned;
use super::handle::OwnedContext;
use super::release;
use crate::context::{self, teardown};
use crate::driver::{self, CUevent};
use crate::error::{Error, Result};
use crate::launch::sealed::Crate;
use crate::scope::StreamScope;
use crate::stream::Stream;

/// What a finished batch gives back: the work's result (the closure's error, or the first
/// error of the work or of the scope's end), and the batch.
pub type Done<B> = (Result<()>, B);

/// Batch work queued on an owned stream, awaited: resolves to `(result, batch)` once the
/// GPU has finished it. Made by [`Owned::submit`]; see the [module
/// documentation](crate::owned::pending) for what it owns and when it is woken.
///
/// Runtime-agnostic: it needs only a [`Waker`](std::task::Waker). Without a runtime,
/// [`wait`](Pending::wait) blocks for it.
#[must_use = "the work is queued already; a dropped `Pending` waits for it, a forgotten one leaks its batch"]
pub struct Pending<B> {
    state: State<B>,
}

enum State<B> {
    /// In flight (or done, not yet finished).
    Queued(Box<Op<B>>),
    /// Refused before anything was queued.
    Refused(Error, B),
    /// Handed out.
    Taken,
}

/// One batch in flight.
struct Op<B> {
    /// The scope, with its lifetimes erased: it refers to `stream`'s stream, and its views
    /// to `batch`. Dropped first (the fields drop in order), and only once the work is done
    /// (a `Pending` that cannot wait leaks its op).
    scope: StreamScope<'static, 'static, 'static>,
    /// `None` once handed back.
    batch: Option<B>,
    /// The closure's result, or the failure of queueing the completion.
    outcome: Result<()>,
    /// `None` once the work has been waited for without an event (a failed queueing).
    event: Option<CUevent>,
    /// Set while queued work is tracked by no event and has not been waited for (its wait
    /// could not make the context current): [`finish`](Op::finish) waits for the stream
    /// first, and until then the batch is neither handed back nor freed.
    unwaited: bool,
    /// Whether a poll has armed the wake-up ([`Op::arm`]).
    armed: bool,
    /// Set once a poll has found the work's end due (the event complete, or no wake-up
    /// could be armed): later polls go straight to [`finish`](Op::finish), which one that
    /// could not make the context current tries again.
    finishing: bool,
    signal: Arc<Signal>,
    stream: Arc<Owned<Stream<'static>>>,
    home: OwnedContext,
}

// SAFETY: the scope's non-`Send` parts are for its user-facing rule (a scope stays on the
// thread that opened it while its closure runs); once the closure has returned, its state
// is locks, the list of what it allocated (device pointers) and its host functions (`Send`
// closures placed in the scope's chunks), all usable from the thread that ends it. The batch is `Send`; the
// event is a handle any thread may use with its context current. (The bound is `B: Send`
// rather than `B: Batch`: rustc checks an `async` block's `Send` with its lifetimes
// erased (rust-lang/rust#110338), where `Batch`, implemented for `'static` forms only,
// would not be found, and `submit(..).await` in a spawned task would not compile.)
unsafe impl<B: Send> Send for Op<B> {}

impl<B> Unpin for Pending<B> {}

impl Owned<Stream<'static>> {
    /// Queues a batch of work on this stream and returns a future for its end.
    ///
    /// `f` runs now, on the calling thread, with the stream's context entered: it gets a
    /// [`StreamScope`] of this stream and the views of `batch` ([`Batch`] lists them), and
    /// queues work as in any scope (launches, copies, fills, scope allocations, host
    /// functions). It cannot borrow anything else (`'static`, and its scope is
    /// higher-ranked): everything the work touches is in the batch, which the future hands
    /// back with the result once the GPU is done. A part of another context than the
    /// stream's is refused before anything is queued (the future is then ready at once,
    /// with the error and the batch); so is a batch whose context cannot be entered (while
    /// another thread's [`with_partitions`](crate::with_partitions) closure has the device).
    /// If `f` panics, the panic is resumed once the stream has been waited for (with the
    /// context still current, so also where another thread has partitioned the device
    /// meanwhile) and the batch dropped. Awaiting, waiting for and dropping the future enter
    /// no context (see the [module documentation](crate::owned::pending#no-entry-after-submit)).
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use cuda_brand::prelude::*;
    /// use cuda_brand::owned::{OwnedContext, OwnedKernel};
    ///
    /// # fn main() -> cuda_brand::Result<()> {
    /// let home = OwnedContext::primary(&Device::get(0)?)?;
    /// let (stream, buf, module) = home.enter(|ctx| {
    ///     let stream = home.unbind(ctx, ctx.new_stream()?)?;
    ///     let buf = home.unbind(ctx, ctx.zeroed::<f32>(1024)?)?;
    ///     let module = home.unbind(ctx, ctx.module_from_ptx(cuda_brand::samples::KERNELS_PTX)?)?;
    ///     Ok::<_, cuda_brand::Error>((Arc::new(stream), buf, Arc::new(module)))
    /// })?;
    /// // SAFETY: scale(float *x, size_t x_len, float k) writes x[0..x_len] only.
    /// let scale = Arc::new(unsafe { OwnedKernel::<(Out<f32>, f32)>::new(&module, "scale") }?);
    ///
    /// let work = stream.submit((buf, vec![1.0f32; 1024], scale), |s, (d, host, scale)| {
    ///     s.copy_from_host_view(d, host.into_ref())?;
    ///     s.launch(scale, LaunchConfig::linear(4, 256), (d, 3.0))?;
    ///     s.copy_to_host_view(host, d.into_ref())
    /// });
    /// // `work.await` in async code; here, without a runtime:
    /// let (result, (_buf, host, _scale)) = work.wait();
    /// result?;
    /// assert_eq!(host, vec![3.0; 1024]);
    /// # Ok(()) }
    /// ```
    pub fn submit<B, F>(self: &Arc<Self>, batch: B, f: F) -> Pending<B>
    where
        B: Batch,
        F: for<'scope, 'ctx> FnOnce(
                &'scope StreamScope<'scope, 'scope, 'ctx>,
                B::Views<'scope, 'ctx>,
            ) -> Result<()>
            + 'static,
    {
        let home = self.context().clone();
        if let Err(e) = batch.check(&home, Crate(())) {
            return Pending {
                state: State::Refused(e, batch),
            };
        }
        // SAFETY: the stream is alive while the op holds `self` (an `Arc` clone); the scope
        // refers to it only while the op lives, and is dropped first.
        let stream: *const Stream<'static> = unsafe { self.value() };
        // SAFETY: as above.
        let stream: &'static Stream<'static> = unsafe { &*stream };
        // an owned stream is never a partition's, which `open` refuses on other threads
        let scope = match StreamScope::open(stream, None) {
            Ok(scope) => scope,
            Err(e) => {
                return Pending {
                    state: State::Refused(e, batch),
                };
            }
        };
        let mut op = Box::new(Op {
            scope,
            batch: Some(batch),
            outcome: Ok(()),
            event: None,
            unwaited: false,
            armed: false,
            finishing: false,
            signal: Arc::new(Signal::default()),
            stream: Arc::clone(self),
            home: home.clone(),
        });
        let mut entered = false;
        let mut panicked = None;
        let queued = home.enter(|_ctx| -> Result<()> {
            entered = true;
            if let Err(payload) = op.run(f) {
                panicked = Some(payload);
                return Ok(());
            }
            op.queue_completion()
        });
        if let Some(payload) = panicked {
            // the closure panicked; `run` waited for the stream, with the context current
            // (so without a push, which nothing refuses). Were it not waited for, the work
            // may still use the batch, which is then leaked with the op rather than dropped
            // by the unwind
            if op.unwaited {
                std::mem::forget(op);
            }
            panic::resume_unwind(payload);
        }
        if let Err(e) = queued {
            if !entered {
                // refused before the closure ran (the device is partitioned, for one):
                // nothing was queued, so the batch goes back with the error
                let batch = op.batch.take().expect("the batch is still the op's");
                return Pending {
                    state: State::Refused(e, batch),
                };
            }
            // nothing can tell the future when the work ends: wait for it here (or, where
            // the context cannot be made current, in `finish`)
            op.outcome = teardown::keep_both(std::mem::replace(&mut op.outcome, Ok(())), Err(e));
            let _ = op.wait_without_event();
        }
        Pending {
            state: State::Queued(op),
        }
    }
}

impl<B: Batch> Op<B> {
    /// Runs the batch's closure with the scope and the batch's views. A panic's payload is
    /// returned after the stream has been waited for (as by every scope), for the caller
    /// to resume once it knows whether the op may be dropped (`unwaited`).
    fn run<F>(&mut self, f: F) -> std::result::Result<(), Box<dyn std::any::Any + Send>>
    where
        F: for<'scope, 'ctx> FnOnce(
            &'scope StreamScope<'scope, 'scope, 'ctx>,
            B::Views<'scope, 'ctx>,
        ) -> Result<()>,
    {
        let ran = {
            // SAFETY: the scope is of the stream's context, entered by the caller; the
            // views are of the batch, checked to be of that context, which the op owns
            // and does not touch until the work is done; the types differ in lifetimes
            // only.
            let scope: &StreamScope<'_, '_, '_> = unsafe { &*(&self.scope as *const _) };
            let batch = self
                .batch
                .as_mut()
                .expect("the batch is handed back only at the end");
            // SAFETY: as above.
            let views = unsafe { batch.views(Crate(())) };
            panic::catch_unwind(AssertUnwindSafe(|| f(scope, views)))
        };
        match ran {
            Ok(outcome) => {
                self.outcome = outcome;
                Ok(())
            }
            Err(payload) => {
                // `unwaited` says whether it could
                let _ = self.wait_without_event();
                Err(payload)
            }
        }
    }
}

impl<B> Op<B> {
    /// Records the completion event after the batch's work. Nothing else is queued on the
    /// stream: a host function or a stream callback there would hold the stream's later
    /// work until the driver's callback thread has run it (about 40 µs an idle callback
    /// thread takes on an H100, measured by `bench/benches/owned.rs`). The future arms its
    /// wake-up only if it is polled before the work is done ([`arm`](Op::arm)).
    fn queue_completion(&mut self) -> Result<()> {
        let event = self.home.take_event()?;
        self.event = Some(event);
        // SAFETY: the event and the stream are alive and of the current context.
        unsafe { driver::event_record(event, self.stream_raw()) }
    }

    /// The stream's handle.
    fn stream_raw(&self) -> driver::CUstream {
        // SAFETY: the stream is alive (held by the op).
        unsafe { self.stream.value() }.raw()
    }

    /// Called by a poll that finds the work not yet seen to end: if the event is complete
    /// (or failed), gives `true`; otherwise makes one of the context's notifier streams
    /// wait for the event and queues the stream callback that wakes the future there (so
    /// that the batch's own stream never waits for a callback), giving `false`. The driver
    /// calls the callback also after an error of the context (`wake`). An error of these
    /// calls is the batch's. The calls run with the context made current for them alone
    /// ([`in_home`]), never entered.
    fn arm(&mut self) -> Current<bool> {
        let Some(event) = self.event else {
            return Current::Ran(Ok(true));
        };
        let key = self.stream_raw() as usize;
        let (home, signal) = (&self.home, &self.signal);
        let armed = in_home(home, || {
            // SAFETY: the event is alive (the op's) and of the current context.
            if !matches!(unsafe { driver::event_query(event) }, Ok(false)) {
                return Ok(true); // done, or failed: `finish` reports which
            }
            let (notifier, load) = home.notifier(key)?;
            // SAFETY: the notifier stream and the event are alive and of this context.
            let queued = unsafe { driver::stream_wait_event(notifier, event) }.and_then(|()| {
                // SAFETY: the notifier stream is alive, and a notifier is in no capture
                // (only the crate queues on it: waits for batches' events, and these
                // callbacks).
                unsafe { wake::queue_callback(notifier, signal, &load) }
            });
            if queued.is_err() {
                load.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            }
            queued.map(|()| false)
        });
        if let Current::Ran(Ok(false)) = armed {
            self.armed = true;
        }
        armed
    }

    /// Waits for the whole stream (no event to wait for), then ends the scope. `Err` where
    /// the context could not be made current: nothing was waited for, `unwaited` is set,
    /// and [`finish`](Op::finish) tries again.
    fn wait_without_event(&mut self) -> Result<()> {
        let stream_raw = self.stream_raw();
        let scope = &self.scope;
        let ended = in_home(&self.home, || {
            // SAFETY: the stream is alive.
            let waited = unsafe { driver::stream_wait_idle(stream_raw) };
            // idle, or confirmed not busy after an error
            scope.end_after_wait(waited)
        });
        let ended = match ended {
            Current::Ran(ended) => ended,
            Current::Not(e) => {
                // work queued before may still run
                self.unwaited = true;
                return Err(e);
            }
        };
        self.unwaited = false;
        self.outcome = teardown::keep_both(std::mem::replace(&mut self.outcome, Ok(())), ended);
        self.destroy_event();
        self.signal.fire();
        Ok(())
    }

    /// Ends the scope once the work is over, waiting for it if need be: the event waited
    /// for (or, where there is none, the stream), the scope's host functions finished, its
    /// allocations freed, the event given back to its context's spares. Only after
    /// [`Finish::Over`] may the batch be handed back or dropped. Inside a host function
    /// nothing can be waited for (no driver call); where the context cannot be made current,
    /// nothing was: the op stays as it was, for another try.
    #[must_use]
    fn finish(&mut self) -> Finish {
        if driver::in_host_fn() {
            return Finish::NotHere;
        }
        if self.unwaited {
            return match self.wait_without_event() {
                Ok(()) => Finish::Over,
                Err(e) => Finish::NotCurrent(e),
            };
        }
        let Some(event) = self.event else {
            return Finish::Over; // waited for already, without the event
        };
        let scope = &self.scope;
        let ended = in_home(&self.home, || {
            // SAFETY: the event is alive (the op's) and of the current context.
            let waited = unsafe { driver::event_synchronize(event) };
            // the wait returned: the work is done, or after an error `end_after_wait`
            // confirms the stream idle before it releases anything
            scope.end_after_wait(waited)
        });
        let ended = match ended {
            Current::Ran(ended) => ended,
            // the event and the watch stay the op's
            Current::Not(e) => return Finish::NotCurrent(e),
        };
        self.event = None;
        // SAFETY: the op's event, its work done (or failed: the context then destroys it
        // with the rest); the notifier's wait for it was queued before, and a later record
        // changes nothing it waits for.
        unsafe { self.home.put_event(event) };
        self.outcome = teardown::keep_both(std::mem::replace(&mut self.outcome, Ok(())), ended);
        Finish::Over
    }

    /// Gives the event back unused (its record failed, or the work was waited for without it).
    fn destroy_event(&mut self) {
        if let Some(event) = self.event.take() {
            // SAFETY: the op's event, and nothing queued waits on it any more (the stream
            // was waited for).
            unsafe { self.home.put_event(event) };
        }
    }

    /// The result and the batch, once finished; a host function's panic resumes here
    /// (the batch is dropped as it unwinds: its work is done).
    fn into_done(mut self: Box<Self>) -> Done<B> {
        if let Some(payload) = self.scope.take_host_panic() {
            drop(self);
            panic::resume_unwind(payload);
        }
        let outcome = std::mem::replace(&mut self.outcome, Ok(()));
        let batch = self.batch.take().expect("handed back once");
        (outcome, batch)
    }
}

/// What driver calls run with a batch's context current gave ([`in_home`]).
enum Current<T> {
    /// They ran: their result (with a failed pop afterwards).
    Ran(Result<T>),
    /// The context could not be made current: nothing ran.
    Not(Error),
}

/// Runs `calls` with `home`'s context current: `context::in_context`, which pushes it for
/// them alone where another context is current. Not an entry: no code of the user runs, so
/// nothing a `with_partitions` closure guards against can happen here, and it does not
/// refuse it (as it does not refuse a buffer's drop).
fn in_home<T>(home: &OwnedContext, calls: impl FnOnce() -> Result<T>) -> Current<T> {
    let mut ran = false;
    let run = || {
        ran = true;
        calls()
    };
    // SAFETY: `home` holds a count of the context, alive while `calls` run.
    let result = unsafe { context::in_context(home.raw(), run) };
    match (ran, result) {
        (false, Err(e)) => Current::Not(e),
        (_, result) => Current::Ran(result),
    }
}

/// What [`Op::finish`] found.
enum Finish {
    /// The work is over (the event or the stream waited for, or the stream confirmed idle
    /// after an error): the batch may be handed back or dropped.
    Over,
    /// Inside a host function (the crate's, or a waker it runs): no driver call can wait.
    NotHere,
    /// The context could not be made current, so nothing was waited for.
    NotCurrent(Error),
}

/// Leaks `op`, whose work is not known to be over (`why`: not [`Finish::Over`]), so that
/// its batch is never handed back or freed while the GPU may use it, and panics naming
/// `call`.
fn leak_and_panic<B>(op: Box<Op<B>>, call: &str, why: Finish) -> ! {
    std::mem::forget(op);
    let why = match why {
        Finish::NotCurrent(e) => format!("its context could not be made current ({e})"),
        Finish::NotHere | Finish::Over => "inside a host function no driver call can".into(),
    };
    panic!(
        "{call}: the batch's work cannot be waited for here ({why}), so the batch is leaked rather than handed back while the GPU may still use it"
    )
}

impl<B> Pending<B> {
    /// Blocks the calling thread until the work is done: the same `(result, batch)` as
    /// awaiting the future, for code without a runtime. Enters no context (see the [module
    /// documentation](crate::owned::pending#no-entry-after-submit)): while another thread's
    /// [`with_partitions`](crate::with_partitions) closure has the device, it still waits,
    /// and hands the batch back.
    ///
    /// # Panics
    /// Inside a host function (the crate's, or a waker it runs), where no driver call can
    /// wait, and where the driver fails to make the batch's context current: the batch is
    /// then leaked, never handed back early. A panic of a host function of the batch is
    /// resumed here.
    pub fn wait(mut self) -> Done<B> {
        match std::mem::replace(&mut self.state, State::Taken) {
            State::Queued(mut op) => match op.finish() {
                Finish::Over => op.into_done(),
                why => leak_and_panic(op, "Pending::wait", why),
            },
            State::Refused(e, batch) => (Err(e), batch),
            State::Taken => panic!("a `Pending` is waited for once"),
        }
    }

    /// Whether the work is known to be done (polling would not wait).
    pub fn is_done(&self) -> bool {
        match &self.state {
            State::Queued(op) => op.signal.is_done(),
            State::Refused(..) | State::Taken => true,
        }
    }
}

impl<B> Future for Pending<B> {
    type Output = Done<B>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Done<B>> {
        // where the work cannot be known to be over: why
        let mut unfinished = None;
        if let State::Queued(op) = &mut self.state {
            if driver::in_host_fn() {
                // an executor polling inside a host function: no driver call here; woken
                // again from outside (`wake_later`)
                wake::wake_later(cx.waker());
                return Poll::Pending;
            }
            if !op.signal.is_done() && !op.finishing {
                op.signal.register(cx.waker());
                let ended = match op.armed {
                    true => false,
                    false => match op.arm() {
                        Current::Ran(Ok(ended)) => ended,
                        Current::Ran(Err(e)) => {
                            // no wake-up can be armed: finish by waiting, below
                            op.outcome = teardown::keep_both(
                                std::mem::replace(&mut op.outcome, Ok(())),
                                Err(e),
                            );
                            true
                        }
                        // the context could not be made current (no refusal of the crate
                        // reaches an owned context: `in_context` refuses only a partition's
                        // context off its thread): `finish` finds the same failure, and
                        // leaks the batch
                        Current::Not(_) => true,
                    },
                };
                if !ended && !op.signal.is_done() {
                    return Poll::Pending;
                }
                op.finishing = true;
            }
            release::release_deferred();
            match op.finish() {
                Finish::Over => {}
                why => unfinished = Some(why),
            }
        }
        Poll::Ready(
            match (std::mem::replace(&mut self.state, State::Taken), unfinished) {
                (State::Queued(op), None) => op.into_done(),
                (State::Queued(op), Some(why)) => leak_and_panic(op, "Pending::poll", why),
                (State::Refused(e, batch), _) => (Err(e), batch),
                (State::Taken, _) => panic!("a `Pending` polled after it was ready"),
            },
        )
    }
}

impl<B> Drop for Pending<B> {
    fn drop(&mut self) {
        let State::Queued(mut op) = std::mem::replace(&mut self.state, State::Taken) else {
            return;
        };
        if !matches!(op.finish(), Finish::Over) {
            // not known to be over (inside a host function no driver call is possible, or
            // the driver could not make the context current): the work may still use the
            // batch, so it is leaked
            std::mem::forget(op);
            return;
        }
        // a host function's panic is not resumed in a drop: forgotten (dropping a payload
        // runs its code, which may panic)
        if let Some(payload) = op.scope.take_host_panic() {
            std::mem::forget(payload);
        }
        // the op (scope, batch) is dropped here, after its work
    }
}

impl<B> fmt::Debug for Pending<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pending")
            .field("done", &self.is_done())
            .finish()
    }
}
