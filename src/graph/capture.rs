//! Capturing a graph: [`ContextGuard::capture`] and the work of a [`Capture`], with the
//! memory it lends back between replays.

use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use cuda_driver_sys::{CUctx_st, CUstream_st};

use crate::context::{self, Allocating, Brand, ContextGuard, Part, Phase};
use crate::driver::{self, CUgraph};
use crate::error::{Error, ErrorCode, Result};
use crate::launch::{
    self, KernelArgs, KernelMut, KernelParams, Launch, LaunchCache, LaunchConfig, ScopedKernel,
};
use crate::memory::{self, DeviceCopy, DeviceSlice, Memset, copy_ends_disjoint, lengths_match};
use crate::scope::sealed::IntoMut as _;
use crate::scope::{DeviceMut, HostMut, IntoDeviceMut, IntoDeviceRef, IntoHostMut, IntoHostRef};
use crate::span::Span;
use crate::stream::{Stream, StreamFlags};

#[cfg(doc)]
use super::ExecGraph;
use super::Graph;
use super::{
    CAPTURES, CaptureState, DeviceKey, GraphsStayOnTheirThread, Handle, HostKey, Lent, in_ctx, lock,
};
#[cfg(doc)]
use crate::scope::StreamScope;

/// The work of one capture, open for the length of a [`ContextGuard::capture`] closure:
/// its operations are recorded into the graph instead of running. They have the names and
/// arguments of a [`StreamScope`]'s, and borrow what they touch for `'g`, the graph's life
/// (see the [module documentation](crate::graph)).
///
/// Not `Send` and not `Sync`: a capture stays on the thread that opened it.
///
/// # The brand
///
/// `'c` (the capture's), `'g` (the graph's) and `'ctx` ([the
/// brand](crate::context#the-brand)) are invariant: captures of two contexts never have one
/// type, and a function that takes two captures of one context cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::Capture;
///
/// /// Takes two captures of one context.
/// fn one_context<'ctx>(_: &Capture<'_, '_, 'ctx>, _: &Capture<'_, '_, 'ctx>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     with_context(&device, ContextFlags::default(), |b| {
///         a.capture(|on_a| {
///             b.capture(|on_b| {
///                 one_context(on_a, on_b); // two contexts: does not compile
///                 Ok::<_, Error>(())
///             })?;
///             Ok::<_, Error>(())
///         })?;
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct Capture<'c, 'g: 'c, 'ctx: 'g> {
    stream: Handle<CUstream_st>,
    ctx: Handle<CUctx_st>,
    id: u64,
    state: Mutex<CaptureState>,
    /// What launches with attributes looked up (`launch/attributes.rs`).
    launch_cache: Mutex<LaunchCache>,
    /// Whether a panic was already unwinding when the capture began (one made in a `Drop`
    /// during an unwind): only a panic that starts after it is the closure's.
    began_unwinding: bool,
    /// Invariant in `'c`, the capture's brand: its views cannot leave it or reach another
    /// capture.
    _capture: PhantomData<&'c mut &'c ()>,
    /// Invariant in `'g`, so that it cannot shrink (as `'scope` in a stream scope): the
    /// graph holds what its operations borrow for all of `'g`, its whole life.
    _graph: PhantomData<&'g mut &'g ()>,
    /// Invariant in `'ctx` (the crate's `Brand`): a capture records work of its own
    /// context. Were it covariant, captures of two contexts could be shortened to one brand
    /// and pass for one another.
    _brand: Brand<'ctx>,
    _thread: PhantomData<GraphsStayOnTheirThread>,
}

// The bound is on the method, so that a run-phase guard gets `Allocating`'s message.
impl<'ctx, P: Phase, S: Part> ContextGuard<'ctx, P, S> {
    /// Captures the work `f` queues on its [`Capture`] into a graph of this context
    /// (`cuStreamBeginCapture` on a private stream, `cuStreamEndCapture` after `f`), and
    /// returns it with `f`'s value. Nothing runs: [`Graph::instantiate`] it, then launch it
    /// in a scope ([`ExecGraph::launch`]). See the [`graph`](crate::graph) module for
    /// the rules.
    ///
    /// If `f` returns an error or panics, or an operation of the capture failed (even if `f`
    /// went on), the capture is ended, the partial graph destroyed, and the error returned
    /// (the panic resumed).
    ///
    /// Any guard that may create takes part (the capture makes a stream of its own):
    ///
    /// * a plain guard;
    /// * a setup-phase guard of [`with_phases`](crate::with_phases): the graph (which
    ///   allocates nothing when it is launched: a capture has no allocating operation) is
    ///   captured, and best instantiated, in setup, then launched in the run phase;
    /// * a partition's guard: the capture's stream is one of the partition
    ///   (`cuGreenCtxStreamCreate`), so the graph's kernels are the partition's, and the
    ///   graph, branded `'p`, is launched only in a scope of one of the partition's streams
    ///   ([`ExecGraph::launch`]): its work runs on the partition's SMs.
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
    ///     ctx.new_stream()?.scope(|s| exec.launch(s))?;
    ///     drop(exec);
    ///     assert_eq!(a.to_vec()?[200], 2);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn capture<'g, R, E, F>(self, f: F) -> Result<(Graph<'g, 'ctx>, R), E>
    where
        P: Allocating,
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
            launch_cache: Mutex::new(LaunchCache::default()),
            began_unwinding: std::thread::panicking(),
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
        if std::thread::panicking() && !self.began_unwinding {
            // the closure panicked (a panic inside it while another unwinds would abort)
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
        slice.into_mut(crate::launch::sealed::Crate(()))
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
    /// # Errors
    /// [`Invalid::LengthMismatch`](crate::Invalid::LengthMismatch) if the lengths differ (before any
    /// driver call).
    pub fn copy_from_host<T: DeviceCopy>(
        &'c self,
        dst: impl IntoDeviceMut<'c, 'ctx, T>,
        src: impl IntoHostRef<'c, T>,
    ) -> Result<()> {
        let (dst, src) = (
            dst.into_mut(crate::launch::sealed::Crate(())),
            src.into_host_ref(crate::launch::sealed::Crate(())),
        );
        // refused through `op`, so that the capture fails even if the closure ignores it
        self.op(|| lengths_match("copy_from_host", dst.len(), src.len()))?;
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
    /// # Errors
    /// [`Invalid::LengthMismatch`](crate::Invalid::LengthMismatch) if the lengths differ (before any
    /// driver call).
    pub fn copy_to_host<T: DeviceCopy>(
        &'c self,
        dst: impl IntoHostMut<'c, T>,
        src: impl IntoDeviceRef<'c, 'ctx, T>,
    ) -> Result<()> {
        let (dst, src) = (
            dst.into_host_mut(crate::launch::sealed::Crate(())),
            src.into_ref(crate::launch::sealed::Crate(())),
        );
        // refused through `op`, so that the capture fails even if the closure ignores it
        self.op(|| lengths_match("copy_to_host", dst.len(), src.len()))?;
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
    /// # Errors
    /// [`Invalid::LengthMismatch`](crate::Invalid::LengthMismatch) if the lengths differ (before any
    /// driver call).
    pub fn copy_from_device<T: DeviceCopy>(
        &'c self,
        dst: impl IntoDeviceMut<'c, 'ctx, T>,
        src: impl IntoDeviceRef<'c, 'ctx, T>,
    ) -> Result<()> {
        let (dst, src) = (
            dst.into_mut(crate::launch::sealed::Crate(())),
            src.into_ref(crate::launch::sealed::Crate(())),
        );
        // refused through `op`, so that the capture fails even if the closure ignores it
        self.op(|| lengths_match("copy_from_device", dst.len(), src.len()))?;
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
        if let Err(e) = copy_ends_disjoint("Capture::copy_from_device", &spans[0], &spans[1]) {
            return self.op(|| Err(e));
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
        let dst = dst.into_mut(crate::launch::sealed::Crate(()));
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

    /// Captures a launch of `kernel` with `args` (a kernel node), planned and issued by the
    /// path of [`StreamScope::launch`], so checked as it is before the driver sees it: the
    /// configuration against the kernel's limits, its
    /// [launch attributes](LaunchConfig#launch-attributes), and that no `Out` argument
    /// overlaps another slice argument. The arguments' values are copied into the graph;
    /// the memory they name is held for the graph's life.
    ///
    /// A cluster and a cooperative launch are recorded with the node (`cuLaunchKernelEx` on
    /// the capturing stream; both are attributes of a graph's kernel nodes), checked
    /// against this context's device, the one every replay runs on. An update
    /// ([`ExecGraph::update`]) cannot turn a cooperative node into a plain one or back: the
    /// driver refuses it. A configuration with a priority is refused (`NotSupported`, and
    /// the capture makes no graph): a graph instantiated as this crate instantiates it runs
    /// its kernel nodes at the priority of the stream it is launched on, so the node would
    /// run without its own.
    pub fn launch<P: KernelParams>(
        &'c self,
        kernel: impl Launch<'c, 'ctx, P>,
        config: LaunchConfig,
        args: impl KernelArgs<'c, 'ctx, P>,
    ) -> Result<()> {
        self.op(|| {
            if config.priority.is_some() {
                return Err(Error::with_detail(
                    "Capture::launch",
                    ErrorCode::NotSupported,
                    "a launch with a priority is not captured, since the graph's node would \
                     run at the priority of the stream the graph is launched on: launch it in \
                     a stream scope, or give the graph's launch a stream of that priority",
                ));
            }
            if config.has_attributes() && !matches!(driver::loaded_version()?, 0 | 12000..) {
                return Err(Error::with_detail(
                    "Capture::launch",
                    ErrorCode::NotSupported,
                    "a cluster or cooperative launch is captured with a CUDA 12.0 driver or \
                     newer, which records the launch's attributes in the graph's node: launch \
                     it in a stream scope",
                ));
            }
            let issue = |plan: &launch::Plan<'_>| {
                // SAFETY: the kernel, its module and every argument's memory are held for
                // the graph's life, and the graph runs only in a scope, which orders it with
                // the scope's other work (`ExecGraph::launch`); the driver copies the
                // parameters' values into the node.
                unsafe { plan.issue() }
            };
            let (stream, cache) = (self.stream.get(), &self.launch_cache);
            // SAFETY: the capture's stream is alive (dropped after the capture) and of its
            // context, the kernel's (one brand).
            unsafe { launch::plan(kernel, config, args, stream, cache, issue) }
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
