//! Launching kernels: typed kernels ([`Kernel`], [`KernelMut`]), their parameter lists
//! ([`In`], [`Out`], [`InPtr`], [`OutPtr`], [`ByValue`] and the scalars), launch configurations
//! ([`LaunchConfig`]), and what is checked before the driver sees a launch.
//!
//! # What stays `unsafe`, and why
//!
//! The driver cannot check a kernel's signature or what memory it touches. So declaring a
//! kernel, naming its parameter list as Rust types, is the one `unsafe` promise
//! ([`Module::kernel`](crate::Module::kernel)). After it every launch is safe code:
//!
//! * the arguments are type-checked against the declaration (a buffer for each [`In`],
//!   [`Out`], [`InPtr`] or [`OutPtr`], a value of exactly the declared type for each
//!   scalar);
//! * the kernel, the stream and every buffer share one context brand;
//! * the stream scope keeps every buffer (and the kernel's module) borrowed until the
//!   kernel has run;
//! * an [`Out`] slice or [`OutPtr`] pointer must not share memory with any other slice or
//!   pointer argument of the same launch: checked before the driver call (pairs of at most
//!   12 arguments, nanoseconds), an error naming the two arguments otherwise;
//! * the grid, the block and the dynamic shared memory are checked against the kernel's
//!   limits, an error otherwise.
//!
//! Every trait here that decides what reaches the driver (the parameter list, how an
//! argument is laid out, the `void**` array handed to `cuLaunchKernel`) is *sealed*: only
//! this crate implements it, so no user type can forge a pointer or a length. What a
//! pointer parameter ([`InPtr`], [`OutPtr`]) leaves to the declaration, how far the kernel
//! reaches through it, is said once, in
//! [`Module::kernel`](crate::Module::kernel) (its section "Pointer parameters"). The compile
//! errors are pinned in `ui-tests/fail/soundness_*`.

// The rooms: `function.rs` (`Function` and the declaration check), `kernel.rs` (typed
// kernels), `config.rs` (`LaunchConfig`), `attributes.rs` (launches with attributes),
// `params.rs` (parameter kinds and argument traits), `sealed.rs` (their sealed halves),
// `counts.rs` and `param_table.rs` (the parameter-count registry and its tables), `plan.rs`
// (the one launch path: `Plan`, checked then issued, for scopes and captures).
mod attributes;
mod config;
pub(crate) mod counts;
mod function;
mod kernel;
mod param_table;
mod params;
mod plan;
pub(crate) mod sealed;

pub(crate) use attributes::LaunchCache;
#[doc(inline)]
pub use config::LaunchConfig;
use config::check_config;
#[doc(inline)]
pub use function::{Function, FunctionAttribute, ParamInfo};
#[doc(inline)]
pub use kernel::{Kernel, KernelMut, ScopedKernel};
pub(crate) use param_table::{ParamList, ParamTable};
use params::launch_overlap;
#[doc(inline)]
pub use params::{
    ByValue, In, InPtr, KernelArg, KernelArgs, KernelParam, KernelParams, Launch, Out, OutPtr,
};
pub(crate) use params::{pointer_raw, slice_raw};
pub(crate) use plan::{Plan, plan};
pub(crate) use sealed::Target;
