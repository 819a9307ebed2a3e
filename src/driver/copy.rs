//! Wrappers: copies (host and device, 2D, 3D, between contexts) and fills, synchronous and
//! stream-ordered. The crate's synchronous operations use the stream-ordered ones on a sync
//! stream (`crate::synchronous`); the legacy-stream ones here wait for it before they return,
//! except [`memcpy_htod_unwaited`], whose caller does. Every one is `unsafe`: the caller
//! guarantees each range is valid for the access, and stays valid until the (possibly
//! asynchronous) operation is done.

use std::ffi::c_void;

use super::{CUDA_MEMCPY2D, CUDA_MEMCPY3D, CUcontext, CUdeviceptr, CUstream, stream_wait_idle};
use crate::error::Result;

/// Waits for the current context's legacy default stream.
///
/// The "synchronous" copies and fills of the driver are not all complete when they
/// return: `cuMemset*` and device-to-device `cuMemcpy*` are asynchronous with respect to
/// the host, and a host-to-device copy from pageable memory returns once the data is
/// staged, before the DMA has finished (CUDA's "API synchronization behavior"). Work on a
/// non-blocking stream is not ordered after them, so without this wait a scope could read
/// memory that a "finished" fill is still writing (observed on an H100: a `zeroed` buffer's
/// memset landing after a scope's copy into it).
///
/// See [`stream_wait_idle`] for what an error means.
fn legacy_stream_synchronize() -> Result<()> {
    // SAFETY: the null stream is the current context's legacy default stream.
    unsafe { stream_wait_idle(std::ptr::null_mut()) }
}

/// A memset pattern of 1, 2 or 4 bytes (`pub` only so the sealed `Memset` trait can name it;
/// the module is private).
#[derive(Clone, Copy)]
pub enum Pattern {
    D8(u8),
    D16(u16),
    D32(u32),
}

/// # Safety
/// `dst` is valid for `n` elements of the pattern's width, and `stream` is live; the range
/// stays valid until the stream has run it.
#[inline]
pub(crate) unsafe fn memset_async(
    dst: CUdeviceptr,
    pattern: Pattern,
    n: usize,
    stream: CUstream,
) -> Result<()> {
    match pattern {
        Pattern::D8(v) => cu!(cuMemsetD8Async(dst, v, n, stream)),
        Pattern::D16(v) => cu!(cuMemsetD16Async(dst, v, n, stream)),
        Pattern::D32(v) => cu!(cuMemsetD32Async(dst, v, n, stream)),
    }
}

/// # Safety
/// `dst` is valid for `bytes` of device writes, `src` for `bytes` of host reads, `stream`
/// is live, and both ranges stay valid (and the host range
/// unmodified) until the stream has run the copy.
#[inline]
pub(crate) unsafe fn memcpy_htod_async(
    dst: CUdeviceptr,
    src: *const c_void,
    bytes: usize,
    stream: CUstream,
) -> Result<()> {
    cu!(cuMemcpyHtoDAsync_v2(dst, src, bytes, stream))
}

/// # Safety
/// As [`memcpy_dtoh`], `stream` is live, and both ranges stay valid (and the host range
/// otherwise untouched) until the stream has run the copy.
#[inline]
pub(crate) unsafe fn memcpy_dtoh_async(
    dst: *mut c_void,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> Result<()> {
    cu!(cuMemcpyDtoHAsync_v2(dst, src, bytes, stream))
}

/// # Safety
/// Both device ranges are valid for `bytes` until the stream has run the copy.
#[inline]
pub(crate) unsafe fn memcpy_dtod_async(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> Result<()> {
    cu!(cuMemcpyDtoDAsync_v2(dst, src, bytes, stream))
}

/// One side of a 2D copy: host memory or device memory, with its row pitch in bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Side2D {
    Host(*const c_void, usize),
    HostMut(*mut c_void, usize),
    Device(CUdeviceptr, usize),
}

fn memcpy2d_desc(dst: Side2D, src: Side2D, width_bytes: usize, height: usize) -> CUDA_MEMCPY2D {
    // CU_MEMORYTYPE_HOST = 1, CU_MEMORYTYPE_DEVICE = 2
    let mut d = CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: 0,
        srcHost: std::ptr::null(),
        srcDevice: 0,
        srcArray: std::ptr::null_mut(),
        srcPitch: 0,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: 0,
        dstHost: std::ptr::null_mut(),
        dstDevice: 0,
        dstArray: std::ptr::null_mut(),
        dstPitch: 0,
        WidthInBytes: width_bytes,
        Height: height,
    };
    match src {
        Side2D::Host(p, pitch) => (d.srcMemoryType, d.srcHost, d.srcPitch) = (1, p, pitch),
        Side2D::HostMut(p, pitch) => (d.srcMemoryType, d.srcHost, d.srcPitch) = (1, p, pitch),
        Side2D::Device(p, pitch) => (d.srcMemoryType, d.srcDevice, d.srcPitch) = (2, p, pitch),
    }
    match dst {
        Side2D::HostMut(p, pitch) => (d.dstMemoryType, d.dstHost, d.dstPitch) = (1, p, pitch),
        Side2D::Host(p, pitch) => {
            (d.dstMemoryType, d.dstHost, d.dstPitch) = (1, p.cast_mut(), pitch)
        }
        Side2D::Device(p, pitch) => (d.dstMemoryType, d.dstDevice, d.dstPitch) = (2, p, pitch),
    }
    d
}

/// # Safety
/// Each side is valid for `height` rows of `width_bytes` at its pitch (host memory for
/// reading or writing as its side says), `stream` is live, and both sides stay valid (host
/// memory untouched by the host) until the stream has run the copy.
#[inline]
pub(crate) unsafe fn memcpy_2d_async(
    dst: Side2D,
    src: Side2D,
    width_bytes: usize,
    height: usize,
    stream: CUstream,
) -> Result<()> {
    let desc = memcpy2d_desc(dst, src, width_bytes, height);
    cu!(cuMemcpy2DAsync_v2(&desc, stream))
}

/// One side of a 3D copy: host or device memory with its row pitch (as in a 2D copy),
/// the rows from one slice to the next, and where the copy starts in it: `at` is
/// `[x in bytes, row, slice]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Side3D {
    pub(crate) memory: Side2D,
    pub(crate) slice_rows: usize,
    pub(crate) at: [usize; 3],
}

/// A 3D copy: `extent` is `[bytes per row, rows per slice, slices]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Copy3D {
    pub(crate) dst: Side3D,
    pub(crate) src: Side3D,
    pub(crate) extent: [usize; 3],
}

impl Copy3D {
    /// Whether the copy moves no bytes (and so must not reach the driver).
    pub(crate) fn is_empty(&self) -> bool {
        self.extent.contains(&0)
    }

    /// The driver's descriptor: the memory types, pointers and pitches of the 2D one, plus
    /// the offsets, slice heights and depth (levels of detail 0, reserved pointers null).
    fn desc(&self) -> CUDA_MEMCPY3D {
        let [width_bytes, height, depth] = self.extent;
        let flat = memcpy2d_desc(self.dst.memory, self.src.memory, width_bytes, height);
        let (src, dst) = (self.src.at, self.dst.at);
        CUDA_MEMCPY3D {
            srcXInBytes: src[0],
            srcY: src[1],
            srcZ: src[2],
            srcLOD: 0,
            srcMemoryType: flat.srcMemoryType,
            srcHost: flat.srcHost,
            srcDevice: flat.srcDevice,
            srcArray: std::ptr::null_mut(),
            reserved0: std::ptr::null_mut(),
            srcPitch: flat.srcPitch,
            srcHeight: self.src.slice_rows,
            dstXInBytes: dst[0],
            dstY: dst[1],
            dstZ: dst[2],
            dstLOD: 0,
            dstMemoryType: flat.dstMemoryType,
            dstHost: flat.dstHost,
            dstDevice: flat.dstDevice,
            dstArray: std::ptr::null_mut(),
            reserved1: std::ptr::null_mut(),
            dstPitch: flat.dstPitch,
            dstHeight: self.dst.slice_rows,
            WidthInBytes: width_bytes,
            Height: height,
            Depth: depth,
        }
    }
}

/// # Safety
/// Each side is valid, from its start `at`, for `extent[2]` slices `slice_rows` rows apart
/// of `extent[1]` rows of `extent[0]` bytes at its pitch (host memory for reading or
/// writing as its side says), the two do not overlap, `stream` is live, and both sides stay
/// valid (host memory untouched by the host) until the stream has run the copy.
#[inline]
pub(crate) unsafe fn memcpy_3d_async(copy: &Copy3D, stream: CUstream) -> Result<()> {
    let desc = copy.desc();
    cu!(cuMemcpy3DAsync_v2(&desc, stream))
}

/// Copies between contexts (devices); complete when it returns.
///
/// # Safety
/// Both contexts are live, and each range is valid memory of its context for `bytes`.
#[inline]
pub(crate) unsafe fn memcpy_peer(
    dst: CUdeviceptr,
    dst_ctx: CUcontext,
    src: CUdeviceptr,
    src_ctx: CUcontext,
    bytes: usize,
) -> Result<()> {
    cu!(cuMemcpyPeer(dst, dst_ctx, src, src_ctx, bytes))?;
    legacy_stream_synchronize()
}

/// # Safety
/// As [`memcpy_peer`], `stream` is live, and both ranges stay valid until it has run the copy.
#[inline]
pub(crate) unsafe fn memcpy_peer_async(
    dst: CUdeviceptr,
    dst_ctx: CUcontext,
    src: CUdeviceptr,
    src_ctx: CUcontext,
    bytes: usize,
    stream: CUstream,
) -> Result<()> {
    cu!(cuMemcpyPeerAsync(dst, dst_ctx, src, src_ctx, bytes, stream))
}
