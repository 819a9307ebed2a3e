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

use std::ffi::c_uint;
use std::marker::PhantomData;

use super::{DeviceBuffer, DeviceCopy, DeviceSlice, lengths_match};
use crate::context::{Allocating, Brand, ContextGuard, Part, Phase, Unpartitioned};
use crate::driver::{self, CUdevice, CUdeviceptr};
use crate::error::{Error, ErrorCode, Invalid, Result};

/// Proof that contexts of the brand `'ctx` may access the memory of the context `'peer`
/// (`cuCtxEnablePeerAccess`). `Copy`, the two contexts' device numbers (8 bytes); it cannot
/// outlive either context. Peer access is never disabled by this crate, so the proof holds
/// until one of the two contexts is destroyed, which the brands place after every use of
/// the token. Between two devices it covers memory of no pool and the crate's pool of the
/// peer's device, not other pools: see [`view`](PeerAccess::view).
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
///         let view = access.view_mut(&mut on0)?; // c0's buffer, as memory of c1
///         c1.new_stream()?.scope(|s| s.fill(view, 2.0f32))
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
    /// The device of the context `'ctx`, whose kernels and streams use the views.
    device: CUdevice,
    /// The device of the context `'peer`, whose memory is viewed.
    peer_device: CUdevice,
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
        f.debug_struct("PeerAccess")
            .field("device", &self.device)
            .field("peer_device", &self.peer_device)
            .finish()
    }
}

// The bounds are on the method, so that a run-phase guard gets `Allocating`'s message and
// a partition's `Unpartitioned`'s.
impl<'ctx, P: Phase, S: Part> ContextGuard<'ctx, P, S> {
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
    /// not covered: its view is refused ([`PeerAccess::view`] says why the crate does
    /// not grant such pools too).
    ///
    /// A setup-phase guard of [`with_phases`](crate::with_phases) takes part, as the
    /// enabling side (the mappings are made now, not in the run phase); `peer` may be in any
    /// phase. A partition's guard does not, on either side
    /// ([`Unpartitioned`], `ui-tests/fail/11_partitions/`): peer
    /// access is a property of a whole context (a green context's `CUcontext` form shares
    /// the device's memory with the primary context), and between two partitions of one
    /// device the token, given without a driver call, would let one partition's kernels
    /// use another's buffers, which the partitions keep apart by their brands (nothing the
    /// crate sees orders two partitions' streams).
    pub fn enable_peer_access<'peer, Q: Phase, T: Unpartitioned>(
        self,
        peer: ContextGuard<'peer, Q, T>,
    ) -> Result<PeerAccess<'ctx, 'peer>>
    where
        P: Allocating,
        S: Unpartitioned,
    {
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
            device: device.as_raw(),
            peer_device: peer_device.as_raw(),
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
    /// `&access.view(&buffer)?[10..20]`.
    ///
    /// # Errors
    /// Between two devices, if the buffer is memory of a pool that does not grant this
    /// context's device access (a pool of your own, the device's default pool):
    /// `CUDA_ERROR_PEER_ACCESS_NOT_ENABLED`, as below.
    ///
    /// # Which memory a view reaches
    ///
    /// Between two devices, once peer access is enabled (`cuCtxEnablePeerAccess`), the
    /// driver maps memory of no pool (`cuMemAlloc`) to the viewing device, but memory of a
    /// pool only where the pool grants that device access (`cuMemPoolSetAccess`): a kernel
    /// reaching other pool memory faults, a sticky error that ends the context.
    /// [`enable_peer_access`](ContextGuard::enable_peer_access) grants the crate's pool of
    /// the peer's device, which every buffer of the default constructors comes from. A
    /// buffer of any other pool is refused here, before anything reaches the GPU: an error
    /// (`CUDA_ERROR_PEER_ACCESS_NOT_ENABLED`) naming the pool, its device and this one. The
    /// crate does not grant that pool itself when the view is made:
    ///
    /// * the device's default pool ([`MemoryPool::device_default`](crate::MemoryPool::device_default))
    ///   is the runtime's (`cudaMallocAsync`) and every library's of the process: granting
    ///   it would map all of its memory, present and future, to this device for all its
    ///   users, who would pay for the second mapping at every later allocation, and change
    ///   a setting other code made or counts on;
    /// * a pool of your own ([`MemoryPool::new`](crate::MemoryPool::new)) is yours to grant
    ///   (`cuMemPoolSetAccess` on [`MemoryPool::as_raw`](crate::MemoryPool::as_raw)), and a
    ///   buffer does not keep its pool alive: when the view is made the pool may be
    ///   destroyed already (the driver keeps its memory until the last allocation is freed),
    ///   so the crate makes no driver call on the handle the memory reports, it only
    ///   compares it with its own pool's. A pool you granted yourself is refused as well.
    ///
    /// Copy such memory with [`copy_peer`] instead, or allocate what a peer views from the
    /// crate's pool. Between two contexts of one device every pool's memory is the
    /// device's own: the view is made without a driver call. Between two devices making it
    /// costs one `cuPointerGetAttributes`.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// use cuda_brand::{ErrorCode, MemoryPool};
    /// # fn main() -> cuda_brand::Result<()> {
    /// let (d0, d1) = (Device::get(0)?, Device::get(1)?);
    /// with_context(&d0, ContextFlags::default(), |c0| {
    ///     let pool = MemoryPool::new(c0)?;
    ///     let mine = DeviceBuffer::<f32>::zeroed_in(c0, &pool, 1024)?;
    ///     let the_crates = c0.zeroed::<f32>(1024)?;
    ///     with_context(&d1, ContextFlags::default(), |c1| {
    ///         let access = c1.enable_peer_access(c0)?;
    ///         let e = access.view(&mine).unwrap_err(); // a pool not granted to device 1
    ///         assert_eq!(e.code(), ErrorCode::PeerAccessNotEnabled);
    ///         assert_eq!(access.view(&the_crates)?.len(), 1024);
    ///         Ok(())
    ///     })
    /// })
    /// # }
    /// ```
    pub fn view<'v, T: DeviceCopy>(
        self,
        buffer: &'v DeviceBuffer<'peer, T>,
    ) -> Result<&'v DeviceSlice<'ctx, T>> {
        self.reaches(
            "PeerAccess::view",
            buffer.device_ptr(),
            buffer.size_in_bytes(),
        )?;
        // SAFETY: the buffer's own device memory (allocated in the context `'peer`),
        // borrowed from it for 'v; the token proves that the context `'ctx` may access
        // memory of `'peer`, and `reaches` that this memory is of what it covers (the same
        // device; memory of no pool, which peer access maps; the crate's pool of the peer's
        // device, which `enable_peer_access` granted this device); the brands keep both
        // contexts alive for 'v.
        Ok(unsafe { DeviceSlice::from_raw_parts(buffer.device_ptr(), buffer.len()) })
    }

    /// As [`PeerAccess::view`], for writing: borrows the buffer exclusively.
    ///
    /// # Errors
    /// As [`view`](PeerAccess::view).
    pub fn view_mut<'v, T: DeviceCopy>(
        self,
        buffer: &'v mut DeviceBuffer<'peer, T>,
    ) -> Result<&'v mut DeviceSlice<'ctx, T>> {
        self.reaches(
            "PeerAccess::view_mut",
            buffer.device_ptr(),
            buffer.size_in_bytes(),
        )?;
        // SAFETY: as in `view`, borrowed exclusively.
        Ok(unsafe { DeviceSlice::from_raw_parts_mut(buffer.device_ptr(), buffer.len()) })
    }

    /// `Ok` if this context's kernels reach the `bytes` of the peer's memory at `ptr`: the
    /// two devices are one, there are no bytes, or the driver's record of the memory says
    /// so ([`reach`]). Otherwise the error of `call`, naming the pool.
    fn reaches(self, call: &'static str, ptr: CUdeviceptr, bytes: usize) -> Result<()> {
        if self.device == self.peer_device || bytes == 0 {
            return Ok(());
        }
        let memory = driver::allocation_of(ptr)?;
        let granted = super::pool::crate_pool(self.peer_device)?;
        let reached = reach(
            memory.memory_type,
            memory.pool as usize,
            granted.map(|p| p as usize),
        );
        if reached == Reach::Mapped {
            return Ok(());
        }
        // (for the message only: the device's default pool is never destroyed)
        let default = driver::device_default_mem_pool(self.peer_device).ok();
        Err(refusal(
            call,
            (self.device, self.peer_device),
            ptr,
            reached,
            default.map(|p| p as usize),
        ))
    }
}

/// What a peer view between two devices reaches, by the driver's record of the memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reach {
    /// Memory of no pool, which peer access maps, or of the crate's pool of the peer's
    /// device, which `enable_peer_access` granted.
    Mapped,
    /// Memory of another pool (its handle), which the crate never granted.
    Ungranted(usize),
    /// No memory the driver knows (never a live buffer's: refused rather than guessed).
    Unknown,
}

/// [`Reach`] of memory of `memory_type` (`CU_POINTER_ATTRIBUTE_MEMORY_TYPE`, 0 for
/// unknown) and of the pool `pool` (`CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE`, 0 for none),
/// where the crate's pool of its device is `granted` (`None` where the device has no pools).
fn reach(memory_type: c_uint, pool: usize, granted: Option<usize>) -> Reach {
    if memory_type == 0 {
        Reach::Unknown
    } else if pool == 0 || Some(pool) == granted {
        Reach::Mapped
    } else {
        Reach::Ungranted(pool)
    }
}

/// The error of a view of `call` refused as `reached` (not [`Reach::Mapped`]), from the
/// device `devices.0` of memory at `ptr` of the device `devices.1`, whose default pool is
/// `default`.
#[cold]
fn refusal(
    call: &'static str,
    (device, peer_device): (CUdevice, CUdevice),
    ptr: CUdeviceptr,
    reached: Reach,
    default: Option<usize>,
) -> Error {
    let Reach::Ungranted(pool) = reached else {
        return Error::invalid_input(
            call,
            Invalid::argument(format!(
                "the driver knows no memory at the buffer's address {ptr:#x}"
            )),
        );
    };
    let which = if Some(pool) == default {
        "the device's default pool"
    } else {
        "a pool the crate does not own"
    };
    Error::with_detail(
        call,
        ErrorCode::PeerAccessNotEnabled,
        format!(
            "the buffer at {ptr:#x} is memory of {which} ({pool:#x}) of device {peer_device}, which does not grant device {device} access: `enable_peer_access` grants only the crate's pool of the peer's device (the default constructors allocate from it); copy it with `copy_peer`, or view a buffer of the crate's pool"
        ),
    )
}

/// Copies `src`, memory of the context `'s`, into `dst`, memory of the context `'d`
/// (`cuMemcpyPeer`), between devices or contexts; complete when it returns. Each buffer
/// comes with its own context's guard, destination first. The source is `&buffer` or
/// `&buffer[range]`, shared only, so a swapped call does not compile even with one
/// context's guard given twice. Needs no peer access.
///
/// # Errors
/// [`Invalid::LengthMismatch`] if the lengths differ (before any
/// driver call).
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
///
/// A source borrowed `&mut` is refused, so a call with the two buffers swapped does not
/// compile, also between two buffers of one context:
///
/// ```compile_fail,E0277
/// use cuda_brand::prelude::*;
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     let (mut a, mut b) = (ctx.zeroed::<u32>(4)?, ctx.zeroed::<u32>(4)?);
///     cuda_brand::copy_peer(&mut a, ctx, &mut b, ctx) // the source `&b`, not `&mut b`
/// })
/// # }
/// ```
pub fn copy_peer<'a, 'd, 's: 'a, T: DeviceCopy>(
    dst: &mut DeviceSlice<'d, T>,
    dst_ctx: ContextGuard<'d>,
    src: impl Into<&'a DeviceSlice<'s, T>>,
    src_ctx: ContextGuard<'s>,
) -> Result<()> {
    let src = src.into();
    lengths_match("copy_peer", dst.len(), src.len())?;
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
        crate::synchronous::wait_on_host()?;
        driver::memcpy_peer(
            dst.device_ptr(),
            dst_ctx.raw(),
            src.device_ptr(),
            src_ctx.raw(),
            dst.size_in_bytes(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_view_between_two_devices_reaches_only_memory_peer_access_maps_or_the_crate_granted() {
        const DEVICE: c_uint = 2;
        let (crates, own, default) = (0x1000usize, 0x2000usize, 0x3000usize);
        // memory of no pool (`cuMemAlloc`): peer access maps it, pools or not
        assert_eq!(reach(DEVICE, 0, Some(crates)), Reach::Mapped);
        assert_eq!(reach(DEVICE, 0, None), Reach::Mapped);
        // the crate's pool of the peer's device: granted by `enable_peer_access`
        assert_eq!(reach(DEVICE, crates, Some(crates)), Reach::Mapped);
        // any other pool, and unknown memory: refused
        assert_eq!(reach(DEVICE, own, Some(crates)), Reach::Ungranted(own));
        assert_eq!(reach(DEVICE, default, None), Reach::Ungranted(default));
        assert_eq!(reach(0, 0, Some(crates)), Reach::Unknown);

        let e = refusal(
            "PeerAccess::view",
            (1, 0),
            0x7f00,
            Reach::Ungranted(own),
            Some(default),
        );
        assert_eq!(
            (e.call(), e.code()),
            ("PeerAccess::view", ErrorCode::PeerAccessNotEnabled)
        );
        let d = e.detail().unwrap();
        assert!(
            d.contains("a pool the crate does not own (0x2000) of device 0"),
            "{d}"
        );
        assert!(d.contains("does not grant device 1 access"), "{d}");
        let e = refusal(
            "PeerAccess::view_mut",
            (1, 0),
            0x7f00,
            Reach::Ungranted(default),
            Some(default),
        );
        assert!(
            e.detail()
                .unwrap()
                .contains("the device's default pool (0x3000)"),
            "{e}"
        );
        let e = refusal("PeerAccess::view", (1, 0), 0x7f00, Reach::Unknown, None);
        assert_eq!(e.code(), ErrorCode::InvalidInput);
        assert!(
            e.to_string()
                .contains("knows no memory at the buffer's address 0x7f00"),
            "{e}"
        );
    }
}
