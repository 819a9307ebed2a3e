//! Stream scopes ([`StreamScope`]), where all asynchronous work happens, and the views of
//! device memory bound to them ([`DeviceRef`], [`DeviceMut`]).
//!
//! # The rule for asynchronous work
//!
//! Every asynchronous operation (copies, fills, stream-ordered allocation, kernel launches)
//! is queued through a [`StreamScope`], which [`Stream::scope`] hands to a closure. The
//! scope borrows every buffer and host slice an operation touches for the whole scope
//! (`'scope`), and `Stream::scope` synchronizes the stream before it returns, also when the
//! closure panics. So, checked by the borrow checker:
//!
//! * device memory cannot be freed while queued work still uses it (dropping it needs the
//!   borrow to end, which is after the synchronization);
//! * host memory, pageable or page-locked ([`PinnedBuffer`](crate::PinnedBuffer), or a
//!   plain `Vec` that some other code registered with `cuMemHostRegister`), cannot be
//!   freed or written by the host while a copy engine still reads it, nor freed, read or
//!   written while a copy engine writes it (reading what a copy only reads is allowed, as
//!   for `&[T]`);
//! * the same buffer cannot be written by two scopes at once.
//!
//! The synchronization happens in `Stream::scope` itself, not in a destructor, so
//! `mem::forget` cannot skip it (the pattern of [`std::thread::scope`]). Because of this
//! rule a plain `&[T]` is a sound source for an asynchronous copy even when it happens to
//! be page-locked, with no run-time check.
//!
//! # One stream, one brand
//!
//! A scope's lifetime `'scope` is invariant and higher-ranked, like a context's brand: a
//! scope's handle, and the [`DeviceRef`]/[`DeviceMut`] views bound to it, cannot leave the
//! closure or be used by any other scope. Two scopes on two streams (nested, or side by
//! side on scoped threads) therefore never share a bound view: work of one stream cannot
//! touch memory that another stream writes without an order. Each scope's operations run
//! in order on its one stream, so reusing a `Copy` view inside a scope is safe.
//!
//! # Several streams in one scope
//!
//! [`Stream::scope_all`] (and [`Stream::scope_with`] for two) opens one scope over several
//! streams: the closure gets one [`StreamScope`] per stream, sharing one `'scope`, so a view
//! bound (or allocated) on one stream can be used on another. Then the crate orders them:
//! it keeps an order book of the ranges each stream's operations have written and read
//! (and of the module globals a [`KernelMut`] writes), and before an operation on a stream
//! touches memory that another stream's queued work conflicts with, it makes the stream
//! wait (`cuEventRecord` on the other stream, `cuStreamWaitEvent` on this one): a write
//! waits for earlier writes and reads of the range, a read for earlier writes. Work on
//! different memory still overlaps. (Memory borrowed directly for one operation,
//! `&mut buffer` or `&buffer`, is recorded too; it could do without: a `&mut` borrow for
//! `'scope` can be used once, and memory borrowed shared is written by nobody.)
//!
//! A stream-ordered allocation counts as a write on its stream, so memory from
//! [`StreamScope::alloc_zeroed`] is zero for every stream that reads it.
//!
//! # What the end of a scope guarantees
//!
//! Before a scope returns it waits for each of its streams (`cuStreamSynchronize`). The
//! driver documents that this call returns once all the stream's work has completed, and
//! that it may *also* report an error of an earlier asynchronous operation; such an error
//! does not mean that work is still running. For every other failure the scope confirms
//! with `cuStreamQuery` that the stream is no longer busy (waiting while it reports
//! `CUDA_ERROR_NOT_READY`) before it releases any borrow, so no error path returns while the
//! GPU may still use borrowed memory. On a sticky error (an illegal address, see
//! [`ErrorCode::is_sticky`](crate::ErrorCode::is_sticky)) the driver has stopped all work of
//! the context.
//!
//! Every scope form ends the same way, in one function of this module: [`Stream::scope`],
//! [`Stream::scope_with`], [`Stream::scope_all`], the `try_` forms built on them, the scopes
//! of preallocated streams, and the deadline forms ([`Stream::scope_within`],
//! [`Stream::scope_all_within`], which only add a bounded wait before the end). After the
//! waits, the scope finishes its host functions ([`host_fn`](crate::host_fn)) and frees
//! what it allocated. Then a panic of the closure goes on; or else a panic of a deadline
//! scope's overrun handler is resumed; or else the first panic of a host function of the
//! scope; or else the scope returns the closure's result.

pub mod deadline;
mod shaped;

use std::any::Any;
use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, RangeBounds};
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::context::Brand;
use crate::context::teardown;
use crate::context::{Dynamic, StreamKind};
use crate::driver::{self, CUdeviceptr, CUevent, CUmemoryPool, CUstream, Pattern, Side2D};
use crate::error::{Error, Result};
use crate::launch::LaunchCache;
use crate::launch::{
    self, KernelArg, KernelArgs, KernelMut, KernelParams, Launch, LaunchConfig, ScopedKernel,
};
use crate::memory::MemoryPool;
use crate::memory::pitched::{DeviceBuffer2D, check_host_rows, host_pitch, host_rows};
use crate::memory::{
    self, DeviceBuffer, DeviceCopy, DeviceSlice, Memset, Span, check_lengths, first_overlap,
    lengths_match, overlap_error,
};
use crate::stream::{Stream, in_stream_context};

/// Asynchronous work on one stream, open for the length of a [`Stream::scope`] closure (or
/// one of the streams of [`Stream::scope_all`]).
///
/// Every operation borrows what it touches for `'scope`, the whole scope; use
/// [`StreamScope::bind_mut`] to write one buffer in several operations of the scope.
///
/// The operations have the names of the synchronous methods of
/// [`DeviceSlice`]: `copy_from_host`, `copy_to_host`, `copy_from_device`, `fill`; here
/// the destination always comes first (`s.copy_to_host(&mut host, &buffer)`), there the
/// device memory is `self` (`buffer.copy_to_host(&mut host)`).
/// `'env` is the borrow of the stream. Not `Sync`, so the closure's `&StreamScope` cannot
/// reach another thread: the scope stays on the thread that opened it.
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// # fn main() -> cuda_brand::Result<()> {
/// let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     let stream = ctx.stream()?;
///     let mut buf = ctx.zeroed::<u32>(1024)?;
///     let mut host = vec![0u32; 1024];
///     stream.scope(|s| {
///         let d = s.bind_mut(&mut buf); // one buffer, written by two operations in order
///         s.fill(d, 7)?;
///         s.copy_to_host(&mut host, d)
///     })?; // synchronized: `host` is complete, `buf` is free again
///     assert!(host.iter().all(|&x| x == 7));
///     Ok(())
/// })
/// # }
/// ```
pub struct StreamScope<'scope, 'env: 'scope, 'ctx, K: StreamKind = Dynamic> {
    stream: &'env Stream<'ctx, K>,
    allocations: Mutex<Allocations>,
    /// What launches with attributes looked up (`launch_ex`).
    launch_cache: Mutex<LaunchCache>,
    /// The shared order book of a multi-stream scope, and this stream's place in it.
    lanes: Option<(&'scope Lanes, usize)>,
    /// The host functions queued on the stream (`host_fn.rs`), finished at the scope's end.
    pub(crate) host_fns: crate::host_fn::HostFns,
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
    _thread: PhantomData<ScopesStayOnTheirThread>,
}

/// Makes [`StreamScope`] neither `Send` nor `Sync` (its state is behind locks only so that
/// this is its one non-thread-safe part). Named after the rule, because the compiler quotes
/// this name when a scope is sent to or shared with another thread.
///
/// The two impls below, whose bound nothing implements, make the compiler begin that error
/// with [`CrossesThreads`]'s message rather than "`*const ()` cannot be sent between
/// threads safely" (the field's reason). `T` is always `()`: a bound on a type without
/// parameters would be checked where it is written.
struct ScopesStayOnTheirThread<T = ()> {
    _not_send: PhantomData<(*const (), T)>,
}

/// The rule that [`ScopesStayOnTheirThread`] stands for, as the compiler states it.
/// Implemented by nothing.
#[diagnostic::on_unimplemented(
    message = "a `StreamScope` stays on the thread that opened it: it cannot be sent to or shared with another thread",
    label = "the scope would reach another thread here",
    note = "give the other thread its own stream, and open a scope there (a `Stream` is `Send` and `Sync`)",
    note = "see the guide, chapter 4 (`cuda_brand::guide`)"
)]
trait CrossesThreads {}

// SAFETY: never holds: nothing implements `CrossesThreads`.
unsafe impl<T> Send for ScopesStayOnTheirThread<T> where Self: CrossesThreads {}
// SAFETY: as above.
unsafe impl<T> Sync for ScopesStayOnTheirThread<T> where Self: CrossesThreads {}

/// Locks `m`; a poisoned lock (a panic while it was held) still holds consistent data here:
/// every critical section is a push, a take or bookkeeping arithmetic.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a scope allocated, and the pool its allocations come from by default (looked up
/// on its first allocation: the crate's pool of the stream's device, or none where the
/// device has no pools).
#[derive(Default)]
struct Allocations {
    list: Vec<Allocation>,
    pool: Option<Option<usize>>,
    /// Vectors that [`StreamScope::copy_to_vec`] appends to: their new lengths are set
    /// once every stream of the scope has synchronized without an error.
    grown: Vec<Grown>,
}

/// A `Vec<T>` borrowed for the scope whose spare capacity a queued copy fills: `vec` points
/// at it, `len` is its length once the copy is complete, `set_len` is `Vec::<T>::set_len`.
struct Grown {
    vec: *mut (),
    len: usize,
    set_len: unsafe fn(*mut (), usize),
}

// SAFETY: `vec` is only dereferenced by `end_scopes`, on the thread that ends the scope, while
// the `&'scope mut Vec<T>` it came from is still borrowed (the scope has not returned); `T:
// DeviceCopy` is `Send`. The pointer is the only reason the auto trait is missing.
unsafe impl Send for Grown {}

/// `Vec::<T>::set_len`, type-erased for [`Grown`].
///
/// # Safety
/// `vec` points at a live `Vec<T>` with capacity for `len`, whose first `len` elements are
/// initialised.
unsafe fn set_vec_len<T>(vec: *mut (), len: usize) {
    // SAFETY: the caller's promise: a live, unaliased `Vec<T>`.
    let vec = unsafe { &mut *vec.cast::<Vec<T>>() };
    // SAFETY: the caller's promise: capacity for `len`, the first `len` initialised.
    unsafe { vec.set_len(len) }
}

/// An allocation a scope made, freed when the scope ends.
enum Allocation {
    /// From the stream's memory pool (`cuMemAllocAsync`): freed in stream order.
    Pool(CUdeviceptr),
    /// From `cuMemAlloc` (devices without memory pools): freed after the synchronization.
    Plain(CUdeviceptr),
}

impl<'ctx, K: StreamKind> Deref for StreamScope<'_, '_, 'ctx, K> {
    type Target = Stream<'ctx, K>;

    /// The scope's stream: its queries, events and priority are available in the scope.
    fn deref(&self) -> &Stream<'ctx, K> {
        self.stream
    }
}

impl<K: StreamKind> fmt::Debug for StreamScope<'_, '_, '_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamScope")
            .field("stream", &self.stream)
            .field("lane", &self.lanes.map(|(_, i)| i))
            .finish_non_exhaustive()
    }
}

impl<'ctx, K: StreamKind> Stream<'ctx, K> {
    /// Opens a scope for asynchronous work on this stream, runs `f` with it, then
    /// synchronizes the stream (also if `f` panics, while the panic unwinds) before
    /// returning. See the [`scope` module](crate::scope) for why this makes asynchronous
    /// work sound.
    ///
    /// A failure of the final synchronization (for example an illegal address in a kernel)
    /// becomes `E::from(error)` when `f` returned `Ok`; when `f` returned an `Err` of this
    /// crate's [`Error`], it is attached to that error as its
    /// [`teardown_error`](crate::Error::teardown_error) (for other error types,
    /// [`try_scope`](Stream::try_scope) returns both). A panic of a host function queued in
    /// the scope ([`StreamScope::host_fn`]) is resumed after the synchronization, as by
    /// every scope form.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let stream = ctx.stream()?;
    ///     let host = ctx.pinned_from_slice(&[1.0f32; 1024])?;
    ///     let mut device_copy = ctx.zeroed::<f32>(1024)?;
    ///     let mut back = vec![0.0f32; 1024];
    ///     stream.scope(|s| {
    ///         let d = s.bind_mut(&mut device_copy);
    ///         s.copy_from_host(d, &host)?;
    ///         s.copy_to_host(&mut back, d)
    ///     })?; // synchronized here: `back` is complete, `host` and `device_copy` free again
    ///     assert_eq!(back, vec![1.0; 1024]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn scope<'env, R, E, F>(&'env self, f: F) -> Result<R, E>
    where
        F: for<'scope> FnOnce(&'scope StreamScope<'scope, 'env, 'ctx, K>) -> Result<R, E>,
        E: From<Error>,
    {
        let scope = StreamScope::open(self, None);
        let scopes = OpenScopes {
            scopes: std::slice::from_ref(&scope),
            lanes: None,
        };
        run_scope(&scopes, None, || f(&scope))
    }

    /// One scope over two streams: [`Stream::scope_all`] for `[self, other]`, with the two
    /// scopes handed to the closure separately. Views bound on one stream may be used on
    /// the other; the crate orders the two streams where they touch the same memory.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let (a, b) = (ctx.stream()?, ctx.stream()?);
    ///     let mut buf = ctx.zeroed::<u32>(1 << 20)?;
    ///     let mut host = vec![0u32; 1 << 20];
    ///     a.scope_with(&b, |sa, sb| {
    ///         let d = sa.bind_mut(&mut buf);
    ///         sa.fill(d, 7)?;
    ///         sb.copy_to_host(&mut host, d) // b waits for a's fill: the crate orders it
    ///     })?;
    ///     assert!(host.iter().all(|&x| x == 7));
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn scope_with<'env, R, E, F>(&'env self, other: &'env Stream<'ctx, K>, f: F) -> Result<R, E>
    where
        F: for<'scope> FnOnce(
            &'scope StreamScope<'scope, 'env, 'ctx, K>,
            &'scope StreamScope<'scope, 'env, 'ctx, K>,
        ) -> Result<R, E>,
        E: From<Error>,
    {
        Stream::scope_all(&[self, other], |s| f(&s[0], &s[1]))
    }

    /// Opens one scope over all of `streams`, runs `f` with one [`StreamScope`] per stream
    /// (in the order given), then synchronizes every stream before returning (also on a
    /// panic). The scopes share one `'scope`, so memory bound or allocated on one stream
    /// may be used on the others; the crate orders the streams wherever they touch the
    /// same bound memory (see the [module documentation](crate::scope)), and work on
    /// different memory runs concurrently.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let streams = [ctx.stream()?, ctx.stream()?, ctx.stream()?, ctx.stream()?];
    ///     let host: Vec<f32> = (0..1 << 20).map(|i| i as f32).collect();
    ///     let mut dev = ctx.zeroed::<f32>(host.len())?;
    ///     let mut back = vec![0.0f32; host.len()];
    ///     Stream::scope_all(&streams.each_ref(), |lanes| {
    ///         // four chunks, each uploaded and downloaded on its own stream, overlapping
    ///         let d = lanes[0].bind_mut(&mut dev);
    ///         let chunk = host.len() / 4;
    ///         for (i, (src, dst)) in host.chunks(chunk).zip(back.chunks_mut(chunk)).enumerate() {
    ///             let part = d.slice(i * chunk..(i + 1) * chunk);
    ///             lanes[i].copy_from_host(part, src)?;
    ///             lanes[i].copy_to_host(dst, part)?;
    ///         }
    ///         Ok(())
    ///     })?;
    ///     assert_eq!(back, host);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn scope_all<'env, R, E, F>(streams: &[&'env Stream<'ctx, K>], f: F) -> Result<R, E>
    where
        F: for<'scope> FnOnce(&'scope [StreamScope<'scope, 'env, 'ctx, K>]) -> Result<R, E>,
        E: From<Error>,
    {
        let lanes = Lanes::new(streams.iter().map(|s| s.raw()));
        let scopes: Vec<StreamScope<'_, 'env, 'ctx, K>> = streams
            .iter()
            .enumerate()
            .map(|(i, s)| StreamScope::open(s, Some((&lanes, i))))
            .collect();
        let open = OpenScopes {
            scopes: &scopes,
            lanes: Some(&lanes),
        };
        run_scope(&open, None, || f(&scopes))
    }
}

impl<'ctx> Stream<'ctx> {
    /// [`scope`](Stream::scope) for any error type: returns the closure's error and the
    /// final synchronization's (or free's) together when both fail, in a
    /// [`WithTeardown`](crate::WithTeardown). (The plain [`scope`](Stream::scope) keeps both
    /// only when the closure's error type is [`Error`].)
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let stream = ctx.stream()?;
    ///     let mut buf = ctx.zeroed::<u32>(1024)?;
    ///     let wanted = 1024;
    ///     let done = stream.try_scope(|s| {
    ///         s.fill(&mut buf, 7)?;
    ///         anyhow::ensure!(wanted <= 1024, "a step of my own that can fail");
    ///         Ok(())
    ///     });
    ///     if let Err(failed) = done {
    ///         eprintln!("{failed}"); // the closure's error, then the synchronization's
    ///     }
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn try_scope<'env, R, E, F>(&'env self, f: F) -> Result<R, crate::WithTeardown<E>>
    where
        F: for<'scope> FnOnce(&'scope StreamScope<'scope, 'env, 'ctx>) -> Result<R, E>,
        E: From<Error>,
    {
        let mut outcome = None;
        let torn_down = self.scope(|s| {
            outcome = Some(f(s));
            Ok(())
        });
        crate::WithTeardown::settle("Stream::try_scope", outcome, torn_down)
    }

    /// [`scope_with`](Stream::scope_with) for any error type, returning both errors (see
    /// [`try_scope`](Stream::try_scope)).
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let (a, b) = (ctx.stream()?, ctx.stream()?);
    ///     let mut buf = ctx.zeroed::<u32>(1024)?;
    ///     let mut host = vec![0u32; 1024];
    ///     a.try_scope_with(&b, |sa, sb| {
    ///         let d = sa.bind_mut(&mut buf);
    ///         sa.fill(d, 7)?;
    ///         Ok::<_, anyhow::Error>(sb.copy_to_host(&mut host, d)?)
    ///     })
    ///     .map_err(|failed| cuda_brand::Error::with_detail("my step", cuda_brand::ErrorCode::Unknown, failed.to_string()))?;
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn try_scope_with<'env, R, E, F>(
        &'env self,
        other: &'env Stream<'ctx>,
        f: F,
    ) -> Result<R, crate::WithTeardown<E>>
    where
        F: for<'scope> FnOnce(
            &'scope StreamScope<'scope, 'env, 'ctx>,
            &'scope StreamScope<'scope, 'env, 'ctx>,
        ) -> Result<R, E>,
        E: From<Error>,
    {
        Stream::try_scope_all(&[self, other], |s| f(&s[0], &s[1]))
    }

    /// [`scope_all`](Stream::scope_all) for any error type, returning both errors (see
    /// [`try_scope`](Stream::try_scope)).
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let streams = [ctx.stream()?, ctx.stream()?];
    ///     let mut buf = ctx.zeroed::<u32>(1024)?;
    ///     let done = Stream::try_scope_all(&streams.each_ref(), |lanes| {
    ///         let d = lanes[0].bind_mut(&mut buf);
    ///         lanes[0].fill(d.slice(..512), 1)?;
    ///         lanes[1].fill(d.slice(512..), 2)?;
    ///         Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    ///     });
    ///     assert!(done.is_ok());
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn try_scope_all<'env, R, E, F>(
        streams: &[&'env Stream<'ctx>],
        f: F,
    ) -> Result<R, crate::WithTeardown<E>>
    where
        F: for<'scope> FnOnce(&'scope [StreamScope<'scope, 'env, 'ctx>]) -> Result<R, E>,
        E: From<Error>,
    {
        let mut outcome = None;
        let torn_down = Stream::scope_all(streams, |s| {
            outcome = Some(f(s));
            Ok(())
        });
        crate::WithTeardown::settle("Stream::try_scope_all", outcome, torn_down)
    }
}

/// Waits for every scope's stream, then frees the scopes' allocations (all streams first:
/// an allocation of one stream may be used by another's). Returns the first error, with
/// the later ones chained on it ([`Error::teardown_errors`]).
pub(crate) fn end_scopes<K: StreamKind>(scopes: &[StreamScope<'_, '_, '_, K>]) -> Result<()> {
    let mut finished = Ok(());
    for scope in scopes {
        // SAFETY: the stream is alive: the scope borrows it.
        let idle = unsafe { driver::stream_wait_idle(scope.stream.raw()) };
        finished = teardown::keep_both(finished, idle);
    }
    let synchronized = finished.is_ok();
    for scope in scopes {
        scope.host_fns.finish();
    }
    for scope in scopes {
        finished = teardown::keep_both(finished, scope.free_allocations(synchronized));
    }
    finished
}

/// A panic's payload, as [`std::panic::catch_unwind`] returns it.
pub(crate) type Payload = Box<dyn Any + Send>;

/// The end of a scope, as [`run_scope`] drives it: its streams and host functions
/// ([`OpenScopes`]), or a stand-in in the unit tests.
pub(crate) trait ScopeEnd {
    /// Waits for every stream of the scope without a deadline, finishes its host functions
    /// and frees what it allocated: the first error, with the later ones attached.
    fn end(&self) -> Result<()>;

    /// The first panic of the scope's host functions, once [`end`](ScopeEnd::end) has
    /// run (in the order of the scope's streams); the others are forgotten.
    fn take_host_panic(&self) -> Option<Payload>;
}

/// The streams of one open scope: one, or several sharing an order book.
pub(crate) struct OpenScopes<'a, 'scope, 'env: 'scope, 'ctx, K: StreamKind> {
    pub(crate) scopes: &'a [StreamScope<'scope, 'env, 'ctx, K>],
    pub(crate) lanes: Option<&'a Lanes>,
}

impl<K: StreamKind> ScopeEnd for OpenScopes<'_, '_, '_, '_, K> {
    fn end(&self) -> Result<()> {
        let ended = end_scopes(self.scopes);
        match self.lanes {
            Some(lanes) => teardown::keep_both(ended, lanes.destroy_events()),
            None => ended,
        }
    }

    fn take_host_panic(&self) -> Option<Payload> {
        let mut first = None;
        for scope in self.scopes {
            if let Some(payload) = scope.host_fns.take_panic() {
                match first {
                    None => first = Some(payload),
                    // dropping a payload runs its code, which may panic: never here
                    Some(_) => std::mem::forget(payload),
                }
            }
        }
        first
    }
}

/// Runs a scope's closure (`body`), then ends the scope: the one way every scope form
/// finishes ([`Stream::scope`] and [`Stream::scope_all`], and so `scope_with` and the `try_`
/// forms built on them; [`Stream::scope_within`] and [`Stream::scope_all_within`], which
/// pass their bounded wait as `wait_first`).
///
/// On every path, also while a panic of `body` unwinds (then from a drop guard, which no
/// user code can `mem::forget`): `wait_first` runs, its panic caught, then
/// [`ScopeEnd::end`] waits for every stream without a deadline, whatever `wait_first`
/// did. Only then does the scope return, with the first of these:
///
/// 1. a panic of `body`, which goes on (the other panics are forgotten, errors dropped);
/// 2. a panic of `wait_first` (a deadline scope's overrun handler), resumed;
/// 3. a panic of a host function of the scope ([`ScopeEnd::take_host_panic`]), resumed;
/// 4. `body`'s error, with the teardown's attached when it is an [`Error`]
///    ([`teardown::combine`]);
/// 5. the error of `wait_first` or of the end, as `E::from(error)`;
/// 6. `body`'s value.
pub(crate) fn run_scope<R, E: From<Error>>(
    ending: &impl ScopeEnd,
    mut wait_first: Option<&mut dyn FnMut() -> Result<()>>,
    body: impl FnOnce() -> Result<R, E>,
) -> Result<R, E> {
    let mut finish = || -> (Result<()>, Option<Payload>) {
        let waited = match wait_first.as_deref_mut() {
            None => Ok(Ok(())),
            Some(wait) => panic::catch_unwind(AssertUnwindSafe(wait)),
        };
        // Whatever the wait did: every stream is waited for here, before any borrow of the
        // scope is released.
        let ended = ending.end();
        let host_panic = ending.take_host_panic();
        match waited {
            Ok(waited) => (teardown::keep_both(waited, ended), host_panic),
            Err(payload) => {
                if let Some(host_panic) = host_panic {
                    std::mem::forget(host_panic);
                }
                (ended, Some(payload))
            }
        }
    };
    struct OnUnwind<'a, F: FnMut() -> (Result<()>, Option<Payload>)>(&'a mut F);
    impl<F: FnMut() -> (Result<()>, Option<Payload>)> Drop for OnUnwind<'_, F> {
        fn drop(&mut self) {
            // `body`'s panic goes on: a second one would abort, and dropping a payload
            // may panic, so the others are forgotten
            if let (_, Some(payload)) = (self.0)() {
                std::mem::forget(payload);
            }
        }
    }
    let on_unwind = OnUnwind(&mut finish);
    let outcome = body();
    std::mem::forget(on_unwind);
    let (torn_down, panicked) = finish();
    if let Some(payload) = panicked {
        panic::resume_unwind(payload);
    }
    teardown::combine(outcome, torn_down)
}

/// Read access to device memory for the length of a scope: a `Copy` handle that the
/// scope's operations accept wherever they read device memory. Made from a [`DeviceMut`]
/// ([`DeviceMut::as_ref`]); operations also take `&buffer` and `&buffer[range]` directly.
pub struct DeviceRef<'scope, 'ctx, T> {
    ptr: CUdeviceptr,
    len: usize,
    _scope: PhantomData<fn(&'scope ()) -> &'scope ()>,
    _brand: Brand<'ctx>,
    _elem: PhantomData<*const T>,
}

/// Write access to device memory for the length of a scope: a `Copy` handle, so one
/// buffer can be written by several operations of the same stream (which run in order).
/// Made by [`StreamScope::bind_mut`], [`StreamScope::alloc_zeroed`] or
/// [`StreamScope::alloc`]; operations also take `&mut buffer` directly for a single use.
pub struct DeviceMut<'scope, 'ctx, T> {
    ptr: CUdeviceptr,
    len: usize,
    _scope: PhantomData<fn(&'scope ()) -> &'scope ()>,
    _brand: Brand<'ctx>,
    _elem: PhantomData<*mut T>,
}

macro_rules! scoped_view {
    ($name:ident) => {
        impl<T> Clone for $name<'_, '_, T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T> Copy for $name<'_, '_, T> {}

        impl<'scope, 'ctx, T> $name<'scope, 'ctx, T> {
            #[inline]
            fn new(ptr: CUdeviceptr, len: usize) -> Self {
                $name {
                    ptr,
                    len,
                    _scope: PhantomData,
                    _brand: PhantomData,
                    _elem: PhantomData,
                }
            }

            /// The number of elements.
            #[inline]
            pub fn len(&self) -> usize {
                self.len
            }

            /// Whether there are no elements.
            #[inline]
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }

            /// The device address, for the crate's own calls.
            #[inline]
            pub(crate) fn device_ptr(&self) -> CUdeviceptr {
                self.ptr
            }

            /// The device address of the first element (`CUdeviceptr`).
            ///
            /// # Safety
            ///
            /// Taking the address does nothing; `unsafe` marks what it allows behind the
            /// borrow checker's back, since a number outlives no borrow. The caller
            /// promises, for every use of the address (a kernel parameter, a driver call):
            /// it is not used after the scope has ended (its memory may be freed then);
            /// and work given it reads the memory only while nothing writes it and writes
            /// it only while nothing else uses it, until that work has finished, as the
            /// scope does for this view.
            #[inline]
            pub unsafe fn as_device_ptr(&self) -> CUdeviceptr {
                self.device_ptr()
            }

            #[inline]
            fn bytes(&self) -> usize {
                memory::byte_len::<T>(self.len)
            }

            /// The elements in `range`, as a handle of the same kind.
            ///
            /// # Panics
            /// If the range is out of bounds; [`try_slice`](Self::try_slice) returns `None`
            /// instead.
            #[track_caller]
            pub fn slice(self, range: impl RangeBounds<usize>) -> Self {
                match self.try_slice(range) {
                    Some(view) => view,
                    None => panic!(
                        "{}::slice: range out of bounds for {} elements",
                        stringify!($name),
                        self.len
                    ),
                }
            }

            /// The elements in `range`, or `None` if it is out of bounds.
            pub fn try_slice(self, range: impl RangeBounds<usize>) -> Option<Self> {
                let (start, end) = memory::bounds(&range, self.len)?;
                Some(Self::new(
                    self.ptr + memory::byte_len::<T>(start) as CUdeviceptr,
                    end - start,
                ))
            }
        }

        impl<T> fmt::Debug for $name<'_, '_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(
                    f,
                    "{}({:#x}, len {})",
                    stringify!($name),
                    self.ptr,
                    self.len
                )
            }
        }
    };
}
scoped_view!(DeviceRef);
scoped_view!(DeviceMut);

impl<'scope, 'ctx, T> DeviceMut<'scope, 'ctx, T> {
    /// The same memory, for reading.
    #[inline]
    pub fn as_ref(self) -> DeviceRef<'scope, 'ctx, T> {
        DeviceRef::new(self.ptr, self.len)
    }
}

/// Device memory a scope's operation may write: `&mut buffer`, `&mut buffer[range]`, or a
/// [`DeviceMut`] of the scope. Sealed.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not device memory this scope may write",
    label = "expected `&mut buffer`, `&mut buffer[range]` or a `DeviceMut` of this scope",
    note = "to write a buffer in several operations of one scope, bind it once: `let d = s.bind_mut(&mut buffer);`",
    note = "see the guide, chapter 5 (`cuda_brand::guide`)"
)]
pub trait IntoDeviceMut<'scope, 'ctx, T>: sealed::IntoMut<'scope, 'ctx, T> {}

/// Device memory a scope's operation may read: `&buffer`, `&buffer[range]`, a
/// [`DeviceRef`] or a [`DeviceMut`] of the scope. Sealed.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not device memory this scope may read",
    label = "expected `&buffer`, `&buffer[range]`, a `DeviceRef` or a `DeviceMut` of this scope",
    note = "see the guide, chapter 5 (`cuda_brand::guide`)"
)]
pub trait IntoDeviceRef<'scope, 'ctx, T>: sealed::IntoRef<'scope, 'ctx, T> {}

pub(crate) mod sealed {
    use super::{DeviceMut, DeviceRef};

    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot implement `IntoDeviceMut`: the trait is sealed",
        note = "only a scope makes write handles (`bind_mut`, `alloc_zeroed`), and `&mut buffer` is one for a single use, so that no user type decides which memory GPU work writes",
        note = "see the guide, chapter 8 (`cuda_brand::guide`)"
    )]
    pub trait IntoMut<'scope, 'ctx, T> {
        fn into_mut(self) -> DeviceMut<'scope, 'ctx, T>;
    }
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot implement `IntoDeviceRef`: the trait is sealed",
        note = "only the crate's buffers and views can be read by GPU work, so that no user type decides which memory it reads",
        note = "see the guide, chapter 8 (`cuda_brand::guide`)"
    )]
    pub trait IntoRef<'scope, 'ctx, T> {
        fn into_ref(self) -> DeviceRef<'scope, 'ctx, T>;
    }
}

macro_rules! into_view {
    ($trait:ident, $sealed:ident, $method:ident, $view:ident: $($arg:ty),*) => { $(
        impl<'scope, 'ctx, T: DeviceCopy> sealed::$sealed<'scope, 'ctx, T> for $arg {
            #[inline(always)]
            fn $method(self) -> $view<'scope, 'ctx, T> {
                $view::new(self.device_ptr(), self.len())
            }
        }
        impl<'scope, 'ctx, T: DeviceCopy> $trait<'scope, 'ctx, T> for $arg {}
    )* };
}
into_view!(IntoDeviceMut, IntoMut, into_mut, DeviceMut: &'scope mut DeviceSlice<'ctx, T>, &'scope mut DeviceBuffer<'ctx, T>, DeviceMut<'scope, 'ctx, T>);
into_view!(IntoDeviceRef, IntoRef, into_ref, DeviceRef: &'scope DeviceSlice<'ctx, T>, &'scope DeviceBuffer<'ctx, T>, DeviceRef<'scope, 'ctx, T>, DeviceMut<'scope, 'ctx, T>);

/// The scope's views as kernel arguments: a `DeviceRef` or a `DeviceMut` for an `In`, a
/// `DeviceMut` for an `Out`.
macro_rules! view_args {
    ($param:ident, $write:literal: $($arg:ty),*) => { $(
        impl<'scope, 'ctx, T: DeviceCopy> launch::sealed::Arg<'scope, 'ctx, launch::$param<T>> for $arg {
            #[inline(always)]
            fn lower(self, _: launch::sealed::Crate) -> ([u64; 2], Span) {
                launch::slice_raw(self.ptr, self.len, std::mem::size_of::<T>(), $write)
            }
        }
        impl<'scope, 'ctx, T: DeviceCopy> KernelArg<'scope, 'ctx, launch::$param<T>> for $arg {}
    )* };
}
view_args!(In, false: DeviceRef<'scope, 'ctx, T>, DeviceMut<'scope, 'ctx, T>);
view_args!(Out, true: DeviceMut<'scope, 'ctx, T>);

#[inline(always)]
fn write_span<T>(v: &DeviceMut<'_, '_, T>) -> Span {
    Span {
        start: v.ptr,
        bytes: v.bytes() as u64,
        write: true,
    }
}

#[inline(always)]
fn read_span<T>(v: &DeviceRef<'_, '_, T>) -> Span {
    Span {
        start: v.ptr,
        bytes: v.bytes() as u64,
        write: false,
    }
}

impl<'scope, 'env, 'ctx, K: StreamKind> StreamScope<'scope, 'env, 'ctx, K> {
    pub(crate) fn open(
        stream: &'env Stream<'ctx, K>,
        lanes: Option<(&'scope Lanes, usize)>,
    ) -> Self {
        StreamScope {
            stream,
            allocations: Mutex::new(Allocations::default()),
            launch_cache: Mutex::new(LaunchCache::default()),
            lanes,
            host_fns: crate::host_fn::HostFns::new(),
            _scope: PhantomData,
            _env: PhantomData,
            _thread: PhantomData,
        }
    }

    /// The scope's stream.
    #[inline]
    pub fn stream(&self) -> &'env Stream<'ctx, K> {
        self.stream
    }

    /// Whether this scope is one of the streams of a multi-stream scope
    /// ([`Stream::scope_with`], [`Stream::scope_all`]), whose operations go through the order
    /// book.
    #[inline]
    #[cfg_attr(not(feature = "nccl"), allow(dead_code))] // used by the `nccl` feature
    pub(crate) fn is_multi_stream(&self) -> bool {
        self.lanes.is_some()
    }

    /// Runs `op`, one operation on this scope's stream touching `spans`, after the waits a
    /// multi-stream scope needs (none for a scope of one stream), and records it.
    #[inline(always)]
    pub(crate) fn ordered(
        &self,
        spans: &[Span],
        globals: Option<usize>,
        op: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        match self.lanes {
            None => op(),
            Some((lanes, me)) => lanes.run(me, spans, globals, op),
        }
    }

    /// Binds `slice` to the scope for writing: the returned handle is `Copy`, so several
    /// operations of this scope (which run in order on its stream) can write the same
    /// memory, while the host cannot touch it until the scope has synchronized.
    #[inline]
    pub fn bind_mut<T>(
        &'scope self,
        slice: &'scope mut DeviceSlice<'ctx, T>,
    ) -> DeviceMut<'scope, 'ctx, T> {
        DeviceMut::new(slice.device_ptr(), slice.len())
    }

    /// Binds a [`KernelMut`] (a kernel that writes its module's globals) to the scope: the
    /// returned handle is `Copy`, so the scope can launch it any number of times, in order
    /// on its stream (in a multi-stream scope, ordered like a write of memory).
    #[inline]
    pub fn bind_kernel<P>(
        &'scope self,
        kernel: &'scope mut KernelMut<'_, 'ctx, P>,
    ) -> ScopedKernel<'scope, 'ctx, P> {
        kernel.scoped()
    }

    /// Queues a copy of `src` from the host into `dst` (`cuMemcpyHtoDAsync`).
    ///
    /// `src` may be any slice: pageable memory, a [`PinnedBuffer`](crate::PinnedBuffer),
    /// or memory registered elsewhere; it stays borrowed until the scope has synchronized.
    ///
    /// # Panics
    /// If the lengths differ (before any driver call).
    /// [`try_copy_from_host`](StreamScope::try_copy_from_host) returns the error instead.
    #[inline]
    pub fn copy_from_host<T: DeviceCopy>(
        &'scope self,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: &'scope [T],
    ) -> Result<()> {
        let dst = dst.into_mut();
        check_lengths("copy_from_host", dst.len(), src.len());
        if dst.bytes() == 0 {
            return Ok(());
        }
        self.ordered(&[write_span(&dst)], None, || {
            // SAFETY: same lengths; both ranges stay borrowed, and the host range
            // unmodified, until the scope synchronizes the stream; the stream is alive
            // (borrowed); other streams of the scope are ordered around it by `ordered`.
            unsafe {
                driver::memcpy_htod_async(
                    dst.ptr,
                    src.as_ptr().cast::<c_void>(),
                    dst.bytes(),
                    self.stream.raw(),
                )
            }
        })
    }

    /// Queues a copy of `src` into `dst` on the host (`cuMemcpyDtoHAsync`). `dst` is
    /// complete once the scope has returned.
    ///
    /// # Panics
    /// If the lengths differ (before any driver call).
    /// [`try_copy_to_host`](StreamScope::try_copy_to_host) returns the error instead.
    #[inline]
    pub fn copy_to_host<T: DeviceCopy>(
        &'scope self,
        dst: &'scope mut [T],
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
    ) -> Result<()> {
        let src = src.into_ref();
        check_lengths("copy_to_host", dst.len(), src.len());
        if src.bytes() == 0 {
            return Ok(());
        }
        self.ordered(&[read_span(&src)], None, || {
            // SAFETY: same lengths; `dst` is borrowed exclusively until the scope
            // synchronizes, and any bytes are a valid `T` (`DeviceCopy`).
            unsafe {
                driver::memcpy_dtoh_async(
                    dst.as_mut_ptr().cast::<c_void>(),
                    src.ptr,
                    src.bytes(),
                    self.stream.raw(),
                )
            }
        })
    }

    /// Queues a copy of `src` to the end of `dst` (`cuMemcpyDtoHAsync` into its spare
    /// capacity): once the scope has returned, `dst` is longer by `src.len()` elements and
    /// ends with them. The fast way to bring results back into a new `Vec`: unlike
    /// [`copy_to_host`](StreamScope::copy_to_host) into `vec![0; n]`, nothing is written
    /// twice. `dst` stays borrowed (unreadable) until the scope has synchronized. Its length
    /// grows when the scope's synchronization succeeds, also when the closure returned an
    /// error after queueing the copy (the copy is complete); if synchronizing fails, `dst`
    /// keeps its old length and contents.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let stream = ctx.stream()?;
    ///     let mut out = Vec::new();
    ///     stream.scope(|s| {
    ///         let d = s.alloc_zeroed::<f32>(1 << 20)?;
    ///         s.fill(d, 1.5)?;
    ///         s.copy_to_vec(&mut out, d)
    ///     })?;
    ///     assert_eq!(out, vec![1.5; 1 << 20]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn copy_to_vec<T: DeviceCopy>(
        &'scope self,
        dst: &'scope mut Vec<T>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
    ) -> Result<()> {
        let src = src.into_ref();
        if src.bytes() == 0 {
            // nothing to copy: `src` is empty, or its elements are zero-sized
            // SAFETY: all-zero bytes are a valid `T` (`DeviceCopy`: any bytes are).
            dst.resize_with(dst.len() + src.len(), || unsafe { std::mem::zeroed() });
            return Ok(());
        }
        // room in both lists before the copy is queued, so that recording it cannot fail
        dst.reserve(src.len());
        let mut allocations = lock(&self.allocations);
        allocations.grown.reserve(1);
        let old_len = dst.len();
        let spare = dst.spare_capacity_mut();
        self.ordered(&[read_span(&src)], None, || {
            // SAFETY: the spare capacity holds at least `src.len()` elements (reserved
            // above); `dst` is borrowed exclusively until the scope has synchronized, so it
            // is neither read, moved nor reallocated while the copy writes it.
            unsafe {
                driver::memcpy_dtoh_async(
                    spare.as_mut_ptr().cast::<c_void>(),
                    src.ptr,
                    src.bytes(),
                    self.stream.raw(),
                )
            }
        })?;
        allocations.grown.push(Grown {
            vec: std::ptr::from_mut(dst).cast::<()>(),
            len: old_len + src.len(),
            set_len: set_vec_len::<T>,
        });
        Ok(())
    }

    /// Queues a device-to-device copy (`cuMemcpyDtoDAsync`). The two ranges must not
    /// overlap (two views of one bound buffer can): an error before any driver call.
    ///
    /// # Panics
    /// If the lengths differ (before any driver call).
    /// [`try_copy_from_device`](StreamScope::try_copy_from_device) returns the error instead.
    pub fn copy_from_device<T: DeviceCopy>(
        &'scope self,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
    ) -> Result<()> {
        let (dst, src) = (dst.into_mut(), src.into_ref());
        check_lengths("copy_from_device", dst.len(), src.len());
        if dst.bytes() == 0 {
            return Ok(());
        }
        let spans = [write_span(&dst), read_span(&src)];
        if spans[0].overlaps(&spans[1]) {
            return Err(overlap_error(
                "StreamScope::copy_from_device",
                ["the destination", "the source"],
                &spans[0],
                &spans[1],
            ));
        }
        self.ordered(&spans, None, || {
            // SAFETY: same lengths, disjoint (checked above), both device ranges borrowed
            // until the scope synchronizes; other streams are ordered by `ordered`.
            unsafe { driver::memcpy_dtod_async(dst.ptr, src.ptr, dst.bytes(), self.stream.raw()) }
        })
    }

    /// Queues a copy from `src`, memory of another context `'peer` (another device,
    /// usually), into `dst`, memory of this scope's context (`cuMemcpyPeerAsync`).
    /// `src_ctx` is the source's guard, so the two brands cannot be swapped; `src` stays
    /// borrowed until the scope has synchronized. Needs no peer access.
    ///
    /// # Panics
    /// If the lengths differ (before any driver call).
    /// [`try_copy_from_peer`](StreamScope::try_copy_from_peer) returns the error instead.
    pub fn copy_from_peer<'peer, T: DeviceCopy>(
        &'scope self,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: &'scope DeviceSlice<'peer, T>,
        src_ctx: crate::ContextGuard<'peer>,
    ) -> Result<()> {
        let dst = dst.into_mut();
        check_lengths("copy_from_peer", dst.len(), src.len());
        if dst.bytes() == 0 {
            return Ok(());
        }
        let stream = self.stream.raw();
        // SAFETY: the stream is alive, so is its context.
        let dst_ctx = unsafe { driver::stream_get_ctx(stream) }?;
        self.ordered(&[write_span(&dst)], None, || {
            // SAFETY: both contexts are alive (brands); each range is memory its context
            // may access (its own, or a peer's through a `PeerAccess` view); both stay
            // borrowed until the scope synchronizes; `src` is borrowed shared, so nothing
            // writes it meanwhile.
            unsafe {
                driver::memcpy_peer_async(
                    dst.ptr,
                    dst_ctx,
                    src.device_ptr(),
                    src_ctx.raw(),
                    dst.bytes(),
                    stream,
                )
            }
        })
    }

    /// Queues setting every element of `dst` to `value` (`cuMemsetD8/16/32Async`).
    pub fn fill<T: Memset>(
        &'scope self,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        value: T,
    ) -> Result<()> {
        let dst = dst.into_mut();
        if dst.bytes() == 0 {
            return Ok(());
        }
        self.ordered(&[write_span(&dst)], None, || {
            // SAFETY: `len` elements of the pattern's width, borrowed until the scope
            // synchronizes; other streams are ordered by `ordered`.
            unsafe {
                driver::memset_async(
                    dst.ptr,
                    crate::memory::sealed::Sealed::pattern(value),
                    dst.len,
                    self.stream.raw(),
                )
            }
        })
    }

    /// Queues a 2D copy of `dst.height()` rows of `dst.width()` elements from `src`, rows
    /// `row_len` elements apart, into `dst` (`cuMemcpy2DAsync`).
    ///
    /// # Panics
    /// If `src` does not hold the rows (before any driver call).
    /// [`try_copy_2d_from_host`](StreamScope::try_copy_2d_from_host) returns the error instead.
    pub fn copy_2d_from_host<T: DeviceCopy>(
        &'scope self,
        dst: &'scope mut DeviceBuffer2D<'ctx, T>,
        src: &'scope [T],
        row_len: usize,
    ) -> Result<()> {
        check_host_rows(
            "copy_2d_from_host",
            src.len(),
            dst.width(),
            row_len,
            dst.height(),
        );
        let (w, h) = dst.extent();
        if w == 0 || h == 0 {
            return Ok(());
        }
        let host = Side2D::Host(
            src.as_ptr().cast(),
            host_pitch::<T>("copy_2d_from_host", row_len),
        );
        self.ordered(&[dst.span(true)], None, || {
            // SAFETY: both sides hold `h` rows of `w` bytes at their pitch (checked), stay
            // borrowed (the host side unmodified) until the scope synchronizes.
            unsafe { driver::memcpy_2d_async(dst.side(), host, w, h, self.stream.raw()) }
        })
    }

    /// Queues a 2D copy of `src` into `dst`, rows `row_len` elements apart
    /// (`cuMemcpy2DAsync`); `dst` is complete once the scope has returned.
    ///
    /// # Panics
    /// If `dst` cannot hold the rows (before any driver call).
    /// [`try_copy_2d_to_host`](StreamScope::try_copy_2d_to_host) returns the error instead.
    pub fn copy_2d_to_host<T: DeviceCopy>(
        &'scope self,
        dst: &'scope mut [T],
        row_len: usize,
        src: &'scope DeviceBuffer2D<'ctx, T>,
    ) -> Result<()> {
        check_host_rows(
            "copy_2d_to_host",
            dst.len(),
            src.width(),
            row_len,
            src.height(),
        );
        let (w, h) = src.extent();
        if w == 0 || h == 0 {
            return Ok(());
        }
        let host = Side2D::HostMut(
            dst.as_mut_ptr().cast(),
            host_pitch::<T>("copy_2d_to_host", row_len),
        );
        self.ordered(&[src.span(false)], None, || {
            // SAFETY: as above; `dst` is borrowed exclusively until the scope synchronizes,
            // and any bytes are a valid `T`.
            unsafe { driver::memcpy_2d_async(host, src.side(), w, h, self.stream.raw()) }
        })
    }

    /// [`copy_from_host`](StreamScope::copy_from_host), with differing lengths an error
    /// (before any driver call) instead of a panic.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let mut buf = ctx.zeroed::<u32>(4)?;
    ///     let e = ctx.stream()?.scope(|s| s.try_copy_from_host(&mut buf, &[1, 2, 3]));
    ///     assert_eq!(e.unwrap_err().detail(), Some("destination has 4 elements but source has 3"));
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn try_copy_from_host<T: DeviceCopy>(
        &'scope self,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: &'scope [T],
    ) -> Result<()> {
        let dst = dst.into_mut();
        lengths_match("copy_from_host", dst.len(), src.len())?;
        self.copy_from_host(dst, src)
    }

    /// [`copy_to_host`](StreamScope::copy_to_host), with differing lengths an error
    /// (before any driver call) instead of a panic.
    pub fn try_copy_to_host<T: DeviceCopy>(
        &'scope self,
        dst: &'scope mut [T],
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
    ) -> Result<()> {
        let src = src.into_ref();
        lengths_match("copy_to_host", dst.len(), src.len())?;
        self.copy_to_host(dst, src)
    }

    /// [`copy_from_device`](StreamScope::copy_from_device), with differing lengths an
    /// error (before any driver call) instead of a panic.
    pub fn try_copy_from_device<T: DeviceCopy>(
        &'scope self,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
    ) -> Result<()> {
        let (dst, src) = (dst.into_mut(), src.into_ref());
        lengths_match("copy_from_device", dst.len(), src.len())?;
        self.copy_from_device(dst, src)
    }

    /// [`copy_from_peer`](StreamScope::copy_from_peer), with differing lengths an error
    /// (before any driver call) instead of a panic.
    pub fn try_copy_from_peer<'peer, T: DeviceCopy>(
        &'scope self,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: &'scope DeviceSlice<'peer, T>,
        src_ctx: crate::ContextGuard<'peer>,
    ) -> Result<()> {
        let dst = dst.into_mut();
        lengths_match("copy_from_peer", dst.len(), src.len())?;
        self.copy_from_peer(dst, src, src_ctx)
    }

    /// [`copy_2d_from_host`](StreamScope::copy_2d_from_host), with a host slice that does
    /// not hold the rows an error (before any driver call) instead of a panic.
    pub fn try_copy_2d_from_host<T: DeviceCopy>(
        &'scope self,
        dst: &'scope mut DeviceBuffer2D<'ctx, T>,
        src: &'scope [T],
        row_len: usize,
    ) -> Result<()> {
        host_rows(
            "copy_2d_from_host",
            src.len(),
            dst.width(),
            row_len,
            dst.height(),
        )?;
        self.copy_2d_from_host(dst, src, row_len)
    }

    /// [`copy_2d_to_host`](StreamScope::copy_2d_to_host), with a host slice that cannot
    /// hold the rows an error (before any driver call) instead of a panic.
    pub fn try_copy_2d_to_host<T: DeviceCopy>(
        &'scope self,
        dst: &'scope mut [T],
        row_len: usize,
        src: &'scope DeviceBuffer2D<'ctx, T>,
    ) -> Result<()> {
        host_rows(
            "copy_2d_to_host",
            dst.len(),
            src.width(),
            row_len,
            src.height(),
        )?;
        self.copy_2d_to_host(dst, row_len, src)
    }

    /// Queues migrating managed memory to `to` (`cuMemPrefetchAsync`): the device before a
    /// kernel reads it, the host before the host does (see
    /// [`ManagedBuffer`](crate::ManagedBuffer)). Memory that is not managed is an error from
    /// the driver.
    pub fn prefetch<T: DeviceCopy>(
        &'scope self,
        memory: impl IntoDeviceRef<'scope, 'ctx, T>,
        to: crate::MemoryLocation,
    ) -> Result<()> {
        let memory = memory.into_ref();
        if memory.bytes() == 0 {
            return Ok(());
        }
        // a migration moves the pages: ordered like a write
        let span = Span {
            start: memory.ptr,
            bytes: memory.bytes() as u64,
            write: true,
        };
        self.ordered(&[span], None, || {
            // SAFETY: memory borrowed until the scope synchronizes; the stream is alive.
            unsafe {
                driver::mem_prefetch_async(memory.ptr, memory.bytes(), to.raw(), self.stream.raw())
            }
        })
    }

    /// Queues a launch of `kernel` (`cuLaunchKernel`) with `args`, one per declared
    /// parameter: `&buffer` or a [`DeviceRef`] for an [`In<T>`](crate::In), `&mut buffer`
    /// or a [`DeviceMut`] for an [`Out<T>`](crate::Out), a number for a scalar. The kernel,
    /// the stream and every buffer share the context brand `'ctx`, and the scope keeps the
    /// kernel's module and every buffer borrowed until the kernel has run.
    ///
    /// Checked first, each a clear error with no driver call: the configuration (zero
    /// dimensions, more threads per block or more dynamic shared memory than the kernel
    /// allows), and that no `Out` argument overlaps another slice argument. A
    /// configuration with launch attributes (a cluster, a cooperative launch, a priority)
    /// goes through `cuLaunchKernelEx`, its attributes checked too: see
    /// [`LaunchConfig`](crate::LaunchConfig#launch-attributes).
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let module = ctx.load_ptx(include_str!("../kernels/kernels.ptx"))?;
    ///     // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*, size_t).
    ///     let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
    ///     let mut d = ctx.from_slice(&[1.0f32; 8])?;
    ///     let stream = ctx.stream()?;
    ///     let e = stream.scope(|s| {
    ///         let d = s.bind_mut(&mut d);
    ///         // the output overlaps an input: refused before the driver sees it
    ///         s.launch(&add, LaunchConfig::linear(1, 32), (d.slice(1..), d.slice(1..), d.slice(..7)))
    ///     });
    ///     assert!(e.unwrap_err().to_string().contains("overlap"));
    ///     Ok(())
    /// })
    /// # }
    /// ```
    #[inline]
    pub fn launch<P: KernelParams>(
        &'scope self,
        kernel: impl Launch<'scope, 'ctx, P>,
        config: LaunchConfig,
        args: impl KernelArgs<'scope, 'ctx, P>,
    ) -> Result<()> {
        let target = launch::sealed::Launch::target(&kernel);
        launch::check_config(&config, &target)?;
        if config.has_attributes() {
            return self.launch_with_attributes(target, config, args);
        }
        let stream = self.stream.raw();
        launch::sealed::Args::with_params(args, launch::sealed::Crate(()), |spans, params| {
            if let Some((i, j)) = first_overlap(spans) {
                return Err(launch::launch_overlap(spans, i, j));
            }
            self.ordered(spans, target.globals, || {
                // SAFETY: the kernel's declaration (the promise of `Module::kernel`) makes
                // `params` one pointer per C parameter, each to a value of its type,
                // alive for this call; the stream is alive and of the kernel's context
                // (one brand); every argument's memory and the kernel's module stay
                // borrowed until the scope has synchronized the stream; no `Out` argument
                // overlaps another slice argument (checked above); other streams of the
                // scope are ordered around it by `ordered`.
                unsafe {
                    driver::launch_kernel(
                        target.function,
                        config.grid,
                        config.block,
                        config.shared_mem_bytes,
                        stream,
                        params,
                    )
                }
            })
        })
    }

    /// [`StreamScope::launch`] of a configuration with attributes (`cuLaunchKernelEx`):
    /// the attributes are checked first (see
    /// [`LaunchConfig`](crate::LaunchConfig#launch-attributes)).
    #[inline(never)]
    fn launch_with_attributes<P: KernelParams>(
        &'scope self,
        target: launch::Target,
        config: LaunchConfig,
        args: impl KernelArgs<'scope, 'ctx, P>,
    ) -> Result<()> {
        let stream = self.stream.raw();
        let prepared = launch::prepare(&self.launch_cache, self.stream, &target, &config)?;
        launch::sealed::Args::with_params(args, launch::sealed::Crate(()), |spans, params| {
            if let Some((i, j)) = first_overlap(spans) {
                return Err(launch::launch_overlap(spans, i, j));
            }
            self.ordered(spans, target.globals, || {
                // SAFETY: as for `launch` (the declaration's promise makes `params` right
                // for the kernel; stream, kernel and buffers share one brand and stay
                // borrowed until the scope has synchronized; no `Out` overlaps another
                // slice argument; other streams are ordered by `ordered`); the attributes
                // were checked and laid out by `prepare`.
                unsafe { prepared.launch(target.function, &config, stream, params) }
            })
        })
    }

    /// Queues zeroing a fresh allocation of this scope.
    fn zero<T>(&self, buf: DeviceMut<'scope, 'ctx, T>) -> Result<()> {
        if buf.bytes() == 0 {
            return Ok(());
        }
        self.ordered(&[write_span(&buf)], None, || {
            // SAFETY: the allocation's bytes, in stream order after the allocation.
            unsafe { driver::memset_async(buf.ptr, Pattern::D8(0), buf.bytes(), self.stream.raw()) }
        })
    }

    /// As [`StreamScope::alloc`], from `pool` (a pool of this context: the brand says so):
    /// freed in stream order when the scope ends. On a preallocated stream of
    /// [`with_phases`](crate::with_phases) this and [`alloc_zeroed_in`](Self::alloc_zeroed_in)
    /// are the only device memory the run phase allocates: scratch bounded by a pool made
    /// in setup.
    ///
    /// # Safety
    /// As for [`StreamScope::alloc`].
    pub unsafe fn alloc_in<T: DeviceCopy>(
        &'scope self,
        pool: &'scope MemoryPool<'ctx>,
        len: usize,
    ) -> Result<DeviceMut<'scope, 'ctx, T>> {
        // SAFETY: the caller's promise.
        unsafe { self.alloc_from(Some(pool.raw()), len) }
    }

    /// As [`StreamScope::alloc_zeroed`], from `pool`: freed in stream order when the scope
    /// ends (see [`alloc_in`](Self::alloc_in)).
    pub fn alloc_zeroed_in<T: DeviceCopy>(
        &'scope self,
        pool: &'scope MemoryPool<'ctx>,
        len: usize,
    ) -> Result<DeviceMut<'scope, 'ctx, T>> {
        // SAFETY: zeroed below, as in `alloc_zeroed`.
        let buf = unsafe { self.alloc_in::<T>(pool, len) }?;
        self.zero(buf)?;
        Ok(buf)
    }

    /// # Safety
    /// As for [`StreamScope::alloc`]; `pool` is a live pool of the stream's device.
    unsafe fn alloc_from<T: DeviceCopy>(
        &'scope self,
        pool: Option<CUmemoryPool>,
        len: usize,
    ) -> Result<DeviceMut<'scope, 'ctx, T>> {
        let bytes = memory::checked_byte_len::<T>("StreamScope::alloc", len)?;
        if bytes == 0 {
            return Ok(DeviceMut::new(memory::empty_address::<T>(), len));
        }
        let mut allocations = lock(&self.allocations);
        // room first, so a failed push cannot leak the allocation; 16 at once, so a scope
        // that allocates does not regrow its list allocation by allocation
        let room = if allocations.list.capacity() == 0 {
            16
        } else {
            1
        };
        allocations.list.reserve(room);
        let pool = match pool {
            Some(pool) => Some(pool),
            None => match allocations.pool {
                Some(known) => known.map(|p| p as CUmemoryPool),
                None => {
                    let found = self.with_stream_context(|| {
                        crate::memory::pool::crate_pool(driver::ctx_get_device()?)
                    })?;
                    allocations.pool = Some(found.map(|p| p as usize));
                    found
                }
            },
        };
        let allocation = match pool {
            // SAFETY: a live pool of the stream's device; the stream is alive (borrowed for
            // 'env).
            Some(pool) => Allocation::Pool(
                unsafe { driver::mem_alloc_from_pool_async(bytes, pool, self.stream.raw()) }
                    .map_err(|e| crate::memory::pool::exhausted(e, bytes))?,
            ),
            None => Allocation::Plain(self.with_stream_context(|| driver::mem_alloc(bytes))?),
        };
        let ptr = match allocation {
            Allocation::Pool(p) | Allocation::Plain(p) => p,
        };
        allocations.list.push(allocation);
        if let Some((lanes, me)) = self.lanes {
            lanes.allocated(me, ptr, bytes as u64);
        }
        Ok(DeviceMut::new(ptr, len))
    }

    /// Runs `op` with the stream's context current (the fallback allocations without memory
    /// pools are made and freed in it, whatever context is current).
    fn with_stream_context<T>(&self, op: impl FnOnce() -> Result<T>) -> Result<T> {
        // SAFETY: the stream is alive (borrowed for 'env).
        unsafe { in_stream_context(self.stream.raw(), op) }
    }

    /// Frees the scope's allocations, once every stream of the scope is idle: pool memory
    /// in stream order (`cuMemFreeAsync`), fallback memory with `cuMemFree`. Returns the
    /// first error. Where every stream `synchronized` without an error, first gives the
    /// vectors [`StreamScope::copy_to_vec`] filled their new lengths.
    fn free_allocations(&self, synchronized: bool) -> Result<()> {
        let stream = self.stream.raw();
        let (mut first_error, mut failed) = (None, 0usize);
        let mut allocations = lock(&self.allocations);
        for grown in std::mem::take(&mut allocations.grown) {
            if synchronized {
                // SAFETY: every stream of the scope is idle, so the copy into the spare
                // capacity is complete (a copy the driver failed made the wait fail); the
                // vector is still borrowed by the scope, alive and unmoved.
                unsafe { (grown.set_len)(grown.vec, grown.len) };
            }
        }
        for a in std::mem::take(&mut allocations.list) {
            let freed = match a {
                // SAFETY: allocated by this scope from the stream's pool; every stream that
                // could use it is idle, and no handle to it outlives the scope.
                Allocation::Pool(p) => unsafe { driver::mem_free_async(p, stream) },
                // SAFETY: as above; freed in the context it was allocated in.
                Allocation::Plain(p) => self.with_stream_context(|| unsafe { driver::mem_free(p) }),
            };
            if let Err(e) = freed {
                failed += 1;
                first_error.get_or_insert(e);
            }
        }
        match (first_error, failed) {
            (None, _) => Ok(()),
            (Some(e), 1) => Err(e),
            // one error for all: after a sticky error every free fails the same way
            (Some(e), n) => Err(Error::with_detail(
                e.call(),
                e.code(),
                format!(
                    "{}{n} allocations of the scope could not be freed, this the first",
                    e.detail().map(|d| format!("{d}; ")).unwrap_or_default()
                ),
            )),
        }
    }
}

/// The scope methods that allocate from the crate's pool: for streams of a plain context
/// only (a preallocated stream of [`with_phases`](crate::with_phases) has none of them).
impl<'scope, 'env, 'ctx> StreamScope<'scope, 'env, 'ctx, Dynamic> {
    /// Allocates `len` elements in stream order and queues zeroing them; freed in stream
    /// order when the scope ends. Every stream of the scope sees zeros: in a multi-stream
    /// scope, other streams wait for the zeroing before they touch the memory. See
    /// [`StreamScope::alloc`].
    pub fn alloc_zeroed<T: DeviceCopy>(
        &'scope self,
        len: usize,
    ) -> Result<DeviceMut<'scope, 'ctx, T>> {
        // SAFETY: zeroed below, in stream order, before anything of the scope reads it
        // (on this stream by order, on others because the allocation is recorded as this
        // stream's write, so they wait for it).
        let buf = unsafe { self.alloc::<T>(len) }?;
        self.zero(buf)?;
        Ok(buf)
    }

    /// Allocates `src.len()` elements in stream order and queues copying `src` into them:
    /// [`alloc`](StreamScope::alloc) and [`copy_from_host`](StreamScope::copy_from_host) in
    /// one safe call, since nothing can read the memory before the copy has written it.
    /// `src` stays borrowed until the scope has synchronized.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let host = vec![7u32; 1000];
    ///     let mut back = Vec::new();
    ///     ctx.stream()?.scope(|s| {
    ///         let d = s.alloc_from_host(&host)?;
    ///         s.copy_to_vec(&mut back, d)
    ///     })?;
    ///     assert_eq!(back, host);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn alloc_from_host<T: DeviceCopy>(
        &'scope self,
        src: &'scope [T],
    ) -> Result<DeviceMut<'scope, 'ctx, T>> {
        // SAFETY: every element is written by the copy queued next, in stream order, before
        // anything of the scope can read it (other streams wait for this stream's writes);
        // if queueing the copy fails, the handle is never returned.
        let buf = unsafe { self.alloc::<T>(src.len()) }?;
        self.copy_from_host(buf, src)?;
        Ok(buf)
    }

    /// Allocates `len` elements in stream order from the crate's pool of the device
    /// (`cuMemAllocFromPoolAsync`, see [`pool`](crate::memory::pool); about a microsecond with the
    /// free, where `cuMemAlloc` and `cuMemFree` take several), without initialising them.
    /// The memory lives until the scope ends: after the final synchronization it is freed in
    /// stream order (`cuMemFreeAsync`). On a device without memory pools
    /// (`MEMORY_POOLS_SUPPORTED` is 0) it comes from `cuMemAlloc` in the stream's context
    /// instead, freed after the synchronization; `CUDA_BRAND_NO_MEMORY_POOLS=1` forces that
    /// path (for tests). In a
    /// multi-stream scope the allocation counts as a write on this stream: other streams
    /// wait for it before they touch the memory.
    ///
    /// # Safety
    /// The contents are stale bytes until written (valid values for `DeviceCopy` types,
    /// but possibly another allocation's data).
    pub unsafe fn alloc<T: DeviceCopy>(
        &'scope self,
        len: usize,
    ) -> Result<DeviceMut<'scope, 'ctx, T>> {
        // SAFETY: the caller's promise.
        unsafe { self.alloc_from(None, len) }
    }
}

/// What an access touches: device memory, or the globals of one module (written by a
/// [`KernelMut`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Key {
    Memory,
    Globals,
}

/// The order book of a multi-stream scope: the accesses queued so far (which lane, which
/// of its operations, which range, written or read), and for each lane how far it has
/// waited for each other lane. Operations are counted per lane from 1.
///
/// Before an operation on lane `me`, every earlier access by another lane that overlaps
/// one of its accesses and conflicts with it (either is a write) is waited for. After it,
/// its accesses are recorded; a write drops the records it covers (anything ordered after
/// it is ordered after them too: it waited for them, or ran after them on its own lane),
/// a read drops the same lane's reads it covers. So the book stays as small as the
/// distinct ranges in flight.
pub(crate) struct Lanes {
    state: Mutex<LaneState>,
}

struct LaneState {
    lanes: Vec<Lane>,
    records: Vec<Record>,
}

// SAFETY: stream and event handles, which the driver lets any thread use, plus numbers; the
// scope that holds the book stays on its thread anyway (`ScopesStayOnTheirThread`): this
// only keeps raw pointers out of the compiler's explanation of that rule.
unsafe impl Send for LaneState {}

struct Lane {
    stream: CUstream,
    /// Operations queued so far.
    ops: u64,
    /// This lane's event (made on first need) and the op count when it was last recorded.
    event: Option<CUevent>,
    recorded: u64,
    /// For each lane, the op count of it this lane has already waited for.
    waited: Vec<u64>,
}

#[derive(Debug, PartialEq, Eq)]
struct Record {
    key: Key,
    start: u64,
    end: u64,
    lane: usize,
    op: u64,
    write: bool,
}

/// One access of an operation: `(key, start, end, write)`.
type Access = (Key, u64, u64, bool);

impl Lanes {
    pub(crate) fn new(streams: impl ExactSizeIterator<Item = CUstream>) -> Self {
        let n = streams.len();
        let lanes = streams
            .map(|stream| Lane {
                stream,
                ops: 0,
                event: None,
                recorded: 0,
                waited: vec![0; n],
            })
            .collect();
        Lanes {
            state: Mutex::new(LaneState {
                lanes,
                records: Vec::new(),
            }),
        }
    }

    /// Records a stream-ordered allocation of `[start, start + bytes)` on lane `me`: an
    /// operation of that lane that writes the memory first.
    fn allocated(&self, me: usize, start: u64, bytes: u64) {
        let mut state = lock(&self.state);
        state.lanes[me].ops += 1;
        let op = state.lanes[me].ops;
        state.record(me, op, (Key::Memory, start, start + bytes, true));
    }

    /// Runs `op` on lane `me` after the waits its accesses need, then records them.
    fn run(
        &self,
        me: usize,
        spans: &[Span],
        globals: Option<usize>,
        op: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let mut state = lock(&self.state);
        let accesses = spans
            .iter()
            .filter(|s| s.bytes != 0)
            .map(|s| (Key::Memory, s.start, s.start + s.bytes, s.write))
            .chain(globals.map(|m| (Key::Globals, m as u64, m as u64 + 1, true)));
        let needs: Vec<(usize, u64)> = accesses
            .clone()
            .flat_map(|a| state.conflicts(me, a))
            .collect();
        for (lane, op) in needs {
            state.wait_for(me, lane, op)?;
        }
        let done = op();
        // Recorded even when the driver returned an error: the error may be an earlier
        // asynchronous operation's, and this one may still have been queued.
        state.lanes[me].ops += 1;
        let now = state.lanes[me].ops;
        for access in accesses {
            state.record(me, now, access);
        }
        done
    }

    /// Destroys the lanes' events (after every stream is idle).
    pub(crate) fn destroy_events(&self) -> Result<()> {
        let mut first = Ok(());
        for lane in &mut lock(&self.state).lanes {
            if let Some(e) = lane.event.take() {
                // SAFETY: created by `wait_for`; every stream of the scope is synchronized,
                // so no record or wait of it is pending.
                first = teardown::keep_both(first, unsafe { driver::event_destroy(e) });
            }
        }
        first
    }
}

impl LaneState {
    /// The `(lane, op)` of every earlier access by another lane that conflicts with `a`.
    fn conflicts(&self, me: usize, a: Access) -> impl Iterator<Item = (usize, u64)> + '_ {
        let (key, start, end, write) = a;
        self.records
            .iter()
            .filter(move |r| {
                r.key == key && r.lane != me && (write || r.write) && r.start < end && start < r.end
            })
            .map(|r| (r.lane, r.op))
    }

    fn record(&mut self, me: usize, op: u64, a: Access) {
        let (key, start, end, write) = a;
        self.records.retain(|r| {
            let covered = r.key == key && start <= r.start && r.end <= end;
            !(covered && (write || (!r.write && r.lane == me)))
        });
        self.records.push(Record {
            key,
            start,
            end,
            lane: me,
            op,
            write,
        });
    }

    /// Makes lane `me` wait for lane `other`'s operations up to `op`.
    fn wait_for(&mut self, me: usize, other: usize, op: u64) -> Result<()> {
        if self.lanes[me].waited[other] >= op {
            return Ok(());
        }
        let stream = self.lanes[other].stream;
        let event = match self.lanes[other].event {
            Some(e) => e,
            None => {
                // The event belongs to the stream's context: create it there, without
                // timing (`CU_EVENT_DISABLE_TIMING`). SAFETY: the stream is alive
                // (borrowed by the scope).
                let e = unsafe { in_stream_context(stream, || driver::event_create(0x2)) }?;
                self.lanes[other].event = Some(e);
                e
            }
        };
        if self.lanes[other].recorded < op {
            // SAFETY: event and stream are alive and of one context.
            unsafe { driver::event_record(event, stream) }?;
            self.lanes[other].recorded = self.lanes[other].ops;
        }
        // SAFETY: both alive, one context; the wait captures the event's latest record.
        unsafe { driver::stream_wait_event(self.lanes[me].stream, event) }?;
        self.lanes[me].waited[other] = self.lanes[other].recorded;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn w(start: u64, bytes: u64) -> Span {
        Span {
            start,
            bytes,
            write: true,
        }
    }

    fn r(start: u64, bytes: u64) -> Span {
        Span {
            start,
            bytes,
            write: false,
        }
    }

    #[test]
    fn scope_views_slice_like_slices() {
        let v: DeviceMut<'static, 'static, u32> = DeviceMut::new(0x1000, 10);
        let part = v.slice(2..5);
        assert_eq!((part.device_ptr(), part.len()), (0x1008, 3));
        assert_eq!(part.slice(1..).device_ptr(), 0x100c);
        assert_eq!(v.as_ref().slice(..=9).len(), 10);
        assert!(v.try_slice(..11).is_none());
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = 7..3;
        assert!(v.try_slice(reversed).is_none());
        assert!(v.slice(10..).is_empty());
        let panicked = std::panic::catch_unwind(|| v.slice(3..12)).unwrap_err();
        assert_eq!(
            panicked.downcast_ref::<String>().unwrap(),
            "DeviceMut::slice: range out of bounds for 10 elements"
        );
        // zero-sized elements: any count, no bytes
        let z: DeviceRef<'static, 'static, ()> =
            DeviceRef::new(memory::empty_address::<()>(), usize::MAX);
        assert_eq!(z.slice(5..).len(), usize::MAX - 5);
        assert_eq!(z.slice(5..).device_ptr(), memory::empty_address::<()>());
    }

    /// The order book's decisions, without a GPU: which earlier accesses each new access
    /// must wait for, and what stays recorded.
    #[test]
    fn the_order_book_finds_exactly_the_conflicting_accesses() {
        let lanes = Lanes::new([std::ptr::null_mut(); 3].into_iter());
        let no_op = || Ok(());
        // lane 1 allocates [0x2000, 0x2100): its first operation, a write
        lanes.allocated(1, 0x2000, 0x100);
        // lanes 0 and 2 write disjoint halves of [0x1000, 0x1100): no conflict, no wait
        lanes.run(0, &[w(0x1000, 0x80)], None, no_op).unwrap();
        lanes.run(2, &[w(0x1080, 0x80)], None, no_op).unwrap();
        {
            let state = lock(&lanes.state);
            assert_eq!(
                state
                    .conflicts(1, (Key::Memory, 0x1000, 0x1100, false))
                    .count(),
                2
            );
            assert_eq!(
                state
                    .conflicts(0, (Key::Memory, 0x1000, 0x1080, false))
                    .count(),
                0,
                "lane 0 reading what it wrote itself waits for nobody"
            );
            assert_eq!(
                state
                    .conflicts(0, (Key::Memory, 0x2000, 0x2004, false))
                    .collect::<Vec<_>>(),
                [(1, 1)],
                "reading lane 1's allocation waits for the allocation"
            );
            // reads never wait for reads
            assert_eq!(
                state
                    .conflicts(0, (Key::Memory, 0x3000, 0x3010, false))
                    .count(),
                0
            );
            // globals are their own namespace
            assert_eq!(
                state
                    .conflicts(0, (Key::Globals, 0x1000, 0x1001, true))
                    .count(),
                0
            );
        }
        // lane 0 reads its half twice: the second read replaces the first
        lanes.run(0, &[r(0x1000, 0x80)], None, no_op).unwrap();
        lanes.run(0, &[r(0x1000, 0x80)], None, no_op).unwrap();
        {
            let state = lock(&lanes.state);
            let reads = state.records.iter().filter(|r| !r.write).count();
            assert_eq!(reads, 1);
            // a write by lane 2 over lane 0's half must wait for lane 0's read and write
            let mut c: Vec<_> = state
                .conflicts(2, (Key::Memory, 0x1000, 0x1080, true))
                .collect();
            c.sort();
            assert_eq!(c, [(0, 1), (0, 3)]);
        }
        // an operation that fails is recorded all the same (it may have been queued)
        let e = lanes.run(0, &[r(0x1000, 4)], None, || {
            Err(Error::new("x", ErrorCode::Unknown))
        });
        assert!(e.is_err());
        assert_eq!(lock(&lanes.state).lanes[0].ops, 4);
        // lane 0 writes the whole range it owns: the records it covers are dropped
        lanes.run(0, &[w(0x1000, 0x80)], None, no_op).unwrap();
        let state = lock(&lanes.state);
        let in_half: Vec<_> = state
            .records
            .iter()
            .filter(|r| r.start >= 0x1000 && r.end <= 0x1080)
            .collect();
        assert_eq!(in_half.len(), 1);
        assert_eq!(
            (in_half[0].lane, in_half[0].op, in_half[0].write),
            (0, 5, true)
        );
    }
}
