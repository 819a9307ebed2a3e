//! [`LaunchConfig`]: a launch's grid, block, shared memory and attributes, and its checks
//! against a kernel's limits.

#[cfg(doc)]
use super::Function;
use super::sealed::Target;
use crate::error::{Error, Invalid, Result};

/// The grid and block of a launch, its dynamic shared memory, and its launch attributes:
/// a thread-block cluster, a cooperative launch, a priority.
///
/// ```
/// use cuda_brand::LaunchConfig;
/// let c = LaunchConfig::linear(64, 256).with_shared_mem(4096);
/// assert_eq!((c.grid, c.block, c.shared_mem_bytes), ([64, 1, 1], [256, 1, 1], 4096));
/// assert_eq!(LaunchConfig::new([8, 8, 1], [16, 16, 1]).threads(), 8 * 8 * 16 * 16);
/// let c = LaunchConfig::linear(64, 128).with_cluster([2, 1, 1]).with_priority(-1);
/// assert_eq!((c.cluster, c.cooperative, c.priority), (Some([2, 1, 1]), false, Some(-1)));
/// ```
///
/// # Launch attributes
///
/// A configuration with any of the three is launched with `cuLaunchKernelEx` (CUDA 11.8),
/// each attribute checked before the driver call, an error saying what is wrong
/// otherwise:
///
/// * [`with_cluster`](LaunchConfig::with_cluster): thread-block clusters (compute
///   capability 9.0 or newer): every dimension at least 1 and dividing the grid's; the
///   device supports clusters; the cluster's size (blocks) at most what the kernel can be
///   launched with for this block and shared memory (`cuOccupancyMaxPotentialClusterSize`:
///   8, the portable limit, unless
///   [`Function::set_non_portable_cluster_size_allowed`] allows more); and the kernel's
///   compiled-in cluster shape (`__cluster_dims__`), if it has one.
/// * [`with_cooperative`](LaunchConfig::with_cooperative): a cooperative launch (the
///   kernel may synchronize its whole grid): every block must be resident at once, so the
///   grid may have at most `cuOccupancyMaxActiveBlocksPerMultiprocessor` (for this block
///   and shared memory) times the device's multiprocessor count blocks (a partition's
///   own count on a partition's stream: [`with_partitions`](crate::with_partitions));
///   `CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE` from the crate, with the numbers, otherwise.
/// * [`with_priority`](LaunchConfig::with_priority): the kernel's priority (CUDA 12.0),
///   within the context's [`stream_priority_range`](crate::ContextGuard::stream_priority_range)
///   (the driver would clamp it).
///
/// A scope looks up what these checks need (the device's limits, the kernel's occupancy)
/// on its first launch that needs it and keeps it for the rest of the scope; a capture
/// does the same.
///
/// A graph capture ([`Capture::launch`](crate::Capture::launch)) checks a launch the same
/// way and records a cluster and a cooperative launch into the graph's kernel node (with a
/// CUDA 12.0 driver or newer; an older one's capture is refused, since nothing shows its
/// node keeps them); it refuses a priority, which a replayed node would not keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: [u32; 3],
    /// Threads per block in x, y, z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, in bytes.
    pub shared_mem_bytes: u32,
    /// Thread-block cluster dimensions, in blocks (`CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`);
    /// `None`: no cluster attribute.
    pub cluster: Option<[u32; 3]>,
    /// A cooperative launch (`CU_LAUNCH_ATTRIBUTE_COOPERATIVE`).
    pub cooperative: bool,
    /// The launch's priority (`CU_LAUNCH_ATTRIBUTE_PRIORITY`; lower numbers run first);
    /// `None`: the stream's.
    pub priority: Option<i32>,
}

impl LaunchConfig {
    /// `grid` blocks of `block` threads, in x only.
    pub const fn linear(grid: u32, block: u32) -> Self {
        Self::new([grid, 1, 1], [block, 1, 1])
    }

    /// A three-dimensional grid of three-dimensional blocks.
    pub const fn new(grid: [u32; 3], block: [u32; 3]) -> Self {
        LaunchConfig {
            grid,
            block,
            shared_mem_bytes: 0,
            cluster: None,
            cooperative: false,
            priority: None,
        }
    }

    /// The same, with `bytes` of dynamic shared memory per block.
    pub const fn with_shared_mem(self, bytes: u32) -> Self {
        LaunchConfig {
            shared_mem_bytes: bytes,
            ..self
        }
    }

    /// The same, launched in thread-block clusters of `dims` blocks (compute capability
    /// 9.0 or newer); each grid dimension must be a multiple of the cluster's. See
    /// [Launch attributes](LaunchConfig#launch-attributes).
    pub const fn with_cluster(self, dims: [u32; 3]) -> Self {
        LaunchConfig {
            cluster: Some(dims),
            ..self
        }
    }

    /// The same, as a cooperative launch: every block of the grid is resident at once, so
    /// the kernel may synchronize the whole grid (`cooperative_groups::this_grid().sync()`).
    /// See [Launch attributes](LaunchConfig#launch-attributes).
    pub const fn with_cooperative(self) -> Self {
        LaunchConfig {
            cooperative: true,
            ..self
        }
    }

    /// The same, with the launch priority `priority` (CUDA 12.0; lower numbers run first;
    /// within the context's stream priority range). See
    /// [Launch attributes](LaunchConfig#launch-attributes).
    pub const fn with_priority(self, priority: i32) -> Self {
        LaunchConfig {
            priority: Some(priority),
            ..self
        }
    }

    /// Whether the launch has any attribute (and so goes through `cuLaunchKernelEx`).
    #[inline(always)]
    pub(crate) const fn has_attributes(&self) -> bool {
        self.cluster.is_some() || self.cooperative || self.priority.is_some()
    }

    /// The number of threads the launch runs (grid times block, in all three dimensions).
    pub const fn threads(&self) -> u64 {
        let [gx, gy, gz] = self.grid;
        let [bx, by, bz] = self.block;
        gx as u64 * gy as u64 * gz as u64 * bx as u64 * by as u64 * bz as u64
    }

    /// Checks the configuration against a kernel's limits and the limits every CUDA GPU
    /// has; the text says what is wrong.
    #[inline]
    pub(crate) fn problem(
        &self,
        max_threads: u32,
        max_dynamic_shared: u32,
    ) -> Option<&'static str> {
        let [gx, gy, gz] = self.grid;
        let [bx, by, bz] = self.block;
        let threads = bx as u64 * by as u64 * bz as u64;
        if gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 {
            Some("a dimension is zero")
        } else if threads > max_threads as u64 {
            Some("the block has more threads than the kernel allows")
        } else if gx > i32::MAX as u32 || gy > 65535 || gz > 65535 || bz > 64 {
            Some(
                "a dimension exceeds CUDA's limits (grid x < 2^31, y and z <= 65535; block z <= 64)",
            )
        } else if self.shared_mem_bytes > max_dynamic_shared {
            Some("more dynamic shared memory than the kernel allows")
        } else {
            None
        }
    }
}

#[cold]
#[inline(never)]
fn bad_config(c: &LaunchConfig, t: &Target, problem: &str) -> Error {
    Error::invalid_input(
        "StreamScope::launch",
        Invalid::argument(format!(
            "invalid launch configuration, {problem}: grid {:?}, block {:?} ({} threads; the kernel allows {}), {} bytes of dynamic shared memory (the kernel allows {})",
            c.grid,
            c.block,
            c.block.iter().map(|&d| d as u64).product::<u64>(),
            t.max_threads,
            c.shared_mem_bytes,
            t.max_dynamic_shared
        )),
    )
}

/// Checks a configuration against a kernel's limits, before any driver call.
#[inline(always)]
pub(crate) fn check_config(config: &LaunchConfig, target: &Target) -> Result<()> {
    match config.problem(target.max_threads, target.max_dynamic_shared) {
        None => Ok(()),
        Some(problem) => Err(bad_config(config, target, problem)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_configurations_are_checked() {
        let ok = LaunchConfig::linear(10, 256);
        assert_eq!(ok.problem(1024, 48 << 10), None);
        assert_eq!(
            LaunchConfig::linear(0, 32).problem(1024, 0),
            Some("a dimension is zero")
        );
        assert_eq!(
            LaunchConfig::linear(1, 1025).problem(1024, 0),
            Some("the block has more threads than the kernel allows")
        );
        assert!(
            LaunchConfig::new([1, 70_000, 1], [32, 1, 1])
                .problem(1024, 0)
                .unwrap()
                .starts_with("a dimension exceeds")
        );
        assert_eq!(
            LaunchConfig::linear(1, 32)
                .with_shared_mem(100)
                .problem(1024, 99),
            Some("more dynamic shared memory than the kernel allows")
        );
        assert_eq!(LaunchConfig::new([2, 3, 4], [5, 6, 7]).threads(), 24 * 210);
    }
}
