//! The sealed halves of the public traits: what reaches the driver is decided here only.

use std::ffi::c_void;

use crate::driver::CUfunction;
use crate::span::Span;

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
    note = "only the crate's parameter kinds (`In<T>`, `Out<T>`, `InPtr<T>`, `OutPtr<T>`, `ByValue<T>`, the numbers) exist, so that no user type decides how many C parameters a kernel gets or where their bytes are",
    note = "see the guide, chapter 8 (`cuda_brand::guide`)"
)]
pub trait Param {
    /// C parameters this one stands for (a slice is two: pointer and length; a pointer
    /// is one).
    const COUNT: usize;
    /// The kind's name, for errors about an argument (`"Out"`, `"InPtr"`).
    const KIND: &'static str;
    /// The argument's bytes as the driver reads them.
    type Raw;
    /// Points `out[..COUNT]` at the C parameters inside `raw`.
    fn pointers(raw: &mut Self::Raw, out: &mut [*mut c_void]);
    /// Appends its `COUNT` C parameters, as the declared parameter number `index`.
    fn slots(index: usize, out: &mut Vec<CParam>);
}

/// One C parameter of a declaration: its size and alignment in bytes, and what it is,
/// in words (for the errors of `Function::typed`).
pub struct CParam {
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
    /// The kind of each declared parameter ([`Param::KIND`]), in order.
    const KINDS: &'static [&'static str];
    /// Appends every C parameter, in order.
    fn slots(out: &mut Vec<CParam>);
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
    fn with_params<R>(self, by: Crate, launch: impl FnOnce(&[Span], *mut *mut c_void) -> R) -> R;
}

#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot implement `Launch`: the trait is sealed",
    note = "only declared kernels (`&Kernel`, `&mut KernelMut`, `ScopedKernel`) can be launched, so that no user type decides which function or limits reach the driver",
    note = "see the guide, chapter 8 (`cuda_brand::guide`)"
)]
pub trait Launch<'scope, 'ctx, P> {
    fn target(&self) -> Target;
}
