//! The memory an operation touches: spans of device memory ([`Span`]), or anything
//! ([`Touched::Anything`]), and the pure checks on them: when two accesses conflict
//! ([`conflicts`]), the first pair of one operation's arguments that overlap
//! ([`first_overlap`]). A leaf every layer may use: it names nothing of the crate. The
//! checks that build errors from them (lengths, extents, overlaps) are the memory layer's
//! (`memory/extent.rs`).

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
    /// ([`Touched::Anything`]).
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

/// What an operation touches: for the order of synchronous operations
/// (`crate::synchronous`), and for a scope's waits for them.
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
pub(crate) fn conflicts(reader: Touched<'_>, access: &Span) -> bool {
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

/// The first pair of spans `(i, j)`, `i < j`, where at least one is written and the two
/// share memory.
#[inline]
pub(crate) fn first_overlap(spans: &[Span]) -> Option<(usize, usize)> {
    for i in 0..spans.len() {
        for j in i + 1..spans.len() {
            if (spans[i].write || spans[j].write) && spans[i].overlaps(&spans[j]) {
                return Some((i, j));
            }
        }
    }
    None
}
