//! The synchronous path: how a synchronous copy or fill of device memory is queued,
//! completed, and ordered before every later user of that memory. Synchronous device
//! writes are ordered on the GPU instead of waited for on the host, each after exactly the
//! earlier synchronous work on the memory it touches (the design and the table of every
//! consumer: `docs/design/ordering.md`). It uses the context layer (and names spans of
//! memory through the leaf `crate::span`); the memory layer's synchronous operations run
//! through it ([`run`], [`upload`], [`download`]), and the layers above order their own
//! work after it ([`stream_after_writes`], [`wait_on_host`]).
//!
//! The rooms, lowest first (each names only those before it): `book.rs` (the book of sync
//! streams and their pending accesses, generic over the driver's handles, tested without a
//! GPU), `lifecycle.rs` (a sync stream's driver objects and its bounce ring, made and
//! ended), `sync_stream.rs` (the process's book behind its lock, an operation's use of its
//! thread's sync stream, and the hooks the context layer's teardowns call), `outside.rs`
//! (streams the crate does not own ordered after pending writes) and `operation.rs` (how
//! an operation runs and completes: sync stream, bounce slot, staging or legacy stream).
//!
//! A synchronous copy or fill (`copy_from_host`, `fill`, `zeroed`, `copy_from_device`, a 2D
//! or 3D copy, `to_vec`) runs on the calling thread's **sync stream** in the context: a
//! non-blocking stream the crate keeps for that thread and context (`SyncStream`), with
//! the driver's `*Async` calls. Threads of one context never queue behind each other's
//! synchronous work there (the driver's "synchronous" calls all use the context's one
//! legacy stream, and a pageable upload synchronizes it first).
//!
//! * An operation that reads or writes host memory the caller lends (a download, an upload
//!   of more than `BOUNCE_SLOT` bytes) is complete when it returns: the sync stream is
//!   synchronized before the call returns, so the host buffer is neither read nor written
//!   afterwards.
//! * A write of device memory alone (a fill, a device-to-device copy, and an upload of up to
//!   `BOUNCE_SLOT` bytes, copied on the host into a slot of the sync stream's
//!   bounce ring first, `book::Bounce`; page-locked in a context the crate destroys
//!   itself, `lifecycle::RING_LAYOUT`) records the sync stream's event instead: the sync
//!   stream's *record*, with the spans of memory the operation touched (its *accesses*).
//!   Every later user of device memory that is not ordered after that sync stream orders
//!   itself after the records whose accesses conflict with what it touches (shared bytes,
//!   one side writing; `span::conflicts`): each operation of a stream scope, on the scope's
//!   stream, before it is queued ([`stream_after_writes`]; a scope may bind memory written
//!   synchronously after it opened, so a wait when it opens would not be enough); each
//!   synchronous operation of another sync stream, on that sync stream
//!   (`SyncStream::begin`); work on a legacy stream ([`before_legacy_op`]: a free, an
//!   operation that may use no sync stream); and, waiting on the host for every record, a
//!   free the driver does not order and `ContextGuard::synchronize` ([`wait_on_host`]);
//!   and each raw escape, which hands memory or a handle to code the crate cannot see: on
//!   the host, for the records that conflict with what it hands out (an address, raw
//!   parts, a raw module, function or graph: [`before_raw_escape`]; a raw context: every
//!   record, through the context layer's hook), or, for a raw stream, on that stream for
//!   every record ([`stream_after_writes`] of anything).
//!   Nothing is queued on a stream the crate does not own (a scope's, a legacy stream)
//!   while the book's lock is held: the waits go through the calling thread's sync stream
//!   (`outside.rs`).
//!
//! # Accesses
//!
//! One book for the process, behind one lock: each sync stream's entry keeps the spans its
//! pending records touched (each span once: repeated writes of one buffer keep one), all
//! covered by the entry's latest record. Memory the crate cannot place is recorded as
//! touching everything (`Touched::Anything`): a module global (any kernel of its module
//! may read it, whatever its arguments name), plain `cuMemAlloc` memory reached through a
//! view, a pitched buffer. An operation that names no memory (a graph launch) waits for
//! every pending record. A record is forgotten once it is known complete: its sync stream
//! was synchronized, or a query before a wait found it done, or [`wait_on_host`] waited for
//! it; past `MAX_PENDING` spans a sync stream is waited for on the host. While nothing is
//! pending anywhere, a scope operation costs one atomic load ([`is_settled`]).
//!
//! # Why a wait covers every conflicting write before it, on every thread
//!
//! All records of one sync stream are made on its stream, which runs in order: a record
//! covers every operation queued on the sync stream before it. `cuStreamWaitEvent` waits
//! for the event's most recent record at the time of the call. A writer records its event
//! *then* adds its accesses, both under the book's lock; a reader takes the lock, so every
//! access it can see was recorded before its `cuStreamWaitEvent`, and the wait covers it
//! (or a later record of the same sync stream, which covers it too). A thread that hands a
//! buffer to another (a channel, a join, a scoped thread's end: each a happens-before
//! edge) made its records before the hand-off, so the receiving thread's scope or sync
//! stream sees them. Memory freed with a pending access keeps it: a later allocation of the
//! same addresses conflicts with it until it is complete.
//!
//! Only contexts the crate entered get a sync stream made for them (the teardown of the
//! scope they were made under takes them out again: `context::teardown::end_sync_streams`,
//! which calls this layer through the hooks it registers before its first sync stream,
//! `context::teardown::SyncHooks`): a write made while another library's context is
//! current uses a sync stream only where the context has one already, and runs on the
//! legacy stream with a wait on the host otherwise ([`Completion`]).
//!
//! Accesses are kept per sync stream, not per buffer: the branded handle types are one
//! pointer (and a length) wide (the size facts of the crate root), so a buffer cannot carry
//! its last write; an operation compares its spans with the pending accesses instead.
//!
//! # The path of one synchronous operation
//!
//! A `DeviceBuffer::from_slice` of 256 KiB (a bounced upload; the context current; from
//! the crate's pool; the thread's sync stream and its ring made by an earlier operation)
//! runs code in these 8 files outside `driver/`, in this order:
//!
//! 1. `memory/buffer.rs`: `from_slice`, `allocate`, `Owner::new`, `fill_from`;
//! 2. `memory/extent.rs`: `checked_byte_len`, `byte_len`;
//! 3. `context/mod.rs`: the guard's `unphased`, `as_non_null`, `with_current`, and
//!    `in_context` (the context is current: no push);
//! 4. `memory/pool.rs`: `crate_pool`, the device's pool (made by the first call);
//! 5. `memory/staging/mod.rs`: `upload`, `wanted` (below the threshold: not staged);
//! 6. `synchronous/operation.rs`: `upload`, `begin`, `bounced`;
//! 7. `synchronous/sync_stream.rs`: `SyncStream::begin`, `slot`, `end`, the book's lock,
//!    `publish`;
//! 8. `synchronous/book.rs`: `find`, `wait_conflicting`, `needs_ring`, `take_slot`,
//!    `record`.
//!
//! Where another sync stream has writes pending, the check of each against this one adds
//! `span.rs` (`conflicts`). The first operation of a thread in a context also crosses
//! `synchronous/lifecycle.rs` (the sync stream and its ring made), `context/confined.rs`
//! (a partition's green stream) and `context/teardown.rs` (the hooks registered, the
//! counts published).

mod book;
mod lifecycle;
mod operation;
mod outside;
mod sync_stream;

pub(crate) use operation::{Access, Completion, Stage, download, run, upload};
pub(crate) use outside::{before_legacy_op, before_raw_escape, stream_after_writes};
pub(crate) use sync_stream::{is_settled, legacy_wait, prepare, wait_on_host};

// ---- for the crate's tests ----------------------------------------------------------------

/// What `cuda_brand::__order` exports (hidden): the bounce rings and the pending writes,
/// for the crate's GPU tests (the `test-hooks` feature). Not an API: it may change at any
/// time.
#[cfg(feature = "test-hooks")]
pub mod hidden {
    use std::sync::PoisonError;
    use std::sync::atomic::Ordering;

    use super::book::{Entry, Ring};
    use super::lifecycle::LIVE_RINGS;
    use super::sync_stream::{BOOK, event_done, thread_token};
    use crate::context::ContextGuard;
    use crate::span::{Span, Touched, conflicts};

    /// A sync stream's ring, as (host address, page-locked), if it has one.
    fn ring(e: &Entry<usize>) -> Option<(usize, bool)> {
        match &e.ring {
            Ring::Made(b) => Some((b.host, b.registered)),
            _ => None,
        }
    }

    /// How many bounce rings' memory is allocated, in every context.
    pub fn live_rings() -> u64 {
        LIVE_RINGS.load(Ordering::Relaxed)
    }

    /// The bounce ring of the calling thread's sync stream in `ctx`, as (host address,
    /// page-locked), if it has one.
    pub fn ring_of_this_thread(ctx: ContextGuard<'_>) -> Option<(usize, bool)> {
        let book = BOOK.lock().unwrap_or_else(PoisonError::into_inner);
        let i = book.find(ctx.raw() as usize, thread_token())?;
        ring(&book.entries[i])
    }

    /// The bounce rings of `ctx`'s sync streams, as (host address, page-locked).
    pub fn rings_of(ctx: ContextGuard<'_>) -> Vec<(usize, bool)> {
        let raw = ctx.raw() as usize;
        let book = BOOK.lock().unwrap_or_else(PoisonError::into_inner);
        let of_ctx = book.entries.iter().filter(|e| e.ctx == raw);
        of_ctx.filter_map(ring).collect()
    }

    /// The most page-locked rings one context has.
    pub const MAX_REGISTERED_RINGS: usize = super::lifecycle::MAX_REGISTERED_RINGS;

    /// How many sync streams have a pending write of the `bytes` at device address `start`
    /// whose latest record is not complete yet (`cuEventQuery`; the book is left as it is):
    /// a read of that memory queued now would have to wait for them.
    pub fn incomplete_writes_of(start: u64, bytes: u64) -> crate::error::Result<usize> {
        let read = [Span {
            start,
            bytes,
            write: false,
        }];
        let book = BOOK.lock().unwrap_or_else(PoisonError::into_inner);
        let mut incomplete = 0;
        for e in &book.entries {
            if e.pending
                .iter()
                .any(|a| conflicts(Touched::Spans(&read), a))
                && !event_done(e.event)?
            {
                incomplete += 1;
            }
        }
        Ok(incomplete)
    }
}
