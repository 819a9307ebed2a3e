//! What the staging keeps (the `staging` feature): its sizes, the counters of staging
//! memory, the staging memory itself (allocated by the crate, page-locked for a context),
//! and the huge-page advice.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::workers;
use crate::driver;
use crate::error::{Error, ErrorCode, Result};

/// Bytes of one slot of a staging: the largest chunk one DMA moves, and the huge-page size
/// the largest chunks are aligned to.
pub const SLOT_BYTES: usize = 2 << 20;
/// Slots in one staging: enough for [`MAX_WORKERS`] threads each holding one while the DMA
/// fills or drains as many more.
pub const SLOTS: usize = 2 * MAX_WORKERS;
/// Bytes of page-locked host memory in one staging (32 MiB).
pub const STAGING_BYTES: usize = SLOT_BYTES * SLOTS;
/// The alignment of a staging: a 2 MiB huge page.
pub(super) const STAGING_ALIGN: usize = 2 << 20;
/// The most stagings one context has at once (so at most 64 MiB page-locked per context):
/// two threads copying at once each get one, a third waits.
pub const MAX_STAGINGS_PER_CONTEXT: usize = 2;
/// The most threads a staging keeps to move chunks between the host range and the slots
/// (one fewer than the cores on a smaller machine; a smaller copy uses fewer).
pub const MAX_WORKERS: usize = 8;
/// A staged copy uses one kept thread for every this many bytes (at least one).
pub const MIN_BYTES_PER_WORKER: usize = 256 << 10;
/// The smallest chunk.
pub(super) const MIN_CHUNK: usize = 256 << 10;
/// A new `Vec` of at least this size is advised as huge-page memory.
pub(super) const HUGE_PAGE_MIN: usize = 4 << 20;

/// Bytes of staging memory that exist in the process (all contexts).
pub(super) static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);
/// Makes every staging allocation fail (tests of the fallback).
pub(super) static FAIL_ALLOCATIONS: AtomicBool = AtomicBool::new(false);

// ---- stagings ----------------------------------------------------------------------------

/// Host memory the crate allocated, page-locked (registered) for one context or not.
pub(crate) struct Staging {
    pub(super) base: NonNull<u8>,
    pub(super) bytes: usize,
    pub(super) registered: bool,
    /// The threads kept for this staging's copies (none for a test's staging).
    pub(super) workers: workers::Workers,
}

// SAFETY: a `Staging` owns plain host memory; which thread reads or writes which slot is
// decided by the pipeline below, under its mutex.
unsafe impl Send for Staging {}
// SAFETY: `&Staging` only hands out raw slot pointers; every access through them is
// justified where it happens (one owner per slot at a time, handed over under a mutex).
unsafe impl Sync for Staging {}

impl Staging {
    pub(super) fn layout(bytes: usize) -> Option<Layout> {
        Layout::from_size_align(bytes, STAGING_ALIGN).ok()
    }

    /// `bytes` (a multiple of [`STAGING_ALIGN`], not 0) of host memory, not page-locked.
    pub(super) fn allocate(bytes: usize) -> Option<Staging> {
        if bytes == 0 || FAIL_ALLOCATIONS.load(Ordering::SeqCst) {
            return None;
        }
        let layout = Self::layout(bytes)?;
        // SAFETY: the layout has a non-zero size.
        let base = NonNull::new(unsafe { std::alloc::alloc(layout) })?;
        LIVE_BYTES.fetch_add(bytes, Ordering::SeqCst);
        Some(Staging {
            base,
            bytes,
            registered: false,
            workers: workers::Workers::none(),
        })
    }

    /// A staging of [`STAGING_BYTES`], page-locked for the current context.
    pub(super) fn create() -> Result<Staging> {
        let Some(mut staging) = Self::allocate(STAGING_BYTES) else {
            return Err(Error::with_detail(
                "staging",
                ErrorCode::OutOfMemory,
                format!("allocating {STAGING_BYTES} bytes of host memory for staging failed"),
            ));
        };
        thp::advise_huge(staging.base.as_ptr(), staging.bytes);
        // SAFETY: the staging owns the range, and unregisters it before freeing it (`Drop`).
        unsafe { driver::mem_host_register(staging.base.as_ptr().cast(), staging.bytes, 0) }?;
        staging.registered = true;
        staging.workers = workers::Workers::spawn(super::pipeline::threads_to_keep());
        if staging.workers.count() == 0 {
            // no thread could be started: without one a staged copy is slower than the
            // driver's path, so the context keeps none (dropping this one unregisters it)
            return Err(Error::with_detail(
                "staging",
                ErrorCode::OutOfMemory,
                "no copying thread could be started",
            ));
        }
        Ok(staging)
    }

    /// The slots of the staging, at most [`SLOTS`].
    pub(super) fn slots(&self) -> usize {
        (self.bytes / SLOT_BYTES).min(SLOTS)
    }

    /// The start of slot `i` (`i < slots()`), [`SLOT_BYTES`] long.
    pub(super) fn slot(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.slots());
        self.base.as_ptr().wrapping_add(i * SLOT_BYTES)
    }

    /// Marks the memory as no longer page-locked, for a staging whose context the driver
    /// has destroyed (which unregistered it).
    pub(super) fn forget_registration(&mut self) {
        self.registered = false;
    }
}

impl Drop for Staging {
    /// Unregisters the memory (in the current context, which must be the one that
    /// registered it: the crate drops a staging only with its context current, or after
    /// [`Staging::forget_registration`]) and frees it. If the driver refuses the
    /// unregistration for another reason than "not registered", the memory is leaked
    /// rather than handed back to the allocator while the driver may keep it page-locked.
    fn drop(&mut self) {
        if self.registered {
            // SAFETY: registered by this staging; no copy uses it (a staging is dropped only
            // when no lease holds it).
            match unsafe { driver::mem_host_unregister(self.base.as_ptr().cast()) } {
                Ok(()) => {}
                Err(e) if e.code() == ErrorCode::HostMemoryNotRegistered => {}
                Err(_) => return,
            }
        }
        let Some(layout) = Self::layout(self.bytes) else {
            return;
        };
        // SAFETY: allocated by `allocate` with this layout, not registered any more.
        unsafe { std::alloc::dealloc(self.base.as_ptr(), layout) };
        LIVE_BYTES.fetch_sub(self.bytes, Ordering::SeqCst);
    }
}

// ---- huge pages ---------------------------------------------------------------------------

/// `madvise(MADV_HUGEPAGE)` on the whole 2 MiB pages of a new allocation (Linux; the
/// advice's value, 14, is the same on every architecture CUDA supports there). The
/// crate declares the one function itself rather than depending on `libc`: the C library
/// is linked by `std` on Linux already.
#[cfg(all(
    target_os = "linux",
    any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "powerpc64",
        target_arch = "riscv64"
    )
))]
pub(super) mod thp {
    use std::ffi::{c_int, c_void};

    const MADV_HUGEPAGE: c_int = 14;
    const HUGE_PAGE: usize = 2 << 20;

    unsafe extern "C" {
        /// `int madvise(void *addr, size_t length, int advice)`, POSIX/Linux.
        fn madvise(addr: *mut c_void, length: usize, advice: c_int) -> c_int;
    }

    /// Advises the 2 MiB-aligned part of `[start, start + bytes)`, an allocation of the
    /// crate's, as huge-page memory. Only whole huge pages inside the range are advised,
    /// so no neighbouring allocation is touched. A refusal (huge pages disabled) changes
    /// nothing, so it is ignored.
    pub(in crate::memory::staging) fn advise_huge(start: *mut u8, bytes: usize) {
        let lo = start as usize;
        let first = lo.next_multiple_of(HUGE_PAGE);
        let last = (lo + bytes) / HUGE_PAGE * HUGE_PAGE;
        if last > first {
            let at = start.wrapping_add(first - lo).cast::<c_void>();
            // SAFETY: `[first, last)` is page-aligned and inside an allocation the caller
            // owns; `MADV_HUGEPAGE` changes how the kernel backs the range, never its
            // contents or whether it is mapped.
            let _ = unsafe { madvise(at, last - first, MADV_HUGEPAGE) };
        }
    }
}

#[cfg(not(all(
    target_os = "linux",
    any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "powerpc64",
        target_arch = "riscv64"
    )
)))]
pub(super) mod thp {
    pub(in crate::memory::staging) fn advise_huge(_start: *mut u8, _bytes: usize) {}
}
