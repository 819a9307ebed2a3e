//! [`Blas`]: a cuBLAS handle, branded with its context.

use std::cell::Cell;
use std::ffi::c_int;
use std::fmt;
use std::ptr::NonNull;

use cuda_driver_sys::CUctx_st;

use super::MathMode;
use super::sys::{self, cublasContext, cublasHandle_t};
use crate::context::{Brand, ContextGuard, NoPhases, Unpartitioned, in_context};
use crate::driver::CUstream;
use crate::error::Result;

/// A cuBLAS handle (`cublasHandle_t`) of the context branded `'ctx`: its operations
/// ([`Blas::gemm`] and the others) are queued in stream scopes of that context.
///
/// Made with [`Blas::new`] from the context's guard (`cublasCreate_v2`, with the context
/// current), destroyed when dropped (`cublasDestroy_v2`, with the context current; cuBLAS
/// synchronizes the device there). It cannot outlive its context, and an operation's
/// handle, scope and buffers share one brand, so one context. Every operation borrows the
/// handle for its scope, so the handle (and its default workspace, which cuBLAS owns) is
/// not destroyed while work it queued may still run.
///
/// **`Send`, not `Sync`.** cuBLAS lets any thread use a handle (each call here makes the
/// handle's context current for itself), so a handle may move to another thread. But a
/// handle's stream and pointer mode are settings of the handle, and each operation sets
/// them, then queues its work: two threads using one handle at once could queue one's
/// product on the other's stream, out of order with the memory it touches. cuBLAS's own
/// advice is the same ("it is not recommended that multiple threads share the same cuBLAS
/// handle"): make a handle per thread.
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// use cuda_brand::cublas::{Blas, Gemm};
/// # fn main() -> cuda_brand::Result<()> {
/// let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     let blas = Blas::new(ctx)?;
///     // column-major 2 × 2: A = [1 3; 2 4], B = identity
///     let a = ctx.from_slice(&[1.0f32, 2.0, 3.0, 4.0])?;
///     let b = ctx.from_slice(&[1.0f32, 0.0, 0.0, 1.0])?;
///     let mut c = ctx.zeroed::<f32>(4)?;
///     ctx.new_stream()?.scope(|s| blas.gemm(s, &Gemm::new(2, 2, 2), &a, &b, &mut c))?;
///     assert_eq!(c.to_vec()?, [1.0, 2.0, 3.0, 4.0]);
///     Ok(())
/// })
/// # }
/// ```
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)): handles of two contexts
/// never have one type, so a handle cannot queue work on another context's stream:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::cublas::Blas;
///
/// /// Takes two handles of one context.
/// fn one_context<'ctx>(_: &Blas<'ctx>, _: &Blas<'ctx>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let on_a = Blas::new(a)?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let on_b = Blas::new(b)?;
///         one_context(&on_a, &on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
///
/// Nor can it leave its context's closure:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::cublas::Blas;
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// let mut kept = None;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     kept = Some(Blas::new(ctx)?); // outlives its context: does not compile
///     Ok(())
/// })?;
/// # Ok(()) }
/// ```
pub struct Blas<'ctx> {
    handle: NonNull<cublasContext>,
    ctx: NonNull<CUctx_st>,
    /// The pointer mode last set on the handle (`-1`: none yet). A `Cell`, which also
    /// keeps the handle from being `Sync` (see the type's documentation).
    pointer_mode: Cell<c_int>,
    /// Invariant in `'ctx` (the crate's `Brand`): the handle, the scope's stream and the
    /// buffers of an operation share one brand, so one context. Were it covariant, handles
    /// of two contexts could be shortened to one brand and queue work on the other's
    /// streams.
    _brand: Brand<'ctx>,
}

// SAFETY: cuBLAS handles may be used from any thread (cuBLAS's "thread safety": the library
// may be called from several host threads, even with one handle); every call here pushes
// the handle's context on the calling thread first (`in_context`), and the brand keeps the
// context alive wherever the handle goes (a thread that receives it runs inside the
// context's closure, in a `std::thread::scope`). `Sync` stays off (the `Cell`).
unsafe impl Send for Blas<'_> {}

impl<'ctx> Blas<'ctx> {
    /// A new handle of `ctx`'s context (`cublasCreate_v2`), with the default math mode and
    /// cuBLAS's default workspace. Loads cuBLAS on first use: without it, an error with
    /// [`ErrorCode::CublasNotFound`](crate::ErrorCode::CublasNotFound) naming what was
    /// tried and `CUDA_BRAND_CUBLAS_LIBRARY`.
    pub fn new<P: NoPhases, S: Unpartitioned>(ctx: ContextGuard<'ctx, P, S>) -> Result<Blas<'ctx>> {
        let ctx = ctx.unphased();
        sys::api()?;
        let raw = ctx.as_non_null();
        // SAFETY: `with_current` makes the guard's (live) context current for the call.
        let handle = ctx.with_current(|| unsafe { sys::create() })?;
        let handle = NonNull::new(handle).ok_or_else(|| {
            crate::error::Error::with_detail(
                "cublasCreate_v2",
                crate::error::ErrorCode::Unknown,
                "cuBLAS returned success and a null handle",
            )
        })?;
        Ok(Blas {
            handle,
            ctx: raw,
            pointer_mode: Cell::new(-1),
            _brand: std::marker::PhantomData,
        })
    }

    /// The handle's math mode (`cublasSetMathMode`), for every later operation.
    pub fn set_math_mode(&self, mode: MathMode) -> Result<()> {
        let api = sys::api()?;
        let set = || {
            // SAFETY: a live handle (ours) and a `cublasMath_t` value.
            sys::check("cublasSetMathMode", unsafe {
                (api.set_math_mode)(self.handle.as_ptr(), mode.raw())
            })
        };
        // SAFETY: the brand keeps the context alive.
        unsafe { in_context(self.ctx, set) }
    }

    /// Runs `f`, one cuBLAS call with the handle, with the handle's context current, on
    /// `stream` (`cublasSetStream_v2`, which also hands the call cuBLAS's default workspace)
    /// and in pointer mode `mode`.
    ///
    /// # Safety
    /// `stream` is a live stream of the handle's context that stays alive while `f` runs.
    pub(crate) unsafe fn run(
        &self,
        stream: CUstream,
        mode: c_int,
        f: impl FnOnce(&sys::Api, cublasHandle_t) -> c_int,
        call: &'static str,
    ) -> Result<()> {
        let api = sys::api()?;
        let handle = self.handle.as_ptr();
        let queue = || {
            // SAFETY: a live handle (ours), a live stream of its context (the caller's
            // promise).
            sys::check("cublasSetStream_v2", unsafe {
                (api.set_stream)(handle, stream)
            })?;
            if self.pointer_mode.get() != mode {
                // SAFETY: a live handle and a `cublasPointerMode_t` value.
                sys::check("cublasSetPointerMode_v2", unsafe {
                    (api.set_pointer_mode)(handle, mode)
                })?;
                self.pointer_mode.set(mode);
            }
            sys::check(call, f(api, handle))
        };
        // SAFETY: the brand keeps the context alive for the handle's life.
        unsafe { in_context(self.ctx, queue) }
    }
}

impl Drop for Blas<'_> {
    fn drop(&mut self) {
        let handle = self.handle.as_ptr();
        // SAFETY: the handle is ours and unused from now on (operations borrow it for their
        // scopes, so every scope that queued work with it has synchronized); `in_context`
        // makes its context current.
        let destroy = || unsafe { sys::destroy(handle) };
        // SAFETY: the brand keeps the context alive.
        let destroyed = unsafe { in_context(self.ctx, destroy) };
        if let Err(e) = destroyed {
            // the context's destruction reclaims what cuBLAS allocated; its teardown reports
            // this
            crate::context::teardown::record_failed_release(Some(self.ctx), "Blas", e);
        }
    }
}

impl fmt::Debug for Blas<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Blas({:p})", self.handle)
    }
}
