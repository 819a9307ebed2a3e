//! Typed kernels: [`Kernel`], [`KernelMut`] (a kernel that writes its module's globals)
//! and [`ScopedKernel`], and what a scope can launch ([`Launch`]'s implementations).

use std::fmt;
use std::marker::PhantomData;

use super::sealed::{self, Target};
use super::{Function, KernelParams, Launch, LaunchConfig};
use crate::context::Brand;
use crate::driver::CUfunction;
use crate::error::Result;

/// A function whose parameter list `P` has been declared (an `unsafe` promise, see
/// [`Module::kernel`](crate::Module::kernel)), ready for [`StreamScope::launch`](crate::StreamScope::launch).
/// Keeps the two limits a launch is checked against, so checking costs no driver call.
///
/// It borrows its module (`'m`), so the module cannot be unloaded while a kernel of it
/// exists, and the stream scope that launches it borrows the kernel until the launch has
/// run.
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     let module = ctx.load_ptx(include_str!("../../kernels/kernels.ptx"))?;
///     // SAFETY: scale(float*, size_t, float) writes only x[0..x_len] and no global.
///     let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
///     let mut x = ctx.from_slice(&[1.0f32; 1000])?;
///     let config = scale.config_for(x.len())?; // occupancy-based block size
///     ctx.stream()?.scope(|s| s.launch(&scale, config, (&mut x, 0.5f32)))?;
///     assert_eq!(x.to_vec()?[999], 0.5);
///     Ok(())
/// })
/// # }
/// ```
pub struct Kernel<'m, 'ctx, P> {
    function: Function<'m, 'ctx>,
    max_threads: u32,
    max_dynamic_shared: u32,
    _params: PhantomData<fn(P)>,
}

/// A kernel that writes its module's global variables (`__device__` variables), declared
/// with [`Module::kernel_mut`](crate::Module::kernel_mut). It borrows its module *exclusively*, so while it exists the
/// host cannot read or write those globals ([`Module::global`](crate::Module::global) needs the module), and a
/// scope launches it through an exclusive borrow ([`StreamScope::bind_kernel`] or
/// `&mut kernel`), so no two streams run it unordered.
///
/// [`StreamScope::bind_kernel`]: crate::StreamScope::bind_kernel
pub struct KernelMut<'m, 'ctx, P> {
    kernel: Kernel<'m, 'ctx, P>,
    module: usize,
    _exclusive: PhantomData<&'m mut ()>,
}

/// A [`KernelMut`] bound to one stream scope by
/// [`StreamScope::bind_kernel`](crate::StreamScope::bind_kernel): `Copy`, so the scope can
/// launch it any number of times (in order, on its stream), and usable by that scope only.
pub struct ScopedKernel<'scope, 'ctx, P> {
    function: CUfunction,
    max_threads: u32,
    max_dynamic_shared: u32,
    module: usize,
    _scope: PhantomData<fn(&'scope ()) -> &'scope ()>,
    _brand: Brand<'ctx>,
    _params: PhantomData<fn(P)>,
}

impl<P> Clone for ScopedKernel<'_, '_, P> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<P> Copy for ScopedKernel<'_, '_, P> {}

impl<'m, 'ctx, P> Kernel<'m, 'ctx, P> {
    /// # Safety
    /// `P` is the function's parameter list, as [`Module::kernel`](crate::Module::kernel) requires.
    pub(crate) unsafe fn new(function: Function<'m, 'ctx>) -> Result<Self> {
        Ok(Kernel {
            function,
            max_threads: function.max_threads_per_block()?,
            max_dynamic_shared: function.max_dynamic_shared_bytes()?,
            _params: PhantomData,
        })
    }

    /// The underlying function (attributes, cache preference).
    pub fn function(&self) -> Function<'m, 'ctx> {
        self.function
    }

    /// A one-dimensional configuration covering `n` threads, with the block size that
    /// maximises occupancy (capped at 1024), and enough blocks for `n`.
    pub fn config_for(&self, n: usize) -> Result<LaunchConfig> {
        let block = self.function.suggested_block_size(0)?.clamp(1, 1024);
        let grid = n.div_ceil(block as usize).clamp(1, i32::MAX as usize) as u32;
        Ok(LaunchConfig::linear(grid, block))
    }

    /// Refreshes the limits a launch is checked against, after
    /// [`Function::set_max_dynamic_shared_bytes`].
    pub fn refresh_limits(&mut self) -> Result<()> {
        self.max_threads = self.function.max_threads_per_block()?;
        self.max_dynamic_shared = self.function.max_dynamic_shared_bytes()?;
        Ok(())
    }

    #[inline]
    fn target(&self, globals: Option<usize>) -> Target {
        Target {
            function: self.function.raw(),
            max_threads: self.max_threads,
            max_dynamic_shared: self.max_dynamic_shared,
            globals,
        }
    }
}

impl<'m, 'ctx, P> KernelMut<'m, 'ctx, P> {
    pub(crate) fn new(kernel: Kernel<'m, 'ctx, P>, module: usize) -> Self {
        KernelMut {
            kernel,
            module,
            _exclusive: PhantomData,
        }
    }

    /// The underlying function (attributes, cache preference). There is deliberately no
    /// way to get a plain [`Kernel`] out of a `KernelMut`: a `&Kernel` launches without the
    /// exclusive borrow that orders writes of the module's globals.
    pub fn function(&self) -> Function<'m, 'ctx> {
        self.kernel.function
    }

    /// A one-dimensional configuration covering `n` threads: see [`Kernel::config_for`].
    pub fn config_for(&self, n: usize) -> Result<LaunchConfig> {
        self.kernel.config_for(n)
    }

    pub(crate) fn scoped<'scope>(&self) -> ScopedKernel<'scope, 'ctx, P> {
        ScopedKernel {
            function: self.kernel.function.raw(),
            max_threads: self.kernel.max_threads,
            max_dynamic_shared: self.kernel.max_dynamic_shared,
            module: self.module,
            _scope: PhantomData,
            _brand: PhantomData,
            _params: PhantomData,
        }
    }
}

impl<P> fmt::Debug for Kernel<'_, '_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernel")
            .field("function", &self.function)
            .field("params", &std::any::type_name::<P>())
            .field("max_threads", &self.max_threads)
            .finish()
    }
}

impl<P> fmt::Debug for KernelMut<'_, '_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("KernelMut").field(&self.kernel).finish()
    }
}

impl<P> fmt::Debug for ScopedKernel<'_, '_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopedKernel")
            .field("function", &self.function)
            .field("params", &std::any::type_name::<P>())
            .finish()
    }
}

// SAFETY: a function handle plus plain numbers; launching from several threads at once is
// thread-safe in the driver.
unsafe impl<P> Send for Kernel<'_, '_, P> {}
// SAFETY: as above.
unsafe impl<P> Sync for Kernel<'_, '_, P> {}
// SAFETY: as for `Kernel`. `&KernelMut` allows no launch: launching needs `&mut KernelMut`
// or a `ScopedKernel` bound from one, and nothing hands out the inner `Kernel`.
unsafe impl<P> Send for KernelMut<'_, '_, P> {}
// SAFETY: as above.
unsafe impl<P> Sync for KernelMut<'_, '_, P> {}

impl<'scope, 'm, 'ctx, P: KernelParams> sealed::Launch<'scope, 'ctx, P>
    for &'scope Kernel<'m, 'ctx, P>
{
    #[inline(always)]
    fn target(&self) -> Target {
        Kernel::target(self, None)
    }
}
impl<'scope, 'm, 'ctx, P: KernelParams> Launch<'scope, 'ctx, P> for &'scope Kernel<'m, 'ctx, P> {}

impl<'scope, 'm, 'ctx, P: KernelParams> sealed::Launch<'scope, 'ctx, P>
    for &'scope mut KernelMut<'m, 'ctx, P>
{
    #[inline(always)]
    fn target(&self) -> Target {
        self.kernel.target(Some(self.module))
    }
}
impl<'scope, 'm, 'ctx, P: KernelParams> Launch<'scope, 'ctx, P>
    for &'scope mut KernelMut<'m, 'ctx, P>
{
}

impl<'scope, 'ctx, P: KernelParams> sealed::Launch<'scope, 'ctx, P>
    for ScopedKernel<'scope, 'ctx, P>
{
    #[inline(always)]
    fn target(&self) -> Target {
        Target {
            function: self.function,
            max_threads: self.max_threads,
            max_dynamic_shared: self.max_dynamic_shared,
            globals: Some(self.module),
        }
    }
}
impl<'scope, 'ctx, P: KernelParams> Launch<'scope, 'ctx, P> for ScopedKernel<'scope, 'ctx, P> {}
