//! The owning layer: GPU state that outlives one closure, bound again to a guard wherever
//! it is used.
//!
//! The closure layer ([`with_context`](crate::with_context) and everything made from its
//! guard) serves programs shaped as one closure: every value carries the brand `'ctx`, so
//! nothing of it can be kept in a `'static` place (a server's state, a struct an event
//! loop owns, a task, a `static` cache). The owning layer serves those programs, after
//! PyO3's `Py<T>` and `Bound<'py, T>`:
//!
//! * [`OwnedContext`] is a context that lives as long as any handle of it (`'static`,
//!   `Send + Sync`, `Clone`). [`OwnedContext::enter`] makes it current on any thread and
//!   hands a closure today's [`ContextGuard<'ctx>`](crate::ContextGuard).
//! * [`Owned<B>`] is a branded value made `'static`: [`OwnedDeviceBuffer<T>`],
//!   [`OwnedPinnedBuffer<T>`], [`OwnedManagedBuffer<T>`], [`OwnedMemoryPool`],
//!   [`OwnedStream`], [`OwnedEvent`], [`OwnedModule`], and [`OwnedKernel<P>`] (which holds
//!   its module). [`OwnedContext::unbind`] makes one from a branded value of the context;
//!   [`Owned::bind`] gives the branded value back for a guard of that context, after one
//!   compare (a guard of another context is an `Err` naming both). From there every rule
//!   of the crate holds as in the closure layer, checked at compile time.
//! * [`Owned::submit`] queues a batch of stream work on an owned stream and returns a
//!   [`Pending`] future: the work is awaited instead of blocking a thread, and the batch
//!   owns everything the work touches (see [`pending`]).
//!
//! What is checked where: the brand rules (one context's values never meet another's,
//! nothing branded leaves its closure, the guard stays on its thread, asynchronous work
//! happens in scopes that borrow what they touch) at compile time, as always, on the bound
//! values; which context an owned handle belongs to at run time, once per bind (one
//! compare of two pointers). A bound value cannot outlive its guard's closure, and the
//! handle it came from cannot be moved or dropped while it is bound (the borrow checker).
//!
//! # The context's life
//!
//! Each owned handle holds a count of its context. The last one dropped tears the context
//! down on the dropping thread, as `with_context` does at its end: it synchronizes the
//! context, frees what the crate keeps for it (the bulk-copy staging), pops it, destroys it
//! (or releases the primary context), and takes the records of its handles' failed
//! releases, so that no record outlives the context whose address a new context may reuse.
//! Its errors are lost in a drop; [`OwnedContext::close`] returns them. Destroying a
//! created context takes a while (51.8 ms on an H100, `docs/driver-facts.md`), so the
//! thread that drops the last handle waits that long; a primary context's release does not
//! (unless it was the last of the process).
//!
//! Owned handles dropped inside a host function, where no driver call is allowed, are
//! parked and released at the next release point ([`release_deferred`]).
//!
//! ```no_run
//! use cuda_brand::prelude::*;
//! use cuda_brand::owned::{OwnedContext, OwnedDeviceBuffer};
//!
//! # fn main() -> cuda_brand::Result<()> {
//! let home = OwnedContext::primary(&Device::get(0)?)?;
//! // made in one entry...
//! let buf: OwnedDeviceBuffer<u32> = home.enter(|ctx| {
//!     let buf = ctx.from_slice(&[1u32, 2, 3])?;
//!     Ok::<_, cuda_brand::Error>(home.unbind(ctx, buf)?)
//! })?;
//! // ...used in another, on another thread
//! let back = std::thread::spawn(move || {
//!     buf.context().enter(|ctx| buf.bind(ctx)?.to_vec())
//! });
//! assert_eq!(back.join().unwrap()?, [1, 2, 3]);
//! # Ok(()) }
//! ```

// The rooms: `handle.rs` (`OwnedContext`, and `Owned<B>` and its aliases),
// `kernel.rs` (`OwnedKernel`), `release.rs` (releases parked by host functions),
// `pending/` (awaited batches: `batch.rs` what they own, `wake.rs` how they are woken,
// `repoll.rs` the `repoll-thread` feature's thread).
mod handle;
mod kernel;
pub mod pending;
mod release;

#[cfg(feature = "cublas")]
#[doc(inline)]
pub use handle::OwnedBlas;
#[doc(inline)]
pub use handle::OwnedContext;
#[cfg(feature = "cufft")]
#[doc(inline)]
pub use handle::OwnedFftPlan;
#[cfg(feature = "curand")]
#[doc(inline)]
pub use handle::OwnedRng;
#[doc(inline)]
pub use handle::{
    Owned, OwnedDeviceBuffer, OwnedEvent, OwnedManagedBuffer, OwnedMemoryPool, OwnedModule,
    OwnedPinnedBuffer, OwnedStream,
};
#[doc(inline)]
pub use kernel::OwnedKernel;
#[doc(inline)]
pub use pending::{Batch, Done, Pending};
#[doc(inline)]
pub use release::release_deferred;
