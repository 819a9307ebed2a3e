//! A scope's kernel launches ([`StreamScope::launch`]): planned and issued by
//! [`launch::plan`] (the launch path graph captures share), ordered by the scope.

use super::StreamScope;
use crate::context::StreamKind;
use crate::error::Result;
use crate::launch::{self, KernelArgs, KernelParams, Launch, LaunchConfig};

impl<'scope, 'env, 'ctx, K: StreamKind> StreamScope<'scope, 'env, 'ctx, K> {
    /// Queues a launch of `kernel` (`cuLaunchKernel`) with `args`, one per declared
    /// parameter: `&buffer` or a [`DeviceRef`](super::DeviceRef) for an
    /// [`In<T>`](crate::In) or an [`InPtr<T>`](crate::InPtr), `&mut buffer` or a
    /// [`DeviceMut`](super::DeviceMut) for an [`Out<T>`](crate::Out) or an
    /// [`OutPtr<T>`](crate::OutPtr), a number for a scalar. The kernel, the stream and
    /// every buffer share the context brand `'ctx`, and the scope keeps the kernel's module
    /// and every buffer borrowed until the kernel has run.
    ///
    /// Checked first, each a clear error with no driver call: the configuration (zero
    /// dimensions, more threads per block or more dynamic shared memory than the kernel
    /// allows), and that no `Out` or `OutPtr` argument overlaps another slice or pointer
    /// argument ([`Invalid::Overlap`](crate::Invalid::Overlap), naming both). A
    /// configuration with launch attributes (a cluster, a cooperative launch, a priority)
    /// goes through `cuLaunchKernelEx`, its attributes checked too: see
    /// [`LaunchConfig`](crate::LaunchConfig#launch-attributes).
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let module = ctx.module_from_ptx(include_str!("../../kernels/kernels.ptx"))?;
    ///     // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*, size_t).
    ///     let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
    ///     let mut d = ctx.from_slice(&[1.0f32; 8])?;
    ///     let stream = ctx.new_stream()?;
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
        let issue = |plan: &launch::Plan<'_>| {
            self.ordered(plan.spans, plan.globals, || {
                // SAFETY: every argument's memory and the kernel's module stay borrowed
                // until the scope has synchronized the stream; other streams of the scope
                // are ordered around the launch by `ordered`.
                unsafe { plan.issue() }
            })
        };
        let stream = self.stream.raw();
        // SAFETY: the scope borrows its stream, which is alive and of the kernel's context
        // (one brand).
        unsafe { launch::plan(kernel, config, args, stream, &self.launch_cache, issue) }
    }
}
