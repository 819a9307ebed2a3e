//! CUDA graphs: capture work once ([`ContextGuard::capture`], a [`Capture`]), instantiate it
//! ([`Graph::instantiate`], an [`ExecGraph`]), and replay it on any stream of the context,
//! inside a scope, any number of times ([`StreamScope::launch_graph`]).
//!
//! # What goes wrong in C
//!
//! An instantiated graph holds plain device and host pointers. Nothing stops the program
//! from freeing a buffer the graph writes, allocating again (often at the same address), and
//! launching the graph, which then writes the new allocation, or from reading a buffer while
//! a replay is still writing it. The guide's chapter 10 shows it (`docs/c/graph_freed_buffer.c`).
//!
//! # The rules, and why they hold
//!
//! A capture is a closure, `ctx.capture(|g| ...)`, and what it produces is a
//! [`Graph<'g, 'ctx>`](Graph): `'ctx` is the context's brand, `'g` the length of the borrows
//! of everything the captured work touches.
//!
//! * **A graph holds its memory.** Every operation of a capture borrows what it touches
//!   (buffers, host slices, kernels and so their modules) for `'g`, not for the closure:
//!   `Capture<'c, 'g, 'ctx>` promises `'g: 'c`, and the closure is checked for every `'c`
//!   (a higher-ranked lifetime, as in [`std::thread::scope`]), so a borrow the closure hands
//!   to an operation must outlive `'g`. [`Graph`] and [`ExecGraph`] carry `'g` and have a
//!   `Drop` (which destroys them), so the borrow checker keeps those borrows until the graph
//!   is gone: memory it writes cannot be read, written, freed or used by other work, by the
//!   host or another scope, while an executable graph that writes it exists; memory it reads
//!   cannot be written. The compile errors are in `ui-tests/fail/8_graphs/`.
//! * **It lends its memory back between replays.** Host memory and device memory bound with
//!   [`Capture::lend_host`] and [`Capture::lend_mut`] stay borrowed by the graph, which
//!   hands them out again as `&mut [T]` and `&mut DeviceSlice` through
//!   [`ExecGraph::host_mut`] and [`ExecGraph::device_mut`] (and their shared forms). Those
//!   take `&mut ExecGraph`, and a replay borrows the graph (`&ExecGraph`) for its whole
//!   scope, which has synchronized its streams before it returns: so the host gets the
//!   memory only while no replay is queued, and no replay can be queued while the host
//!   holds it. That is how a pipeline writes new input and reads its output between
//!   replays.
//! * **One context.** Every operation of a capture takes only values branded with the
//!   capture's `'ctx`; an [`ExecGraph<'g, 'ctx>`](ExecGraph) is launched only by a scope of
//!   the same `'ctx`.
//! * **A capture cannot be left half-done.** The capture is ended (`cuStreamEndCapture`) in
//!   [`ContextGuard::capture`] itself, after the closure, also when it returns an error or
//!   panics (then the partial graph is destroyed), so `mem::forget` cannot skip it. An
//!   operation that fails during the capture makes the whole capture fail, even if the
//!   closure ignores the error and returns `Ok`: no graph is ever made of part of what the
//!   closure asked for.
//! * **Views stay in their capture.** The closure's views ([`DeviceMut`], [`HostMut`],
//!   [`ScopedKernel`]) carry the higher-ranked `'c`: they cannot leave the closure, and a
//!   scope's views (whose `'scope` is another higher-ranked lifetime) cannot be captured: a
//!   scope's view names memory the scope may still use, unordered with the graph.
//!
//! # The capture stream, and the capture mode
//!
//! The crate captures on a stream of its own, made for the capture and never handed out
//! (`Capture` does not give access to it), non-blocking: a [`Stream`] is
//! `Sync`, so capturing on a user's stream would also capture work another thread queues on
//! it, which that thread's scope believes it runs and waits for (its final
//! `cuStreamSynchronize` fails on a capturing stream, the error path's `cuStreamQuery` as
//! well, and the scope would return with its work still running). On a private stream only
//! the capture's own operations are captured, and nothing else can wait for, query or join
//! it.
//!
//! The capture uses `CU_STREAM_CAPTURE_MODE_RELAXED`. The stricter modes make the driver
//! refuse "potentially unsafe" calls (allocations, synchronous copies, waits) on the
//! capturing thread (`THREAD_LOCAL`) or on every thread (`GLOBAL`) while the capture is
//! open. Those calls are unsafe for a capture only because they could touch the capturing
//! stream implicitly, through the legacy default stream; a non-blocking private stream is
//! touched by nothing but the capture. And refusing them would break the crate elsewhere: a
//! scope opened inside the capture closure (or on another thread, with `GLOBAL`) ends with
//! `cuStreamSynchronize` and, after an error, polls `cuStreamQuery`; both refused, the scope
//! would have to return while its work may still run. In relaxed mode those calls run as
//! usual, outside the capture: a synchronous operation inside the closure
//! (`DeviceBuffer::zeroed`, `to_vec`) happens at capture time and is not part of the graph;
//! only the [`Capture`]'s operations are.
//!
//! # What a capture cannot contain
//!
//! * Stream-ordered allocation: a [`Capture`] has no `alloc`. A captured `cuMemAllocAsync`
//!   becomes a graph allocation that each replay makes and that must be freed before the
//!   next replay (or by the graph itself); memory whose life spans replays belongs in a
//!   [`DeviceBuffer`](crate::DeviceBuffer) that the graph borrows.
//! * Host functions and waits on other streams' events: not offered.
//! * Synchronous calls: they are not captured (above), and cannot reach the capture stream.
//!
//! Host memory in a captured copy is read or written at *replay* time, so the graph borrows
//! it for `'g` like device memory. Pinned memory ([`PinnedBuffer`](crate::PinnedBuffer))
//! is what graphs are meant for; a driver may refuse a captured copy from pageable memory,
//! which is then an error of the capture (the tests record what the driver does).
//!
//! # Update
//!
//! [`ExecGraph::update`] rebinds an executable graph to the buffers of a graph of the same
//! shape (`cuGraphExecUpdate`, CUDA 12.0), without instantiating it again: capture the same
//! operations on other buffers, and update. The update consumes the executable graph and
//! returns one that carries the new graph's borrows, so the old buffers are free again and
//! the new ones are held. If the driver refuses the update (another topology, another
//! kernel), it did not change the executable graph (`CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE`),
//! and [`ExecGraph::try_update`] hands the old one back in the [`UpdateError`]; after any
//! other error it is destroyed, since what it would then reach is unknown.
//!
//! ```no_run
//! use cuda_brand::prelude::*;
//! # fn main() -> cuda_brand::Result<()> {
//! let device = Device::get(0)?;
//! with_context(&device, ContextFlags::default(), |ctx| {
//!     let module = ctx.load_ptx(include_str!("../kernels/kernels.ptx"))?;
//!     // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
//!     let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
//!     let mut input = ctx.pinned_zeroed::<f32>(1024)?;
//!     let mut output = ctx.pinned_zeroed::<f32>(1024)?;
//!     let mut x = ctx.zeroed::<f32>(1024)?;
//!     // copy in, two kernels, copy out: captured once
//!     let (graph, (inp, out)) = ctx.capture(|g| {
//!         let (input, inp) = g.lend_host(&mut input);
//!         let (output, out) = g.lend_host(&mut output);
//!         let x = g.bind_mut(&mut x);
//!         g.copy_from_host(x, input)?;
//!         g.launch(&scale, LaunchConfig::linear(4, 256), (x, 2.0f32))?;
//!         g.launch(&scale, LaunchConfig::linear(4, 256), (x, 3.0f32))?;
//!         g.copy_to_host(output, x)?;
//!         Ok((inp, out))
//!     })?;
//!     let mut exec = graph.instantiate()?;
//!     let stream = ctx.stream()?;
//!     for i in 0..100 {
//!         exec.host_mut(inp).fill(i as f32); // lent back between replays
//!         stream.scope(|s| s.launch_graph(&exec))?;
//!         assert!(exec.host(out).iter().all(|&v| v == 6.0 * i as f32));
//!     }
//!     drop(exec); // `input`, `output` and `x` are free again
//!     assert_eq!(x.to_vec()?[0], 6.0 * 99.0);
//!     Ok(())
//! })
//! # }
//! ```

use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use cuda_driver_sys::{CUctx_st, CUgraph_st, CUgraphExec_st, CUstream_st};

use crate::context::{self, Brand, ContextGuard};
use crate::driver::{self, CUgraph, CUgraphExec};
use crate::error::{Error, ErrorCode, Result};
use crate::launch::{
    self, KernelArgs, KernelMut, KernelParams, Launch, LaunchConfig, ScopedKernel,
};
use crate::memory::{
    self, DeviceCopy, DeviceSlice, Memset, Span, check_lengths, first_overlap, overlap_error,
};
use crate::scope::sealed::IntoMut as _;
use crate::scope::{DeviceMut, IntoDeviceMut, IntoDeviceRef, StreamScope};
use crate::scope::{HostMut, IntoHostMut, IntoHostRef};
use crate::stream::{Stream, StreamFlags};

/// Memory a capture lent: where, how many elements, and whether on the host.
#[derive(Clone, Copy, Debug)]
struct Lent {
    ptr: u64,
    len: usize,
    host: bool,
}

/// Runs `op` with the context of a graph or capture current ([`context::in_context`]).
/// Every `Handle<CUctx_st>` of this module is the context of a value branded with it, so it
/// is alive while that value is.
fn in_ctx<T>(ctx: Handle<CUctx_st>, op: impl FnOnce() -> Result<T>) -> Result<T> {
    // SAFETY: see above: the context is alive for the call.
    unsafe { context::in_context(ctx.0, op) }
}

/// Numbers each capture, so a key is only accepted by the graph whose capture made it.
static CAPTURES: AtomicU64 = AtomicU64::new(1);

/// The key to host memory a graph holds ([`Capture::lend_host`]): hands the memory back
/// between replays through [`ExecGraph::host`] and [`ExecGraph::host_mut`]. A key works
/// only with the graph of the capture that made it (checked: another graph's key panics).
pub struct HostKey<T> {
    graph: u64,
    index: usize,
    _elem: PhantomData<fn() -> T>,
}

/// The key to device memory a graph holds ([`Capture::lend_mut`]): see [`HostKey`].
pub struct DeviceKey<'ctx, T> {
    graph: u64,
    index: usize,
    _brand: Brand<'ctx>,
    _elem: PhantomData<fn() -> T>,
}

macro_rules! key_traits {
    ($name:ident $(<$l:lifetime>)?) => {
        impl<$($l,)? T> Clone for $name<$($l,)? T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<$($l,)? T> Copy for $name<$($l,)? T> {}
        impl<$($l,)? T> fmt::Debug for $name<$($l,)? T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}(capture {}, binding {})", stringify!($name), self.graph, self.index)
            }
        }
    };
}
key_traits!(HostKey);
key_traits!(DeviceKey<'ctx>);

/// The work of one capture, open for the length of a [`ContextGuard::capture`] closure:
/// its operations are recorded into the graph instead of running. They have the names and
/// arguments of a [`StreamScope`]'s, and borrow what they touch for `'g`, the graph's life
/// (see the [module documentation](crate::graph)).
///
/// Not `Send` and not `Sync`: a capture stays on the thread that opened it.
pub struct Capture<'c, 'g: 'c, 'ctx: 'g> {
    stream: Handle<CUstream_st>,
    ctx: Handle<CUctx_st>,
    id: u64,
    state: Mutex<CaptureState>,
    _capture: PhantomData<&'c mut &'c ()>,
    _graph: PhantomData<&'g mut &'g ()>,
    _brand: Brand<'ctx>,
    _thread: PhantomData<GraphsStayOnTheirThread>,
}

/// Makes [`Capture`], [`Graph`] and [`ExecGraph`] neither `Send` nor `Sync` (the driver's
/// graph objects are not thread-safe); named after the rule, because the compiler quotes
/// this name when one is sent to or shared with another thread.
///
/// The two impls below, whose bound nothing implements, make the compiler begin that error
/// with [`CrossesThreads`]'s message rather than "`*const ()` cannot be sent between
/// threads safely" (the field's reason). `T` is always `()`: a bound on a type without
/// parameters would be checked where it is written.
struct GraphsStayOnTheirThread<T = ()> {
    _not_send: PhantomData<(*const (), T)>,
}

/// The rule that [`GraphsStayOnTheirThread`] stands for, as the compiler states it.
/// Implemented by nothing.
#[diagnostic::on_unimplemented(
    message = "a `Capture`, `Graph` or `ExecGraph` stays on its thread: it cannot be sent to or shared with another thread",
    label = "the graph would reach another thread here",
    note = "the driver's graph objects are not thread-safe: launch a graph on the thread that made it, or make one per thread",
    note = "see the guide, chapter 10 (`cuda_brand::guide`)"
)]
trait CrossesThreads {}

// SAFETY: never holds: nothing implements `CrossesThreads`.
unsafe impl<T> Send for GraphsStayOnTheirThread<T> where Self: CrossesThreads {}
// SAFETY: as above.
unsafe impl<T> Sync for GraphsStayOnTheirThread<T> where Self: CrossesThreads {}

/// A driver handle. `Send` and `Sync` only so that the compiler's explanation of why graphs
/// are not names the rule (`GraphsStayOnTheirThread`), not a raw pointer.
struct Handle<T>(NonNull<T>);

impl<T> Clone for Handle<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Handle<T> {}

// SAFETY: see the type's docs: every type holding a `Handle` is neither `Send` nor `Sync`
// through its `GraphsStayOnTheirThread` field.
unsafe impl<T> Send for Handle<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Handle<T> {}

impl<T> Handle<T> {
    #[inline(always)]
    fn get(self) -> *mut T {
        self.0.as_ptr()
    }
}

impl<T> fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:p}", self.0)
    }
}

#[derive(Default)]
struct CaptureState {
    lent: Vec<Lent>,
    /// The first operation that failed: the capture then makes no graph.
    failed: Option<Error>,
    /// The captured graph (a `CUgraph`), once the capture has ended.
    graph: Option<usize>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<'ctx> ContextGuard<'ctx> {
    /// Captures the work `f` queues on its [`Capture`] into a graph of this context
    /// (`cuStreamBeginCapture` on a private stream, `cuStreamEndCapture` after `f`), and
    /// returns it with `f`'s value. Nothing runs: [`Graph::instantiate`] it, then launch it
    /// in a scope ([`StreamScope::launch_graph`]). See the [`graph`](crate::graph) module for
    /// the rules.
    ///
    /// If `f` returns an error or panics, or an operation of the capture failed (even if `f`
    /// went on), the capture is ended, the partial graph destroyed, and the error returned
    /// (the panic resumed).
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let mut a = ctx.zeroed::<u32>(256)?;
    ///     let (graph, ()) = ctx.capture(|g| {
    ///         let a = g.bind_mut(&mut a);
    ///         g.fill(a.slice(..128), 1)?;
    ///         g.fill(a.slice(128..), 2)
    ///     })?;
    ///     assert_eq!(graph.node_count()?, 2);
    ///     let exec = graph.instantiate()?;
    ///     ctx.stream()?.scope(|s| s.launch_graph(&exec))?;
    ///     drop(exec);
    ///     assert_eq!(a.to_vec()?[200], 2);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn capture<'g, R, E, F>(self, f: F) -> Result<(Graph<'g, 'ctx>, R), E>
    where
        'ctx: 'g,
        F: for<'c> FnOnce(&'c Capture<'c, 'g, 'ctx>) -> Result<R, E>,
        E: From<Error>,
    {
        let stream = Stream::new(self, StreamFlags::NonBlocking)?;
        let raw = stream.raw();
        self.with_current(|| {
            // SAFETY: a new stream of this context, not capturing.
            unsafe { driver::stream_begin_capture(raw, driver::CAPTURE_MODE_RELAXED) }
        })?;
        let capture = Capture {
            stream: Handle(driver::non_null("cuStreamCreateWithPriority", raw)?),
            ctx: Handle(self.as_non_null()),
            id: CAPTURES.fetch_add(1, Ordering::Relaxed),
            state: Mutex::new(CaptureState::default()),
            _capture: PhantomData,
            _graph: PhantomData,
            _brand: PhantomData,
            _thread: PhantomData,
        };
        let outcome = context::run_then(|| f(&capture), || capture.end());
        let CaptureState {
            lent,
            failed,
            graph,
        } = std::mem::take(&mut *lock(&capture.state));
        // From here every path either hands the graph out or drops it (destroying it).
        let graph = graph
            .and_then(|g| NonNull::new(g as CUgraph))
            .map(|raw| Graph {
                raw: Handle(raw),
                ctx: capture.ctx,
                id: capture.id,
                lent: lent.into_boxed_slice(),
                _borrows: PhantomData,
                _brand: PhantomData,
                _thread: PhantomData,
            });
        let value = outcome?;
        if let Some(failed) = failed {
            drop(graph);
            return Err(E::from(failed));
        }
        match graph {
            Some(graph) => Ok((graph, value)),
            None => Err(E::from(Error::with_detail(
                "cuStreamEndCapture",
                ErrorCode::StreamCaptureInvalidated,
                "the capture was invalidated by an operation the driver does not allow while a \
                 stream captures (a context-wide synchronization, for example), and no graph was \
                 made",
            ))),
        }
    }
}

impl<'c, 'g, 'ctx> Capture<'c, 'g, 'ctx> {
    /// Ends the capture (the teardown of [`ContextGuard::capture`], on every path): the
    /// graph is kept for the caller, or destroyed right away while a panic unwinds.
    fn end(&self) -> Result<()> {
        let stream = self.stream.get();
        let ended = || {
            // SAFETY: the capture's stream, alive (dropped after `self`) and capturing since
            // `capture` began it; only this teardown ends it.
            unsafe { driver::stream_end_capture(stream) }
        };
        let graph = in_ctx(self.ctx, ended)?;
        if graph.is_null() {
            return Ok(()); // invalidated: reported by `capture`
        }
        if std::thread::panicking() {
            // SAFETY: the graph was just made and nothing else has it.
            let _ = in_ctx(self.ctx, || unsafe { driver::graph_destroy(graph) });
        } else {
            lock(&self.state).graph = Some(graph as usize);
        }
        Ok(())
    }

    /// Runs one captured operation, remembering the first failure.
    #[inline]
    fn op(&self, op: impl FnOnce() -> Result<()>) -> Result<()> {
        let done = op();
        if let Err(e) = &done {
            let mut state = lock(&self.state);
            if state.failed.is_none() {
                state.failed = Some(e.clone());
            }
        }
        done
    }

    /// Records lent memory, returning its index.
    fn lend(&self, ptr: u64, len: usize, host: bool) -> usize {
        let mut state = lock(&self.state);
        state.lent.push(Lent { ptr, len, host });
        state.lent.len() - 1
    }

    /// Binds a buffer for writing by several operations of the capture: the returned view
    /// is `Copy`; the buffer stays borrowed for the graph's life.
    #[inline]
    pub fn bind_mut<T: DeviceCopy>(
        &'c self,
        slice: &'g mut DeviceSlice<'ctx, T>,
    ) -> DeviceMut<'c, 'ctx, T> {
        let slice: &'c mut DeviceSlice<'ctx, T> = slice;
        slice.into_mut()
    }

    /// As [`Capture::bind_mut`], and the graph lends the buffer back between replays: the
    /// key opens it through [`ExecGraph::device_mut`] (or [`ExecGraph::device`]).
    pub fn lend_mut<T: DeviceCopy>(
        &'c self,
        slice: &'g mut DeviceSlice<'ctx, T>,
    ) -> (DeviceMut<'c, 'ctx, T>, DeviceKey<'ctx, T>) {
        let index = self.lend(slice.device_ptr(), slice.len(), false);
        let key = DeviceKey {
            graph: self.id,
            index,
            _brand: PhantomData,
            _elem: PhantomData,
        };
        (self.bind_mut(slice), key)
    }

    /// Binds a host slice (pinned memory, normally) that the captured copies read or write
    /// at replay time; the graph holds it for its life and lends it back between replays:
    /// the key opens it through [`ExecGraph::host_mut`] (or [`ExecGraph::host`]).
    pub fn lend_host<T: DeviceCopy>(&'c self, host: &'g mut [T]) -> (HostMut<'c, T>, HostKey<T>) {
        let index = self.lend(host.as_mut_ptr() as usize as u64, host.len(), true);
        let key = HostKey {
            graph: self.id,
            index,
            _elem: PhantomData,
        };
        (HostMut::new(host.as_mut_ptr(), host.len()), key)
    }

    /// Binds a [`KernelMut`] (a kernel that writes its module's globals) to the capture, for
    /// any number of launches; the graph holds it exclusively for its life.
    #[inline]
    pub fn bind_kernel<P>(
        &'c self,
        kernel: &'g mut KernelMut<'_, 'ctx, P>,
    ) -> ScopedKernel<'c, 'ctx, P> {
        kernel.scoped()
    }

    /// Captures a copy of host memory into `dst` (a memcpy node). `src` is read at replay
    /// time: a slice (`&v[..]`, borrowed for the graph's life) or a [`HostMut`] from
    /// [`Capture::lend_host`].
    ///
    /// # Panics
    /// If the lengths differ (before any driver call).
    pub fn copy_from_host<T: DeviceCopy>(
        &'c self,
        dst: impl IntoDeviceMut<'c, 'ctx, T>,
        src: impl IntoHostRef<'c, T>,
    ) -> Result<()> {
        let (dst, src) = (dst.into_mut(), src.into_host_ref());
        check_lengths("copy_from_host", dst.len(), src.len());
        let bytes = memory::byte_len::<T>(dst.len());
        if bytes == 0 {
            return Ok(());
        }
        self.op(|| {
            // SAFETY: same lengths; both ranges stay borrowed (the host range unmodified)
            // for the graph's life, which ends after its last replay (scopes synchronize);
            // the capture's stream is alive.
            unsafe {
                driver::memcpy_htod_async(
                    dst.device_ptr(),
                    src.as_ptr().cast(),
                    bytes,
                    self.stream.get(),
                )
            }
        })
    }

    /// Captures a copy of `src` into host memory (a memcpy node), written at replay time: a
    /// slice (`&mut v[..]`, borrowed for the graph's life) or a [`HostMut`] from
    /// [`Capture::lend_host`].
    ///
    /// # Panics
    /// If the lengths differ (before any driver call).
    pub fn copy_to_host<T: DeviceCopy>(
        &'c self,
        dst: impl IntoHostMut<'c, T>,
        src: impl IntoDeviceRef<'c, 'ctx, T>,
    ) -> Result<()> {
        let (dst, src) = (dst.into_host_mut(), src.into_ref());
        check_lengths("copy_to_host", dst.len(), src.len());
        let bytes = memory::byte_len::<T>(src.len());
        if bytes == 0 {
            return Ok(());
        }
        self.op(|| {
            // SAFETY: same lengths; `dst` is held exclusively by the graph for its life,
            // and any bytes are a valid `T` (`DeviceCopy`).
            unsafe {
                driver::memcpy_dtoh_async(
                    dst.as_mut_ptr().cast(),
                    src.device_ptr(),
                    bytes,
                    self.stream.get(),
                )
            }
        })
    }

    /// Captures a device-to-device copy. The two ranges must not overlap (an error before
    /// any driver call).
    ///
    /// # Panics
    /// If the lengths differ (before any driver call).
    pub fn copy_from_device<T: DeviceCopy>(
        &'c self,
        dst: impl IntoDeviceMut<'c, 'ctx, T>,
        src: impl IntoDeviceRef<'c, 'ctx, T>,
    ) -> Result<()> {
        let (dst, src) = (dst.into_mut(), src.into_ref());
        check_lengths("copy_from_device", dst.len(), src.len());
        let bytes = memory::byte_len::<T>(dst.len());
        if bytes == 0 {
            return Ok(());
        }
        let spans = [
            Span {
                start: dst.device_ptr(),
                bytes: bytes as u64,
                write: true,
            },
            Span {
                start: src.device_ptr(),
                bytes: bytes as u64,
                write: false,
            },
        ];
        if spans[0].overlaps(&spans[1]) {
            return self.op(|| {
                Err(overlap_error(
                    "Capture::copy_from_device",
                    ["the destination", "the source"],
                    &spans[0],
                    &spans[1],
                ))
            });
        }
        self.op(|| {
            // SAFETY: same lengths, disjoint (checked), both held for the graph's life.
            unsafe {
                driver::memcpy_dtod_async(
                    dst.device_ptr(),
                    src.device_ptr(),
                    bytes,
                    self.stream.get(),
                )
            }
        })
    }

    /// Captures setting every element of `dst` to `value` (a memset node).
    pub fn fill<T: Memset>(&'c self, dst: impl IntoDeviceMut<'c, 'ctx, T>, value: T) -> Result<()> {
        let dst = dst.into_mut();
        if memory::byte_len::<T>(dst.len()) == 0 {
            return Ok(());
        }
        self.op(|| {
            // SAFETY: `len` elements of the pattern's width, held for the graph's life.
            unsafe {
                driver::memset_async(
                    dst.device_ptr(),
                    crate::memory::sealed::Sealed::pattern(value),
                    dst.len(),
                    self.stream.get(),
                )
            }
        })
    }

    /// Captures a launch of `kernel` with `args` (a kernel node), checked as
    /// [`StreamScope::launch`] checks a launch: the configuration against the kernel's
    /// limits, and that no `Out` argument overlaps another slice argument, before the
    /// driver sees it. The arguments' values are copied into the graph; the memory they
    /// name is held for the graph's life.
    pub fn launch<P: KernelParams>(
        &'c self,
        kernel: impl Launch<'c, 'ctx, P>,
        config: LaunchConfig,
        args: impl KernelArgs<'c, 'ctx, P>,
    ) -> Result<()> {
        let target = launch::sealed::Launch::target(&kernel);
        self.op(|| launch::check_config(&config, &target))?;
        launch::sealed::Args::with_params(args, launch::sealed::Crate(()), |spans, params| {
            if let Some((i, j)) = first_overlap(spans) {
                return self.op(|| Err(launch::launch_overlap(spans, i, j)));
            }
            self.op(|| {
                // SAFETY: as in `StreamScope::launch`: `params` is laid out from the
                // declared parameter list (the promise of `Module::kernel`), alive for the
                // call (the driver copies the values into the node); the kernel, its module
                // and every argument's memory are held for the graph's life; no `Out`
                // overlaps another slice argument.
                unsafe {
                    driver::launch_kernel(
                        target.function,
                        config.grid,
                        config.block,
                        config.shared_mem_bytes,
                        self.stream.get(),
                        params,
                    )
                }
            })
        })
    }
}

impl fmt::Debug for Capture<'_, '_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Capture")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// A captured graph (`CUgraph`) of the context branded `'ctx`, holding the memory its
/// operations touch for `'g` (see the [module documentation](crate::graph)). Made by
/// [`ContextGuard::capture`]; [`instantiate`](Graph::instantiate) it to replay it, or pass
/// it to [`ExecGraph::update`].
pub struct Graph<'g, 'ctx: 'g> {
    raw: Handle<CUgraph_st>,
    ctx: Handle<CUctx_st>,
    id: u64,
    lent: Box<[Lent]>,
    _borrows: PhantomData<&'g mut ()>,
    _brand: Brand<'ctx>,
    _thread: PhantomData<GraphsStayOnTheirThread>,
}

impl<'g, 'ctx> Graph<'g, 'ctx> {
    /// The handle, for the crate's own calls.
    #[inline]
    pub(crate) fn raw(&self) -> CUgraph {
        self.raw.get()
    }

    /// The driver's handle (`CUgraph`), for calls this crate does not wrap.
    ///
    /// # Safety
    ///
    /// Taking the handle does nothing; `unsafe` marks what it allows behind the borrow
    /// checker's back. The caller promises, for every use of the handle: the graph is not
    /// destroyed (`cuGraphDestroy`) or changed (nodes added or removed, their parameters
    /// set: the graph holds exactly the memory its captured nodes use, and instantiation
    /// and updates rely on it); and the handle is not used after this `Graph` is dropped.
    #[inline]
    pub unsafe fn as_raw(&self) -> CUgraph {
        self.raw()
    }

    /// The number of nodes (one per captured operation).
    pub fn node_count(&self) -> Result<usize> {
        // SAFETY: the graph is alive (owned).
        in_ctx(self.ctx, || unsafe { driver::graph_node_count(self.raw()) })
    }

    /// Instantiates the graph (`cuGraphInstantiateWithFlags`) into an executable graph,
    /// which takes over the graph's borrows and lent memory.
    pub fn instantiate(mut self) -> Result<ExecGraph<'g, 'ctx>> {
        let nodes = self.node_count()?;
        let graph = self.raw();
        // SAFETY: the graph is alive (owned).
        let exec = in_ctx(self.ctx, || unsafe { driver::graph_instantiate(graph) })?;
        let exec = driver::non_null("cuGraphInstantiateWithFlags", exec)?;
        Ok(ExecGraph {
            raw: Handle(exec),
            ctx: self.ctx,
            id: self.id,
            lent: std::mem::take(&mut self.lent),
            nodes,
            _borrows: PhantomData,
            _brand: PhantomData,
            _thread: PhantomData,
        })
        // `self` is dropped here: the executable graph does not need the graph
    }
}

impl Drop for Graph<'_, '_> {
    fn drop(&mut self) {
        let graph = self.raw();
        // SAFETY: the graph is ours and unused from now on. An error cannot be reported from
        // `drop`; the context's destruction reclaims it.
        let _ = in_ctx(self.ctx, || unsafe { driver::graph_destroy(graph) });
    }
}

impl fmt::Debug for Graph<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Graph")
            .field("raw", &self.raw)
            .field("lent", &self.lent.len())
            .finish()
    }
}

/// An executable graph (`CUgraphExec`) of the context branded `'ctx`, holding the memory
/// its operations touch for `'g`: launch it with [`StreamScope::launch_graph`] on any stream
/// of the context, any number of times; between replays it lends its lent memory back
/// ([`host_mut`](ExecGraph::host_mut), [`device_mut`](ExecGraph::device_mut)).
///
/// Not `Sync` (the driver's graph objects are not thread-safe) and not `Send`.
pub struct ExecGraph<'g, 'ctx: 'g> {
    raw: Handle<CUgraphExec_st>,
    ctx: Handle<CUctx_st>,
    id: u64,
    lent: Box<[Lent]>,
    nodes: usize,
    _borrows: PhantomData<&'g mut ()>,
    _brand: Brand<'ctx>,
    _thread: PhantomData<GraphsStayOnTheirThread>,
}

impl<'g, 'ctx> ExecGraph<'g, 'ctx> {
    /// The handle, for the crate's own calls.
    #[inline]
    pub(crate) fn raw(&self) -> CUgraphExec {
        self.raw.get()
    }

    /// The driver's handle (`CUgraphExec`), for calls this crate does not wrap.
    ///
    /// # Safety
    ///
    /// Taking the handle does nothing; `unsafe` marks what it allows behind the borrow
    /// checker's back. The caller promises, for every use of the handle: the executable
    /// graph is not destroyed (`cuGraphExecDestroy`) or changed (`cuGraphExec*SetParams`,
    /// `cuGraphExecUpdate`); the handle is not used after this `ExecGraph` is dropped; and
    /// it is launched through the driver (`cuGraphLaunch`) only where
    /// [`StreamScope::launch_graph`](crate::StreamScope::launch_graph) would launch it:
    /// the memory it touches alive and used by nothing else until the launch has finished.
    #[inline]
    pub unsafe fn as_raw(&self) -> CUgraphExec {
        self.raw()
    }

    /// The number of nodes of the graph it was made from.
    pub fn node_count(&self) -> usize {
        self.nodes
    }

    #[track_caller]
    fn lent(&self, graph: u64, index: usize, host: bool) -> Lent {
        assert!(
            graph == self.id,
            "ExecGraph: a key of capture {graph} given to the graph of capture {}",
            self.id
        );
        let lent = self.lent[index];
        debug_assert_eq!(lent.host, host);
        lent
    }

    /// The host memory of `key`, lent back for reading while no replay is queued.
    ///
    /// # Panics
    /// If the key is of another capture.
    #[track_caller]
    pub fn host<T: DeviceCopy>(&mut self, key: HostKey<T>) -> &[T] {
        let lent = self.lent(key.graph, key.index, true);
        // SAFETY: the graph holds this `&'g mut [T]` (from `lend_host`, with this element
        // type: the key's type and graph are those of the binding); `&mut self` means no
        // replay is queued (scopes borrow the graph until they have synchronized) and no
        // other lent reference is alive.
        unsafe { std::slice::from_raw_parts(lent.ptr as usize as *const T, lent.len) }
    }

    /// The host memory of `key`, lent back for writing (the next replay's input, say)
    /// while no replay is queued.
    ///
    /// # Panics
    /// If the key is of another capture.
    #[track_caller]
    pub fn host_mut<T: DeviceCopy>(&mut self, key: HostKey<T>) -> &mut [T] {
        let lent = self.lent(key.graph, key.index, true);
        // SAFETY: as in `host`, and the returned borrow is exclusive through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(lent.ptr as usize as *mut T, lent.len) }
    }

    /// The device memory of `key`, lent back for reading (`to_vec`, or a scope of its own)
    /// while no replay is queued.
    ///
    /// # Panics
    /// If the key is of another capture.
    #[track_caller]
    pub fn device<T: DeviceCopy>(&mut self, key: DeviceKey<'ctx, T>) -> &DeviceSlice<'ctx, T> {
        let lent = self.lent(key.graph, key.index, false);
        // SAFETY: the graph holds this `&'g mut DeviceSlice<'ctx, T>` (from `lend_mut`);
        // `&mut self`: no replay queued, no other lent reference alive.
        unsafe { DeviceSlice::from_raw_parts(lent.ptr, lent.len) }
    }

    /// The device memory of `key`, lent back for writing while no replay is queued.
    ///
    /// # Panics
    /// If the key is of another capture.
    #[track_caller]
    pub fn device_mut<T: DeviceCopy>(
        &mut self,
        key: DeviceKey<'ctx, T>,
    ) -> &mut DeviceSlice<'ctx, T> {
        let lent = self.lent(key.graph, key.index, false);
        // SAFETY: as in `device`, exclusive through `&mut self`.
        unsafe { DeviceSlice::from_raw_parts_mut(lent.ptr, lent.len) }
    }

    /// Rebinds the executable graph to the memory of `graph`, a capture of the same
    /// operations (same topology, kernels and kinds of copies) on other buffers, without
    /// instantiating it again (`cuGraphExecUpdate`, CUDA 12.0). The result holds `graph`'s
    /// borrows and lends `graph`'s keys; the old borrows end.
    ///
    /// On failure the executable graph is gone (dropped); [`ExecGraph::try_update`] hands
    /// it back where the driver refused the update without changing it.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let (mut a, mut b) = (ctx.zeroed::<u32>(64)?, ctx.zeroed::<u32>(64)?);
    ///     let exec = ctx.capture(|g| g.fill(&mut a, 1))?.0.instantiate()?;
    ///     let exec = exec.update(ctx.capture(|g| g.fill(&mut b, 1))?.0)?; // now fills `b`
    ///     ctx.stream()?.scope(|s| s.launch_graph(&exec))?;
    ///     drop(exec);
    ///     assert_eq!((a.to_vec()?[0], b.to_vec()?[0]), (0, 1));
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn update<'h>(self, graph: Graph<'h, 'ctx>) -> Result<ExecGraph<'h, 'ctx>> {
        self.try_update(graph).map_err(UpdateError::into_error)
    }

    /// As [`ExecGraph::update`], handing the executable graph back, unchanged, where the
    /// driver refused the update (`CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE`: another topology,
    /// another kernel, another kind of copy): then [`UpdateError::into_exec`] is `Some`.
    pub fn try_update<'h>(
        self,
        mut graph: Graph<'h, 'ctx>,
    ) -> std::result::Result<ExecGraph<'h, 'ctx>, UpdateError<'g, 'ctx>> {
        let this = ManuallyDrop::new(self);
        let (exec, new) = (this.raw(), graph.raw());
        // SAFETY: both alive and of this context (one brand); no launch of `exec` is queued
        // (it is owned here: every scope that launched it has returned).
        let updated = in_ctx(this.ctx, || unsafe { driver::graph_exec_update(exec, new) });
        match updated {
            Ok(()) => {
                let nodes = graph.node_count().unwrap_or(this.nodes);
                Ok(ExecGraph {
                    raw: this.raw,
                    ctx: this.ctx,
                    id: graph.id,
                    lent: std::mem::take(&mut graph.lent),
                    nodes,
                    _borrows: PhantomData,
                    _brand: PhantomData,
                    _thread: PhantomData,
                })
            }
            Err(error) if error.code() == ErrorCode::GraphExecUpdateFailure => Err(UpdateError {
                error,
                exec: Some(ManuallyDrop::into_inner(this)),
            }),
            Err(error) => {
                drop(ManuallyDrop::into_inner(this));
                Err(UpdateError { error, exec: None })
            }
        }
    }
}

impl Drop for ExecGraph<'_, '_> {
    fn drop(&mut self) {
        let exec = self.raw();
        // SAFETY: ours and unused from now on: no launch is queued (scopes borrow the graph
        // until they have synchronized).
        let _ = in_ctx(self.ctx, || unsafe { driver::graph_exec_destroy(exec) });
    }
}

impl fmt::Debug for ExecGraph<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecGraph")
            .field("raw", &self.raw)
            .field("nodes", &self.nodes)
            .field("lent", &self.lent.len())
            .finish()
    }
}

/// A failed [`ExecGraph::try_update`]: the error, and the executable graph unchanged where the
/// driver refused the update (`CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE`).
pub struct UpdateError<'g, 'ctx: 'g> {
    error: Error,
    exec: Option<ExecGraph<'g, 'ctx>>,
}

impl<'g, 'ctx> UpdateError<'g, 'ctx> {
    /// The error.
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The executable graph as it was, if the driver refused the update (it is then
    /// unchanged).
    pub fn into_exec(self) -> Option<ExecGraph<'g, 'ctx>> {
        self.exec
    }

    /// The error, dropping the executable graph (if it was handed back).
    pub fn into_error(self) -> Error {
        self.error
    }
}

impl fmt::Debug for UpdateError<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpdateError")
            .field("error", &self.error)
            .field("exec", &self.exec)
            .finish()
    }
}

impl fmt::Display for UpdateError<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<'scope, 'env, 'ctx> StreamScope<'scope, 'env, 'ctx> {
    /// Queues a replay of `graph` (`cuGraphLaunch`), an executable graph of this context.
    /// The scope borrows it until it has synchronized, so the graph cannot lend its memory
    /// out or be dropped while a replay may run. Replays of one executable graph run one at
    /// a time, in the order they were queued, whatever their streams (the driver orders
    /// them).
    ///
    /// In a multi-stream scope a replay needs no entry in the order book: the graph holds
    /// everything it writes exclusively (no other operation of any scope can name it) and
    /// everything it reads shared (nothing can write it), so no other stream's work can
    /// conflict with it.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let mut a = ctx.zeroed::<u32>(64)?;
    ///     let exec = ctx.capture(|g| g.fill(&mut a, 3))?.0.instantiate()?;
    ///     let (s1, s2) = (ctx.stream()?, ctx.stream()?);
    ///     s1.scope(|s| s.launch_graph(&exec))?; // on any stream of the context
    ///     s2.scope(|s| {
    ///         s.launch_graph(&exec)?;
    ///         s.launch_graph(&exec) // any number of times
    ///     })?;
    ///     Ok(())
    /// })
    /// # }
    /// ```
    #[inline]
    pub fn launch_graph(&'scope self, graph: &'scope ExecGraph<'_, 'ctx>) -> Result<()> {
        let stream = self.stream().raw();
        let exec = graph.raw();
        self.ordered(&[], None, || {
            let launch = || {
                // SAFETY: the executable graph and the stream are alive and of one context
                // (one brand); every memory the graph reaches is held by it for 'g, and the
                // scope borrows the graph until it has synchronized the stream.
                unsafe { driver::graph_launch(exec, stream) }
            };
            in_ctx(graph.ctx, launch)
        })
    }
}
