//! The bounded wait under every deadline of the crate: what an overrun handler learns
//! ([`Overrun`]) and returns ([`KeepWaiting`]), and the polling with a deadline of a stream
//! or an event. The scopes with a deadline ([`Stream::scope_within`],
//! [`Stream::scope_all_within`]) and the rules of the wait are in
//! [`scope::deadline`](crate::scope::deadline).
//!
//! [`Stream::scope_within`]: crate::Stream::scope_within
//! [`Stream::scope_all_within`]: crate::Stream::scope_all_within

use std::fmt;
use std::time::{Duration, Instant};

use crate::error::Result;

/// What an overrun handler learns when a scope's deadline has passed with work still
/// running: how long the scope has been open, which deadline passed, how many times the
/// handler has been called, and which stream was still busy.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Overrun {
    elapsed: Duration,
    deadline: Duration,
    count: u64,
    stream: usize,
}

impl Overrun {
    /// Time since the scope was opened.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// The deadline that passed, counted from the opening of the scope: the scope's
    /// `within` for the first call, then each extension added to the time it was granted.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// How many times the handler has been called in this scope, this call included: 1
    /// the first time.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The index of the stream still busy, in the order the scope was given its streams
    /// (0 for [`Stream::scope_within`](crate::Stream::scope_within)).
    pub fn stream_index(&self) -> usize {
        self.stream
    }
}

impl fmt::Debug for Overrun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Overrun")
            .field("elapsed", &self.elapsed)
            .field("deadline", &self.deadline)
            .field("count", &self.count)
            .field("stream", &self.stream)
            .finish()
    }
}

/// What an overrun handler returns: how to go on waiting. No value of this type ends the
/// wait; a handler that must not wait any longer does not return (for example
/// `std::process::abort()`). See the [module documentation](crate::scope::deadline).
///
/// ```
/// use std::time::Duration;
/// use cuda_brand::{KeepWaiting, Overrun};
///
/// // wait in steps of 5 ms, up to 10 calls, then stop the process
/// fn on_overrun(overrun: Overrun) -> KeepWaiting {
///     eprintln!("scope overran: {:?} since it opened", overrun.elapsed());
///     if overrun.count() < 10 {
///         KeepWaiting::for_another(Duration::from_millis(5))
///     } else {
///         std::process::abort()
///     }
/// }
/// let abort_at_once = |_: Overrun| -> KeepWaiting { std::process::abort() };
/// # let _ = (on_overrun, abort_at_once);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "the handler returns how to go on waiting"]
pub struct KeepWaiting(Option<Duration>);

impl KeepWaiting {
    /// Wait up to `more` longer (from now), then call the handler again if the work is
    /// still running. A zero duration calls the handler again after one more poll.
    pub const fn for_another(more: Duration) -> Self {
        KeepWaiting(Some(more))
    }

    /// Wait for the work without another deadline: the handler is not called again.
    pub const fn until_idle() -> Self {
        KeepWaiting(None)
    }

    /// The extension, or `None` for [`until_idle`](Self::until_idle).
    pub const fn extension(self) -> Option<Duration> {
        self.0
    }
}

/// Polls `idle(i)` (is stream `i` idle?) for `i` in `0..streams`, calling `on_overrun`
/// whenever the deadline passes while one is busy, until every stream is idle (`Ok`), the
/// handler asks to wait without a deadline (`Ok`: the scope's end waits), or a query
/// fails (its error). A panic of the handler goes on: [`run_scope`] catches it, ends the
/// scope, and resumes it.
pub(crate) fn settle(
    idle: &dyn Fn(usize) -> Result<bool>,
    streams: usize,
    opened: Instant,
    within: Duration,
    on_overrun: &mut dyn FnMut(Overrun) -> KeepWaiting,
) -> Result<()> {
    let mut deadline = opened.checked_add(within);
    let mut count = 0u64;
    for i in 0..streams {
        while !poll_until(opened, deadline, || idle(i))? {
            let now = Instant::now();
            count = count.saturating_add(1);
            let overrun = Overrun {
                elapsed: now.saturating_duration_since(opened),
                deadline: deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(opened)),
                count,
                stream: i,
            };
            match on_overrun(overrun) {
                KeepWaiting(Some(more)) => deadline = now.checked_add(more),
                KeepWaiting(None) => return Ok(()),
            }
        }
    }
    Ok(())
}

/// Polls `done` until it reports `true` (`Ok(true)`), fails, or `deadline` passes
/// (`Ok(false)`; `None`: no deadline), with the schedule of the module documentation
/// ([`pause`]), counting the time waited from `since` (the opening of the scope, or the
/// call). The last poll is after the deadline's last pause.
pub(crate) fn poll_until(
    since: Instant,
    deadline: Option<Instant>,
    mut done: impl FnMut() -> Result<bool>,
) -> Result<bool> {
    let polled = poll_with(since, deadline, pause, || Ok(done()?.then_some(())))?;
    Ok(polled.is_some())
}

/// Calls `f` until it returns `Some` (that value), fails, or `deadline` passes (`None`; a
/// `None` deadline never passes). Between calls, `schedule(waited)` (the time since
/// `since`) says how long to sleep, never past the deadline; `None` yields the thread
/// instead. The polling loop of every bounded wait of the crate: this module's, with
/// [`pause`], and NCCL's background work, with a coarser schedule of its own.
pub(crate) fn poll_with<T>(
    since: Instant,
    deadline: Option<Instant>,
    schedule: fn(Duration) -> Option<Duration>,
    mut f: impl FnMut() -> Result<Option<T>>,
) -> Result<Option<T>> {
    loop {
        if let Some(value) = f()? {
            return Ok(Some(value));
        }
        let now = Instant::now();
        let left = match deadline {
            Some(d) => d.saturating_duration_since(now),
            None => Duration::MAX,
        };
        if left.is_zero() {
            return Ok(None);
        }
        match schedule(now.saturating_duration_since(since)) {
            None => std::thread::yield_now(),
            Some(pause) => std::thread::sleep(pause.min(left)),
        }
    }
}

/// The pause between two polls after `waited`: a hundredth of it, at most 200 µs, so the
/// work is seen done at most about 1 % of its time late; `None` (yield the thread instead)
/// where that is under 60 µs, which a sleep would overshoot (Linux's timer slack is about
/// 50 µs), that is for the first 6 ms.
fn pause(waited: Duration) -> Option<Duration> {
    const SHORTEST_SLEEP: Duration = Duration::from_micros(60);
    const LONGEST_SLEEP: Duration = Duration::from_micros(200);
    let pause = (waited / 100).min(LONGEST_SLEEP);
    (pause >= SHORTEST_SLEEP).then_some(pause)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, ErrorCode};
    use std::cell::Cell;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_event_wait_says_not_yet_or_done() {
        let now = Instant::now;
        let soon = now().checked_add(MS);
        assert!(!poll_until(now(), soon, || Ok(false)).unwrap());
        let polls = Cell::new(0);
        let later = now().checked_add(Duration::from_secs(60));
        let done = poll_until(now(), later, || {
            polls.set(polls.get() + 1);
            Ok(polls.get() == 3)
        });
        assert!(done.unwrap());
        assert!(poll_until(now(), None, || Ok(true)).unwrap());
        // a deadline already past still polls once
        assert!(poll_until(now(), Some(now()), || Ok(true)).unwrap());
        let e = poll_until(now(), None, || {
            Err(Error::new("cuEventQuery", ErrorCode::InvalidHandle))
        });
        assert_eq!(e.unwrap_err().code(), ErrorCode::InvalidHandle);
    }

    #[test]
    fn the_pause_is_a_yield_for_6_ms_then_a_hundredth_of_the_wait_up_to_200_us() {
        let us = Duration::from_micros;
        assert_eq!(pause(Duration::ZERO), None);
        assert_eq!(pause(us(5_999)), None);
        assert_eq!(pause(us(6_000)), Some(us(60)));
        assert_eq!(pause(us(10_000)), Some(us(100)));
        assert_eq!(pause(us(20_000)), Some(us(200)));
        assert_eq!(pause(Duration::from_secs(10)), Some(us(200)));
        // never more than 1 % of the time waited
        for waited in (0..100_000).step_by(997).map(us) {
            assert!(
                pause(waited).is_none_or(|p| p * 100 <= waited),
                "{waited:?}"
            );
        }
    }
}
