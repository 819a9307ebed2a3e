//! Memory made with a setup guard of [`with_phases`](crate::with_phases): recorded per
//! context and freed by the context's teardown, never before (see [`phase`](crate::phase)).

use std::sync::Mutex;

use super::in_context;
use crate::driver::{self, CUcontext, CUdeviceptr};
use crate::error::{Error, ErrorCode, Result};

/// Memory made during a setup phase, freed by its context's teardown.
struct Deferred {
    context: usize,
    ptr: usize,
    kind: FreeBy,
}

/// How deferred memory is freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FreeBy {
    /// Device memory of a pool: `cuMemFreeAsync` on the legacy stream.
    Pool,
    /// Device memory from `cuMemAlloc`, `cuMemAllocPitch` or `cuMemAllocManaged`:
    /// `cuMemFree`.
    Plain,
    /// Page-locked host memory: `cuMemFreeHost`.
    Pinned,
}

/// Frees `ptr` as `kind` says, with `context` current.
///
/// # Safety
/// `ptr` is memory of `kind` made in the live `context`, given up by its owner, unused.
unsafe fn free(context: CUcontext, ptr: usize, kind: FreeBy) -> Result<()> {
    let Some(ctx) = std::ptr::NonNull::new(context) else {
        return Ok(());
    };
    let ptr_d = ptr as CUdeviceptr;
    let free = || match kind {
        // SAFETY: the caller gives up `ptr`, pool memory with no work pending on it (as the
        // memory layer's `free_buffer_memory` frees a pool buffer).
        FreeBy::Pool => unsafe { driver::mem_free_async(ptr_d, std::ptr::null_mut()) },
        // SAFETY: the caller gives up `ptr`, from `cuMemAlloc` (as `free_plain`).
        FreeBy::Plain => unsafe { driver::mem_free(ptr_d) },
        // SAFETY: the caller gives up `ptr`, from `cuMemHostAlloc`.
        FreeBy::Pinned => unsafe { driver::mem_free_host(ptr as *mut std::ffi::c_void) },
    };
    // SAFETY: the caller's promise: the context is alive.
    unsafe { in_context(ctx, free) }
}

/// The buffers of every context in its setup or run phase, in the order they were made.
static DEFERRED: Mutex<Vec<Deferred>> = Mutex::new(Vec::new());

fn deferred() -> std::sync::MutexGuard<'static, Vec<Deferred>> {
    DEFERRED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Records memory made with a setup guard of `context`: its teardown frees it. On failure
/// (no host memory for the record) frees it now and reports the error.
pub(crate) fn defer_free(context: CUcontext, ptr: usize, kind: FreeBy) -> Result<()> {
    let mut list = deferred();
    if list.try_reserve(1).is_err() {
        drop(list);
        // SAFETY: just allocated in `context`, never handed out.
        let _ = unsafe { free(context, ptr, kind) };
        return Err(Error::with_detail(
            "with_phases",
            ErrorCode::OutOfMemory,
            "no host memory to record a setup-phase buffer",
        ));
    }
    list.push(Deferred {
        context: context as usize,
        ptr,
        kind,
    });
    Ok(())
}

/// Frees the buffers deferred for `context`, after synchronizing it and waiting for every
/// pending synchronous write (the context is current). Returns the first error; if a wait
/// fails, nothing is freed (the memory stays allocated: work may still use it).
pub(crate) fn free_deferred(context: CUcontext) -> Result<()> {
    let mine: Vec<Deferred> = {
        let mut list = deferred();
        let (mine, others) = std::mem::take(&mut *list)
            .into_iter()
            .partition(|d| d.context == context as usize);
        *list = others;
        mine
    };
    if mine.is_empty() {
        return Ok(());
    }
    // A setup buffer of a pool may have been written while another context of the device
    // was current, on that context's sync stream, which the synchronization of this one
    // does not cover: every pending record is waited for too, before the blocks go back
    // to their pools (`docs/design/ordering.md`).
    // If either wait fails, work may still use the memory: it is left allocated (as every
    // release after a failed wait in the crate), and the error returned.
    driver::ctx_synchronize()?;
    super::teardown::wait_for_sync_writes()?;
    let mut first = Ok(());
    for d in mine {
        // SAFETY: allocated in `context` during its setup phase; the context is idle (both
        // waits above succeeded) and every buffer handle is gone (the brand cannot leave
        // the closure); freed once, since the record was taken off the list. Every one is
        // freed, the first failure returned.
        let freed = unsafe { free(context, d.ptr, d.kind) };
        first = first.and(freed);
    }
    first
}

/// Takes the buffer at `ptr` off its teardown's list (its owner gave it up with
/// `into_raw_parts`).
pub(crate) fn undefer(ptr: usize) {
    let mut list = deferred();
    if let Some(i) = list.iter().position(|d| d.ptr == ptr) {
        list.swap_remove(i);
    }
}
