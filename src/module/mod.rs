//! Modules ([`Module`]) and their functions ([`Function`]); declaring a function's
//! parameter list makes a typed kernel ([`Kernel`], in [`launch`](crate::launch)).
//!
//! ```no_run
//! use cuda_brand::prelude::*;
//! # fn main() -> cuda_brand::Result<()> {
//! let device = Device::get(0)?;
//! with_context(&device, ContextFlags::default(), |ctx| {
//!     let module = ctx.module_from_ptx(include_str!("../../kernels/kernels.ptx"))?;
//!     // SAFETY: `scale(float *x, size_t x_len, float k)` has this parameter list, writes
//!     // only `x[0..x_len]` and no module global.
//!     let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
//!     let mut x = ctx.from_slice(&[1.0f32, 2.0, 3.0])?;
//!     ctx.new_stream()?.scope(|s| s.launch(&scale, LaunchConfig::linear(1, 32), (&mut x, 2.0f32)))?;
//!     assert_eq!(x.to_vec()?, [2.0, 4.0, 6.0]);
//!     Ok(())
//! })
//! # }
//! ```
//!
//! A slice parameter ([`In<T>`](crate::In) for reading, [`Out<T>`](crate::Out) for
//! writing) is passed as two C parameters, the device pointer and the element count
//! (`const float *x, size_t x_len`), so a kernel can keep every access in bounds whatever
//! lengths safe code passes. That is the bound the declaration promises. A pointer
//! parameter ([`InPtr<T>`](crate::InPtr), [`OutPtr<T>`](crate::OutPtr)) is the pointer
//! alone, for kernels written as most CUDA code is (`saxpy(int n, float a, const float *x,
//! float *y)`); how far such a kernel reaches is then up to its scalar arguments, and the
//! declaration promises it for every launch the program makes
//! ([`Module::kernel`], its section "Pointer parameters").

use std::ffi::{CString, c_void};
use std::fmt;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ptr::NonNull;

use cuda_driver_sys::{CUctx_st, CUmod_st};

use crate::context::{Allocating, Brand, ContextGuard, Part, Phase};
use crate::driver::{self, CUdeviceptr, CUmodule, JitArgs};
use crate::error::{Error, ErrorCode, Invalid, Result};
use crate::launch::{Function, Kernel, KernelMut, KernelParams, ParamTable, counts};
use crate::memory::{DeviceCopy, DeviceSlice};
use crate::span::Touched;
use crate::synchronous;

// The rooms: `Module` here; `library.rs`, `jit.rs` (JIT options and logs), `image/` (the
// checks of module images and their parameter tables), `nvrtc.rs` (feature `nvrtc`).
mod image;
pub mod jit;
pub mod library;
#[cfg(feature = "nvrtc")]
pub mod nvrtc;

#[doc(inline)]
pub use jit::{JitCacheMode, JitFallback, JitLog, JitOptions};
#[doc(inline)]
pub use library::Library;

/// Code loaded into the context branded `'ctx` (`CUmodule`): from PTX text, or a cubin or
/// fatbin image. Unloaded when dropped; the functions and kernels taken from it borrow it.
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)), on its own and not only
/// through the guard that made it: modules of two contexts never have one type, and a
/// function that takes two of one context cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
///
/// /// Takes two modules of one context.
/// fn one_context<'ctx>(_: &Module<'ctx>, _: &Module<'ctx>) {}
///
/// # const PTX: &str = "";
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let on_a = a.module_from_ptx(PTX)?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let on_b = b.module_from_ptx(PTX)?;
///         one_context(&on_a, &on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct Module<'ctx> {
    raw: NonNull<CUmod_st>,
    ctx: NonNull<CUctx_st>,
    /// Invariant in `'ctx` (the crate's `Brand`); the functions, kernels and globals taken
    /// from the module take their brand from it. Were it covariant, modules of two contexts
    /// could be shortened to one brand, and so could everything taken from them.
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
    /// the offending line. Text the driver would take for a binary image (its first byte
    /// 0x7F: the ELF or Tile IR magic) and text with a NUL byte are refused before the
    /// driver (`InvalidPtx`).
    pub fn from_ptx<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        ptx: &str,
    ) -> Result<Self> {
        let text = ptx_text("Module::from_ptx", ptx)?;
        // SAFETY: NUL-terminated text that outlives the call, PTX as the driver reads it
        // (`ptx_text` refused text that starts like a binary image).
        unsafe { Self::load(ctx, text.as_ptr().cast(), Source::Ptx(ptx)) }
    }

    /// As [`Module::from_ptx`], with the JIT compiler's `options` (optimization level,
    /// register limit, target, debug and line information, ...); returns the module with
    /// what the compiler reported ([`JitLog`]: its info log and the time it took). On
    /// failure the error's [`detail`](Error::detail) is the compiler's error log.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// use cuda_brand::JitOptions;
    /// # fn main() -> cuda_brand::Result<()> {
    /// # let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let options = JitOptions::new().max_registers(16).log_verbose(true);
    ///     let (module, log) =
    ///         Module::from_ptx_logged(ctx, include_str!("../../kernels/kernels.ptx"), &options)?;
    ///     println!("{}", log.info); // e.g. "ptxas info : Used 16 registers ..."
    ///     assert!(module.function("sum_u64")?.num_registers()? <= 16);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn from_ptx_logged<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        ptx: &str,
        options: &JitOptions,
    ) -> Result<(Self, JitLog)> {
        const CALL: &str = "Module::from_ptx_logged";
        let text = ptx_text(CALL, ptx)?;
        let jit = options.to_args(CALL)?;
        // SAFETY: NUL-terminated text that outlives the call, PTX as the driver reads it
        // (`ptx_text` refused text that starts like a binary image).
        unsafe { Self::load_with(ctx, text.as_ptr().cast(), jit, Source::Ptx(ptx)) }
    }

    /// Loads a cubin or fatbin image (`cuModuleLoadDataEx`) after checking that every
    /// offset and size in it lies inside `image`: the driver takes the image without a
    /// length and follows those offsets, so a damaged or hostile image could make it read
    /// outside the slice. An image that fails the check is
    /// `CUDA_ERROR_INVALID_IMAGE` from `Module::from_binary` with what is wrong in the
    /// detail, before any driver call; an image for another GPU architecture is the
    /// driver's `CUDA_ERROR_NO_BINARY_FOR_GPU`.
    ///
    /// What is checked (the ELF header, program and section tables and every section,
    /// symbol, relocation and `.nv.info` record of a cubin; the fatbin header and every
    /// entry of a fatbin), and the GPU fuzz run behind it, are in `SOUNDNESS.md`.
    /// [`Module::from_binary_unchecked`] skips the check.
    pub fn from_binary<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        image: &[u8],
    ) -> Result<Self> {
        check_image("Module::from_binary", image)?;
        // SAFETY: every offset and size the image holds was checked against its length
        // (`check_image`), which is what `from_binary_unchecked` requires.
        unsafe { Self::from_binary_unchecked(ctx, image) }
    }

    /// As [`Module::from_binary`] (the same check first), with the JIT compiler's
    /// `options`, which matter where the image holds PTX: a fatbin's PTX is compiled when
    /// it has no binary for the device ([`JitOptions::fallback`] chooses between its PTX
    /// and a binary of an older architecture). Returns the module with what the compiler
    /// reported.
    pub fn from_binary_logged<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        image: &[u8],
        options: &JitOptions,
    ) -> Result<(Self, JitLog)> {
        const CALL: &str = "Module::from_binary_logged";
        check_image(CALL, image)?;
        let aligned = aligned_image(CALL, image)?;
        let jit = options.to_args(CALL)?;
        // SAFETY: every offset and size the image holds was checked against its length;
        // the copy outlives the call (the driver is taken to keep what it needs by the
        // load's end: SOUNDNESS.md, "Assumptions about the driver").
        unsafe { Self::load_with(ctx, aligned.as_ptr().cast(), jit, Source::Image(image)) }
    }

    /// Loads a cubin or fatbin image (`cuModuleLoadDataEx`) without checking its
    /// contents: only that it starts with the ELF or fatbin magic (anything else would be
    /// read as PTX text, past the slice if it has no NUL).
    ///
    /// # Safety
    ///
    /// Every offset and size the driver follows inside `image` lies inside the slice, as in
    /// a complete, undamaged image as `nvcc` or `nvlink` wrote it (or one that
    /// [`Module::from_binary`]'s check passed): the driver follows them without knowing the
    /// slice's length, so a truncated or corrupted image can make it read (and crash)
    /// outside the slice.
    pub unsafe fn from_binary_unchecked<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        image: &[u8],
    ) -> Result<Self> {
        let aligned = aligned_image("Module::from_binary", image)?;
        // SAFETY: the caller promises the offsets lie inside the image; the copy outlives
        // the call (the driver is taken to keep what it needs by the load's end).
        unsafe { Self::load(ctx, aligned.as_ptr().cast(), Source::Image(image)) }
    }

    /// # Safety
    /// `image` is a complete image, as `driver::module_load` requires.
    unsafe fn load<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        image: *const c_void,
        source: Source<'_>,
    ) -> Result<Self> {
        // SAFETY: the caller guarantees the image; the module goes into `ctx`.
        // SAFETY: as above.
        let loaded = ctx.with_current(|| Ok(unsafe { driver::module_load(image) }))?;
        let raw = loaded.map_err(|(e, log)| jit::with_log(e, &log))?;
        Self::from_loaded(ctx, raw, source)
    }

    /// # Safety
    /// `image` is a complete image, as `driver::module_load_ex` requires.
    unsafe fn load_with<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        image: *const c_void,
        mut jit: JitArgs,
        source: Source<'_>,
    ) -> Result<(Self, JitLog)> {
        // SAFETY: the caller guarantees the image; `jit` outlives the call; the module
        // goes into `ctx`.
        let loaded = ctx.with_current(|| Ok(unsafe { driver::module_load_ex(image, &mut jit) }))?;
        let raw = loaded.map_err(|e| jit::with_log(e, &jit.failure_log()))?;
        Ok((Self::from_loaded(ctx, raw, source)?, JitLog::read(&jit)))
    }

    fn from_loaded<P: Allocating, S: Part>(
        ctx: ContextGuard<'ctx, P, S>,
        raw: CUmodule,
        source: Source<'_>,
    ) -> Result<Self> {
        let raw = driver::non_null("cuModuleLoadDataEx", raw)?;
        let ctx = ctx.as_non_null();
        // the kernels' parameter counts, for declarations (only on drivers that need them)
        counts::remember(raw.as_ptr() as usize, || source.param_table());
        Ok(Module {
            raw,
            ctx,
            _brand: PhantomData,
        })
    }

    /// The handle, for the crate's own calls.
    #[inline]
    pub(crate) fn raw(&self) -> CUmodule {
        self.raw.as_ptr()
    }

    /// The driver's handle (`CUmodule`), for calls this crate does not wrap, once the
    /// crate's pending synchronous writes of the module's globals are done.
    ///
    /// A synchronous write of a global ([`global_mut`](Self::global_mut), then a `fill` or
    /// a copy) may still run on the GPU when it returns; the crate orders its own later
    /// launches of the module after it. Globals reached through the handle
    /// (`cuModuleGetGlobal`), or read by kernels launched through the driver, are not the
    /// crate's to order, so this call waits on the host for the pending synchronous writes
    /// of memory the crate cannot place first, which every write of a global is (no
    /// other pending write is waited for). One atomic load while nothing is pending. Only
    /// what is pending when the call is made. Where the wait cannot run or fails, the
    /// handle is returned all the same, as
    /// [`DeviceSlice::as_device_ptr`](crate::DeviceSlice::as_device_ptr) says.
    ///
    /// # Safety
    ///
    /// Taking the handle does nothing the caller must check; `unsafe` marks what it allows
    /// behind the borrow checker's back. The caller promises, for every use of the handle:
    /// the module is not
    /// unloaded (`cuModuleUnload`); the handle, and the functions and globals taken from it
    /// through the driver, are not used after this `Module` is dropped; kernels launched
    /// from those functions keep the promise of [`Module::kernel`] for the memory given to
    /// them; and its globals are written through the driver only while no kernel or copy
    /// of this crate may read them.
    #[inline]
    pub unsafe fn as_raw(&self) -> crate::driver::handles::CUmodule {
        synchronous::before_raw_escape(Touched::Spans(&[]));
        self.raw().cast()
    }

    /// The function `name` (`cuModuleGetFunction`); a name the module does not have is
    /// `CUDA_ERROR_NOT_FOUND`, with the name in the error.
    ///
    /// A partition's module is used on the partition's thread only: on another thread this
    /// and [`global`](Self::global) are [`ErrorCode::NotPermitted`], and so is every
    /// method of a function looked up in it ([`crate::partition`]).
    pub fn function(&self, name: &str) -> Result<Function<'_, 'ctx>> {
        crate::context::confined::refuse_foreign(self.ctx.as_ptr())?;
        let c_name = c_name("Module::function", name)?;
        // SAFETY: the module is alive (borrowed).
        let raw = unsafe { driver::module_get_function(self.raw(), &c_name) }.map_err(|e| {
            Error::with_detail(
                e.call(),
                e.code(),
                format!("no function named `{name}` in the module"),
            )
        })?;
        let raw = driver::non_null("cuModuleGetFunction", raw)?;
        counts::note_function(self.raw.as_ptr() as usize, name, raw.as_ptr());
        // used on the partition's thread only, for a partition's module
        let (function, module) = (raw.as_ptr() as usize, self.raw.as_ptr() as usize);
        crate::context::confined::register_function(function, module, self.ctx.as_ptr());
        // SAFETY: a function of this module, which the result borrows.
        Ok(unsafe { Function::from_raw(raw) })
    }

    /// Declares the kernel `name` with the parameter list `P`, a tuple of
    /// [`In<T>`](crate::In), [`Out<T>`](crate::Out), [`InPtr<T>`](crate::InPtr),
    /// [`OutPtr<T>`](crate::OutPtr) and scalars (`f32`, `u32`, ... or
    /// [`ByValue<T>`](crate::ByValue)).
    ///
    /// # Safety
    ///
    /// This is the one statement of what declaring a kernel promises; every other
    /// declaration ([`Module::kernel_mut`], [`Library::kernel`], [`Function::typed`],
    /// [`OwnedKernel::new`](crate::owned::OwnedKernel::new) and
    /// [`from_library`](crate::owned::OwnedKernel::from_library)) promises the same. The
    /// kernel's contract, which every launch then relies on:
    ///
    /// * its C parameter list is exactly `P`, each `In<T>`/`Out<T>` being a
    ///   `const T*`/`T*` followed by a `size_t` element count, each `InPtr<T>`/`OutPtr<T>`
    ///   a `const T*`/`T*` alone;
    /// * it accesses a slice parameter only below the element count it is given, and a
    ///   pointer parameter only inside the memory passed for it (see
    ///   "Pointer parameters" below: for such a kernel this part of the promise is about
    ///   the program's launches);
    /// * it **reads** only memory of its `In`, `Out`, `InPtr` and `OutPtr` parameters and
    ///   global variables of this module, and **writes** only through its `Out` and
    ///   `OutPtr` parameters: not through pointers it finds in memory (a global holding an
    ///   address, a scalar or `ByValue` argument the host chose) or computes (other than
    ///   from a parameter, inside its memory), and **no global variable of the module**
    ///   (declare such a kernel with [`Module::kernel_mut`]);
    /// * all of this holds for every launch configuration the crate lets through (any grid
    ///   and block the kernel's limits allow, any dynamic shared memory up to its limit,
    ///   with or without a thread-block cluster, cooperative or not, see
    ///   [`LaunchConfig`](crate::LaunchConfig)): a kernel that relies on a particular
    ///   block size, shared-memory size or cluster shape checks it (`%cluster_nctarank`),
    ///   and one that synchronizes its grid checks that it was launched cooperatively
    ///   (`cooperative_groups::this_grid().is_valid()`); for a kernel with a pointer
    ///   parameter, the launches of the program instead (below).
    ///
    /// The crate checks the rest before each launch: arguments match `P` (by type), every
    /// buffer is of this context and stays borrowed until the kernel has run, and no `Out`
    /// or `OutPtr` argument overlaps any other slice or pointer argument. Where the driver
    /// reports a kernel's parameters (CUDA 12.4 or newer), the declaration is also checked
    /// against them: their number, and the size and offset of each (see
    /// [`Function::typed`]); a mismatch is an error naming the parameter.
    ///
    /// # Pointer parameters
    ///
    /// An `InPtr<T>` or `OutPtr<T>` argument reaches the kernel as its address only. For
    /// it the crate checks what it checks for a slice: the memory is of this context, it
    /// is borrowed for the kernel's run (shared for an `InPtr`, exclusively for an
    /// `OutPtr`), ordered after and before the other work on it (other streams of the
    /// scope, the synchronous copies), and an `OutPtr`'s memory overlaps no other pointer
    /// or slice argument of the launch. The memory is the whole of what is passed: the
    /// slice (`&x`, `&x[range]`, a view), or a pitched buffer's allocation, `pitch_bytes()`
    /// times its rows. What the crate cannot see is how far the kernel reaches through the
    /// address: that depends on its scalar arguments and its launch configuration. So
    /// declaring a kernel with a pointer parameter promises, for **every launch of it the
    /// program makes**, that the scalar arguments and the configuration of the launch keep
    /// the kernel inside the contract above: it accesses each pointer parameter's memory
    /// only inside the memory passed for it (and only reads it, for an `InPtr`), and its
    /// shared memory only inside what the configuration gives it. Those arguments and
    /// configurations are part of what the declarer promises, since the crate cannot see
    /// how the kernel uses them. Declaring
    ///
    /// ```c
    /// // y[i] = a * x[i] + y[i] for i < n
    /// __global__ void saxpy(int n, float a, const float *x, float *y);
    /// ```
    ///
    /// as `(i32, f32, InPtr<f32>, OutPtr<f32>)` promises that every launch passes an `n`
    /// of at most both `x.len()` and `y.len()` (a negative one touches nothing), with a
    /// grid of fewer than 2³¹ threads (the `int` index would wrap to a negative one). A
    /// reduction that keeps `blockDim.x` floats of dynamic shared memory and reads two
    /// inputs per thread promises, with its declaration, that every launch's block size and
    /// dynamic shared memory are the ones it relies on. The promise covers every launch,
    /// by any code that can reach the [`Kernel`]: keep such a kernel where its launches are
    /// (a private field, a function that checks `n <= x.len().min(y.len())` before it
    /// launches), or declare the kernel with slices ([`In`](crate::In),
    /// [`Out`](crate::Out)), whose lengths the crate passes itself, where no launch can
    /// break the promise. The `In`/`Out` parameters of a kernel that also has pointer
    /// parameters stay promised for any launch, as above.
    ///
    /// # Under compute-sanitizer
    ///
    /// The check asks the driver only about parameters the kernel has, so declaring a
    /// kernel provokes no driver error and a `compute-sanitizer` run with default options
    /// stays clean. The number of parameters comes from `cuFuncGetParamCount` (CUDA 13.2
    /// drivers) or, on CUDA 12.4 to 13.1 drivers, from what the module was loaded from:
    /// the `.entry` signature of PTX ([`Module::from_ptx`], NVRTC's PTX), the
    /// `EIATTR_KPARAM_INFO` records of a cubin's `.nv.info.<kernel>`, the uncompressed
    /// entries of a fatbin ([`Module::from_binary`], checked or not; the same for
    /// [`Library`]). Where none of these gives the kernel's count (every
    /// entry of a fatbin compressed, `.nv.info` records this crate does not read, PTX it
    /// does not understand, entries of one fatbin that disagree), the driver is asked once
    /// past the last parameter, as before: one `CUDA_ERROR_INVALID_VALUE` that
    /// compute-sanitizer reports (`--report-api-errors no` silences it). The check itself
    /// is complete either way.
    pub unsafe fn kernel<P: KernelParams>(&self, name: &str) -> Result<Kernel<'_, 'ctx, P>> {
        let function = self.function(name)?;
        // SAFETY: the caller's promise is this function's.
        unsafe { function.typed_as("Module::kernel") }
    }

    /// Declares a kernel that writes global variables of this module (`__device__`
    /// variables). It borrows the module exclusively for as long as it exists, so the host
    /// cannot read or write the module's globals (or take another kernel of it) while the
    /// kernel may be queued or running; a scope launches it through `&mut` (once) or
    /// [`StreamScope::bind_kernel`](crate::StreamScope::bind_kernel) (any number of times,
    /// on that scope's stream only), so two streams never write the globals unordered.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// # let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let mut module = ctx.module_from_ptx(include_str!("../../kernels/kernels.ptx"))?;
    ///     module.global_mut::<i32>("counter")?.copy_from_host(&[40])?;
    ///     {
    ///         // SAFETY: bump(int) writes only the globals `counter` and `table`.
    ///         let mut bump = unsafe { module.kernel_mut::<(i32,)>("bump") }?;
    ///         ctx.new_stream()?.scope(|s| {
    ///             let bump = s.bind_kernel(&mut bump);
    ///             s.launch(bump, LaunchConfig::linear(1, 32), (1i32,))?;
    ///             s.launch(bump, LaunchConfig::linear(1, 32), (1i32,))
    ///         })?;
    ///     } // `bump` is gone: the module's globals may be read again
    ///     assert_eq!(module.global::<i32>("counter")?.to_vec()?, [42]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    ///
    /// # Safety
    ///
    /// As for [`Module::kernel`] (pointer parameters included: its section "Pointer
    /// parameters"), except that the kernel may also write global variables of this module
    /// (and only of this module).
    pub unsafe fn kernel_mut<P: KernelParams>(
        &mut self,
        name: &str,
    ) -> Result<KernelMut<'_, 'ctx, P>> {
        let key = self.raw.as_ptr() as usize;
        let function = self.function(name)?;
        // SAFETY: the caller's promise.
        let kernel = unsafe { function.typed_as("Module::kernel_mut") }?;
        Ok(KernelMut::new(kernel, key))
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
        crate::context::confined::refuse_foreign(self.ctx.as_ptr())?;
        let c_name = c_name("Module::global", name)?;
        // SAFETY: the module is alive (borrowed).
        let (ptr, bytes) =
            unsafe { driver::module_get_global(self.raw(), &c_name) }.map_err(|e| {
                Error::with_detail(
                    e.call(),
                    e.code(),
                    format!("no global named `{name}` in the module"),
                )
            })?;
        Ok((ptr, global_len::<T>(name, ptr, bytes)?))
    }
}

/// The number of `T`s in a global of `bytes` bytes at `ptr`, or an error if it is not a
/// whole number of them or not aligned for `T`.
fn global_len<T>(name: &str, ptr: CUdeviceptr, bytes: usize) -> Result<usize> {
    let size = size_of::<T>().max(1);
    let problem = if ptr % align_of::<T>() as CUdeviceptr != 0 {
        format!(
            "global `{name}` is at {ptr:#x}, not aligned for `{}` (alignment {})",
            std::any::type_name::<T>(),
            align_of::<T>()
        )
    } else if bytes % size != 0 {
        format!(
            "global `{name}` has {bytes} bytes, not a whole number of {size}-byte `{}`",
            std::any::type_name::<T>()
        )
    } else {
        return Ok(bytes / size);
    };
    Err(Error::invalid_input(
        "Module::global",
        Invalid::argument(problem),
    ))
}

/// PTX text as the driver takes it (NUL-terminated), refused where the driver would
/// misread it: text whose first byte is 0x7F (DEL, which no PTX starts with) would be
/// parsed as a binary image, offsets and all, without the check `from_binary` makes. Both
/// binary formats the driver takes whose magic is text start so: ELF (`\x7fELF`, a cubin)
/// and, since CUDA 13, Tile IR bytecode (`\x7fTileIR\0`: the 7-byte `&str` `"\x7fTileIR"`
/// with its NUL is the whole magic, and the driver would read the sections after it
/// beyond the allocation). The fatbin magics are not valid UTF-8, so no `&str` starts with
/// them.
pub(crate) fn ptx_text(call: &'static str, ptx: &str) -> Result<CString> {
    let kind = call.split("::").next().unwrap_or(call);
    if ptx.as_bytes().first() == Some(&0x7f) {
        let what = match ptx.as_bytes().starts_with(b"\x7fELF") {
            true => format!("the ELF magic: it is a cubin, load it with {kind}::from_binary"),
            false => "byte 0x7F, as binary images do (Tile IR bytecode, for one), never PTX: \
                      the driver would parse it as one"
                .to_owned(),
        };
        return Err(Error::with_detail(
            call,
            ErrorCode::InvalidPtx,
            format!("the text starts with {what}"),
        ));
    }
    CString::new(ptx).map_err(|e| {
        Error::with_detail(
            call,
            ErrorCode::InvalidPtx,
            format!(
                "the PTX text contains a NUL byte at offset {}",
                e.nul_position()
            ),
        )
    })
}

/// What a module or library was loaded from: where its kernels' parameter table comes
/// from (see `launch::counts`).
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    /// PTX text.
    Ptx(&'a str),
    /// A cubin or fatbin image (checked or not: the table's reader bounds every read).
    Image(&'a [u8]),
}

impl Source<'_> {
    /// The parameter list of every kernel the text or image declares, as far as it can be
    /// read.
    pub(crate) fn param_table(self) -> ParamTable {
        match self {
            Source::Ptx(text) => image::table_of_ptx(text),
            Source::Image(image) => image::table_of_image(image),
        }
    }
}

/// Checks every offset and size of a cubin or fatbin against the slice (`image::check`).
pub(crate) fn check_image(call: &'static str, image: &[u8]) -> Result<()> {
    match image::check(image) {
        Ok(_) => Ok(()),
        Err(problem) => Err(Error::with_detail(
            call,
            ErrorCode::InvalidImage,
            problem.to_string(),
        )),
    }
}

/// An 8-byte-aligned copy of a cubin or fatbin (the driver reads images through aligned
/// loads), after checking its magic: anything else would be read as PTX text, past the
/// slice if it has no NUL.
pub(crate) fn aligned_image(call: &'static str, image: &[u8]) -> Result<Vec<u64>> {
    const ELF: [u8; 4] = [0x7f, b'E', b'L', b'F'];
    const FATBIN: [u8; 4] = [0x50, 0xed, 0x55, 0xba];
    if image.len() < 4 || (image[..4] != ELF && image[..4] != FATBIN) {
        let kind = call.split("::").next().unwrap_or(call);
        return Err(Error::with_detail(
            call,
            ErrorCode::InvalidImage,
            format!("not a cubin (ELF) or fatbin image; use {kind}::from_ptx for PTX text"),
        ));
    }
    let mut aligned = vec![0u64; image.len().div_ceil(8)];
    // SAFETY: `aligned` has at least `image.len()` bytes, and the two do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(
            image.as_ptr(),
            aligned.as_mut_ptr().cast::<u8>(),
            image.len(),
        )
    };
    Ok(aligned)
}

pub(crate) fn c_name(call: &'static str, name: &str) -> Result<CString> {
    CString::new(name).map_err(|_| {
        Error::invalid_input(
            call,
            Invalid::argument(format!("the name {name:?} contains a NUL byte")),
        )
    })
}

// The bounds are on the methods, so that a run-phase guard gets `Allocating`'s message.
impl<'ctx, P: Phase, S: Part> ContextGuard<'ctx, P, S> {
    /// A module JIT-compiled from PTX text: [`Module::from_ptx`].
    pub fn module_from_ptx(self, ptx: &str) -> Result<Module<'ctx>>
    where
        P: Allocating,
    {
        Module::from_ptx(self, ptx)
    }

    /// A module JIT-compiled from PTX text with the compiler's `options`, and what the
    /// compiler reported: [`Module::from_ptx_logged`].
    pub fn module_from_ptx_logged(
        self,
        ptx: &str,
        options: &JitOptions,
    ) -> Result<(Module<'ctx>, JitLog)>
    where
        P: Allocating,
    {
        Module::from_ptx_logged(self, ptx, options)
    }
}

impl Module<'_> {
    /// Unloads the module and returns the driver's error, where dropping it would only
    /// record the error for the teardown of its context to report. After an error the
    /// context's destruction reclaims the module.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let module = ctx.module_from_ptx(include_str!("../../kernels/kernels.ptx"))?;
    ///     module.close()
    /// })
    /// # }
    /// ```
    pub fn close(self) -> Result<()> {
        let this = std::mem::ManuallyDrop::new(self);
        this.release()
    }

    /// What `drop` and `close` run: unloads the module in its own context (a partition's
    /// module dropped on another thread: on the partition's thread, at its end,
    /// `context::confined`).
    fn release(&self) -> Result<()> {
        let raw = self.raw() as usize;
        let unload = move |ctx| {
            let raw = raw as CUmodule;
            // A global written synchronously may still be written on a sync stream
            // (recorded as touching any memory, and waited for only by later users of the
            // book): the unload frees the global's memory, and `cuModuleUnload` is not
            // documented to wait for other streams' work on it. Waited for on the host
            // first, as before a `cuMemFree` (one atomic load while nothing is pending).
            // SAFETY: the brand keeps the context alive (a parked release runs before the
            // partition ends).
            unsafe { ContextGuard::new_unchecked(ctx) }
                .with_current(crate::synchronous::wait_on_host)?;
            // before the unload, while no other module can have this module's handles
            counts::forget(raw as usize);
            crate::context::confined::forget_functions_of(raw as usize);
            // SAFETY: the brand keeps the context alive; nothing uses the module any more
            // (its functions and kernels borrow it, and launches keep that borrow until
            // their scope's stream is idle; synchronous writes of its globals are complete,
            // above), and the module is not used again (dropped, or forgotten by `close`).
            unsafe { ContextGuard::new_unchecked(ctx) }
                .with_current(|| unsafe { driver::module_unload(raw) })
        };
        crate::context::confined::release_in(self.ctx, "Module", unload).unwrap_or(Ok(()))
    }
}

impl Drop for Module<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            // the context's destruction reclaims the module; its teardown reports this
            crate::context::teardown::record_failed_release(Some(self.ctx), "Module", e);
        }
    }
}

impl fmt::Debug for Module<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Module").field(&self.raw).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::{global_len, ptx_text};
    use crate::error::ErrorCode;

    /// Text the driver would parse as a binary image is refused before any driver call:
    /// the ELF magic, the Tile IR magic (whose NUL the `CString` would add), any text whose
    /// first byte is 0x7F; PTX, and 0x7F later in the text, pass.
    #[test]
    fn ptx_text_that_starts_like_a_binary_image_is_refused() {
        for text in ["\x7fELF\x02\x01", "\x7fTileIR", "\x7f", "\x7fanything"] {
            let e = ptx_text("Module::from_ptx", text).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidPtx, "{text:?}: {e}");
        }
        let e = ptx_text("Library::from_ptx", "\x7fELF").unwrap_err();
        assert!(e.detail().unwrap().contains("Library::from_binary"), "{e}");
        let ptx = ".version 8.0\n.target sm_90\n// \x7f in a comment\n";
        let text = ptx_text("Module::from_ptx", ptx).unwrap();
        assert_eq!(text.as_bytes(), ptx.as_bytes());
        let e = ptx_text("Module::from_ptx", ".version 8.0\0").unwrap_err();
        assert!(e.detail().unwrap().contains("NUL byte at offset 12"), "{e}");
    }

    #[test]
    fn a_global_view_must_be_aligned_and_a_whole_number_of_elements() {
        assert_eq!(global_len::<f32>("t", 0x1000, 64).unwrap(), 16);
        assert_eq!(global_len::<()>("t", 0x1001, 3).unwrap(), 3);
        let e = global_len::<u64>("counter", 0x1004, 8).unwrap_err();
        assert_eq!(
            e.invalid().and_then(crate::error::Invalid::reason),
            Some("global `counter` is at 0x1004, not aligned for `u64` (alignment 8)")
        );
        let e = global_len::<[u8; 3]>("counter", 0x1000, 4).unwrap_err();
        assert_eq!(
            e.invalid().and_then(crate::error::Invalid::reason),
            Some("global `counter` has 4 bytes, not a whole number of 3-byte `[u8; 3]`")
        );
    }
}
