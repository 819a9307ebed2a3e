//! The captured [`Graph`] and its executable form [`ExecGraph`]: replays in a scope
//! ([`ExecGraph::launch`]), updates, the memory it lends back.

use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;

use cuda_driver_sys::{CUctx_st, CUgraph_st, CUgraphExec_st};

use crate::context::{Brand, StreamKind};
use crate::driver::{self, CUgraph, CUgraphExec};
use crate::error::{Error, ErrorCode, Result};
use crate::memory::{DeviceCopy, DeviceSlice};
use crate::scope::StreamScope;
use crate::span::Touched;
use crate::synchronous;

use super::{DeviceKey, GraphsStayOnTheirThread, Handle, HostKey, Lent, in_ctx};
#[cfg(doc)]
use crate::context::ContextGuard;

/// A captured graph (`CUgraph`) of the context branded `'ctx`, holding the memory its
/// operations touch for `'g` (see the [module documentation](crate::graph)). Made by
/// [`ContextGuard::capture`]; [`instantiate`](Graph::instantiate) it to replay it, or pass
/// it to [`ExecGraph::update`].
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)), on its own and not only
/// through the guard that made it: graphs of two contexts never have one type, and a
/// function that takes two of one context cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::Graph;
///
/// /// Takes two graphs of one context.
/// fn one_context<'ctx>(_: &Graph<'_, 'ctx>, _: &Graph<'_, 'ctx>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let (on_a, ()) = a.capture(|_| Ok::<_, Error>(()))?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let (on_b, ()) = b.capture(|_| Ok::<_, Error>(()))?;
///         one_context(&on_a, &on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct Graph<'g, 'ctx: 'g> {
    pub(super) raw: Handle<CUgraph_st>,
    pub(super) ctx: Handle<CUctx_st>,
    pub(super) id: u64,
    pub(super) lent: Box<[Lent]>,
    pub(super) _borrows: PhantomData<&'g mut ()>,
    /// Invariant in `'ctx` (the crate's `Brand`): a graph is instantiated and replayed in
    /// its own context. Were it covariant, graphs of two contexts could be shortened to one
    /// brand and pass for one another.
    pub(super) _brand: Brand<'ctx>,
    pub(super) _thread: PhantomData<GraphsStayOnTheirThread>,
}

impl<'g, 'ctx> Graph<'g, 'ctx> {
    /// The handle, for the crate's own calls.
    #[inline]
    pub(crate) fn raw(&self) -> CUgraph {
        self.raw.get()
    }

    /// The driver's handle (`CUgraph`), for calls this crate does not wrap, once every
    /// pending synchronous operation of the crate is done: a graph names no memory the
    /// crate's order of synchronous operations can see (a scope's graph launch waits for
    /// every pending one, on the GPU), and one launched through the driver is not the
    /// crate's to order, so this call waits on the host for every pending one first, as
    /// [`ContextGuard::as_raw`](crate::ContextGuard::as_raw) does. One atomic load while
    /// nothing is pending. Only what is pending when the call is made. Where the wait
    /// cannot run or fails, the handle is returned all the same, as
    /// [`DeviceSlice::as_device_ptr`](crate::DeviceSlice::as_device_ptr) says.
    ///
    /// # Safety
    ///
    /// Taking the handle does nothing; `unsafe` marks what it allows behind the borrow
    /// checker's back. The caller promises, for every use of the handle: the graph is not
    /// destroyed (`cuGraphDestroy`) or changed (nodes added or removed, their parameters
    /// set: the graph holds exactly the memory its captured nodes use, and instantiation
    /// and updates rely on it); and the handle is not used after this `Graph` is dropped.
    #[inline]
    pub unsafe fn as_raw(&self) -> crate::driver::handles::CUgraph {
        synchronous::before_raw_escape(Touched::Anything);
        self.raw().cast()
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
/// its operations touch for `'g`: [`launch`](ExecGraph::launch) it in a scope of any stream
/// of the context, any number of times; between replays it lends its lent memory back
/// ([`host_mut`](ExecGraph::host_mut), [`device_mut`](ExecGraph::device_mut)).
///
/// Not `Sync` (the driver's graph objects are not thread-safe) and not `Send`.
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)), on its own and not only
/// through the guard that made it: executable graphs of two contexts never have one type,
/// and a function that takes two of one context cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::ExecGraph;
///
/// /// Takes two executable graphs of one context.
/// fn one_context<'ctx>(_: &ExecGraph<'_, 'ctx>, _: &ExecGraph<'_, 'ctx>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let on_a = a.capture(|_| Ok::<_, Error>(()))?.0.instantiate()?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let on_b = b.capture(|_| Ok::<_, Error>(()))?.0.instantiate()?;
///         one_context(&on_a, &on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct ExecGraph<'g, 'ctx: 'g> {
    raw: Handle<CUgraphExec_st>,
    ctx: Handle<CUctx_st>,
    id: u64,
    lent: Box<[Lent]>,
    nodes: usize,
    _borrows: PhantomData<&'g mut ()>,
    /// Invariant in `'ctx` (the crate's `Brand`): a graph replays on streams of its own
    /// context only. Were it covariant, executable graphs of two contexts could be
    /// shortened to one brand and pass for one another.
    _brand: Brand<'ctx>,
    _thread: PhantomData<GraphsStayOnTheirThread>,
}

impl<'g, 'ctx> ExecGraph<'g, 'ctx> {
    /// The handle, for the crate's own calls.
    #[inline]
    pub(crate) fn raw(&self) -> CUgraphExec {
        self.raw.get()
    }

    /// The driver's handle (`CUgraphExec`), for calls this crate does not wrap, once every
    /// pending synchronous operation of the crate is done (waited for on the host, as
    /// [`Graph::as_raw`] says): a launch through the driver (`cuGraphLaunch`) then finds
    /// the memory the graph touches written, the lent buffers' writes between replays
    /// included.
    ///
    /// # Safety
    ///
    /// Taking the handle does nothing; `unsafe` marks what it allows behind the borrow
    /// checker's back. The caller promises, for every use of the handle: the executable
    /// graph is not destroyed (`cuGraphExecDestroy`) or changed (`cuGraphExec*SetParams`,
    /// `cuGraphExecUpdate`); the handle is not used after this `ExecGraph` is dropped; and
    /// it is launched through the driver (`cuGraphLaunch`) only where [`ExecGraph::launch`]
    /// would launch it: the memory it touches alive and used by nothing else until the
    /// launch has finished.
    #[inline]
    pub unsafe fn as_raw(&self) -> crate::driver::handles::CUgraphExec {
        synchronous::before_raw_escape(Touched::Anything);
        self.raw().cast()
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

    /// Queues a replay of this executable graph (`cuGraphLaunch`) on `scope`'s stream, a
    /// stream of its context. The scope borrows the graph until it has synchronized, so the
    /// graph cannot lend its memory out or be dropped while a replay may run. Replays of one
    /// executable graph run one at a time, in the order they were queued, whatever their
    /// streams (the driver orders them). Any stream of the context takes it: a preallocated
    /// one of [`with_phases`](crate::with_phases) too, since a replay allocates nothing (a
    /// capture records no allocation), and a partition's, where the graph is the
    /// partition's ([`ContextGuard::capture`]).
    ///
    /// In a multi-stream scope a replay needs no entry in the lane record: the graph holds
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
    ///     let (s1, s2) = (ctx.new_stream()?, ctx.new_stream()?);
    ///     s1.scope(|s| exec.launch(s))?; // on any stream of the context
    ///     s2.scope(|s| {
    ///         exec.launch(s)?;
    ///         exec.launch(s) // any number of times
    ///     })?;
    ///     Ok(())
    /// })
    /// # }
    /// ```
    #[inline]
    pub fn launch<'scope, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
    ) -> Result<()> {
        let stream = scope.stream().raw();
        let exec = self.raw();
        scope.ordered(&[], None, || {
            let launch = || {
                // SAFETY: the executable graph and the stream are alive and of one context
                // (one brand); every memory the graph reaches is held by it for 'g, and the
                // scope borrows the graph until it has synchronized the stream.
                unsafe { driver::graph_launch(exec, stream) }
            };
            in_ctx(self.ctx, launch)
        })
    }

    /// Rebinds the executable graph to the memory of `graph`, a capture of the same
    /// operations (same topology, kernels and kinds of copies) on other buffers, without
    /// instantiating it again (`cuGraphExecUpdate`, CUDA 12.0). The result holds `graph`'s
    /// borrows and lends `graph`'s keys; the old borrows end.
    ///
    /// On failure the executable graph is gone (dropped); [`ExecGraph::update_or_keep`] hands
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
    ///     ctx.new_stream()?.scope(|s| exec.launch(s))?;
    ///     drop(exec);
    ///     assert_eq!((a.to_vec()?[0], b.to_vec()?[0]), (0, 1));
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn update<'h>(self, graph: Graph<'h, 'ctx>) -> Result<ExecGraph<'h, 'ctx>> {
        self.update_or_keep(graph).map_err(UpdateError::into_error)
    }

    /// As [`ExecGraph::update`], handing the executable graph back, unchanged, where the
    /// driver refused the update (`CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE`: another topology,
    /// another kernel, another kind of copy): then [`UpdateError::into_exec`] is `Some`.
    pub fn update_or_keep<'h>(
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

/// A failed [`ExecGraph::update_or_keep`]: the error, and the executable graph unchanged where the
/// driver refused the update (`CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE`).
///
/// # The brand
///
/// Its brand is its executable graph's (invariant in `'ctx`): failed updates of two
/// contexts never have one type:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::{ExecGraph, UpdateError};
///
/// /// Takes two failed updates of one context.
/// fn one_context<'ctx>(_: &UpdateError<'_, 'ctx>, _: &UpdateError<'_, 'ctx>) {}
///
/// /// An update of `exec` that the driver refused (a stand-in for this example).
/// fn refused<'g, 'ctx>(exec: ExecGraph<'g, 'ctx>) -> UpdateError<'g, 'ctx> {
///     unimplemented!("{exec:?}")
/// }
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let on_a = refused(a.capture(|_| Ok::<_, Error>(()))?.0.instantiate()?);
///     with_context(&device, ContextFlags::default(), |b| {
///         let on_b = refused(b.capture(|_| Ok::<_, Error>(()))?.0.instantiate()?);
///         one_context(&on_a, &on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct UpdateError<'g, 'ctx: 'g> {
    error: Error,
    /// The brand is the executable graph's, invariant in `'ctx`, so this type is invariant
    /// too.
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
