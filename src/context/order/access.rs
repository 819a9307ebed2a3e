//! What an operation touches, for the order of synchronous operations: its spans of device
//! memory ([`Span`]), or anything ([`Touched::Anything`]), and when two accesses conflict.

/// The memory one argument touches: `bytes` at `start`, written or only read. Scalars
/// touch none (`bytes == 0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub(crate) start: u64,
    pub(crate) bytes: u64,
    pub(crate) write: bool,
}

impl Span {
    pub(crate) const NONE: Span = Span {
        start: 0,
        bytes: 0,
        write: false,
    };

    /// Every address, written: what an operation on memory the crate cannot place touches
    /// (`context::order::Touched::Anything`).
    pub(crate) const ALL: Span = Span {
        start: 0,
        bytes: u64::MAX,
        write: true,
    };

    #[inline(always)]
    pub(crate) fn overlaps(&self, other: &Span) -> bool {
        self.bytes != 0
            && other.bytes != 0
            && self.start < other.start.wrapping_add(other.bytes)
            && other.start < self.start.wrapping_add(self.bytes)
    }
}

/// Adds `access` to a sync stream's pending accesses, unless one of them covers it already
/// (the same memory, written if `access` writes it): repeated writes of one buffer keep
/// one entry.
pub(super) fn add_access(pending: &mut Vec<Span>, access: Span) {
    let end = |s: &Span| s.start as u128 + s.bytes as u128;
    let covers =
        |p: &Span| (p.write || !access.write) && p.start <= access.start && end(&access) <= end(p);
    if !pending.iter().any(covers) {
        pending.push(access);
    }
}

/// What an operation touches, for the order of synchronous operations.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Touched<'a> {
    /// These spans (memory the crate can place: its own buffers, memory of a pool).
    Spans(&'a [Span]),
    /// Memory the crate cannot place, or an operation whose memory it does not know (a
    /// graph launch, a module global written synchronously, which any kernel of the module
    /// may read): it conflicts with every access.
    Anything,
}

impl<'a> Touched<'a> {
    /// `Spans(spans)` for memory the crate can place (`placed`: its own buffers, memory of
    /// a pool), else `Anything`.
    pub(crate) fn placed(placed: bool, spans: &'a [Span]) -> Self {
        match placed {
            true => Touched::Spans(spans),
            false => Touched::Anything,
        }
    }

    /// `Spans(spans)`, or `Anything` for an empty list (an operation that names no
    /// memory: its memory is not known).
    pub(crate) fn named(spans: &'a [Span]) -> Self {
        match spans.is_empty() {
            true => Touched::Anything,
            false => Touched::Spans(spans),
        }
    }
}

/// Whether work touching `reader` must be ordered after a pending `access`: they share
/// memory and one of them writes it, or either is [`Touched::Anything`].
pub(super) fn conflicts(reader: Touched<'_>, access: &Span) -> bool {
    if *access == Span::ALL {
        return true;
    }
    match reader {
        Touched::Anything => true,
        Touched::Spans(spans) => spans
            .iter()
            .any(|r| (r.write || access.write) && r.overlaps(access)),
    }
}
