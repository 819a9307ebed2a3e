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
//! let ptx = include_str!("../kernels/kernels.ptx");
//! with_partitions(&device, |sms| {
//!     // the split: 16 SMs for the latency-critical work, the rest (116 on an H100) for
//!     // the bulk; consumes `sms`, so nothing later can split the device again
//!     let (critical, bulk) = sms.split(16)?;
//!     bulk.enter(|a| {
//!         critical.enter(|b| {
//!             // each partition loads its own module; its streams run on its SMs only
//!             let (spin_a, spin_b) = (a.load_ptx(ptx)?, b.load_ptx(ptx)?);
//!             // SAFETY: spin(long long cycles) touches no memory.
//!             let spin_a = unsafe { spin_a.kernel::<(i64,)>("spin") }?;
//!             // SAFETY: as above.
//!             let spin_b = unsafe { spin_b.kernel::<(i64,)>("spin") }?;
//!             let (sa, sb) = (a.stream()?, b.stream()?);
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
//!   `ContextGuard<'p, Partitioned>` with a fresh brand `'p`. What it makes (buffers,
//!   streams, events, modules, kernels, pools) carries `'p`: one partition's kernel,
//!   buffer or event on another partition's stream is a compile error, and nothing of a
//!   partition outlives it.
//! * **A partition is used on its thread only.** The driver lets a green context be
//!   current on one thread at a time, "with no internal synchronization" for calls from
//!   several. A partition's guard stays on its thread; its streams, buffers, events,
//!   modules and functions are `Send` and `Sync` like any context's, but on another thread
//!   (a scoped thread spawned in the partition's closure) every call of them that would
//!   reach the driver is refused with
//!   [`ErrorCode::NotPermitted`](crate::ErrorCode::NotPermitted): a scope on a partition's
//!   stream, the stream's and an event's methods, a function's attributes and
//!   declarations, a module's lookups, a managed buffer's advice, and an operation that
//!   would make the partition's context current (a synchronous copy or fill of its
//!   memory). Dropped there, such a
//!   value is released by the partition's own thread when the partition ends (before its
//!   synchronization), so nothing leaks. Give each thread a partition of its own: a part
//!   ([`SmGroup`]) is `Send` and may be entered on a scoped thread. Each check is one
//!   atomic load while no partition lives.
//! * **Every stream is the partition's.** A partition's guard creates its streams with
//!   `cuGreenCtxStreamCreate`, the driver's one documented way to a stream whose work runs
//!   on the green context's SMs; `stream()` and `Stream::new` do this for it.
//! * **No work outside the partitions.** Inside `with_partitions` no plain guard of the
//!   device exists: the closure gets SMs, not a context, and a partition's guard is not a
//!   plain guard (the methods that need one, such as [`ContextGuard::share`](crate::ContextGuard::share), graph
//!   capture, peer access, NCCL and the libraries, do not take it; a function that takes a
//!   plain guard cannot be given it). What the types cannot see is refused at run time on
//!   the thread of the closure and of every partition: `with_partitions` itself, and
//!   [`SmGroup::enter`] on a thread outside every partition, while another context is
//!   current (the closure could capture that context's guard), and
//!   inside it every other way into a context (`with_context` and its forms,
//!   `with_raw_context`, [`SharedContext::enter`](crate::SharedContext::enter), the owning
//!   layer's `enter`) with [`ErrorCode::NotPermitted`](crate::ErrorCode::NotPermitted).
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
//! | device memory | device-wide (one address space, the primary context's) | branded `'p`: passing it to another partition is a compile error, because the two partitions' streams are not ordered by anything the crate can see (the rule of `SOUNDNESS.md`, "Order between streams"); copy through the host |
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
//! [`ErrorCode::DriverTooOld`](crate::ErrorCode::DriverTooOld) naming the first entry
//! point it lacks and the version that has it; on a device without green contexts, with
//! the driver's error and the device's name and compute capability.

#[doc(inline)]
pub use crate::context::phase::Partitioned;
#[doc(inline)]
pub use crate::context::{SmGroup, Sms, with_partitions};

/// A partition's guard: `ContextGuard<'p, Partitioned>`.
pub type PartitionGuard<'p> = crate::context::ContextGuard<'p, Partitioned>;
