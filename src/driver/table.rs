//! The driver's entry points: declared once (the list below), loaded once per process from
//! the driver library, each called through a method of [`Api`] that returns the raw
//! `CUresult`. Also the minimum driver and what a missing entry point says.
//!
//! Only entry points the crate calls are declared, each where a build calls it: the impl
//! allows no dead code, so an entry point that no code of a build calls is a warning (an
//! error under CI's `-D warnings`), and one that only a feature calls is declared under
//! that feature's `cfg`.

use std::ffi::{OsStr, c_char, c_int, c_uint, c_ulonglong, c_void};
use std::sync::OnceLock;

use super::dylib::{Library, NotFound, Spec, no_dirs};
use super::ffi::*;
use super::{CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUmodule, CUstream, CUuuid};
use crate::error::{Error, ErrorCode, Result};

/// The minimum driver: CUDA 11.4 (R470). Entry points newer than this are optional.
pub(crate) const MINIMUM_DRIVER: i32 = 11040;

/// The environment variable that names the driver library to load instead of the
/// system's (a path, or any name the platform's loader resolves).
pub(crate) const DRIVER_LIBRARY_VAR: &str = "CUDA_BRAND_DRIVER_LIBRARY";

/// How to get a driver library, the end of every "not found" error.
const GET_A_DRIVER: &str = "install the NVIDIA driver (CUDA 11.4, R470, or newer), or on \
     Debian without a GPU run cuda-brand's scripts/install-libcuda (it installs libcuda1, \
     whose cuInit reports no device)";

/// The driver library: `libcuda.so.1`, then `libcuda.so` (Windows: `nvcuda.dll`), or the
/// file [`DRIVER_LIBRARY_VAR`] names.
pub(super) const DRIVER: Spec = Spec {
    call: Error::LOAD_DRIVER,
    var: DRIVER_LIBRARY_VAR,
    #[cfg(windows)]
    names: &["nvcuda.dll"],
    #[cfg(not(windows))]
    names: &["libcuda.so.1", "libcuda.so"],
    dirs: no_dirs,
    not_found: ErrorCode::DriverNotFound,
    not_found_detail: driver_not_found,
    // `cuDriverGetVersion` missing: the version is unknown (the table's entries, read after
    // it, name the version in `lacks_required`)
    lacks: |file, symbol| lacks_required(file, symbol, 0),
};

/// The detail of [`ErrorCode::DriverNotFound`]: what was tried, and how to get a driver.
fn driver_not_found(not_found: &NotFound<'_>) -> String {
    let failures = &not_found.failures;
    match not_found.file {
        Some(file) => format!(
            "{DRIVER_LIBRARY_VAR}={} could not be loaded ({failures}): point it at the driver \
             library, or unset it; {GET_A_DRIVER}",
            file.to_string_lossy(),
        ),
        None => format!(
            "{} could not be loaded ({failures}): {GET_A_DRIVER}, or set {DRIVER_LIBRARY_VAR} \
             to the library's path",
            DRIVER.names.join(" and "),
        ),
    }
}

/// Generates the driver table from one list of entry points.
///
/// Each entry is `required fn name(args);` or `optional(VERSION) fn name(args);`, where
/// `name` is the exported symbol, the arguments are those of `cuda.h` (enums as `c_int`,
/// enum out-parameters as integer pointers), every entry point returns the raw `CUresult`
/// as `u32`, and `VERSION` is the first CUDA version that has it (`cuDriverGetVersion`
/// style, 12040 for 12.4). An entry may carry `#[cfg(...)]` attributes, applied wherever
/// the entry appears: an entry point that only a feature calls is declared
/// `#[cfg(feature = "...")] optional(VERSION)`, so that the minimal build neither declares
/// nor loads it, and a driver without it fails no load, only that feature's first call.
/// Required entry points are those of [`MINIMUM_DRIVER`] that the minimal build calls. It
/// generates:
///
/// - [`Api`], one function pointer per entry (an `Option` for optional ones), filled by
///   `Api::load_from` from the opened [`Library`]; a missing required symbol fails the load
///   with an error naming it, a missing optional one is `None`;
/// - for each entry a method `Api::name(&self, args) -> Result<u32>`, `#[inline(always)]`,
///   which calls the pointer (or, for an optional entry the driver lacks, returns the
///   "needs a CUDA X driver" error);
/// - under `cfg(test)`, `Api::fake(version)`, a table whose required entries return
///   `FAKE_RESULT` without touching any driver and whose optional entries are absent.
macro_rules! driver_table {
    ($(
        $(#[$meta:meta])*
        $kind:ident $(($since:literal))? fn $name:ident($($arg:ident: $ty:ty),* $(,)?);
    )*) => {
        /// The driver's entry points, loaded once from the driver library (see the driver
        /// layer's docs), each declared once below.
        ///
        /// # Safety of the calls
        ///
        /// Stated here once for every call the wrappers of the driver layer make through the
        /// table (with `cu!` and `cu_raw!`):
        ///
        /// - each pointer was read from the library under the symbol's own name and has the
        ///   signature `cuda.h` gives that symbol, with the raw `u32` for `CUresult` (valid
        ///   for any code) and integers for enums; the library is never unloaded, so the
        ///   pointers stay valid for the whole process;
        /// - every out-pointer a wrapper passes is `&mut` of a live local (or of a live
        ///   buffer whose length it passes) with the C type's size and alignment;
        /// - every other pointer, device address or handle is either made by the wrapper
        ///   itself (a null stream, a `CStr`, option arrays it owns for the call), or comes
        ///   from the wrapper's caller, and then the wrapper is an `unsafe fn` whose
        ///   `# Safety` section states what the driver requires of it (a live handle, a
        ///   range valid for the access until the stream has run the operation, ...);
        /// - the driver checks every plain value (flags, sizes, ordinals, attributes) and
        ///   reports a bad one as an error code, not undefined behaviour.
        pub(crate) struct Api {
            /// The driver's CUDA version from `cuDriverGetVersion` (12020 for 12.2), or 0
            /// if it did not say.
            version: i32,
            $(
                $(#[$meta])*
                $name: driver_table!(
                    @field $kind $(($since))? unsafe extern "C" fn($($ty),*) -> u32
                ),
            )*
        }

        impl Api {
            $(
                $(#[$meta])*
                #[inline(always)]
                #[allow(clippy::too_many_arguments)]
                pub(crate) unsafe fn $name(&self, $($arg: $ty),*) -> Result<u32> {
                    let f = driver_table!(@entry self $name $kind $(($since))?);
                    // SAFETY: the caller keeps the rules of the table ("Safety of the calls").
                    Ok(unsafe { f($($arg),*) })
                }
            )*

            /// Reads every entry point from `library`, a driver of CUDA `version`.
            fn load_from(library: &Library, version: i32) -> Result<Api> {
                Ok(Api {
                    version,
                    $(
                        $(#[$meta])*
                        $name: driver_table!(
                            @load library version $name $kind $(($since))?
                            unsafe extern "C" fn($($ty),*) -> u32
                        ),
                    )*
                })
            }

            /// A table that reaches no driver: required entries return `FAKE_RESULT`,
            /// optional ones are absent, and the driver says it is CUDA `version`.
            #[cfg(test)]
            fn fake(version: i32) -> Api {
                Api {
                    version,
                    $($(#[$meta])* $name: driver_table!(@fake $kind $(($since))? ($($ty),*)),)*
                }
            }

            /// Every optional entry point: its name, the CUDA version that has it, and
            /// whether this driver does.
            #[cfg(test)]
            #[allow(clippy::vec_init_then_push)]
            fn optional_entries(&self) -> Vec<(&'static str, i32, bool)> {
                let mut all = Vec::new();
                $($(#[$meta])* driver_table!(@optional all self $name $kind $(($since))?);)*
                all
            }
        }
    };

    (@field required $f:ty) => { $f };
    (@field optional($since:literal) $f:ty) => { Option<$f> };

    (@entry $api:ident $name:ident required) => { $api.$name };
    (@entry $api:ident $name:ident optional($since:literal)) => {
        match $api.$name {
            Some(f) => f,
            None => return Err($api.lacks(stringify!($name), $since)),
        }
    };

    (@load $library:ident $version:ident $name:ident required $f:ty) => {
        // SAFETY: the symbol has the signature `$f` (the table's first rule).
        match unsafe { $library.optional::<$f>(stringify!($name)) } {
            Some(f) => f,
            None => {
                return Err(lacks_required($library.name(), stringify!($name), $version));
            }
        }
    };
    (@load $library:ident $version:ident $name:ident optional($since:literal) $f:ty) => {
        // SAFETY: the symbol has the signature `$f` (the table's first rule).
        unsafe { $library.optional::<$f>(stringify!($name)) }
    };

    (@fake required ($($ty:ty),*)) => {{
        unsafe extern "C" fn fake($(_: $ty),*) -> u32 {
            FAKE_RESULT
        }
        fake
    }};
    (@fake optional($since:literal) ($($ty:ty),*)) => { None };

    (@optional $all:ident $api:ident $name:ident required) => {};
    (@optional $all:ident $api:ident $name:ident optional($since:literal)) => {
        $all.push((stringify!($name), $since, $api.$name.is_some()))
    };
}

/// What every required entry of [`Api::fake`] returns (`CUDA_ERROR_UNKNOWN`).
#[cfg(test)]
const FAKE_RESULT: u32 = 999;

driver_table! {
    // Initialisation, version, devices.
    required fn cuInit(flags: c_uint);
    required fn cuDriverGetVersion(version: *mut c_int);
    required fn cuDeviceGetCount(count: *mut c_int);
    required fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int);
    required fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice);
    required fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice);
    required fn cuDeviceGetAttribute(value: *mut c_int, attrib: c_int, dev: CUdevice);
    required fn cuDeviceGetUuid(uuid: *mut CUuuid, dev: CUdevice);
    required fn cuDeviceCanAccessPeer(can: *mut c_int, dev: CUdevice, peer: CUdevice);

    // Peer access.
    required fn cuCtxEnablePeerAccess(peer: CUcontext, flags: c_uint);
    required fn cuMemcpyPeer(
        dst: CUdeviceptr,
        dst_ctx: CUcontext,
        src: CUdeviceptr,
        src_ctx: CUcontext,
        bytes: usize,
    );
    required fn cuMemcpyPeerAsync(
        dst: CUdeviceptr,
        dst_ctx: CUcontext,
        src: CUdeviceptr,
        src_ctx: CUcontext,
        bytes: usize,
        stream: CUstream,
    );

    // Contexts.
    required fn cuDevicePrimaryCtxRetain(ctx: *mut CUcontext, dev: CUdevice);
    required fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice);
    required fn cuDevicePrimaryCtxSetFlags_v2(dev: CUdevice, flags: c_uint);
    required fn cuDevicePrimaryCtxGetState(dev: CUdevice, flags: *mut c_uint, active: *mut c_int);
    required fn cuCtxCreate_v2(ctx: *mut CUcontext, flags: c_uint, dev: CUdevice);
    required fn cuCtxDestroy_v2(ctx: CUcontext);
    required fn cuCtxPushCurrent_v2(ctx: CUcontext);
    required fn cuCtxPopCurrent_v2(ctx: *mut CUcontext);
    required fn cuCtxGetCurrent(ctx: *mut CUcontext);
    // Only NCCL's interop replaces the top of the context stack (CUDA 4.0).
    #[cfg(feature = "nccl")]
    optional(4000) fn cuCtxSetCurrent(ctx: CUcontext);
    required fn cuCtxGetDevice(dev: *mut CUdevice);
    required fn cuCtxGetFlags(flags: *mut c_uint);
    required fn cuCtxSynchronize();
    required fn cuCtxGetApiVersion(ctx: CUcontext, version: *mut c_uint);
    required fn cuCtxGetCacheConfig(config: *mut c_int);
    required fn cuCtxSetCacheConfig(config: c_int);
    required fn cuCtxGetSharedMemConfig(config: *mut c_int);
    required fn cuCtxSetSharedMemConfig(config: c_int);
    required fn cuCtxGetLimit(value: *mut usize, limit: c_int);
    required fn cuCtxSetLimit(limit: c_int, value: usize);
    required fn cuCtxGetStreamPriorityRange(least: *mut c_int, greatest: *mut c_int);

    // Green contexts (SM partitions): CUDA 12.4, but streams of a green context 12.5.
    // Signatures as in cuda.h 12.4 to 13.x (unchanged; the resource struct is `ffi`'s).
    optional(12040) fn cuDeviceGetDevResource(
        device: CUdevice,
        resource: *mut CUdevResource,
        type_: c_int,
    );
    optional(12040) fn cuDevSmResourceSplitByCount(
        result: *mut CUdevResource,
        nb_groups: *mut c_uint,
        input: *const CUdevResource,
        remaining: *mut CUdevResource,
        use_flags: c_uint,
        min_count: c_uint,
    );
    optional(12040) fn cuDevResourceGenerateDesc(
        desc: *mut CUdevResourceDesc,
        resources: *mut CUdevResource,
        nb_resources: c_uint,
    );
    optional(12040) fn cuGreenCtxCreate(
        green: *mut CUgreenCtx,
        desc: CUdevResourceDesc,
        dev: CUdevice,
        flags: c_uint,
    );
    optional(12040) fn cuGreenCtxDestroy(green: CUgreenCtx);
    optional(12040) fn cuCtxFromGreenCtx(ctx: *mut CUcontext, green: CUgreenCtx);
    optional(12040) fn cuGreenCtxGetDevResource(
        green: CUgreenCtx,
        resource: *mut CUdevResource,
        type_: c_int,
    );
    optional(12050) fn cuGreenCtxStreamCreate(
        stream: *mut CUstream,
        green: CUgreenCtx,
        flags: c_uint,
        priority: c_int,
    );

    // Memory.
    required fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize);
    required fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytes: usize);
    required fn cuMemFree_v2(dptr: CUdeviceptr);
    required fn cuMemAllocPitch_v2(
        dptr: *mut CUdeviceptr,
        pitch: *mut usize,
        width_bytes: usize,
        height: usize,
        element_bytes: c_uint,
    );
    required fn cuMemAllocManaged(dptr: *mut CUdeviceptr, bytes: usize, flags: c_uint);
    // The pre-13.0 ABI (a `CUdevice`); CUDA 13's cuda.h maps the name to
    // cuMemPrefetchAsync_v2 / cuMemAdvise_v2 (a `CUmemLocation`), and drivers keep exporting
    // these symbols for binaries built against older headers.
    required fn cuMemPrefetchAsync(
        dptr: CUdeviceptr,
        bytes: usize,
        dst: CUdevice,
        stream: CUstream,
    );
    required fn cuMemAdvise(dptr: CUdeviceptr, bytes: usize, advice: c_int, device: CUdevice);
    required fn cuMemHostAlloc(pp: *mut *mut c_void, bytes: usize, flags: c_uint);
    required fn cuMemFreeHost(p: *mut c_void);
    required fn cuMemHostRegister_v2(p: *mut c_void, bytes: usize, flags: c_uint);
    required fn cuMemHostUnregister(p: *mut c_void);
    required fn cuMemcpyHtoDAsync_v2(
        dst: CUdeviceptr,
        src: *const c_void,
        bytes: usize,
        stream: CUstream,
    );
    required fn cuMemcpyDtoHAsync_v2(
        dst: *mut c_void,
        src: CUdeviceptr,
        bytes: usize,
        stream: CUstream,
    );
    required fn cuMemcpyDtoDAsync_v2(
        dst: CUdeviceptr,
        src: CUdeviceptr,
        bytes: usize,
        stream: CUstream,
    );
    required fn cuMemcpy2DAsync_v2(copy: *const CUDA_MEMCPY2D, stream: CUstream);
    required fn cuMemcpy3DAsync_v2(copy: *const CUDA_MEMCPY3D, stream: CUstream);
    required fn cuMemsetD8Async(dst: CUdeviceptr, value: u8, n: usize, stream: CUstream);
    required fn cuMemsetD16Async(dst: CUdeviceptr, value: u16, n: usize, stream: CUstream);
    required fn cuMemsetD32Async(dst: CUdeviceptr, value: u32, n: usize, stream: CUstream);
    required fn cuPointerGetAttributes(
        num_attributes: c_uint,
        attributes: *mut c_int,
        data: *mut *mut c_void,
        ptr: CUdeviceptr,
    );

    // Stream-ordered allocation and memory pools (CUDA 11.2: required under an 11.4 minimum).
    required fn cuMemFreeAsync(dptr: CUdeviceptr, stream: CUstream);
    required fn cuMemPoolCreate(pool: *mut CUmemoryPool, props: *const CUmemPoolProps);
    required fn cuMemPoolDestroy(pool: CUmemoryPool);
    required fn cuDeviceGetDefaultMemPool(pool: *mut CUmemoryPool, dev: CUdevice);
    required fn cuMemPoolSetAttribute(pool: CUmemoryPool, attribute: c_int, value: *mut c_void);
    required fn cuMemPoolGetAttribute(pool: CUmemoryPool, attribute: c_int, value: *mut c_void);
    required fn cuMemPoolTrimTo(pool: CUmemoryPool, min_bytes_to_keep: usize);
    required fn cuMemPoolSetAccess(pool: CUmemoryPool, map: *const CUmemAccessDesc, count: usize);
    required fn cuMemAllocFromPoolAsync(
        dptr: *mut CUdeviceptr,
        bytes: usize,
        pool: CUmemoryPool,
        stream: CUstream,
    );

    // Streams and events.
    required fn cuStreamCreateWithPriority(stream: *mut CUstream, flags: c_uint, priority: c_int);
    required fn cuStreamDestroy_v2(stream: CUstream);
    required fn cuStreamSynchronize(stream: CUstream);
    required fn cuStreamQuery(stream: CUstream);
    required fn cuStreamWaitEvent(stream: CUstream, event: CUevent, flags: c_uint);
    required fn cuStreamGetPriority(stream: CUstream, priority: *mut c_int);
    required fn cuStreamGetFlags(stream: CUstream, flags: *mut c_uint);
    required fn cuStreamGetCtx(stream: CUstream, ctx: *mut CUcontext);
    required fn cuLaunchHostFunc(stream: CUstream, f: CUhostFn, user_data: *mut c_void);
    required fn cuStreamAddCallback(
        stream: CUstream,
        callback: CUstreamCallback,
        user_data: *mut c_void,
        flags: c_uint,
    );
    required fn cuEventCreate(event: *mut CUevent, flags: c_uint);
    required fn cuEventDestroy_v2(event: CUevent);
    required fn cuEventRecord(event: CUevent, stream: CUstream);
    required fn cuEventSynchronize(event: CUevent);
    required fn cuEventQuery(event: CUevent);
    required fn cuEventElapsedTime(ms: *mut f32, start: CUevent, end: CUevent);

    // Graphs and stream capture.
    required fn cuStreamBeginCapture_v2(stream: CUstream, mode: c_int);
    required fn cuStreamEndCapture(stream: CUstream, graph: *mut CUgraph);
    required fn cuGraphInstantiateWithFlags(
        exec: *mut CUgraphExec,
        graph: CUgraph,
        flags: c_ulonglong,
    );
    required fn cuGraphLaunch(exec: CUgraphExec, stream: CUstream);
    required fn cuGraphExecDestroy(exec: CUgraphExec);
    required fn cuGraphDestroy(graph: CUgraph);
    required fn cuGraphGetNodes(graph: CUgraph, nodes: *mut CUgraphNode, count: *mut usize);
    optional(12000) fn cuGraphExecUpdate_v2(
        exec: CUgraphExec,
        graph: CUgraph,
        result: *mut CUgraphExecUpdateResultInfo,
    );

    // Modules, libraries, functions, launches.
    required fn cuModuleLoadDataEx(
        module: *mut CUmodule,
        image: *const c_void,
        num_options: c_uint,
        options: *mut c_int,
        values: *mut *mut c_void,
    );
    required fn cuModuleUnload(module: CUmodule);
    required fn cuModuleGetFunction(f: *mut CUfunction, module: CUmodule, name: *const c_char);
    required fn cuModuleGetGlobal_v2(
        dptr: *mut CUdeviceptr,
        bytes: *mut usize,
        module: CUmodule,
        name: *const c_char,
    );
    optional(12000) fn cuLibraryLoadData(
        library: *mut CUlibrary,
        code: *const c_void,
        jit_options: *mut c_int,
        jit_option_values: *mut *mut c_void,
        num_jit_options: c_uint,
        library_options: *mut c_int,
        library_option_values: *mut *mut c_void,
        num_library_options: c_uint,
    );
    optional(12000) fn cuLibraryUnload(library: CUlibrary);
    optional(12000) fn cuLibraryGetKernel(
        kernel: *mut CUkernel,
        library: CUlibrary,
        name: *const c_char,
    );
    optional(12000) fn cuKernelGetFunction(f: *mut CUfunction, kernel: CUkernel);
    required fn cuFuncGetAttribute(value: *mut c_int, attrib: c_int, f: CUfunction);
    required fn cuFuncSetAttribute(f: CUfunction, attrib: c_int, value: c_int);
    required fn cuFuncSetCacheConfig(f: CUfunction, config: c_int);
    optional(12040) fn cuFuncGetParamInfo(
        f: CUfunction,
        index: usize,
        offset: *mut usize,
        size: *mut usize,
    );
    optional(13020) fn cuFuncGetParamCount(f: CUfunction, count: *mut usize);
    required fn cuOccupancyMaxPotentialBlockSize(
        min_grid_size: *mut c_int,
        block_size: *mut c_int,
        f: CUfunction,
        smem_for_block: Option<unsafe extern "C" fn(c_int) -> usize>,
        dynamic_smem: usize,
        block_size_limit: c_int,
    );
    required fn cuOccupancyMaxActiveBlocksPerMultiprocessor(
        blocks: *mut c_int,
        f: CUfunction,
        block_size: c_int,
        dynamic_smem: usize,
    );
    optional(11080) fn cuOccupancyMaxPotentialClusterSize(
        cluster_size: *mut c_int,
        f: CUfunction,
        config: *const CUlaunchConfig,
    );
    required fn cuLaunchKernel(
        f: CUfunction,
        grid_x: c_uint,
        grid_y: c_uint,
        grid_z: c_uint,
        block_x: c_uint,
        block_y: c_uint,
        block_z: c_uint,
        shared_mem_bytes: c_uint,
        stream: CUstream,
        params: *mut *mut c_void,
        extra: *mut *mut c_void,
    );
    required fn cuLaunchCooperativeKernel(
        f: CUfunction,
        grid_x: c_uint,
        grid_y: c_uint,
        grid_z: c_uint,
        block_x: c_uint,
        block_y: c_uint,
        block_z: c_uint,
        shared_mem_bytes: c_uint,
        stream: CUstream,
        params: *mut *mut c_void,
    );
    optional(11080) fn cuLaunchKernelEx(
        config: *const CUlaunchConfig,
        f: CUfunction,
        params: *mut *mut c_void,
        extra: *mut *mut c_void,
    );
}

/// The loaded table; set once, when the load succeeds.
static API: OnceLock<Api> = OnceLock::new();

/// The driver table, loading it on first use.
///
/// The fast path (every call after a successful load) is one atomic load of the
/// `OnceLock`'s state and one branch; the table's address is a constant. The load itself,
/// and every call after a failed one, is out of line.
#[inline(always)]
pub(super) fn api() -> Result<&'static Api> {
    match API.get() {
        Some(api) => Ok(api),
        None => api_slow(),
    }
}

/// Loads the table once per process (later calls get the first outcome).
#[cold]
#[inline(never)]
fn api_slow() -> Result<&'static Api> {
    static OUTCOME: OnceLock<Result<&'static Api>> = OnceLock::new();
    OUTCOME
        .get_or_init(|| {
            let api = Api::load(DRIVER.file_from_env().as_deref())?;
            // The only place that sets `API`, and it runs once: this is the first set.
            Ok(API.get_or_init(|| api))
        })
        .clone()
}

impl Api {
    /// Opens the driver library (`file`, or the platform's default names when `None` or
    /// empty) and reads the table from it. The library is never closed.
    fn load(file: Option<&OsStr>) -> Result<Api> {
        let library = Library::open(&DRIVER, file)?;
        let name = library.name();
        // SAFETY: cuDriverGetVersion has this signature in every driver.
        let get_version = unsafe {
            library.required::<unsafe extern "C" fn(*mut c_int) -> u32>("cuDriverGetVersion")
        }?;
        let mut version = 0;
        // SAFETY: takes only its out-pointer (a live local) and may be called before cuInit.
        if unsafe { get_version(&mut version) } != 0 {
            version = 0;
        }
        if version != 0 && version < MINIMUM_DRIVER {
            return Err(Error::with_detail(
                Error::LOAD_DRIVER,
                ErrorCode::DriverTooOld,
                format!(
                    "cuda-brand needs {}; {name} is {}",
                    driver_for(MINIMUM_DRIVER),
                    cuda_version(version)
                ),
            ));
        }
        Api::load_from(&library, version)
    }

    /// The error of an optional entry point that this driver lacks.
    #[cold]
    #[inline(never)]
    fn lacks(&self, call: &'static str, since: i32) -> Error {
        let detail = if self.version >= since {
            // new enough, and still without it (a stub or a stripped library)
            format!(
                "this driver ({}) has no {call}, which every driver of {} or newer has",
                cuda_version(self.version),
                cuda_version(since),
            )
        } else {
            format!(
                "{call} needs {}; this driver is {}",
                driver_for(since),
                cuda_version(self.version)
            )
        };
        Error::with_detail(call, ErrorCode::DriverTooOld, detail)
    }
}

/// The load error for a library that lacks a required entry point.
#[cold]
fn lacks_required(file: &str, symbol: &str, version: i32) -> Error {
    Error::with_detail(
        Error::LOAD_DRIVER,
        ErrorCode::DriverTooOld,
        format!(
            "{file} has no {symbol}: cuda-brand needs {}; this driver is {}",
            driver_for(MINIMUM_DRIVER),
            cuda_version(version)
        ),
    )
}

/// `"CUDA 12.2"` for 12020; `"of an unknown version"` for 0.
fn cuda_version(version: i32) -> String {
    match version {
        0 => "of an unknown version".to_owned(),
        v => format!("CUDA {}.{}", v / 1000, v % 1000 / 10),
    }
}

/// `"a CUDA 11.2 driver (R460 or newer)"` for 11020: the driver branch that first shipped
/// each CUDA version (NVIDIA's CUDA toolkit release notes, Linux).
fn driver_for(version: i32) -> String {
    let branch = match version {
        11000 => Some(450),
        11010 => Some(455),
        11020 => Some(460),
        11030 => Some(465),
        11040 => Some(470),
        11050 => Some(495),
        11060 => Some(510),
        11070 => Some(515),
        11080 => Some(520),
        12000 => Some(525),
        12010 => Some(530),
        12020 => Some(535),
        12030 => Some(545),
        12040 => Some(550),
        12050 => Some(555),
        12060 => Some(560),
        12080 => Some(570),
        12090 => Some(575),
        13000 => Some(580),
        _ => None,
    };
    match branch {
        Some(r) => format!("a {} driver (R{r} or newer)", cuda_version(version)),
        None => format!("a {} driver or newer", cuda_version(version)),
    }
}

/// The CUDA version of the loaded driver (as `cuDriverGetVersion` said when it was loaded;
/// 0 if it did not say).
#[inline]
pub(crate) fn loaded_version() -> Result<i32> {
    api().map(|api| api.version)
}

/// `Ok` if the loaded driver has every entry point of green contexts (SM partitions);
/// otherwise the error of the first it lacks, naming the CUDA version it needs (12.4, or
/// 12.5 for `cuGreenCtxStreamCreate`) and the installed driver's.
pub(crate) fn green_entries() -> Result<()> {
    api()?.green_entries()
}

impl Api {
    /// See [`green_entries`].
    fn green_entries(&self) -> Result<()> {
        let entries = [
            (
                "cuDeviceGetDevResource",
                self.cuDeviceGetDevResource.is_some(),
                12040,
            ),
            (
                "cuDevSmResourceSplitByCount",
                self.cuDevSmResourceSplitByCount.is_some(),
                12040,
            ),
            (
                "cuDevResourceGenerateDesc",
                self.cuDevResourceGenerateDesc.is_some(),
                12040,
            ),
            ("cuGreenCtxCreate", self.cuGreenCtxCreate.is_some(), 12040),
            ("cuGreenCtxDestroy", self.cuGreenCtxDestroy.is_some(), 12040),
            ("cuCtxFromGreenCtx", self.cuCtxFromGreenCtx.is_some(), 12040),
            (
                "cuGreenCtxGetDevResource",
                self.cuGreenCtxGetDevResource.is_some(),
                12040,
            ),
            (
                "cuGreenCtxStreamCreate",
                self.cuGreenCtxStreamCreate.is_some(),
                12050,
            ),
        ];
        match entries.iter().find(|(_, present, _)| !present) {
            None => Ok(()),
            Some(&(name, _, since)) => Err(self.lacks(name, since)),
        }
    }
}

/// Which of the two parameter queries the loaded driver has: `(cuFuncGetParamInfo,
/// cuFuncGetParamCount)`; both `false` where no driver could be loaded.
pub(crate) fn param_queries() -> (bool, bool) {
    match api() {
        Ok(api) => (
            api.cuFuncGetParamInfo.is_some(),
            api.cuFuncGetParamCount.is_some(),
        ),
        Err(_) => (false, false),
    }
}

#[cfg(test)]
mod tests;
