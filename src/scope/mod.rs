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
//! [`Stream::scope_all`] (and [`Stream::scope_pair`] for two) opens one scope over several
//! streams: the closure gets one [`StreamScope`] per stream, sharing one `'scope`, so a view
//! bound (or allocated) on one stream can be used on another. Then the crate orders them:
//! it keeps an lane record of the ranges each stream's operations have written and read
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
//! [`Stream::scope_pair`], [`Stream::scope_all`], the `_and_teardown` forms built on
//! them, the scopes of preallocated streams, and the deadline forms
//! ([`Stream::scope_within`], [`Stream::scope_all_within`], which only add a bounded wait
//! before the end). After the waits, the scope finishes its host functions ([`host_fn`])
//! and frees what it allocated. Then a panic of the closure goes on; or else a panic of a deadline
//! scope's overrun handler is resumed; or else the first panic of a host function of the
//! scope; or else the scope returns the closure's result.

// The rooms: `StreamScope` and its markers here; `run.rs` (opening and ending a scope),
// `views.rs`, `copies.rs`, `shaped.rs` (2D and 3D copies), `launch.rs`, `alloc.rs`,
// `lanes.rs` (the lane record of several streams), `deadline.rs`, `host_fn/`.
mod alloc;
mod copies;
pub mod deadline;
pub mod host_fn;
mod lanes;
mod launch;
mod run;
mod shaped;
mod views;

use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::context::{Dynamic, StreamKind};
use crate::driver::CUdeviceptr;
use crate::error::Result;
use crate::launch::{KernelMut, LaunchCache, ScopedKernel};
use crate::memory::DeviceSlice;
use crate::span::Span;
use crate::span::Touched;
use crate::stream::Stream;
use crate::synchronous;

#[doc(inline)]
pub use host_fn::{HostMut, HostRef, IntoHostMut, IntoHostRef};
pub(crate) use lanes::Lanes;
pub(crate) use run::{OpenScopes, ScopeEnd, run_scope};
#[doc(inline)]
pub use views::{DeviceMut, DeviceRef, IntoDeviceMut, IntoDeviceRef};

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
///     let stream = ctx.new_stream()?;
///     let mut buf = ctx.zeroed::<u32>(1024)?;
///     let mut host = vec![0u32; 1024];
///     stream.scope(|s| {
///         let d = s.bind_mut(&mut buf); // one buffer, written by two operations in order
///         s.fill(d, 7)?;
///         s.copy_to_host(&mut host, d.into_ref())
///     })?; // synchronized: `host` is complete, `buf` is free again
///     assert!(host.iter().all(|&x| x == 7));
///     Ok(())
/// })
/// # }
/// ```
///
/// # The brand
///
/// A scope carries three invariant lifetimes: `'env`, the borrow of its stream; `'ctx`, its
/// stream's brand ([`Stream`]): scopes of two contexts never have one type, even when a
/// function leaves their other lifetimes free:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::StreamScope;
///
/// /// Takes two scopes of one context (of any streams).
/// fn one_context<'ctx>(_: &StreamScope<'_, '_, 'ctx>, _: &StreamScope<'_, '_, 'ctx>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let stream_a = a.new_stream()?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let stream_b = b.new_stream()?;
///         stream_a.scope(|sa| {
///             stream_b.scope(|sb| {
///                 one_context(sa, sb); // two contexts: does not compile
///                 Ok(())
///             })
///         })
///     })
/// })
/// # }
/// ```
///
/// `'scope` cannot shrink, as in `std::thread::Scope`: every operation borrows what it
/// touches for all of `'scope`, until the scope has synchronized its stream, so the closure
/// cannot lend it a local that dies before the scope ends (were `'scope` covariant, this
/// would compile, and the GPU would write `host` after it is freed):
///
/// ```compile_fail,E0597
/// use cuda_brand::prelude::*;
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     let (stream, buf) = (ctx.new_stream()?, ctx.zeroed::<u32>(4)?);
///     stream.scope(|s| {
///         let mut host = vec![0u32; 4];
///         s.copy_to_host(&mut host, &buf) // `host` does not live long enough
///     }) // the copy has finished only here
/// })
/// # }
/// ```
pub struct StreamScope<'scope, 'env: 'scope, 'ctx, K: StreamKind = Dynamic> {
    /// The scope's `'ctx` is its stream's: a shared reference is covariant only in its own
    /// lifetime `'env`, and `Stream` is invariant in `'ctx`, so the scope is too.
    stream: &'env Stream<'ctx, K>,
    allocations: Mutex<Allocations>,
    /// What launches with attributes looked up (`launch/attributes.rs`).
    launch_cache: Mutex<LaunchCache>,
    /// The shared lane record of a multi-stream scope, and this stream's place in it.
    lanes: Option<(&'scope Lanes, usize)>,
    /// The host functions queued on the stream (`host_fn/`), finished at the scope's end.
    pub(crate) host_fns: host_fn::HostFns,
    /// Invariance over `'scope`, so that `'scope` cannot shrink (as in
    /// `std::thread::Scope`): an operation borrows what it touches for `'scope`, and the
    /// scope synchronizes its stream only at its end. Were it covariant, the closure could
    /// shorten the `'scope` of its `&StreamScope` and lend an operation a local of its own
    /// body, freed while the stream still copies into it (the second `compile_fail` test of
    /// the type's documentation).
    _scope: PhantomData<&'scope mut &'scope ()>,
    /// Invariance over `'env` (the borrow of the stream), as in `std::thread::Scope`: the
    /// scope's type names exactly the borrow it was opened with.
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

pub(crate) mod sealed {
    use super::{DeviceMut, DeviceRef};
    use crate::launch::sealed::Crate;

    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot implement `IntoDeviceMut`: the trait is sealed",
        note = "only a scope makes write handles (`bind_mut`, `alloc_zeroed`), and `&mut buffer` is one for a single use, so that no user type decides which memory GPU work writes",
        note = "see the guide, chapter 8 (`cuda_brand::guide`)"
    )]
    pub trait IntoMut<'scope, 'ctx, T> {
        fn into_mut(self, _by: Crate) -> DeviceMut<'scope, 'ctx, T>;
    }
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot implement `IntoDeviceRef`: the trait is sealed",
        note = "only the crate's buffers and views can be read by GPU work, so that no user type decides which memory it reads",
        note = "see the guide, chapter 8 (`cuda_brand::guide`)"
    )]
    pub trait IntoRef<'scope, 'ctx, T> {
        fn into_ref(self, _by: Crate) -> DeviceRef<'scope, 'ctx, T>;
    }
}

impl<'scope, 'env, 'ctx, K: StreamKind> StreamScope<'scope, 'env, 'ctx, K> {
    /// Opens a scope on `stream`: refused (`NotPermitted`) for a partition's stream on
    /// another thread than the partition's (`context::confined`), so that every operation
    /// of the scope (which stays on its thread) is made on the partition's thread.
    pub(crate) fn open(
        stream: &'env Stream<'ctx, K>,
        lanes: Option<(&'scope Lanes, usize)>,
    ) -> Result<Self> {
        stream.on_its_thread("Stream::scope")?;
        Ok(StreamScope {
            stream,
            allocations: Mutex::new(Allocations::default()),
            launch_cache: Mutex::new(LaunchCache::default()),
            lanes,
            host_fns: host_fn::HostFns::new(),
            _scope: PhantomData,
            _env: PhantomData,
            _thread: PhantomData,
        })
    }

    /// The scope's stream.
    #[inline]
    pub fn stream(&self) -> &'env Stream<'ctx, K> {
        self.stream
    }

    /// Whether this scope is one of the streams of a multi-stream scope
    /// ([`Stream::scope_pair`], [`Stream::scope_all`]), whose operations go through the order
    /// book.
    #[inline]
    #[cfg_attr(not(feature = "nccl"), allow(dead_code))] // used by the `nccl` feature
    pub(crate) fn is_multi_stream(&self) -> bool {
        self.lanes.is_some()
    }

    /// Runs `op`, one operation on this scope's stream touching `spans`, after the waits a
    /// multi-stream scope needs (none for a scope of one stream), and records it.
    ///
    /// Every operation of a scope (copies, fills, launches, graph launches, library calls,
    /// NCCL, host functions) comes here, so this is where the stream first waits for the
    /// pending synchronous operations on the memory the operation touches
    /// (`crate::synchronous`): made before the scope opened or while it is open (into memory
    /// the scope binds later). `spans` names that memory; an operation that names none (a
    /// graph launch) waits for every pending one. With none pending, one atomic load.
    #[inline(always)]
    pub(crate) fn ordered(
        &self,
        spans: &[Span],
        globals: Option<usize>,
        op: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        if !synchronous::is_settled() {
            self.wait_for_sync_writes(spans)?;
        }
        match self.lanes {
            None => op(),
            Some((lanes, me)) => lanes.run(me, spans, globals, op),
        }
    }

    /// Makes the stream wait for the pending synchronous operations that an operation
    /// touching `spans` conflicts with (the slow path of [`ordered`](StreamScope::ordered)).
    #[cold]
    #[inline(never)]
    fn wait_for_sync_writes(&self, spans: &[Span]) -> Result<()> {
        // SAFETY: the scope borrows its stream, which is alive.
        unsafe { synchronous::stream_after_writes(self.stream.raw(), Touched::named(spans)) }
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
}
