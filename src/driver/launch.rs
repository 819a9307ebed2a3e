//! Wrappers: occupancy, the parameter queries of a function, and kernel launches.

use std::ffi::{c_int, c_void};

use super::{CUfunction, CUlaunchConfig, CUstream, failure, raw_code};
use crate::error::{ErrorCode, Result};

/// `CUDA_ERROR_INVALID_VALUE`: what `cuFuncGetParamInfo` returns past the last parameter.
const INVALID_VALUE: u32 = raw_code(ErrorCode::InvalidValue);

/// `(minimum grid size for full occupancy, block size)` for a launch of `f`.
///
/// # Safety
/// `f` is live.
#[inline]
pub(crate) unsafe fn occupancy_block_size(
    f: CUfunction,
    dynamic_smem: usize,
) -> Result<(i32, i32)> {
    let (mut grid, mut block) = (0, 0);
    cu!(cuOccupancyMaxPotentialBlockSize(
        &mut grid,
        &mut block,
        f,
        None,
        dynamic_smem,
        0
    ))?;
    Ok((grid, block))
}

/// The offset and size of parameter `index` of `f` (`cuFuncGetParamInfo`, CUDA 12.4), or
/// `None` past its last parameter; `DriverTooOld` where the driver lacks the call.
///
/// Past the last parameter the driver answers `CUDA_ERROR_INVALID_VALUE`, which
/// compute-sanitizer reports as an API error: callers ask for an index at or past the
/// count only where no count is known ([`func_param_count`], or the image's table).
///
/// # Safety
/// `f` is live.
#[inline]
pub(crate) unsafe fn func_param_info(
    f: CUfunction,
    index: usize,
) -> Result<Option<(usize, usize)>> {
    let (mut offset, mut size) = (0, 0);
    match cu_raw!(cuFuncGetParamInfo(f, index, &mut offset, &mut size))? {
        0 => Ok(Some((offset, size))),
        INVALID_VALUE => Ok(None),
        raw => Err(failure("cuFuncGetParamInfo", raw)),
    }
}

/// The number of parameters of `f` (`cuFuncGetParamCount`, CUDA 13.2); `DriverTooOld`
/// where the driver lacks the call.
///
/// # Safety
/// `f` is live.
#[inline]
pub(crate) unsafe fn func_param_count(f: CUfunction) -> Result<usize> {
    let mut count = 0;
    cu!(cuFuncGetParamCount(f, &mut count))?;
    Ok(count)
}

/// How many blocks of `block_size` threads and `dynamic_smem` bytes of dynamic shared
/// memory of `f` can be resident on one multiprocessor at once (an error, not undefined
/// behaviour, where no context is current).
///
/// # Safety
/// `f` is live.
#[inline]
pub(crate) unsafe fn occupancy_max_active_blocks(
    f: CUfunction,
    block_size: u32,
    dynamic_smem: usize,
) -> Result<i32> {
    let mut blocks = 0;
    cu!(cuOccupancyMaxActiveBlocksPerMultiprocessor(
        &mut blocks,
        f,
        block_size as c_int,
        dynamic_smem
    ))?;
    Ok(blocks)
}

/// The largest cluster of `f` that can be launched with `config`'s block and shared memory
/// (its cluster dimensions are ignored; 8 at most unless `f` allows non-portable sizes).
///
/// # Safety
/// `f` is live and its context current; `config.attrs` points to `config.numAttrs` entries.
#[inline]
pub(crate) unsafe fn occupancy_max_potential_cluster_size(
    f: CUfunction,
    config: &CUlaunchConfig,
) -> Result<i32> {
    let mut size = 0;
    cu!(cuOccupancyMaxPotentialClusterSize(&mut size, f, config))?;
    Ok(size)
}

/// `cuLaunchKernelEx`: a launch with the attributes in `config`.
///
/// # Safety
/// As for [`launch_kernel`], with the stream in `config`, whose `attrs` points to
/// `numAttrs` attributes, each of its documented layout.
#[inline]
pub(crate) unsafe fn launch_kernel_ex(
    config: &CUlaunchConfig,
    f: CUfunction,
    params: *mut *mut c_void,
) -> Result<()> {
    cu!(cuLaunchKernelEx(config, f, params, std::ptr::null_mut()))
}

/// `cuLaunchCooperativeKernel`: the cooperative launch of drivers without
/// `cuLaunchKernelEx` (before CUDA 11.8).
///
/// # Safety
/// As for [`launch_kernel`].
#[inline]
pub(crate) unsafe fn launch_cooperative_kernel(
    f: CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem_bytes: u32,
    stream: CUstream,
    params: *mut *mut c_void,
) -> Result<()> {
    cu!(cuLaunchCooperativeKernel(
        f,
        grid[0],
        grid[1],
        grid[2],
        block[0],
        block[1],
        block[2],
        shared_mem_bytes,
        stream,
        params
    ))
}

/// # Safety
/// `f` and `stream` are live and of one context; `params` points to one pointer per kernel
/// parameter, each to a value of the parameter's type, and every memory the kernel
/// reaches stays valid until the stream has run it.
#[inline]
pub(crate) unsafe fn launch_kernel(
    f: CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem_bytes: u32,
    stream: CUstream,
    params: *mut *mut c_void,
) -> Result<()> {
    cu!(cuLaunchKernel(
        f,
        grid[0],
        grid[1],
        grid[2],
        block[0],
        block[1],
        block[2],
        shared_mem_bytes,
        stream,
        params,
        std::ptr::null_mut()
    ))
}
