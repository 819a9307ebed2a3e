//! A context's flags and settings: [`ContextFlags`] (with [`Scheduling`]), the cache and
//! shared-memory preferences, resource limits and the stream priority range.

use std::fmt;

#[cfg(doc)]
use super::ContextGuard;

/// How a context's host thread waits for the GPU (the `CU_CTX_SCHED_*` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Scheduling {
    /// Let the driver choose (spin when there are fewer active contexts than cores).
    #[default]
    Auto,
    /// Spin while waiting: lowest latency, one busy core.
    Spin,
    /// Yield the thread while waiting.
    Yield,
    /// Block the thread on a synchronization primitive while waiting.
    BlockingSync,
}

/// Flags for a new context (`CUctx_flags`).
///
/// ```
/// use cuda_brand::{ContextFlags, Scheduling};
/// let flags = ContextFlags::new().schedule(Scheduling::BlockingSync).map_host(true);
/// assert_eq!(flags.bits(), 0x4 | 0x8);
/// assert_eq!(flags.scheduling(), Scheduling::BlockingSync);
/// assert!(flags.maps_host() && !flags.keeps_local_memory());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[must_use]
pub struct ContextFlags(u32);

const SCHED_MASK: u32 = 0x07;
const MAP_HOST: u32 = 0x08;
const LMEM_RESIZE_TO_MAX: u32 = 0x10;

impl ContextFlags {
    /// Automatic scheduling, no host mapping, local memory freed after launches.
    pub const fn new() -> Self {
        ContextFlags(0)
    }

    /// Flags from the driver's bit pattern, unknown bits kept.
    pub const fn from_bits(bits: u32) -> Self {
        ContextFlags(bits)
    }

    /// The driver's bit pattern.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Sets how the host thread waits (`CU_CTX_SCHED_*`).
    pub const fn schedule(self, s: Scheduling) -> Self {
        let bits = match s {
            Scheduling::Auto => 0,
            Scheduling::Spin => 1,
            Scheduling::Yield => 2,
            Scheduling::BlockingSync => 4,
        };
        ContextFlags((self.0 & !SCHED_MASK) | bits)
    }

    /// The scheduling policy (an unknown pattern reads as [`Scheduling::Auto`]).
    pub const fn scheduling(self) -> Scheduling {
        match self.0 & SCHED_MASK {
            1 => Scheduling::Spin,
            2 => Scheduling::Yield,
            4 => Scheduling::BlockingSync,
            _ => Scheduling::Auto,
        }
    }

    /// Allows mapped page-locked host memory (`CU_CTX_MAP_HOST`; always on with unified
    /// addressing).
    pub const fn map_host(self, on: bool) -> Self {
        ContextFlags(if on {
            self.0 | MAP_HOST
        } else {
            self.0 & !MAP_HOST
        })
    }

    /// Whether `CU_CTX_MAP_HOST` is set.
    pub const fn maps_host(self) -> bool {
        self.0 & MAP_HOST != 0
    }

    /// Keeps local memory at its high-water mark after launches
    /// (`CU_CTX_LMEM_RESIZE_TO_MAX`).
    pub const fn keep_local_memory(self, on: bool) -> Self {
        ContextFlags(if on {
            self.0 | LMEM_RESIZE_TO_MAX
        } else {
            self.0 & !LMEM_RESIZE_TO_MAX
        })
    }

    /// Whether `CU_CTX_LMEM_RESIZE_TO_MAX` is set.
    pub const fn keeps_local_memory(self) -> bool {
        self.0 & LMEM_RESIZE_TO_MAX != 0
    }
}

impl fmt::Debug for ContextFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextFlags")
            .field("scheduling", &self.scheduling())
            .field("map_host", &self.maps_host())
            .field("keep_local_memory", &self.keeps_local_memory())
            .field("bits", &format_args!("{:#x}", self.0))
            .finish()
    }
}

/// Preference between L1 cache and shared memory (`CUfunc_cache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CacheConfig {
    /// No preference.
    #[default]
    PreferNone,
    /// Prefer a larger shared memory.
    PreferShared,
    /// Prefer a larger L1 cache.
    PreferL1,
    /// Equal L1 cache and shared memory.
    PreferEqual,
}

impl CacheConfig {
    /// The raw `CUfunc_cache` value.
    pub const fn raw(self) -> i32 {
        self as i32
    }

    /// The value for a raw `CUfunc_cache`, if it is one.
    pub const fn from_raw(raw: i32) -> Option<Self> {
        match raw {
            0 => Some(CacheConfig::PreferNone),
            1 => Some(CacheConfig::PreferShared),
            2 => Some(CacheConfig::PreferL1),
            3 => Some(CacheConfig::PreferEqual),
            _ => None,
        }
    }
}

/// Shared memory bank size (`CUsharedconfig`). Devices since Maxwell have a fixed bank size:
/// the driver accepts the setter there and the getter keeps reporting the fixed size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SharedMemoryConfig {
    /// The device's default bank size.
    #[default]
    DefaultBankSize,
    /// Four-byte banks.
    FourByteBankSize,
    /// Eight-byte banks.
    EightByteBankSize,
}

impl SharedMemoryConfig {
    /// The raw `CUsharedconfig` value.
    pub const fn raw(self) -> i32 {
        self as i32
    }

    /// The value for a raw `CUsharedconfig`, if it is one.
    pub const fn from_raw(raw: i32) -> Option<Self> {
        match raw {
            0 => Some(SharedMemoryConfig::DefaultBankSize),
            1 => Some(SharedMemoryConfig::FourByteBankSize),
            2 => Some(SharedMemoryConfig::EightByteBankSize),
            _ => None,
        }
    }
}

/// A context resource limit (`CUlimit`), for [`ContextGuard::limit`] and
/// [`ContextGuard::set_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceLimit {
    /// Stack size in bytes of each GPU thread.
    StackSize = 0,
    /// Size in bytes of the FIFO used by device-side `printf`.
    PrintfFifoSize = 1,
    /// Size in bytes of the heap used by device-side `malloc`.
    MallocHeapSize = 2,
    /// Maximum grid depth at which a thread can synchronize with its children.
    DevRuntimeSyncDepth = 3,
    /// Maximum number of outstanding device-runtime launches.
    DevRuntimePendingLaunchCount = 4,
    /// L2 cache fetch granularity in bytes (a hint).
    MaxL2FetchGranularity = 5,
    /// Persisting L2 cache size in bytes.
    PersistingL2CacheSize = 6,
}

/// The range of stream priorities a context allows (`cuCtxGetStreamPriorityRange`).
/// Lower numbers are higher priorities: `greatest <= least`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamPriorityRange {
    /// The lowest priority (the default for new streams), usually 0.
    pub least: i32,
    /// The highest priority, e.g. -5 on an H100.
    pub greatest: i32,
}

impl StreamPriorityRange {
    /// Whether `priority` lies within the range.
    pub const fn contains(&self, priority: i32) -> bool {
        self.greatest <= priority && priority <= self.least
    }
}
