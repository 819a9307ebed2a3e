//! Host functions in stream scopes ([`StreamScope::host_fn`], `cuLaunchHostFunc`), and
//! host memory bound to a scope or a capture ([`HostMut`], [`HostRef`]).
//!
//! # A host function is stream work
//!
//! [`StreamScope::host_fn`] queues a Rust closure on the scope's stream: the driver calls it
//! on one of its own threads once the work queued before it has finished, and the work
//! queued after it waits for it to return. The closure may borrow from its environment (it
//! needs no `'static`): it is `FnOnce() + Send + 'scope`, and the scope does not return
//! before the closure has run, for the same reason as every other borrow of a scope (the
//! wait is in [`Stream::scope`](crate::Stream::scope) itself, so `mem::forget` cannot skip
//! it). `Send`, because it runs on the driver's thread.
//!
//! To read what the stream computed, the closure gets host memory in stream order:
//! [`StreamScope::bind_host_mut`] binds a host slice to the scope as a [`HostMut`] (a
//! `Copy` handle, like [`DeviceMut`](crate::DeviceMut) for device memory); the scope's
//! copies write it ([`StreamScope::copy_to_host_view`]) and read it
//! ([`StreamScope::copy_from_host_view`]), and [`StreamScope::host_fn_on`] hands it to a
//! host function as `&mut [T]` when the stream reaches the function: after the copies
//! queued before it, before those queued after it. In a multi-stream scope the lane record
//! orders these accesses across streams like those of device memory.
//!
//! # What the driver forbids, and what the crate does about it
//!
//! * **A host function must not call the CUDA driver** (`cuLaunchHostFunc`: such a call
//!   "may result in `CUDA_ERROR_NOT_PERMITTED`, but this is not required"; it can also
//!   deadlock, a stream waiting for itself). The types cannot forbid it: `Stream`,
//!   `DeviceBuffer` and `SharedContext` are `Send`, so a closure can carry them. So every
//!   entry point of the crate checks a thread-local flag that is set while the crate runs a
//!   host function, and returns an error with `CUDA_ERROR_NOT_PERMITTED` instead of calling
//!   the driver (one thread-local load per driver call, measured in
//!   `bench/benches/graphs.rs`): on the host function's own thread nothing the crate is
//!   asked for reaches the driver, so nothing is queued, copied or run. A value the closure
//!   owns and drops (a `DeviceBuffer` moved in) cannot free its memory there: the free is
//!   refused and the memory stays allocated until its context is destroyed, and the
//!   refusal is reported like any release that fails in `drop`: the teardown of the
//!   buffer's context returns it (`with_context` returns `CUDA_ERROR_NOT_PERMITTED` though
//!   its closure succeeded), and for a `Stream` or an `Event`, which cannot learn their
//!   context there, the next teardown to run, of any context, on any thread, does. Driver
//!   calls made by other code (another crate, raw FFI) are not seen; the rule is the
//!   driver's.
//!   Calls on other threads are not refused: see [below](#host-functions-and-other-threads).
//! * **A panic must not unwind into the driver** (that would unwind through C frames).
//!   The crate catches it, lets the stream go on, and resumes it when the scope returns,
//!   after every stream of the scope has been waited for (as [`std::thread::scope`] does
//!   with a panicked thread). Every scope form does this, because every one ends through
//!   the same function (see [`scope`](crate::scope#what-the-end-of-a-scope-guarantees)):
//!   [`Stream::scope`](crate::Stream::scope), `scope_pair`, `scope_all`, `scope_within`,
//!   `scope_all_within` and the `_and_teardown` forms. A panic of the scope's closure itself wins,
//!   then a panic of a deadline scope's overrun handler; a host function's panic wins over
//!   an `Err` the closure returned and over an error of the scope's end. Of several host
//!   functions that panicked, the first is resumed (in the order of the scope's streams,
//!   then of queueing), the others are forgotten. The output a host function wrote before
//!   it panicked stays written.
//! * **A host function must not wait for work that is not queued before it** (the driver
//!   rule again): it would block its stream, and with it the end of the scope, forever.
//!   That is a deadlock, not undefined behaviour; the crate cannot see it. The next section
//!   says which calls of the crate are such work.
//!
//! Host functions are offered by the scopes of plain streams. The scopes of preallocated
//! streams ([`with_phases`](crate::with_phases)) have none, and a capture offers none
//! ([`graph`](crate::graph)), so no replayed graph runs a host function; a scope opened
//! inside a capture's closure is an ordinary scope, which runs at once.
//!
//! # Host functions and other threads
//!
//! What the crate promises, exactly:
//!
//! * **On the host function's thread** every driver call through the crate is refused
//!   with `CUDA_ERROR_NOT_PERMITTED` (above). Tested: a synchronous fill, a whole scope on
//!   another stream and `SharedContext::enter` called inside a host function return the
//!   error, and nothing they asked for runs.
//! * **On other threads** nothing is refused or checked. A host function may hand work to
//!   another thread (a channel, a pool, `std::thread::scope`), and that thread's calls run
//!   as usual. But while a host function runs, a call that waits for its stream does not
//!   return before the host function has returned, so **a host function that waits for
//!   such a call deadlocks**: the two wait for each other forever. Tested calls that wait,
//!   made on another thread while a host function runs:
//!   - [`Stream::synchronize`](crate::Stream::synchronize) of the host function's stream,
//!     the end of a scope on that stream (it synchronizes the stream), and
//!     [`ContextGuard::synchronize`](crate::ContextGuard::synchronize) (the whole context);
//!   - when the host function's stream was made with
//!     [`StreamFlags::Default`](crate::StreamFlags::Default): the crate's synchronous
//!     copies and fills that cannot use the calling thread's sync stream, which run on the
//!     context's legacy default stream, and that stream waits for every
//!     `StreamFlags::Default` stream of its context: operations on managed or host memory,
//!     on pool memory while the current context has no sync stream of the crate (another
//!     library's, or the crate's own before its first one), with no context of the
//!     memory's device current, or under `CUDA_BRAND_SYNC_WRITES=wait` (the list is
//!     `docs/design/ordering.md`, "Which synchronous operations run on the legacy
//!     stream"). Every other synchronous
//!     operation ([`DeviceSlice::to_vec`](crate::DeviceSlice::to_vec),
//!     [`DeviceSlice::fill`](crate::DeviceSlice::fill), staged bulk copies, ...) runs on
//!     the calling thread's non-blocking sync stream and returns; so does the drop of a
//!     [`DeviceBuffer`](crate::DeviceBuffer) of pool memory (its free is queued, not
//!     waited for). Tested: `to_vec`, a fill, staged copies of 4 MiB both ways and two
//!     drops, each returning while the host function waits for it.
//!
//!   The driver may make more calls wait for it, so a host function must not wait for
//!   these either: freeing memory that is not from a pool (`close` or drop of a
//!   [`DeviceBuffer2D`](crate::DeviceBuffer2D), [`DeviceBuffer3D`](crate::DeviceBuffer3D),
//!   [`ManagedBuffer`](crate::ManagedBuffer) or [`PinnedBuffer`](crate::PinnedBuffer), and
//!   of a [`DeviceBuffer`](crate::DeviceBuffer) on a device without memory pools:
//!   `cuMemFree` and `cuMemFreeHost` "may perform implicit synchronization"), and a scope
//!   on any stream that queues a host function of its own (the driver "may serialize" host
//!   functions of independent streams, so that scope's end may wait for this one).
//!   `tests/graphs.rs` `calls_the_driver_may_make_wait_for_a_running_host_function` prints
//!   which of them waited on the machine it ran on.
//!
//!   Calls that do not wait for the host function's stream return while it runs. Tested:
//!   a whole scope on another non-blocking stream, and, when the host function's stream is
//!   non-blocking (as [`ContextGuard::new_stream`](crate::ContextGuard::new_stream) makes it), the
//!   crate's synchronous copy (`to_vec`).
//! * **Why the crate does not refuse the waiting call.** When the call is made, the crate
//!   could see a synchronous wait behind a host function that is running, but that is
//!   legal and common: the host function returns, then the wait does. Whether the host
//!   function waits for this call in turn depends on what it blocks on (a channel, a lock,
//!   a join), which the crate cannot see; a refusal would refuse the legal case too.
//!
//! The tests are in `tests/graphs/host_fns.rs`; each shows its half without deadlocking:
//! the host function waits for the other thread's call with a timeout.
//!
//! # The closure lives until it has run
//!
//! The closure is placed in a slot of the scope's chunks (4 KiB each, one allocation for
//! many host functions; a closure larger than that gets a chunk of its own size), and the
//! chunks are freed by the scope's end, after the final wait. Each function, when it has
//! returned (or panicked), counts itself done in its chunk, the last thing it touches.
//! Normally the wait returns once the stream is done, so every function has run, and a
//! chunk whose functions all counted themselves done is freed. After an error of the
//! context the driver does not call host functions at all; then the scope, once the stream
//! no longer reports work, marks each function that has not started as abandoned (an
//! atomic state the function checks first if the driver calls it after all), drops those
//! closures without calling them, waits for the functions that started to count themselves
//! done, and keeps that chunk allocated for good, since the driver may still hold the
//! abandoned slots' addresses. So no closure runs after its scope returned, and no chunk is
//! freed while the driver may still call into it.

use std::fmt;
use std::marker::PhantomData;
use std::ops::RangeBounds;

use crate::driver::{self};
use crate::error::Result;
use crate::launch::sealed::Crate;
use crate::memory::{self, DeviceCopy, lengths_match};
use crate::scope::{IntoDeviceMut, IntoDeviceRef, StreamScope};
use crate::span::Span;

/// Host memory that a scope (or a capture) reads and writes in stream order: a `Copy`
/// handle to a host slice bound for the whole scope by [`StreamScope::bind_host_mut`] (or
/// lent to a graph by [`Capture::lend_host`](crate::graph::Capture::lend_host)). Copies
/// write and read it ([`StreamScope::copy_to_host_view`],
/// [`StreamScope::copy_from_host_view`]), and a host function gets it as `&mut [T]` when
/// the stream reaches the function ([`StreamScope::host_fn_on`]).
///
/// The lifetime `'a` is the scope's (or the capture's) brand: the handle cannot leave it
/// or reach another scope, and it stays on the scope's thread.
///
/// # The brand
///
/// `'a` is invariant: host views of two scopes never have one type, so a function that
/// takes two views of one scope cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::HostMut;
///
/// /// Takes two host views of one scope.
/// fn one_scope<'s>(_: HostMut<'s, u32>, _: HostMut<'s, u32>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     let (mut host_a, mut host_b) = (vec![0u32; 4], vec![0u32; 4]);
///     let (stream_a, stream_b) = (ctx.new_stream()?, ctx.new_stream()?);
///     stream_a.scope(|sa| {
///         stream_b.scope(|sb| {
///             // two scopes: does not compile
///             one_scope(sa.bind_host_mut(&mut host_a), sb.bind_host_mut(&mut host_b));
///             Ok(())
///         })
///     })
/// })
/// # }
/// ```
pub struct HostMut<'a, T> {
    ptr: *mut T,
    len: usize,
    /// Invariant in `'a`, the scope's (or capture's) brand: the host memory stays borrowed
    /// until that scope has synchronized, and only that scope orders the operations on it.
    /// Were it covariant, views of two scopes could be shortened to one lifetime and meet
    /// in one helper or collection.
    _scope: PhantomData<fn(&'a ()) -> &'a ()>,
}

/// Host memory that a scope or a capture only reads: the shared counterpart of
/// [`HostMut`] ([`HostMut::into_ref`]); `&slice` works where one is taken.
///
/// # The brand
///
/// `'a` is invariant, as in [`HostMut`]: host views of two scopes never have one type:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::HostRef;
///
/// /// Takes two host views of one scope.
/// fn one_scope<'s>(_: HostRef<'s, u32>, _: HostRef<'s, u32>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     let (mut host_a, mut host_b) = (vec![0u32; 4], vec![0u32; 4]);
///     let (stream_a, stream_b) = (ctx.new_stream()?, ctx.new_stream()?);
///     stream_a.scope(|sa| {
///         stream_b.scope(|sb| {
///             let ra = sa.bind_host_mut(&mut host_a).as_ref();
///             let rb = sb.bind_host_mut(&mut host_b).as_ref();
///             one_scope(ra, rb); // two scopes: does not compile
///             Ok(())
///         })
///     })
/// })
/// # }
/// ```
pub struct HostRef<'a, T> {
    ptr: *const T,
    len: usize,
    /// Invariant in `'a`, the scope's (or capture's) brand, as in `HostMut`.
    _scope: PhantomData<fn(&'a ()) -> &'a ()>,
}

macro_rules! host_view {
    ($name:ident, $ptr:ty) => {
        impl<T> Clone for $name<'_, T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T> Copy for $name<'_, T> {}

        impl<'a, T> $name<'a, T> {
            #[inline]
            pub(crate) fn new(ptr: $ptr, len: usize) -> Self {
                $name {
                    ptr,
                    len,
                    _scope: PhantomData,
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

            /// The host address of the first element.
            #[inline]
            pub fn as_ptr(&self) -> *const T {
                self.ptr
            }

            #[inline]
            pub(crate) fn bytes(&self) -> usize {
                memory::byte_len::<T>(self.len)
            }

            #[inline]
            pub(crate) fn span(&self, write: bool) -> Span {
                Span {
                    start: self.ptr as usize as u64,
                    bytes: self.bytes() as u64,
                    write,
                }
            }

            /// The elements in `range`, as a handle of the same kind.
            ///
            /// # Panics
            /// If the range is out of bounds.
            #[track_caller]
            pub fn slice(self, range: impl RangeBounds<usize>) -> Self {
                match memory::bounds(&range, self.len) {
                    // `wrapping_add`: no reference is made here, and the offset stays
                    // inside (or one past) the slice the handle was made from
                    Some((start, end)) => Self::new(self.ptr.wrapping_add(start), end - start),
                    None => panic!(
                        "{}::slice: range out of bounds for {} elements",
                        stringify!($name),
                        self.len
                    ),
                }
            }
        }

        impl<T> fmt::Debug for $name<'_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:p}, len {})", stringify!($name), self.ptr, self.len)
            }
        }
    };
}
host_view!(HostMut, *mut T);
host_view!(HostRef, *const T);

impl<'a, T> HostMut<'a, T> {
    /// The same memory, for reading: the explicit conversion a copy's source needs
    /// ([`IntoHostRef`] takes only shared views). `HostMut` is `Copy`, so `h` stays usable.
    #[inline]
    pub fn into_ref(self) -> HostRef<'a, T> {
        HostRef::new(self.ptr, self.len)
    }

    #[inline]
    pub(crate) fn as_mut_ptr(&self) -> *mut T {
        self.ptr
    }
}

/// Host memory an operation of a scope or capture may read: `&slice` or a [`HostRef`].
/// Sealed. Only shared views, as for device memory ([`IntoDeviceRef`]):
/// a [`HostMut`] read by a copy is converted explicitly, [`h.into_ref()`](HostMut::into_ref).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not host memory this scope may read",
    label = "expected `&slice` or a `HostRef` of this scope",
    note = "a `Vec` or an array is passed as a slice: `&v[..]`; a `HostMut` `h` as `h.into_ref()`",
    note = "see the guide, chapter 10 (`cuda_brand::guide`)"
)]
pub trait IntoHostRef<'a, T>: sealed::IntoHostRef<'a, T> {}

/// Host memory an operation of a scope or capture may write: `&mut slice` or a
/// [`HostMut`]. Sealed.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not host memory this scope may write",
    label = "expected `&mut slice` or a `HostMut` of this scope",
    note = "a `Vec` or an array is passed as a slice: `&mut v[..]`",
    note = "see the guide, chapter 10 (`cuda_brand::guide`)"
)]
pub trait IntoHostMut<'a, T>: sealed::IntoHostMut<'a, T> {}

pub(crate) mod sealed {
    use super::{HostMut, HostRef};
    use crate::launch::sealed::Crate;

    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot implement `IntoHostRef`: the trait is sealed",
        note = "only slices and the crate's host views are read by GPU work, so that no user type decides which host memory a copy reads",
        note = "see the guide, chapter 8 (`cuda_brand::guide`)"
    )]
    pub trait IntoHostRef<'a, T> {
        fn into_host_ref(self, _by: Crate) -> HostRef<'a, T>;
    }

    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot implement `IntoHostMut`: the trait is sealed",
        note = "only slices and the crate's host views are written by GPU work, so that no user type decides which host memory a copy writes",
        note = "see the guide, chapter 8 (`cuda_brand::guide`)"
    )]
    pub trait IntoHostMut<'a, T> {
        fn into_host_mut(self, _by: Crate) -> HostMut<'a, T>;
    }
}

impl<'a, T> sealed::IntoHostRef<'a, T> for &'a [T] {
    #[inline(always)]
    fn into_host_ref(self, _by: Crate) -> HostRef<'a, T> {
        HostRef::new(self.as_ptr(), self.len())
    }
}
impl<'a, T> IntoHostRef<'a, T> for &'a [T] {}
impl<'a, T> sealed::IntoHostRef<'a, T> for HostRef<'a, T> {
    #[inline(always)]
    fn into_host_ref(self, _by: Crate) -> HostRef<'a, T> {
        self
    }
}
impl<'a, T> IntoHostRef<'a, T> for HostRef<'a, T> {}
impl<'a, T> sealed::IntoHostMut<'a, T> for &'a mut [T] {
    #[inline(always)]
    fn into_host_mut(self, _by: Crate) -> HostMut<'a, T> {
        HostMut::new(self.as_mut_ptr(), self.len())
    }
}
impl<'a, T> IntoHostMut<'a, T> for &'a mut [T] {}
impl<'a, T> sealed::IntoHostMut<'a, T> for HostMut<'a, T> {
    #[inline(always)]
    fn into_host_mut(self, _by: Crate) -> HostMut<'a, T> {
        self
    }
}
impl<'a, T> IntoHostMut<'a, T> for HostMut<'a, T> {}

mod slots;
#[allow(unused_imports)]
pub(crate) use slots::HostFns;

/// A host pointer handed to a host function on the driver's thread.
struct SendPtr<T>(*mut T);

// SAFETY: the memory is a `&mut [T]` that the scope holds exclusively (a `HostMut`), and
// `T: Send`; the host function is its only user while it runs (stream order).
unsafe impl<T: Send> Send for SendPtr<T> {}

impl<T> SendPtr<T> {
    fn into_inner(self) -> *mut T {
        self.0
    }
}

impl<'scope, 'env, 'ctx> StreamScope<'scope, 'env, 'ctx> {
    /// Queues `f` on the scope's stream (`cuLaunchHostFunc`): the driver calls it on one of
    /// its threads once the work queued before it has finished, and the work queued after it
    /// waits for it. It may borrow from its environment: the scope does not return before it
    /// has run. See the [module documentation](crate::scope::host_fn) for its rules: it must not
    /// call the driver (the crate's calls made on its thread return
    /// `CUDA_ERROR_NOT_PERMITTED`), and its panic is resumed when the scope returns, by
    /// every scope form.
    ///
    /// Calls on other threads are not refused, and it must not wait for one that waits for
    /// its stream: such a call does not return before the host function does, so the two
    /// deadlock. Those calls are `synchronize` of its stream or context, the end of a scope
    /// on its stream, and, when its stream is a [`StreamFlags::Default`](crate::StreamFlags)
    /// stream, the crate's synchronous copies and fills that cannot use the calling
    /// thread's sync stream (managed memory, a context with no sync stream of the crate's:
    /// they run on the legacy default stream, which waits for it); the driver may also make
    /// frees of memory not from a pool, and scopes that queue host functions of their own,
    /// wait for it. See [Host
    /// functions and other threads](crate::scope::host_fn#host-functions-and-other-threads).
    ///
    /// ```no_run
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let mut buf = ctx.zeroed::<u32>(1 << 20)?;
    ///     let done = AtomicUsize::new(0); // borrowed, not 'static
    ///     ctx.new_stream()?.scope(|s| {
    ///         s.fill(&mut buf, 7)?;
    ///         s.host_fn(|| {
    ///             done.fetch_add(1, Ordering::Relaxed); // after the fill
    ///         })
    ///     })?;
    ///     assert_eq!(done.load(Ordering::Relaxed), 1);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn host_fn<F>(&'scope self, f: F) -> Result<()>
    where
        F: FnOnce() + Send + 'scope,
    {
        let stream = self.stream().raw();
        self.ordered(&[], None, || {
            // SAFETY: the stream is alive (borrowed for 'env); the scope finishes its host
            // functions at its end, after the final wait, while `'scope` (which `f` outlives)
            // is still alive.
            unsafe { self.host_fns.queue(stream, f) }
        })
    }

    /// Queues `f` on the scope's stream with `host` lent to it as `&mut [T]` when the stream
    /// reaches it: after the copies queued before it (say, a
    /// [`copy_to_host_view`](StreamScope::copy_to_host_view) of a kernel's result), before
    /// those queued after it. Otherwise as [`StreamScope::host_fn`].
    ///
    /// ```no_run
    /// use std::sync::Mutex;
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let mut dev = ctx.zeroed::<u32>(4)?;
    ///     let mut host = ctx.pinned_zeroed::<u32>(4)?;
    ///     let seen = Mutex::new(Vec::new());
    ///     ctx.new_stream()?.scope(|s| {
    ///         let (d, h) = (s.bind_mut(&mut dev), s.bind_host_mut(&mut host));
    ///         for step in 1..=3u32 {
    ///             s.fill(d, step)?;
    ///             s.copy_to_host_view(h, d.into_ref())?;
    ///             s.host_fn_on(h, |values| seen.lock().unwrap().push(values[0]))?;
    ///         }
    ///         Ok(())
    ///     })?;
    ///     assert_eq!(*seen.lock().unwrap(), [1, 2, 3]); // each step's result, in order
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn host_fn_on<T, F>(&'scope self, host: HostMut<'scope, T>, f: F) -> Result<()>
    where
        T: Send,
        F: FnOnce(&mut [T]) + Send + 'scope,
    {
        let stream = self.stream().raw();
        let (ptr, len) = (SendPtr(host.as_mut_ptr()), host.len());
        let call = move || {
            let ptr = ptr.into_inner(); // the whole `SendPtr` moves in, not its field
            // SAFETY: `ptr..ptr + len` is a `&'scope mut [T]` bound to this scope (a
            // `HostMut`), so only the scope's operations touch it until the scope returns;
            // they are ordered around this function (stream order, and the lane record across
            // streams), so nothing else accesses it while the function runs.
            f(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
        };
        self.ordered(&[host.span(true)], None, || {
            // SAFETY: as in `host_fn`.
            unsafe { self.host_fns.queue(stream, call) }
        })
    }

    /// Binds a host slice (pageable or pinned) to the scope: the returned handle is `Copy`,
    /// so several copies and host functions of the scope can use it, in stream order, while
    /// the host cannot touch it until the scope has returned.
    #[inline]
    pub fn bind_host_mut<T>(&'scope self, host: &'scope mut [T]) -> HostMut<'scope, T> {
        HostMut::new(host.as_mut_ptr(), host.len())
    }

    /// Queues a copy of `src` into the bound host memory `dst` (`cuMemcpyDtoHAsync`), for a
    /// host function queued after it ([`StreamScope::host_fn_on`]).
    ///
    /// # Errors
    /// [`Invalid::LengthMismatch`](crate::Invalid::LengthMismatch) if the lengths differ (before any
    /// driver call).
    pub fn copy_to_host_view<T: DeviceCopy>(
        &'scope self,
        dst: HostMut<'scope, T>,
        src: impl IntoDeviceRef<'scope, 'ctx, T>,
    ) -> Result<()> {
        let src = crate::scope::sealed::IntoRef::into_ref(src, Crate(()));
        lengths_match("copy_to_host_view", dst.len(), src.len())?;
        if dst.bytes() == 0 {
            return Ok(());
        }
        let spans = [
            dst.span(true),
            device_span(src.device_ptr(), dst.bytes(), false),
        ];
        self.ordered(&spans, None, || {
            // SAFETY: same lengths; `dst` is host memory the scope holds exclusively until it
            // returns, `src` device memory borrowed as long; any bytes are a valid `T`.
            unsafe {
                driver::memcpy_dtoh_async(
                    dst.as_mut_ptr().cast(),
                    src.device_ptr(),
                    dst.bytes(),
                    self.stream().raw(),
                )
            }
        })
    }

    /// Queues a copy of the host memory `src` (a [`HostRef`] of the scope, `h.into_ref()`
    /// of a [`HostMut`] `h`, or a slice) into `dst` (`cuMemcpyHtoDAsync`), for data a host function queued before it
    /// wrote.
    ///
    /// # Errors
    /// [`Invalid::LengthMismatch`](crate::Invalid::LengthMismatch) if the lengths differ (before any
    /// driver call).
    pub fn copy_from_host_view<T: DeviceCopy>(
        &'scope self,
        dst: impl IntoDeviceMut<'scope, 'ctx, T>,
        src: impl IntoHostRef<'scope, T>,
    ) -> Result<()> {
        let dst = crate::scope::sealed::IntoMut::into_mut(dst, Crate(()));
        let src = sealed::IntoHostRef::into_host_ref(src, Crate(()));
        lengths_match("copy_from_host_view", dst.len(), src.len())?;
        if src.bytes() == 0 {
            return Ok(());
        }
        let spans = [
            device_span(dst.device_ptr(), src.bytes(), true),
            src.span(false),
        ];
        self.ordered(&spans, None, || {
            // SAFETY: same lengths; both ranges borrowed (the host range unmodified) until
            // the scope has synchronized; the stream is alive.
            unsafe {
                driver::memcpy_htod_async(
                    dst.device_ptr(),
                    src.as_ptr().cast(),
                    src.bytes(),
                    self.stream().raw(),
                )
            }
        })
    }
}

#[inline(always)]
fn device_span(start: u64, bytes: usize, write: bool) -> Span {
    Span {
        start,
        bytes: bytes as u64,
        write,
    }
}

#[cfg(test)]
mod tests;
