//! Device memory ([`DeviceBuffer`], [`DeviceSlice`]), page-locked host memory
//! ([`PinnedBuffer`]) and the [`DeviceCopy`] rule for what may live there.
//!
//! `DeviceBuffer<'ctx, T>` owns an allocation of the context branded `'ctx`;
//! `DeviceSlice<'ctx, T>` is a borrowed view of one, exactly as `Vec<T>` and `[T]`:
//! `&buf[2..10]`, `split_at_mut`, `chunks`, and the borrow checker's usual rules about
//! `&` and `&mut` apply to device memory too.
//!
//! The synchronous operations here (copies, fills) are complete when they return, as far
//! as anyone can observe: a write into device memory may still run on the GPU, ordered
//! before every later scope and synchronous operation that could touch the memory
//! (`docs/design/ordering.md`). The
//! asynchronous ones live on a stream's scope ([`Stream::scope`](crate::Stream::scope)),
//! which borrows every buffer it touches until it has synchronized, so no buffer can be
//! freed or touched by the host while queued work still uses it.
//!
//! Memory of other libraries: `from_raw_parts` of [`DeviceBuffer`], [`PinnedBuffer`] and
//! [`ManagedBuffer`] adopts memory that `cudaMalloc`, `cudaMallocAsync`, `cudaMallocHost`
//! or `cudaMallocManaged` (or their driver calls) allocated, after checking what the driver
//! can say of it (its context, kind, pool and extent); `into_raw_parts` hands a buffer's
//! memory out. Both are `unsafe`: each says what its caller promises.

pub(crate) mod sealed {
    /// The driver's fill pattern of a `Memset` type; private, so no other type can be one.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot implement `Memset`: the trait is sealed",
        note = "the driver fills with 1-, 2- or 4-byte patterns, and only the crate's 8-, 16- and 32-bit numbers provide one",
        note = "see the guide, chapter 8 (`cuda_brand::guide`)"
    )]
    pub trait Sealed {
        fn pattern(self) -> crate::driver::Pattern;
    }
}

// The rooms: `copy.rs` (`DeviceCopy`, `Memset`), `extent.rs` (the checks before a driver
// call), `slice.rs` (`DeviceSlice` and its synchronous operations), `buffer.rs`
// (`DeviceBuffer`), `pinned.rs` (`PinnedBuffer`), `pool.rs`, `managed.rs`, `pitched.rs`
// (2D), `pitched3d.rs` (3D), `peer.rs` (peer access), `staging/` (the bulk-copy staging),
// `adopt.rs` (the checks of the `from_raw_parts` constructors). How the
// synchronous operations are ordered and completed is `crate::synchronous`'s; the spans
// they touch are the leaf `crate::span`'s.
mod adopt;
mod buffer;
mod copy;
mod extent;
pub mod managed;
pub mod peer;
mod pinned;
pub mod pitched;
pub mod pitched3d;
pub mod pool;
mod slice;
pub(crate) mod staging;

#[doc(inline)]
pub use buffer::DeviceBuffer;
pub(crate) use buffer::free_plain;
#[doc(inline)]
pub use copy::{DeviceCopy, Memset};
pub(crate) use extent::{
    bounds, byte_len, checked_byte_len, copy_ends_disjoint, empty_address, lengths_match,
    overlap_error,
};
#[doc(inline)]
pub use managed::{Advice, ManagedBuffer, MemoryLocation};
#[doc(inline)]
pub use peer::{PeerAccess, copy_peer};
#[doc(inline)]
pub use pinned::PinnedBuffer;
#[doc(inline)]
pub use pitched::DeviceBuffer2D;
#[doc(inline)]
pub use pitched3d::{DeviceBuffer3D, Part3D, Part3DMut, Region3D};
#[doc(inline)]
pub use pool::{MemoryPool, ReusePolicy};
#[doc(inline)]
pub use slice::DeviceSlice;
