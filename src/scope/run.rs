//! Opening a scope and ending it: [`Stream::scope`], [`Stream::scope_pair`],
//! [`Stream::scope_all`] and their `_and_teardown` forms, and [`run_scope`], the one function every
//! scope form ends in (see [what the end of a scope guarantees][end]).
//!
//! [end]: super#what-the-end-of-a-scope-guarantees

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};

use super::StreamScope;
use super::lanes::Lanes;
use crate::context::{StreamKind, teardown};
use crate::driver;
use crate::error::{Error, Result};
use crate::stream::Stream;

impl<'ctx, K: StreamKind> Stream<'ctx, K> {
    /// Opens a scope for asynchronous work on this stream, runs `f` with it, then
    /// synchronizes the stream (also if `f` panics, while the panic unwinds) before
    /// returning. See the [`scope` module](crate::scope) for why this makes asynchronous
    /// work sound.
    ///
    /// A failure of the final synchronization (for example an illegal address in a kernel)
    /// becomes `E::from(error)` when `f` returned `Ok`; when `f` returned an `Err` of this
    /// crate's [`Error`], it is attached to that error as its
    /// [`teardown_error`](crate::Error::teardown_error) (for other error types,
    /// [`scope_and_teardown`](Stream::scope_and_teardown) returns both). A panic of a host
    /// function queued in the scope ([`StreamScope::host_fn`]) is resumed after the
    /// synchronization, as by every scope form.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let stream = ctx.new_stream()?;
    ///     let host = ctx.pinned_from_slice(&[1.0f32; 1024])?;
    ///     let mut device_copy = ctx.zeroed::<f32>(1024)?;
    ///     let mut back = vec![0.0f32; 1024];
    ///     stream.scope(|s| {
    ///         let d = s.bind_mut(&mut device_copy);
    ///         s.copy_from_host(d, &host)?;
    ///         s.copy_to_host(&mut back, d.into_ref())
    ///     })?; // synchronized here: `back` is complete, `host` and `device_copy` free again
    ///     assert_eq!(back, vec![1.0; 1024]);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn scope<'env, R, E, F>(&'env self, f: F) -> Result<R, E>
    where
        F: for<'scope> FnOnce(&'scope StreamScope<'scope, 'env, 'ctx, K>) -> Result<R, E>,
        E: From<Error>,
    {
        let scope = StreamScope::open(self, None)?;
        let scopes = OpenScopes {
            scopes: std::slice::from_ref(&scope),
            lanes: None,
        };
        run_scope(&scopes, None, || f(&scope))
    }

    /// One scope over two streams: [`Stream::scope_all`] for `[self, other]`, with the two
    /// scopes handed to the closure separately. Views bound on one stream may be used on
    /// the other; the crate orders the two streams where they touch the same memory.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let (a, b) = (ctx.new_stream()?, ctx.new_stream()?);
    ///     let mut buf = ctx.zeroed::<u32>(1 << 20)?;
    ///     let mut host = vec![0u32; 1 << 20];
    ///     a.scope_pair(&b, |sa, sb| {
    ///         let d = sa.bind_mut(&mut buf);
    ///         sa.fill(d, 7)?;
    ///         sb.copy_to_host(&mut host, d.into_ref()) // b waits for a's fill: the crate orders it
    ///     })?;
    ///     assert!(host.iter().all(|&x| x == 7));
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn scope_pair<'env, R, E, F>(&'env self, other: &'env Stream<'ctx, K>, f: F) -> Result<R, E>
    where
        F: for<'scope> FnOnce(
            &'scope StreamScope<'scope, 'env, 'ctx, K>,
            &'scope StreamScope<'scope, 'env, 'ctx, K>,
        ) -> Result<R, E>,
        E: From<Error>,
    {
        Stream::scope_all(&[self, other], |s| f(&s[0], &s[1]))
    }

    /// Opens one scope over all of `streams`, runs `f` with one [`StreamScope`] per stream
    /// (in the order given), then synchronizes every stream before returning (also on a
    /// panic). The scopes share one `'scope`, so memory bound or allocated on one stream
    /// may be used on the others; the crate orders the streams wherever they touch the
    /// same bound memory (see the [module documentation](crate::scope)), and work on
    /// different memory runs concurrently.
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let streams = [ctx.new_stream()?, ctx.new_stream()?, ctx.new_stream()?, ctx.new_stream()?];
    ///     let host: Vec<f32> = (0..1 << 20).map(|i| i as f32).collect();
    ///     let mut dev = ctx.zeroed::<f32>(host.len())?;
    ///     let mut back = vec![0.0f32; host.len()];
    ///     Stream::scope_all(&streams.each_ref(), |lanes| {
    ///         // four chunks, each uploaded and downloaded on its own stream, overlapping
    ///         let d = lanes[0].bind_mut(&mut dev);
    ///         let chunk = host.len() / 4;
    ///         for (i, (src, dst)) in host.chunks(chunk).zip(back.chunks_mut(chunk)).enumerate() {
    ///             let part = d.slice(i * chunk..(i + 1) * chunk);
    ///             lanes[i].copy_from_host(part, src)?;
    ///             lanes[i].copy_to_host(dst, part.into_ref())?;
    ///         }
    ///         Ok(())
    ///     })?;
    ///     assert_eq!(back, host);
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn scope_all<'env, R, E, F>(streams: &[&'env Stream<'ctx, K>], f: F) -> Result<R, E>
    where
        F: for<'scope> FnOnce(&'scope [StreamScope<'scope, 'env, 'ctx, K>]) -> Result<R, E>,
        E: From<Error>,
    {
        let lanes = Lanes::new(streams.iter().map(|s| s.raw()));
        let scopes: Vec<StreamScope<'_, 'env, 'ctx, K>> = streams
            .iter()
            .enumerate()
            .map(|(i, s)| StreamScope::open(s, Some((&lanes, i))))
            .collect::<Result<_>>()?;
        let open = OpenScopes {
            scopes: &scopes,
            lanes: Some(&lanes),
        };
        run_scope(&open, None, || f(&scopes))
    }
}

impl<'ctx> Stream<'ctx> {
    /// [`scope`](Stream::scope) for any error type: returns the closure's error and the
    /// final synchronization's (or free's) together when both fail, in a
    /// [`WithTeardown`](crate::WithTeardown). (The plain [`scope`](Stream::scope) keeps both
    /// only when the closure's error type is [`Error`].)
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let stream = ctx.new_stream()?;
    ///     let mut buf = ctx.zeroed::<u32>(1024)?;
    ///     let wanted = 1024;
    ///     let done = stream.scope_and_teardown(|s| {
    ///         s.fill(&mut buf, 7)?;
    ///         anyhow::ensure!(wanted <= 1024, "a step of my own that can fail");
    ///         Ok(())
    ///     });
    ///     if let Err(failed) = done {
    ///         eprintln!("{failed}"); // the closure's error, then the synchronization's
    ///     }
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn scope_and_teardown<'env, R, E, F>(
        &'env self,
        f: F,
    ) -> Result<R, crate::error::WithTeardown<E>>
    where
        F: for<'scope> FnOnce(&'scope StreamScope<'scope, 'env, 'ctx>) -> Result<R, E>,
        E: From<Error>,
    {
        let mut outcome = None;
        let torn_down = self.scope(|s| {
            outcome = Some(f(s));
            Ok(())
        });
        crate::error::WithTeardown::settle("Stream::scope_and_teardown", outcome, torn_down)
    }

    /// [`scope_pair`](Stream::scope_pair) for any error type, returning both errors (see
    /// [`scope_and_teardown`](Stream::scope_and_teardown)).
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let (a, b) = (ctx.new_stream()?, ctx.new_stream()?);
    ///     let mut buf = ctx.zeroed::<u32>(1024)?;
    ///     let mut host = vec![0u32; 1024];
    ///     a.scope_pair_and_teardown(&b, |sa, sb| {
    ///         let d = sa.bind_mut(&mut buf);
    ///         sa.fill(d, 7)?;
    ///         Ok::<_, anyhow::Error>(sb.copy_to_host(&mut host, d.into_ref())?)
    ///     })
    ///     .map_err(|failed| cuda_brand::Error::with_detail("my step", cuda_brand::ErrorCode::Unknown, failed.to_string()))?;
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn scope_pair_and_teardown<'env, R, E, F>(
        &'env self,
        other: &'env Stream<'ctx>,
        f: F,
    ) -> Result<R, crate::error::WithTeardown<E>>
    where
        F: for<'scope> FnOnce(
            &'scope StreamScope<'scope, 'env, 'ctx>,
            &'scope StreamScope<'scope, 'env, 'ctx>,
        ) -> Result<R, E>,
        E: From<Error>,
    {
        Stream::scope_all_and_teardown(&[self, other], |s| f(&s[0], &s[1]))
    }

    /// [`scope_all`](Stream::scope_all) for any error type, returning both errors (see
    /// [`scope_and_teardown`](Stream::scope_and_teardown)).
    ///
    /// ```no_run
    /// use cuda_brand::prelude::*;
    /// # fn main() -> cuda_brand::Result<()> {
    /// let device = Device::get(0)?;
    /// with_context(&device, ContextFlags::default(), |ctx| {
    ///     let streams = [ctx.new_stream()?, ctx.new_stream()?];
    ///     let mut buf = ctx.zeroed::<u32>(1024)?;
    ///     let done = Stream::scope_all_and_teardown(&streams.each_ref(), |lanes| {
    ///         let d = lanes[0].bind_mut(&mut buf);
    ///         lanes[0].fill(d.slice(..512), 1)?;
    ///         lanes[1].fill(d.slice(512..), 2)?;
    ///         Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    ///     });
    ///     assert!(done.is_ok());
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn scope_all_and_teardown<'env, R, E, F>(
        streams: &[&'env Stream<'ctx>],
        f: F,
    ) -> Result<R, crate::error::WithTeardown<E>>
    where
        F: for<'scope> FnOnce(&'scope [StreamScope<'scope, 'env, 'ctx>]) -> Result<R, E>,
        E: From<Error>,
    {
        let mut outcome = None;
        let torn_down = Stream::scope_all(streams, |s| {
            outcome = Some(f(s));
            Ok(())
        });
        crate::error::WithTeardown::settle("Stream::scope_all_and_teardown", outcome, torn_down)
    }
}

/// Waits for every scope's stream, then frees the scopes' allocations (all streams first:
/// an allocation of one stream may be used by another's). Returns the first error, with
/// the later ones chained on it ([`Error::teardown_errors`]).
pub(crate) fn end_scopes<K: StreamKind>(scopes: &[StreamScope<'_, '_, '_, K>]) -> Result<()> {
    let mut finished = Ok(());
    for scope in scopes {
        // SAFETY: the stream is alive: the scope borrows it.
        let idle = unsafe { driver::stream_wait_idle(scope.stream.raw()) };
        finished = teardown::keep_both(finished, idle);
    }
    let synchronized = finished.is_ok();
    for scope in scopes {
        scope.host_fns.finish();
    }
    for scope in scopes {
        finished = teardown::keep_both(finished, scope.free_allocations(synchronized));
    }
    finished
}

impl<K: StreamKind> StreamScope<'_, '_, '_, K> {
    /// Ends a scope of one stream whose work an event recorded after it has already been
    /// waited for (`waited`: that wait's result), without waiting for the stream, whose
    /// later work belongs to others: the owning layer's awaited scopes. After an error it
    /// confirms with `cuStreamQuery` that the stream is not busy (the rule of
    /// [`driver::stream_wait_idle`]) before anything is released. Then finishes the host
    /// functions and frees what the scope allocated, as [`end_scopes`] does. Returns the
    /// first error.
    pub(crate) fn end_after_wait(&self, waited: Result<()>) -> Result<()> {
        if waited.is_err() {
            // SAFETY: the stream is alive: the scope borrows it.
            while let Ok(false) = unsafe { driver::stream_query(self.stream.raw()) } {
                std::thread::yield_now();
            }
        }
        let synchronized = waited.is_ok();
        self.host_fns.finish();
        teardown::keep_both(waited, self.free_allocations(synchronized))
    }

    /// The first panic of the scope's host functions, once the scope has ended.
    pub(crate) fn take_host_panic(&self) -> Option<Payload> {
        self.host_fns.take_panic()
    }
}

/// A panic's payload, as [`std::panic::catch_unwind`] returns it.
pub(crate) type Payload = Box<dyn Any + Send>;

/// The end of a scope, as [`run_scope`] drives it: its streams and host functions
/// ([`OpenScopes`]), or a stand-in in the unit tests.
pub(crate) trait ScopeEnd {
    /// Waits for every stream of the scope without a deadline, finishes its host functions
    /// and frees what it allocated: the first error, with the later ones attached.
    fn end(&self) -> Result<()>;

    /// The first panic of the scope's host functions, once [`end`](ScopeEnd::end) has
    /// run (in the order of the scope's streams); the others are forgotten.
    fn take_host_panic(&self) -> Option<Payload>;
}

/// The streams of one open scope: one, or several sharing an lane record.
pub(crate) struct OpenScopes<'a, 'scope, 'env: 'scope, 'ctx, K: StreamKind> {
    pub(crate) scopes: &'a [StreamScope<'scope, 'env, 'ctx, K>],
    pub(crate) lanes: Option<&'a Lanes>,
}

impl<K: StreamKind> ScopeEnd for OpenScopes<'_, '_, '_, '_, K> {
    fn end(&self) -> Result<()> {
        let ended = end_scopes(self.scopes);
        match self.lanes {
            Some(lanes) => teardown::keep_both(ended, lanes.destroy_events()),
            None => ended,
        }
    }

    fn take_host_panic(&self) -> Option<Payload> {
        let mut first = None;
        for scope in self.scopes {
            if let Some(payload) = scope.host_fns.take_panic() {
                match first {
                    None => first = Some(payload),
                    // dropping a payload runs its code, which may panic: never here
                    Some(_) => std::mem::forget(payload),
                }
            }
        }
        first
    }
}

/// Runs a scope's closure (`body`), then ends the scope: the one way every scope form
/// finishes ([`Stream::scope`] and [`Stream::scope_all`], and so `scope_pair` and the
/// `_and_teardown` forms built on them; [`Stream::scope_within`] and
/// [`Stream::scope_all_within`], which pass their bounded wait as `wait_first`).
///
/// On every path, also while a panic of `body` unwinds (then from a drop guard, which no
/// user code can `mem::forget`): `wait_first` runs, its panic caught, then
/// [`ScopeEnd::end`] waits for every stream without a deadline, whatever `wait_first`
/// did. Only then does the scope return, with the first of these:
///
/// 1. a panic of `body`, which goes on (the other panics are forgotten, errors dropped);
/// 2. a panic of `wait_first` (a deadline scope's overrun handler), resumed;
/// 3. a panic of a host function of the scope ([`ScopeEnd::take_host_panic`]), resumed;
/// 4. `body`'s error, with the teardown's attached when it is an [`Error`]
///    ([`teardown::combine`]);
/// 5. the error of `wait_first` or of the end, as `E::from(error)`;
/// 6. `body`'s value.
pub(crate) fn run_scope<R, E: From<Error>>(
    ending: &impl ScopeEnd,
    mut wait_first: Option<&mut dyn FnMut() -> Result<()>>,
    body: impl FnOnce() -> Result<R, E>,
) -> Result<R, E> {
    let mut finish = || -> (Result<()>, Option<Payload>) {
        let waited = match wait_first.as_deref_mut() {
            None => Ok(Ok(())),
            Some(wait) => panic::catch_unwind(AssertUnwindSafe(wait)),
        };
        // Whatever the wait did: every stream is waited for here, before any borrow of the
        // scope is released.
        let ended = ending.end();
        let host_panic = ending.take_host_panic();
        match waited {
            Ok(waited) => (teardown::keep_both(waited, ended), host_panic),
            Err(payload) => {
                if let Some(host_panic) = host_panic {
                    std::mem::forget(host_panic);
                }
                (ended, Some(payload))
            }
        }
    };
    struct OnUnwind<'a, F: FnMut() -> (Result<()>, Option<Payload>)>(&'a mut F);
    impl<F: FnMut() -> (Result<()>, Option<Payload>)> Drop for OnUnwind<'_, F> {
        fn drop(&mut self) {
            // `body`'s panic goes on: a second one would abort, and dropping a payload
            // may panic, so the others are forgotten
            if let (_, Some(payload)) = (self.0)() {
                std::mem::forget(payload);
            }
        }
    }
    let on_unwind = OnUnwind(&mut finish);
    let outcome = body();
    std::mem::forget(on_unwind);
    let (torn_down, panicked) = finish();
    if let Some(payload) = panicked {
        panic::resume_unwind(payload);
    }
    teardown::combine(outcome, torn_down)
}
