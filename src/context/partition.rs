//! SM partitions ([`with_partitions`]): freedom from interference between workloads that
//! share one GPU, by giving each a disjoint set of SMs (the driver's green contexts, CUDA
//! 12.4 and 12.5).
//!
//! A latency-critical kernel queued behind a kernel that fills every SM waits until SMs
//! free up: on an H100, 500 ms behind a 0.5 s kernel of 1,056 blocks, against about 10 µs
//! in a partition of its own (the guide's chapter 14 and `BENCHMARKS.md` have the numbers). Green
//! contexts give each workload its own SMs, but the driver reserves nothing: a green
//! context "does not reserve its SMs against other contexts", so isolation holds only if
//! *every* piece of work goes through a partition, and only between partitions that are
//! disjoint. Those two conditions are what the types here keep.
//!
//! ```no_run
//! use cuda_brand::prelude::*;
//! use cuda_brand::with_partitions;
//! # fn main() -> cuda_brand::Result<()> {
//! let device = Device::get(0)?;
//! let ptx = include_str!("../../kernels/kernels.ptx");
//! with_partitions(&device, |sms| {
//!     // the split: 16 SMs for the latency-critical work, the rest (116 on an H100) for
//!     // the bulk; consumes `sms`, so nothing later can split the device again
//!     let (critical, bulk) = sms.split(16)?;
//!     bulk.enter(|a| {
//!         critical.enter(|b| {
//!             // each partition loads its own module; its streams run on its SMs only
//!             let (spin_a, spin_b) = (a.module_from_ptx(ptx)?, b.module_from_ptx(ptx)?);
//!             // SAFETY: spin(long long cycles) touches no memory.
//!             let spin_a = unsafe { spin_a.kernel::<(i64,)>("spin") }?;
//!             // SAFETY: as above.
//!             let spin_b = unsafe { spin_b.kernel::<(i64,)>("spin") }?;
//!             let (sa, sb) = (a.new_stream()?, b.new_stream()?);
//!             sa.scope(|s| s.launch(&spin_a, LaunchConfig::linear(1056, 256), (1_000_000_000,)))?;
//!             // runs at once on partition B's SMs, whatever A's kernel does
//!             sb.scope(|s| s.launch(&spin_b, LaunchConfig::linear(8, 256), (1_000,)))?;
//!             Ok(())
//!         })
//!     })
//! })
//! # }
//! ```
//!
//! # What the types promise
//!
//! * **Disjoint by construction.** The device's SMs come to the closure as one [`Sms`]
//!   value, which is not `Clone` and which the split ([`Sms::split`],
//!   [`Sms::split_groups`]) consumes: its parts ([`SmGroup`]) are disjoint (the driver's
//!   promise for `cuDevSmResourceSplitByCount`; the crate also checks that their sizes add
//!   up to the device's). A part becomes a partition by [`SmGroup::enter`], which consumes
//!   it: no two partitions share a part (`ui-tests/fail/11_partitions/`). The split is the
//!   setup step of the closure: once `Sms` is consumed, nothing in the closure can split
//!   again, and a second split of the same device, by a nested or concurrent
//!   `with_partitions`, is refused at run time (the types cannot see other closures).
//! * **A brand per partition.** Each [`SmGroup::enter`] hands its closure a
//!   [`PartitionGuard<'p>`](PartitionGuard) (`ContextGuard<'p, Unphased, Partitioned>`:
//!   the phase marker and the part marker are independent) with a fresh brand `'p`. What it makes (buffers,
//!   streams, events, modules, kernels, pools) carries `'p`: one partition's kernel,
//!   buffer or event on another partition's stream is a compile error, and nothing of a
//!   partition outlives it.
//! * **A partition is used on its thread only.** The driver lets a green context be
//!   current on one thread at a time, "with no internal synchronization" for calls from
//!   several. A partition's guard stays on its thread; its streams, buffers, events,
//!   modules and functions are `Send` and `Sync` like any context's, but on another thread
//!   (a scoped thread spawned in the partition's closure) every call of them that would
//!   reach the driver is refused with
//!   [`ErrorCode::NotPermitted`]: a scope on a partition's
//!   stream, the stream's and an event's methods, a function's attributes and
//!   declarations, a module's lookups, a managed buffer's advice, and an operation that
//!   would make the partition's context current (a synchronous copy or fill of its
//!   memory). Dropped there, such a
//!   value is released by the partition's own thread when the partition ends (before its
//!   synchronization), so nothing leaks. Give each thread a partition of its own: a part
//!   ([`SmGroup`]) is `Send` and may be entered on a scoped thread. Each check is one
//!   atomic load while no partition lives.
//! * **Phases in a partition.** [`SmGroup::enter_phases`] enters a part as
//!   [`with_phases`](crate::with_phases) enters a context: a setup guard
//!   (`ContextGuard<'p, Setup<'s>, Partitioned>`) that allocates, then a run guard
//!   (`ContextGuard<'p, Run, Partitioned>`) that cannot; the partition's teardown frees
//!   the setup memory before its synchronization.
//! * **Every stream is the partition's.** A partition's guard creates its streams with
//!   `cuGreenCtxStreamCreate`, the driver's one documented way to a stream whose work runs
//!   on the green context's SMs; `new_stream()` and `Stream::new` do this for it.
//! * **No work outside the partitions.** Inside `with_partitions` no plain guard of the
//!   device exists: the closure gets SMs, not a context, and a partition's guard is not a
//!   plain guard (a function that takes `ContextGuard<'ctx>` cannot be given it). Every
//!   operation whose streams the crate makes takes it and makes them the partition's:
//!   allocation, loading (modules, [`Library::kernel`](crate::Library::kernel), NVRTC),
//!   streams and events, graph capture (the capture's stream is the partition's, and a
//!   graph branded `'p` is launched on the partition's streams only). The operations whose
//!   work or effect would reach beyond the partition are bounded by [`Unpartitioned`],
//!   which [`Partitioned`] is not (that trait's error, `ui-tests/fail/11_partitions/`):
//!   [`ContextGuard::share`](crate::ContextGuard::share) (a green context is current on
//!   one thread), peer access (it would join two partitions' memory), NCCL and the cuBLAS,
//!   cuFFT and cuRAND handles (their streams and kernels are the libraries' own). What the
//!   types cannot see is refused at run time on
//!   the thread of the closure and of every partition: `with_partitions` itself, and
//!   [`SmGroup::enter`] on a thread outside every partition, while another context is
//!   current (the closure could capture that context's guard), and
//!   inside it every other way into a context (`with_context` and its forms,
//!   `with_raw_context`, [`SharedContext::enter`](crate::SharedContext::enter), the owning
//!   layer's `enter`) with [`ErrorCode::NotPermitted`].
//!   The same ways into a context *of the partitioned device* are refused on every other
//!   thread of the process while the closure runs (a scoped thread spawned inside it, a
//!   thread of a pool holding an owned context), and so is the device's primary context,
//!   which a synchronous operation on memory tied to no context (a partition's buffer, of
//!   a pool) takes on a thread with no context current: one atomic load while no device
//!   is partitioned.
//!
//! # Per partition, and shared
//!
//! | | in the driver | in the crate's types |
//! |---|---|---|
//! | SMs | the partition's own | the partition's own |
//! | streams | the green context's (`cuGreenCtxStreamCreate`) | branded `'p` |
//! | modules, kernels | loaded with the partition's context current; the driver treats its `CUcontext` form as the primary context for what does not depend on SMs | branded `'p`: another partition's kernel is a compile error |
//! | device memory | device-wide (one address space, the primary context's) | branded `'p`: passing it to another partition is a compile error, because the two partitions' streams are not ordered by anything the crate can see (`SOUNDNESS.md`, "SM partitions", "A brand per partition"); copy through the host |
//! | events | per context | branded `'p` |
//! | limits, cache configuration | the primary context's, so one partition's `set_limit` changes them for all | not separated: set them before the split |
//! | memory bandwidth, L2 cache, copy engines, PCIe/NVLink | shared by all | shared by all |
//!
//! # What the partitions do not promise
//!
//! * **Memory bandwidth and the L2 cache are shared.** A partition that streams memory
//!   slows one that reads it; the isolation is of SMs (compute and the SM's own caches),
//!   not of the memory system. The copy engines are shared too.
//! * **Only work through partitions is isolated.** Other processes can still queue work on
//!   any SM (the driver reserves nothing): keep the device's other users out (MPS, or one
//!   process per GPU). In this process, a context of the device that another thread had
//!   entered *before* `with_partitions` began is not seen (the crate keeps no count of
//!   entered contexts): its closure's work runs on any SM until it returns. Partition the
//!   device before other threads use it, or when they have left their closures.
//! * **The remainder has weaker guarantees.** The driver documents that the rest of a
//!   split "does not have the same functional or performance guarantees" as the parts
//!   (co-scheduling of its SMs for clusters); it is still disjoint from them.
//! * **Teardown.** Leaving a partition synchronizes its context (`cuCtxSynchronize` of
//!   the green context's `CUcontext` form), as leaving [`with_context`](crate::with_context) does.
//!
//! Green contexts need a CUDA 12.4 driver (R550) and, for their streams, 12.5 (R555):
//! on an older driver [`with_partitions`] fails with
//! [`ErrorCode::DriverTooOld`] naming the first entry
//! point it lacks and the version that has it; on a device without green contexts, with
//! the driver's error and the device's name and compute capability.
//!
//! # The mechanism
//!
//! This file holds:
//!
//! * the split: [`Sms`] is the one splittable value of a partitioned closure and is
//!   consumed by the split, whose parts ([`SmGroup`]) the driver guarantees disjoint; each
//!   part is consumed by [`SmGroup::enter`], so no two partitions share an SM;
//! * the brands: `'d` for the closure of [`with_partitions`] (nothing of the split leaves
//!   it), `'p` for each partition, fresh per [`SmGroup::enter`];
//! * the entry into a part and its end (the green context made, pushed, synchronized,
//!   destroyed), and the split's limits.
//!
//! The run-time guards the types cannot give (the devices being partitioned, the refusals
//! inside a partitioned closure and on its device, which thread entered each partition,
//! what its values may do on other threads) are in `confined.rs`, which the other ways
//! into a context check without naming this file.

use std::marker::PhantomData;
use std::ptr::NonNull;

use cuda_driver_sys::CUctx_st;

use super::confined::{ENTERED, OWNERS, claim, entered, refuse_inside, thread_token, unclaim};
use super::enter::{pop_exact, run_then};
#[doc(inline)]
pub use super::part::{Part, Partitioned, Unpartitioned, Whole};
use super::{Brand, ComputeCapability, ContextGuard, Device, Unphased, teardown};
use crate::driver::{self, CUcontext, CUdevResource, CUdevice, CUgreenCtx};
use crate::error::{Error, ErrorCode, Invalid, Result};

/// A partition's guard: `ContextGuard<'p, Unphased, Partitioned>`, a guard without phases
/// ([`Unphased`]) on the part [`Partitioned`].
pub type PartitionGuard<'p> = ContextGuard<'p, Unphased, Partitioned>;

/// What a split of a device's SMs must respect: how many there are, the smallest part and
/// the multiple each part's size is rounded up to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SmLimits {
    pub(crate) total: u32,
    pub(crate) min: u32,
    pub(crate) alignment: u32,
}

impl SmLimits {
    /// The limits of an SM resource: from its own fields (`minSmPartitionSize`,
    /// `smCoscheduledAlignment`) on a driver of CUDA 13.0 or newer, which fills them;
    /// otherwise by the rule `cuda.h` 12.4 to 12.9 states for `cuDevSmResourceSplitByCount`
    /// ([`SmLimits::documented`]).
    pub(crate) fn of(resource: &CUdevResource, driver: i32, cc: ComputeCapability) -> Self {
        let total = resource.sm.smCount;
        let (min, alignment) = (
            resource.sm.minSmPartitionSize,
            resource.sm.smCoscheduledAlignment,
        );
        if driver >= 13000 && min > 0 && alignment > 0 {
            SmLimits {
                total,
                min,
                alignment,
            }
        } else {
            SmLimits::documented(total, cc)
        }
    }

    /// The rule of `cuDevSmResourceSplitByCount` in `cuda.h` 12.4 to 12.9: "On Compute
    /// Architecture 6.X: The minimum count is 1 SM. On Compute Architecture 7.X: The
    /// minimum count is 2 SMs and must be a multiple of 2. On Compute Architecture 8.X: The
    /// minimum count is 4 SMs and must be a multiple of 2. On Compute Architecture 9.0+:
    /// The minimum count is 8 SMs and must be a multiple of 8."
    pub(crate) fn documented(total: u32, cc: ComputeCapability) -> Self {
        let (min, alignment) = match cc.major {
            0..=6 => (1, 1),
            7 => (2, 2),
            8 => (4, 2),
            _ => (8, 8),
        };
        SmLimits {
            total,
            min,
            alignment,
        }
    }

    /// The size of each of `groups` parts of at least `count` SMs, as the driver rounds
    /// it (up to the minimum, then to a multiple of the alignment), or an error naming the
    /// numbers when the device cannot give that many, before any driver call.
    pub(crate) fn part(&self, count: u32, groups: u32) -> Result<u32> {
        let fail = |why: String| Err(Error::invalid_input("Sms::split", Invalid::argument(why)));
        if count == 0 {
            return fail("a partition of 0 SMs: ask for 1 or more".to_owned());
        }
        if groups == 0 {
            return fail("0 partitions asked for: ask for 1 or more".to_owned());
        }
        let at_least = count.max(self.min);
        let size = at_least
            .div_ceil(self.alignment)
            .saturating_mul(self.alignment);
        let needed = size.saturating_mul(groups);
        if needed > self.total {
            let each = if groups == 1 {
                String::new()
            } else {
                format!("{groups} partitions of ")
            };
            return fail(format!(
                "{each}{count} SMs, rounded to {size} (partitions on this device have at least \
                 {} SMs, a multiple of {}), need {needed} SMs; the device has {}",
                self.min, self.alignment, self.total
            ));
        }
        Ok(size)
    }
}

/// Calls `f` with the SMs of `device`, to split them into partitions ([`Sms::split`]) and
/// run work in each ([`SmGroup::enter`]). See [`crate::partition`] for what the partitions
/// promise.
///
/// Inside `f` there is no plain guard of the device: every stream, buffer, module and
/// kernel is made by a partition's guard and carries the partition's brand. Refused (an
/// `Err`, before anything is created):
///
/// * on a driver without green contexts ([`ErrorCode::DriverTooOld`] naming the first
///   missing entry point and the CUDA version it needs: 12.4, and 12.5 for their streams),
///   or a device that has none (its error says which device);
/// * while another context is current on this thread (inside a `with_context` closure,
///   whose guard `f` could use: [`ErrorCode::NotPermitted`]);
/// * inside another partitioned closure, and while another thread partitions the same
///   device (two splits of one device would overlap: [`ErrorCode::NotPermitted`]).
///
/// The device's primary context is retained for the closure (green contexts are made
/// within it), then released.
pub fn with_partitions<R, E, F>(device: &Device, f: F) -> Result<R, E>
where
    F: for<'d> FnOnce(Sms<'d>) -> Result<R, E>,
    E: From<Error>,
{
    driver::green_entries()?;
    refuse_inside("with_partitions")?;
    if !driver::ctx_get_current()?.is_null() {
        return Err(Error::with_detail(
            "with_partitions",
            ErrorCode::NotPermitted,
            "a context is current on this thread (is this inside a `with_context` closure?): \
             its guard would reach the partitioned closure and queue work outside every \
             partition; call `with_partitions` where no context is current",
        )
        .into());
    }
    let dev = device.as_raw();
    claim(device)?;
    let sms = match begin(device) {
        Ok(sms) => sms,
        Err(e) => {
            unclaim(dev);
            return Err(e.into());
        }
    };
    driver::partitioned_closure_begins();
    run_then(
        || f(sms),
        move || {
            driver::partitioned_closure_ends();
            unclaim(dev);
            // SAFETY: balances the retain of `begin`; every partition (each retains the
            // primary context itself) is gone, as `f` has returned.
            unsafe { driver::primary_ctx_release(dev) }
        },
    )
}

/// Reads the device's SM resource and limits, and retains its primary context.
fn begin<'d>(device: &Device) -> Result<Sms<'d>> {
    let resource =
        driver::device_sm_resource(device.as_raw()).map_err(|e| no_green_contexts(device, e))?;
    let cc = device.compute_capability()?;
    let limits = SmLimits::of(&resource, driver::loaded_version()?, cc);
    // a plain retain: the partitions' contexts are held (`is_partition`), not the primary
    // context, whose teardown (`with_partitions`' own) frees nothing kept for it
    let raw = driver::primary_ctx_retain(device.as_raw())?;
    driver::non_null("cuDevicePrimaryCtxRetain", raw)?;
    Ok(Sms {
        device: device.as_raw(),
        resource,
        limits,
        _brand: PhantomData,
    })
}

/// The error of a device whose driver has green contexts but which gives no SM resource.
#[cold]
fn no_green_contexts(device: &Device, e: Error) -> Error {
    let name = device.name().unwrap_or_else(|_| "?".to_owned());
    let cc = device
        .compute_capability()
        .map_or_else(|_| "?".to_owned(), |cc| cc.to_string());
    let detail = format!(
        "device {} ({name}, compute capability {cc}) gives no SM resource: it has no green \
         contexts{}",
        device.ordinal(),
        e.detail().map(|d| format!(" ({d})")).unwrap_or_default()
    );
    Error::with_detail(e.call(), e.code(), detail)
}

/// The SMs of a device in a [`with_partitions`] closure, before the split: the one value
/// that can be split, consumed by the split ([`split`](Sms::split),
/// [`split_groups`](Sms::split_groups)), so no later code can split the device again. Not
/// `Clone`.
///
/// ```no_run
/// use cuda_brand::prelude::*;
/// use cuda_brand::with_partitions;
/// # fn main() -> cuda_brand::Result<()> {
/// let device = Device::get(0)?;
/// with_partitions(&device, |sms| {
///     println!("{} SMs, partitions of at least {} in multiples of {}",
///         sms.count(), sms.min_partition(), sms.alignment());
///     let (fast, rest) = sms.split(16)?; // 16 SMs, and the rest (116 on an H100)
///     fast.enter(|b| rest.enter(|a| {
///         let (sa, sb) = (a.new_stream()?, b.new_stream()?);
///         sa.synchronize()?;
///         sb.synchronize()
///     }))
/// })
/// # }
/// ```
///
/// # The brand
///
/// `'d` is the partitioned closure's, invariant: a split cannot leave its closure (where it
/// could be entered after `with_partitions` gave the device back), and the SMs of two
/// partitioned closures never have one type:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::{with_partitions, Sms};
///
/// /// Takes the SMs of one partitioned closure, twice.
/// fn one_split<'d>(_: &Sms<'d>, _: &Sms<'d>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_partitions(&device, |a| {
///     with_partitions(&device, |b| {
///         one_split(&a, &b); // two closures: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct Sms<'d> {
    device: CUdevice,
    resource: CUdevResource,
    limits: SmLimits,
    /// Invariant in `'d`: were it covariant, the SMs (and so the parts) of two partitioned
    /// closures could meet as one type, and a part could be kept past its closure's end,
    /// where its device may be split again by another `with_partitions`, overlapping it.
    _brand: Brand<'d>,
}

impl std::fmt::Debug for Sms<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sms").field("limits", &self.limits).finish()
    }
}

impl<'d> Sms<'d> {
    /// How many SMs the device has (`smCount` of its SM resource: 132 on an H100 SXM).
    pub fn count(&self) -> u32 {
        self.limits.total
    }

    /// The fewest SMs a partition may have: queried from the driver (CUDA 13.0 and newer),
    /// else the rule of `cuda.h` 12.x for the device's compute capability (8 on 9.0+).
    pub fn min_partition(&self) -> u32 {
        self.limits.min
    }

    /// The multiple a partition's size is rounded up to (queried as
    /// [`min_partition`](Self::min_partition) is; 8 on compute capability 9.0+).
    pub fn alignment(&self) -> u32 {
        self.limits.alignment
    }

    /// Splits the SMs in two: a part of at least `count` SMs (rounded up as the driver
    /// rounds: to [`min_partition`](Self::min_partition), then to a multiple of
    /// [`alignment`](Self::alignment)) and the rest. The two parts are disjoint (the
    /// driver's promise for `cuDevSmResourceSplitByCount`), and their sizes are
    /// [`SmGroup::sm_count`].
    ///
    /// An `Err` naming the numbers, before any driver call, when `count` is 0 or the
    /// rounded part leaves nothing for the rest.
    pub fn split(self, count: u32) -> Result<(SmGroup<'d>, SmGroup<'d>)> {
        let size = self.limits.part(count, 1)?;
        if size >= self.limits.total {
            return Err(Error::invalid_input(
                "Sms::split",
                Invalid::argument(format!(
                    "{count} SMs, rounded to {size}, leave none of the device's {} for the \
                     second partition",
                    self.limits.total
                )),
            ));
        }
        let (mut groups, rest) = self.split_groups(count, 1)?;
        match (groups.pop(), rest) {
            (Some(part), Some(rest)) => Ok((part, rest)),
            _ => Err(Error::with_detail(
                "cuDevSmResourceSplitByCount",
                ErrorCode::InvalidResourceConfiguration,
                "the driver left no SMs for the second partition",
            )),
        }
    }

    /// Splits the SMs into `groups` parts of at least `count` SMs each (rounded as
    /// [`split`](Self::split) says) and what is left, if anything. All parts are disjoint.
    /// An `Err` naming the numbers when the device cannot give that many (before any driver
    /// call), or when the driver makes fewer parts than asked.
    pub fn split_groups(
        self,
        count: u32,
        groups: u32,
    ) -> Result<(Vec<SmGroup<'d>>, Option<SmGroup<'d>>)> {
        let size = self.limits.part(count, groups)?;
        let (parts, rest) = driver::sm_split_by_count(&self.resource, groups, count)?;
        let made: u32 = parts.iter().map(|p| p.sm.smCount).sum();
        if parts.len() != groups as usize || parts.iter().any(|p| p.sm.smCount < size) {
            return Err(Error::with_detail(
                "cuDevSmResourceSplitByCount",
                ErrorCode::InvalidResourceConfiguration,
                format!(
                    "asked for {groups} partitions of {size} SMs, the driver made {} ({:?} SMs)",
                    parts.len(),
                    parts.iter().map(|p| p.sm.smCount).collect::<Vec<_>>()
                ),
            ));
        }
        if made + rest.sm.smCount != self.limits.total {
            return Err(Error::with_detail(
                "cuDevSmResourceSplitByCount",
                ErrorCode::InvalidResourceConfiguration,
                format!(
                    "the parts ({made} SMs) and the rest ({}) do not add up to the device's {} \
                     SMs",
                    rest.sm.smCount, self.limits.total
                ),
            ));
        }
        let device = self.device;
        let group = |resource| SmGroup {
            device,
            resource,
            _brand: PhantomData,
        };
        let rest = (rest.sm.smCount > 0).then(|| group(rest));
        Ok((parts.into_iter().map(group).collect(), rest))
    }
}

/// A part of a device's SMs from a split ([`Sms::split`]), disjoint from every other part
/// of the split; [`enter`](SmGroup::enter) makes it a partition. Not `Clone`: entering
/// consumes it, so no two partitions are made from one part.
///
/// # The brand
///
/// `'d` is the partitioned closure's (see [`Sms`]): parts of two splits never have one
/// type, and no part outlives its closure:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::{with_partitions, SmGroup};
///
/// /// Takes two parts of one split.
/// fn one_split<'d>(_: &SmGroup<'d>, _: &SmGroup<'d>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_partitions(&device, |a| {
///     let (a, _) = a.split(16)?;
///     with_partitions(&device, |b| {
///         let (b, _) = b.split(16)?;
///         one_split(&a, &b); // two splits: does not compile
///         Ok(())
///     })
/// })
/// # }
/// ```
pub struct SmGroup<'d> {
    device: CUdevice,
    resource: CUdevResource,
    /// Invariant in `'d`, as [`Sms`]'s: a part kept past its closure could be entered
    /// while another split of the device lives, overlapping its partitions.
    _brand: Brand<'d>,
}

impl std::fmt::Debug for SmGroup<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmGroup")
            .field("sm_count", &self.sm_count())
            .finish()
    }
}

impl SmGroup<'_> {
    /// How many SMs the part has (as the driver split it).
    pub fn sm_count(&self) -> u32 {
        self.resource.sm.smCount
    }

    /// Makes the part a partition (a green context over its SMs) and calls `f` with the
    /// partition's guard, whose brand `'p` is new: buffers, streams, modules and kernels
    /// made with it are the partition's and no other's. Every stream the guard creates is
    /// one of the partition (`cuGreenCtxStreamCreate`), so its work runs on the part's SMs.
    ///
    /// The partition's context is current on this thread for `f`. At the end, on every
    /// path: it is synchronized, popped, and the green context destroyed; a panic of `f`
    /// resumes after that. Errors come back as [`with_context`](crate::with_context)'s do.
    ///
    /// A part is `Send`, so a scoped thread may enter it; refused
    /// ([`ErrorCode::NotPermitted`]) on a thread outside every partition that has a context
    /// current (inside a `with_context` closure, whose guard `f` could use), as
    /// [`with_partitions`] is.
    pub fn enter<R, E, F>(self, f: F) -> Result<R, E>
    where
        F: for<'p> FnOnce(PartitionGuard<'p>) -> Result<R, E>,
        E: From<Error>,
    {
        self.enter_with(f, false)
    }

    /// [`SmGroup::enter`], whose teardown also frees the memory made with a setup guard of
    /// the partition (`phased`: the [`Phases`](crate::Phases) of a partition,
    /// `SmGroup::enter_phases`), after its parked releases and before its synchronization.
    pub(crate) fn enter_with<R, E, F>(self, f: F, phased: bool) -> Result<R, E>
    where
        F: for<'p> FnOnce(PartitionGuard<'p>) -> Result<R, E>,
        E: From<Error>,
    {
        // inside a partition of this thread every other context is refused, so what is
        // current there is a partition; outside, nothing may be
        if driver::partitioned_closures() == 0 && !driver::ctx_get_current()?.is_null() {
            return Err(Error::with_detail(
                "SmGroup::enter",
                ErrorCode::NotPermitted,
                "a context is current on this thread (is this inside a `with_context` \
                 closure?): its guard would reach the partition's closure and queue work \
                 outside every partition; enter the part where no context is current",
            )
            .into());
        }
        let (handle, green) = make_partition(&self.resource, self.device)?;
        let raw = handle.as_ptr();
        let sms = self.resource.sm.smCount;
        ENTERED.with(|e| e.borrow_mut().push((raw as usize, green as usize, sms)));
        OWNERS.change(|owners| owners.push((raw as usize, thread_token())));
        driver::partitioned_closure_begins();
        // SAFETY: the green context lives until `end_partition`, after `f` returns, so its
        // `CUcontext` form outlives `'p`.
        let guard = unsafe { ContextGuard::new_unchecked(handle) };
        run_then(
            || f(guard.with_markers::<Unphased, Partitioned>()),
            move || end_partition(raw, green, phased),
        )
    }
}

/// Creates the green context of `resource` and pushes its `CUcontext` form (non-null).
fn make_partition(
    resource: &CUdevResource,
    dev: CUdevice,
) -> Result<(NonNull<CUctx_st>, CUgreenCtx)> {
    let green = driver::green_ctx_create(resource, dev)?;
    let green = driver::non_null("cuGreenCtxCreate", green)?.as_ptr();
    // SAFETY: just created.
    let pushed = unsafe { driver::ctx_from_green_ctx(green) }
        .and_then(|raw| driver::non_null("cuCtxFromGreenCtx", raw))
        // SAFETY: the green context is alive; `end_partition` pops it.
        .and_then(|raw| unsafe { driver::ctx_push(raw.as_ptr()) }.map(|()| raw));
    match pushed {
        Ok(raw) => Ok((raw, green)),
        Err(e) => {
            // SAFETY: nothing used the green context; its context form is on no stack.
            let destroyed = unsafe { driver::green_ctx_destroy(green) };
            Err(match destroyed {
                Ok(()) => e,
                Err(d) => e.with_teardown_error(d),
            })
        }
    }
}

/// The teardown of a partition: free its setup-phase memory (`phased`), synchronize, free
/// what the layers above keep for the context, pop, destroy the green context, report
/// failed releases of its handles.
fn end_partition(raw: CUcontext, green: CUgreenCtx, phased: bool) -> Result<()> {
    // what scoped threads dropped of the partition's values (they are joined: `f` has
    // returned), released here, on the partition's thread, before the synchronization
    for (what, e) in super::confined::run_parked(raw) {
        teardown::record_failed_release(NonNull::new(raw), what, e);
    }
    // the memory of its setup phase, as `with_phases`'s teardown frees it: every value
    // branded with the partition is gone, and its context is current (on top of this
    // thread's stack)
    let freed = if phased {
        super::deferred::free_deferred(raw)
    } else {
        Ok(())
    };
    let synced = teardown::keep_both(freed, driver::ctx_synchronize());
    // SAFETY: `raw` is alive and current (on top of this thread's stack).
    unsafe { teardown::run_before_give_up(raw) };
    let popped = pop_exact(raw);
    ENTERED.with(|e| e.borrow_mut().retain(|&(ctx, _, _)| ctx != raw as usize));
    // every value of the partition is gone (so no other thread can ask for it), before
    // the green context is destroyed (so its address is not yet another's)
    OWNERS.change(|owners| owners.retain(|&(ctx, _)| ctx != raw as usize));
    driver::partitioned_closure_ends();
    let destroyed = match popped {
        // SAFETY: every value branded with the partition is gone (the brand cannot leave
        // `f`), and its context form is off the stack.
        Ok(()) => unsafe { driver::green_ctx_destroy(green) },
        Err(e) => Err(Error::with_detail(
            e.call(),
            e.code(),
            "the partition's green context was left alive (not destroyed): its context is \
             still on this thread's stack",
        )),
    };
    let finished = teardown::keep_both(synced, destroyed);
    teardown::keep_both(finished, teardown::take_failed_releases(raw))
}

impl<P: super::Phase> ContextGuard<'_, P, Partitioned> {
    /// How many SMs the partition has: its part's ([`SmGroup::sm_count`]), kept when it was
    /// entered.
    pub fn sm_count(self) -> u32 {
        entered(self.raw())
            .map(|(_, sms)| sms)
            // the guard is not `Send` and lives inside its `SmGroup::enter` on this thread,
            // which keeps the entry until the guard's closure has returned
            .expect(
                "a partition's guard is used on the thread that entered it, while it is entered",
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::confined::{green_of, refuse_foreign, refuse_partitioned};

    const HOPPER: ComputeCapability = ComputeCapability { major: 9, minor: 0 };
    const AMPERE: ComputeCapability = ComputeCapability { major: 8, minor: 6 };

    fn resource(count: u32, min: u32, alignment: u32) -> CUdevResource {
        let mut r = CUdevResource::ZEROED;
        r.sm.smCount = count;
        r.sm.minSmPartitionSize = min;
        r.sm.smCoscheduledAlignment = alignment;
        r
    }

    #[test]
    fn limits_come_from_the_resource_on_cuda_13_and_from_the_documented_rule_before() {
        // a 13.0 driver fills the fields: they win
        let r = resource(132, 8, 8);
        let limits = SmLimits::of(&r, 13000, HOPPER);
        assert_eq!((limits.total, limits.min, limits.alignment), (132, 8, 8));
        let r = resource(132, 16, 4);
        assert_eq!(SmLimits::of(&r, 13010, HOPPER).min, 16);
        // a 12.x driver: those bytes are `_oversize`, whatever they hold; the rule decides
        let r = resource(40, 77, 3);
        let limits = SmLimits::of(&r, 12080, AMPERE);
        assert_eq!((limits.total, limits.min, limits.alignment), (40, 4, 2));
        // a 13.0 driver that left them 0: the rule
        let r = resource(132, 0, 0);
        assert_eq!(SmLimits::of(&r, 13000, HOPPER).alignment, 8);
        let rule = |major| SmLimits::documented(100, ComputeCapability { major, minor: 0 });
        assert_eq!((rule(6).min, rule(6).alignment), (1, 1));
        assert_eq!((rule(7).min, rule(7).alignment), (2, 2));
        assert_eq!((rule(8).min, rule(8).alignment), (4, 2));
        assert_eq!((rule(9).min, rule(9).alignment), (8, 8));
        assert_eq!((rule(10).min, rule(10).alignment), (8, 8));
    }

    #[test]
    fn a_part_is_rounded_as_the_driver_rounds_and_an_impossible_split_names_the_numbers() {
        let h100 = SmLimits {
            total: 132,
            min: 8,
            alignment: 8,
        };
        assert_eq!(h100.part(16, 1), Ok(16)); // the issue's 16 + 116
        assert_eq!(h100.part(1, 1), Ok(8));
        assert_eq!(h100.part(12, 1), Ok(16));
        assert_eq!(h100.part(128, 1), Ok(128));
        assert!(h100.part(132, 1).is_err(), "132 rounds to 136");
        assert_eq!(h100.part(16, 8), Ok(16)); // 128 of 132
        let e = h100.part(133, 1).unwrap_err();
        assert_eq!(
            (e.call(), e.code()),
            ("Sms::split", ErrorCode::InvalidInput)
        );
        assert_eq!(
            e.invalid().and_then(crate::error::Invalid::reason),
            Some(
                "133 SMs, rounded to 136 (partitions on this device have at least 8 SMs, a \
                 multiple of 8), need 136 SMs; the device has 132"
            )
        );
        let e = h100.part(16, 9).unwrap_err();
        assert_eq!(
            e.invalid().and_then(crate::error::Invalid::reason),
            Some(
                "9 partitions of 16 SMs, rounded to 16 (partitions on this device have at \
                 least 8 SMs, a multiple of 8), need 144 SMs; the device has 132"
            )
        );
        assert_eq!(
            h100.part(0, 1)
                .unwrap_err()
                .invalid()
                .and_then(crate::error::Invalid::reason),
            Some("a partition of 0 SMs: ask for 1 or more")
        );
        assert_eq!(
            h100.part(8, 0)
                .unwrap_err()
                .invalid()
                .and_then(crate::error::Invalid::reason),
            Some("0 partitions asked for: ask for 1 or more")
        );
        let ampere = SmLimits::documented(40, AMPERE);
        assert_eq!(ampere.part(2, 1), Ok(4));
        assert_eq!(ampere.part(5, 1), Ok(6));
        assert_eq!(ampere.part(16, 2), Ok(16));
        assert!(ampere.part(u32::MAX, 1).is_err(), "no overflow");
    }

    #[test]
    fn inside_a_partitioned_closure_other_contexts_are_refused_naming_the_call() {
        assert_eq!(refuse_inside("with_context"), Ok(()));
        driver::partitioned_closure_begins();
        let e = refuse_inside("with_context").unwrap_err();
        driver::partitioned_closure_ends();
        assert_eq!(
            (e.call(), e.code()),
            ("with_context", ErrorCode::NotPermitted)
        );
        assert!(
            e.detail().unwrap().contains("outside every partition"),
            "{e}"
        );
        assert_eq!(refuse_inside("with_context"), Ok(()));
    }

    #[test]
    fn a_device_is_partitioned_by_one_closure_at_a_time() {
        let device = Device::fake_for_tests(7);
        claim(&device).unwrap();
        let e = claim(&device).unwrap_err();
        assert_eq!(e.code(), ErrorCode::NotPermitted);
        assert!(
            e.detail()
                .unwrap()
                .contains("device 7 is being partitioned already")
        );
        unclaim(device.as_raw());
        claim(&device).unwrap();
        unclaim(device.as_raw());
    }

    #[test]
    fn while_a_device_is_partitioned_no_thread_enters_another_context_of_it() {
        let (device, other) = (Device::fake_for_tests(9), Device::fake_for_tests(10));
        assert_eq!(refuse_partitioned("with_context", device.as_raw()), Ok(()));
        claim(&device).unwrap();
        // another thread (a scoped thread spawned inside the partitioned closure, say)
        let e = std::thread::scope(|t| {
            t.spawn(|| refuse_partitioned("with_context", device.as_raw()))
                .join()
                .unwrap()
        })
        .unwrap_err();
        assert_eq!(e.code(), ErrorCode::NotPermitted);
        assert_eq!(e.call(), "with_context");
        assert!(
            e.detail().unwrap().contains("the device is partitioned"),
            "{e}"
        );
        // another device is not refused
        assert_eq!(refuse_partitioned("with_context", other.as_raw()), Ok(()));
        unclaim(device.as_raw());
        assert_eq!(refuse_partitioned("with_context", device.as_raw()), Ok(()));
    }

    #[test]
    fn a_partitions_context_is_refused_on_every_thread_but_its_own() {
        // a fake `CUcontext` form (an address no driver gives), passed between threads as
        // a number
        let ctx = || 0x7a00 as CUcontext;
        OWNERS.change(|owners| owners.push((ctx() as usize, thread_token())));
        let here = refuse_foreign(ctx());
        let elsewhere = std::thread::scope(|t| t.spawn(|| refuse_foreign(ctx())).join().unwrap());
        let other_context = std::thread::scope(|t| {
            t.spawn(|| refuse_foreign(0x7b00 as CUcontext))
                .join()
                .unwrap()
        });
        OWNERS.change(|owners| owners.retain(|&(c, _)| c != ctx() as usize));
        assert_eq!(here, Ok(()), "the partition's own thread");
        let e = elsewhere.unwrap_err();
        assert_eq!(
            (e.call(), e.code()),
            ("cuCtxPushCurrent_v2", ErrorCode::NotPermitted)
        );
        assert!(e.detail().unwrap().contains("one thread at a time"), "{e}");
        assert_eq!(
            other_context,
            Ok(()),
            "another context is not a partition's"
        );
        assert_eq!(
            std::thread::scope(|t| t.spawn(|| refuse_foreign(ctx())).join().unwrap()),
            Ok(()),
            "the record is gone with the partition"
        );
    }

    #[test]
    fn a_partition_not_entered_on_this_thread_has_no_green_context() {
        assert_eq!(green_of(0x1000 as CUcontext), None);
        ENTERED.with(|e| e.borrow_mut().push((0x1000, 0x2000, 16)));
        assert_eq!(green_of(0x1000 as CUcontext), Some(0x2000 as CUgreenCtx));
        ENTERED.with(|e| e.borrow_mut().clear());
    }
}
