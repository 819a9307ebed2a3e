//! Streams ([`Stream`]): ordered queues of GPU work. The work itself is queued through a
//! stream's scope ([`Stream::scope`], in the [`scope`](crate::scope) module).

use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;

use cuda_driver_sys::CUstream_st;

use crate::context::{Allocating, Brand, ContextGuard, Dynamic, Part, Phase, StreamKind, confined};
use crate::driver::{self, CUstream};
use crate::error::{Error, ErrorCode, Invalid, Result};
use crate::span::Touched;
use crate::synchronous;

// The rooms: `Stream` here, `event.rs` (events and their proofs), `deadline.rs` (the
// bounded wait; the deadline scopes are in `scope/deadline.rs`).
mod deadline;
pub mod event;
#[cfg(any(feature = "cufft", feature = "curand"))]
mod handle_order;

pub(crate) use deadline::settle;
#[doc(inline)]
pub use deadline::{KeepWaiting, Overrun};
// the polling loop of NCCL's bounded waits too
#[cfg(feature = "nccl")]
pub(crate) use deadline::poll_with;
#[doc(inline)]
pub use event::{Event, EventFlags, EventKind, NoTiming, Recorded, Timed, Timing, Waited};
#[cfg(any(feature = "cufft", feature = "curand"))]
pub(crate) use handle_order::HandleOrder;

/// How a stream relates to the legacy default stream (`CU_STREAM_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StreamFlags {
    /// Work on the stream waits for, and is waited for by, the legacy default stream.
    #[default]
    Default,
    /// No implicit synchronization with the legacy default stream (`CU_STREAM_NON_BLOCKING`).
    NonBlocking,
}

impl StreamFlags {
    fn bits(self) -> u32 {
        match self {
            StreamFlags::Default => 0,
            StreamFlags::NonBlocking => 1,
        }
    }
}

/// A stream of the context branded `'ctx`: an ordered queue of GPU work. One pointer wide,
/// `Send` and `Sync` (the driver's stream calls are thread-safe and need no current
/// context), destroyed when dropped (work still queued finishes first, in the driver).
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     let stream = ctx.new_stream()?; // Stream::new(ctx, StreamFlags::NonBlocking)
///     let high = Stream::with_priority(ctx, StreamFlags::NonBlocking, ctx.stream_priority_range()?.greatest)?;
///     let mut buf = ctx.zeroed::<u8>(256)?;
///     stream.scope(|s| s.fill(&mut buf, 1u8))?;
///     high.synchronize()?;
///     assert!(stream.is_idle()?);
///     Ok(())
/// })
/// # }
/// ```
///
/// `K` says what its scopes may allocate: [`Dynamic`] (the default) for a stream of a
/// plain context, [`Preallocated`](crate::phase::Preallocated) for one created during the
/// setup phase of [`with_phases`](crate::with_phases), whose scopes take scratch memory only
/// from pools.
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)), on its own and not only
/// through the guard that made it: streams of two contexts never have one type, and a
/// function that takes two of one context cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
///
/// /// Takes two streams of one context.
/// fn one_context<'ctx>(_: &Stream<'ctx>, _: &Stream<'ctx>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let on_a = a.new_stream()?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let on_b = b.new_stream()?;
///         one_context(&on_a, &on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct Stream<'ctx, K: StreamKind = Dynamic> {
    raw: NonNull<CUstream_st>,
    /// Invariant in `'ctx` (the crate's `Brand`). Were it covariant, streams of two
    /// contexts could be shortened to one brand, and
    /// `Stream::scope_all(&[&of_a, &of_b], ..)` would open one scope over both, in which
    /// memory allocated on one stream may be filled or copied by the other: one context's
    /// stream writing another context's memory.
    _brand: Brand<'ctx>,
    _kind: PhantomData<K>,
}

// SAFETY: a stream handle may be used from any thread; the driver serialises its queue.
unsafe impl<K: StreamKind> Send for Stream<'_, K> {}
// SAFETY: every method takes `&self` and is a thread-safe driver call on the handle; the
// mutable state of a scope lives in `StreamScope`, which is not `Sync`.
unsafe impl<K: StreamKind> Sync for Stream<'_, K> {}

impl<'ctx> Stream<'ctx> {
    /// Creates a stream with the lowest priority.
    pub fn new<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        flags: StreamFlags,
    ) -> Result<Stream<'ctx, P::Streams>> {
        Stream::create(ctx, flags, 0)
    }

    /// Creates a stream with `priority`, which must lie in the context's
    /// [`stream_priority_range`](ContextGuard::stream_priority_range) (lower numbers run
    /// first). The driver would silently clamp an out-of-range priority; this is an error
    /// instead, before the stream is created.
    pub fn with_priority<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        flags: StreamFlags,
        priority: i32,
    ) -> Result<Stream<'ctx, P::Streams>> {
        let range = ctx.stream_priority_range()?;
        if !range.contains(priority) {
            return Err(Error::invalid_input(
                "Stream::with_priority",
                Invalid::argument(format!(
                    "priority {priority} is outside the context's range {} (highest) to {} (lowest)",
                    range.greatest, range.least
                )),
            ));
        }
        Stream::create(ctx, flags, priority)
    }
}

impl<'ctx, K: StreamKind> Stream<'ctx, K> {
    fn create<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        flags: StreamFlags,
        priority: i32,
    ) -> Result<Self> {
        let raw = if S::PARTITION {
            Self::create_in_partition(ctx, flags, priority)?
        } else {
            // The stream belongs to the current context: make it `ctx`'s.
            let raw = ctx.with_current(|| driver::stream_create(flags.bits(), priority))?;
            driver::non_null("cuStreamCreateWithPriority", raw)?
        };
        Ok(Stream {
            raw,
            _brand: PhantomData,
            _kind: PhantomData,
        })
    }

    /// A stream of the partition whose guard is `ctx` (`cuGreenCtxStreamCreate`): its work
    /// runs on the partition's SMs only, which a stream from `cuStreamCreate` is not
    /// documented to (see [`crate::partition`]). The driver requires
    /// `CU_STREAM_NON_BLOCKING`: any other flags are an error before the call.
    #[cold]
    fn create_in_partition<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        flags: StreamFlags,
        priority: i32,
    ) -> Result<NonNull<CUstream_st>> {
        if flags != StreamFlags::NonBlocking {
            return Err(Error::invalid_input(
                "Stream::new",
                Invalid::argument(
                    "a partition's streams are non-blocking (`cuGreenCtxStreamCreate` requires \
                 CU_STREAM_NON_BLOCKING): pass `StreamFlags::NonBlocking`, as `new_stream()` does",
                ),
            ));
        }
        let green = confined::green_of(ctx.raw()).ok_or_else(|| {
            Error::with_detail(
                "cuGreenCtxStreamCreate",
                ErrorCode::InvalidContext,
                "the partition was not entered on this thread",
            )
        })?;
        // SAFETY: the guard proves the partition, so its green context, alive.
        let raw = unsafe { driver::green_stream_create(green, flags.bits(), priority) }?;
        let raw = driver::non_null("cuGreenCtxStreamCreate", raw)?;
        // used on this thread only (`context::confined`)
        confined::register_handle(raw.as_ptr() as usize, ctx.raw());
        Ok(raw)
    }

    /// `Err` (`NotPermitted`, naming `call`) where this is a partition's stream and the
    /// calling thread not the partition's (`context::confined`). One atomic load while no
    /// partition has a stream or event.
    #[inline]
    pub(crate) fn on_its_thread(&self, call: &'static str) -> Result<()> {
        confined::refuse_foreign_handle(call, self.raw() as usize)
    }

    /// The handle, for the crate's own calls.
    #[inline]
    pub(crate) fn raw(&self) -> CUstream {
        self.raw.as_ptr()
    }

    /// The driver's handle (`CUstream`), for calls this crate does not wrap, once the
    /// stream is ordered after every pending synchronous operation of the crate.
    ///
    /// A synchronous write of device memory (a `fill`, a device-to-device copy, an upload of
    /// up to 256 KiB) may still run on the GPU when it returns; the crate orders its own
    /// later users of the memory after it (`docs/design/ordering.md`). Work queued on the
    /// handle names no memory the crate can see, so this call makes the stream wait on the
    /// GPU for every such operation pending now (`cuStreamWaitEvent`, as a scope's
    /// operation that names no memory does), without a wait on the host: work queued on the
    /// handle afterwards runs after them. One atomic load while nothing is pending. Only
    /// what is pending when the call is made: after a later synchronous write, take the
    /// handle again before queueing work that uses that memory. Where the wait cannot be
    /// queued (inside a host function, where the crate makes no driver call, or after a
    /// context's sticky error, which every later call in that context reports), the
    /// handle is returned all the same.
    ///
    /// # Safety
    ///
    /// Taking the handle does nothing the caller must check; `unsafe` marks what it allows
    /// behind the brand's back. The caller promises, for every use of the handle: the
    /// stream is not destroyed (`cuStreamDestroy`); the handle is not used after this
    /// `Stream` is dropped; work queued on it through the handle touches device or pinned
    /// memory of this crate only as a [`scope`](Self::scope) would (read while nothing
    /// writes it, written while nothing else uses it, alive until that work has finished):
    /// no scope knows of that work, so none waits for it; and the call is not made while a
    /// capture of the stream through the handle is open (`cuStreamBeginCapture`), where a
    /// wait for work outside the capture would end the capture in error.
    #[inline]
    pub unsafe fn as_raw(&self) -> crate::driver::handles::CUstream {
        // A failure is not returned, for the reasons `synchronous::before_raw_escape` gives.
        // SAFETY: the stream is alive (borrowed).
        let _ = unsafe { synchronous::stream_after_writes(self.raw(), Touched::Anything) };
        self.raw().cast()
    }

    /// Waits until all work queued on the stream has finished (`cuStreamSynchronize`).
    #[inline]
    ///
    /// A partition's stream is used on the partition's thread only: on another thread
    /// this, and every method and scope of the stream, is [`ErrorCode::NotPermitted`]
    /// ([`crate::partition`]).
    pub fn synchronize(&self) -> Result<()> {
        self.on_its_thread("Stream::synchronize")?;
        // SAFETY: the brand keeps the stream's context, and `self` the stream, alive.
        unsafe { driver::stream_synchronize(self.raw()) }
    }

    /// Whether all queued work has finished (`cuStreamQuery`): `true` idle, `false` busy.
    pub fn is_idle(&self) -> Result<bool> {
        self.on_its_thread("Stream::is_idle")?;
        // SAFETY: as in `synchronize`.
        unsafe { driver::stream_query(self.raw()) }
    }

    /// The stream's priority.
    pub fn priority(&self) -> Result<i32> {
        self.on_its_thread("Stream::priority")?;
        // SAFETY: as in `synchronize`.
        unsafe { driver::stream_priority(self.raw()) }
    }

    /// The stream's flags.
    pub fn flags(&self) -> Result<StreamFlags> {
        self.on_its_thread("Stream::flags")?;
        // SAFETY: as in `synchronize`.
        let bits = unsafe { driver::stream_flags(self.raw()) }?;
        Ok(if bits & 1 != 0 {
            StreamFlags::NonBlocking
        } else {
            StreamFlags::Default
        })
    }
}

// The bound is on the method, so that a run-phase guard gets `Allocating`'s message.
impl<'ctx, P: Phase, S: Part> ContextGuard<'ctx, P, S> {
    /// A new non-blocking stream of this context with the lowest priority:
    /// [`Stream::new`] with [`StreamFlags::NonBlocking`],
    /// the choice for almost every program.
    pub fn new_stream(self) -> Result<Stream<'ctx, P::Streams>>
    where
        P: Allocating,
    {
        Stream::new(self, StreamFlags::NonBlocking)
    }
}

impl<K: StreamKind> Stream<'_, K> {
    /// Destroys the stream and returns the driver's error, where dropping it would only
    /// record the error for the teardown of its context to report. Work still queued
    /// completes first, in the driver. After an error the context's destruction reclaims
    /// the stream.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let stream = ctx.new_stream()?;
    ///     stream.close()
    /// })
    /// # }
    /// ```
    ///
    /// A partition's stream closed on another thread than the partition's is destroyed
    /// by the partition's thread when the partition ends, and `close` returns `Ok`.
    pub fn close(self) -> Result<()> {
        let this = std::mem::ManuallyDrop::new(self);
        // the stream is ours and never used again (`this` is not dropped)
        this.release().unwrap_or(Ok(()))
    }

    /// Destroys the stream, now or (a partition's, on another thread) at the partition's
    /// end (`None`: `context::confined`).
    fn release(&self) -> Option<Result<()>> {
        let raw = self.raw() as usize;
        confined::release_handle(raw, "Stream", move || {
            // SAFETY: the stream is ours and unused from now on (scopes borrow it, so none
            // is open; the caller drops or forgets it). Work still queued completes before
            // the driver releases the stream. A parked release runs on the partition's
            // thread, before its green context is destroyed.
            unsafe { driver::stream_destroy(raw as CUstream) }
        })
    }
}

impl<K: StreamKind> Drop for Stream<'_, K> {
    fn drop(&mut self) {
        if let Some(Err(e)) = self.release() {
            // the context's destruction reclaims the stream; its teardown reports this. A
            // stream does not know its context without a driver call: the one current
            // here is charged (see the `teardown` module)
            let ctx = crate::context::teardown::current_context();
            crate::context::teardown::record_failed_release(ctx, "Stream", e);
        }
    }
}

impl<K: StreamKind> fmt::Debug for Stream<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Stream").field(&self.raw).finish()
    }
}

/// Runs `op` with the context of `stream` current (`cuStreamGetCtx`, then
/// [`in_context`](crate::context::in_context)).
///
/// # Safety
/// `stream` is live, so its context is too.
pub(crate) unsafe fn in_stream_context<T>(
    stream: CUstream,
    op: impl FnOnce() -> Result<T>,
) -> Result<T> {
    // SAFETY: the caller guarantees the stream.
    let ctx = unsafe { driver::stream_get_ctx(stream) }?;
    let ctx = driver::non_null("cuStreamGetCtx", ctx)?;
    // SAFETY: the context of a live stream is alive.
    unsafe { crate::context::in_context(ctx, op) }
}
