//! Wrappers: green contexts (CUDA 12.4), contexts over a part of a device's SMs: the
//! device's SM resource, its split by count, green contexts made from a part, their
//! `CUcontext` form and their streams (CUDA 12.5).

use std::ffi::c_uint;

use super::ffi::{CU_DEV_RESOURCE_TYPE_SM, CU_GREEN_CTX_DEFAULT_STREAM, CUdevResource, CUgreenCtx};
use super::{CUcontext, CUdevice, CUstream};
use crate::error::Result;

/// The SM resource of `dev`: all its SMs (`cuDeviceGetDevResource`).
#[inline]
pub(crate) fn device_sm_resource(dev: CUdevice) -> Result<CUdevResource> {
    let mut r = CUdevResource::ZEROED;
    cu!(cuDeviceGetDevResource(dev, &mut r, CU_DEV_RESOURCE_TYPE_SM))?;
    Ok(r)
}

/// Splits the SM resource `input` into at most `groups` groups of at least `min_count` SMs
/// each (`cuDevSmResourceSplitByCount`, no flags): the groups the driver made, and what is
/// left of `input` (an SM resource of 0 SMs when nothing is). `input` must come from
/// [`device_sm_resource`]; a group cannot be split again.
#[inline]
pub(crate) fn sm_split_by_count(
    input: &CUdevResource,
    groups: u32,
    min_count: u32,
) -> Result<(Vec<CUdevResource>, CUdevResource)> {
    let mut out = vec![CUdevResource::ZEROED; groups as usize];
    let mut made: c_uint = groups;
    let mut rest = CUdevResource::ZEROED;
    cu!(cuDevSmResourceSplitByCount(
        out.as_mut_ptr(),
        &mut made,
        input,
        &mut rest,
        0,
        min_count,
    ))?;
    out.truncate((made as usize).min(groups as usize));
    Ok((out, rest))
}

/// Creates a green context on `dev` over the SMs of `resource` (a descriptor from
/// `cuDevResourceGenerateDesc`, then `cuGreenCtxCreate` with its required default stream).
/// The green context retains `dev`'s primary context until it is destroyed. Not current.
#[inline]
pub(crate) fn green_ctx_create(resource: &CUdevResource, dev: CUdevice) -> Result<CUgreenCtx> {
    let mut copy = *resource;
    let mut desc = std::ptr::null_mut();
    cu!(cuDevResourceGenerateDesc(&mut desc, &mut copy, 1))?;
    let mut g = std::ptr::null_mut();
    cu!(cuGreenCtxCreate(
        &mut g,
        desc,
        dev,
        CU_GREEN_CTX_DEFAULT_STREAM
    ))?;
    Ok(g)
}

/// # Safety
/// `g` is a green context this crate created, nothing of it is used afterwards, and its
/// `CUcontext` form is on no thread's stack.
#[inline]
pub(crate) unsafe fn green_ctx_destroy(g: CUgreenCtx) -> Result<()> {
    cu!(cuGreenCtxDestroy(g))
}

/// The `CUcontext` form of `g` (`cuCtxFromGreenCtx`): valid while `g` lives, never
/// destroyed on its own.
///
/// # Safety
/// `g` is live.
#[inline]
pub(crate) unsafe fn ctx_from_green_ctx(g: CUgreenCtx) -> Result<CUcontext> {
    let mut c = std::ptr::null_mut();
    cu!(cuCtxFromGreenCtx(&mut c, g))?;
    Ok(c)
}

/// The SM resource `g` was created with (`cuGreenCtxGetDevResource`).
///
/// # Safety
/// `g` is live.
#[inline]
pub(crate) unsafe fn green_ctx_sm_resource(g: CUgreenCtx) -> Result<CUdevResource> {
    let mut r = CUdevResource::ZEROED;
    cu!(cuGreenCtxGetDevResource(g, &mut r, CU_DEV_RESOURCE_TYPE_SM))?;
    Ok(r)
}

/// Creates a stream of `g` (`cuGreenCtxStreamCreate`): its work runs on `g`'s SMs only.
/// The driver requires `CU_STREAM_NON_BLOCKING` in `flags`.
///
/// # Safety
/// `g` is live.
#[inline]
pub(crate) unsafe fn green_stream_create(
    g: CUgreenCtx,
    flags: u32,
    priority: i32,
) -> Result<CUstream> {
    let mut s = std::ptr::null_mut();
    cu!(cuGreenCtxStreamCreate(&mut s, g, flags, priority))?;
    Ok(s)
}
