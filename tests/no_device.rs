//! Tests that need no GPU: the error mapping, the flags, and every path that meets a
//! machine without a device (where `cuInit` returns `CUDA_ERROR_NO_DEVICE`).

use cuda_brand::sys::CUresult;
use cuda_brand::{
    CacheConfig, ContextFlags, Device, Error, ErrorCode, Scheduling, SharedMemoryConfig,
    StreamPriorityRange,
};

#[test]
fn every_code_of_the_bindings_maps_to_its_own_name() {
    let all = [
        CUresult::CUDA_ERROR_INVALID_VALUE,
        CUresult::CUDA_ERROR_OUT_OF_MEMORY,
        CUresult::CUDA_ERROR_NOT_INITIALIZED,
        CUresult::CUDA_ERROR_DEINITIALIZED,
        CUresult::CUDA_ERROR_PROFILER_DISABLED,
        CUresult::CUDA_ERROR_PROFILER_NOT_INITIALIZED,
        CUresult::CUDA_ERROR_PROFILER_ALREADY_STARTED,
        CUresult::CUDA_ERROR_PROFILER_ALREADY_STOPPED,
        CUresult::CUDA_ERROR_NO_DEVICE,
        CUresult::CUDA_ERROR_INVALID_DEVICE,
        CUresult::CUDA_ERROR_INVALID_IMAGE,
        CUresult::CUDA_ERROR_INVALID_CONTEXT,
        CUresult::CUDA_ERROR_CONTEXT_ALREADY_CURRENT,
        CUresult::CUDA_ERROR_MAP_FAILED,
        CUresult::CUDA_ERROR_UNMAP_FAILED,
        CUresult::CUDA_ERROR_ARRAY_IS_MAPPED,
        CUresult::CUDA_ERROR_ALREADY_MAPPED,
        CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU,
        CUresult::CUDA_ERROR_ALREADY_ACQUIRED,
        CUresult::CUDA_ERROR_NOT_MAPPED,
        CUresult::CUDA_ERROR_NOT_MAPPED_AS_ARRAY,
        CUresult::CUDA_ERROR_NOT_MAPPED_AS_POINTER,
        CUresult::CUDA_ERROR_ECC_UNCORRECTABLE,
        CUresult::CUDA_ERROR_UNSUPPORTED_LIMIT,
        CUresult::CUDA_ERROR_CONTEXT_ALREADY_IN_USE,
        CUresult::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
        CUresult::CUDA_ERROR_INVALID_PTX,
        CUresult::CUDA_ERROR_INVALID_GRAPHICS_CONTEXT,
        CUresult::CUDA_ERROR_NVLINK_UNCORRECTABLE,
        CUresult::CUDA_ERROR_JIT_COMPILER_NOT_FOUND,
        CUresult::CUDA_ERROR_INVALID_SOURCE,
        CUresult::CUDA_ERROR_FILE_NOT_FOUND,
        CUresult::CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND,
        CUresult::CUDA_ERROR_SHARED_OBJECT_INIT_FAILED,
        CUresult::CUDA_ERROR_OPERATING_SYSTEM,
        CUresult::CUDA_ERROR_INVALID_HANDLE,
        CUresult::CUDA_ERROR_ILLEGAL_STATE,
        CUresult::CUDA_ERROR_NOT_FOUND,
        CUresult::CUDA_ERROR_NOT_READY,
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
        CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
        CUresult::CUDA_ERROR_LAUNCH_TIMEOUT,
        CUresult::CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING,
        CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
        CUresult::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
        CUresult::CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE,
        CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED,
        CUresult::CUDA_ERROR_ASSERT,
        CUresult::CUDA_ERROR_TOO_MANY_PEERS,
        CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
        CUresult::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
        CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR,
        CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION,
        CUresult::CUDA_ERROR_MISALIGNED_ADDRESS,
        CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE,
        CUresult::CUDA_ERROR_INVALID_PC,
        CUresult::CUDA_ERROR_LAUNCH_FAILED,
        CUresult::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
        CUresult::CUDA_ERROR_NOT_PERMITTED,
        CUresult::CUDA_ERROR_NOT_SUPPORTED,
        CUresult::CUDA_ERROR_SYSTEM_NOT_READY,
        CUresult::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH,
        CUresult::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_MERGE,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_UNMATCHED,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_UNJOINED,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_ISOLATION,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
        CUresult::CUDA_ERROR_CAPTURED_EVENT,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
        CUresult::CUDA_ERROR_TIMEOUT,
        CUresult::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
        CUresult::CUDA_ERROR_UNKNOWN,
    ];
    for r in all {
        let code = ErrorCode::from(r);
        assert!(
            !matches!(code, ErrorCode::Unrecognized(_)),
            "{r:?} is not named"
        );
        assert_eq!(code.name(), format!("{r:?}"));
        assert_eq!(code.raw(), Some(r as u32));
    }
}

#[test]
fn raw_values_round_trip_and_success_is_not_an_error() {
    assert_eq!(ErrorCode::from_raw(0), None);
    for &code in ErrorCode::ALL {
        assert_eq!(code.raw().and_then(ErrorCode::from_raw), Some(code));
        assert!(code.name().starts_with("CUDA_ERROR_"), "{}", code.name());
        assert!(!code.description().is_empty());
    }
    // codes newer than the bindings are named too
    assert_eq!(
        ErrorCode::from_raw(222),
        Some(ErrorCode::UnsupportedPtxVersion)
    );
    assert_eq!(ErrorCode::from_raw(34), Some(ErrorCode::StubLibrary));
}

#[test]
fn unknown_codes_are_kept_not_lost() {
    let code = ErrorCode::from_raw(4242).unwrap();
    assert_eq!(code, ErrorCode::Unrecognized(4242));
    assert_eq!(code.raw(), Some(4242));
    let e = Error::new("cuFuture", code);
    assert_eq!(
        e.to_string(),
        "cuFuture failed: CUDA_ERROR_UNRECOGNIZED 4242 (a result code this version of cuda-brand does not know)"
    );
}

#[test]
fn display_names_the_call_the_code_and_the_description() {
    let e = Error::new("cuMemAlloc_v2", ErrorCode::OutOfMemory);
    assert_eq!(
        e.to_string(),
        "cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"
    );
    assert_eq!(e.call(), "cuMemAlloc_v2");
    assert_eq!(e.code(), ErrorCode::OutOfMemory);
    assert_eq!(e.detail(), None);
    let e = Error::with_detail(
        "cuModuleLoadDataEx",
        ErrorCode::InvalidPtx,
        "ptxas fatal: line 3",
    );
    assert_eq!(
        e.to_string(),
        "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed): ptxas fatal: line 3"
    );
    assert_eq!(e.detail(), Some("ptxas fatal: line 3"));
}

#[test]
fn context_flags_set_and_clear_each_bit() {
    let f = ContextFlags::new();
    assert_eq!(f.bits(), 0);
    assert_eq!(f, ContextFlags::default());
    for (s, bits) in [
        (Scheduling::Auto, 0),
        (Scheduling::Spin, 1),
        (Scheduling::Yield, 2),
        (Scheduling::BlockingSync, 4),
    ] {
        let f = ContextFlags::new()
            .map_host(true)
            .scheduling(Scheduling::Spin)
            .scheduling(s);
        assert_eq!(f.bits(), bits | 8, "{s:?}");
        assert_eq!(f.get_scheduling(), s);
    }
    let f = ContextFlags::new().map_host(true).keep_local_memory(true);
    assert_eq!(f.bits(), 0x18);
    assert!(f.maps_host() && f.keeps_local_memory());
    let f = f.map_host(false);
    assert_eq!(f.bits(), 0x10);
    assert!(!f.maps_host() && f.keeps_local_memory());
    // bits the crate does not know survive a round trip through the driver's pattern
    assert_eq!(ContextFlags::from_bits(0x84).bits(), 0x84);
    assert_eq!(
        ContextFlags::from_bits(0x84).get_scheduling(),
        Scheduling::BlockingSync
    );
}

#[test]
fn enum_values_match_the_driver() {
    for (c, raw) in [
        (CacheConfig::PreferNone, 0),
        (CacheConfig::PreferShared, 1),
        (CacheConfig::PreferL1, 2),
        (CacheConfig::PreferEqual, 3),
    ] {
        assert_eq!(c.raw(), raw);
        assert_eq!(CacheConfig::from_raw(raw), Some(c));
    }
    assert_eq!(CacheConfig::from_raw(4), None);
    for (c, raw) in [
        (SharedMemoryConfig::DefaultBankSize, 0),
        (SharedMemoryConfig::FourByteBankSize, 1),
        (SharedMemoryConfig::EightByteBankSize, 2),
    ] {
        assert_eq!(c.raw(), raw);
        assert_eq!(SharedMemoryConfig::from_raw(raw), Some(c));
    }
    let range = StreamPriorityRange {
        least: 0,
        greatest: -5,
    };
    assert!(range.contains(0) && range.contains(-5) && range.contains(-2));
    assert!(!range.contains(1) && !range.contains(-6));
}

#[test]
fn driver_version_needs_no_gpu() {
    let v = cuda_brand::driver_version().expect("cuDriverGetVersion");
    assert!(v >= 10000, "driver version {v}");
}

/// Only meaningful where there is no GPU (this machine and CI); on a GPU machine the
/// driver initialises and there is nothing to check.
fn no_device() -> Option<Error> {
    match Device::count() {
        Ok(n) if n > 0 => {
            eprintln!("skipped: a GPU is present, so the no-device paths cannot be taken");
            None
        }
        Ok(_) => Some(Device::get(0).unwrap_err()),
        Err(e) => Some(e),
    }
}

#[test]
fn without_a_device_every_entry_point_returns_no_device() {
    let Some(e) = no_device() else { return };
    assert_eq!(e.code(), ErrorCode::NoDevice);
    assert_eq!(
        e.to_string(),
        "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"
    );
    assert_eq!(Device::count().unwrap_err(), e);
    assert_eq!(Device::get(0).unwrap_err(), e);
    assert_eq!(Device::all().unwrap_err(), e);
    // the first failure is remembered: asking again gives the same answer, no panic
    assert_eq!(Device::get(7).unwrap_err(), e);
}

#[test]
fn without_a_device_with_context_is_an_error_not_a_panic() {
    let Some(_) = no_device() else { return };
    let result = Device::get(0).and_then(|device| {
        cuda_brand::with_context(&device, ContextFlags::default(), |ctx| ctx.api_version())
    });
    assert_eq!(result.unwrap_err().code(), ErrorCode::NoDevice);
    let result = Device::get(0)
        .and_then(|device| cuda_brand::with_primary_context(&device, |ctx| ctx.api_version()));
    assert_eq!(result.unwrap_err().code(), ErrorCode::NoDevice);
}

#[test]
fn a_null_raw_context_is_an_error() {
    // SAFETY: a null handle is rejected before any driver call.
    let result =
        unsafe { cuda_brand::with_raw_context(std::ptr::null_mut(), |ctx| ctx.api_version()) };
    let e = result.unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidContext);
    assert_eq!(e.call(), "with_raw_context");
}
