//! [`Plan`]: a kernel launch with everything decided before the driver call, made by
//! [`plan`] and queued by [`Plan::issue`]. It is the one launch path: a stream scope
//! ([`StreamScope::launch`](crate::StreamScope::launch)) and a graph capture
//! ([`Capture::launch`](crate::Capture::launch)) both plan and issue through it, and add
//! only what is theirs (a scope orders its other streams around the launch; a capture
//! records a failure and refuses a priority).

use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Mutex;

use super::attributes::{self, LaunchCache, Prepared};
use super::sealed::{self, Crate};
use super::{KernelArgs, KernelParams, Launch, LaunchConfig, check_config, launch_overlap};
use crate::driver::{self, CUfunction, CUstream};
use crate::error::Result;
use crate::memory::{Span, first_overlap};

/// A checked launch, ready for the driver: the kernel's function, its checked
/// configuration, its checked attributes laid out for `cuLaunchKernelEx`, the stream it
/// was checked for, the `void**` parameter array and the memory each argument touches.
/// It lives inside [`plan`]'s call, whose frame holds the arguments' bytes (`'a`).
pub(crate) struct Plan<'a> {
    function: CUfunction,
    config: LaunchConfig,
    stream: CUstream,
    /// The attributes, checked and laid out; `None`: a plain launch (`cuLaunchKernel`).
    attributes: Option<Prepared>,
    /// The memory each argument touches, in argument order (none for a scalar).
    pub(crate) spans: &'a [Span],
    /// The module whose globals the kernel writes, for a [`KernelMut`](super::KernelMut).
    pub(crate) globals: Option<usize>,
    /// One pointer per C parameter, each to a value of its type in `plan`'s frame.
    params: *mut *mut c_void,
    /// The arguments' bytes that `params` points at, alive for `'a`.
    _frame: PhantomData<&'a mut [*mut c_void]>,
}

/// Plans a launch of `kernel` with `config` and `args` on `stream`, and hands the plan to
/// `then`, which issues it ([`Plan::issue`]) after what its caller adds. Checked first, in
/// this order, each an error before any driver call is queued: the configuration against
/// the kernel's limits ([`check_config`]); a configuration's attributes, with what `cache`
/// holds of the stream's device and the kernel (see
/// [`LaunchConfig`](LaunchConfig#launch-attributes)); that no `Out` argument overlaps
/// another slice argument.
///
/// # Safety
/// `stream` is live and of the kernel's context (one brand), for this call.
#[inline(always)]
pub(crate) unsafe fn plan<'s, 'ctx, P: KernelParams>(
    kernel: impl Launch<'s, 'ctx, P>,
    config: LaunchConfig,
    args: impl KernelArgs<'s, 'ctx, P>,
    stream: CUstream,
    cache: &Mutex<LaunchCache>,
    then: impl FnOnce(&Plan<'_>) -> Result<()>,
) -> Result<()> {
    let target = sealed::Launch::target(&kernel);
    check_config(&config, &target)?;
    let attributes = if config.has_attributes() {
        // SAFETY: the caller guarantees the stream; the target's function is the kernel's,
        // borrowed by the launch, of the stream's context (one brand).
        Some(unsafe { attributes::prepare(cache, stream, &target, &config) }?)
    } else {
        None
    };
    sealed::Args::with_params(args, Crate(()), |spans, params| {
        if let Some((i, j)) = first_overlap(spans) {
            return Err(launch_overlap(spans, i, j));
        }
        then(&Plan {
            function: target.function,
            config,
            stream,
            attributes,
            spans,
            globals: target.globals,
            params,
            _frame: PhantomData,
        })
    })
}

impl Plan<'_> {
    /// Queues the launch on the stream it was planned for: `cuLaunchKernel`, or for a
    /// configuration with attributes `cuLaunchKernelEx` (`cuLaunchCooperativeKernel` on a
    /// driver before CUDA 11.8). On a capturing stream the driver records it, with its
    /// attributes, as a kernel node.
    ///
    /// # Safety
    /// Every memory the kernel reaches (each argument's, and its module's) stays valid
    /// until the stream has run the launch (for a capture, for the graph's life), and no
    /// work the stream is not ordered with writes it, or reads what an `Out` argument
    /// names, meanwhile.
    #[inline(always)]
    pub(crate) unsafe fn issue(&self) -> Result<()> {
        let c = &self.config;
        match &self.attributes {
            // SAFETY: the kernel's declaration (the promise of `Module::kernel`) makes
            // `params` one pointer per C parameter, each to a value of its type, alive for
            // this call (`'a`: `plan` has not returned); the stream is live and of the
            // kernel's context (`plan`'s promise); the memory is the caller's promise.
            None => unsafe {
                driver::launch_kernel(
                    self.function,
                    c.grid,
                    c.block,
                    c.shared_mem_bytes,
                    self.stream,
                    self.params,
                )
            },
            // SAFETY: as above; the attributes were checked for this function, stream and
            // configuration and laid out by `attributes::prepare`.
            Some(prepared) => unsafe {
                prepared.launch(self.function, c, self.stream, self.params)
            },
        }
    }
}
