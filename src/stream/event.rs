//! Events ([`Event`]): markers recorded on a stream, to wait for, order streams, or time.
//!
//! Two rules are types here, not run-time errors:
//!
//! * **Only a recorded event is waited for or timed.** [`Event::record`] returns a
//!   [`Recorded`], the proof of that record, and only a `Recorded` can be synchronized,
//!   queried, waited for by a stream ([`Stream::wait_event`]) or timed. The driver accepts
//!   an event that was never recorded everywhere and says it has completed, so a wait for
//!   it does not wait at all; and `cuEventElapsedTime` fails at run time for it.
//! * **Only events that record timestamps are timed.** The kind is a type parameter:
//!   [`Event<'ctx, Timing>`](Timing) (the default, from [`ContextGuard::new_event`]) records
//!   timestamps, [`Event<'ctx, NoTiming>`](NoTiming) (from
//!   [`ContextGuard::new_event_without_timing`]) does not and is cheaper to record and wait for
//!   (`CU_EVENT_DISABLE_TIMING`). [`Recorded::elapsed`] exists for `Timing` events only.
//!
//! A `Recorded` borrows its event mutably (`record` takes `&mut self`), so an event is not
//! recorded again while a proof of its previous record is alive: every `Recorded` means
//! the record it came from, and `start.elapsed(&end)` times the two records the proofs
//! name. Recording it again ends the old proof first; the compile-fail cases in
//! `ui-tests/fail/9_typestate/event_*.rs` pin each of these rules.

use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use cuda_driver_sys::CUevent_st;

use super::Stream;
use super::deadline::poll_until;
use crate::context::{Allocating, Brand, ContextGuard, Part, Phase, StreamKind, confined};
use crate::driver::{self, CUevent};
use crate::error::{Error, Invalid, Result};

/// Flags for a new event (`CU_EVENT_*`). Whether an event records timestamps is its type
/// ([`Timing`] or [`NoTiming`]), not a flag.
///
/// ```
/// use cuda_brand::EventFlags;
/// assert_eq!(EventFlags::new().bits(), 0);
/// assert_eq!(EventFlags::new().block_on_sync(true).bits(), 0x1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[must_use]
pub struct EventFlags(u32);

impl EventFlags {
    /// Spin-waiting on synchronize.
    pub const fn new() -> Self {
        EventFlags(0)
    }

    /// Makes [`Recorded::synchronize`] block the thread instead of spinning
    /// (`CU_EVENT_BLOCKING_SYNC`).
    pub const fn block_on_sync(self, on: bool) -> Self {
        EventFlags(if on { self.0 | 1 } else { self.0 & !1 })
    }

    /// The driver's bit pattern.
    pub const fn bits(self) -> u32 {
        self.0
    }
}

/// `CU_EVENT_DISABLE_TIMING`.
const DISABLE_TIMING: u32 = 0x2;

mod sealed {
    /// The hidden half of [`EventKind`](super::EventKind): the flag the kind adds.
    pub trait Kind {
        const FLAGS: u32;
    }
}

/// The kind of an [`Event`]: [`Timing`] or [`NoTiming`]. Sealed: the kind decides the
/// flags the driver gets, and which methods exist.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a kind of event",
    label = "not an event kind",
    note = "an event is `Event<'ctx, Timing>` (records timestamps) or `Event<'ctx, NoTiming>` (does not)",
    note = "see the guide, chapter 5 (`cuda_brand::guide`)"
)]
pub trait EventKind: sealed::Kind + Send + Sync + 'static {}

/// The kind of an event that records timestamps, so that [`Recorded::elapsed`] can time
/// two of its records: [`Event::new`], [`ContextGuard::new_event`]. The default kind.
#[derive(Debug)]
pub enum Timing {}

/// The kind of an event that records no timestamps (`CU_EVENT_DISABLE_TIMING`): cheaper to
/// record and wait for, the choice for ordering streams. [`Event::without_timing`],
/// [`ContextGuard::new_event_without_timing`].
#[derive(Debug)]
pub enum NoTiming {}

impl sealed::Kind for Timing {
    const FLAGS: u32 = 0;
}
impl EventKind for Timing {}
impl sealed::Kind for NoTiming {
    const FLAGS: u32 = DISABLE_TIMING;
}
impl EventKind for NoTiming {}

/// The event kinds whose records can be timed: [`Timing`] only. The bound of
/// [`Recorded::elapsed`], which names it in the compile error for an event without
/// timing. Sealed, like [`EventKind`].
#[diagnostic::on_unimplemented(
    message = "an event created without timing cannot be timed",
    label = "`elapsed` needs events of kind `Timing`, this one is `{Self}`",
    note = "make both events that `elapsed` measures with `ctx.new_event()` or `Event::new` (kind `Timing`); `ctx.new_event_without_timing()` makes events that only order streams and wait",
    note = "see the guide, chapter 5 (`cuda_brand::guide`)"
)]
pub trait Timed: EventKind {}
impl Timed for Timing {}

/// An event of the context branded `'ctx`, of kind `K` ([`Timing`], the default, or
/// [`NoTiming`]). One pointer wide, `Send` and `Sync`, destroyed when dropped. It can
/// only be recorded on streams of its own context.
///
/// An event is not waited for or timed itself: [`record`](Event::record) returns a
/// [`Recorded`], and that proof of the record is what streams wait for and what is timed
/// (see the [module documentation](crate::stream::event) for why).
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     let stream = ctx.new_stream()?;
///     let (mut start, mut end) = (ctx.new_event()?, ctx.new_event()?);
///     let mut buf = ctx.zeroed::<u8>(64 << 20)?;
///     let (t0, t1) = stream.scope(|s| {
///         let t0 = start.record(s)?;
///         s.fill(&mut buf, 7u8)?;
///         end.record(s).map(|t1| (t0, t1))
///     })?; // the proofs of the two records leave the scope; the events stay borrowed
///     println!("64 MiB fill: {:?}", t0.elapsed(&t1)?);
///     Ok(())
/// })
/// # }
/// ```
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)), on its own and not only
/// through the guard that made it: events of two contexts never have one type, and a
/// function that takes two of one context cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
///
/// /// Takes two events of one context.
/// fn one_context<'ctx>(_: &Event<'ctx>, _: &Event<'ctx>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let on_a = a.new_event()?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let on_b = b.new_event()?;
///         one_context(&on_a, &on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct Event<'ctx, K: EventKind = Timing> {
    raw: NonNull<CUevent_st>,
    /// Invariant in `'ctx` (the crate's `Brand`); a [`Recorded`] takes its brand from it.
    /// Were it covariant, events (and records) of two contexts could be shortened to one
    /// brand and meet where two of one context are taken, such as the two records that a
    /// timing compares.
    _brand: Brand<'ctx>,
    _kind: PhantomData<K>,
}

// SAFETY: event handles may be used from any thread; the driver's event calls are
// thread-safe and need no current context.
unsafe impl<K: EventKind> Send for Event<'_, K> {}
// SAFETY: every method taking `&self` is a thread-safe driver call or reads the handle.
unsafe impl<K: EventKind> Sync for Event<'_, K> {}

impl<'ctx> Event<'ctx, Timing> {
    /// Creates an event in `ctx` that records timestamps.
    pub fn new<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        flags: EventFlags,
    ) -> Result<Self> {
        Self::create(ctx, flags)
    }
}

impl<'ctx> Event<'ctx, NoTiming> {
    /// Creates an event in `ctx` that records no timestamps (`CU_EVENT_DISABLE_TIMING`),
    /// for ordering streams and waiting.
    pub fn without_timing<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        flags: EventFlags,
    ) -> Result<Self> {
        Self::create(ctx, flags)
    }
}

impl<'ctx, K: EventKind> Event<'ctx, K> {
    fn create<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        flags: EventFlags,
    ) -> Result<Self> {
        let bits = flags.bits() | <K as sealed::Kind>::FLAGS;
        let raw = ctx.with_current(|| driver::event_create(bits))?;
        let raw = driver::non_null("cuEventCreate", raw)?;
        if S::PARTITION {
            // used on the partition's thread only (`context::confined`)
            confined::register_handle(raw.as_ptr() as usize, ctx.raw());
        }
        Ok(Event {
            raw,
            _brand: PhantomData,
            _kind: PhantomData,
        })
    }

    /// The handle, for the crate's own calls.
    #[inline]
    pub(crate) fn raw(&self) -> CUevent {
        self.raw.as_ptr()
    }

    /// The driver's handle (`CUevent`), for calls this crate does not wrap. Nothing is
    /// waited for: an event touches no memory.
    ///
    /// # Safety
    ///
    /// Taking the handle does nothing; `unsafe` marks what it allows behind the borrow
    /// checker's back. The caller promises, for every use of the handle: the event is not
    /// destroyed (`cuEventDestroy`); the handle is not used after this `Event` is dropped;
    /// and the event is not recorded through it (`cuEventRecord`) while a [`Recorded`]
    /// proof of it is alive, since what streams and the host wait for is what the proof
    /// says was recorded.
    #[inline]
    pub unsafe fn as_raw(&self) -> crate::driver::handles::CUevent {
        self.raw().cast()
    }

    /// Records the event on `stream` (`cuEventRecord`): it completes when the work queued
    /// on the stream before it has. Returns the proof of this record, which borrows the
    /// event: the event cannot be recorded again while the proof is alive.
    ///
    /// A [`StreamScope`](crate::StreamScope) is a stream too (`event.record(s)`).
    #[inline]
    pub fn record<S: StreamKind>(
        &mut self,
        stream: &Stream<'ctx, S>,
    ) -> Result<Recorded<'_, 'ctx, K>> {
        stream.on_its_thread("Event::record")?;
        self.on_its_thread("Event::record")?;
        // SAFETY: both handles are alive and branded with the same context.
        unsafe { driver::event_record(self.raw(), stream.raw()) }?;
        Ok(Recorded { event: self })
    }
}

/// The proof that an [`Event`] has been recorded on a stream: what streams wait for
/// ([`Stream::wait_event`]), what the host synchronizes with, and, for [`Timing`] events,
/// what is timed ([`Recorded::elapsed`]). Made only by [`Event::record`]; `Copy`, one
/// pointer wide, `Send` and `Sync`.
///
/// It borrows its event mutably for as long as it lives (the event was borrowed `&mut` by
/// `record`), so the event is neither recorded again nor dropped while the proof is alive:
/// a `Recorded` always means the record it came from.
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     let (a, b) = (ctx.new_stream()?, ctx.new_stream()?);
///     let mut filled = ctx.new_event_without_timing()?;
///     let mut buf = ctx.zeroed::<u32>(1 << 20)?;
///     let mut host = vec![0u32; 1 << 20];
///     a.scope_pair(&b, |sa, sb| {
///         let d = sa.bind_mut(&mut buf);
///         sa.fill(d, 7)?;
///         let done = filled.record(sa)?;
///         sb.wait_event(&done)?; // b's work from here on waits for a's fill
///         sb.copy_to_host(&mut host, d.into_ref())
///     })?;
///     assert!(host.iter().all(|&x| x == 7));
///     Ok(())
/// })
/// # }
/// ```
///
/// # The brand
///
/// Its brand is its event's (the `&'e Event<'ctx, K>` it holds), invariant as the event's:
/// records of two contexts never have one type, and a function that takes two records of
/// one context cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::Recorded;
///
/// /// Takes two records of one context.
/// fn one_context<'ctx>(_: Recorded<'_, 'ctx>, _: Recorded<'_, 'ctx>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let (mut event_a, stream_a) = (a.new_event()?, a.new_stream()?);
///     let on_a = event_a.record(&stream_a)?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let (mut event_b, stream_b) = (b.new_event()?, b.new_stream()?);
///         let on_b = event_b.record(&stream_b)?;
///         one_context(on_a, on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
#[must_use = "only the `Recorded` of a record can be waited for or timed"]
pub struct Recorded<'e, 'ctx, K: EventKind = Timing> {
    /// The record's brand is its event's: a shared reference is covariant only in its own
    /// lifetime `'e`, and `Event` is invariant in `'ctx`, so `Recorded` is too.
    event: &'e Event<'ctx, K>,
}

impl<K: EventKind> Clone for Recorded<'_, '_, K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K: EventKind> Copy for Recorded<'_, '_, K> {}

impl<'e, 'ctx, K: EventKind> Recorded<'e, 'ctx, K> {
    /// The handle, for the crate's own calls.
    #[inline]
    pub(crate) fn raw(&self) -> CUevent {
        self.event.raw()
    }

    /// The driver's handle of the event.
    ///
    /// # Safety
    ///
    /// As for [`Event::as_raw`]: the event is neither destroyed nor recorded again
    /// through the handle, and the handle is not used after the event is dropped.
    #[inline]
    pub unsafe fn as_raw(&self) -> crate::driver::handles::CUevent {
        self.raw().cast()
    }

    /// The event this proof is of.
    #[inline]
    pub fn event(&self) -> &'e Event<'ctx, K> {
        self.event
    }

    /// Waits until the record has completed (`cuEventSynchronize`): the work queued on its
    /// stream before it is done.
    ///
    /// A partition's event is used on the partition's thread only: on another thread this,
    /// and every method of the event, is [`ErrorCode::NotPermitted`](crate::ErrorCode::NotPermitted)
    /// ([`crate::partition`]).
    pub fn synchronize(&self) -> Result<()> {
        self.event.on_its_thread("Recorded::synchronize")?;
        // SAFETY: the event is alive: borrowed by `self`.
        unsafe { driver::event_synchronize(self.raw()) }
    }

    /// Whether the record has completed (`cuEventQuery`).
    pub fn is_complete(&self) -> Result<bool> {
        self.event.on_its_thread("Recorded::is_complete")?;
        // SAFETY: the event is alive.
        unsafe { driver::event_query(self.raw()) }
    }

    /// Waits at most `within` for the record to complete, polling `cuEventQuery` (with
    /// the same backoff as [`Stream::scope_within`]): [`Waited::Complete`] once it has
    /// completed, [`Waited::TimedOut`] if it still had not when `within` had passed. The event guards no
    /// borrow, so "not yet" is a plain answer here; a scope's bounded wait cannot return
    /// early ([`Stream::scope_within`]).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use cuda_brand::Waited;
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// # let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let stream = ctx.new_stream()?;
    ///     let mut done = ctx.new_event_without_timing()?;
    ///     let mut buf = ctx.zeroed::<u8>(1 << 20)?;
    ///     stream.scope(|s| {
    ///         s.fill(&mut buf, 1u8)?;
    ///         let done = done.record(s)?;
    ///         if done.synchronize_within(Duration::from_millis(100))? == Waited::TimedOut {
    ///             eprintln!("the fill took more than 100 ms"); // the scope still waits for it
    ///         }
    ///         Ok::<_, cuda_brand::Error>(())
    ///     })?;
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn synchronize_within(&self, within: Duration) -> Result<Waited> {
        self.event.on_its_thread("Recorded::synchronize_within")?;
        let start = Instant::now();
        let query = || {
            // SAFETY: the event is alive.
            unsafe { driver::event_query(self.raw()) }
        };
        Ok(match poll_until(start, start.checked_add(within), query)? {
            true => Waited::Complete,
            false => Waited::TimedOut,
        })
    }

    /// The time from this record to `end`'s, two completed records of timing events of
    /// this context: `start.elapsed(&end)`. The driver measures it in milliseconds with a
    /// resolution of about half a microsecond (`cuEventElapsedTime`).
    ///
    /// An error (`CUDA_ERROR_NOT_READY`) if either has not completed yet:
    /// [`synchronize`](Self::synchronize) `end` first when in doubt. An error
    /// (`CUDA_ERROR_INVALID_VALUE`, from the crate, the detail giving the driver's
    /// milliseconds) if `end` completed before this record, as records on two streams may:
    /// the driver's time is then negative, which a [`Duration`] cannot hold.
    ///
    /// Only for events of kind [`Timing`]: for a [`NoTiming`] event it does not compile
    /// (the bound `Timed`), where the driver would fail at run time.
    #[inline]
    pub fn elapsed<E: Timed>(&self, end: &Recorded<'_, 'ctx, E>) -> Result<Duration>
    where
        K: Timed,
    {
        self.event.on_its_thread("Recorded::elapsed")?;
        end.event.on_its_thread("Recorded::elapsed")?;
        // SAFETY: both events are alive and of one context.
        let ms = unsafe { driver::event_elapsed_ms(self.raw(), end.raw()) }?;
        duration_of_ms(ms)
    }
}

/// The driver's elapsed milliseconds as a [`Duration`]; a negative time (the end recorded
/// before the start) or one that is not a number is an error.
fn duration_of_ms(ms: f32) -> Result<Duration> {
    if ms >= 0.0 && ms.is_finite() {
        Ok(Duration::from_secs_f64(f64::from(ms) / 1000.0))
    } else {
        Err(Error::invalid_input(
            "Recorded::elapsed",
            Invalid::argument(format!(
                "the end was recorded before the start: the driver measured {ms} ms, which is not a duration"
            )),
        ))
    }
}

// The bounds are on the methods, so that a run-phase guard gets `Allocating`'s message.
impl<'ctx, P: Phase, S: Part> ContextGuard<'ctx, P, S> {
    /// A new event of this context that records timestamps:
    /// [`Event::new`] with default flags.
    pub fn new_event(self) -> Result<Event<'ctx>>
    where
        P: Allocating,
    {
        Event::new(self, EventFlags::new())
    }

    /// A new event of this context without timestamps, for ordering streams and waiting:
    /// [`Event::without_timing`] with default flags.
    pub fn new_event_without_timing(self) -> Result<Event<'ctx, NoTiming>>
    where
        P: Allocating,
    {
        Event::without_timing(self, EventFlags::new())
    }
}

impl<'ctx, S: StreamKind> Stream<'ctx, S> {
    /// Makes work queued on this stream after this call wait until the record `event`
    /// has completed (`cuStreamWaitEvent`). The event must be of the same context, and
    /// recorded: only [`Event::record`] makes a [`Recorded`].
    pub fn wait_event<K: EventKind>(&self, event: &Recorded<'_, 'ctx, K>) -> Result<()> {
        self.on_its_thread("Stream::wait_event")?;
        event.event.on_its_thread("Stream::wait_event")?;
        // SAFETY: both handles are alive and branded with the same context.
        unsafe { driver::stream_wait_event(self.raw(), event.raw()) }
    }
}

impl<K: EventKind> Event<'_, K> {
    /// Destroys the event and returns the driver's error, where dropping it would only
    /// record the error for the teardown of its context to report. After an error the
    /// context's destruction reclaims the event.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let event = ctx.new_event()?;
    ///     event.close()
    /// })
    /// # }
    /// ```
    ///
    /// A partition's event closed on another thread than the partition's is destroyed by
    /// the partition's thread when the partition ends, and `close` returns `Ok`.
    pub fn close(self) -> crate::error::Result<()> {
        let this = std::mem::ManuallyDrop::new(self);
        // the event is ours and never used again (`this` is not dropped)
        this.release().unwrap_or(Ok(()))
    }

    /// Destroys the event, now or (a partition's, on another thread) at the partition's
    /// end (`None`: `context::confined`).
    fn release(&self) -> Option<Result<()>> {
        let raw = self.raw() as usize;
        confined::release_handle(raw, "Event", move || {
            // SAFETY: the event is ours and unused from now on (the caller drops or forgets
            // it; no proof of a record outlives it). A parked release runs on the
            // partition's thread, before its green context is destroyed.
            unsafe { driver::event_destroy(raw as CUevent) }
        })
    }

    /// `Err` (`NotPermitted`, naming `call`) where this is a partition's event and the
    /// calling thread not the partition's (`context::confined`).
    #[inline]
    fn on_its_thread(&self, call: &'static str) -> Result<()> {
        confined::refuse_foreign_handle(call, self.raw() as usize)
    }
}

impl<K: EventKind> Drop for Event<'_, K> {
    fn drop(&mut self) {
        if let Some(Err(e)) = self.release() {
            // the context's destruction reclaims the event; its teardown reports this. An
            // event does not know its context: the one current here is charged (see the
            // `teardown` module)
            let ctx = crate::context::teardown::current_context();
            crate::context::teardown::record_failed_release(ctx, "Event", e);
        }
    }
}

impl<K: EventKind> fmt::Debug for Event<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Event").field(&self.raw).finish()
    }
}

impl<K: EventKind> fmt::Debug for Recorded<'_, '_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Recorded").field(&self.event.raw).finish()
    }
}

/// What a bounded wait found ([`Recorded::synchronize_within`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Waited {
    /// The work before the record had completed within the time given.
    Complete,
    /// The time ran out first: the work may still run.
    TimedOut,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn elapsed_milliseconds_become_a_duration_and_a_negative_time_an_error() {
        assert_eq!(duration_of_ms(0.0).unwrap(), Duration::ZERO);
        assert_eq!(duration_of_ms(-0.0).unwrap(), Duration::ZERO);
        assert_eq!(duration_of_ms(2.5).unwrap(), Duration::from_micros(2500));
        assert_eq!(duration_of_ms(0.5e-3).unwrap(), Duration::from_nanos(500));
        let e = duration_of_ms(-1.5).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidInput);
        assert_eq!(e.call(), "Recorded::elapsed");
        assert_eq!(
            e.invalid().and_then(crate::error::Invalid::reason),
            Some(
                "the end was recorded before the start: the driver measured -1.5 ms, which is not a duration"
            )
        );
        assert!(duration_of_ms(f32::NAN).is_err());
        assert!(duration_of_ms(f32::INFINITY).is_err());
    }
}
