//! The memory an operation touches: spans of device memory ([`Span`]), or anything
//! ([`Touched::Anything`]). A leaf every layer may use: it names nothing of the crate. When
//! two accesses conflict, and what queued work must wait for, is the tracker's
//! (`crate::tracker`); the checks that build errors from spans (lengths, extents, overlaps)
//! are the memory layer's (`memory/extent.rs`).

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
