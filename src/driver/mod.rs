//! The driver layer, the bottom of the house: the only code that calls into the CUDA
//! driver library, and the one loader of every NVIDIA library the crate opens.
//!
//! # What it may import
//!
//! Nothing of the crate but [`crate::error`] (and itself): the layers above (contexts,
//! memory, streams, modules, NCCL, NVRTC) call down into it, never the other way. What a
//! wrapper needs from above moved down here: the flag that refuses driver calls inside a
//! host function ([`host_fn_flag`]) and the raw form of the JIT options ([`jit_args`]).
//!
//! # Rooms
//!
//! - [`dylib`]: opening a shared library at run time (the driver, NVRTC, NCCL, ...): its
//!   candidate names, the environment variable that overrides them, the "not found" text;
//! - [`table`]: the driver's entry points, declared once, loaded once, with the minimum
//!   driver and what a missing entry point says;
//! - [`ffi`]: the `cuda.h` types newer than the `cuda_driver_sys` bindings;
//! - [`host_fn_flag`]: the thread-local flag every wrapper checks first (and, in the same
//!   word, the count of partitioned closures on the thread, for the context layer);
//! - [`jit_args`]: the JIT options as the driver takes them (two parallel arrays);
//! - the wrappers, one safe or `unsafe fn` per driver call, by what they act on:
//!   [`context`] (initialisation, devices, contexts, peer access), [`memory`] (allocation,
//!   host memory, managed memory, pointer queries), [`copy`] (copies and fills),
//!   [`pool`] (memory pools and stream-ordered allocation), [`stream`] (streams, events,
//!   host functions), [`module`] (modules, libraries, function attributes), [`launch`]
//!   (occupancy, parameter queries, launches), [`graph`] (stream capture and graphs) and
//!   [`green`] (green contexts: SM partitions).
//!
//! Every wrapper is re-exported here, so the layers above call `driver::mem_alloc(..)`
//! whatever room it lives in.
//!
//! # Loading
//!
//! Nothing links against `libcuda`: the library is opened at run time with `libloading`,
//! on the first call that needs it and once per process. On Linux that is `libcuda.so.1`
//! (then `libcuda.so`), on Windows `nvcuda.dll`; the environment variable
//! `CUDA_BRAND_DRIVER_LIBRARY=/path/to/file` loads that file instead (to test a given
//! library, or none). A library that cannot be opened is an [`Error`] with
//! [`ErrorCode::DriverNotFound`] whose detail says what was tried and how to get the
//! driver; every entry point then returns that error, and nothing panics.
//!
//! # Minimum driver: CUDA 11.4 (R470)
//!
//! Every entry point that CUDA 11.4 has is *required*: a library without one, or a driver
//! older than 11.4, fails to load with [`ErrorCode::DriverTooOld`] naming what is missing.
//! Entry points newer than 11.4 are *optional*: the table holds `None` where the driver
//! lacks them, and calling one is an error with [`ErrorCode::DriverTooOld`] that names the
//! call, the CUDA version it needs and the installed driver's version, e.g.
//! `cuLibraryLoadData needs a CUDA 12.0 driver (R525 or newer); this driver is CUDA 11.4`.
//!
//! Entry points that only a feature calls are declared only with that feature, and are
//! optional whatever their age (`cuCtxSetCurrent`, NCCL's interop): a driver without one
//! fails no load, only that feature's first call, with the same error naming it.
//!
//! # Why not call `cuda_driver_sys`
//!
//! The bindings declare every entry point as returning the Rust enum `CUresult`, which only
//! knows the codes of CUDA 10. A newer driver returns codes outside it
//! (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION` = 222 for a PTX that is too new,
//! `CUDA_ERROR_STUB_LIBRARY` = 34, ...), and an out-of-range value in a Rust enum is
//! undefined behaviour. So every entry point is declared here, once, in [the
//! table](table::Api), returning the raw `u32`, and enum-typed out-parameters are read as
//! integers. `cuda_driver_sys` only provides handle and struct types; types newer than its
//! CUDA 10 headers are declared in [`ffi`], matching `cuda.h`.
//!
//! Each wrapper is `#[inline]` and turns the code into [`Result`]; the error path is cold.
//! A call through the table costs what a call through the PLT did: one atomic load of the
//! loaded table's state (already initialised), one load of the function pointer, one
//! indirect call; and before it one thread-local load, the check that the calling thread is
//! not running a host function of the crate (which must not call the driver:
//! [`host_fn_flag`]). The one exception is the pop of a context pushed to enter it
//! ([`Pushed::pop`]), which reuses the push's table and check.

#![allow(non_snake_case)]

pub(crate) use cuda_driver_sys::{
    CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUmodule, CUstream, CUuuid,
};

use crate::error::{Error, ErrorCode, Result};

/// Calls entry point `$f` of the table: `Ok` with its raw `CUresult`, or `Err` when the
/// driver library could not be loaded or (an optional entry point) lacks `$f`.
///
/// Contains the call's `unsafe` block: its justification is the table's "Safety of the
/// calls", which every wrapper of this layer keeps (a wrapper handing the driver a pointer
/// or handle its caller gave it is an `unsafe fn` that says what the caller guarantees).
macro_rules! cu_raw {
    ($f:ident($($arg:expr),* $(,)?)) => {
        // A host function (`scope/host_fn/`) must not call the driver: refused here, for every
        // entry point, before the table is touched (one thread-local load; `host_fn_flag`).
        if $crate::driver::host_fn_flag::in_host_fn() {
            Err($crate::driver::host_fn_flag::driver_call_refused(stringify!($f)))
        } else {
            match $crate::driver::table::api() {
                // SAFETY: the table's "Safety of the calls", kept by this layer's wrappers.
                Ok(api) => unsafe { api.$f($($arg),*) },
                Err(e) => Err(e),
            }
        }
    };
}

/// Calls entry point `$f` of the table (see `cu_raw!`) and checks its result, naming the
/// call.
macro_rules! cu {
    ($f:ident($($arg:expr),* $(,)?)) => {
        match cu_raw!($f($($arg),*)) {
            Ok(raw) => $crate::driver::check(stringify!($f), raw),
            Err(e) => Err(e),
        }
    };
}

pub(crate) mod dylib;
pub(crate) mod ffi;
pub(crate) mod handles;
pub(crate) mod host_fn_flag;
mod jit_args;
mod table;

mod context;
mod copy;
mod graph;
mod green;
mod launch;
mod memory;
mod module;
mod pool;
mod stream;

pub(crate) use context::*;
pub(crate) use copy::*;
pub(crate) use ffi::*;
pub(crate) use graph::*;
pub(crate) use green::*;
pub(crate) use host_fn_flag::{
    HostFnFlag, driver_call_refused, in_host_fn, partitioned_closure_begins,
    partitioned_closure_ends, partitioned_closures, refuses_nothing,
};
pub(crate) use jit_args::{DEFAULT_LOG_BYTES, JitArgs, JitNumber};
pub(crate) use launch::*;
pub(crate) use memory::*;
pub(crate) use module::*;
pub(crate) use pool::*;
pub(crate) use stream::*;
pub(crate) use table::{green_entries, loaded_version, param_queries};

/// Turns a raw `CUresult` into a `Result`, naming the call on failure.
#[inline(always)]
pub(crate) fn check(call: &'static str, raw: u32) -> Result<()> {
    if raw == 0 {
        Ok(())
    } else {
        Err(failure(call, raw))
    }
}

#[cold]
#[inline(never)]
fn failure(call: &'static str, raw: u32) -> Error {
    Error::new(
        call,
        ErrorCode::from_raw(raw).unwrap_or(ErrorCode::Unrecognized(raw)),
    )
}

/// A handle a successful call returned, or an error if the driver returned success with
/// a null one (never seen; checked so that no null handle is ever branded).
#[inline]
pub(crate) fn non_null<T>(call: &'static str, p: *mut T) -> Result<std::ptr::NonNull<T>> {
    std::ptr::NonNull::new(p).ok_or_else(|| null_handle(call))
}

#[cold]
#[inline(never)]
fn null_handle(call: &'static str) -> Error {
    Error::with_detail(
        call,
        ErrorCode::Unknown,
        "the driver returned success and a null handle",
    )
}

/// The raw value of a driver code, for comparing results without a lookup; a crate code
/// (which has none) fails to compile.
const fn raw_code(code: ErrorCode) -> u32 {
    match code.raw() {
        Some(raw) => raw,
        None => panic!("not a CUresult"),
    }
}
