//! A scope's stream-ordered allocations (`alloc`, `alloc_zeroed`, `alloc_from_slice`, and
//! the `_in` forms from a given pool), freed when the scope ends.

use super::views::write_span;
use super::{Allocation, lock};
use super::{DeviceMut, StreamScope};
use crate::context::{Dynamic, StreamKind};
use crate::driver::{self, CUmemoryPool, Pattern};
use crate::error::{Error, Result};
use crate::memory::{self, DeviceCopy, MemoryPool};
use crate::stream::in_stream_context;

impl<'scope, 'env, 'ctx, K: StreamKind> StreamScope<'scope, 'env, 'ctx, K> {
    /// Queues zeroing a fresh allocation of this scope.
    fn zero<T>(&self, buf: DeviceMut<'scope, 'ctx, T>) -> Result<()> {
        if buf.bytes() == 0 {
            return Ok(());
        }
        self.ordered(&[write_span(&buf)], None, || {
            // SAFETY: the allocation's bytes, in stream order after the allocation.
            unsafe { driver::memset_async(buf.ptr, Pattern::D8(0), buf.bytes(), self.stream.raw()) }
        })
    }

    /// As [`StreamScope::alloc`], from `pool` (a pool of this context: the brand says so):
    /// freed in stream order when the scope ends. On a preallocated stream of
    /// [`with_phases`](crate::with_phases) this and [`alloc_zeroed_in`](Self::alloc_zeroed_in)
    /// are the only device memory the run phase allocates: scratch bounded by a pool made
    /// in setup.
    ///
    /// # Safety
    /// As for [`StreamScope::alloc`].
    pub unsafe fn alloc_in<T: DeviceCopy>(
        &'scope self,
        pool: &'scope MemoryPool<'ctx>,
        len: usize,
    ) -> Result<DeviceMut<'scope, 'ctx, T>> {
        // SAFETY: the caller's promise.
        unsafe { self.alloc_from(Some(pool.raw()), len) }
    }

    /// As [`StreamScope::alloc_zeroed`], from `pool`: freed in stream order when the scope
    /// ends (see [`alloc_in`](Self::alloc_in)).
    pub fn alloc_zeroed_in<T: DeviceCopy>(
        &'scope self,
        pool: &'scope MemoryPool<'ctx>,
        len: usize,
    ) -> Result<DeviceMut<'scope, 'ctx, T>> {
        // SAFETY: zeroed below, as in `alloc_zeroed`.
        let buf = unsafe { self.alloc_in::<T>(pool, len) }?;
        self.zero(buf)?;
        Ok(buf)
    }

    /// # Safety
    /// As for [`StreamScope::alloc`]; `pool` is a live pool of the stream's device.
    unsafe fn alloc_from<T: DeviceCopy>(
        &'scope self,
        pool: Option<CUmemoryPool>,
        len: usize,
    ) -> Result<DeviceMut<'scope, 'ctx, T>> {
        let bytes = memory::checked_byte_len::<T>("StreamScope::alloc", len)?;
        if bytes == 0 {
            return Ok(DeviceMut::new(memory::empty_address::<T>(), len));
        }
        let mut allocations = lock(&self.allocations);
        // room first, so a failed push cannot leak the allocation; 16 at once, so a scope
        // that allocates does not regrow its list allocation by allocation
        let room = if allocations.list.capacity() == 0 {
            16
        } else {
            1
        };
        allocations.list.reserve(room);
        let pool = match pool {
            Some(pool) => Some(pool),
            None => match allocations.pool {
                Some(known) => known.map(|p| p as CUmemoryPool),
                None => {
                    let found = self.with_stream_context(|| {
                        crate::memory::pool::crate_pool(driver::ctx_get_device()?)
                    })?;
                    allocations.pool = Some(found.map(|p| p as usize));
                    found
                }
            },
        };
        let allocation = match pool {
            // SAFETY: a live pool of the stream's device; the stream is alive (borrowed for
            // 'env).
            Some(pool) => Allocation::Pool(
                unsafe { driver::mem_alloc_from_pool_async(bytes, pool, self.stream.raw()) }
                    .map_err(|e| crate::memory::pool::exhausted(e, bytes))?,
            ),
            None => Allocation::Plain(self.with_stream_context(|| driver::mem_alloc(bytes))?),
        };
        let ptr = match allocation {
            Allocation::Pool(p) | Allocation::Plain(p) => p,
        };
        allocations.list.push(allocation);
        if let Some((lanes, me)) = self.lanes {
            lanes.allocated(me, ptr, bytes as u64);
        }
        Ok(DeviceMut::new(ptr, len))
    }

    /// Runs `op` with the stream's context current (the fallback allocations without memory
    /// pools are made and freed in it, whatever context is current).
    fn with_stream_context<T>(&self, op: impl FnOnce() -> Result<T>) -> Result<T> {
        // SAFETY: the stream is alive (borrowed for 'env).
        unsafe { in_stream_context(self.stream.raw(), op) }
    }

    /// Frees the scope's allocations, once every stream of the scope is idle: pool memory
    /// in stream order (`cuMemFreeAsync`), fallback memory with `cuMemFree`. Returns the
    /// first error. Where every stream `synchronized` without an error, first gives the
    /// vectors [`StreamScope::copy_to_vec`] filled their new lengths.
    pub(super) fn free_allocations(&self, synchronized: bool) -> Result<()> {
        let stream = self.stream.raw();
        let (mut first_error, mut failed) = (None, 0usize);
        let mut allocations = lock(&self.allocations);
        for grown in std::mem::take(&mut allocations.grown) {
            if synchronized {
                // SAFETY: every stream of the scope is idle, so the copy into the spare
                // capacity is complete (a copy the driver failed made the wait fail); the
                // vector is still borrowed by the scope, alive and unmoved.
                unsafe { (grown.set_len)(grown.vec, grown.len) };
            }
        }
        for a in std::mem::take(&mut allocations.list) {
            let freed = match a {
                // SAFETY: allocated by this scope from the stream's pool; every stream that
                // could use it is idle, and no handle to it outlives the scope.
                Allocation::Pool(p) => unsafe { driver::mem_free_async(p, stream) },
                // SAFETY: as above; freed in the context it was allocated in.
                Allocation::Plain(p) => self.with_stream_context(|| unsafe { driver::mem_free(p) }),
            };
            if let Err(e) = freed {
                failed += 1;
                first_error.get_or_insert(e);
            }
        }
        match (first_error, failed) {
            (None, _) => Ok(()),
            (Some(e), 1) => Err(e),
            // one error for all: after a sticky error every free fails the same way
            (Some(e), n) => Err(Error::with_detail(
                e.call(),
                e.code(),
                format!(
                    "{}{n} allocations of the scope could not be freed, this the first",
                    e.detail().map(|d| format!("{d}; ")).unwrap_or_default()
                ),
            )),
        }
    }
}

/// The scope methods that allocate from the crate's pool: for streams of a plain context
/// only (a preallocated stream of [`with_phases`](crate::with_phases) has none of them).
impl<'scope, 'env, 'ctx> StreamScope<'scope, 'env, 'ctx, Dynamic> {
    /// Allocates `len` elements in stream order and queues zeroing them; freed in stream
    /// order when the scope ends. Every stream of the scope sees zeros: in a multi-stream
    /// scope, other streams wait for the zeroing before they touch the memory. See
    /// [`StreamScope::alloc`].
    pub fn alloc_zeroed<T: DeviceCopy>(
        &'scope self,
        len: usize,
    ) -> Result<DeviceMut<'scope, 'ctx, T>> {
        // SAFETY: zeroed below, in stream order, before anything of the scope reads it
        // (on this stream by order, on others because the allocation is recorded as this
        // stream's write, so they wait for it).
        let buf = unsafe { self.alloc::<T>(len) }?;
        self.zero(buf)?;
        Ok(buf)
    }

    /// Allocates `src.len()` elements in stream order and queues copying `src` into them:
    /// [`alloc`](StreamScope::alloc) and [`copy_from_host`](StreamScope::copy_from_host) in
    /// one safe call, since nothing can read the memory before the copy has written it.
    /// `src` stays borrowed until the scope has synchronized.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let host = vec![7u32; 1000];
    ///     let mut back = Vec::new();
    ///     ctx.new_stream()?.scope(|s| {
    ///         let d = s.alloc_from_slice(&host)?;
    ///         s.copy_to_vec(&mut back, d.into_ref())
    ///     })?;
    ///     assert_eq!(back, host);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn alloc_from_slice<T: DeviceCopy>(
        &'scope self,
        src: &'scope [T],
    ) -> Result<DeviceMut<'scope, 'ctx, T>> {
        // SAFETY: every element is written by the copy queued next, in stream order, before
        // anything of the scope can read it (other streams wait for this stream's writes);
        // if queueing the copy fails, the handle is never returned.
        let buf = unsafe { self.alloc::<T>(src.len()) }?;
        self.copy_from_host(buf, src)?;
        Ok(buf)
    }

    /// Allocates `len` elements in stream order from the crate's pool of the device
    /// (`cuMemAllocFromPoolAsync`, see [`pool`](crate::memory::pool); about a microsecond with the
    /// free, where `cuMemAlloc` and `cuMemFree` take several), without initialising them.
    /// The memory lives until the scope ends: after the final synchronization it is freed in
    /// stream order (`cuMemFreeAsync`). On a device without memory pools
    /// (`MEMORY_POOLS_SUPPORTED` is 0) it comes from `cuMemAlloc` in the stream's context
    /// instead, freed after the synchronization; `CUDA_BRAND_NO_MEMORY_POOLS=1` forces that
    /// path (for tests). In a
    /// multi-stream scope the allocation counts as a write on this stream: other streams
    /// wait for it before they touch the memory.
    ///
    /// # Safety
    /// The contents are stale bytes until written (valid values for `DeviceCopy` types,
    /// but possibly another allocation's data).
    pub unsafe fn alloc<T: DeviceCopy>(
        &'scope self,
        len: usize,
    ) -> Result<DeviceMut<'scope, 'ctx, T>> {
        // SAFETY: the caller's promise.
        unsafe { self.alloc_from(None, len) }
    }
}
