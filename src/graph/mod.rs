//! CUDA graphs: capture work once ([`ContextGuard::capture`], a [`Capture`]), instantiate it
//! ([`Graph::instantiate`], an [`ExecGraph`]), and replay it on any stream of the context,
//! inside a scope, any number of times ([`ExecGraph::launch`]).
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
//! * A launch with a priority: refused, since a replayed node runs at the priority of the
//!   stream the graph is launched on ([`Capture::launch`]). Clusters and cooperative
//!   launches are captured with the node.
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
//! and [`ExecGraph::update_or_keep`] hands the old one back in the [`UpdateError`]; after any
//! other error it is destroyed, since what it would then reach is unknown.
//!
//! ```no_run
//! use cuda_brand::prelude::*;
//! # fn main() -> cuda_brand::Result<()> {
//! let device = Device::get(0)?;
//! with_context(&device, ContextFlags::default(), |ctx| {
//!     let module = ctx.module_from_ptx(include_str!("../../kernels/kernels.ptx"))?;
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
//!         g.copy_from_host(x, input.into_ref())?;
//!         g.launch(&scale, LaunchConfig::linear(4, 256), (x, 2.0f32))?;
//!         g.launch(&scale, LaunchConfig::linear(4, 256), (x, 3.0f32))?;
//!         g.copy_to_host(output, x.into_ref())?;
//!         Ok((inp, out))
//!     })?;
//!     let mut exec = graph.instantiate()?;
//!     let stream = ctx.new_stream()?;
//!     for i in 0..100 {
//!         exec.host_mut(inp).fill(i as f32); // lent back between replays
//!         stream.scope(|s| exec.launch(s))?;
//!         assert!(exec.host(out).iter().all(|&v| v == 6.0 * i as f32));
//!     }
//!     drop(exec); // `input`, `output` and `x` are free again
//!     assert_eq!(x.to_vec()?[0], 6.0 * 99.0);
//!     Ok(())
//! })
//! # }
//! ```

// The rooms: the keys, markers and shared state here; `capture.rs` (capturing, lending),
// `exec.rs` (`Graph`, `ExecGraph`, replays and updates, `ExecGraph::launch`).
mod capture;
mod exec;

use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, MutexGuard, PoisonError};

use cuda_driver_sys::CUctx_st;

#[cfg(doc)]
use crate::context::ContextGuard;
use crate::context::{self, Brand};
use crate::error::{Error, Result};
#[cfg(doc)]
use crate::launch::ScopedKernel;
#[cfg(doc)]
use crate::scope::{DeviceMut, HostMut, StreamScope};
#[cfg(doc)]
use crate::stream::Stream;

#[doc(inline)]
pub use capture::Capture;
#[doc(inline)]
pub use exec::{ExecGraph, Graph, UpdateError};

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
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)), on its own and not only
/// through the guard that made it: keys of two contexts never have one type, and a function
/// that takes two of one context cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::DeviceKey;
///
/// /// Takes two keys of one context.
/// fn one_context<'ctx>(_: &DeviceKey<'ctx, u32>, _: &DeviceKey<'ctx, u32>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     with_context(&device, ContextFlags::default(), |b| {
///         let (mut buf_a, mut buf_b) = (a.zeroed::<u32>(4)?, b.zeroed::<u32>(4)?);
///         a.capture(|on_a| {
///             let (_, key_a) = on_a.lend_mut(&mut buf_a);
///             b.capture(|on_b| {
///                 let (_, key_b) = on_b.lend_mut(&mut buf_b);
///                 one_context(&key_a, &key_b); // two contexts: does not compile
///                 Ok::<_, Error>(())
///             })?;
///             Ok::<_, Error>(())
///         })?;
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct DeviceKey<'ctx, T> {
    graph: u64,
    index: usize,
    /// Invariant in `'ctx` (the crate's `Brand`): `ExecGraph::device_mut` takes a key of
    /// the graph's brand, and the graph is checked at run time. Were it covariant, keys of
    /// two contexts could be shortened to one brand.
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
