//! How a synchronous operation of the memory layer runs and completes: on the calling
//! thread's sync stream in the context ([`SyncStream`]), with the driver's `*Async` calls,
//! or, where no sync stream may be used, on the legacy stream after every pending record
//! it conflicts with and waited for on the host. An operation that reads or writes host
//! memory synchronizes the sync stream before it returns (the host buffer is free when the
//! call returns); a write of device memory alone records the sync stream's event
//! ([`SyncStream::end`]), which every later stream scope, sync stream and legacy-stream
//! operation waits for on the GPU; an upload of up to [`BOUNCE_SLOT`] bytes is copied into
//! a slot of the sync stream's bounce ring on the host first ([`bounced`]), and is then a
//! write of device memory alone. A staged bulk copy ([`Stage`], the memory layer's
//! `staging`) runs on the same stream and is complete when it returns. Only operations
//! without a sync stream wait for a `StreamFlags::Default` stream of the context (the exact
//! list: `docs/design/ordering.md`, "Which synchronous operations run on the legacy
//! stream").

use std::ffi::c_void;
use std::ptr::NonNull;

use cuda_driver_sys::CUctx_st;

use super::book::BOUNCE_SLOT;
use super::outside::before_legacy_op;
use super::sync_stream::{BounceSlot, SyncStream, legacy_wait};
use crate::driver::{self, CUdeviceptr, CUstream};
use crate::error::Result;
use crate::span::Touched;

/// How a synchronous operation on device memory may be completed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Completion {
    /// On a sync stream, made for the context if the thread has none: the context is one
    /// the crate entered (the memory's own, a buffer's owner), whose teardown ends its sync
    /// streams.
    Record,
    /// On a sync stream only where the context has one already (of any thread): the context
    /// is the one current on the thread, which another library may have made current
    /// (cudarc's `bind_to_thread`) and may destroy without the crate's teardown; a sync
    /// stream made for it then could outlive it. A sync stream of the context proves the
    /// crate holds it, and its teardown ends every sync stream of it. Without one, the
    /// legacy stream and a wait on the host.
    RecordIfKnown,
    /// The legacy stream and a wait on the host: memory the host can read directly (managed
    /// or host memory), or a context retained for one operation.
    HostWait,
    /// As `HostWait`, in the context current on the thread (as `RecordIfKnown`: perhaps
    /// made current by another library).
    HostWaitIfKnown,
}

impl Completion {
    /// Whether a scope of the crate holds the context (`Record`, `HostWait`), so that its
    /// teardown frees what the crate keeps for it (a bulk copy's staging); else the
    /// context is merely current, and the crate keeps something for it only where it
    /// finds it held after all (`context::held`).
    pub(crate) fn held(self) -> bool {
        matches!(self, Completion::Record | Completion::HostWait)
    }
}

/// What a synchronous operation touches besides device memory.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Access {
    /// Device memory only (a fill, a device-to-device copy): complete for every later user
    /// through the sync stream's record.
    Device,
    /// Host memory too (an upload or a download), or memory the host reads and writes
    /// directly (a managed source of a device-to-device copy): complete when it returns.
    Host,
}

/// Runs `op`, which queues a synchronous operation touching `touched` on the stream it is
/// given, with `ctx` current (`None`: the current context is one the crate keeps no order
/// for), and completes it as `completion` and `access` say. `op` gets the thread's sync
/// stream, or null (the legacy stream), after the pending accesses it conflicts with were
/// ordered before it there.
///
/// # Safety
/// `ctx`, where given, is alive and current on the calling thread while `op` runs and
/// after; `op` queues work touching nothing that is freed before the work is complete (a
/// borrow held until the call returns, for host memory; for device memory, until every
/// later user is ordered after the sync stream's record, which holds for memory only the
/// crate frees or uses); `touched` names every byte of device memory `op`'s work touches,
/// with the writes marked (or is `Anything`): later users are ordered after the work
/// only where they touch what it names.
#[inline]
pub(crate) unsafe fn run<T>(
    ctx: Option<NonNull<CUctx_st>>,
    completion: Completion,
    access: Access,
    touched: Touched<'_>,
    op: impl FnOnce(CUstream) -> Result<T>,
) -> Result<T> {
    // SAFETY: the caller's promise.
    match unsafe { begin(ctx, completion, false, touched) }? {
        Some(sync) => on_sync_stream(sync, access, touched, op),
        None => on_legacy_stream(touched, op),
    }
}

/// The thread's sync stream for an operation in `ctx` completed as `completion` says, with
/// a bounce slot where `slot`; `None`: the legacy stream.
///
/// # Safety
/// As [`run`] for `ctx`.
#[inline]
unsafe fn begin(
    ctx: Option<NonNull<CUctx_st>>,
    completion: Completion,
    slot: bool,
    touched: Touched<'_>,
) -> Result<Option<SyncStream>> {
    match (ctx, completion) {
        (Some(ctx), Completion::Record | Completion::RecordIfKnown) => {
            let make = completion == Completion::Record;
            // SAFETY: the caller's promise.
            unsafe { SyncStream::begin(ctx.as_ptr(), make, slot, touched) }
        }
        _ => Ok(None),
    }
}

/// Runs `op`, touching `touched`, on `sync`'s stream and completes it as `access` says.
fn on_sync_stream<T>(
    sync: SyncStream,
    access: Access,
    touched: Touched<'_>,
    op: impl FnOnce(CUstream) -> Result<T>,
) -> Result<T> {
    let out = match op(sync.stream()) {
        Ok(out) => out,
        Err(e) => {
            sync.abandon();
            return Err(e);
        }
    };
    match access {
        Access::Device => sync.end(touched)?,
        Access::Host => sync.end_after_sync()?,
    }
    Ok(out)
}

/// Runs `op`, touching `touched`, on the legacy stream of the current context after every
/// pending access it conflicts with, and waits for the legacy stream on the host.
fn on_legacy_stream<T>(touched: Touched<'_>, op: impl FnOnce(CUstream) -> Result<T>) -> Result<T> {
    before_legacy_op(touched, false)?;
    queue_on_legacy_stream(op)
}

/// Runs `op` on the legacy stream of the current context and waits for it on the host.
fn queue_on_legacy_stream<T>(op: impl FnOnce(CUstream) -> Result<T>) -> Result<T> {
    match op(std::ptr::null_mut()) {
        Ok(out) => legacy_wait().map(|()| out),
        Err(e) => {
            // an operation that failed part-way may have queued work: no error path
            // returns while it may still run (the rule of `stream_wait_idle`)
            let _ = legacy_wait();
            Err(e)
        }
    }
}

/// A staged bulk copy (the memory layer's `staging`), run on the stream it is given:
/// `Ok(true)` where it copied (complete: every DMA waited for), `Ok(false)` where it copied
/// nothing and the driver's path is to be taken.
pub(crate) type Stage<'a> = &'a mut dyn FnMut(CUstream) -> Result<bool>;

/// Runs `stage` on `sync`'s stream, where the other synchronous operations of the thread
/// run (a non-blocking stream: no `StreamFlags::Default` stream holds it back), and ends
/// the operation as complete (`Access::Host`: the sync stream is synchronized): `None`.
/// Where the staging copied nothing, hands `sync` back for the driver's path.
fn staged_on_sync_stream(sync: SyncStream, stage: Stage<'_>) -> Result<Option<SyncStream>> {
    match stage(sync.stream()) {
        Ok(true) => sync.end_after_sync().map(|()| None),
        Ok(false) => Ok(Some(sync)),
        Err(e) => {
            sync.abandon();
            Err(e)
        }
    }
}

/// Runs `stage` (where given), else `op`, on the legacy stream of the current context after
/// every pending access `touched` conflicts with: where no sync stream may be used, as for
/// every other synchronous operation. The staged copy is complete when it returns; `op` is
/// waited for on the host.
fn staged_on_legacy_stream(
    touched: Touched<'_>,
    stage: Option<Stage<'_>>,
    op: impl FnOnce(CUstream) -> Result<()>,
) -> Result<()> {
    before_legacy_op(touched, false)?;
    if let Some(stage) = stage {
        if stage(std::ptr::null_mut())? {
            return Ok(());
        }
    }
    queue_on_legacy_stream(op)
}

/// Copies `bytes` from host memory at `src` into device memory at `dst`, in `ctx` (current;
/// `None`: one the crate keeps no order for), completed as `completion` says, on the
/// thread's sync stream (else the legacy stream, after every pending access it conflicts
/// with): through `stage` where given (the memory layer's staging, which it wants for this
/// copy); up to [`BOUNCE_SLOT`] bytes through the sync stream's bounce ring ([`bounced`]);
/// else queued there and waited for. Complete when it returns: the host memory is not read
/// afterwards, and every later user of the device memory is ordered after the copy.
/// `touched`: the device memory it writes (`Anything` for memory the crate cannot place).
///
/// # Safety
/// As [`run`] for `ctx`; `dst` is device memory valid for `bytes` of writes that nothing
/// else uses during the call, `src` host memory valid for `bytes` of reads that nothing
/// writes during the call; `stage` makes this copy, on the stream it is given, complete
/// when it returns.
pub(crate) unsafe fn upload(
    ctx: Option<NonNull<CUctx_st>>,
    completion: Completion,
    touched: Touched<'_>,
    dst: CUdeviceptr,
    src: *const c_void,
    bytes: usize,
    stage: Option<Stage<'_>>,
) -> Result<()> {
    // SAFETY: the caller's promises, on the stream given; complete when `run` returns
    // (`Access::Host`).
    let op = |stream| unsafe { driver::memcpy_htod_async(dst, src, bytes, stream) };
    // SAFETY: the caller's promise for `ctx`.
    let Some(sync) = unsafe { begin(ctx, completion, bytes <= BOUNCE_SLOT, touched) }? else {
        return staged_on_legacy_stream(touched, stage, op);
    };
    let mut sync = match stage {
        Some(stage) => match staged_on_sync_stream(sync, stage)? {
            Some(sync) => sync,
            None => return Ok(()),
        },
        None => sync,
    };
    match sync.slot() {
        // SAFETY: the caller's promises; the slot is the operation's.
        Some(slot) => unsafe { bounced(sync, slot, touched, dst, src, bytes) },
        None => on_sync_stream(sync, Access::Host, touched, op),
    }
}

/// A small upload through a bounce slot: waits until the slot's earlier copy is done (the
/// ring's other slots were taken since: seldom pending),
/// copies `src` into the slot on the host, queues the copy from the slot to `dst` on the
/// sync stream and ends with the slot's record, without waiting: from then on only the
/// slot is read, never `src`, and every later user of `dst` waits for the record.
///
/// # Safety
/// As [`upload`], with `bytes` at most [`BOUNCE_SLOT`]; `slot` is `sync`'s.
unsafe fn bounced(
    sync: SyncStream,
    slot: BounceSlot,
    touched: Touched<'_>,
    dst: CUdeviceptr,
    src: *const c_void,
    bytes: usize,
) -> Result<()> {
    // A slot not in flight had its copy completed: the book saw its sync stream
    // synchronized, or a later record of it complete, since.
    if slot.in_flight {
        // SAFETY: the slot's event is alive while its sync stream is busy (this operation).
        if let Err(e) = unsafe { driver::event_synchronize(slot.event) } {
            sync.abandon();
            return Err(e);
        }
    }
    // SAFETY: `src` is valid for `bytes` of reads (the caller's promise); the slot holds
    // `BOUNCE_SLOT >= bytes` bytes, lent to this operation alone, and no copy out of it is
    // pending (its event completed above, or the book knew every record of the sync
    // stream complete; a copy whose record failed left the sync stream idle or the ring
    // given up, `SyncStream::finish_in_place`); host memory of the crate's, apart from `src`.
    unsafe { std::ptr::copy_nonoverlapping(src.cast::<u8>(), slot.host, bytes) };
    // SAFETY: `dst` as the caller promises; the slot stays allocated and unwritten until
    // the slot's event, recorded after this copy by `end`, completes (the ring is freed
    // only after its sync stream is idle; a slot is rewritten only after that event is
    // waited for or known complete, as above).
    let queued = unsafe { driver::memcpy_htod_async(dst, slot.host.cast(), bytes, sync.stream()) };
    if let Err(e) = queued {
        sync.abandon();
        return Err(e);
    }
    sync.end(touched)
}

/// Copies `bytes` from device memory at `src` into host memory at `dst`, in `ctx` (as
/// [`upload`]): through `stage` where given (as in `upload`), on the thread's sync stream
/// where it has one (else the legacy stream). Complete when it returns.
///
/// # Safety
/// As [`run`] for `ctx`; `src` is device memory valid for `bytes` of reads that nothing
/// writes during the call, `dst` host memory valid for `bytes` of writes that nothing else
/// uses during the call (any bytes being a valid value of its type); `stage` as for
/// [`upload`].
pub(crate) unsafe fn download(
    ctx: Option<NonNull<CUctx_st>>,
    completion: Completion,
    touched: Touched<'_>,
    dst: *mut c_void,
    src: CUdeviceptr,
    bytes: usize,
    stage: Option<Stage<'_>>,
) -> Result<()> {
    // SAFETY: the caller's promises, on the stream given; complete when it returns
    // (`Access::Host`).
    let op = |stream| unsafe { driver::memcpy_dtoh_async(dst, src, bytes, stream) };
    // SAFETY: the caller's promise for `ctx`.
    let Some(sync) = unsafe { begin(ctx, completion, false, touched) }? else {
        return staged_on_legacy_stream(touched, stage, op);
    };
    let sync = match stage {
        Some(stage) => match staged_on_sync_stream(sync, stage)? {
            Some(sync) => sync,
            None => return Ok(()),
        },
        None => sync,
    };
    on_sync_stream(sync, Access::Host, touched, op)
}
