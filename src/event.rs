//! Events ([`Event`]): markers recorded on a stream, to wait for, order streams, or time.

use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;

use cuda_driver_sys::CUevent_st;

use crate::context::{Brand, ContextGuard};
use crate::driver::{self, CUevent};
use crate::error::Result;
use crate::stream::Stream;

/// Flags for a new event (`CU_EVENT_*`).
///
/// ```
/// use cuda_brand::EventFlags;
/// assert_eq!(EventFlags::new().bits(), 0);
/// assert_eq!(EventFlags::new().disable_timing(true).blocking_sync(true).bits(), 0x2 | 0x1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[must_use]
pub struct EventFlags(u32);

impl EventFlags {
    /// Timing enabled, spin-waiting on synchronize.
    pub const fn new() -> Self {
        EventFlags(0)
    }

    /// Make [`Event::synchronize`] block the thread instead of spinning (`CU_EVENT_BLOCKING_SYNC`).
    pub const fn blocking_sync(self, on: bool) -> Self {
        EventFlags(if on { self.0 | 1 } else { self.0 & !1 })
    }

    /// Record no timestamps (`CU_EVENT_DISABLE_TIMING`): cheaper, but
    /// [`Event::elapsed_ms`] is an error for such an event.
    pub const fn disable_timing(self, on: bool) -> Self {
        EventFlags(if on { self.0 | 2 } else { self.0 & !2 })
    }

    /// The driver's bit pattern.
    pub const fn bits(self) -> u32 {
        self.0
    }
}

/// An event of the context branded `'ctx`. One pointer wide, `Send` and `Sync`, destroyed
/// when dropped. It can only be recorded on, and waited for by, streams of its own context.
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     let stream = ctx.stream()?;
///     let (start, end) = (ctx.event()?, ctx.event()?);
///     let mut buf = ctx.zeroed::<u8>(64 << 20)?;
///     stream.scope(|s| {
///         start.record(s)?;
///         s.fill(&mut buf, 7u8)?;
///         end.record(s)
///     })?;
///     println!("64 MiB fill: {:.3} ms", start.elapsed_ms(&end)?);
///     Ok(())
/// })
/// # }
/// ```
pub struct Event<'ctx> {
    raw: NonNull<CUevent_st>,
    _brand: Brand<'ctx>,
}

// SAFETY: event handles may be used from any thread; the driver's event calls are
// thread-safe and need no current context.
unsafe impl Send for Event<'_> {}
// SAFETY: every method takes `&self` and is a thread-safe driver call.
unsafe impl Sync for Event<'_> {}

impl<'ctx> Event<'ctx> {
    /// Creates an event in `ctx`.
    pub fn new(ctx: ContextGuard<'ctx>, flags: EventFlags) -> Result<Self> {
        let raw = ctx.with_current(|| driver::event_create(flags.bits()))?;
        let raw = driver::non_null("cuEventCreate", raw)?;
        Ok(Event {
            raw,
            _brand: PhantomData,
        })
    }

    /// The driver's handle.
    #[inline]
    pub fn as_raw(&self) -> CUevent {
        self.raw.as_ptr()
    }

    /// Records the event on `stream` (`cuEventRecord`): it completes when the work queued
    /// before it has.
    #[inline]
    pub fn record(&self, stream: &Stream<'ctx>) -> Result<()> {
        // SAFETY: both handles are alive and branded with the same context.
        unsafe { driver::event_record(self.as_raw(), stream.as_raw()) }
    }

    /// Waits until the event has completed (`cuEventSynchronize`).
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: the event is alive.
        unsafe { driver::event_synchronize(self.as_raw()) }
    }

    /// Whether the event has completed (`cuEventQuery`); an event never recorded has.
    pub fn is_complete(&self) -> Result<bool> {
        // SAFETY: the event is alive.
        unsafe { driver::event_query(self.as_raw()) }
    }

    /// Milliseconds from this event to `end`, two completed events of this context
    /// (`cuEventElapsedTime`), with a resolution of about half a microsecond:
    /// `start.elapsed_ms(&end)`. An error if either was created with timing disabled, or
    /// has not been recorded or completed.
    #[inline]
    pub fn elapsed_ms(&self, end: &Event<'ctx>) -> Result<f32> {
        // SAFETY: both events are alive and of one context.
        unsafe { driver::event_elapsed_ms(self.as_raw(), end.as_raw()) }
    }
}

impl<'ctx> ContextGuard<'ctx> {
    /// A new event of this context that records timestamps:
    /// [`Event::new`] with default flags.
    pub fn event(self) -> Result<Event<'ctx>> {
        Event::new(self, EventFlags::new())
    }
}

impl<'ctx> Stream<'ctx> {
    /// Makes work queued on this stream after this call wait until `event` has completed
    /// (`cuStreamWaitEvent`). The event must be of the same context.
    pub fn wait_event(&self, event: &Event<'ctx>) -> Result<()> {
        // SAFETY: both handles are alive and branded with the same context.
        unsafe { driver::stream_wait_event(self.as_raw(), event.as_raw()) }
    }
}

impl Event<'_> {
    /// Destroys the event and returns the driver's error, where dropping it would only
    /// record the error for the teardown of its context to report. After an error the
    /// context's destruction reclaims the event.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let event = ctx.event()?;
    ///     event.close()
    /// })
    /// # }
    /// ```
    pub fn close(self) -> crate::error::Result<()> {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: the event is ours and never used again (`this` is not dropped).
        unsafe { driver::event_destroy(this.as_raw()) }
    }
}

impl Drop for Event<'_> {
    fn drop(&mut self) {
        // SAFETY: the event is ours and unused from now on.
        if let Err(e) = unsafe { driver::event_destroy(self.as_raw()) } {
            // the context's destruction reclaims the event; its teardown reports this. An
            // event does not know its context: the one current here is charged (see the
            // `teardown` module)
            let ctx = crate::teardown::current_context();
            crate::teardown::record_failed_release(ctx, "Event", e);
        }
    }
}

impl fmt::Debug for Event<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Event").field(&self.raw).finish()
    }
}
