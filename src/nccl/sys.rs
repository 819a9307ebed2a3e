//! The private NCCL layer: the only code that calls into the NCCL library.
//!
//! # Loading
//!
//! As with the driver, nothing links against NCCL: `libnccl.so.2` (then `libnccl.so`) is
//! opened at run time by the crate's one loader (`driver::dylib`), on the first call that
//! needs it and once per process; `CUDA_BRAND_NCCL_LIBRARY=/path/to/libnccl.so.2` loads
//! that file instead. A library that cannot be opened is an [`Error`] with
//! [`ErrorCode::NcclNotFound`]; one older than NCCL 2.12, or without an entry point the
//! crate needs, [`ErrorCode::NcclTooOld`]. Every call then returns that error.
//!
//! # The context stack
//!
//! NCCL is built on the CUDA runtime and calls `cudaSetDevice` inside `ncclCommInitAll`,
//! `ncclCommInitRank`, `ncclGroupEnd` (and so inside every collective issued outside a
//! group) and `ncclCommDestroy`. `cudaSetDevice` *replaces* the top of the calling thread's
//! context stack with the device's primary context (or pushes it onto an empty stack), and
//! does not always put back what it replaced (not on its error paths). The crate keeps the
//! stack exactly as it was around every NCCL call: [`keep_stack`] pushes the context the
//! call belongs to, runs it, puts back the top of the stack if NCCL changed it
//! (`cuCtxSetCurrent`), and pops.

#![allow(non_camel_case_types, non_snake_case)]

use std::ffi::{OsStr, c_char, c_int, c_void};
use std::ptr::NonNull;
use std::sync::OnceLock;

use cuda_driver_sys::CUctx_st;

use super::NcclCode;
use crate::driver::dylib::{Library, NotFound, Spec, entry_points, no_dirs};
use crate::driver::{self, CUcontext, CUdeviceptr, CUstream};
use crate::error::{Error, ErrorCode, Invalid, Result};

/// `struct ncclComm` (opaque).
#[repr(C)]
pub struct ncclComm {
    _opaque: [u8; 0],
}

/// `ncclComm_t`: an NCCL communicator handle.
pub type ncclComm_t = *mut ncclComm;

/// `NCCL_UNIQUE_ID_BYTES`.
pub(crate) const UNIQUE_ID_BYTES: usize = 128;

/// `ncclUniqueId`: `struct { char internal[128]; }`, passed by value to
/// `ncclCommInitRank`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct ncclUniqueId {
    pub(crate) internal: [u8; UNIQUE_ID_BYTES],
}

/// The minimum NCCL: 2.12 (`ncclGetVersion` code 21200), which has every entry point and
/// reduction this crate uses (`ncclAvg` came in 2.10, `ncclCommGetAsyncError` in 2.4,
/// point-to-point calls in 2.7); `ncclGetLastError` (2.13) is optional.
pub(crate) const MINIMUM_NCCL: i32 = 21200;

/// The environment variable that names the NCCL library to load instead of the default
/// names.
pub(crate) const NCCL_LIBRARY_VAR: &str = "CUDA_BRAND_NCCL_LIBRARY";

/// What every "not found" error ends with.
const GET_NCCL: &str = "install NCCL 2.12 or newer (Debian and Ubuntu: libnccl2), or set \
     CUDA_BRAND_NCCL_LIBRARY to a libnccl.so.2; PyTorch's CUDA wheels ship one at \
     <site-packages>/nvidia/nccl/lib/libnccl.so.2 (python3 -c 'import nvidia.nccl, os; \
     print(os.path.join(list(nvidia.nccl.__path__)[0], \"lib\", \"libnccl.so.2\"))')";

/// What [`Error::call`] is when loading NCCL failed.
pub(crate) const LOAD_NCCL: &str = "loading the NCCL library";

/// The NCCL library: the file [`NCCL_LIBRARY_VAR`] names, else `libnccl.so.2`, then
/// `libnccl.so`, from the loader's search path.
const NCCL_LIBRARY: Spec = Spec {
    call: LOAD_NCCL,
    var: NCCL_LIBRARY_VAR,
    names: &["libnccl.so.2", "libnccl.so"],
    dirs: no_dirs,
    not_found: ErrorCode::NcclNotFound,
    not_found_detail: not_found,
    lacks,
};

/// The detail of [`ErrorCode::NcclNotFound`]: what was tried, and how to get NCCL.
fn not_found(not_found: &NotFound<'_>) -> String {
    let failures = &not_found.failures;
    match not_found.file {
        Some(file) => format!(
            "{NCCL_LIBRARY_VAR}={} could not be loaded ({failures}): point it at a \
             libnccl.so.2, or unset it; {GET_NCCL}",
            file.to_string_lossy(),
        ),
        None => format!(
            "{} could not be loaded ({failures}): {GET_NCCL}",
            NCCL_LIBRARY.names.join(" and "),
        ),
    }
}

#[cold]
fn lacks(file: &str, symbol: &str) -> Error {
    Error::with_detail(
        LOAD_NCCL,
        ErrorCode::NcclTooOld,
        format!(
            "{file} has no {symbol}: cuda-brand needs NCCL {} or newer",
            version_text(MINIMUM_NCCL)
        ),
    )
}

entry_points! {
    /// NCCL's entry points, loaded once (with the library's version, in [`Loaded`]).
    ///
    /// # Safety of the calls
    ///
    /// Stated here once for every call this module makes through the table:
    ///
    /// - each pointer was read from the library under the symbol's own name and has the
    ///   signature `nccl.h` gives it (`ncclResult_t` and the enums `ncclDataType_t`,
    ///   `ncclRedOp_t` are C `enum`s of `int` size, read as `u32`/`c_int`; `cudaStream_t` is
    ///   `CUstream`); the library is never unloaded, so the pointers stay valid for the whole
    ///   process;
    /// - every out-pointer is `&mut` of a live local with the C type's size;
    /// - every communicator, stream and device address comes from the caller of an `unsafe fn`
    ///   wrapper, whose `# Safety` section says what NCCL requires of it.
    struct Nccl {
        required GetUniqueId = "ncclGetUniqueId": unsafe extern "C" fn(*mut ncclUniqueId) -> u32,
        required CommInitRank = "ncclCommInitRank":
            unsafe extern "C" fn(*mut ncclComm_t, c_int, ncclUniqueId, c_int) -> u32,
        required CommInitAll = "ncclCommInitAll":
            unsafe extern "C" fn(*mut ncclComm_t, c_int, *const c_int) -> u32,
        required CommDestroy = "ncclCommDestroy": unsafe extern "C" fn(ncclComm_t) -> u32,
        required CommGetAsyncError = "ncclCommGetAsyncError":
            unsafe extern "C" fn(ncclComm_t, *mut c_int) -> u32,
        required GetErrorString = "ncclGetErrorString":
            unsafe extern "C" fn(c_int) -> *const c_char,
        optional GetLastError = "ncclGetLastError":
            unsafe extern "C" fn(ncclComm_t) -> *const c_char,
        required AllReduce = "ncclAllReduce": unsafe extern "C" fn(
            *const c_void,
            *mut c_void,
            usize,
            c_int,
            c_int,
            ncclComm_t,
            CUstream,
        ) -> u32,
        required Broadcast = "ncclBroadcast": unsafe extern "C" fn(
            *const c_void,
            *mut c_void,
            usize,
            c_int,
            c_int,
            ncclComm_t,
            CUstream,
        ) -> u32,
        required Reduce = "ncclReduce": unsafe extern "C" fn(
            *const c_void,
            *mut c_void,
            usize,
            c_int,
            c_int,
            c_int,
            ncclComm_t,
            CUstream,
        ) -> u32,
        required AllGather = "ncclAllGather": unsafe extern "C" fn(
            *const c_void,
            *mut c_void,
            usize,
            c_int,
            ncclComm_t,
            CUstream,
        ) -> u32,
        required ReduceScatter = "ncclReduceScatter": unsafe extern "C" fn(
            *const c_void,
            *mut c_void,
            usize,
            c_int,
            c_int,
            ncclComm_t,
            CUstream,
        ) -> u32,
        required Send = "ncclSend":
            unsafe extern "C" fn(*const c_void, usize, c_int, c_int, ncclComm_t, CUstream) -> u32,
        required Recv = "ncclRecv":
            unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, ncclComm_t, CUstream) -> u32,
        required GroupStart = "ncclGroupStart": unsafe extern "C" fn() -> u32,
        required GroupEnd = "ncclGroupEnd": unsafe extern "C" fn() -> u32,
        required CommAbort = "ncclCommAbort": unsafe extern "C" fn(ncclComm_t) -> u32,
        required CommCount = "ncclCommCount": unsafe extern "C" fn(ncclComm_t, *mut c_int) -> u32,
        required CommUserRank = "ncclCommUserRank":
            unsafe extern "C" fn(ncclComm_t, *mut c_int) -> u32,
        optional CommInitRankConfig = "ncclCommInitRankConfig": unsafe extern "C" fn(
            *mut ncclComm_t,
            c_int,
            ncclUniqueId,
            c_int,
            *mut ncclConfig,
        ) -> u32,
        optional CommFinalize = "ncclCommFinalize": unsafe extern "C" fn(ncclComm_t) -> u32,
        optional CommSplit = "ncclCommSplit": unsafe extern "C" fn(
            ncclComm_t,
            c_int,
            c_int,
            *mut ncclComm_t,
            *mut ncclConfig,
        ) -> u32,
    }
}

/// `ncclConfig_t` as NCCL 2.17 declared it (`struct ncclConfig_v21700`): the fields up to
/// `netName`. NCCL reads a configuration through its `size` field (`parseCommConfig` copies
/// `min(size, sizeof(its own ncclConfig_t))` bytes over its own `NCCL_CONFIG_INITIALIZER`
/// and resets the fields newer than `version`), so this older, smaller layout is read
/// correctly by every NCCL from 2.14 (which reads the first 24 bytes: `blocking` and the
/// padding after it, which it ignores) to 2.30. The fields after `blocking` are left
/// undefined, NCCL's defaults. 40 bytes, no padding.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct ncclConfig {
    size: usize,
    magic: u32,
    version: u32,
    blocking: c_int,
    cga_cluster_size: c_int,
    min_ctas: c_int,
    max_ctas: c_int,
    net_name: *const c_char,
}

const _: () = assert!(std::mem::size_of::<ncclConfig>() == 40);

/// `NCCL_CONFIG_UNDEF_INT` (`INT_MIN`).
const CONFIG_UNDEF_INT: c_int = c_int::MIN;

impl ncclConfig {
    /// `NCCL_CONFIG_INITIALIZER` of NCCL 2.17 (magic `NCCL_API_MAGIC`, version 21700),
    /// with `blocking = 0`: a non-blocking communicator, whose calls may return
    /// `ncclInProgress` and finish in a thread of NCCL's.
    pub(crate) const fn non_blocking() -> ncclConfig {
        ncclConfig::with_blocking(0)
    }

    /// The same with `blocking = 1`: a blocking communicator, whose calls return when done
    /// (the operations communicator of a pair, split from a non-blocking one).
    pub(crate) const fn blocking() -> ncclConfig {
        ncclConfig::with_blocking(1)
    }

    const fn with_blocking(blocking: c_int) -> ncclConfig {
        ncclConfig {
            size: std::mem::size_of::<ncclConfig>(),
            magic: 0xcafe_beef,
            version: 21700,
            blocking,
            cga_cluster_size: CONFIG_UNDEF_INT,
            min_ctas: CONFIG_UNDEF_INT,
            max_ctas: CONFIG_UNDEF_INT,
            net_name: std::ptr::null(),
        }
    }
}

/// What an NCCL call that may run on in the background (a non-blocking communicator's)
/// returned: done, or `ncclInProgress` (poll [`comm_async_error`] until it is no longer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Done,
    InProgress,
}

/// [`check`], with `ncclInProgress` (7) as [`Status::InProgress`] instead of an error.
fn check_status(call: &'static str, raw: u32) -> Result<Status> {
    match NcclCode::from_raw(raw) {
        None => Ok(Status::Done),
        Some(NcclCode::InProgress) => Ok(Status::InProgress),
        Some(code) => Err(failure(call, code)),
    }
}

/// The optional entry point `f` of `symbol`, or [`ErrorCode::NcclTooOld`] naming the
/// version that brought it.
fn needs<T>(f: Option<T>, symbol: &str, since: &str) -> Result<T> {
    f.ok_or_else(|| {
        Error::with_detail(
            LOAD_NCCL,
            ErrorCode::NcclTooOld,
            format!("the loaded NCCL has no {symbol}: this needs NCCL {since} or newer"),
        )
    })
}

/// The loaded library: its `ncclGetVersion` code and its entry points.
struct Loaded {
    version: i32,
    table: Nccl,
}

/// The loaded library, or why it could not be loaded (the same outcome for every call).
static LOADED: OnceLock<Result<Loaded>> = OnceLock::new();

/// The library, loading it on first use.
fn loaded() -> Result<&'static Loaded> {
    crate::driver::dylib::load_once(&LOADED, &NCCL_LIBRARY, load)
}

/// The table, loading it on first use.
fn nccl() -> Result<&'static Nccl> {
    loaded().map(|loaded| &loaded.table)
}

/// Opens the library (`file`, or the default names when `None` or empty), checks its
/// version and reads the table from it. The library is never closed.
fn load(file: Option<&OsStr>) -> Result<Loaded> {
    let library = Library::open(&NCCL_LIBRARY, file)?;
    // SAFETY: `ncclGetVersion(int*)` in every NCCL, with `ncclResult_t` as `u32`.
    let get_version =
        unsafe { library.required::<unsafe extern "C" fn(*mut c_int) -> u32>("ncclGetVersion") }?;
    let mut version = 0;
    // SAFETY: takes only its out-pointer, a live local.
    if unsafe { get_version(&mut version) } != 0 {
        version = 0;
    }
    if version < MINIMUM_NCCL {
        return Err(Error::with_detail(
            LOAD_NCCL,
            ErrorCode::NcclTooOld,
            format!(
                "cuda-brand needs NCCL {} or newer; {} is NCCL {}",
                version_text(MINIMUM_NCCL),
                library.name(),
                version_text(version)
            ),
        ));
    }
    Ok(Loaded {
        version,
        table: Nccl::read(&library)?,
    })
}

/// `(major, minor, patch)` of an `ncclGetVersion` code: `major * 10000 + minor * 100 +
/// patch` since NCCL 2.9, `major * 1000 + minor * 100 + patch` before.
pub(crate) const fn decode_version(code: i32) -> (u32, u32, u32) {
    let code = if code < 0 { 0 } else { code as u32 };
    if code >= 10000 {
        (code / 10000, code % 10000 / 100, code % 100)
    } else {
        (code / 1000, code % 1000 / 100, code % 100)
    }
}

fn version_text(code: i32) -> String {
    match code {
        0 => "of an unknown version".to_owned(),
        _ => {
            let (major, minor, patch) = decode_version(code);
            format!("{major}.{minor}.{patch}")
        }
    }
}

/// The loaded library's `ncclGetVersion` code.
pub(crate) fn version() -> Result<i32> {
    Ok(loaded()?.version)
}

/// Turns an `ncclResult_t` into a `Result`, naming the call; the detail is NCCL's last
/// warning (`ncclGetLastError`), where there is one.
fn check(call: &'static str, raw: u32) -> Result<()> {
    match NcclCode::from_raw(raw) {
        None => Ok(()),
        Some(code) => Err(failure(call, code)),
    }
}

#[cold]
#[inline(never)]
pub(crate) fn failure(call: &'static str, code: NcclCode) -> Error {
    match last_error() {
        Some(text) => Error::with_detail(call, ErrorCode::Nccl(code), text),
        None => Error::new(call, ErrorCode::Nccl(code)),
    }
}

/// The size of NCCL's `char ncclLastError[1024]` (`src/debug.cc`, NCCL 2.13 to 2.30).
const LAST_ERROR_BYTES: usize = 1024;

/// NCCL's last warning (`ncclGetLastError`), if the library has the call and the text is
/// not empty.
fn last_error() -> Option<String> {
    let f = nccl().ok()?.GetLastError?;
    // SAFETY: the communicator argument is unused by every NCCL that has the call (it
    // returns its process-wide buffer); null is what NCCL's own examples pass for "any".
    let text = unsafe { f(std::ptr::null_mut()) };
    if text.is_null() {
        return None;
    }
    let mut bytes = Vec::new();
    for i in 0..LAST_ERROR_BYTES {
        // SAFETY: `text` is NCCL's static `char[1024]` buffer, so every byte below 1024 is
        // readable for the whole process. NCCL rewrites it (under a lock it does not
        // expose) when any thread logs a warning; reading byte by byte with volatile loads
        // and never past the buffer keeps a concurrent rewrite from making this read
        // anything but the buffer (at worst the text mixes two messages).
        let byte = unsafe { text.cast::<u8>().wrapping_add(i).read_volatile() };
        if byte == 0 {
            break;
        }
        bytes.push(byte);
    }
    let text = String::from_utf8_lossy(&bytes).trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// NCCL's own description of `code` (`ncclGetErrorString`), for tests.
#[allow(dead_code)]
pub(crate) fn error_string(code: NcclCode) -> Result<String> {
    let f = nccl()?.GetErrorString;
    // SAFETY: takes a plain value; NCCL returns a static NUL-terminated string.
    let text = unsafe { f(code.raw() as c_int) };
    if text.is_null() {
        return Ok(String::new());
    }
    // SAFETY: a static NUL-terminated string of NCCL's (`ncclGetErrorString` returns
    // literals only).
    let text = unsafe { std::ffi::CStr::from_ptr(text) };
    Ok(text.to_string_lossy().into_owned())
}

/// Runs `f`, one NCCL call, with `push` (if given) pushed on the calling thread's context
/// stack, and leaves the stack as it found it (see the module docs): if NCCL's
/// `cudaSetDevice` replaced the top, the top is put back with `cuCtxSetCurrent`. Without
/// `push` and without a driver library, `f` just runs.
///
/// # Safety
/// `push` is a live context that stays alive while `f` runs.
pub(crate) unsafe fn keep_stack<T>(
    push: Option<NonNull<CUctx_st>>,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let before = match driver::ctx_get_current() {
        Ok(top) => Some(top),
        Err(e) if push.is_some() => return Err(e),
        Err(_) => None,
    };
    if let Some(ctx) = push {
        // SAFETY: the caller guarantees the context; it is popped below.
        unsafe { driver::ctx_push(ctx.as_ptr()) }?;
    }
    let expected: Option<CUcontext> = push.map(NonNull::as_ptr).or(before);
    let result = f();
    let restored = match expected {
        Some(top) => restore_top(top),
        None => Ok(()),
    };
    let popped = match push {
        Some(ctx) => match driver::ctx_pop() {
            Ok(top) if top == ctx.as_ptr() => Ok(()),
            Ok(_) => Err(Error::with_detail(
                "cuCtxPopCurrent_v2",
                ErrorCode::InvalidContext,
                "after an NCCL call, the context pushed for it was not on top of the stack",
            )),
            Err(e) => Err(e),
        },
        None => Ok(()),
    };
    let value = result?;
    restored?;
    popped?;
    Ok(value)
}

/// Makes `top` the top of the calling thread's stack again if an NCCL call replaced it
/// (null: an empty stack, which NCCL's `cudaSetDevice` may have given an entry).
fn restore_top(top: CUcontext) -> Result<()> {
    if driver::ctx_get_current()? == top {
        return Ok(());
    }
    // SAFETY: `top` was on top of this thread's stack before the NCCL call (pushed by
    // `keep_stack`, or there already, owned by whoever pushed it, who is still running: the
    // call is synchronous), so it is alive; the entry replaced is the primary context
    // NCCL's `cudaSetDevice` put there, which the CUDA runtime keeps retained.
    unsafe { driver::ctx_set_current(top) }
}

/// `ncclGetUniqueId`: a new id, and (inside NCCL) the bootstrap root that ranks using it
/// connect to, served by a thread of this process.
pub(crate) fn get_unique_id() -> Result<ncclUniqueId> {
    let f = nccl()?.GetUniqueId;
    let mut id = ncclUniqueId {
        internal: [0; UNIQUE_ID_BYTES],
    };
    // SAFETY: the out-pointer is a live local of the struct's size.
    check("ncclGetUniqueId", unsafe { f(&mut id) })?;
    Ok(id)
}

/// `ncclCommInitRank`: this process's rank `rank` of `ranks`, on the current device.
/// Blocks until every rank has joined.
///
/// # Safety
/// The primary context of the device the communicator is for is current (see
/// [`keep_stack`]).
pub(crate) unsafe fn comm_init_rank(
    ranks: c_int,
    id: &ncclUniqueId,
    rank: c_int,
) -> Result<ncclComm_t> {
    let f = nccl()?.CommInitRank;
    let mut comm = std::ptr::null_mut();
    // SAFETY: the out-pointer is a live local; the id is passed by value; the caller makes
    // the device current.
    check("ncclCommInitRank", unsafe {
        f(&mut comm, ranks, *id, rank)
    })?;
    Ok(comm)
}

/// `ncclCommInitAll`: one communicator per device of `devices` (CUDA ordinals), rank `i`
/// on `devices[i]`.
pub(crate) fn comm_init_all(devices: &[c_int]) -> Result<Vec<ncclComm_t>> {
    let f = nccl()?.CommInitAll;
    let mut comms = vec![std::ptr::null_mut(); devices.len()];
    let n = c_int::try_from(devices.len()).map_err(|_| {
        Error::invalid_input("ncclCommInitAll", Invalid::argument("too many devices"))
    })?;
    // SAFETY: `comms` has room for one handle per device, `devices` is `n` ordinals.
    check("ncclCommInitAll", unsafe {
        f(comms.as_mut_ptr(), n, devices.as_ptr())
    })?;
    Ok(comms)
}

/// `ncclCommDestroy`.
///
/// # Safety
/// `comm` is a live communicator that nothing uses afterwards, and no queued work uses
/// it.
pub(crate) unsafe fn comm_destroy(comm: ncclComm_t) -> Result<()> {
    let f = nccl()?.CommDestroy;
    // SAFETY: the caller's promise.
    check("ncclCommDestroy", unsafe { f(comm) })
}

/// `ncclCommInitRankConfig` with a non-blocking configuration: this process's rank `rank`
/// of `ranks`, on the current device. Returns the handle at once (NCCL fills it in before
/// it starts its initialisation thread) and whether the initialisation is still in
/// progress: poll [`comm_async_error`] until it is no longer, or [`comm_abort`] it. A
/// failure before the thread started leaves no communicator.
///
/// # Safety
/// The primary context of the device the communicator is for is current (see
/// [`keep_stack`]).
pub(crate) unsafe fn comm_init_rank_non_blocking(
    ranks: c_int,
    id: &ncclUniqueId,
    rank: c_int,
) -> Result<(ncclComm_t, Status)> {
    let f = needs(nccl()?.CommInitRankConfig, "ncclCommInitRankConfig", "2.14")?;
    let mut config = ncclConfig::non_blocking();
    let mut comm = std::ptr::null_mut();
    // SAFETY: the out-pointer and the configuration are live locals (NCCL copies the
    // configuration before it returns); the id is passed by value; the caller makes the
    // device current.
    let raw = unsafe { f(&mut comm, ranks, *id, rank, &mut config) };
    match check_status("ncclCommInitRankConfig", raw) {
        Ok(status) => Ok((comm, status)),
        Err(e) => {
            if !comm.is_null() {
                // SAFETY: a communicator NCCL handed out and nothing else has: aborting it
                // is what NCCL asks for a failed initialisation.
                let _ = unsafe { comm_abort(comm) };
            }
            Err(e)
        }
    }
}

/// `ncclCommAbort`: stops the communicator's work on the GPU and frees it. Blocking in
/// every mode (NCCL joins its own threads of the communicator first).
///
/// # Safety
/// `comm` is a live communicator that nothing uses afterwards (queued work may still name
/// it: NCCL makes it end).
pub(crate) unsafe fn comm_abort(comm: ncclComm_t) -> Result<()> {
    let f = nccl()?.CommAbort;
    // SAFETY: the caller's promise.
    check("ncclCommAbort", unsafe { f(comm) })
}

/// `ncclCommFinalize`: flushes the communicator's work and tears its connections down; in
/// progress until [`comm_async_error`] says otherwise (non-blocking mode).
///
/// # Safety
/// `comm` is a live communicator, finalized at most once.
pub(crate) unsafe fn comm_finalize(comm: ncclComm_t) -> Result<Status> {
    let f = needs(nccl()?.CommFinalize, "ncclCommFinalize", "2.14")?;
    // SAFETY: the caller's promise.
    check_status("ncclCommFinalize", unsafe { f(comm) })
}

/// `ncclCommSplit(comm, color, key, out, config)`: the new communicator has `config`
/// (NCCL copies it before it returns), or inherits `comm`'s configuration where `config`
/// is `None`. The split itself runs in `comm`'s mode (NCCL's group takes its mode from the
/// first communicator it meets, `comm`: group.cc, `ncclAsyncLaunch`). NCCL writes `*out` (null for `NCCL_SPLIT_NOCOLOR`) when the split is
/// complete, which for a non-blocking communicator is after this returns, from a thread of
/// NCCL's, **even when this returns [`Status::Done`]**: `ncclCommSplit` lets its group
/// end's `ncclInProgress` through and returns `ncclSuccess` (NCCL 2.28.9, init.cc). The
/// split is complete only once `comm`'s [`comm_async_error`] is no longer in progress.
///
/// # Safety
/// `comm` is a live communicator whose device's primary context is current; `out` stays
/// valid and unread until the split is complete (`comm`'s [`comm_async_error`] no longer
/// in progress, whatever this returned) or `comm` has been aborted.
pub(crate) unsafe fn comm_split(
    comm: ncclComm_t,
    color: c_int,
    key: c_int,
    out: *mut ncclComm_t,
    config: Option<ncclConfig>,
) -> Result<Status> {
    let f = needs(nccl()?.CommSplit, "ncclCommSplit", "2.18")?;
    let mut config = config;
    let config = config
        .as_mut()
        .map_or(std::ptr::null_mut(), |c| c as *mut ncclConfig);
    // SAFETY: the caller's promise; the configuration is a live local or null (NCCL's "as
    // the parent"), which NCCL reads (`parseCommConfig` copies it) before it returns.
    check_status("ncclCommSplit", unsafe { f(comm, color, key, out, config) })
}

/// `ncclCommUserRank` and `ncclCommCount`: the communicator's rank and rank count.
///
/// # Safety
/// `comm` is a live communicator whose initialisation is complete.
pub(crate) unsafe fn comm_rank_and_count(comm: ncclComm_t) -> Result<(usize, usize)> {
    let nccl = nccl()?;
    let (mut rank, mut count): (c_int, c_int) = (0, 0);
    // SAFETY: the caller's promise; live local out-pointers.
    check("ncclCommUserRank", unsafe {
        (nccl.CommUserRank)(comm, &mut rank)
    })?;
    // SAFETY: as above.
    check("ncclCommCount", unsafe {
        (nccl.CommCount)(comm, &mut count)
    })?;
    match (usize::try_from(rank), usize::try_from(count)) {
        (Ok(rank), Ok(count)) if rank < count => Ok((rank, count)),
        _ => Err(Error::with_detail(
            "ncclCommUserRank",
            ErrorCode::Nccl(NcclCode::InternalError),
            format!("NCCL says rank {rank} of {count}"),
        )),
    }
}

/// `ncclCommGetAsyncError`: the communicator's asynchronous error state (raw
/// `ncclResult_t`, 0 for none).
///
/// # Safety
/// `comm` is a live communicator.
pub(crate) unsafe fn comm_async_error(comm: ncclComm_t) -> Result<u32> {
    let f = nccl()?.CommGetAsyncError;
    let mut state: c_int = 0;
    // SAFETY: a live communicator (the caller's promise) and a live local out-pointer.
    check("ncclCommGetAsyncError", unsafe { f(comm, &mut state) })?;
    Ok(state as u32)
}

/// `ncclGroupStart`.
pub(crate) fn group_start() -> Result<()> {
    let f = nccl()?.GroupStart;
    // SAFETY: takes nothing; balanced by `group_end` in the one caller.
    check("ncclGroupStart", unsafe { f() })
}

/// `ncclGroupEnd`: issues the operations queued since `ncclGroupStart`.
///
/// # Safety
/// Every operation queued in the group still has its memory, streams and communicators
/// (the callers of [`launch`] inside the group keep them borrowed until their streams are
/// synchronized).
pub(crate) unsafe fn group_end() -> Result<Status> {
    let f = nccl()?.GroupEnd;
    // SAFETY: the caller's promise.
    check_status("ncclGroupEnd", unsafe { f() })
}

/// Which NCCL operation a [`Call`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum OpKind {
    AllReduce,
    Broadcast,
    Reduce,
    AllGather,
    ReduceScatter,
    Send,
    Recv,
}

impl OpKind {
    /// The NCCL entry point.
    pub(crate) const fn entry(self) -> &'static str {
        match self {
            OpKind::AllReduce => "ncclAllReduce",
            OpKind::Broadcast => "ncclBroadcast",
            OpKind::Reduce => "ncclReduce",
            OpKind::AllGather => "ncclAllGather",
            OpKind::ReduceScatter => "ncclReduceScatter",
            OpKind::Send => "ncclSend",
            OpKind::Recv => "ncclRecv",
        }
    }
}

/// One NCCL operation's arguments, as NCCL takes them: `count` is NCCL's count argument
/// (the send count of an all-gather, the receive count of a reduce-scatter), `peer` the
/// root of a broadcast or reduce and the peer of a send or receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Call {
    pub(crate) kind: OpKind,
    pub(crate) send: CUdeviceptr,
    pub(crate) recv: CUdeviceptr,
    pub(crate) count: usize,
    pub(crate) datatype: c_int,
    pub(crate) op: c_int,
    pub(crate) peer: c_int,
}

/// Queues `call` on `stream` through `comm` (or records it in the open group). For a
/// non-blocking communicator NCCL may return [`Status::InProgress`]: a thread of NCCL's
/// then queues the operation, and the caller polls [`comm_async_error`] until it is done
/// (or aborts the communicator) before anything else.
///
/// # Safety
/// `comm` is a live communicator whose device's primary context is current, `stream` a
/// live stream of that context; the ranges `call` names (its `count` elements of its
/// datatype at `send` and `recv`, as NCCL reads and writes them for the operation, given
/// this communicator's rank count) are device memory that stays valid, and that nothing
/// else writes (nor, for the ranges written, reads) until `stream` has run the operation;
/// and either every other rank issues the matching operation with matching counts (a peer
/// in this process may write this rank's receive range directly), or no peer can write
/// this rank's memory (every peer in another process, and no buffer registered with NCCL:
/// the `nccl` module's "Across processes").
pub(crate) unsafe fn launch(comm: ncclComm_t, call: &Call, stream: CUstream) -> Result<Status> {
    let nccl = nccl()?;
    let (send, recv) = (
        call.send as usize as *const c_void,
        call.recv as usize as *mut c_void,
    );
    let (n, t, op, peer) = (call.count, call.datatype, call.op, call.peer);
    // SAFETY (every arm): the caller's promise, for each entry point with its own
    // argument order.
    let raw = match call.kind {
        // SAFETY: see above.
        OpKind::AllReduce => unsafe { (nccl.AllReduce)(send, recv, n, t, op, comm, stream) },
        // SAFETY: see above.
        OpKind::Broadcast => unsafe { (nccl.Broadcast)(send, recv, n, t, peer, comm, stream) },
        // SAFETY: see above.
        OpKind::Reduce => unsafe { (nccl.Reduce)(send, recv, n, t, op, peer, comm, stream) },
        // SAFETY: see above.
        OpKind::AllGather => unsafe { (nccl.AllGather)(send, recv, n, t, comm, stream) },
        // SAFETY: see above.
        OpKind::ReduceScatter => unsafe {
            (nccl.ReduceScatter)(send, recv, n, t, op, comm, stream)
        },
        // SAFETY: see above.
        OpKind::Send => unsafe { (nccl.Send)(send, n, t, peer, comm, stream) },
        // SAFETY: see above.
        OpKind::Recv => unsafe { (nccl.Recv)(recv, n, t, peer, comm, stream) },
    };
    check_status(call.kind.entry(), raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_codes_decode_both_ways_nccl_wrote_them() {
        assert_eq!(decode_version(22105), (2, 21, 5));
        assert_eq!(decode_version(21200), (2, 12, 0));
        assert_eq!(decode_version(2804), (2, 8, 4));
        assert_eq!(version_text(23004), "2.30.4");
        assert_eq!(version_text(0), "of an unknown version");
        // NCCL 2.8 is older than the minimum under either encoding
        const { assert!(2804 < MINIMUM_NCCL) };
    }

    #[test]
    fn a_missing_library_is_nccl_not_found_naming_what_was_tried() {
        let e = match load(Some(OsStr::new("/nonexistent/libnccl.so.2"))) {
            Ok(_) => panic!("loaded a file that does not exist"),
            Err(e) => e,
        };
        assert_eq!(e.code(), ErrorCode::NcclNotFound);
        assert_eq!(e.call(), LOAD_NCCL);
        let detail = e.detail().unwrap();
        assert!(
            detail.starts_with(
                "CUDA_BRAND_NCCL_LIBRARY=/nonexistent/libnccl.so.2 could not be loaded ("
            ),
            "{detail}"
        );
        assert!(detail.contains("nvidia/nccl/lib/libnccl.so.2"), "{detail}");
    }

    #[test]
    fn the_unique_id_has_nccls_layout() {
        assert_eq!(std::mem::size_of::<ncclUniqueId>(), 128);
        assert_eq!(std::mem::align_of::<ncclUniqueId>(), 1);
    }

    #[test]
    fn without_the_variable_the_not_found_text_names_both_files() {
        let detail = not_found(&NotFound {
            file: None,
            failures: "F".to_owned(),
        });
        assert_eq!(
            detail,
            format!("libnccl.so.2 and libnccl.so could not be loaded (F): {GET_NCCL}")
        );
        assert!(
            detail.ends_with("\"lib\", \"libnccl.so.2\"))')"),
            "{detail}"
        );
    }
}
