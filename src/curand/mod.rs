//! Random numbers with cuRAND (feature `curand`): uniform, normal and log-normal values in
//! `f32` and `f64`, from a generator branded with its context and run in stream scopes.
//!
//! cuRAND is loaded at run time, like the driver: `libcurand.so.10`, from the loader's
//! search path, then `$CUDA_HOME/lib64` and `/usr/local/cuda/lib64`, or the file `CUDA_BRAND_CURAND_LIBRARY`
//! names. Building needs nothing. PyTorch's CUDA wheels ship one in
//! `<site-packages>/nvidia/curand/lib`. Without it every call is an error with
//! [`ErrorCode::CurandNotFound`](crate::ErrorCode::CurandNotFound) saying what was tried.
//!
//! ```no_run
//! use cuda_brand::curand::Rng;
//! use cuda_brand::prelude::*;
//! # fn main() -> cuda_brand::Result<()> {
//! with_context(&Device::get(0)?, ContextFlags::default(), |ctx| {
//!     let rng = Rng::new(ctx, 42)?; // Philox4x32-10
//!     let mut noise = ctx.zeroed::<f32>(1 << 20)?;
//!     ctx.new_stream()?.scope(|s| rng.normal(s, &mut noise, 0.0, 1.0))?;
//!     let mean = noise.to_vec()?.iter().sum::<f32>() / (1 << 20) as f32;
//!     assert!(mean.abs() < 0.01);
//!     Ok(())
//! })
//! # }
//! ```
//!
//! # What the brand and the checks add
//!
//! 1. **A generator lives inside its context** (`Rng<'ctx>`, compile errors in [`Rng`]'s
//!    "The brand"); it, the scope's stream and the output share one context.
//! 2. **cuRAND's rules are checked first.** Normal and log-normal values come in pairs
//!    (Box-Muller): the output's length must be even and its start aligned to two
//!    elements; cuRAND would answer `CURAND_STATUS_LENGTH_NOT_MULTIPLE`, the crate names
//!    `out` and its length. A mean or standard deviation that is not finite, or a negative
//!    standard deviation, is refused too. An empty output queues nothing.
//! 3. **Nothing is freed while the GPU uses it.** A scope borrows the generator (its
//!    device state, freed by `Drop`) and the output until it has synchronized.
//! 4. **One state, one order.** Every generation advances the generator's state, on the
//!    GPU: a generator used by two streams at once (nested scopes, `scope_pair`) runs its
//!    generations one after the other, in the order they were queued. Seeds and offsets
//!    are set with `&mut self`, so never while a scope holds the generator.

mod sys;

use std::ffi::c_int;
use std::fmt;
use std::mem::size_of;
use std::ptr::NonNull;

use cuda_driver_sys::CUctx_st;

use crate::context::{Brand, ContextGuard, NoPhases, StreamKind, Unpartitioned, in_context};
use crate::driver::CUdeviceptr;
use crate::error::{Error, Invalid, Result};
use crate::launch::sealed::Crate;
use crate::memory::DeviceCopy;
use crate::scope::{IntoDeviceMut, StreamScope};
use crate::span::Span;
use crate::stream::HandleOrder;

use sealed::Draw;

/// The cuRAND library's version (`curandGetVersion`, e.g. 10303), loading the library if
/// it is not yet loaded. Needs no GPU.
pub fn version() -> Result<i32> {
    sys::version()
}

/// A pseudo-random algorithm of cuRAND (`curandRngType_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RngKind {
    /// `CURAND_RNG_PSEUDO_PHILOX4_32_10` (161): counter-based, the default here.
    #[default]
    Philox,
    /// `CURAND_RNG_PSEUDO_XORWOW` (101): cuRAND's own default.
    Xorwow,
    /// `CURAND_RNG_PSEUDO_MRG32K3A` (121).
    Mrg32k3a,
}

impl RngKind {
    /// The `curandRngType_t` value.
    pub const fn raw(self) -> c_int {
        match self {
            RngKind::Philox => 161,
            RngKind::Xorwow => 101,
            RngKind::Mrg32k3a => 121,
        }
    }
}

/// The element types cuRAND generates: `f32` and `f64`. Sealed: the type picks the entry
/// point, which decides how many bytes cuRAND writes.
pub trait RngFloat: DeviceCopy + sealed::Sealed {}

mod sealed {
    /// What to generate: the distribution and the element type.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub enum Draw {
        Uniform32,
        Uniform64,
        Normal32(f32, f32),
        Normal64(f64, f64),
        LogNormal32(f32, f32),
        LogNormal64(f64, f64),
    }

    pub trait Sealed: Copy {
        fn uniform() -> Draw;
        fn normal(mean: Self, stddev: Self) -> Draw;
        fn log_normal(mean: Self, stddev: Self) -> Draw;
        fn finite(self) -> bool;
        fn negative(self) -> bool;
    }
}

macro_rules! rng_float {
    ($t:ty, $u:ident, $n:ident, $l:ident) => {
        impl sealed::Sealed for $t {
            fn uniform() -> Draw {
                Draw::$u
            }
            fn normal(mean: $t, stddev: $t) -> Draw {
                Draw::$n(mean, stddev)
            }
            fn log_normal(mean: $t, stddev: $t) -> Draw {
                Draw::$l(mean, stddev)
            }
            fn finite(self) -> bool {
                self.is_finite()
            }
            fn negative(self) -> bool {
                self < 0.0
            }
        }
        impl RngFloat for $t {}
    };
}
rng_float!(f32, Uniform32, Normal32, LogNormal32);
rng_float!(f64, Uniform64, Normal64, LogNormal64);

/// A cuRAND generator of the context branded `'ctx` (`curandCreateGenerator`).
///
/// Its generations are methods taking a stream scope of its context first:
/// `rng.uniform(s, &mut out)`, `rng.normal(s, &mut out, mean, stddev)`,
/// `rng.log_normal(s, &mut out, mean, stddev)`. The same seed and offset give the same
/// values. `Send` but not `Sync`.
///
/// # The brand
///
/// `'ctx` is invariant ([the brand](crate::context#the-brand)): generators of two contexts
/// never have one type, so a generator cannot fill another context's buffer, run on its
/// stream, or leave its context's closure:
///
/// ```compile_fail,E0521
/// use cuda_brand::curand::Rng;
/// use cuda_brand::prelude::*;
///
/// /// Takes two generators of one context.
/// fn one_context<'ctx>(_: &Rng<'ctx>, _: &Rng<'ctx>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let on_a = Rng::new(a, 1)?;
///     with_context(&device, ContextFlags::default(), |b| {
///         let on_b = Rng::new(b, 1)?;
///         one_context(&on_a, &on_b); // two contexts: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct Rng<'ctx> {
    raw: sys::Generator,
    ctx: NonNull<CUctx_st>,
    kind: RngKind,
    /// The offset set last ([`Rng::set_offset`], 0 at first), where a new seed starts.
    offset: u64,
    /// Orders the generations across streams: they share the generator's state.
    order: HandleOrder,
    /// Invariant in `'ctx` (the crate's `Brand`): the generator, the scope's stream and the
    /// output share one brand, so one context. Were it covariant, generators of two
    /// contexts could be shortened to one brand and pass for one another.
    _brand: Brand<'ctx>,
}

// SAFETY: a generator handle and its context, used by the one thread that owns it (not
// `Sync`: `HandleOrder` holds a `Cell`), with the context made current for each call.
unsafe impl Send for Rng<'_> {}

impl fmt::Debug for Rng<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rng").field("kind", &self.kind).finish()
    }
}

fn invalid(what: &'static str, detail: String) -> Error {
    Error::invalid_input(what, Invalid::argument(detail))
}

/// cuRAND's rules for an output of `len` `T` at `ptr`, checked before the call: a normal
/// or log-normal draw (`pairs`) needs an even length and two elements' alignment; its mean
/// and standard deviation are finite, the deviation not negative.
fn check_draw<T: RngFloat>(
    what: &'static str,
    ptr: CUdeviceptr,
    len: usize,
    params: Option<(T, T)>,
) -> Result<()> {
    let Some((mean, stddev)) = params else {
        return Ok(());
    };
    if len % 2 != 0 {
        return Err(invalid(
            what,
            format!(
                "out has {len} elements, an odd count: cuRAND makes normal values in pairs (Box-Muller), so the length must be even"
            ),
        ));
    }
    let pair = 2 * size_of::<T>() as CUdeviceptr;
    if ptr % pair != 0 {
        // cuRAND writes normal values in aligned pairs
        return Err(Error::invalid_input(
            what,
            Invalid::Misaligned {
                what: "out",
                value: ptr,
                align: pair as usize,
            },
        ));
    }
    if !mean.finite() {
        return Err(invalid(what, "mean is not finite".into()));
    }
    if !stddev.finite() || stddev.negative() {
        return Err(invalid(
            what,
            "stddev must be finite and not negative".into(),
        ));
    }
    Ok(())
}

impl<'ctx> Rng<'ctx> {
    /// A Philox4x32-10 generator seeded with `seed`, in `ctx`'s context.
    pub fn new<P: NoPhases, S: Unpartitioned>(
        ctx: ContextGuard<'ctx, P, S>,
        seed: u64,
    ) -> Result<Rng<'ctx>> {
        let ctx = ctx.unphased();
        Rng::with_kind(ctx, RngKind::Philox, seed)
    }

    /// A generator of the algorithm `kind` seeded with `seed`.
    pub fn with_kind<P: NoPhases, S: Unpartitioned>(
        ctx: ContextGuard<'ctx, P, S>,
        kind: RngKind,
        seed: u64,
    ) -> Result<Rng<'ctx>> {
        let ctx = ctx.unphased();
        ctx.with_current(|| {
            // SAFETY: the guard's context is current.
            let raw = unsafe { sys::create(kind.raw()) }?;
            let made = HandleOrder::new().and_then(|order| {
                // SAFETY: our generator, on this thread only.
                unsafe { sys::set_seed(raw, seed) }.map(|()| order)
            });
            match made {
                Ok(order) => Ok(Rng {
                    raw,
                    ctx: ctx.as_non_null(),
                    kind,
                    offset: 0,
                    order,
                    _brand: Brand::default(),
                }),
                Err(e) => {
                    // SAFETY: our generator, never used; its context is current.
                    let _ = unsafe { sys::destroy(raw) };
                    Err(e)
                }
            }
        })
    }

    /// The algorithm.
    pub fn kind(&self) -> RngKind {
        self.kind
    }

    /// Seeds the generator again (`curandSetPseudoRandomGeneratorSeed`): the next
    /// generation starts the sequence of `seed` at the offset set last (0 by default). A new
    /// seed alone does not rewind cuRAND's position in the sequence (measured on an H100,
    /// cuRAND 10 of CUDA 13: the values after a re-seed continued the sequence), so the
    /// offset is set again too (`curandSetGeneratorOffset`). `&mut self`: no scope may hold
    /// the generator meanwhile.
    ///
    /// Like every call of the generator, made with its context current (pushed if another
    /// is), and refused inside a host function, which must make no CUDA call (a host
    /// function that holds `&mut Rng` gets an error with `ErrorCode::NotPermitted`).
    pub fn set_seed(&mut self, seed: u64) -> Result<()> {
        let (raw, offset) = (self.raw, self.offset);
        let set = || {
            // SAFETY: our generator, borrowed exclusively; its context is current.
            unsafe { sys::set_seed(raw, seed) }?;
            // SAFETY: as above.
            unsafe { sys::set_offset(raw, offset) }
        };
        // SAFETY: the generator's context is alive (its brand).
        unsafe { in_context(self.ctx, set) }
    }

    /// Skips the first `offset` values of the sequence (`curandSetGeneratorOffset`): the
    /// next generation starts there. With the context current, as [`set_seed`](Rng::set_seed).
    pub fn set_offset(&mut self, offset: u64) -> Result<()> {
        let raw = self.raw;
        // SAFETY: our generator, borrowed exclusively; `in_context` makes its context
        // current.
        let set = || unsafe { sys::set_offset(raw, offset) };
        // SAFETY: the generator's context is alive (its brand).
        unsafe { in_context(self.ctx, set) }?;
        self.offset = offset;
        Ok(())
    }

    /// Queues filling `out` with values uniform on (0, 1] (cuRAND excludes 0, includes 1).
    pub fn uniform<'scope, T: RngFloat, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        out: impl IntoDeviceMut<'scope, 'ctx, T>,
    ) -> Result<()> {
        self.draw(scope, out, T::uniform(), None, "Rng::uniform")
    }

    /// Queues filling `out` with normal values of `mean` and `stddev`. `out`'s length is
    /// even (checked first, naming it).
    pub fn normal<'scope, T: RngFloat, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        out: impl IntoDeviceMut<'scope, 'ctx, T>,
        mean: T,
        stddev: T,
    ) -> Result<()> {
        let draw = T::normal(mean, stddev);
        self.draw(scope, out, draw, Some((mean, stddev)), "Rng::normal")
    }

    /// Queues filling `out` with log-normal values: `exp` of normal values of `mean` and
    /// `stddev`. `out`'s length is even.
    pub fn log_normal<'scope, T: RngFloat, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        out: impl IntoDeviceMut<'scope, 'ctx, T>,
        mean: T,
        stddev: T,
    ) -> Result<()> {
        let draw = T::log_normal(mean, stddev);
        self.draw(scope, out, draw, Some((mean, stddev)), "Rng::log_normal")
    }

    fn draw<'scope, T: RngFloat, K: StreamKind>(
        &'scope self,
        scope: &'scope StreamScope<'scope, '_, 'ctx, K>,
        out: impl IntoDeviceMut<'scope, 'ctx, T>,
        draw: Draw,
        params: Option<(T, T)>,
        what: &'static str,
    ) -> Result<()> {
        let out = out.into_mut(Crate(()));
        let (ptr, len) = (out.device_ptr(), out.len());
        check_draw(what, ptr, len, params)?;
        if len == 0 {
            return Ok(());
        }
        let span = Span {
            start: ptr,
            bytes: (len * size_of::<T>()) as u64,
            write: true,
        };
        let stream = scope.stream().raw();
        scope.ordered(&[span], None, || {
            let queue = || {
                // SAFETY: the generator, the stream and `out` share the brand `'ctx`, one
                // live context, current here; the stream is alive (borrowed by the scope);
                // `out` holds `len` elements of `T`, the draw's type (the sealed trait
                // picks it), even and paired for normal draws (checked); the scope borrows
                // the generator and `out` until it has synchronized; other streams are
                // ordered around `out` by `ordered` and around the generator's state by
                // `order`.
                let run = || unsafe { sys::generate(self.raw, stream, draw, ptr, len) };
                // SAFETY: the stream is alive and of the event's context.
                unsafe { self.order.run(stream, run) }
            };
            // SAFETY: the generator's context is alive (its brand).
            unsafe { in_context(self.ctx, queue) }
        })
    }
}

impl Drop for Rng<'_> {
    fn drop(&mut self) {
        let destroy = || {
            // SAFETY: ours; no scope borrows it any more, so its work has finished.
            unsafe { sys::destroy(self.raw) }
        };
        // SAFETY: the generator's context is alive (its brand).
        let _ = unsafe { in_context(self.ctx, destroy) };
    }
}

// The thread rules, as the docs state them.
mod facts {
    use super::*;
    use static_assertions::{assert_impl_all, assert_not_impl_any};

    assert_impl_all!(Rng<'static>: Send);
    assert_not_impl_any!(Rng<'static>: Sync);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn detail(e: Error) -> String {
        assert_eq!(e.code(), ErrorCode::InvalidInput);
        e.invalid().unwrap().to_string()
    }

    #[test]
    fn normal_draws_need_an_even_aligned_output_and_sane_parameters() {
        const W: &str = "Rng::normal";
        assert!(check_draw::<f32>(W, 0x1000, 4, Some((0.0, 1.0))).is_ok());
        assert!(
            check_draw::<f32>(W, 0x1000, 3, None).is_ok(),
            "uniform: any length"
        );
        assert!(check_draw::<f64>(W, 0x1000, 0, Some((0.0, 1.0))).is_ok());
        assert_eq!(
            detail(check_draw::<f32>(W, 0x1000, 7, Some((0.0, 1.0))).unwrap_err()),
            "out has 7 elements, an odd count: cuRAND makes normal values in pairs (Box-Muller), so the length must be even"
        );
        // a view starting at an odd element
        assert_eq!(
            check_draw::<f32>(W, 0x1004, 4, Some((0.0, 1.0)))
                .unwrap_err()
                .invalid(),
            Some(&Invalid::Misaligned {
                what: "out",
                value: 0x1004,
                align: 8
            })
        );
        assert!(check_draw::<f64>(W, 0x1008, 4, Some((0.0, 1.0))).is_err());
        assert_eq!(
            detail(check_draw::<f32>(W, 0x1000, 2, Some((0.0, -1.0))).unwrap_err()),
            "stddev must be finite and not negative"
        );
        assert!(check_draw::<f64>(W, 0x1000, 2, Some((f64::NAN, 1.0))).is_err());
        assert!(check_draw::<f64>(W, 0x1000, 2, Some((0.0, f64::INFINITY))).is_err());
    }
}
