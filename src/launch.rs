//! Launching kernels: typed kernels ([`Kernel`], [`KernelMut`]), their parameter lists
//! ([`In`], [`Out`], [`ByValue`] and the scalars), launch configurations
//! ([`LaunchConfig`]), and what is checked before the driver sees a launch.
//!
//! # What stays `unsafe`, and why
//!
//! The driver cannot check a kernel's signature or what memory it touches. So declaring a
//! kernel, naming its parameter list as Rust types, is the one `unsafe` promise
//! ([`Module::kernel`](crate::Module::kernel)). After it every launch is safe code:
//!
//! * the arguments are type-checked against the declaration (a buffer for each [`In`] or
//!   [`Out`], a value of exactly the declared type for each scalar);
//! * the kernel, the stream and every buffer share one context brand;
//! * the stream scope keeps every buffer (and the kernel's module) borrowed until the
//!   kernel has run;
//! * an [`Out`] slice must not share memory with any other slice argument of the same
//!   launch: checked before the driver call (pairs of at most 12 arguments, nanoseconds),
//!   an error naming the two arguments otherwise;
//! * the grid, the block and the dynamic shared memory are checked against the kernel's
//!   limits, an error otherwise.
//!
//! Every trait here that decides what reaches the driver (the parameter list, how an
//! argument is laid out, the `void**` array handed to `cuLaunchKernel`) is *sealed*: only
//! this crate implements it, so no user type can forge a pointer or a length. The compile
//! errors are pinned in `ui-tests/fail/soundness_*`.

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ptr::NonNull;

use cuda_driver_sys::CUfunc_st;

pub(crate) mod counts;

use crate::context::{Brand, CacheConfig};
use crate::driver::{self, CUfunction};
use crate::error::{Error, ErrorCode, Result};
use crate::memory::{DeviceBuffer, DeviceCopy, DeviceSlice, Span, overlap_error};

/// A function of a module (`CUfunction`), borrowing the module `'m` of the context
/// branded `'ctx`. One pointer wide. Launch it after declaring its parameters with
/// [`Function::typed`] (or [`Module::kernel`](crate::Module::kernel)).
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     let module = ctx.load_ptx(include_str!("../kernels/kernels.ptx"))?;
///     let f = module.function("sum_u64")?;
///     println!("{} registers, {} B static shared memory", f.num_registers()?, f.static_shared_bytes()?);
///     assert!(f.max_threads_per_block()? >= 256);
///     Ok(())
/// })
/// # }
/// ```
pub struct Function<'m, 'ctx> {
    raw: NonNull<CUfunc_st>,
    _module: PhantomData<(&'m (), Brand<'ctx>)>,
}

// SAFETY: function handles may be used from any thread; attribute calls are thread-safe.
unsafe impl Send for Function<'_, '_> {}
// SAFETY: as above.
unsafe impl Sync for Function<'_, '_> {}

impl Clone for Function<'_, '_> {
    fn clone(&self) -> Self {
        *self
    }
}
impl Copy for Function<'_, '_> {}

/// A function attribute (`CUfunction_attribute`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FunctionAttribute {
    /// Maximum threads per block a launch may use (depends on the registers it needs).
    MaxThreadsPerBlock = 0,
    /// Statically allocated shared memory per block, in bytes.
    SharedSizeBytes = 1,
    /// Constant memory used, in bytes.
    ConstSizeBytes = 2,
    /// Local memory per thread, in bytes.
    LocalSizeBytes = 3,
    /// Registers per thread.
    NumRegs = 4,
    /// The virtual architecture its PTX was compiled for, major * 10 + minor (75 for
    /// `compute_75`).
    PtxVersion = 5,
    /// The binary architecture it was compiled for, major * 10 + minor.
    BinaryVersion = 6,
    /// Whether it was compiled with caching of global loads in L1 (`-Xptxas -dlcm=ca`).
    CacheModeCa = 7,
    /// Maximum dynamic shared memory per block a launch may use, in bytes (settable).
    MaxDynamicSharedSizeBytes = 8,
    /// Preferred shared memory carve-out, in percent of the maximum (settable).
    PreferredSharedMemoryCarveout = 9,
    /// Whether a launch must give a cluster size (CUDA 11.8).
    ClusterSizeMustBeSet = 10,
    /// The cluster width the kernel was compiled for (`__cluster_dims__`), 0 if none.
    RequiredClusterWidth = 11,
    /// The cluster height the kernel was compiled for, 0 if none.
    RequiredClusterHeight = 12,
    /// The cluster depth the kernel was compiled for, 0 if none.
    RequiredClusterDepth = 13,
    /// Whether launches may use clusters larger than the portable 8 blocks (settable:
    /// [`Function::set_non_portable_cluster_size_allowed`]).
    NonPortableClusterSizeAllowed = 14,
}

impl<'m, 'ctx> Function<'m, 'ctx> {
    /// # Safety
    /// `raw` is a function of a module of the context `'ctx` that stays loaded for `'m`.
    pub(crate) unsafe fn from_raw(raw: NonNull<CUfunc_st>) -> Self {
        Function {
            raw,
            _module: PhantomData,
        }
    }

    /// The handle, for the crate's own calls.
    #[inline]
    pub(crate) fn raw(&self) -> CUfunction {
        self.raw.as_ptr()
    }

    /// The driver's handle (`CUfunction`), for calls this crate does not wrap.
    ///
    /// # Safety
    ///
    /// Taking the handle does nothing; `unsafe` marks what it allows behind the borrow
    /// checker's back. The caller promises, for every use of the handle: it is not used
    /// after the module or library this function borrows is unloaded; and a launch through
    /// it (`cuLaunchKernel`) keeps the promise of [`Module::kernel`](crate::Module::kernel)
    /// for its parameters and touches this crate's memory only as a
    /// [`StreamScope`](crate::StreamScope) launch would (read while nothing writes it,
    /// written while nothing else uses it, alive until the kernel has finished).
    #[inline]
    pub unsafe fn as_raw(&self) -> CUfunction {
        self.raw()
    }

    /// One attribute's value (`cuFuncGetAttribute`).
    pub fn attribute(&self, attribute: FunctionAttribute) -> Result<i32> {
        // SAFETY: the function is alive (it borrows its module).
        unsafe { driver::func_get_attribute(self.raw(), attribute as i32) }
    }

    /// The most threads per block a launch of this function may use.
    pub fn max_threads_per_block(&self) -> Result<u32> {
        Ok(self.attribute(FunctionAttribute::MaxThreadsPerBlock)? as u32)
    }

    /// Registers per thread.
    pub fn num_registers(&self) -> Result<u32> {
        Ok(self.attribute(FunctionAttribute::NumRegs)? as u32)
    }

    /// Statically allocated shared memory per block, in bytes.
    pub fn static_shared_bytes(&self) -> Result<u32> {
        Ok(self.attribute(FunctionAttribute::SharedSizeBytes)? as u32)
    }

    /// The most dynamic shared memory per block a launch may use, in bytes.
    pub fn max_dynamic_shared_bytes(&self) -> Result<u32> {
        Ok(self.attribute(FunctionAttribute::MaxDynamicSharedSizeBytes)? as u32)
    }

    /// Raises (or lowers) the dynamic shared memory a launch may use
    /// (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`); beyond 48 KiB only on devices
    /// that allow it, up to their opt-in maximum.
    pub fn set_max_dynamic_shared_bytes(&self, bytes: u32) -> Result<()> {
        // SAFETY: the function is alive.
        unsafe {
            driver::func_set_attribute(
                self.raw(),
                FunctionAttribute::MaxDynamicSharedSizeBytes as i32,
                bytes as i32,
            )
        }
    }

    /// The virtual architecture its PTX targets, e.g. 75 for a module compiled for
    /// `compute_75`.
    pub fn ptx_version(&self) -> Result<u32> {
        Ok(self.attribute(FunctionAttribute::PtxVersion)? as u32)
    }

    /// The binary architecture, e.g. 90 on an H100.
    pub fn binary_version(&self) -> Result<u32> {
        Ok(self.attribute(FunctionAttribute::BinaryVersion)? as u32)
    }

    /// Sets this function's preference between L1 cache and shared memory.
    pub fn set_cache_config(&self, config: CacheConfig) -> Result<()> {
        // SAFETY: the function is alive.
        unsafe { driver::func_set_cache_config(self.raw(), config.raw()) }
    }

    /// The block size that maximises occupancy for `dynamic_shared_bytes` of dynamic
    /// shared memory per block (`cuOccupancyMaxPotentialBlockSize`).
    pub fn suggested_block_size(&self, dynamic_shared_bytes: u32) -> Result<u32> {
        // SAFETY: the function is alive.
        let (_, block) =
            unsafe { driver::occupancy_block_size(self.raw(), dynamic_shared_bytes as usize) }?;
        Ok(block as u32)
    }

    /// Allows (or forbids again) launches of this function with clusters larger than the
    /// portable 8 blocks (`CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`; 16 on an
    /// H100). Set it before the scopes that launch such clusters: a scope keeps the
    /// cluster limit it looked up for a kernel.
    pub fn set_non_portable_cluster_size_allowed(&self, allowed: bool) -> Result<()> {
        // SAFETY: the function is alive.
        unsafe {
            driver::func_set_attribute(
                self.raw(),
                FunctionAttribute::NonPortableClusterSizeAllowed as i32,
                allowed as i32,
            )
        }
    }

    /// The kernel's C parameters as the driver lays them out (`cuFuncGetParamInfo`, CUDA
    /// 12.4): the offset and size in bytes of each, in order. A driver older than 12.4
    /// answers with [`ErrorCode::DriverTooOld`].
    ///
    /// The driver is asked only about parameters the kernel has, so the call provokes no
    /// driver error (nothing for compute-sanitizer to report): the count comes from
    /// `cuFuncGetParamCount` (CUDA 13.2) or, on older drivers, from the PTX or image the
    /// module or library was loaded from. Only for a kernel whose image the crate cannot
    /// read (see [`Module::kernel`](crate::Module::kernel)) is the driver asked one index
    /// too far, the `CUDA_ERROR_INVALID_VALUE` that marks the end.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// # let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let module = ctx.load_ptx(include_str!("../kernels/kernels.ptx"))?;
    ///     // scale(float *x, size_t x_len, float k)
    ///     let params = module.function("scale")?.params()?;
    ///     let layout: Vec<(usize, usize)> = params.iter().map(|p| (p.offset, p.size)).collect();
    ///     assert_eq!(layout, [(0, 8), (8, 8), (16, 4)]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn params(&self) -> Result<Vec<ParamInfo>> {
        driver_params(*self)
    }

    /// How many blocks of `block_threads` threads with `dynamic_shared_bytes` of dynamic
    /// shared memory can be resident on one multiprocessor at once
    /// (`cuOccupancyMaxActiveBlocksPerMultiprocessor`); times the device's multiprocessor
    /// count, the largest grid a cooperative launch may have.
    pub fn max_active_blocks_per_multiprocessor(
        &self,
        block_threads: u32,
        dynamic_shared_bytes: u32,
    ) -> Result<u32> {
        // SAFETY: the function is alive.
        let blocks = unsafe {
            driver::occupancy_max_active_blocks(
                self.raw(),
                block_threads,
                dynamic_shared_bytes as usize,
            )
        }?;
        Ok(blocks.max(0) as u32)
    }

    /// Declares the function's parameter list; see [`Module::kernel`](crate::Module::kernel).
    ///
    /// Where the driver reports a kernel's parameters (`cuFuncGetParamInfo`, CUDA 12.4 or
    /// newer), the declaration is checked against them first: the number of C parameters
    /// (a slice [`In<T>`]/[`Out<T>`] is two: its pointer and its `size_t` length), then the
    /// size and offset of each, an error naming the first that differs. This catches a
    /// wrong count or a wrong scalar width; it cannot catch a pointer to the wrong element
    /// type or a kernel that reads out of bounds, so the declaration stays `unsafe`. Where
    /// the driver cannot report them (older drivers; or the query fails) nothing is
    /// checked. The driver is asked only about parameters the kernel has (see
    /// [`Function::params`]), so a declaration provokes no driver error.
    ///
    /// # Safety
    /// As for [`Module::kernel`](crate::Module::kernel).
    pub unsafe fn typed<P: KernelParams>(self) -> Result<Kernel<'m, 'ctx, P>> {
        // SAFETY: the caller's promise.
        unsafe { self.typed_as("Function::typed") }
    }

    /// [`Function::typed`], its errors naming `call`.
    ///
    /// # Safety
    /// As for [`Module::kernel`](crate::Module::kernel).
    pub(crate) unsafe fn typed_as<P: KernelParams>(
        self,
        call: &'static str,
    ) -> Result<Kernel<'m, 'ctx, P>> {
        check_declaration::<P>(call, self)?;
        // SAFETY: the caller's promise.
        unsafe { Kernel::new(self) }
    }
}

/// More C parameters than any kernel can have (CUDA passes at most 32 764 bytes of them).
const MAX_C_PARAMS: usize = 32_764;

/// One C parameter of a kernel as the driver lays it out: [`Function::params`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ParamInfo {
    /// Its offset in the kernel's parameter buffer, in bytes.
    pub offset: usize,
    /// Its size in bytes.
    pub size: usize,
}

/// The parameters of `function` as the driver lays them out, asking `cuFuncGetParamInfo`
/// only about parameters the kernel has where their count is known (`counts`).
fn driver_params(function: Function<'_, '_>) -> Result<Vec<ParamInfo>> {
    let all = counts::read_params(counts::count_of(function), MAX_C_PARAMS, |index| {
        // SAFETY: the function is alive (it borrows its module or library).
        unsafe { driver::func_param_info(function.raw(), index) }
    })?;
    Ok(all
        .into_iter()
        .map(|(offset, size)| ParamInfo { offset, size })
        .collect())
}

/// Checks the parameter list `P` against what the driver reports for `function` (see
/// [`Function::typed`]); `Ok` where the driver cannot report it.
fn check_declaration<P: KernelParams>(
    call: &'static str,
    function: Function<'_, '_>,
) -> Result<()> {
    let mut declared = Vec::with_capacity(<P as sealed::Params>::C_PARAMS);
    <P as sealed::Params>::slots(&mut declared);
    let actual = match driver_params(function) {
        Ok(actual) if actual.len() <= MAX_C_PARAMS => actual,
        // an older driver, or one that cannot say: nothing to check against
        _ => return Ok(()),
    };
    match declaration_problem(&declared, &actual) {
        None => Ok(()),
        Some(problem) => Err(Error::with_detail(call, ErrorCode::InvalidValue, problem)),
    }
}

/// What differs between a declared parameter list and the kernel's, in words; `None`
/// where they agree.
fn declaration_problem(declared: &[sealed::Slot], actual: &[ParamInfo]) -> Option<String> {
    if declared.len() != actual.len() {
        return Some(format!(
            "the declaration has {} C parameters, the kernel has {} (a slice `In<T>` or \
             `Out<T>` is two: a pointer and a `size_t` length)",
            declared.len(),
            actual.len()
        ));
    }
    let mut end = 0usize;
    for (i, (slot, kernel)) in declared.iter().zip(actual).enumerate() {
        let offset = end.next_multiple_of(slot.align.max(1));
        end = offset + slot.size;
        if (offset, slot.size) != (kernel.offset, kernel.size) {
            return Some(format!(
                "C parameter {i} ({}) is declared as {} bytes at offset {offset}; the kernel's \
                 is {} bytes at offset {}",
                slot.what, slot.size, kernel.size, kernel.offset
            ));
        }
    }
    None
}

impl fmt::Debug for Function<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Function").field(&self.raw).finish()
    }
}

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
///     let module = ctx.load_ptx(include_str!("../kernels/kernels.ptx"))?;
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

/// The grid and block of a launch, its dynamic shared memory, and its launch attributes:
/// a thread-block cluster, a cooperative launch, a priority.
///
/// ```
/// use cuda_brand::LaunchConfig;
/// let c = LaunchConfig::linear(64, 256).with_shared_mem(4096);
/// assert_eq!((c.grid, c.block, c.shared_mem_bytes), ([64, 1, 1], [256, 1, 1], 4096));
/// assert_eq!(LaunchConfig::new([8, 8, 1], [16, 16, 1]).threads(), 8 * 8 * 16 * 16);
/// let c = LaunchConfig::linear(64, 128).with_cluster([2, 1, 1]).with_priority(-1);
/// assert_eq!((c.cluster, c.cooperative, c.priority), (Some([2, 1, 1]), false, Some(-1)));
/// ```
///
/// # Launch attributes
///
/// A configuration with any of the three is launched with `cuLaunchKernelEx` (CUDA 11.8),
/// each attribute checked before the driver call, an error saying what is wrong
/// otherwise:
///
/// * [`with_cluster`](LaunchConfig::with_cluster): thread-block clusters (compute
///   capability 9.0 or newer): every dimension at least 1 and dividing the grid's; the
///   device supports clusters; the cluster's size (blocks) at most what the kernel can be
///   launched with for this block and shared memory (`cuOccupancyMaxPotentialClusterSize`:
///   8, the portable limit, unless
///   [`Function::set_non_portable_cluster_size_allowed`] allows more); and the kernel's
///   compiled-in cluster shape (`__cluster_dims__`), if it has one.
/// * [`with_cooperative`](LaunchConfig::with_cooperative): a cooperative launch (the
///   kernel may synchronize its whole grid): every block must be resident at once, so the
///   grid may have at most `cuOccupancyMaxActiveBlocksPerMultiprocessor` (for this block
///   and shared memory) times the device's multiprocessor count blocks;
///   `CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE` from the crate, with the numbers, otherwise.
/// * [`with_priority`](LaunchConfig::with_priority): the kernel's priority (CUDA 12.0),
///   within the context's [`stream_priority_range`](crate::ContextGuard::stream_priority_range)
///   (the driver would clamp it).
///
/// A scope looks up what these checks need (the device's limits, the kernel's occupancy)
/// on its first launch that needs it and keeps it for the rest of the scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: [u32; 3],
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
    /// Thread-block cluster dimensions, in blocks (`CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`);
    /// `None`: no cluster attribute.
    pub cluster: Option<[u32; 3]>,
    /// A cooperative launch (`CU_LAUNCH_ATTRIBUTE_COOPERATIVE`).
    pub cooperative: bool,
    /// The launch's priority (`CU_LAUNCH_ATTRIBUTE_PRIORITY`; lower numbers run first);
    /// `None`: the stream's.
    pub priority: Option<i32>,
}

impl LaunchConfig {
    /// `grid` blocks of `block` threads, in x only.
    pub const fn linear(grid: u32, block: u32) -> Self {
        Self::new([grid, 1, 1], [block, 1, 1])
    }

    /// A three-dimensional grid of three-dimensional blocks.
    pub const fn new(grid: [u32; 3], block: [u32; 3]) -> Self {
        LaunchConfig {
            grid,
            block,
            shared_mem_bytes: 0,
            cluster: None,
            cooperative: false,
            priority: None,
        }
    }

    /// The same, with `bytes` of dynamic shared memory per block.
    pub const fn with_shared_mem(self, bytes: u32) -> Self {
        LaunchConfig {
            shared_mem_bytes: bytes,
            ..self
        }
    }

    /// The same, launched in thread-block clusters of `dims` blocks (compute capability
    /// 9.0 or newer); each grid dimension must be a multiple of the cluster's. See
    /// [Launch attributes](LaunchConfig#launch-attributes).
    pub const fn with_cluster(self, dims: [u32; 3]) -> Self {
        LaunchConfig {
            cluster: Some(dims),
            ..self
        }
    }

    /// The same, as a cooperative launch: every block of the grid is resident at once, so
    /// the kernel may synchronize the whole grid (`cooperative_groups::this_grid().sync()`).
    /// See [Launch attributes](LaunchConfig#launch-attributes).
    pub const fn with_cooperative(self) -> Self {
        LaunchConfig {
            cooperative: true,
            ..self
        }
    }

    /// The same, with the launch priority `priority` (CUDA 12.0; lower numbers run first;
    /// within the context's stream priority range). See
    /// [Launch attributes](LaunchConfig#launch-attributes).
    pub const fn with_priority(self, priority: i32) -> Self {
        LaunchConfig {
            priority: Some(priority),
            ..self
        }
    }

    /// Whether the launch has any attribute (and so goes through `cuLaunchKernelEx`).
    #[inline(always)]
    pub(crate) const fn has_attributes(&self) -> bool {
        self.cluster.is_some() || self.cooperative || self.priority.is_some()
    }

    /// The number of threads the launch runs (grid times block, in all three dimensions).
    pub const fn threads(&self) -> u64 {
        let [gx, gy, gz] = self.grid;
        let [bx, by, bz] = self.block;
        gx as u64 * gy as u64 * gz as u64 * bx as u64 * by as u64 * bz as u64
    }

    /// Checks the configuration against a kernel's limits and the limits every CUDA GPU
    /// has; the text says what is wrong.
    #[inline]
    pub(crate) fn problem(
        &self,
        max_threads: u32,
        max_dynamic_shared: u32,
    ) -> Option<&'static str> {
        let [gx, gy, gz] = self.grid;
        let [bx, by, bz] = self.block;
        let threads = bx as u64 * by as u64 * bz as u64;
        if gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 {
            Some("a dimension is zero")
        } else if threads > max_threads as u64 {
            Some("the block has more threads than the kernel allows")
        } else if gx > i32::MAX as u32 || gy > 65535 || gz > 65535 || bz > 64 {
            Some(
                "a dimension exceeds CUDA's limits (grid x < 2^31, y and z <= 65535; block z <= 64)",
            )
        } else if self.shared_mem_bytes > max_dynamic_shared {
            Some("more dynamic shared memory than the kernel allows")
        } else {
            None
        }
    }
}

#[cold]
#[inline(never)]
fn bad_config(c: &LaunchConfig, t: &Target, problem: &str) -> Error {
    Error::with_detail(
        "StreamScope::launch",
        ErrorCode::InvalidValue,
        format!(
            "invalid launch configuration, {problem}: grid {:?}, block {:?} ({} threads; the kernel allows {}), {} bytes of dynamic shared memory (the kernel allows {})",
            c.grid,
            c.block,
            c.block.iter().map(|&d| d as u64).product::<u64>(),
            t.max_threads,
            c.shared_mem_bytes,
            t.max_dynamic_shared
        ),
    )
}

/// A slice parameter the kernel reads: `const T *p, size_t p_len` in C. Pass `&buffer`,
/// `&buffer[range]`, a [`DeviceRef`](crate::DeviceRef) or a [`DeviceMut`](crate::DeviceMut).
pub struct In<T>(PhantomData<T>);

/// A slice parameter the kernel writes: `T *p, size_t p_len` in C. Pass `&mut buffer`,
/// `&mut buffer[range]` or a [`DeviceMut`](crate::DeviceMut). Its memory must not overlap any other slice
/// argument of the launch.
pub struct Out<T>(PhantomData<T>);

/// A by-value parameter of a user `DeviceCopy` type (a `#[repr(C)]` struct the kernel
/// takes by value). The primitive numbers are parameters as they are.
pub struct ByValue<T>(PhantomData<T>);

/// One parameter of a kernel's declared list: [`In<T>`], [`Out<T>`], [`ByValue<T>`], or a
/// primitive number (`u8` ... `u64`, `i8` ... `i64`, `usize`, `isize`, `f32`, `f64`).
/// Sealed: no other type can be a parameter.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a kernel parameter",
    label = "not a kernel parameter",
    note = "a parameter is `In<T>` (a slice the kernel reads), `Out<T>` (a slice it writes), a primitive number, or `ByValue<T>` for a `#[repr(C)]` struct that is `DeviceCopy`",
    note = "see the guide, chapter 6 (`cuda_brand::guide`)"
)]
pub trait KernelParam: sealed::Param {}

/// A kernel's whole parameter list: a tuple of [`KernelParam`]s, 1 to 12 of them. Sealed.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a kernel parameter list",
    label = "not a parameter list",
    note = "declare the parameters as a tuple of `In<T>`, `Out<T>`, numbers and `ByValue<T>`, 1 to 12 of them; a single parameter is `(In<f32>,)`",
    note = "see the guide, chapter 6 (`cuda_brand::guide`)"
)]
pub trait KernelParams: sealed::Params {}

/// An argument that may be passed for the parameter `P` in a scope `'scope` of the context
/// `'ctx`. Sealed: the crate lays out every argument the driver sees.
///
/// The layout stays the crate's: a bound `A: KernelArg<..>` brings the hidden supertrait's
/// method into scope in any crate, but the method takes a value only the crate can make,
/// so code outside it cannot call it to learn an argument's device address (an escape the
/// [safety profile](crate#safety-profile) refuses):
///
/// ```compile_fail,E0061
/// #![deny(unsafe_code)]
/// use cuda_brand::{In, KernelArg};
///
/// fn address_of<'s, 'c, A: KernelArg<'s, 'c, In<f32>>>(arg: A) -> [u64; 2] {
///     arg.lower().0 // error: the method takes the crate's own token
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a kernel parameter declared as `{P}`",
    label = "the kernel's declaration says `{P}` here",
    note = "`In<T>` takes `&buffer`, `&buffer[range]`, a `DeviceRef` or a `DeviceMut`; `Out<T>` takes `&mut buffer`, `&mut buffer[range]` or a `DeviceMut`; a scalar parameter takes a value of exactly its type",
    note = "see the guide, chapter 6 (`cuda_brand::guide`)"
)]
pub trait KernelArg<'scope, 'ctx, P: KernelParam>: sealed::Arg<'scope, 'ctx, P> {}

/// Arguments for the parameter list `P`: a tuple with one [`KernelArg`] per parameter.
/// Sealed: the crate builds the `void**` array the driver reads.
#[diagnostic::on_unimplemented(
    message = "these arguments do not match the kernel's declared parameters `{P}`",
    note = "pass a tuple with one argument per declared parameter, in order (a one-parameter kernel takes `(arg,)`)",
    note = "see the guide, chapter 6 (`cuda_brand::guide`)"
)]
pub trait KernelArgs<'scope, 'ctx, P: KernelParams>: sealed::Args<'scope, 'ctx, P> {}

/// What [`StreamScope::launch`](crate::StreamScope::launch) can launch in a scope `'scope`:
/// `&kernel` for a [`Kernel`], `&mut kernel` for a [`KernelMut`] (once per scope), or a
/// [`ScopedKernel`] (any number of times). Sealed.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be launched in this scope",
    label = "not a kernel of this scope",
    note = "launch `&kernel` for a `Kernel`; a `KernelMut` (a kernel that writes its module's globals) is launched as `&mut kernel`, or bound once with `s.bind_kernel(&mut kernel)` and then launched any number of times",
    note = "see the guide, chapter 8 (`cuda_brand::guide`)"
)]
pub trait Launch<'scope, 'ctx, P: KernelParams>: sealed::Launch<'scope, 'ctx, P> {}

pub(crate) use sealed::Target;

/// The sealed halves of the public traits: what reaches the driver is decided here only.
pub(crate) mod sealed {
    use std::ffi::c_void;

    use crate::driver::CUfunction;
    use crate::memory::Span;

    /// Proof that the caller is this crate, taken by the sealed methods that see an
    /// argument's device address ([`Arg::lower`], [`Args::with_params`]). A bound on a
    /// public trait (`A: KernelArg<'s, 'c, In<f32>>`) brings its sealed supertrait's methods
    /// into scope in another crate, which cannot name the trait but could call them: only
    /// the crate can make this value (its field is private to the crate), so only the crate
    /// can call them, and no safe code elsewhere learns an address through them.
    #[derive(Clone, Copy)]
    pub struct Crate(pub(crate) ());

    /// What a launch needs to know about its kernel.
    #[derive(Clone, Copy)]
    pub struct Target {
        pub(crate) function: CUfunction,
        pub(crate) max_threads: u32,
        pub(crate) max_dynamic_shared: u32,
        /// The module whose globals the kernel writes, for [`KernelMut`]s.
        pub(crate) globals: Option<usize>,
    }

    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot implement `KernelParam`: the trait is sealed",
        note = "only the crate's parameter kinds (`In<T>`, `Out<T>`, `ByValue<T>`, the numbers) exist, so that no user type decides how many C parameters a kernel gets or where their bytes are",
        note = "see the guide, chapter 8 (`cuda_brand::guide`)"
    )]
    pub trait Param {
        /// C parameters this one stands for (a slice is two: pointer and length).
        const COUNT: usize;
        /// The argument's bytes as the driver reads them.
        type Raw;
        /// Points `out[..COUNT]` at the C parameters inside `raw`.
        fn pointers(raw: &mut Self::Raw, out: &mut [*mut c_void]);
        /// Appends its `COUNT` C parameters, as the declared parameter number `index`.
        fn slots(index: usize, out: &mut Vec<Slot>);
    }

    /// One C parameter of a declaration: its size and alignment in bytes, and what it is,
    /// in words (for the errors of `Function::typed`).
    pub struct Slot {
        pub(crate) size: usize,
        pub(crate) align: usize,
        pub(crate) what: String,
    }

    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot implement `KernelParams`: the trait is sealed",
        note = "a parameter list is a tuple of the crate's parameter kinds",
        note = "see the guide, chapter 8 (`cuda_brand::guide`)"
    )]
    pub trait Params {
        /// The number of C parameters.
        const C_PARAMS: usize;
        /// Appends every C parameter, in order.
        fn slots(out: &mut Vec<Slot>);
    }

    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot implement `KernelArg`: the trait is sealed",
        note = "only the crate's buffers, views and numbers can be kernel arguments, so that no user type decides which pointer or length reaches the driver",
        note = "see the guide, chapter 8 (`cuda_brand::guide`)"
    )]
    pub trait Arg<'scope, 'ctx, P: Param> {
        /// The argument's bytes, and the memory it touches.
        fn lower(self, by: Crate) -> (P::Raw, Span);
    }

    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot implement `KernelArgs`: the trait is sealed",
        note = "the crate builds the `void**` array the driver reads, from tuples of kernel arguments only",
        note = "see the guide, chapter 8 (`cuda_brand::guide`)"
    )]
    pub trait Args<'scope, 'ctx, P> {
        /// Lays the arguments out, then calls `launch` with the memory each touches and
        /// the `void**` array the driver takes (one pointer per C parameter, each to a
        /// value of its type, alive for the call).
        fn with_params<R>(
            self,
            by: Crate,
            launch: impl FnOnce(&[Span], *mut *mut c_void) -> R,
        ) -> R;
    }

    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot implement `Launch`: the trait is sealed",
        note = "only declared kernels (`&Kernel`, `&mut KernelMut`, `ScopedKernel`) can be launched, so that no user type decides which function or limits reach the driver",
        note = "see the guide, chapter 8 (`cuda_brand::guide`)"
    )]
    pub trait Launch<'scope, 'ctx, P> {
        fn target(&self) -> Target;
    }
}

impl<T: DeviceCopy> sealed::Param for In<T> {
    const COUNT: usize = 2;
    type Raw = [u64; 2];
    #[inline(always)]
    fn pointers(raw: &mut [u64; 2], out: &mut [*mut c_void]) {
        out[0] = (&mut raw[0] as *mut u64).cast();
        out[1] = (&mut raw[1] as *mut u64).cast();
    }
    fn slots(index: usize, out: &mut Vec<sealed::Slot>) {
        slice_slots("In", std::any::type_name::<T>(), index, out);
    }
}
impl<T: DeviceCopy> KernelParam for In<T> {}

impl<T: DeviceCopy> sealed::Param for Out<T> {
    const COUNT: usize = 2;
    type Raw = [u64; 2];
    #[inline(always)]
    fn pointers(raw: &mut [u64; 2], out: &mut [*mut c_void]) {
        <In<T> as sealed::Param>::pointers(raw, out)
    }
    fn slots(index: usize, out: &mut Vec<sealed::Slot>) {
        slice_slots("Out", std::any::type_name::<T>(), index, out);
    }
}
impl<T: DeviceCopy> KernelParam for Out<T> {}

impl<T: DeviceCopy> sealed::Param for ByValue<T> {
    const COUNT: usize = 1;
    type Raw = T;
    #[inline(always)]
    fn pointers(raw: &mut T, out: &mut [*mut c_void]) {
        out[0] = (raw as *mut T).cast();
    }
    fn slots(index: usize, out: &mut Vec<sealed::Slot>) {
        out.push(sealed::Slot {
            size: size_of::<T>(),
            align: std::mem::align_of::<T>(),
            what: format!(
                "`ByValue<{}>`, declared parameter {index}",
                std::any::type_name::<T>()
            ),
        });
    }
}
impl<T: DeviceCopy> KernelParam for ByValue<T> {}

/// The two C parameters of a slice: its device pointer and its `size_t` length.
fn slice_slots(kind: &str, element: &str, index: usize, out: &mut Vec<sealed::Slot>) {
    for part in ["pointer", "length"] {
        out.push(sealed::Slot {
            size: 8,
            align: 8,
            what: format!("the {part} of `{kind}<{element}>`, declared parameter {index}"),
        });
    }
}

#[inline(always)]
pub(crate) fn slice_raw(ptr: u64, len: usize, elem: usize, write: bool) -> ([u64; 2], Span) {
    (
        [ptr, len as u64],
        Span {
            start: ptr,
            bytes: (len * elem) as u64,
            write,
        },
    )
}

/// `KernelArg` for the argument types of a slice parameter (the scope's views get theirs
/// in `scope.rs`).
macro_rules! slice_args {
    ($param:ident, $write:literal: $($arg:ty),*) => { $(
        impl<'scope, 'ctx, T: DeviceCopy> sealed::Arg<'scope, 'ctx, $param<T>> for $arg {
            #[inline(always)]
            fn lower(self, _: sealed::Crate) -> ([u64; 2], Span) {
                slice_raw(self.device_ptr(), self.len(), size_of::<T>(), $write)
            }
        }
        impl<'scope, 'ctx, T: DeviceCopy> KernelArg<'scope, 'ctx, $param<T>> for $arg {}
    )* };
}
slice_args!(In, false: &'scope DeviceSlice<'ctx, T>, &'scope DeviceBuffer<'ctx, T>);
slice_args!(Out, true: &'scope mut DeviceSlice<'ctx, T>, &'scope mut DeviceBuffer<'ctx, T>);

impl<'scope, 'ctx, T: DeviceCopy> sealed::Arg<'scope, 'ctx, ByValue<T>> for T {
    #[inline(always)]
    fn lower(self, _: sealed::Crate) -> (T, Span) {
        (self, Span::NONE)
    }
}
impl<'scope, 'ctx, T: DeviceCopy> KernelArg<'scope, 'ctx, ByValue<T>> for T {}

macro_rules! scalar_params {
    ($($t:ty),*) => { $(
        impl sealed::Param for $t {
            const COUNT: usize = 1;
            type Raw = $t;
            #[inline(always)]
            fn pointers(raw: &mut $t, out: &mut [*mut c_void]) {
                out[0] = (raw as *mut $t).cast();
            }
            fn slots(index: usize, out: &mut Vec<sealed::Slot>) {
                out.push(sealed::Slot {
                    size: size_of::<$t>(),
                    align: std::mem::align_of::<$t>(),
                    what: format!("`{}`, declared parameter {index}", stringify!($t)),
                });
            }
        }
        impl KernelParam for $t {}
        impl<'scope, 'ctx> sealed::Arg<'scope, 'ctx, $t> for $t {
            #[inline(always)]
            fn lower(self, _: sealed::Crate) -> ($t, Span) {
                (self, Span::NONE)
            }
        }
        impl<'scope, 'ctx> KernelArg<'scope, 'ctx, $t> for $t {}
    )* };
}
scalar_params!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64);

macro_rules! kernel_params {
    ($max:literal; $n:literal; $($p:ident $a:ident $i:tt),+) => {
        impl<$($p: KernelParam),+> sealed::Params for ($($p,)+) {
            const C_PARAMS: usize = 0 $(+ <$p as sealed::Param>::COUNT)+;
            fn slots(out: &mut Vec<sealed::Slot>) {
                $(<$p as sealed::Param>::slots($i, out);)+
            }
        }
        impl<$($p: KernelParam),+> KernelParams for ($($p,)+) {}

        impl<'scope, 'ctx, $($p: KernelParam, $a: KernelArg<'scope, 'ctx, $p>),+>
            sealed::Args<'scope, 'ctx, ($($p,)+)> for ($($a,)+)
        {
            #[inline(always)]
            fn with_params<R>(
                self,
                by: sealed::Crate,
                launch: impl FnOnce(&[Span], *mut *mut c_void) -> R,
            ) -> R {
                let lowered = ($(sealed::Arg::<'scope, 'ctx, $p>::lower(self.$i, by),)+);
                let spans: [Span; $n] = [$(lowered.$i.1),+];
                let mut raw = ($(lowered.$i.0,)+);
                let mut pointers = [std::ptr::null_mut::<c_void>(); $max];
                let mut at = 0;
                $(
                    <$p as sealed::Param>::pointers(&mut raw.$i, &mut pointers[at..]);
                    at += <$p as sealed::Param>::COUNT;
                )+
                let _ = at;
                launch(&spans, pointers.as_mut_ptr())
            }
        }
        impl<'scope, 'ctx, $($p: KernelParam, $a: KernelArg<'scope, 'ctx, $p>),+>
            KernelArgs<'scope, 'ctx, ($($p,)+)> for ($($a,)+) {}
    };
}
kernel_params!(2; 1; P0 A0 0);
kernel_params!(4; 2; P0 A0 0, P1 A1 1);
kernel_params!(6; 3; P0 A0 0, P1 A1 1, P2 A2 2);
kernel_params!(8; 4; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3);
kernel_params!(10; 5; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4);
kernel_params!(12; 6; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5);
kernel_params!(14; 7; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6);
kernel_params!(16; 8; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7);
kernel_params!(18; 9; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8);
kernel_params!(20; 10; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8, P9 A9 9);
kernel_params!(22; 11; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8, P9 A9 9, P10 A10 10);
kernel_params!(24; 12; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8, P9 A9 9, P10 A10 10, P11 A11 11);

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

/// Checks a configuration against a kernel's limits, before any driver call.
#[inline(always)]
pub(crate) fn check_config(config: &LaunchConfig, target: &Target) -> Result<()> {
    match config.problem(target.max_threads, target.max_dynamic_shared) {
        None => Ok(()),
        Some(problem) => Err(bad_config(config, target, problem)),
    }
}

#[cold]
#[inline(never)]
pub(crate) fn launch_overlap(spans: &[Span], i: usize, j: usize) -> Error {
    let name = |k: usize| {
        let kind = if spans[k].write { "Out" } else { "In" };
        format!("`{kind}` argument {k}")
    };
    overlap_error(
        "StreamScope::launch",
        [&name(i), &name(j)],
        &spans[i],
        &spans[j],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::first_overlap;

    fn span(start: u64, bytes: u64, write: bool) -> Span {
        Span {
            start,
            bytes,
            write,
        }
    }

    #[test]
    fn overlapping_writes_are_found_and_reads_may_share() {
        // two reads of the same memory are fine
        assert_eq!(
            first_overlap(&[span(0x1000, 400, false), span(0x1000, 400, false)]),
            None
        );
        // d[1..] read, d[..n-1] written: the vector_add aliasing case
        assert_eq!(
            first_overlap(&[span(0x1004, 396, false), span(0x1000, 396, true)]),
            Some((0, 1))
        );
        // adjacent, not overlapping
        assert_eq!(
            first_overlap(&[span(0x1000, 16, true), span(0x1010, 16, true)]),
            None
        );
        // empty slices and scalars never overlap
        assert_eq!(
            first_overlap(&[span(0x1000, 0, true), span(0x1000, 16, true), Span::NONE]),
            None
        );
        // the first offending pair is reported
        assert_eq!(
            first_overlap(&[
                span(0x0, 8, false),
                span(0x100, 8, false),
                span(0x2000, 8, true),
                span(0x104, 8, true)
            ]),
            Some((1, 3))
        );
    }

    fn layout(sizes: &[(usize, usize)]) -> Vec<ParamInfo> {
        sizes
            .iter()
            .map(|&(offset, size)| ParamInfo { offset, size })
            .collect()
    }

    fn slots<P: KernelParams>() -> Vec<sealed::Slot> {
        let mut slots = Vec::new();
        <P as sealed::Params>::slots(&mut slots);
        assert_eq!(slots.len(), <P as sealed::Params>::C_PARAMS);
        slots
    }

    #[test]
    fn declarations_are_laid_out_like_c_and_the_first_difference_is_named() {
        // scale(float *x, size_t x_len, float k)
        let scale = layout(&[(0, 8), (8, 8), (16, 4)]);
        assert_eq!(
            declaration_problem(&slots::<(Out<f32>, f32)>(), &scale),
            None
        );
        assert_eq!(
            declaration_problem(&slots::<(Out<f32>, f64)>(), &scale).unwrap(),
            "C parameter 2 (`f64`, declared parameter 1) is declared as 8 bytes at offset 16; \
             the kernel's is 4 bytes at offset 16"
        );
        assert_eq!(
            declaration_problem(&slots::<(Out<f32>,)>(), &scale).unwrap(),
            "the declaration has 2 C parameters, the kernel has 3 (a slice `In<T>` or `Out<T>` \
             is two: a pointer and a `size_t` length)"
        );
        // C alignment: a char, then an 8-byte-aligned pointer at 8; a 12-byte struct of
        // floats after a char at 4
        let padded = layout(&[(0, 1), (8, 8), (16, 8)]);
        assert_eq!(
            declaration_problem(&slots::<(u8, In<u32>)>(), &padded),
            None
        );
        let by_value = layout(&[(0, 1), (4, 12)]);
        assert_eq!(
            declaration_problem(&slots::<(u8, ByValue<[f32; 3]>)>(), &by_value),
            None
        );
        assert_eq!(
            declaration_problem(
                &slots::<(u8, In<u32>)>(),
                &layout(&[(0, 1), (4, 8), (12, 8)])
            )
            .unwrap(),
            "C parameter 1 (the pointer of `In<u32>`, declared parameter 1) is declared as 8 \
             bytes at offset 8; the kernel's is 8 bytes at offset 4"
        );
    }

    #[test]
    fn launch_configurations_are_checked() {
        let ok = LaunchConfig::linear(10, 256);
        assert_eq!(ok.problem(1024, 48 << 10), None);
        assert_eq!(
            LaunchConfig::linear(0, 32).problem(1024, 0),
            Some("a dimension is zero")
        );
        assert_eq!(
            LaunchConfig::linear(1, 1025).problem(1024, 0),
            Some("the block has more threads than the kernel allows")
        );
        assert!(
            LaunchConfig::new([1, 70_000, 1], [32, 1, 1])
                .problem(1024, 0)
                .unwrap()
                .starts_with("a dimension exceeds")
        );
        assert_eq!(
            LaunchConfig::linear(1, 32)
                .with_shared_mem(100)
                .problem(1024, 99),
            Some("more dynamic shared memory than the kernel allows")
        );
        assert_eq!(LaunchConfig::new([2, 3, 4], [5, 6, 7]).threads(), 24 * 210);
    }
}
