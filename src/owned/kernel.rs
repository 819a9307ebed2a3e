//! [`OwnedKernel`]: a kernel that owns (a share of) its module or library.

use std::fmt;
use std::sync::Arc;

use super::handle::OwnedContext;
use super::handle::OwnedModule;
use crate::context::ContextGuard;
use crate::error::Result;
use crate::launch::{Kernel, KernelParams, ScopedKernel};
use crate::module::Library;

/// A declared kernel that outlives closures: `'static`, `Send + Sync`. A branded
/// [`Kernel`] borrows its module; this one holds a share of it (an `Arc` of an
/// [`OwnedModule`], or of a [`Library`]), so the code stays loaded while the kernel exists.
/// [`bind`](OwnedKernel::bind) gives today's `&Kernel<'_, 'ctx, P>` for a guard of its
/// context; in an awaited batch ([`submit`](crate::owned::Owned::submit)) an
/// `Arc<OwnedKernel<P>>` is one of the batch's parts.
///
/// ```no_run
/// use std::sync::Arc;
/// use cuda_brand::prelude::*;
/// use cuda_brand::owned::{OwnedContext, OwnedKernel};
///
/// type Scale = (Out<f32>, f32);
/// # fn main() -> cuda_brand::Result<()> {
/// let home = OwnedContext::primary(&Device::get(0)?)?;
/// let module = Arc::new(home.enter(|ctx| {
///     let module = ctx.module_from_ptx(cuda_brand::samples::KERNELS_PTX)?;
///     Ok::<_, cuda_brand::Error>(home.unbind(ctx, module)?)
/// })?);
/// // SAFETY: scale(float *x, size_t x_len, float k) writes x[0..x_len] only.
/// let scale = unsafe { OwnedKernel::<Scale>::new(&module, "scale") }?;
/// let host = home.enter(|ctx| {
///     let (scale, stream) = (scale.bind(ctx)?, ctx.new_stream()?);
///     let mut buf = ctx.from_slice(&[2.0f32; 256])?;
///     stream.scope(|s| s.launch(scale, scale.config_for(256)?, (&mut buf, 3.0)))?;
///     buf.to_vec()
/// })?;
/// assert_eq!(host, vec![6.0; 256]);
/// # Ok(()) }
/// ```
pub struct OwnedKernel<P> {
    /// Used only through `bind` (checked against `home`) and `scoped`; dropped before
    /// `source`, which keeps its code loaded.
    kernel: Kernel<'static, 'static, P>,
    home: OwnedContext,
    _source: Source,
}

/// What keeps a kernel's code loaded.
enum Source {
    Module(#[allow(dead_code)] Arc<OwnedModule>),
    Library(#[allow(dead_code)] Arc<Library>),
}

impl<P: KernelParams> OwnedKernel<P> {
    /// Declares the kernel `name` of `module` with the parameter list `P`
    /// ([`Module::kernel`](crate::Module::kernel) in the module's context, entered here).
    ///
    /// # Safety
    /// As for [`Module::kernel`](crate::Module::kernel), the one statement of a
    /// declaration's promise: the kernel's C parameter list is `P`, it stays inside the
    /// memory of its slice and pointer arguments (for a pointer parameter, in every launch
    /// the program makes, batches included: its section "Pointer parameters"), writes only
    /// through its `Out` and `OutPtr` parameters and writes no global variable of the
    /// module.
    pub unsafe fn new(module: &Arc<OwnedModule>, name: &str) -> Result<Self> {
        let home = module.context().clone();
        let kernel = module.enter(|_, module| {
            // SAFETY: the caller's promise is `Module::kernel`'s.
            let kernel = unsafe { module.kernel::<P>(name) }?;
            // SAFETY: used only bound to a guard of its context (checked), while `Source`
            // keeps the module loaded.
            Ok::<_, crate::error::Error>(unsafe { erase(kernel) })
        })?;
        Ok(OwnedKernel {
            kernel,
            home,
            _source: Source::Module(Arc::clone(module)),
        })
    }

    /// Declares the kernel `name` of `library` for the context of `home`
    /// ([`Library::kernel`]).
    ///
    /// # Safety
    /// As for [`Library::kernel`] (the promise of [`Module::kernel`](crate::Module::kernel),
    /// pointer parameters included).
    pub unsafe fn from_library(
        library: &Arc<Library>,
        home: &OwnedContext,
        name: &str,
    ) -> Result<Self> {
        let kernel = home.enter(|ctx| {
            // SAFETY: the caller's promise is `Library::kernel`'s.
            let kernel = unsafe { library.kernel::<P>(ctx, name) }?;
            // SAFETY: as in `new`.
            Ok::<_, crate::error::Error>(unsafe { erase(kernel) })
        })?;
        Ok(OwnedKernel {
            kernel,
            home: home.clone(),
            _source: Source::Library(Arc::clone(library)),
        })
    }

    /// The kernel, branded with `ctx`'s brand, if `ctx` is its context (one compare);
    /// otherwise an error naming both contexts.
    #[inline]
    pub fn bind<'a, 'ctx>(&'a self, ctx: ContextGuard<'ctx>) -> Result<&'a Kernel<'a, 'ctx, P>> {
        self.home.check(ctx, "OwnedKernel::bind")?;
        // SAFETY: a kernel of `ctx`'s context (checked).
        Ok(unsafe { self.at() })
    }

    /// The kernel at the brand `'ctx`, borrowing `self`.
    ///
    /// # Safety
    /// `'ctx` is the brand of the kernel's context.
    #[inline(always)]
    unsafe fn at<'ctx>(&self) -> &Kernel<'_, 'ctx, P> {
        // SAFETY: the types differ in lifetimes only; the code stays loaded while `self`
        // (its `Source`) is borrowed, and the caller's promise makes the brand true.
        unsafe { &*(&self.kernel as *const Kernel<'static, 'static, P>).cast() }
    }

    /// The handle of the kernel's context.
    pub fn context(&self) -> &OwnedContext {
        &self.home
    }

    /// The kernel as a handle for one scope of its context (the owning layer's batches,
    /// which hold the kernel until their work is done).
    ///
    /// # Safety
    /// The scope is of the kernel's context, and `self` outlives its work.
    #[inline]
    pub(crate) unsafe fn scoped<'scope, 'ctx>(&self) -> ScopedKernel<'scope, 'ctx, P> {
        // SAFETY: the caller's promise: a scope of the kernel's context, which `self` (and
        // so the code) outlives.
        let kernel: &Kernel<'_, 'ctx, P> = unsafe { self.at() };
        kernel.scoped()
    }
}

/// A kernel with both lifetimes erased.
///
/// # Safety
/// The result is used only where its module (or library) is loaded and its context alive.
unsafe fn erase<P>(kernel: Kernel<'_, '_, P>) -> Kernel<'static, 'static, P> {
    let kernel = std::mem::ManuallyDrop::new(kernel);
    // SAFETY: the types differ in lifetimes only; `kernel` is not dropped, so it moves
    // once.
    unsafe { std::ptr::read((&*kernel as *const Kernel<'_, '_, P>).cast()) }
}

impl<P> fmt::Debug for OwnedKernel<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedKernel")
            .field("kernel", &self.kernel)
            .field("context", &self.home)
            .finish()
    }
}
