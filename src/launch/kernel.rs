//! Typed kernels: [`Kernel`], [`KernelMut`] (a kernel that writes its module's globals)
//! and [`ScopedKernel`], and what a scope can launch ([`Launch`]'s implementations).

use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;

use super::sealed::{self, Target};
use super::{Function, KernelParams, Launch, LaunchConfig};
use crate::context::Brand;
use crate::driver::CUfunction;
use crate::error::{Error, ErrorCode, Result};

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
///     let module = ctx.module_from_ptx(include_str!("../../kernels/kernels.ptx"))?;
///     // SAFETY: scale(float*, size_t, float) writes only x[0..x_len] and no global.
///     let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
///     let mut x = ctx.from_slice(&[1.0f32; 1000])?;
///     let config = scale.config_for(x.len())?; // occupancy-based block size
///     ctx.new_stream()?.scope(|s| s.launch(&scale, config, (&mut x, 0.5f32)))?;
///     assert_eq!(x.to_vec()?[999], 0.5);
///     Ok(())
/// })
/// # }
/// ```
///
/// # The brand
///
/// Its brand is its function's (invariant in `'ctx`): kernels of two contexts never have
/// one type, and a function that takes two kernels of one context cannot be given one of
/// each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::Kernel;
///
/// type Scale = (Out<f32>, f32);
///
/// /// Takes two kernels of one context.
/// fn one_context<'ctx>(_: &Kernel<'_, 'ctx, Scale>, _: &Kernel<'_, 'ctx, Scale>) {}
///
/// # const PTX: &str = "";
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let module_a = a.module_from_ptx(PTX)?;
///     // SAFETY: scale(float*, size_t, float) writes only x[0..x_len] and no global.
///     let on_a = unsafe { module_a.kernel::<Scale>("scale") }?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let module_b = b.module_from_ptx(PTX)?;
///         // SAFETY: as above.
///         let on_b = unsafe { module_b.kernel::<Scale>("scale") }?;
///         one_context(&on_a, &on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct Kernel<'m, 'ctx, P> {
    /// The kernel's brand is its function's, invariant in `'ctx` (see `Function`'s field),
    /// so this type is invariant too.
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
///
/// # The brand
///
/// Its brand is its [`Kernel`]'s, so its function's (invariant in `'ctx`): kernels of two
/// contexts never have one type, and a function that takes two of one context cannot be
/// given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::KernelMut;
///
/// /// Takes two kernels of one context.
/// fn one_context<'ctx>(_: &KernelMut<'_, 'ctx, (i32,)>, _: &KernelMut<'_, 'ctx, (i32,)>) {}
///
/// # const PTX: &str = "";
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let mut module_a = a.module_from_ptx(PTX)?;
///     // SAFETY: bump(int) writes only the globals `counter` and `table`.
///     let on_a = unsafe { module_a.kernel_mut::<(i32,)>("bump") }?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let mut module_b = b.module_from_ptx(PTX)?;
///         // SAFETY: as above.
///         let on_b = unsafe { module_b.kernel_mut::<(i32,)>("bump") }?;
///         one_context(&on_a, &on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct KernelMut<'m, 'ctx, P> {
    /// The brand is the kernel's, invariant in `'ctx`, so this type is invariant too.
    kernel: Kernel<'m, 'ctx, P>,
    module: usize,
    _exclusive: PhantomData<&'m mut ()>,
}

/// A [`KernelMut`] bound to one stream scope by
/// [`StreamScope::bind_kernel`](crate::StreamScope::bind_kernel): `Copy`, so the scope can
/// launch it any number of times (in order, on its stream), and usable by that scope only.
///
/// # The brand
///
/// Both `'scope` (the scope's, as in [`StreamScope`](crate::StreamScope)) and `'ctx` ([the
/// brand](crate::context#the-brand)) are invariant: a bound kernel is launched by the scope
/// that bound it, on that scope's context. Bound kernels of two contexts never have one
/// type, even when a function leaves their scopes free:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::ScopedKernel;
///
/// /// Takes two bound kernels of one context (of any scopes).
/// fn one_context<'ctx>(_: ScopedKernel<'_, 'ctx, (i32,)>, _: ScopedKernel<'_, 'ctx, (i32,)>) {}
///
/// # const PTX: &str = "";
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let (mut module_a, stream_a) = (a.module_from_ptx(PTX)?, a.new_stream()?);
///     // SAFETY: bump(int) writes only the globals `counter` and `table`.
///     let mut bump_a = unsafe { module_a.kernel_mut::<(i32,)>("bump") }?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let (mut module_b, stream_b) = (b.module_from_ptx(PTX)?, b.new_stream()?);
///         // SAFETY: as above.
///         let mut bump_b = unsafe { module_b.kernel_mut::<(i32,)>("bump") }?;
///         stream_a.scope(|sa| {
///             stream_b.scope(|sb| {
///                 // two contexts: does not compile
///                 one_context(sa.bind_kernel(&mut bump_a), sb.bind_kernel(&mut bump_b));
///                 Ok(())
///             })
///         })
///     })
/// })
/// # }
/// ```
pub struct ScopedKernel<'scope, 'ctx, P> {
    function: CUfunction,
    max_threads: u32,
    max_dynamic_shared: u32,
    module: usize,
    /// Invariant in `'scope`, the binding scope's brand: the kernel stays borrowed until
    /// that scope has synchronized, and only that scope orders its launches.
    _scope: PhantomData<fn(&'scope ()) -> &'scope ()>,
    /// Invariant in `'ctx` (the crate's `Brand`), the kernel's context. Were it covariant,
    /// bound kernels of two contexts could be shortened to one brand.
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
        function_config_for(self.function, n)
    }

    /// Refreshes the limits a launch is checked against, after
    /// [`Function::set_max_dynamic_shared_bytes`].
    pub fn refresh_limits(&mut self) -> Result<()> {
        self.max_threads = self.function.max_threads_per_block()?;
        self.max_dynamic_shared = self.function.max_dynamic_shared_bytes()?;
        Ok(())
    }

    /// The kernel as a `Copy` handle for one scope, for the owning layer, whose batches hold
    /// their kernels for as long as their scope's work may run. It writes no globals
    /// (`module` 0), so a multi-stream scope would order it as it orders `&Kernel`.
    pub(crate) fn scoped<'scope>(&self) -> ScopedKernel<'scope, 'ctx, P> {
        ScopedKernel {
            function: self.function.raw(),
            max_threads: self.max_threads,
            max_dynamic_shared: self.max_dynamic_shared,
            module: 0,
            _scope: PhantomData,
            _brand: PhantomData,
            _params: PhantomData,
        }
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

impl<'ctx, P> ScopedKernel<'_, 'ctx, P> {
    /// A one-dimensional configuration covering `n` threads: see [`Kernel::config_for`].
    pub fn config_for(&self, n: usize) -> Result<LaunchConfig> {
        let raw = NonNull::new(self.function)
            .ok_or_else(|| Error::new("ScopedKernel::config_for", ErrorCode::InvalidHandle))?;
        // SAFETY: the function of a kernel the binding scope keeps loaded for `'scope`,
        // which `&self` is within; the result does not outlive this call.
        let function = unsafe { Function::<'_, 'ctx>::from_raw(raw) };
        function_config_for(function, n)
    }
}

/// The configuration of [`Kernel::config_for`] for `function`.
fn function_config_for(function: Function<'_, '_>, n: usize) -> Result<LaunchConfig> {
    let block = function.suggested_block_size(0)?.clamp(1, 1024);
    let grid = n.div_ceil(block as usize).clamp(1, i32::MAX as usize) as u32;
    Ok(LaunchConfig::linear(grid, block))
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
            // 0: bound from a plain `Kernel` (`Kernel::scoped`), which writes no globals
            globals: (self.module != 0).then_some(self.module),
        }
    }
}
impl<'scope, 'ctx, P: KernelParams> Launch<'scope, 'ctx, P> for ScopedKernel<'scope, 'ctx, P> {}
