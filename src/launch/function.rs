//! [`Function`], a function of a module or library, its attributes, and the check of a
//! declared parameter list against the kernel's ([`Function::typed`]).

use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;

use cuda_driver_sys::CUfunc_st;

#[cfg(doc)]
use super::{In, InPtr, Out, OutPtr};
use super::{Kernel, KernelParams, counts, sealed};
use crate::context::{Brand, CacheConfig};
use crate::driver::{self, CUfunction};
use crate::error::{Error, Invalid, Result};
use crate::span::Touched;
use crate::synchronous;

/// A function of a module (`CUfunction`), borrowing the module `'m` of the context
/// branded `'ctx`. One pointer wide. Launch it after declaring its parameters with
/// [`Function::typed`] (or [`Module::kernel`](crate::Module::kernel)).
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     let module = ctx.module_from_ptx(include_str!("../../kernels/kernels.ptx"))?;
///     let f = module.function("sum_u64")?;
///     println!("{} registers, {} B static shared memory", f.num_registers()?, f.static_shared_bytes()?);
///     assert!(f.max_threads_per_block()? >= 256);
///     Ok(())
/// })
/// # }
/// ```
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)), on its own and not only
/// through the guard that made it: functions of two contexts never have one type, and a
/// function that takes two of one context cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::Function;
///
/// /// Takes two functions of one context.
/// fn one_context<'ctx>(_: Function<'_, 'ctx>, _: Function<'_, 'ctx>) {}
///
/// # const PTX: &str = "";
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let module_a = a.module_from_ptx(PTX)?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let module_b = b.module_from_ptx(PTX)?;
///         let (f_a, f_b) = (module_a.function("scale")?, module_b.function("scale")?);
///         one_context(f_a, f_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct Function<'m, 'ctx> {
    raw: NonNull<CUfunc_st>,
    /// Covariant in `'m` (a shared borrow of the module) and invariant in `'ctx` (the
    /// crate's `Brand`): the function is of its module's context. Were `'ctx` covariant,
    /// functions of two contexts could be shortened to one brand and pass for one another,
    /// and so could the kernels declared from them (a launch of one context's function on
    /// another's stream is `CUDA_ERROR_INVALID_HANDLE`: docs/c/cross_context_stream.out).
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

    /// `Err` (`NotPermitted`, naming `call`) where this is a function of a partition's
    /// module and the calling thread not the partition's (`context::confined`). One atomic
    /// load while no partition has a handle listed.
    #[inline]
    fn on_its_thread(&self, call: &'static str) -> Result<()> {
        crate::context::confined::refuse_foreign_handle(call, self.raw() as usize)
    }

    /// The driver's handle (`CUfunction`), for calls this crate does not wrap, once the
    /// crate's pending synchronous writes of module globals are done: a kernel launched
    /// through the driver may read its module's globals, so this call waits on the host
    /// for them first, as [`Module::as_raw`](crate::Module::as_raw) does (its buffer
    /// arguments are addresses, each waited for by the `as_device_ptr` that gave it).
    ///
    /// # Safety
    ///
    /// Taking the handle does nothing the caller must check; `unsafe` marks what it allows
    /// behind the borrow checker's back. The caller promises, for every use of the handle:
    /// it is not used after the module or library this function borrows is unloaded; and a
    /// launch through it (`cuLaunchKernel`) keeps the promise of
    /// [`Module::kernel`](crate::Module::kernel) for its parameters and touches this
    /// crate's memory only as a [`StreamScope`](crate::StreamScope) launch would (read
    /// while nothing writes it, written while nothing else uses it, alive until the kernel
    /// has finished).
    #[inline]
    pub unsafe fn as_raw(&self) -> crate::driver::handles::CUfunction {
        synchronous::before_raw_escape(Touched::Spans(&[]));
        self.raw().cast()
    }

    /// One attribute's value (`cuFuncGetAttribute`).
    ///
    /// A partition's function is used on the partition's thread only: on another thread
    /// this, and every method of the function, is [`ErrorCode::NotPermitted`](crate::ErrorCode::NotPermitted)
    /// ([`crate::partition`]).
    pub fn attribute(&self, attribute: FunctionAttribute) -> Result<i32> {
        self.on_its_thread("Function::attribute")?;
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
        self.on_its_thread("Function::set_max_dynamic_shared_bytes")?;
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
        self.on_its_thread("Function::set_cache_config")?;
        // SAFETY: the function is alive.
        unsafe { driver::func_set_cache_config(self.raw(), config.raw()) }
    }

    /// The block size that maximises occupancy for `dynamic_shared_bytes` of dynamic
    /// shared memory per block (`cuOccupancyMaxPotentialBlockSize`).
    pub fn suggested_block_size(&self, dynamic_shared_bytes: u32) -> Result<u32> {
        self.on_its_thread("Function::suggested_block_size")?;
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
        self.on_its_thread("Function::set_non_portable_cluster_size_allowed")?;
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
    /// answers with [`ErrorCode::DriverTooOld`](crate::ErrorCode::DriverTooOld).
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
    ///     let module = ctx.module_from_ptx(include_str!("../../kernels/kernels.ptx"))?;
    ///     // scale(float *x, size_t x_len, float k)
    ///     let params = module.function("scale")?.params()?;
    ///     let layout: Vec<(usize, usize)> = params.iter().map(|p| (p.offset, p.size)).collect();
    ///     assert_eq!(layout, [(0, 8), (8, 8), (16, 4)]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn params(&self) -> Result<Vec<ParamInfo>> {
        self.on_its_thread("Function::params")?;
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
        self.on_its_thread("Function::max_active_blocks_per_multiprocessor")?;
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
    /// (a slice [`In<T>`]/[`Out<T>`] is two: its pointer and its `size_t` length; a pointer
    /// [`InPtr<T>`]/[`OutPtr<T>`] is one), then the size and offset of each, an error naming
    /// the first that differs. This catches a wrong count or a wrong scalar width; it cannot
    /// catch a pointer to the wrong element type or a kernel that reads out of bounds, so
    /// the declaration stays `unsafe`. Where
    /// the driver cannot report them (older drivers; or the query fails) nothing is
    /// checked. The driver is asked only about parameters the kernel has (see
    /// [`Function::params`]), so a declaration provokes no driver error.
    ///
    /// # Safety
    /// As for [`Module::kernel`](crate::Module::kernel), the one statement of a
    /// declaration's promise (its section "Pointer parameters" included).
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
        self.on_its_thread(call)?;
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
        Some(problem) => Err(Error::invalid_input(call, Invalid::argument(problem))),
    }
}

/// What differs between a declared parameter list and the kernel's, in words; `None`
/// where they agree.
fn declaration_problem(declared: &[sealed::CParam], actual: &[ParamInfo]) -> Option<String> {
    if declared.len() != actual.len() {
        return Some(format!(
            "the declaration has {} C parameters, the kernel has {} (a slice `In<T>` or \
             `Out<T>` is two: a pointer and a `size_t` length; a pointer `InPtr<T>` or \
             `OutPtr<T>` is one)",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::{ByValue, In, InPtr, Out, OutPtr};
    fn layout(sizes: &[(usize, usize)]) -> Vec<ParamInfo> {
        sizes
            .iter()
            .map(|&(offset, size)| ParamInfo { offset, size })
            .collect()
    }

    fn slots<P: KernelParams>() -> Vec<sealed::CParam> {
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
             is two: a pointer and a `size_t` length; a pointer `InPtr<T>` or `OutPtr<T>` is \
             one)"
        );
        // saxpy(int n, float a, const float *x, float *y): one C parameter per pointer
        let saxpy = layout(&[(0, 4), (4, 4), (8, 8), (16, 8)]);
        assert_eq!(
            declaration_problem(&slots::<(i32, f32, InPtr<f32>, OutPtr<f32>)>(), &saxpy),
            None
        );
        assert_eq!(
            declaration_problem(&slots::<(i32, f32, In<f32>, OutPtr<f32>)>(), &saxpy).unwrap(),
            "the declaration has 5 C parameters, the kernel has 4 (a slice `In<T>` or `Out<T>` \
             is two: a pointer and a `size_t` length; a pointer `InPtr<T>` or `OutPtr<T>` is \
             one)"
        );
        // stencil2d(const float *in, size_t inPitch, float *out, size_t outPitch, int, int)
        let stencil = layout(&[(0, 8), (8, 8), (16, 8), (24, 8), (32, 4), (36, 4)]);
        assert_eq!(
            declaration_problem(
                &slots::<(InPtr<f32>, usize, OutPtr<f32>, usize, i32, i32)>(),
                &stencil
            ),
            None
        );
        // a pointer where the kernel has an `int`: named as the pointer it was declared
        assert_eq!(
            declaration_problem(
                &slots::<(InPtr<f32>, f32, InPtr<f32>, OutPtr<f32>)>(),
                &saxpy
            )
            .unwrap(),
            "C parameter 0 (the pointer `InPtr<f32>`, declared parameter 0) is declared as 8 \
             bytes at offset 0; the kernel's is 4 bytes at offset 0"
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
}
