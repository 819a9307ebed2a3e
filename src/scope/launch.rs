//! A scope's kernel launches ([`StreamScope::launch`]): the checks before the driver, and
//! launches with attributes (`cuLaunchKernelEx`).

use super::StreamScope;
use crate::context::StreamKind;
use crate::driver;
use crate::error::Result;
use crate::launch::{self, KernelArgs, KernelParams, Launch, LaunchConfig};
use crate::memory::first_overlap;

impl<'scope, 'env, 'ctx, K: StreamKind> StreamScope<'scope, 'env, 'ctx, K> {
    /// Queues a launch of `kernel` (`cuLaunchKernel`) with `args`, one per declared
    /// parameter: `&buffer` or a [`DeviceRef`](super::DeviceRef) for an
    /// [`In<T>`](crate::In), `&mut buffer` or a [`DeviceMut`](super::DeviceMut) for an
    /// [`Out<T>`](crate::Out), a number for a scalar. The kernel, the stream and every
    /// buffer share the context brand `'ctx`, and the scope keeps the
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
    ///     let module = ctx.load_ptx(include_str!("../../kernels/kernels.ptx"))?;
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
}
