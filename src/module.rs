//! Modules ([`Module`]), functions ([`Function`]), typed kernels ([`Kernel`]) and launch
//! configurations ([`LaunchConfig`]).
//!
//! # What stays `unsafe`, and why
//!
//! The driver cannot check a kernel's signature or what memory it touches. So declaring a
//! [`Kernel`] — naming its parameter list as Rust types — is the one `unsafe` promise:
//!
//! ```no_run
//! use cuda_brand::{with_context, ContextFlags, Device, DeviceBuffer, In, LaunchConfig, Module, Out, Stream, StreamFlags};
//! # fn main() -> cuda_brand::Result<()> {
//! let device = Device::get(0)?;
//! with_context(&device, ContextFlags::default(), |ctx| {
//!     let module = Module::from_ptx(ctx, include_str!("../kernels/kernels.ptx"))?;
//!     // SAFETY: `scale(float *x, size_t x_len, float k)` has this parameter list, and it
//!     // touches only `x[0..x_len]`.
//!     let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
//!     let mut x = DeviceBuffer::from_slice(ctx, &[1.0f32, 2.0, 3.0])?;
//!     let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
//!     stream.scope(|s| s.launch(&scale, LaunchConfig::linear(1, 32), (&mut x, 2.0f32)))?;
//!     assert_eq!(x.to_vec()?, [2.0, 4.0, 6.0]);
//!     Ok(())
//! })
//! # }
//! ```
//!
//! After that every launch is safe code whose arguments are type-checked against the
//! declaration, whose buffers, stream and kernel share one context brand, and whose memory
//! the stream scope keeps borrowed until the kernel has finished.
//!
//! A slice parameter ([`In<T>`] for reading, [`Out<T>`] for writing) is passed as two C
//! parameters, the device pointer and the element count (`const float *x, size_t x_len`),
//! so a kernel can keep every access in bounds whatever lengths safe code passes. That is
//! the bound the declaration promises.

use std::ffi::{CString, c_void};
use std::fmt;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ptr::NonNull;

use cuda_driver_sys::{CUctx_st, CUfunc_st, CUmod_st};

use crate::context::{Brand, CacheConfig, ContextGuard};
use crate::driver::{self, CUdeviceptr, CUfunction, CUmodule};
use crate::error::{Error, ErrorCode, Result};
use crate::memory::{DeviceCopy, DeviceSlice};
use crate::stream::{DeviceMut, DeviceRef};

/// Code loaded into the context branded `'ctx` (`CUmodule`): from PTX text, or a cubin or
/// fatbin image. Unloaded when dropped; the functions and kernels taken from it borrow it.
pub struct Module<'ctx> {
    raw: NonNull<CUmod_st>,
    ctx: NonNull<CUctx_st>,
    _brand: Brand<'ctx>,
}

// SAFETY: a module handle may be used from any thread; unloading pushes the module's own
// context explicitly, so the dropping thread needs no current context.
unsafe impl Send for Module<'_> {}
// SAFETY: `&Module` only looks up functions and globals, thread-safe driver calls.
unsafe impl Sync for Module<'_> {}

impl<'ctx> Module<'ctx> {
    /// JIT-compiles and loads PTX text (`cuModuleLoadDataEx`). If the PTX does not
    /// compile, the error's [`detail`](Error::detail) is the JIT compiler's log, which names
    /// the offending line.
    pub fn from_ptx(ctx: ContextGuard<'ctx>, ptx: &str) -> Result<Self> {
        let text = CString::new(ptx).map_err(|e| {
            Error::with_detail(
                "Module::from_ptx",
                ErrorCode::InvalidPtx,
                format!(
                    "the PTX text contains a NUL byte at offset {}",
                    e.nul_position()
                ),
            )
        })?;
        // SAFETY: NUL-terminated text that outlives the call.
        unsafe { Self::load(ctx, text.as_ptr().cast()) }
    }

    /// Loads a cubin or fatbin image (`cuModuleLoadDataEx`). An image for another GPU
    /// architecture is `CUDA_ERROR_NO_BINARY_FOR_GPU`.
    pub fn from_binary(ctx: ContextGuard<'ctx>, image: &[u8]) -> Result<Self> {
        // ELF (cubin) or fatbin magic: anything else would be read as PTX text, past the
        // end of the slice if it has no NUL.
        const ELF: [u8; 4] = [0x7f, b'E', b'L', b'F'];
        const FATBIN: [u8; 4] = [0x50, 0xed, 0x55, 0xba];
        if image.len() < 4 || (image[..4] != ELF && image[..4] != FATBIN) {
            return Err(Error::with_detail(
                "Module::from_binary",
                ErrorCode::InvalidImage,
                "not a cubin (ELF) or fatbin image; use Module::from_ptx for PTX text",
            ));
        }
        // The driver reads the image through aligned loads: give it an 8-byte-aligned copy.
        let mut aligned = vec![0u64; image.len().div_ceil(8)];
        // SAFETY: `aligned` has at least `image.len()` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                image.as_ptr(),
                aligned.as_mut_ptr().cast::<u8>(),
                image.len(),
            )
        };
        // SAFETY: a complete image (its headers carry its size) that outlives the call.
        unsafe { Self::load(ctx, aligned.as_ptr().cast()) }
    }

    /// # Safety
    /// `image` is a complete image, as `driver::module_load` requires.
    unsafe fn load(ctx: ContextGuard<'ctx>, image: *const c_void) -> Result<Self> {
        // SAFETY: the caller guarantees the image; the module goes into `ctx`.
        let loaded = ctx.with_current(|| Ok(unsafe { driver::module_load(image) }))?;
        let raw = loaded.map_err(|(e, log)| match log.is_empty() {
            true => e,
            false => Error::with_detail(e.call(), e.code(), format!("JIT log:\n{log}")),
        })?;
        let raw = driver::non_null("cuModuleLoadDataEx", raw)?;
        let ctx = ctx.as_non_null();
        Ok(Module {
            raw,
            ctx,
            _brand: PhantomData,
        })
    }

    /// The driver's handle.
    pub fn as_raw(&self) -> CUmodule {
        self.raw.as_ptr()
    }

    /// The function `name` (`cuModuleGetFunction`); a name the module does not have is
    /// `CUDA_ERROR_NOT_FOUND`, with the name in the error.
    pub fn function(&self, name: &str) -> Result<Function<'_, 'ctx>> {
        let c_name = c_name("Module::function", name)?;
        // SAFETY: the module is alive (borrowed).
        let raw = unsafe { driver::module_get_function(self.as_raw(), &c_name) }.map_err(|e| {
            Error::with_detail(
                e.call(),
                e.code(),
                format!("no function named `{name}` in the module"),
            )
        })?;
        let raw = driver::non_null("cuModuleGetFunction", raw)?;
        Ok(Function {
            raw,
            _module: PhantomData,
        })
    }

    /// Declares the kernel `name` with the parameter list `P`, a tuple of [`In<T>`],
    /// [`Out<T>`] and scalars (`f32`, `u32`, ... or [`ByValue<T>`]).
    ///
    /// # Safety
    ///
    /// The kernel's C parameter list is exactly `P` (each `In<T>`/`Out<T>` being a
    /// `const T*`/`T*` followed by a `size_t` element count), it writes only through `Out`
    /// parameters, and it accesses a slice parameter only below the element count it is
    /// given. Under that promise every launch is safe.
    pub unsafe fn kernel<P: KernelParams>(&self, name: &str) -> Result<Kernel<'_, 'ctx, P>> {
        let function = self.function(name)?;
        // SAFETY: the caller's promise is this function's.
        unsafe { function.typed() }
    }

    /// A module global variable (`__device__ T name[N]`) as a view of `N` elements
    /// (`cuModuleGetGlobal`). Its size must be a whole number of `T`s.
    pub fn global<T: DeviceCopy>(&self, name: &str) -> Result<&DeviceSlice<'ctx, T>> {
        let (ptr, len) = self.global_parts::<T>(name)?;
        // SAFETY: the global lives as long as the module, which is borrowed; shared view.
        Ok(unsafe { DeviceSlice::from_raw_parts(ptr, len) })
    }

    /// A module global variable, for writing. Borrows the module exclusively, so no kernel
    /// of the module can be launched while the view lives.
    pub fn global_mut<T: DeviceCopy>(&mut self, name: &str) -> Result<&mut DeviceSlice<'ctx, T>> {
        let (ptr, len) = self.global_parts::<T>(name)?;
        // SAFETY: as above, and the module is borrowed exclusively.
        Ok(unsafe { DeviceSlice::from_raw_parts_mut(ptr, len) })
    }

    fn global_parts<T>(&self, name: &str) -> Result<(CUdeviceptr, usize)> {
        let c_name = c_name("Module::global", name)?;
        // SAFETY: the module is alive (borrowed).
        let (ptr, bytes) =
            unsafe { driver::module_get_global(self.as_raw(), &c_name) }.map_err(|e| {
                Error::with_detail(
                    e.call(),
                    e.code(),
                    format!("no global named `{name}` in the module"),
                )
            })?;
        let size = size_of::<T>().max(1);
        if bytes % size != 0 {
            return Err(Error::with_detail(
                "Module::global",
                ErrorCode::InvalidValue,
                format!(
                    "global `{name}` has {bytes} bytes, not a whole number of {size}-byte `{}`",
                    std::any::type_name::<T>()
                ),
            ));
        }
        Ok((ptr, bytes / size))
    }
}

fn c_name(call: &'static str, name: &str) -> Result<CString> {
    CString::new(name).map_err(|_| {
        Error::with_detail(
            call,
            ErrorCode::InvalidValue,
            format!("the name {name:?} contains a NUL byte"),
        )
    })
}

impl Drop for Module<'_> {
    fn drop(&mut self) {
        let raw = self.as_raw();
        // SAFETY: the brand keeps the context alive; nothing uses the module any more (its
        // functions and kernels borrow it, and launches keep that borrow until their
        // scope's stream is idle). Errors cannot be reported from `drop`; the context's
        // destruction reclaims the module.
        let _ = unsafe { ContextGuard::new_unchecked(self.ctx) }
            .with_current(|| unsafe { driver::module_unload(raw) });
    }
}

impl fmt::Debug for Module<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Module").field(&self.raw).finish()
    }
}

/// A function of a module (`CUfunction`), borrowing the module `'m` of the context
/// branded `'ctx`. One pointer wide. Launch it after declaring its parameters with
/// [`Function::typed`] (or [`Module::kernel`]).
pub struct Function<'m, 'ctx> {
    raw: NonNull<CUfunc_st>,
    _module: PhantomData<&'m Module<'ctx>>,
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
}

impl<'m, 'ctx> Function<'m, 'ctx> {
    /// The driver's handle.
    pub fn as_raw(&self) -> CUfunction {
        self.raw.as_ptr()
    }

    /// One attribute's value (`cuFuncGetAttribute`).
    pub fn attribute(&self, attribute: FunctionAttribute) -> Result<i32> {
        // SAFETY: the function is alive (it borrows its module).
        unsafe { driver::func_get_attribute(self.as_raw(), attribute as i32) }
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
                self.as_raw(),
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
        unsafe { driver::func_set_cache_config(self.as_raw(), config.raw()) }
    }

    /// The block size that maximises occupancy for `dynamic_shared_bytes` of dynamic
    /// shared memory per block (`cuOccupancyMaxPotentialBlockSize`).
    pub fn suggested_block_size(&self, dynamic_shared_bytes: u32) -> Result<u32> {
        // SAFETY: the function is alive.
        let (_, block) =
            unsafe { driver::occupancy_block_size(self.as_raw(), dynamic_shared_bytes as usize) }?;
        Ok(block as u32)
    }

    /// Declares the function's parameter list; see [`Module::kernel`].
    ///
    /// # Safety
    /// As for [`Module::kernel`].
    pub unsafe fn typed<P: KernelParams>(self) -> Result<Kernel<'m, 'ctx, P>> {
        Ok(Kernel {
            function: self,
            max_threads: self.max_threads_per_block()?,
            max_dynamic_shared: self.max_dynamic_shared_bytes()?,
            _params: PhantomData,
        })
    }
}

impl fmt::Debug for Function<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Function").field(&self.raw).finish()
    }
}

/// A function whose parameter list `P` has been declared (an `unsafe` promise, see
/// [`Module::kernel`]), ready for [`StreamScope::launch`](crate::StreamScope::launch).
/// Keeps the two limits a launch is checked against, so checking costs no driver call.
pub struct Kernel<'m, 'ctx, P> {
    function: Function<'m, 'ctx>,
    max_threads: u32,
    max_dynamic_shared: u32,
    _params: PhantomData<fn(P)>,
}

impl<'m, 'ctx, P> Kernel<'m, 'ctx, P> {
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

    /// Checks a launch configuration against this kernel and the limits every CUDA GPU
    /// has, before any driver call.
    #[inline]
    pub(crate) fn check(&self, c: &LaunchConfig) -> Result<()> {
        let [gx, gy, gz] = c.grid;
        let [bx, by, bz] = c.block;
        let threads = bx as u64 * by as u64 * bz as u64;
        let problem = if gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 {
            "a dimension is zero"
        } else if threads > self.max_threads as u64 {
            "the block has more threads than the kernel allows"
        } else if gx > i32::MAX as u32 || gy > 65535 || gz > 65535 || bz > 64 {
            "a dimension exceeds CUDA's limits (grid x < 2^31, y and z <= 65535; block z <= 64)"
        } else if c.shared_mem_bytes > self.max_dynamic_shared {
            "more dynamic shared memory than the kernel allows"
        } else {
            return Ok(());
        };
        Err(self.bad_config(c, problem))
    }

    #[cold]
    fn bad_config(&self, c: &LaunchConfig, problem: &str) -> Error {
        Error::with_detail(
            "StreamScope::launch",
            ErrorCode::InvalidValue,
            format!(
                "invalid launch configuration, {problem}: grid {:?}, block {:?} ({} threads; the kernel allows {}), {} bytes of dynamic shared memory (the kernel allows {})",
                c.grid,
                c.block,
                c.block.iter().map(|&d| d as u64).product::<u64>(),
                self.max_threads,
                c.shared_mem_bytes,
                self.max_dynamic_shared
            ),
        )
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

// SAFETY: a function handle plus plain numbers; launching from several threads at once is
// thread-safe in the driver.
unsafe impl<P> Send for Kernel<'_, '_, P> {}
// SAFETY: as above.
unsafe impl<P> Sync for Kernel<'_, '_, P> {}

/// The grid and block of a launch, and its dynamic shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: [u32; 3],
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// `grid` blocks of `block` threads, in x only.
    pub const fn linear(grid: u32, block: u32) -> Self {
        LaunchConfig {
            grid: [grid, 1, 1],
            block: [block, 1, 1],
            shared_mem_bytes: 0,
        }
    }

    /// A three-dimensional grid of three-dimensional blocks.
    pub const fn new(grid: [u32; 3], block: [u32; 3]) -> Self {
        LaunchConfig {
            grid,
            block,
            shared_mem_bytes: 0,
        }
    }

    /// The same, with `bytes` of dynamic shared memory per block.
    pub const fn with_shared_mem(self, bytes: u32) -> Self {
        LaunchConfig {
            shared_mem_bytes: bytes,
            ..self
        }
    }
}

/// A slice parameter the kernel reads: `const T *p, size_t p_len` in C. Pass `&buffer`,
/// `&buffer[range]`, a [`DeviceRef`] or a [`DeviceMut`].
pub struct In<T>(PhantomData<T>);

/// A slice parameter the kernel writes: `T *p, size_t p_len` in C. Pass `&mut buffer`,
/// `&mut buffer[range]` or a [`DeviceMut`].
pub struct Out<T>(PhantomData<T>);

/// A by-value parameter of a user `DeviceCopy` type (a `#[repr(C)]` struct the kernel
/// takes by value). The primitive numbers are parameters as they are.
pub struct ByValue<T>(PhantomData<T>);

/// One parameter of a kernel's declared list: how many C parameters it is and how its
/// argument is laid out.
pub trait KernelParam: private::Sealed {
    #[doc(hidden)]
    const COUNT: usize;
    #[doc(hidden)]
    type Raw;
    #[doc(hidden)]
    fn pointers(raw: &mut Self::Raw, out: &mut [*mut c_void]);
}

/// An argument that may be passed for the parameter `P` in a scope `'scope` of the context
/// `'ctx`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be passed for a kernel parameter declared as `{P}`",
    label = "the kernel's declaration says `{P}` here",
    note = "`In<T>` takes `&buffer`, `&buffer[range]`, a `DeviceRef` or a `DeviceMut`; `Out<T>` takes `&mut buffer`, `&mut buffer[range]` or a `DeviceMut`; a scalar parameter takes a value of exactly its type"
)]
pub trait KernelArg<'scope, 'ctx, P: KernelParam> {
    #[doc(hidden)]
    fn into_raw(self) -> P::Raw;
}

mod private {
    pub trait Sealed {}
}

impl<T: DeviceCopy> private::Sealed for In<T> {}
impl<T: DeviceCopy> KernelParam for In<T> {
    const COUNT: usize = 2;
    type Raw = [u64; 2];
    #[inline(always)]
    fn pointers(raw: &mut [u64; 2], out: &mut [*mut c_void]) {
        out[0] = (&mut raw[0] as *mut u64).cast();
        out[1] = (&mut raw[1] as *mut u64).cast();
    }
}

impl<T: DeviceCopy> private::Sealed for Out<T> {}
impl<T: DeviceCopy> KernelParam for Out<T> {
    const COUNT: usize = 2;
    type Raw = [u64; 2];
    #[inline(always)]
    fn pointers(raw: &mut [u64; 2], out: &mut [*mut c_void]) {
        <In<T> as KernelParam>::pointers(raw, out)
    }
}

impl<T: DeviceCopy> private::Sealed for ByValue<T> {}
impl<T: DeviceCopy> KernelParam for ByValue<T> {
    const COUNT: usize = 1;
    type Raw = T;
    #[inline(always)]
    fn pointers(raw: &mut T, out: &mut [*mut c_void]) {
        out[0] = (raw as *mut T).cast();
    }
}

impl<'scope, 'ctx, T: DeviceCopy, A: Into<DeviceRef<'scope, 'ctx, T>>>
    KernelArg<'scope, 'ctx, In<T>> for A
{
    #[inline(always)]
    fn into_raw(self) -> [u64; 2] {
        let r = self.into();
        [r.as_device_ptr(), r.len() as u64]
    }
}

impl<'scope, 'ctx, T: DeviceCopy, A: Into<DeviceMut<'scope, 'ctx, T>>>
    KernelArg<'scope, 'ctx, Out<T>> for A
{
    #[inline(always)]
    fn into_raw(self) -> [u64; 2] {
        let m = self.into();
        [m.as_device_ptr(), m.len() as u64]
    }
}

impl<'scope, 'ctx, T: DeviceCopy> KernelArg<'scope, 'ctx, ByValue<T>> for T {
    #[inline(always)]
    fn into_raw(self) -> T {
        self
    }
}

macro_rules! scalar_params {
    ($($t:ty),*) => { $(
        impl private::Sealed for $t {}
        impl KernelParam for $t {
            const COUNT: usize = 1;
            type Raw = $t;
            #[inline(always)]
            fn pointers(raw: &mut $t, out: &mut [*mut c_void]) {
                out[0] = (raw as *mut $t).cast();
            }
        }
        impl<'scope, 'ctx> KernelArg<'scope, 'ctx, $t> for $t {
            #[inline(always)]
            fn into_raw(self) -> $t {
                self
            }
        }
    )* };
}
scalar_params!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64);

/// A kernel's whole parameter list: a tuple of [`KernelParam`]s (up to 12).
pub trait KernelParams: private::Sealed {}

/// Arguments for the parameter list `P`: a tuple with one [`KernelArg`] per parameter.
#[diagnostic::on_unimplemented(
    message = "these arguments do not match the kernel's declared parameters `{P}`",
    note = "pass a tuple with one argument per declared parameter, in order (a one-parameter kernel takes `(arg,)`)"
)]
pub trait KernelArgs<'scope, 'ctx, P: KernelParams> {
    #[doc(hidden)]
    /// Lays the arguments out and calls `launch` with the `void**` array the driver takes.
    fn with_params<R>(self, launch: impl FnOnce(*mut *mut c_void) -> R) -> R;
}

macro_rules! kernel_params {
    ($max:literal; $($p:ident $a:ident $i:tt),+) => {
        impl<$($p: KernelParam),+> private::Sealed for ($($p,)+) {}
        impl<$($p: KernelParam),+> KernelParams for ($($p,)+) {}

        impl<'scope, 'ctx, $($p: KernelParam, $a: KernelArg<'scope, 'ctx, $p>),+> KernelArgs<'scope, 'ctx, ($($p,)+)> for ($($a,)+) {
            #[inline(always)]
            fn with_params<R>(self, launch: impl FnOnce(*mut *mut c_void) -> R) -> R {
                let mut raw = ($(self.$i.into_raw(),)+);
                let mut pointers = [std::ptr::null_mut::<c_void>(); $max];
                let mut at = 0;
                $(
                    $p::pointers(&mut raw.$i, &mut pointers[at..]);
                    at += $p::COUNT;
                )+
                let _ = at;
                launch(pointers.as_mut_ptr())
            }
        }
    };
}
kernel_params!(2; P0 A0 0);
kernel_params!(4; P0 A0 0, P1 A1 1);
kernel_params!(6; P0 A0 0, P1 A1 1, P2 A2 2);
kernel_params!(8; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3);
kernel_params!(10; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4);
kernel_params!(12; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5);
kernel_params!(14; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6);
kernel_params!(16; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7);
kernel_params!(18; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8);
kernel_params!(20; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8, P9 A9 9);
kernel_params!(22; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8, P9 A9 9, P10 A10 10);
kernel_params!(24; P0 A0 0, P1 A1 1, P2 A2 2, P3 A3 3, P4 A4 4, P5 A5 5, P6 A6 6, P7 A7 7, P8 A8 8, P9 A9 9, P10 A10 10, P11 A11 11);

/// Launches `kernel` on `stream` with `params`. Used by `StreamScope::launch`.
///
/// # Safety
/// The stream is alive and of the kernel's context, and everything `params` points to
/// stays valid until the stream has run the kernel.
#[inline(always)]
pub(crate) unsafe fn launch_raw<P>(
    kernel: &Kernel<'_, '_, P>,
    config: &LaunchConfig,
    stream: driver::CUstream,
    params: *mut *mut c_void,
) -> Result<()> {
    // SAFETY: the caller guarantees the stream and the memory; the kernel's declaration
    // guarantees the parameter layout.
    unsafe {
        driver::launch_kernel(
            kernel.function.as_raw(),
            config.grid,
            config.block,
            config.shared_mem_bytes,
            stream,
            params,
        )
    }
}
