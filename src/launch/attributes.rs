//! Launches with attributes (`cuLaunchKernelEx`): thread-block clusters, cooperative
//! launches and launch priorities, each checked before the driver call (see
//! [`LaunchConfig`](crate::LaunchConfig#launch-attributes)).
//!
//! What the checks need from the driver (the device's multiprocessor count, whether it
//! launches clusters, the context's priority range; a kernel's largest cluster and its
//! occupancy) is looked up on the first launch of a scope (or a capture) that needs it and
//! kept in its [`LaunchCache`], so a scope that launches the same kernel the same way many
//! times pays for the look-ups once. [`Plan`](super::Plan) is their one caller.

use std::ffi::{c_int, c_void};
use std::sync::Mutex;

use super::{LaunchConfig, Target};
use crate::driver::{
    self, CUfunction, CUlaunchAttribute, CUlaunchAttributeValue, CUlaunchConfig, CUstream,
};
use crate::error::{Error, ErrorCode, Invalid, Result};
use crate::stream::in_stream_context;

/// What a scope (or a capture) has looked up for launches with attributes.
#[derive(Default)]
pub(crate) struct LaunchCache {
    device: Option<DeviceFacts>,
    cluster: Option<ClusterLimit>,
    cooperative: Option<Occupancy>,
}

/// Facts of the launching stream's context and device.
#[derive(Clone, Copy, Debug)]
struct DeviceFacts {
    multiprocessors: u32,
    clusters: bool,
    /// The context's stream priorities: (least, greatest); greatest is the lowest number.
    priorities: (i32, i32),
}

/// The largest cluster of one kernel for one block and shared memory, and the cluster
/// shape it was compiled for (all zero if none).
#[derive(Clone, Copy, Debug)]
struct ClusterLimit {
    /// The function's handle as a number (the cache holds no pointers, so that the
    /// scope's only non-thread-safe part stays its marker, which compile errors name).
    function: usize,
    block: [u32; 3],
    shared: u32,
    largest: u32,
    required: [u32; 3],
}

/// How many blocks of one kernel, block size and shared memory fit on a multiprocessor.
#[derive(Clone, Copy, Debug)]
struct Occupancy {
    /// The function's handle as a number (see `ClusterLimit`).
    function: usize,
    threads: u32,
    shared: u32,
    per_multiprocessor: u32,
}

// CUlaunchAttributeID values (cuda.h).
const CU_LAUNCH_ATTRIBUTE_COOPERATIVE: u32 = 2;
const CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: u32 = 4;
const CU_LAUNCH_ATTRIBUTE_PRIORITY: u32 = 8;

// CUdevice_attribute and CUfunction_attribute values (cuda.h).
const MULTIPROCESSOR_COUNT: c_int = 16;
const CLUSTER_LAUNCH: c_int = 120;
const REQUIRED_CLUSTER_WIDTH: c_int = 11;

/// A checked launch with attributes: the attribute array the driver reads, and how to
/// call it.
pub(crate) struct Prepared {
    attrs: [CUlaunchAttribute; 3],
    len: u32,
    /// A driver without `cuLaunchKernelEx` (before 11.8): only a cooperative launch gets
    /// here, through `cuLaunchCooperativeKernel`.
    legacy_cooperative: bool,
}

/// Checks `config`'s attributes for a launch of `target` on `stream` and lays them out.
///
/// # Safety
/// `stream` is live, and `target`'s function is live and of the stream's context.
#[inline(never)]
pub(super) unsafe fn prepare(
    cache: &Mutex<LaunchCache>,
    stream: CUstream,
    target: &Target,
    config: &LaunchConfig,
) -> Result<Prepared> {
    let version = driver::loaded_version()?;
    let known = |needed: i32| version == 0 || version >= needed;
    if config.cluster.is_some() && !known(11080) {
        return Err(too_old("thread-block clusters", 11080, version));
    }
    if config.priority.is_some() && !known(12000) {
        return Err(too_old("a priority", 12000, version));
    }
    if let Some(dims) = config.cluster {
        // what needs no driver first
        if let Some(problem) = cluster_shape_problem(dims, config.grid) {
            return Err(bad(ErrorCode::InvalidClusterSize, problem));
        }
    }
    let mut cache = cache
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let facts = match cache.device {
        Some(facts) => facts,
        None => {
            // SAFETY: the caller guarantees the stream.
            let facts = unsafe { device_facts(stream) }?;
            cache.device = Some(facts);
            facts
        }
    };
    let mut prepared = Prepared {
        attrs: [attribute(0, [0; 64]); 3],
        len: 0,
        legacy_cooperative: config.cooperative && !known(11080),
    };
    if let Some(priority) = config.priority {
        let (least, greatest) = facts.priorities;
        if priority < greatest || priority > least {
            return Err(Error::invalid_input(
                "StreamScope::launch",
                Invalid::argument(format!(
                    "launch priority {priority} is outside the context's range {greatest} \
                     (highest) to {least} (lowest)"
                )),
            ));
        }
        prepared.push(CU_LAUNCH_ATTRIBUTE_PRIORITY, value_i32(priority));
    }
    if let Some(dims) = config.cluster {
        if !facts.clusters {
            return Err(bad(
                ErrorCode::NotSupported,
                "the device does not launch thread-block clusters (compute capability 9.0 \
                 or newer does)"
                    .to_owned(),
            ));
        }
        // SAFETY: the caller guarantees the stream and the function.
        let limit = unsafe { cached_cluster_limit(&mut cache, stream, target, config) }?;
        if let Some(problem) = cluster_limit_problem(dims, &limit) {
            return Err(bad(ErrorCode::InvalidClusterSize, problem));
        }
        prepared.push(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, value_dims(dims));
    }
    if config.cooperative {
        // SAFETY: as above.
        let occupancy = unsafe { cached_occupancy(&mut cache, stream, target, config) }?;
        if let Some(problem) = cooperative_problem(config, &occupancy, facts.multiprocessors) {
            return Err(bad(ErrorCode::CooperativeLaunchTooLarge, problem));
        }
        prepared.push(CU_LAUNCH_ATTRIBUTE_COOPERATIVE, value_i32(1));
    }
    Ok(prepared)
}

/// The cluster limit of `target` for `config`'s block and shared memory: the cached one
/// if it is for them, else looked up (and cached).
///
/// # Safety
/// As for [`prepare`].
unsafe fn cached_cluster_limit(
    cache: &mut LaunchCache,
    stream: CUstream,
    target: &Target,
    config: &LaunchConfig,
) -> Result<ClusterLimit> {
    Ok(match cache.cluster {
        Some(l)
            if l.function == target.function as usize
                && l.block == config.block
                && l.shared == config.shared_mem_bytes =>
        {
            l
        }
        _ => {
            // SAFETY: the caller guarantees the stream and the target's function.
            let l = unsafe { cluster_limit(stream, target.function, config) }?;
            cache.cluster = Some(l);
            l
        }
    })
}

/// The occupancy of `target` for `config`'s block and shared memory: the cached one if it
/// is for them, else looked up (and cached).
///
/// # Safety
/// As for [`prepare`].
unsafe fn cached_occupancy(
    cache: &mut LaunchCache,
    stream: CUstream,
    target: &Target,
    config: &LaunchConfig,
) -> Result<Occupancy> {
    let threads = config.block.iter().product::<u32>();
    Ok(match cache.cooperative {
        Some(o)
            if o.function == target.function as usize
                && o.threads == threads
                && o.shared == config.shared_mem_bytes =>
        {
            o
        }
        _ => {
            // SAFETY: as for `cluster_limit` in `cached_cluster_limit`.
            let o =
                unsafe { occupancy(stream, target.function, threads, config.shared_mem_bytes) }?;
            cache.cooperative = Some(o);
            o
        }
    })
}

impl Prepared {
    fn push(&mut self, id: u32, value: [u8; 64]) {
        self.attrs[self.len as usize] = attribute(id, value);
        self.len += 1;
    }

    /// Launches `function` with these attributes ([`Plan::issue`](super::Plan::issue)).
    ///
    /// # Safety
    /// As for `driver::launch_kernel`: `function` and `stream` are live and of one
    /// context, `params` is the crate's parameter array for the kernel's declaration, and
    /// every memory the kernel reaches stays valid until the stream has run it.
    pub(super) unsafe fn launch(
        &self,
        function: CUfunction,
        config: &LaunchConfig,
        stream: CUstream,
        params: *mut *mut c_void,
    ) -> Result<()> {
        if self.legacy_cooperative {
            // SAFETY: the caller's guarantees.
            return unsafe {
                driver::launch_cooperative_kernel(
                    function,
                    config.grid,
                    config.block,
                    config.shared_mem_bytes,
                    stream,
                    params,
                )
            };
        }
        let ex = launch_config(config, stream, &self.attrs[..self.len as usize]);
        // SAFETY: the caller's guarantees; `ex` points at this plan's `len` attributes,
        // each an id and the value of its documented layout, borrowed for the call.
        unsafe { driver::launch_kernel_ex(&ex, function, params) }
    }
}

/// The `CUlaunchConfig` of `config` on `stream` with `attrs` (a null pointer for none),
/// which the driver only reads, through its `attrs` pointer, while `attrs` is borrowed.
fn launch_config(
    config: &LaunchConfig,
    stream: CUstream,
    attrs: &[CUlaunchAttribute],
) -> CUlaunchConfig {
    CUlaunchConfig {
        gridDimX: config.grid[0],
        gridDimY: config.grid[1],
        gridDimZ: config.grid[2],
        blockDimX: config.block[0],
        blockDimY: config.block[1],
        blockDimZ: config.block[2],
        sharedMemBytes: config.shared_mem_bytes,
        hStream: stream,
        attrs: match attrs {
            [] => std::ptr::null_mut(),
            _ => attrs.as_ptr().cast_mut(),
        },
        numAttrs: attrs.len() as u32,
    }
}

fn attribute(id: u32, bytes: [u8; 64]) -> CUlaunchAttribute {
    CUlaunchAttribute {
        id,
        pad: [0; 4],
        value: CUlaunchAttributeValue { bytes },
    }
}

/// An `int` member of `CUlaunchAttributeValue` (`cooperative`, `priority`).
fn value_i32(v: i32) -> [u8; 64] {
    let mut bytes = [0; 64];
    bytes[..4].copy_from_slice(&v.to_ne_bytes());
    bytes
}

/// The `clusterDim` member: three `unsigned int`s.
fn value_dims(dims: [u32; 3]) -> [u8; 64] {
    let mut bytes = [0; 64];
    for (i, d) in dims.iter().enumerate() {
        bytes[4 * i..4 * i + 4].copy_from_slice(&d.to_ne_bytes());
    }
    bytes
}

/// What is wrong with a cluster shape for a grid, before asking the driver.
fn cluster_shape_problem(dims: [u32; 3], grid: [u32; 3]) -> Option<String> {
    if dims.contains(&0) {
        Some(format!("cluster dimensions {dims:?} have a zero"))
    } else if (0..3).any(|i| grid[i] % dims[i] != 0) {
        Some(format!(
            "the grid {grid:?} is not a whole number of clusters {dims:?}: each grid dimension \
             must be a multiple of the cluster's"
        ))
    } else {
        None
    }
}

/// What is wrong with a cluster shape for a kernel's limit.
fn cluster_limit_problem(dims: [u32; 3], limit: &ClusterLimit) -> Option<String> {
    let size = dims.iter().map(|&d| d as u64).product::<u64>();
    if limit.required != [0; 3] && limit.required != dims {
        Some(format!(
            "the kernel was compiled for clusters of {:?} blocks (`__cluster_dims__`); the \
             launch asks for {dims:?}",
            limit.required
        ))
    } else if size > limit.largest as u64 {
        Some(format!(
            "a cluster of {size} blocks ({dims:?}) is larger than this kernel can be launched \
             with for blocks of {:?} threads and {} bytes of dynamic shared memory: at most {} \
             (cuOccupancyMaxPotentialClusterSize; 8 is the portable limit, which \
             Function::set_non_portable_cluster_size_allowed lifts where the device allows)",
            limit.block, limit.shared, limit.largest
        ))
    } else {
        None
    }
}

/// What is wrong with a cooperative grid: more blocks than can be resident at once.
fn cooperative_problem(
    config: &LaunchConfig,
    occupancy: &Occupancy,
    multiprocessors: u32,
) -> Option<String> {
    let blocks = config.grid.iter().map(|&d| d as u64).product::<u64>();
    let fit = occupancy.per_multiprocessor as u64 * multiprocessors as u64;
    (blocks > fit).then(|| {
        format!(
            "a cooperative launch needs every block resident at once: the grid {:?} has \
             {blocks} blocks, but at most {} blocks of {} threads with {} bytes of dynamic \
             shared memory fit on each of the {multiprocessors} multiprocessors, {fit} in all \
             (cuOccupancyMaxActiveBlocksPerMultiprocessor)",
            config.grid, occupancy.per_multiprocessor, occupancy.threads, occupancy.shared
        )
    })
}

#[cold]
#[inline(never)]
fn bad(code: ErrorCode, problem: String) -> Error {
    Error::with_detail("StreamScope::launch", code, problem)
}

#[cold]
#[inline(never)]
fn too_old(what: &str, needed: i32, version: i32) -> Error {
    Error::with_detail(
        "StreamScope::launch",
        ErrorCode::DriverTooOld,
        format!(
            "launches with {what} need a CUDA {}.{} driver; this driver is CUDA {}.{}",
            needed / 1000,
            needed % 1000 / 10,
            version / 1000,
            version % 1000 / 10
        ),
    )
}

/// # Safety
/// `stream` is live.
#[cold]
#[inline(never)]
unsafe fn device_facts(stream: CUstream) -> Result<DeviceFacts> {
    let facts = || {
        let device = driver::ctx_get_device()?;
        // a partition's stream: its green context's SMs, which are all a cooperative grid
        // may be resident on (a partition's stream is used on the thread that entered it
        // only, `context::confined`)
        let multiprocessors = match crate::context::confined::green_of(driver::ctx_get_current()?) {
            // SAFETY: a green context entered on this thread, so alive.
            Some(g) => unsafe { driver::green_ctx_sm_resource(g) }?.sm.smCount as i32,
            None => driver::device_attribute(device, MULTIPROCESSOR_COUNT)?,
        };
        // a driver before 11.8 does not know the attribute: no clusters
        let clusters = driver::device_attribute(device, CLUSTER_LAUNCH).unwrap_or(0) != 0;
        let priorities = driver::ctx_stream_priority_range()?;
        Ok(DeviceFacts {
            multiprocessors: multiprocessors.max(0) as u32,
            clusters,
            priorities,
        })
    };
    // SAFETY: the caller guarantees the stream.
    unsafe { in_stream_context(stream, facts) }
}

/// # Safety
/// `stream` is live, and `function` is live and of the stream's context.
#[cold]
#[inline(never)]
unsafe fn cluster_limit(
    stream: CUstream,
    function: CUfunction,
    config: &LaunchConfig,
) -> Result<ClusterLimit> {
    let mut required = [0u32; 3];
    for (i, r) in required.iter_mut().enumerate() {
        // SAFETY: the caller guarantees the function.
        *r = unsafe { driver::func_get_attribute(function, REQUIRED_CLUSTER_WIDTH + i as c_int) }?
            .max(0) as u32;
    }
    let query = launch_config(config, stream, &[]);
    let ask = || {
        // SAFETY: the caller guarantees the function, whose context (the stream's) is
        // current; the query has no attributes.
        unsafe { driver::occupancy_max_potential_cluster_size(function, &query) }
    };
    // SAFETY: the caller guarantees the stream.
    let largest = unsafe { in_stream_context(stream, ask) }?;
    Ok(ClusterLimit {
        function: function as usize,
        block: config.block,
        shared: config.shared_mem_bytes,
        largest: largest.max(0) as u32,
        required,
    })
}

/// # Safety
/// As for [`cluster_limit`].
#[cold]
#[inline(never)]
unsafe fn occupancy(
    stream: CUstream,
    function: CUfunction,
    threads: u32,
    shared: u32,
) -> Result<Occupancy> {
    let ask = || {
        // SAFETY: the caller guarantees the function.
        unsafe { driver::occupancy_max_active_blocks(function, threads, shared as usize) }
    };
    // SAFETY: the caller guarantees the stream.
    let per_multiprocessor = unsafe { in_stream_context(stream, ask) }?;
    Ok(Occupancy {
        function: function as usize,
        threads,
        shared,
        per_multiprocessor: per_multiprocessor.max(0) as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_shapes_must_divide_the_grid() {
        assert_eq!(cluster_shape_problem([2, 1, 1], [8, 1, 1]), None);
        assert_eq!(cluster_shape_problem([2, 2, 1], [4, 6, 3]), None);
        assert_eq!(
            cluster_shape_problem([0, 1, 1], [8, 1, 1]).unwrap(),
            "cluster dimensions [0, 1, 1] have a zero"
        );
        assert_eq!(
            cluster_shape_problem([4, 1, 1], [6, 1, 1]).unwrap(),
            "the grid [6, 1, 1] is not a whole number of clusters [4, 1, 1]: each grid \
             dimension must be a multiple of the cluster's"
        );
    }

    #[test]
    fn clusters_are_checked_against_the_kernels_limit_and_shape() {
        let limit = ClusterLimit {
            function: 0,
            block: [128, 1, 1],
            shared: 0,
            largest: 8,
            required: [0; 3],
        };
        assert_eq!(cluster_limit_problem([8, 1, 1], &limit), None);
        assert_eq!(cluster_limit_problem([2, 2, 2], &limit), None);
        assert_eq!(
            cluster_limit_problem([16, 1, 1], &limit).unwrap(),
            "a cluster of 16 blocks ([16, 1, 1]) is larger than this kernel can be launched \
             with for blocks of [128, 1, 1] threads and 0 bytes of dynamic shared memory: at \
             most 8 (cuOccupancyMaxPotentialClusterSize; 8 is the portable limit, which \
             Function::set_non_portable_cluster_size_allowed lifts where the device allows)"
        );
        let fixed = ClusterLimit {
            required: [2, 1, 1],
            ..limit
        };
        assert_eq!(cluster_limit_problem([2, 1, 1], &fixed), None);
        assert_eq!(
            cluster_limit_problem([4, 1, 1], &fixed).unwrap(),
            "the kernel was compiled for clusters of [2, 1, 1] blocks (`__cluster_dims__`); \
             the launch asks for [4, 1, 1]"
        );
    }

    #[test]
    fn a_cooperative_grid_must_fit_on_the_device_at_once() {
        let occupancy = Occupancy {
            function: 0,
            threads: 256,
            shared: 0,
            per_multiprocessor: 8,
        };
        let fits = LaunchConfig::linear(132 * 8, 256).with_cooperative();
        assert_eq!(cooperative_problem(&fits, &occupancy, 132), None);
        let too_many = LaunchConfig::linear(132 * 8 + 1, 256).with_cooperative();
        assert_eq!(
            cooperative_problem(&too_many, &occupancy, 132).unwrap(),
            "a cooperative launch needs every block resident at once: the grid [1057, 1, 1] \
             has 1057 blocks, but at most 8 blocks of 256 threads with 0 bytes of dynamic \
             shared memory fit on each of the 132 multiprocessors, 1056 in all \
             (cuOccupancyMaxActiveBlocksPerMultiprocessor)"
        );
    }

    #[test]
    fn attribute_values_have_the_layout_of_the_union() {
        let v = value_dims([2, 3, 4]);
        assert_eq!(&v[..12], &[2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0]);
        assert!(v[12..].iter().all(|&b| b == 0));
        assert_eq!(&value_i32(-2)[..4], &(-2i32).to_ne_bytes());
        let a = attribute(CU_LAUNCH_ATTRIBUTE_PRIORITY, value_i32(-1));
        assert_eq!((a.id, a.pad), (8, [0; 4]));
        assert_eq!(
            too_old("a priority", 12000, 11080).detail(),
            Some("launches with a priority need a CUDA 12.0 driver; this driver is CUDA 11.8")
        );
    }
}
