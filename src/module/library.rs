//! Libraries ([`Library`]): code loaded once for every context (`cuLibraryLoadData`, CUDA
//! 12.0), whose kernels are taken for one context at a time as branded [`Function`]s.
//!
//! A [`Module`](crate::Module) belongs to one context and carries its brand. A library
//! belongs to none: it can be loaded before any context exists, outside every
//! [`with_context`](crate::with_context), and outlive them all. What ties it to a context
//! is taking a kernel of it *for* that context, [`Library::function`] (or
//! [`Library::kernel`]), which needs the context's guard and returns a [`Function`]
//! branded with it, so the usual rules apply: the function is launched only on that
//! context's streams, with that context's buffers. The function also borrows the library,
//! so the library cannot be unloaded (dropped) while a function or kernel taken from it
//! exists, nor while a launch of one is queued (the scope borrows the kernel until its
//! stream is idle).
//!
//! ```no_run
//! use cuda_brand::prelude::*;
//! use cuda_brand::Library;
//! # fn main() -> cuda_brand::Result<()> {
//! // loaded once, before any context
//! let library = Library::from_ptx(include_str!("../../kernels/kernels.ptx"))?;
//! let device = Device::get(0)?;
//! for k in [2.0f32, 3.0] {
//!     with_context(&device, ContextFlags::default(), |ctx| {
//!         // SAFETY: scale(float *x, size_t x_len, float k) writes only x[0..x_len].
//!         let scale = unsafe { library.kernel::<(Out<f32>, f32)>(ctx, "scale") }?;
//!         let mut x = ctx.from_slice(&[1.0f32, 2.0])?;
//!         ctx.new_stream()?.scope(|s| s.launch(&scale, LaunchConfig::linear(1, 32), (&mut x, k)))?;
//!         assert_eq!(x.to_vec()?, [k, 2.0 * k]);
//!         Ok(())
//!     })?;
//! }
//! # Ok(())
//! # }
//! ```
//!
//! A function of one context cannot be launched on another's stream, and a library
//! cannot be dropped while a function of it lives: both are compile errors
//! (`ui-tests/fail/5_kernels/library_*`).
//!
//! Libraries need a CUDA 12.0 driver (R525) or newer; with an older one every constructor
//! returns an error with [`ErrorCode::DriverTooOld`](crate::ErrorCode::DriverTooOld) saying so.

use std::ffi::c_void;
use std::fmt;
use std::ptr::NonNull;

use super::jit::{self, JitLog, JitOptions};
use super::{Source, aligned_image, c_name, check_image, ptx_text};
#[cfg(doc)]
use crate::context::ContextGuard;
use crate::context::{Allocates, confined};
use crate::driver::{self, CUlib_st, CUlibrary, JitArgs};
use crate::error::{Error, Result};
use crate::launch::{Function, Kernel, KernelParams, counts};

/// Code loaded for every context (`CUlibrary`, CUDA 12.0): from PTX text, or a cubin or
/// fatbin image. Not branded: take its kernels for a context with [`Library::function`] or
/// [`Library::kernel`]. Unloaded when dropped; the functions and kernels taken from it
/// borrow it. See the [`library` module](crate::module::library).
pub struct Library {
    raw: NonNull<CUlib_st>,
    /// The JIT option arrays and log buffers of the load. The driver may compile a
    /// library's PTX lazily, when a kernel of it is first needed in a context, after
    /// `cuLibraryLoadData` returned; whether it then still uses the option values it was
    /// given is not documented, so they live as long as the library and are never read
    /// after the load.
    _jit: JitArgs,
}

// SAFETY: a library handle is process-wide and not tied to a context or thread; unloading
// needs no current context. The kept option arrays are never read or written by the crate
// after the load.
unsafe impl Send for Library {}
// SAFETY: `&Library` only looks up kernels (`cuLibraryGetKernel`, `cuKernelGetFunction`),
// thread-safe driver calls.
unsafe impl Sync for Library {}

impl Library {
    /// Loads PTX text as a library (`cuLibraryLoadData`). If the PTX does not compile, the
    /// error's [`detail`](Error::detail) is the JIT compiler's log. (The driver may compile
    /// it only when a kernel of it is first taken for a context: then that call fails.)
    /// Text that starts like a binary image (byte 0x7F) or holds a NUL byte is refused
    /// first, as by [`Module::from_ptx`](crate::Module::from_ptx).
    pub fn from_ptx(ptx: &str) -> Result<Library> {
        Self::from_ptx_logged(ptx, &JitOptions::default()).map(|(library, _)| library)
    }

    /// As [`Library::from_ptx`], with the JIT compiler's `options`; returns the library
    /// with what the compiler reported while loading it.
    pub fn from_ptx_logged(ptx: &str, options: &JitOptions) -> Result<(Library, JitLog)> {
        const CALL: &str = "Library::from_ptx";
        let text = ptx_text(CALL, ptx)?;
        let jit = options.to_args(CALL)?;
        // SAFETY: NUL-terminated text that outlives the call, PTX as the driver reads it
        // (`ptx_text` refused text that starts like a binary image).
        unsafe { Self::load(text.as_ptr().cast(), jit, Source::Ptx(ptx)) }
    }

    /// Loads a cubin or fatbin image as a library after checking that every offset and
    /// size in it lies inside `image`, exactly as [`Module::from_binary`](crate::Module::from_binary)
    /// does (the driver takes the image without its length): an image that fails the
    /// check is `CUDA_ERROR_INVALID_IMAGE` with what is wrong in the detail, before any
    /// driver call.
    pub fn from_binary(image: &[u8]) -> Result<Library> {
        Self::from_binary_logged(image, &JitOptions::default()).map(|(library, _)| library)
    }

    /// As [`Library::from_binary`] (the same check first), with the JIT compiler's
    /// `options` for the PTX a fatbin may hold.
    pub fn from_binary_logged(image: &[u8], options: &JitOptions) -> Result<(Library, JitLog)> {
        const CALL: &str = "Library::from_binary";
        check_image(CALL, image)?;
        let aligned = aligned_image(CALL, image)?;
        let jit = options.to_args(CALL)?;
        // SAFETY: every offset and size the image holds was checked against its length;
        // the copy outlives the call, and the driver is taken to keep what it needs of an
        // image by the load's end (an assumption, not a documented guarantee: SOUNDNESS.md,
        // "Assumptions about the driver").
        unsafe { Self::load(aligned.as_ptr().cast(), jit, Source::Image(image)) }
    }

    /// Loads a cubin or fatbin image as a library without checking its contents: only its
    /// magic (anything else would be read as PTX text).
    ///
    /// # Safety
    ///
    /// As for [`Module::from_binary_unchecked`](crate::Module::from_binary_unchecked):
    /// every offset and size the driver follows inside `image` lies inside the slice (as in
    /// a complete, undamaged image as `nvcc` or `nvlink` wrote it).
    pub unsafe fn from_binary_unchecked(image: &[u8]) -> Result<Library> {
        let aligned = aligned_image("Library::from_binary", image)?;
        let jit = JitOptions::default().to_args("Library::from_binary")?;
        // SAFETY: the caller promises the offsets lie inside the image; the copy outlives
        // the call (the driver is taken to keep what it needs by the load's end).
        unsafe { Self::load(aligned.as_ptr().cast(), jit, Source::Image(image)) }
            .map(|(library, _)| library)
    }

    /// # Safety
    /// `image` is a complete image, as `driver::library_load_data` requires.
    unsafe fn load(
        image: *const c_void,
        mut jit: JitArgs,
        source: Source<'_>,
    ) -> Result<(Library, JitLog)> {
        // SAFETY: the caller guarantees the image; `jit` is moved into the library, so it
        // outlives the call and the library.
        let raw = match unsafe { driver::library_load_data(image, &mut jit) } {
            Ok(raw) => raw,
            Err(e) => return Err(jit::with_log(e, &jit.failure_log())),
        };
        let raw = driver::non_null("cuLibraryLoadData", raw)?;
        // the kernels' parameter counts, for declarations (only on drivers that need them)
        counts::remember(raw.as_ptr() as usize, || source.param_table());
        let log = JitLog::read(&jit);
        Ok((Library { raw, _jit: jit }, log))
    }

    /// The handle, for the crate's own calls.
    #[inline]
    pub(crate) fn raw(&self) -> CUlibrary {
        self.raw.as_ptr()
    }

    /// The driver's handle (`CUlibrary`), for calls this crate does not wrap.
    ///
    /// Nothing is waited for: the crate writes no global of a library, so nothing of the
    /// crate's is pending on what the handle reaches.
    ///
    /// # Safety
    ///
    /// Taking the handle does nothing; `unsafe` marks what it allows behind the borrow
    /// checker's back. The caller promises, for every use of the handle: the library is
    /// not unloaded (`cuLibraryUnload`); the handle, and the kernels, functions and globals
    /// taken from it through the driver, are not used after this `Library` is dropped; and
    /// kernels launched from those keep the promise of [`Library::kernel`] for the memory
    /// given to them.
    #[inline]
    pub unsafe fn as_raw(&self) -> CUlibrary {
        self.raw()
    }

    /// The kernel `name` of the library, for the context of `ctx` (`cuLibraryGetKernel`,
    /// then `cuKernelGetFunction` with the context current, which loads the library into
    /// it if it is not yet). The function is branded with `ctx`'s brand and borrows the
    /// library. A name the library does not have is `CUDA_ERROR_NOT_FOUND`, with the name
    /// in the error.
    ///
    /// Any guard that may load takes part: a plain guard, a setup-phase guard (the load
    /// into the context happens here, so do it in setup), and a partition's guard, whose
    /// `CUcontext` form is current for the call, so the function is the partition's
    /// (branded `'p`, launched on its streams only, and used on its thread only, as a
    /// function of a partition's module is: [`crate::partition`]).
    pub fn function<'l, 'ctx>(
        &'l self,
        ctx: impl Allocates<'ctx>,
        name: &str,
    ) -> Result<Function<'l, 'ctx>> {
        let ctx = ctx.into_guard();
        let c_name = c_name("Library::function", name)?;
        // SAFETY: the library is alive (borrowed).
        let kernel = unsafe { driver::library_get_kernel(self.raw(), &c_name) }.map_err(|e| {
            Error::with_detail(
                e.call(),
                e.code(),
                format!("no kernel named `{name}` in the library"),
            )
        })?;
        let kernel = driver::non_null("cuLibraryGetKernel", kernel)?;
        // SAFETY: a kernel of this library, which is alive; the function is `ctx`'s
        // because `ctx` is current for the call.
        let raw = ctx.with_current(|| unsafe { driver::kernel_get_function(kernel.as_ptr()) })?;
        let raw = driver::non_null("cuKernelGetFunction", raw)?;
        counts::note_function(self.raw.as_ptr() as usize, name, raw.as_ptr());
        // used on the partition's thread only, for a partition's context (forgotten when
        // the library is unloaded or the partition ends)
        let (function, library) = (raw.as_ptr() as usize, self.raw.as_ptr() as usize);
        confined::register_function(function, library, ctx.raw());
        // SAFETY: a function of the context `'ctx`, valid while the library stays loaded,
        // which the result borrows for `'l`.
        Ok(unsafe { Function::from_raw(raw) })
    }

    /// Declares the kernel `name` with the parameter list `P`, for the context of `ctx`:
    /// [`Library::function`] then [`Function::typed`] (checked against the driver's
    /// parameter information where it has it).
    ///
    /// # Safety
    ///
    /// As for [`Module::kernel`](crate::Module::kernel), the one statement of a
    /// declaration's promise, with the library for the module: the kernel's C parameter
    /// list is `P`, it stays inside the memory of its slice and pointer arguments (for a
    /// pointer parameter, in every launch the program makes: its section "Pointer
    /// parameters"), writes only through its `Out` and `OutPtr` parameters and writes no
    /// global variable of the library.
    pub unsafe fn kernel<'l, 'ctx, P: KernelParams>(
        &'l self,
        ctx: impl Allocates<'ctx>,
        name: &str,
    ) -> Result<Kernel<'l, 'ctx, P>> {
        let function = self.function(ctx, name)?;
        // SAFETY: the caller's promise is this function's.
        unsafe { function.typed_as("Library::kernel") }
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        // before the unload, while no other library or module can have its handles
        counts::forget(self.raw.as_ptr() as usize);
        confined::forget_functions_of(self.raw.as_ptr() as usize);
        // SAFETY: nothing uses the library any more: its functions and kernels borrow it,
        // and launches keep that borrow until their scope's stream is idle. Errors cannot
        // be reported from `drop`.
        let _ = unsafe { driver::library_unload(self.raw()) };
    }
}

impl fmt::Debug for Library {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Library").field(&self.raw).finish()
    }
}
