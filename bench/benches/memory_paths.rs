//! The memory paths beyond plain buffers, three ways in one process, by the method of
//! `overhead.rs` (shared through `harness`): **cuda-brand**; the same driver calls made
//! directly through `cuda-driver-sys` (**raw**, the floor); and **cudarc 0.19.10** where it
//! has the operation. Rows:
//!
//! * memory pools: `DeviceBuffer` from a `MemoryPool` of one's own (raw:
//!   `cuMemAllocFromPoolAsync` + `cuMemFreeAsync` on the same pool; cudarc: `alloc` on its
//!   stream, which uses the device's default pool), 1 KiB and 1 MiB, one at a time (the
//!   stream-ordered scope allocations are `overhead.rs`'s row);
//! * managed memory: `ManagedBuffer::zeroed` + drop (raw: `cuMemAllocManaged`, the same
//!   zeroing on the host, `cuMemFree`; cudarc: `alloc_unified` and the same zeroing), and
//!   prefetches of 64 MiB in a scope (raw: `cuMemPrefetchAsync` + `cuStreamSynchronize`;
//!   cudarc: `UnifiedSlice::prefetch`, to the device only, on its context's default stream);
//! * 2D copies (`DeviceBuffer2D`; raw: `cuMemcpy2D`, `cuMemcpy2DAsync`) and 3D copies
//!   (`DeviceBuffer3D`; raw: `cuMemcpy3D`, `cuMemcpy3DAsync`), small (latency) and 16 MiB
//!   (bandwidth), between pinned host memory and pitched device memory. cudarc 0.19.10 has
//!   no 2D or 3D copy (only its raw `sys` bindings), so those rows have no cudarc column;
//! * `ContextGuard::memory_info` (raw: `cuMemGetInfo`; cudarc: `CudaContext::mem_get_info`).
//!
//! The crate's synchronous copies wait for the legacy stream after the driver call (the
//! driver's "synchronous" copies are not all complete when they return: see
//! `BENCHMARKS.md`), so the small synchronous rows have a second raw variant made equally
//! complete (`+ cuStreamSynchronize(NULL)`), as `overhead.rs` has for 1D copies.
//!
//! `cd bench && cargo bench --bench memory_paths [-- --out FILE.md]`; or build the binary
//! where cargo is (`cargo bench --no-run`) and run it with `--bench --out FILE.md` on the
//! machine with the GPU. Without a GPU it prints the driver's error and exits 0.

mod harness;

use std::ffi::c_void;
use std::hint::black_box;
use std::ptr::null_mut;
use std::sync::Arc;

use cuda_brand::{
    ContextGuard, Device, DeviceBuffer, DeviceBuffer2D, DeviceBuffer3D, Error, ManagedBuffer,
    MemoryLocation, MemoryPool, PinnedBuffer, Stream, StreamFlags,
};
use cuda_driver_sys as sys;
use cudarc::driver as rc;
use cudarc::driver::DevicePtr;
use harness::{Row, Unit, bandwidth, per_op};

const ROUNDS: usize = 31;
const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
/// Managed memory prefetched per measurement.
const PREFETCH: usize = 64 * MIB;
/// The small 2D copy: 64 rows of 64 bytes; the large one: 2048 rows of 8 KiB (16 MiB).
const SMALL_2D: [usize; 2] = [64, 64];
const LARGE_2D: [usize; 2] = [8 * KIB, 2048];
/// The small 3D copy: 16 slices of 16 rows of 16 bytes; the large one: 64 slices of 256
/// rows of 1 KiB (16 MiB).
const SMALL_3D: [usize; 3] = [16, 16, 16];
const LARGE_3D: [usize; 3] = [KIB, 256, 64];
/// `CU_DEVICE_CPU`: the host, for `cuMemPrefetchAsync`.
const HOST: sys::CUdevice = -1;

#[track_caller]
fn ok(r: sys::CUresult) {
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS);
}

fn main() {
    harness::main("memory_paths", run);
}

/// One side of a raw 2D or 3D copy, with its pitch in bytes.
#[derive(Clone, Copy)]
enum RawSide {
    Host(*mut c_void, usize),
    Device(sys::CUdeviceptr, usize),
}

impl RawSide {
    fn parts(self) -> (sys::CUmemorytype, *mut c_void, sys::CUdeviceptr, usize) {
        match self {
            RawSide::Host(p, pitch) => (sys::CUmemorytype::CU_MEMORYTYPE_HOST, p, 0, pitch),
            RawSide::Device(p, pitch) => (
                sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                null_mut(),
                p,
                pitch,
            ),
        }
    }
}

/// A raw 2D copy of `height` rows of `width` bytes.
fn raw_2d(dst: RawSide, src: RawSide, [width, height]: [usize; 2]) -> sys::CUDA_MEMCPY2D {
    let (src_type, src_host, src_device, src_pitch) = src.parts();
    let (dst_type, dst_host, dst_device, dst_pitch) = dst.parts();
    sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: src_type,
        srcHost: src_host,
        srcDevice: src_device,
        srcArray: null_mut(),
        srcPitch: src_pitch,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: dst_type,
        dstHost: dst_host,
        dstDevice: dst_device,
        dstArray: null_mut(),
        dstPitch: dst_pitch,
        WidthInBytes: width,
        Height: height,
    }
}

/// A raw 3D copy of `depth` slices of `height` rows of `width` bytes, both sides `height`
/// rows a slice.
fn raw_3d(dst: RawSide, src: RawSide, [width, height, depth]: [usize; 3]) -> sys::CUDA_MEMCPY3D {
    let flat = raw_2d(dst, src, [width, height]);
    sys::CUDA_MEMCPY3D {
        srcXInBytes: 0,
        srcY: 0,
        srcZ: 0,
        srcLOD: 0,
        srcMemoryType: flat.srcMemoryType,
        srcHost: flat.srcHost,
        srcDevice: flat.srcDevice,
        srcArray: null_mut(),
        reserved0: null_mut(),
        srcPitch: flat.srcPitch,
        srcHeight: height,
        dstXInBytes: 0,
        dstY: 0,
        dstZ: 0,
        dstLOD: 0,
        dstMemoryType: flat.dstMemoryType,
        dstHost: flat.dstHost,
        dstDevice: flat.dstDevice,
        dstArray: null_mut(),
        reserved1: null_mut(),
        dstPitch: flat.dstPitch,
        dstHeight: height,
        WidthInBytes: width,
        Height: height,
        Depth: depth,
    }
}

/// Raw allocations, freed at the end of the run.
#[derive(Default)]
struct RawMemory {
    device: Vec<sys::CUdeviceptr>,
    host: Vec<*mut c_void>,
}

impl RawMemory {
    /// `rows` rows of `width` bytes (`cuMemAllocPitch`, 4-byte elements as the crate asks
    /// for `u8`): the device side of a raw copy.
    fn pitched(&mut self, width: usize, rows: usize) -> RawSide {
        let (mut p, mut pitch) = (0, 0);
        ok(unsafe { sys::cuMemAllocPitch_v2(&mut p, &mut pitch, width, rows, 4) });
        self.device.push(p);
        RawSide::Device(p, pitch)
    }

    /// `bytes` of pinned host memory, rows `pitch` apart: the host side of a raw copy.
    fn pinned(&mut self, bytes: usize, pitch: usize) -> RawSide {
        let mut p = null_mut();
        ok(unsafe { sys::cuMemHostAlloc(&mut p, bytes, 0) });
        self.host.push(p);
        RawSide::Host(p, pitch)
    }

    /// `bytes` of managed memory, written on the host.
    fn managed(&mut self, bytes: usize) -> sys::CUdeviceptr {
        let mut p = 0;
        ok(unsafe { sys::cuMemAllocManaged(&mut p, bytes, 1) }); // CU_MEM_ATTACH_GLOBAL
        unsafe { std::ptr::write_bytes(p as usize as *mut u8, 0, bytes) };
        self.device.push(p);
        p
    }

    fn free(self) {
        for p in self.device {
            ok(unsafe { sys::cuMemFree_v2(p) });
        }
        for p in self.host {
            ok(unsafe { sys::cuMemFreeHost(p) });
        }
    }
}

/// Moves managed memory to `to` (`HOST` or a device) and waits: the state each prefetch
/// measurement starts from, set the same way for all three columns, untimed.
fn place(p: sys::CUdeviceptr, to: sys::CUdevice, stream: sys::CUstream) {
    ok(unsafe { sys::cuMemPrefetchAsync(p, PREFETCH, to, stream) });
    ok(unsafe { sys::cuStreamSynchronize(stream) });
}

/// How a copy row is timed: `n` copies at a time, in ns each, or one copy of `bytes`, in
/// GB/s.
#[derive(Clone, Copy)]
enum Timing {
    Each(usize),
    Moving(usize),
}

/// A row of one copy made by cuda-brand (`ours`) and by raw calls (`raw`); cudarc 0.19.10
/// has no 2D or 3D copy.
fn copy_row<'a>(
    name: &'static str,
    timing: Timing,
    mut ours: impl FnMut() + 'a,
    mut raw: impl FnMut() + 'a,
) -> Row<'a> {
    let timed = move |f: &mut dyn FnMut()| match timing {
        Timing::Each(n) => per_op(n, f),
        Timing::Moving(bytes) => bandwidth(bytes, f),
    };
    Row {
        name,
        unit: match timing {
            Timing::Each(_) => Unit::Ns,
            Timing::Moving(_) => Unit::GBps,
        },
        ours: Box::new(move || timed(&mut ours)),
        raw: Box::new(move || timed(&mut raw)),
        cudarc: None,
    }
}

/// A raw copy descriptor and its two calls.
trait RawCopy: Copy {
    /// `cuMemcpy2D` / `cuMemcpy3D`.
    unsafe fn copy(&self) -> sys::CUresult;
    /// `cuMemcpy2DAsync` / `cuMemcpy3DAsync`.
    unsafe fn copy_async(&self, stream: sys::CUstream) -> sys::CUresult;
}

impl RawCopy for sys::CUDA_MEMCPY2D {
    unsafe fn copy(&self) -> sys::CUresult {
        unsafe { sys::cuMemcpy2D_v2(self) }
    }
    unsafe fn copy_async(&self, stream: sys::CUstream) -> sys::CUresult {
        unsafe { sys::cuMemcpy2DAsync_v2(self, stream) }
    }
}

impl RawCopy for sys::CUDA_MEMCPY3D {
    unsafe fn copy(&self) -> sys::CUresult {
        unsafe { sys::cuMemcpy3D_v2(self) }
    }
    unsafe fn copy_async(&self, stream: sys::CUstream) -> sys::CUresult {
        unsafe { sys::cuMemcpy3DAsync_v2(self, stream) }
    }
}

/// The synchronous raw copy `c`, then (`complete`) a wait for the legacy stream.
fn raw_sync(c: impl RawCopy, complete: bool) -> impl FnMut() {
    move || unsafe {
        ok(c.copy());
        if complete {
            ok(sys::cuStreamSynchronize(null_mut()));
        }
    }
}

/// The raw copy `c` queued on `stream`, then a wait for it.
fn raw_async(c: impl RawCopy, stream: sys::CUstream) -> impl FnMut() {
    move || unsafe {
        ok(c.copy_async(stream));
        ok(sys::cuStreamSynchronize(stream));
    }
}

/// Alloc+free of `bytes` from `pool`, one at a time on the legacy stream.
fn pool_row<'a, 'ctx>(
    name: &'static str,
    bytes: usize,
    ctx: ContextGuard<'ctx>,
    pool: &'a MemoryPool<'ctx>,
    rs: &'a Arc<rc::CudaStream>,
) -> Row<'a> {
    // SAFETY: the raw column allocates from the pool, while it lives, only memory it frees.
    let raw_pool = unsafe { pool.as_raw() }.cast::<c_void>();
    Row {
        name,
        unit: Unit::Ns,
        ours: Box::new(move || {
            per_op(1000, || {
                // SAFETY: never read.
                let buf = unsafe { DeviceBuffer::<u8>::uninitialized_in(ctx, pool, bytes) };
                drop(black_box(buf.unwrap()))
            })
        }),
        raw: Box::new(move || {
            per_op(1000, || unsafe {
                let mut p = 0;
                ok(cu_mem_alloc_from_pool_async(
                    &mut p,
                    bytes,
                    raw_pool,
                    null_mut(),
                ));
                ok(cu_mem_free_async(black_box(p), null_mut()));
            })
        }),
        // SAFETY: never read.
        cudarc: Some(Box::new(move || {
            per_op(1000, || {
                drop(black_box(unsafe { rs.alloc::<u8>(bytes) }.unwrap()))
            })
        })),
    }
}

fn run(ctx: ContextGuard<'_>, device: &Device, out: Option<&str>) -> Result<(), Error> {
    // cudarc on the same (primary) context, so all three share one context.
    let rctx = rc::CudaContext::new(0).expect("cudarc context");
    let rstream = rctx.new_stream().expect("cudarc stream");
    let rdefault = rctx.default_stream();
    // SAFETY (of the raw handles here): the raw column uses them while their values live,
    // destroys none of them, and touches only memory of its own or memory no scope uses.
    let raw_ctx = unsafe { ctx.as_raw() }.cast();
    ok(unsafe { sys::cuCtxSetCurrent(raw_ctx) });
    let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
    let (st, rs, rd, rc_ctx) = (&stream, &rstream, &rdefault, &rctx);
    // SAFETY: as for `raw_ctx`.
    let raw_stream = unsafe { stream.as_raw() }.cast();
    let dev = device.as_raw();
    // A live allocation, so that allocations measure the allocator, not the first mapping.
    let _keep = DeviceBuffer::<u8>::zeroed(ctx, MIB)?;
    let mut raw = RawMemory::default();

    // ---- memory pools ------------------------------------------------------------------
    let pool = MemoryPool::new(ctx)?;
    pool.set_release_threshold(u64::MAX)?;
    let pool = &pool;

    // ---- managed memory ----------------------------------------------------------------
    let managed = ManagedBuffer::<u8>::zeroed(ctx, PREFETCH)?;
    // SAFETY: as for `raw_ctx`; only prefetched, while `managed` lives.
    let managed_ptr = unsafe { managed.as_device().as_device_ptr() };
    let managed = &managed;
    let raw_managed = raw.managed(PREFETCH);
    // SAFETY: written below before it is read (zeroed on the host).
    let mut rmanaged = unsafe { rctx.alloc_unified::<u8>(PREFETCH, true) }.expect("cudarc");
    rmanaged.as_mut_slice().expect("cudarc host access").fill(0);
    let rmanaged_ptr = rmanaged.device_ptr(rd).0;
    let rmanaged = &rmanaged;

    // ---- pitched copies ----------------------------------------------------------------
    // the crate's buffers and pinned host memory, and the same made raw
    let host_2d = |[w, h]: [usize; 2]| PinnedBuffer::<u8>::zeroed(ctx, w * h);
    let (small_2d, small_2d_host) = (
        std::cell::RefCell::new(DeviceBuffer2D::<u8>::zeroed(ctx, SMALL_2D[0], SMALL_2D[1])?),
        std::cell::RefCell::new(host_2d(SMALL_2D)?),
    );
    let (large_2d, large_2d_host) = (
        std::cell::RefCell::new(DeviceBuffer2D::<u8>::zeroed(ctx, LARGE_2D[0], LARGE_2D[1])?),
        std::cell::RefCell::new(host_2d(LARGE_2D)?),
    );
    let host_3d = |[w, h, d]: [usize; 3]| PinnedBuffer::<u8>::zeroed(ctx, w * h * d);
    let zeroed_3d = |[w, h, d]: [usize; 3]| DeviceBuffer3D::<u8>::zeroed(ctx, w, h, d);
    let (small_3d, small_3d_host) = (
        std::cell::RefCell::new(zeroed_3d(SMALL_3D)?),
        std::cell::RefCell::new(host_3d(SMALL_3D)?),
    );
    let (large_3d, large_3d_host) = (
        std::cell::RefCell::new(zeroed_3d(LARGE_3D)?),
        std::cell::RefCell::new(host_3d(LARGE_3D)?),
    );
    let raw_small_2d = raw.pitched(SMALL_2D[0], SMALL_2D[1]);
    let raw_small_2d_host = raw.pinned(SMALL_2D[0] * SMALL_2D[1], SMALL_2D[0]);
    let raw_large_2d = raw.pitched(LARGE_2D[0], LARGE_2D[1]);
    let raw_large_2d_host = raw.pinned(LARGE_2D[0] * LARGE_2D[1], LARGE_2D[0]);
    let [w3, h3, d3] = SMALL_3D;
    let raw_small_3d = raw.pitched(w3, h3 * d3);
    let raw_small_3d_host = raw.pinned(w3 * h3 * d3, w3);
    let [w3, h3, d3] = LARGE_3D;
    let raw_large_3d = raw.pitched(w3, h3 * d3);
    let raw_large_3d_host = raw.pinned(w3 * h3 * d3, w3);
    let (small_2d, small_2d_host, large_2d, large_2d_host) =
        (&small_2d, &small_2d_host, &large_2d, &large_2d_host);
    let (small_3d, small_3d_host, large_3d, large_3d_host) =
        (&small_3d, &small_3d_host, &large_3d, &large_3d_host);
    let large_2d_bytes = LARGE_2D[0] * LARGE_2D[1];
    let large_3d_bytes = LARGE_3D.iter().product();
    // the host-to-device copies of two rows each (raw bare, and raw made complete)
    let small_2d_in = move || {
        let (mut d, h) = (small_2d.borrow_mut(), small_2d_host.borrow());
        d.copy_from_host(&h, SMALL_2D[0]).unwrap()
    };
    let small_3d_in = move || {
        let (mut d, h) = (small_3d.borrow_mut(), small_3d_host.borrow());
        d.copy_from_host(&h, SMALL_3D[0], SMALL_3D[1]).unwrap()
    };
    ok(unsafe { sys::cuCtxSetCurrent(raw_ctx) });

    let mut rows: Vec<Row<'_>> = vec![
        pool_row(
            "MemoryPool (own, threshold unlimited): alloc+free 1 KiB, DeviceBuffer::uninitialized_in",
            KIB,
            ctx,
            pool,
            rs,
        ),
        pool_row(
            "MemoryPool (own, threshold unlimited): alloc+free 1 MiB, DeviceBuffer::uninitialized_in",
            MIB,
            ctx,
            pool,
            rs,
        ),
        Row {
            name: "ManagedBuffer::zeroed 1 MiB + drop (all three zero it on the host)",
            unit: Unit::Ns,
            ours: Box::new(move || {
                per_op(20, || {
                    drop(black_box(ManagedBuffer::<u8>::zeroed(ctx, MIB).unwrap()))
                })
            }),
            raw: Box::new(move || {
                per_op(20, || unsafe {
                    let mut p = 0;
                    ok(sys::cuMemAllocManaged(&mut p, MIB, 1));
                    std::ptr::write_bytes(p as usize as *mut u8, 0, MIB);
                    ok(sys::cuMemFree_v2(black_box(p)));
                })
            }),
            cudarc: Some(Box::new(move || {
                per_op(20, || {
                    // SAFETY: written before it is dropped.
                    let mut u = unsafe { rc_ctx.alloc_unified::<u8>(MIB, true) }.unwrap();
                    u.as_mut_slice().unwrap().fill(0);
                    drop(black_box(u));
                })
            })),
        },
        Row {
            name: "ManagedBuffer: prefetch 64 MiB host to device in a scope (+ its sync)",
            unit: Unit::GBps,
            ours: Box::new(move || {
                place(managed_ptr, HOST, raw_stream);
                let to = MemoryLocation::Device(*device);
                bandwidth(PREFETCH, || {
                    st.scope(|s| s.prefetch(managed.as_device(), to)).unwrap()
                })
            }),
            raw: Box::new(move || {
                place(raw_managed, HOST, raw_stream);
                bandwidth(PREFETCH, || unsafe {
                    ok(sys::cuMemPrefetchAsync(
                        raw_managed,
                        PREFETCH,
                        dev,
                        raw_stream,
                    ));
                    ok(sys::cuStreamSynchronize(raw_stream));
                })
            }),
            cudarc: Some(Box::new(move || {
                place(rmanaged_ptr, HOST, raw_stream);
                bandwidth(PREFETCH, || {
                    rmanaged.prefetch().unwrap();
                    rd.synchronize().unwrap();
                })
            })),
        },
        Row {
            name: "ManagedBuffer: prefetch 64 MiB device to host in a scope (+ its sync)",
            unit: Unit::GBps,
            ours: Box::new(move || {
                place(managed_ptr, dev, raw_stream);
                bandwidth(PREFETCH, || {
                    st.scope(|s| s.prefetch(managed.as_device(), MemoryLocation::Host))
                        .unwrap()
                })
            }),
            raw: Box::new(move || {
                place(raw_managed, dev, raw_stream);
                bandwidth(PREFETCH, || unsafe {
                    ok(sys::cuMemPrefetchAsync(
                        raw_managed,
                        PREFETCH,
                        HOST,
                        raw_stream,
                    ));
                    ok(sys::cuStreamSynchronize(raw_stream));
                })
            }),
            cudarc: None,
        },
        copy_row(
            "2D copy host to device, 64 rows of 64 B, synchronous (raw: cuMemcpy2D)",
            Timing::Each(500),
            small_2d_in,
            raw_sync(raw_2d(raw_small_2d, raw_small_2d_host, SMALL_2D), false),
        ),
        copy_row(
            "the same, raw made complete (+ cuStreamSynchronize(NULL) after the copy)",
            Timing::Each(500),
            small_2d_in,
            raw_sync(raw_2d(raw_small_2d, raw_small_2d_host, SMALL_2D), true),
        ),
        copy_row(
            "2D copy device to host, 64 rows of 64 B, synchronous (raw: cuMemcpy2D)",
            Timing::Each(500),
            move || {
                let (d, mut h) = (small_2d.borrow(), small_2d_host.borrow_mut());
                d.copy_to_host(&mut h, SMALL_2D[0]).unwrap()
            },
            raw_sync(raw_2d(raw_small_2d_host, raw_small_2d, SMALL_2D), false),
        ),
        copy_row(
            "2D copy host to device, 64 rows of 64 B, in a scope (raw: cuMemcpy2DAsync + stream sync)",
            Timing::Each(500),
            move || {
                let (mut d, h) = (small_2d.borrow_mut(), small_2d_host.borrow());
                st.scope(|s| s.copy_2d_from_host(&mut d, &h, SMALL_2D[0]))
                    .unwrap()
            },
            raw_async(
                raw_2d(raw_small_2d, raw_small_2d_host, SMALL_2D),
                raw_stream,
            ),
        ),
        copy_row(
            "2D copy host to device, 16 MiB (2048 rows of 8 KiB) from pinned memory, synchronous",
            Timing::Moving(large_2d_bytes),
            move || {
                let (mut d, h) = (large_2d.borrow_mut(), large_2d_host.borrow());
                d.copy_from_host(&h, LARGE_2D[0]).unwrap()
            },
            raw_sync(raw_2d(raw_large_2d, raw_large_2d_host, LARGE_2D), true),
        ),
        copy_row(
            "2D copy device to host, 16 MiB (2048 rows of 8 KiB) into pinned memory, synchronous",
            Timing::Moving(large_2d_bytes),
            move || {
                let (d, mut h) = (large_2d.borrow(), large_2d_host.borrow_mut());
                d.copy_to_host(&mut h, LARGE_2D[0]).unwrap()
            },
            raw_sync(raw_2d(raw_large_2d_host, raw_large_2d, LARGE_2D), false),
        ),
        copy_row(
            "3D copy host to device, 16 x 16 x 16 B, synchronous (raw: cuMemcpy3D)",
            Timing::Each(500),
            small_3d_in,
            raw_sync(raw_3d(raw_small_3d, raw_small_3d_host, SMALL_3D), false),
        ),
        copy_row(
            "the same, raw made complete (+ cuStreamSynchronize(NULL) after the copy)",
            Timing::Each(500),
            small_3d_in,
            raw_sync(raw_3d(raw_small_3d, raw_small_3d_host, SMALL_3D), true),
        ),
        copy_row(
            "3D copy device to host, 16 x 16 x 16 B, synchronous (raw: cuMemcpy3D)",
            Timing::Each(500),
            move || {
                let (d, mut h) = (small_3d.borrow(), small_3d_host.borrow_mut());
                d.copy_to_host(&mut h, SMALL_3D[0], SMALL_3D[1]).unwrap()
            },
            raw_sync(raw_3d(raw_small_3d_host, raw_small_3d, SMALL_3D), false),
        ),
        copy_row(
            "3D copy host to device, 16 x 16 x 16 B, in a scope (raw: cuMemcpy3DAsync + stream sync)",
            Timing::Each(500),
            move || {
                let (mut d, h) = (small_3d.borrow_mut(), small_3d_host.borrow());
                st.scope(|s| s.copy_3d_from_host(&mut *d, &h, SMALL_3D[0], SMALL_3D[1]))
                    .unwrap()
            },
            raw_async(
                raw_3d(raw_small_3d, raw_small_3d_host, SMALL_3D),
                raw_stream,
            ),
        ),
        copy_row(
            "3D copy host to device, 16 MiB (64 x 256 rows of 1 KiB) from pinned memory, synchronous",
            Timing::Moving(large_3d_bytes),
            move || {
                let (mut d, h) = (large_3d.borrow_mut(), large_3d_host.borrow());
                d.copy_from_host(&h, LARGE_3D[0], LARGE_3D[1]).unwrap()
            },
            raw_sync(raw_3d(raw_large_3d, raw_large_3d_host, LARGE_3D), true),
        ),
        copy_row(
            "3D copy device to host, 16 MiB (64 x 256 rows of 1 KiB) into pinned memory, synchronous",
            Timing::Moving(large_3d_bytes),
            move || {
                let (d, mut h) = (large_3d.borrow(), large_3d_host.borrow_mut());
                d.copy_to_host(&mut h, LARGE_3D[0], LARGE_3D[1]).unwrap()
            },
            raw_sync(raw_3d(raw_large_3d_host, raw_large_3d, LARGE_3D), false),
        ),
        Row {
            name: "memory_info (raw: cuMemGetInfo)",
            unit: Unit::Ns,
            ours: Box::new(move || {
                per_op(2000, || {
                    black_box(ctx.memory_info().unwrap());
                })
            }),
            raw: Box::new(move || {
                per_op(2000, || unsafe {
                    let (mut free, mut total) = (0, 0);
                    ok(sys::cuMemGetInfo_v2(&mut free, &mut total));
                    black_box((free, total));
                })
            }),
            cudarc: Some(Box::new(|| {
                per_op(2000, || {
                    black_box(rctx.mem_get_info().unwrap());
                })
            })),
        },
    ];

    // the current context must be ours again whatever cudarc did
    let medians = harness::measure(&mut rows, ROUNDS, || {
        ok(unsafe { sys::cuCtxSetCurrent(raw_ctx) })
    });
    harness::report(device, "memory paths", ROUNDS, &rows, &medians, out)?;
    drop(rows);
    raw.free();
    Ok(())
}

// CUDA 11.2 entry points, newer than the bindings (linked like the rest of the raw column).
unsafe extern "C" {
    #[link_name = "cuMemAllocFromPoolAsync"]
    fn cu_mem_alloc_from_pool_async(
        p: *mut sys::CUdeviceptr,
        bytes: usize,
        pool: *mut c_void,
        stream: sys::CUstream,
    ) -> sys::CUresult;
    #[link_name = "cuMemFreeAsync"]
    fn cu_mem_free_async(p: sys::CUdeviceptr, stream: sys::CUstream) -> sys::CUresult;
}
