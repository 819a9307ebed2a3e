//! [`FftPlan`]: a cuFFT plan of one context, and its transforms on a stream scope.

use std::fmt;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ptr::NonNull;

use cuda_driver_sys::CUctx_st;

use super::layout::{self, Arg, Layout};
use super::sealed::Sealed;
use super::sys::{self, Handle};
use super::{Complex32, Complex64, Direction, FftTypes};
use crate::context::{Brand, ContextGuard, NoPhases, StreamKind, Unpartitioned, in_context};
use crate::driver::CUdeviceptr;
use crate::error::Result;
use crate::launch::sealed::Crate;
use crate::scope::{IntoDeviceMut, IntoDeviceRef, StreamScope};
use crate::span::Span;
use crate::stream::HandleOrder;

/// A cuFFT plan of the context branded `'ctx`, transforming `I` elements into `O` elements
/// (see [`FftTypes`] for the pairs, and [the module](super) for what each `exec` takes).
///
/// Made with a guard for a shape of one to three extents (row-major: the last is
/// contiguous) and a batch count; used in any number of stream scopes of its context,
/// which borrow it until they have synchronized. Its work area is cuFFT's, allocated with
/// the plan and freed when it is dropped (`cufftDestroy`), never while a scope may run a
/// transform with it. `Send` but not `Sync`: cuFFT lets one thread at a time use a plan.
///
/// ```no_run
/// use cuda_brand::cufft::{Complex64, FftPlan};
/// use cuda_brand::prelude::*;
/// # fn main() -> cuda_brand::Result<()> {
/// with_context(&Device::get(0)?, ContextFlags::default(), |ctx| {
///     // a 2D real-to-complex plan: 4 × 6 reals in, 4 × (6 / 2 + 1) complex numbers out
///     let plan = FftPlan::<f64, Complex64>::new(ctx, &[4, 6], 1)?;
///     assert_eq!((plan.input_len(), plan.output_len()), (24, 16));
///     let input = ctx.from_slice(&[1.0f64; 24])?;
///     let mut spectrum = ctx.zeroed::<Complex64>(16)?;
///     ctx.new_stream()?.scope(|s| plan.exec(s, &mut spectrum, &input))?;
///     assert_eq!(spectrum.to_vec()?[0], Complex64::new(24.0, 0.0)); // only the mean
///     Ok(())
/// })
/// # }
/// ```
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)): plans of two contexts
/// never have one type, so a plan cannot run on another context's stream or buffers, and
/// cannot leave its context's closure:
///
/// ```compile_fail,E0521
/// use cuda_brand::cufft::{Complex32, FftPlan};
/// use cuda_brand::prelude::*;
///
/// /// Takes two plans of one context.
/// fn one_context<'ctx>(
///     _: &FftPlan<'ctx, Complex32, Complex32>,
///     _: &FftPlan<'ctx, Complex32, Complex32>,
/// ) {
/// }
///
/// # fn main() -> cuda_brand::Result<()> {
/// let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let on_a = FftPlan::<Complex32, Complex32>::new(a, &[8], 1)?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let on_b = FftPlan::<Complex32, Complex32>::new(b, &[8], 1)?;
///         one_context(&on_a, &on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct FftPlan<'ctx, I, O> {
    handle: Handle,
    ctx: NonNull<CUctx_st>,
    layout: Layout,
    /// Orders the plan's transforms across streams: they share its work area.
    order: HandleOrder,
    /// Invariant in `'ctx` (the crate's `Brand`): the plan, the scope's stream and the
    /// buffers of a transform share one brand, so one context. Were it covariant, plans of
    /// two contexts could be shortened to one brand and pass for one another.
    _brand: Brand<'ctx>,
    _types: PhantomData<fn(I) -> O>,
}

// SAFETY: a plan handle and its context, used by the one thread that owns the plan (it is
// not `Sync`: `HandleOrder` holds a `Cell`), with the context made current for each call.
unsafe impl<I, O> Send for FftPlan<'_, I, O> {}

impl<I, O> fmt::Debug for FftPlan<'_, I, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FftPlan")
            .field("shape", &self.layout.shape())
            .field("batch", &self.layout.batch)
            .field("types", &std::any::type_name::<(I, O)>())
            .finish()
    }
}

impl<'ctx, I, O> FftPlan<'ctx, I, O>
where
    (I, O): FftTypes,
{
    /// A plan of `batch` transforms of `shape` (`cufftCreate`, `cufftMakePlanMany64` with
    /// the contiguous layout), in `ctx`'s context. `shape` has 1 to 3 extents, none zero;
    /// `batch` is at least 1; the element counts must fit memory: refused before cuFFT
    /// otherwise, naming the argument.
    pub fn new<P: NoPhases, S: Unpartitioned>(
        ctx: ContextGuard<'ctx, P, S>,
        shape: &[usize],
        batch: usize,
    ) -> Result<Self> {
        let ctx = ctx.unphased();
        const WHAT: &str = "FftPlan::new";
        let sizes = (size_of::<I>(), size_of::<O>());
        let layout = Layout::new(shape, batch, <(I, O)>::SIDES, sizes, WHAT)?;
        ctx.with_current(|| {
            // SAFETY: the guard's context is current (with_current).
            let handle = unsafe { sys::make_plan(shape, <(I, O)>::KIND, batch) }?;
            let order = HandleOrder::new().inspect_err(|_| {
                // SAFETY: our plan, never used; its context is current.
                let _ = unsafe { sys::destroy(handle) };
            })?;
            Ok(FftPlan {
                handle,
                ctx: ctx.as_non_null(),
                layout,
                order,
                _brand: Brand::default(),
                _types: PhantomData,
            })
        })
    }

    /// The shape the plan transforms.
    pub fn shape(&self) -> &[usize] {
        self.layout.shape()
    }

    /// How many transforms one call runs.
    pub fn batch(&self) -> usize {
        self.layout.batch
    }

    /// The elements one call reads (every transform of the batch).
    pub fn input_len(&self) -> usize {
        self.layout.input
    }

    /// The elements one call writes.
    pub fn output_len(&self) -> usize {
        self.layout.output
    }

    /// Queues the transform on `scope`'s stream after the checks gave `spans`.
    fn run<K: StreamKind>(
        &self,
        scope: &StreamScope<'_, '_, 'ctx, K>,
        spans: &[Span],
        (input, output): (CUdeviceptr, CUdeviceptr),
        direction: Direction,
    ) -> Result<()> {
        let stream = scope.stream().raw();
        scope.ordered(spans, None, || {
            let queue = || {
                // SAFETY: the plan, the stream and both buffers share the brand `'ctx`, so
                // one context, alive while anything branded with it exists, and current
                // here; the stream is alive (borrowed by the scope); the plan was made for
                // (I, O), and the buffers hold exactly what it reads and writes (checked,
                // with their alignment and apartness); the scope borrows the plan and both
                // buffers (the C2R input exclusively: cuFFT overwrites it) until it has
                // synchronized; other streams of a multi-stream scope are ordered around
                // the buffers by `ordered`, and other streams using the plan's work area by
                // `order`.
                let run = || unsafe {
                    sys::exec(
                        self.handle,
                        stream,
                        <(I, O)>::KIND,
                        input,
                        output,
                        direction.raw(),
                    )
                };
                // SAFETY: the stream is alive and of the event's context (the brand).
                unsafe { self.order.run(stream, run) }
            };
            // SAFETY: the plan's context is alive (its brand).
            unsafe { in_context(self.ctx, queue) }
        })
    }
}

impl<I, O> Drop for FftPlan<'_, I, O> {
    fn drop(&mut self) {
        let destroy = || {
            // SAFETY: our plan; no scope borrows it any more, so every transform queued
            // with it has finished (each scope synchronized before its borrow ended).
            unsafe { sys::destroy(self.handle) }
        };
        // SAFETY: the plan's context is alive (its brand).
        let _ = unsafe { in_context(self.ctx, destroy) };
    }
}

/// One argument of a transform, of elements `T`, for the checks, in a plan whose complex
/// type is `C`. cuFFT requires both pointers of every transform aligned to the plan's
/// complex type, the real side of a real-to-complex or complex-to-real transform too
/// ("Pointers to idata and odata are both required to be aligned to cufftComplex data type
/// in single-precision transforms and cufftDoubleComplex data type in double-precision
/// transforms", `cufftExecR2C` and `cufftExecC2R`): its kernels read and write real data
/// in pairs. So a real view starting at an odd element (`&reals[1..]`) is refused.
fn arg<T, C>(name: &'static str, ptr: CUdeviceptr, len: usize, write: bool) -> Arg {
    Arg {
        name,
        ptr,
        len,
        size: size_of::<T>(),
        align: align_of::<C>().max(align_of::<T>()),
        write,
    }
}

macro_rules! complex_to_complex {
    ($c:ty) => {
        /// Complex-to-complex transforms (feature `cufft`).
        impl<'ctx> FftPlan<'ctx, $c, $c> {
            /// Queues the batch's transforms (`cufftExecC2C`/`Z2Z`) of `input` into
            /// `output` in `direction`, on `scope`'s stream: the destination first, as
            /// every copy-like operation of the crate takes it. Both hold exactly
            /// [`input_len`](Self::input_len) elements and do not overlap; checked before
            /// cuFFT, each error naming the argument.
            pub fn exec<'scope, K: StreamKind>(
                &'scope self,
                scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
                output: impl IntoDeviceMut<'scope, 'ctx, $c>,
                input: impl IntoDeviceRef<'scope, 'ctx, $c>,
                direction: Direction,
            ) -> Result<()> {
                const WHAT: &str = "FftPlan::exec";
                let (i, o) = (input.into_ref(Crate(())), output.into_mut(Crate(())));
                let spans = layout::out_of_place(
                    &self.layout,
                    arg::<$c, $c>("input", i.device_ptr(), i.len(), false),
                    arg::<$c, $c>("output", o.device_ptr(), o.len(), true),
                    WHAT,
                )?;
                self.run(scope, &spans, (i.device_ptr(), o.device_ptr()), direction)
            }

            /// Queues the batch's transforms of `buf` in place, in `direction`. `buf` holds
            /// exactly [`input_len`](Self::input_len) elements.
            pub fn exec_in_place<'scope, K: StreamKind>(
                &'scope self,
                scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
                buf: impl IntoDeviceMut<'scope, 'ctx, $c>,
                direction: Direction,
            ) -> Result<()> {
                const WHAT: &str = "FftPlan::exec_in_place";
                let b = buf.into_mut(Crate(()));
                let span = layout::in_place(
                    &self.layout,
                    arg::<$c, $c>("buf", b.device_ptr(), b.len(), true),
                    WHAT,
                )?;
                self.run(scope, &[span], (b.device_ptr(), b.device_ptr()), direction)
            }
        }
    };
}
complex_to_complex!(Complex32);
complex_to_complex!(Complex64);

macro_rules! real_and_complex {
    ($r:ty, $c:ty) => {
        /// Real-to-complex transforms (feature `cufft`): always forward.
        impl<'ctx> FftPlan<'ctx, $r, $c> {
            /// Queues the batch's forward transforms (`cufftExecR2C`/`D2Z`) of the reals
            /// `input` ([`input_len`](Self::input_len)) into `output`, the non-redundant
            /// half of each spectrum: the last extent `n` becomes `n / 2 + 1`
            /// ([`output_len`](Self::output_len)). Checked before cuFFT, each error
            /// naming the argument.
            pub fn exec<'scope, K: StreamKind>(
                &'scope self,
                scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
                output: impl IntoDeviceMut<'scope, 'ctx, $c>,
                input: impl IntoDeviceRef<'scope, 'ctx, $r>,
            ) -> Result<()> {
                const WHAT: &str = "FftPlan::exec";
                let (i, o) = (input.into_ref(Crate(())), output.into_mut(Crate(())));
                let spans = layout::out_of_place(
                    &self.layout,
                    arg::<$r, $c>("input", i.device_ptr(), i.len(), false),
                    arg::<$c, $c>("output", o.device_ptr(), o.len(), true),
                    WHAT,
                )?;
                let ptrs = (i.device_ptr(), o.device_ptr());
                self.run(scope, &spans, ptrs, Direction::Forward)
            }
        }

        /// Complex-to-real transforms (feature `cufft`): always inverse.
        impl<'ctx> FftPlan<'ctx, $c, $r> {
            /// Queues the batch's inverse transforms (`cufftExecC2R`/`Z2D`) of the
            /// half spectra `input` (the last extent `n` as `n / 2 + 1`,
            /// [`input_len`](Self::input_len)) into the reals `output`
            /// ([`output_len`](Self::output_len)), unnormalized.
            ///
            /// `input` is borrowed exclusively: cuFFT's complex-to-real transforms
            /// overwrite their input, so its contents are unspecified afterwards.
            pub fn exec<'scope, K: StreamKind>(
                &'scope self,
                scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
                output: impl IntoDeviceMut<'scope, 'ctx, $r>,
                input: impl IntoDeviceMut<'scope, 'ctx, $c>,
            ) -> Result<()> {
                const WHAT: &str = "FftPlan::exec";
                let (i, o) = (input.into_mut(Crate(())), output.into_mut(Crate(())));
                let spans = layout::out_of_place(
                    &self.layout,
                    arg::<$c, $c>("input", i.device_ptr(), i.len(), true),
                    arg::<$r, $c>("output", o.device_ptr(), o.len(), true),
                    WHAT,
                )?;
                let ptrs = (i.device_ptr(), o.device_ptr());
                self.run(scope, &spans, ptrs, Direction::Inverse)
            }
        }
    };
}
real_and_complex!(f32, Complex32);
real_and_complex!(f64, Complex64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_real_side_of_a_transform_is_aligned_to_the_complex_type() {
        const W: &str = "FftPlan::exec";
        // R2C of 8 reals: the input a view one `f32` into a buffer (`&reals[1..]`)
        let l = Layout::new(&[8], 1, layout::Sides::R2C, (4, 8), W).unwrap();
        let input = arg::<f32, Complex32>("input", 0x1004, 8, false);
        let output = arg::<Complex32, Complex32>("output", 0x2000, 5, true);
        let e = layout::out_of_place(&l, input, output, W).unwrap_err();
        assert!(
            e.invalid()
                .and_then(crate::error::Invalid::reason)
                .unwrap()
                .starts_with("input starts at 0x1004, not a multiple of 8 bytes"),
            "{e}"
        );
        let aligned = arg::<f32, Complex32>("input", 0x1008, 8, false);
        assert!(layout::out_of_place(&l, aligned, output, W).is_ok());
        // C2R in double precision: the real output needs 16 bytes
        let l = Layout::new(&[8], 1, layout::Sides::C2R, (16, 8), W).unwrap();
        let input = arg::<Complex64, Complex64>("input", 0x1000, 5, true);
        let output = arg::<f64, Complex64>("output", 0x2008, 8, true);
        assert_eq!(output.align, 16);
        assert!(layout::out_of_place(&l, input, output, W).is_err());
        // complex sides keep their own alignment
        assert_eq!(arg::<Complex32, Complex32>("x", 0, 1, false).align, 8);
    }
}
