//! Several contexts at once: peer access ([`PeerAccess`]) and copies between contexts
//! ([`copy_peer`], [`StreamScope::copy_from_peer`](crate::StreamScope::copy_from_peer)),
//! usually one context per device.
//!
//! Each context keeps its own brand, so nothing of one device's context is used with
//! another's by accident. Open them nested (an outer guard stays usable inside an inner
//! closure):
//!
//! ```no_run
//! use cuda_brand::{copy_peer, with_context, ContextFlags, Device, DeviceBuffer};
//! # fn main() -> cuda_brand::Result<()> {
//! let (d0, d1) = (Device::get(0)?, Device::get(1)?);
//! with_context(&d0, ContextFlags::default(), |c0| {
//!     let mut gathered = DeviceBuffer::<f32>::zeroed(c0, 1024)?;
//!     with_context(&d1, ContextFlags::default(), |c1| {
//!         let part = DeviceBuffer::from_slice(c1, &[1.0f32; 1024])?;
//!         // the one API that names two brands: destination first, then source
//!         copy_peer(&mut gathered, c0, &part, c1)
//!     })?;
//!     assert_eq!(gathered.to_vec()?, vec![1.0; 1024]);
//!     Ok(())
//! })
//! # }
//! ```
//!
//! The copy functions are the only ones that take two brands, and each buffer must come
//! with its own context's guard: swapping them does not compile. A kernel of one context
//! reads or writes another context's memory only through a view made by [`PeerAccess`],
//! which exists only once peer access is enabled.

use std::marker::PhantomData;

use super::{DeviceBuffer, DeviceCopy, DeviceSlice, check_lengths, lengths_match};
use crate::context::{Brand, ContextGuard};
use crate::driver;
use crate::error::Result;

/// Proof that contexts of the brand `'ctx` may access the memory of the context `'peer`
/// (`cuCtxEnablePeerAccess`). Zero-sized and `Copy`; it cannot outlive either context.
/// Peer access is never disabled by this crate, so the proof holds until one of the two
/// contexts is destroyed, which the brands place after every use of the token.
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// let (d0, d1) = (Device::get(0)?, Device::get(1)?);
/// with_context(&d0, ContextFlags::default(), |c0| {
///     let mut on0 = c0.from_slice(&[1.0f32; 1024])?;
///     with_context(&d1, ContextFlags::default(), |c1| {
///         let access = c1.enable_peer_access(c0)?; // c1 may now use c0's memory
///         let view = access.view_mut(&mut on0); // c0's buffer, as memory of c1
///         c1.stream()?.scope(|s| s.fill(view, 2.0f32))
///     })?;
///     assert_eq!(on0.to_vec()?[0], 2.0);
///     Ok(())
/// })
/// # }
/// ```
///
/// # The brand
///
/// Both brands are invariant ([the brand](crate::context#the-brand)): a token names the two
/// contexts between which access was enabled, in that direction, and no other pair. Tokens
/// of two directions never have one type, and a function that takes two tokens of one pair
/// cannot be given one of each:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::PeerAccess;
///
/// /// Takes two tokens of one pair of contexts, in one direction.
/// fn one_pair<'ctx, 'peer>(_: PeerAccess<'ctx, 'peer>, _: PeerAccess<'ctx, 'peer>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// let (d0, d1) = (Device::get(0)?, Device::get(1)?);
/// with_context(&d0, ContextFlags::default(), |a| {
///     with_context(&d1, ContextFlags::default(), |b| {
///         let b_reads_a = b.enable_peer_access(a)?;
///         let a_reads_b = a.enable_peer_access(b)?;
///         one_pair(b_reads_a, a_reads_b); // two directions: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct PeerAccess<'ctx, 'peer> {
    /// Invariant in `'ctx`, the context whose kernels and streams may use the peer's memory
    /// (the crate's `Brand`), and in `'peer` below. Were either covariant, tokens of two
    /// pairs of contexts could be shortened to one type and pass for one another: a grant
    /// the driver gave to one pair would stand for another pair's.
    _ctx: Brand<'ctx>,
    /// Invariant in `'peer`, the context whose memory is viewed: see `_ctx`.
    _peer: Brand<'peer>,
}

impl Clone for PeerAccess<'_, '_> {
    fn clone(&self) -> Self {
        *self
    }
}
impl Copy for PeerAccess<'_, '_> {}

impl std::fmt::Debug for PeerAccess<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerAccess")
    }
}

impl<'ctx> ContextGuard<'ctx> {
    /// Lets this context access `peer`'s memory (`cuCtxEnablePeerAccess`, one direction;
    /// call it on both guards for both). Idempotent: the driver's "already enabled" answer
    /// is success. Two contexts of one device share its memory already; the token is given
    /// without a driver call. Devices without a peer path give
    /// `CUDA_ERROR_PEER_ACCESS_UNSUPPORTED` (see
    /// [`Device::can_access_peer`](crate::Device::can_access_peer)).
    ///
    /// Memory of a pool is reachable from another device only where the pool grants it
    /// (`cuMemPoolSetAccess`), whatever `cuCtxEnablePeerAccess` says: this also grants this
    /// context's device access to the crate's pool of `peer`'s device, which every
    /// [`DeviceBuffer`] of the default constructors comes from. A buffer of a pool of your
    /// own ([`MemoryPool::new`](crate::MemoryPool::new)) or of the device's default pool is
    /// not covered: a kernel reaching it through a view faults.
    pub fn enable_peer_access<'peer>(
        self,
        peer: ContextGuard<'peer>,
    ) -> Result<PeerAccess<'ctx, 'peer>> {
        let (device, peer_device) = (self.device()?, peer.device()?);
        if device != peer_device {
            // SAFETY: the peer's guard proves it alive; self is made current for the call.
            self.with_current(|| unsafe { driver::ctx_enable_peer_access(peer.raw()) })?;
            if let Some(pool) = super::pool::crate_pool(peer_device.as_raw())? {
                // SAFETY: the crate's pool of the peer's device, alive for the whole process;
                // the two devices have a peer path (the call above succeeded).
                unsafe { driver::mem_pool_allow_device(pool, device.as_raw()) }?;
            }
        }
        Ok(PeerAccess {
            _ctx: PhantomData,
            _peer: PhantomData,
        })
    }
}

impl<'ctx, 'peer> PeerAccess<'ctx, 'peer> {
    /// `peer`'s buffer, viewed as memory this context's kernels and streams may use: the
    /// explicit peer-mapped view. It borrows the buffer, so it cannot outlive it.
    ///
    /// Only an owned [`DeviceBuffer`] of `'peer` can be viewed, not a view: a view is
    /// already memory of `'ctx`, and viewing it again with a token of another pair of
    /// contexts would combine two grants (c0 may access c1, c1 may access c2) into one the
    /// driver never gave (c0 accessing c2). Sub-slice the view instead:
    /// `access.view(&buffer)[10..20]`.
    pub fn view<'v, T: DeviceCopy>(
        self,
        buffer: &'v DeviceBuffer<'peer, T>,
    ) -> &'v DeviceSlice<'ctx, T> {
        // SAFETY: the buffer's own device memory (allocated in the context `'peer`),
        // borrowed from it for 'v; the token proves that the context `'ctx` may access
        // memory of `'peer` (peer access enabled, the crate's pool of the peer's device
        // granted to this device, or the same device; memory of another pool that does not
        // grant it faults on the GPU, an error, never another allocation's bytes), and the
        // brands keep both contexts alive for 'v.
        unsafe { DeviceSlice::from_raw_parts(buffer.device_ptr(), buffer.len()) }
    }

    /// As [`PeerAccess::view`], for writing: borrows the buffer exclusively.
    pub fn view_mut<'v, T: DeviceCopy>(
        self,
        buffer: &'v mut DeviceBuffer<'peer, T>,
    ) -> &'v mut DeviceSlice<'ctx, T> {
        // SAFETY: as above, borrowed exclusively.
        unsafe { DeviceSlice::from_raw_parts_mut(buffer.device_ptr(), buffer.len()) }
    }
}

/// Copies `src`, memory of the context `'s`, into `dst`, memory of the context `'d`
/// (`cuMemcpyPeer`), between devices or contexts; complete when it returns. Each buffer
/// comes with its own context's guard, destination first. Needs no peer access.
///
/// # Panics
/// If the lengths differ (before any driver call).
/// [`try_copy_peer`] returns the error instead.
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// let (d0, d1) = (Device::get(0)?, Device::get(1)?);
/// with_context(&d0, ContextFlags::default(), |c0| {
///     let mut gathered = c0.zeroed::<u32>(4)?;
///     with_context(&d1, ContextFlags::default(), |c1| {
///         let part = c1.from_slice(&[1u32, 2, 3, 4])?;
///         cuda_brand::copy_peer(&mut gathered, c0, &part, c1) // destination first
///     })?;
///     assert_eq!(gathered.to_vec()?, [1, 2, 3, 4]);
///     Ok(())
/// })
/// # }
/// ```
pub fn copy_peer<'d, 's, T: DeviceCopy>(
    dst: &mut DeviceSlice<'d, T>,
    dst_ctx: ContextGuard<'d>,
    src: &DeviceSlice<'s, T>,
    src_ctx: ContextGuard<'s>,
) -> Result<()> {
    check_lengths("copy_peer", dst.len(), src.len());
    if dst.size_in_bytes() == 0 {
        return Ok(());
    }
    // SAFETY: both guards prove their contexts alive; each slice is memory its guard's
    // context may access (its own, or a peer's through a `PeerAccess` view of that brand,
    // which the driver then reaches through the granted peer mapping); same length; the
    // destination context is current for the wait. Pending synchronous writes of any sync
    // stream (the source's among them) are waited for on the host first: the driver does
    // not say which stream a peer copy runs on. The copy is complete when it returns.
    dst_ctx.with_current(|| unsafe {
        crate::context::order::wait_on_host()?;
        driver::memcpy_peer(
            dst.device_ptr(),
            dst_ctx.raw(),
            src.device_ptr(),
            src_ctx.raw(),
            dst.size_in_bytes(),
        )
    })
}

/// [`copy_peer`], with differing lengths an error (before any driver call) instead of a
/// panic.
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// # fn main() -> cuda_brand::Result<()> {
/// let (d0, d1) = (Device::get(0)?, Device::get(1)?);
/// with_context(&d0, ContextFlags::default(), |c0| {
///     let mut gathered = c0.zeroed::<u32>(4)?;
///     with_context(&d1, ContextFlags::default(), |c1| {
///         let part = c1.from_slice(&[1u32, 2, 3])?;
///         let e = cuda_brand::try_copy_peer(&mut gathered, c0, &part, c1).unwrap_err();
///         assert_eq!(e.detail(), Some("destination has 4 elements but source has 3"));
///         Ok(())
///     })
/// })
/// # }
/// ```
pub fn try_copy_peer<'d, 's, T: DeviceCopy>(
    dst: &mut DeviceSlice<'d, T>,
    dst_ctx: ContextGuard<'d>,
    src: &DeviceSlice<'s, T>,
    src_ctx: ContextGuard<'s>,
) -> Result<()> {
    lengths_match("copy_peer", dst.len(), src.len())?;
    copy_peer(dst, dst_ctx, src, src_ctx)
}
