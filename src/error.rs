//! Errors: one [`Error`] type naming the failing driver call and its [`ErrorCode`].

#![forbid(unsafe_code)]

use std::fmt;

/// What a driver call (or the crate's own check before one) returned instead of success.
///
/// `Display` names the call, then the driver's own name and description of the code,
/// then, where there is one, a detail such as the JIT compiler's log:
///
/// ```
/// use cuda_brand::{Error, ErrorCode};
/// let e = Error::new("cuMemAlloc_v2", ErrorCode::OutOfMemory);
/// assert_eq!(e.to_string(), "cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
/// ```
///
/// `Debug` prints the same text, so a `main` that returns [`Result`] reports a failure
/// readably: `Error: cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is
/// detected)` rather than the fields of a struct.
///
/// ```
/// use cuda_brand::{Error, ErrorCode};
/// let e = Error::new("cuInit", ErrorCode::NoDevice);
/// assert_eq!(
///     format!("{e:?}"),
///     "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"
/// );
/// assert_eq!(format!("{e:?}"), e.to_string());
/// ```
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call} failed: {code}{}", detail_suffix(.detail))]
pub struct Error {
    call: &'static str,
    code: ErrorCode,
    detail: Option<Box<str>>,
}

impl fmt::Debug for Error {
    /// The `Display` text (what `main` prints when it returns this error).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

fn detail_suffix(detail: &Option<Box<str>>) -> String {
    match detail {
        Some(d) => format!(": {d}"),
        None => String::new(),
    }
}

impl Error {
    /// An error of `call` with `code` and no detail.
    pub fn new(call: &'static str, code: ErrorCode) -> Self {
        Error {
            call,
            code,
            detail: None,
        }
    }

    /// An error of `call` with `code` and a human-readable detail (bad input, a JIT log).
    pub fn with_detail(call: &'static str, code: ErrorCode, detail: impl Into<String>) -> Self {
        Error {
            call,
            code,
            detail: Some(detail.into().into_boxed_str()),
        }
    }

    /// The driver entry point (or the crate's function, for checks made before a call)
    /// that failed, e.g. `"cuMemAlloc_v2"`; `"loading the CUDA driver library"` when the
    /// driver library itself could not be loaded.
    pub fn call(&self) -> &'static str {
        self.call
    }

    /// What [`call`](Error::call) is when loading the driver library failed (the error's
    /// code is then [`ErrorCode::DriverNotFound`] or [`ErrorCode::DriverTooOld`]).
    pub(crate) const LOAD_DRIVER: &'static str = "loading the CUDA driver library";

    /// The driver's result code (or one of the crate's own, see [`ErrorCode`]).
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// Extra text: the JIT compiler's log, what was wrong with the input, or which driver
    /// library was not found and how to get one.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

macro_rules! error_codes {
    ($($variant:ident = $value:literal, $name:literal, $description:literal;)*) => {
        /// A `CUresult` other than `CUDA_SUCCESS`: every code the driver library names
        /// (taken from the driver's own `cuGetErrorName`/`cuGetErrorString`), plus
        /// [`ErrorCode::Unrecognized`] for codes newer than this table; and two codes of
        /// the crate's own, for a driver library that is missing
        /// ([`DriverNotFound`](ErrorCode::DriverNotFound)) or too old
        /// ([`DriverTooOld`](ErrorCode::DriverTooOld)), which are not `CUresult`s and have
        /// no raw value.
        ///
        /// ```
        /// use cuda_brand::ErrorCode;
        /// assert_eq!(ErrorCode::from_raw(2), Some(ErrorCode::OutOfMemory));
        /// assert_eq!(ErrorCode::OutOfMemory.raw(), Some(2));
        /// assert_eq!(ErrorCode::DriverNotFound.raw(), None);
        /// assert_eq!(
        ///     ErrorCode::DriverNotFound.to_string(),
        ///     "CUDA_BRAND_DRIVER_NOT_FOUND (CUDA driver library not found)"
        /// );
        /// ```
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $(
                #[doc = concat!("`", $name, "` (", $value, "): ", $description, ".")]
                $variant,
            )*
            /// A code this crate does not know, kept as the driver returned it.
            Unrecognized(u32),
            /// `CUDA_BRAND_DRIVER_NOT_FOUND` (the crate's own, no raw value): the CUDA driver
            /// library (`libcuda.so.1`, `nvcuda.dll`, or the file that
            /// `CUDA_BRAND_DRIVER_LIBRARY` names) could not be loaded. The error's detail says
            /// what was tried and how to get the library.
            DriverNotFound,
            /// `CUDA_BRAND_DRIVER_TOO_OLD` (the crate's own, no raw value): the driver is
            /// older than the crate's minimum (CUDA 11.4, R470), or older than an entry point
            /// newer than that minimum needs. The error's detail names the version needed
            /// and the installed one.
            DriverTooOld,
            /// An NCCL call (feature `nccl`) returned this `ncclResult_t` (not `ncclSuccess`);
            /// no `CUresult`, so no raw value here (see [`NcclCode::raw`](crate::nccl::NcclCode::raw)).
            /// The error's detail is NCCL's own message (`ncclGetLastError`) where it left one.
            #[cfg(feature = "nccl")]
            Nccl(crate::nccl::NcclCode),
            /// `CUDA_BRAND_NCCL_NOT_FOUND` (the crate's own, feature `nccl`): the NCCL library
            /// (`libnccl.so.2`, or the file that `CUDA_BRAND_NCCL_LIBRARY` names) could not be
            /// loaded. The error's detail says what was tried and where PyTorch keeps one.
            #[cfg(feature = "nccl")]
            NcclNotFound,
            /// `CUDA_BRAND_NCCL_TOO_OLD` (the crate's own, feature `nccl`): the NCCL library is
            /// older than the crate's minimum (NCCL 2.12) or lacks an entry point.
            #[cfg(feature = "nccl")]
            NcclTooOld,
        }

        impl ErrorCode {
            /// The code for a raw `CUresult` value; `None` for `CUDA_SUCCESS` (0). Never
            /// one of the crate's own codes.
            pub const fn from_raw(raw: u32) -> Option<ErrorCode> {
                match raw {
                    0 => None,
                    $($value => Some(ErrorCode::$variant),)*
                    other => Some(ErrorCode::Unrecognized(other)),
                }
            }

            /// The raw `CUresult` value; `None` for the crate's own codes
            /// ([`DriverNotFound`](ErrorCode::DriverNotFound),
            /// [`DriverTooOld`](ErrorCode::DriverTooOld)), which no driver call returns.
            pub const fn raw(self) -> Option<u32> {
                match self {
                    $(ErrorCode::$variant => Some($value),)*
                    ErrorCode::Unrecognized(raw) => Some(raw),
                    ErrorCode::DriverNotFound | ErrorCode::DriverTooOld => None,
                    #[cfg(feature = "nccl")]
                    ErrorCode::Nccl(_) | ErrorCode::NcclNotFound | ErrorCode::NcclTooOld => None,
                }
            }

            /// The driver's name of the code, e.g. `"CUDA_ERROR_OUT_OF_MEMORY"` (for the
            /// crate's own codes, a name in the same style: `"CUDA_BRAND_DRIVER_NOT_FOUND"`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $name,)*
                    ErrorCode::Unrecognized(_) => "CUDA_ERROR_UNRECOGNIZED",
                    ErrorCode::DriverNotFound => "CUDA_BRAND_DRIVER_NOT_FOUND",
                    ErrorCode::DriverTooOld => "CUDA_BRAND_DRIVER_TOO_OLD",
                    #[cfg(feature = "nccl")]
                    ErrorCode::Nccl(code) => code.name(),
                    #[cfg(feature = "nccl")]
                    ErrorCode::NcclNotFound => "CUDA_BRAND_NCCL_NOT_FOUND",
                    #[cfg(feature = "nccl")]
                    ErrorCode::NcclTooOld => "CUDA_BRAND_NCCL_TOO_OLD",
                }
            }

            /// The driver's description of the code, e.g. `"out of memory"` (the crate's own,
            /// for its own codes).
            pub const fn description(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $description,)*
                    ErrorCode::Unrecognized(_) => "a result code this version of cuda-brand does not know",
                    ErrorCode::DriverNotFound => "CUDA driver library not found",
                    ErrorCode::DriverTooOld => "CUDA driver is too old",
                    #[cfg(feature = "nccl")]
                    ErrorCode::Nccl(code) => code.description(),
                    #[cfg(feature = "nccl")]
                    ErrorCode::NcclNotFound => "NCCL library not found",
                    #[cfg(feature = "nccl")]
                    ErrorCode::NcclTooOld => "NCCL library is too old",
                }
            }

            /// Every named `CUresult` code, in increasing order of value (not
            /// [`Unrecognized`](ErrorCode::Unrecognized), nor the crate's own codes).
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];
        }
    };
}

impl ErrorCode {
    /// Whether the error is *sticky*: it leaves the context, and the process, in a state
    /// the driver documents as unrecoverable ("the process must be terminated and
    /// relaunched"): every later call of the process reports it again. These are the
    /// faults of a kernel (an illegal address or instruction, a misaligned address, a
    /// hardware stack error, a device-side assert, a launch failure or timeout) and
    /// uncorrectable ECC or NVLink errors.
    ///
    /// ```
    /// use cuda_brand::ErrorCode;
    /// assert!(ErrorCode::IllegalAddress.is_sticky());
    /// assert!(!ErrorCode::OutOfMemory.is_sticky()); // a failed allocation can be retried
    /// ```
    pub const fn is_sticky(self) -> bool {
        matches!(
            self,
            ErrorCode::EccUncorrectable
                | ErrorCode::NvlinkUncorrectable
                | ErrorCode::IllegalAddress
                | ErrorCode::LaunchTimeout
                | ErrorCode::Assert
                | ErrorCode::HardwareStackError
                | ErrorCode::IllegalInstruction
                | ErrorCode::MisalignedAddress
                | ErrorCode::InvalidAddressSpace
                | ErrorCode::InvalidPc
                | ErrorCode::LaunchFailed
        )
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorCode::Unrecognized(raw) => {
                write!(f, "{} {} ({})", self.name(), raw, self.description())
            }
            #[cfg(feature = "nccl")]
            ErrorCode::Nccl(code) => fmt::Display::fmt(code, f),
            _ => write!(f, "{} ({})", self.name(), self.description()),
        }
    }
}

impl From<cuda_driver_sys::CUresult> for ErrorCode {
    /// Maps a result of the bindings' enum. `CUDA_SUCCESS` maps to `Unrecognized(0)`: a
    /// success is not an error, and callers check for it first.
    fn from(r: cuda_driver_sys::CUresult) -> Self {
        ErrorCode::from_raw(r as u32).unwrap_or(ErrorCode::Unrecognized(0))
    }
}

error_codes! {
    InvalidValue = 1, "CUDA_ERROR_INVALID_VALUE", "invalid argument";
    OutOfMemory = 2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory";
    NotInitialized = 3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error";
    Deinitialized = 4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down";
    ProfilerDisabled = 5, "CUDA_ERROR_PROFILER_DISABLED", "profiler disabled while using external profiling tool";
    ProfilerNotInitialized = 6, "CUDA_ERROR_PROFILER_NOT_INITIALIZED", "profiler not initialized: call cudaProfilerInitialize()";
    ProfilerAlreadyStarted = 7, "CUDA_ERROR_PROFILER_ALREADY_STARTED", "profiler already started";
    ProfilerAlreadyStopped = 8, "CUDA_ERROR_PROFILER_ALREADY_STOPPED", "profiler already stopped";
    StubLibrary = 34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library";
    DeviceUnavailable = 46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable";
    NoDevice = 100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected";
    InvalidDevice = 101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal";
    DeviceNotLicensed = 102, "CUDA_ERROR_DEVICE_NOT_LICENSED", "device doesn't have valid Grid license";
    InvalidImage = 200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid";
    InvalidContext = 201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context";
    ContextAlreadyCurrent = 202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", "context already current";
    MapFailed = 205, "CUDA_ERROR_MAP_FAILED", "mapping of buffer object failed";
    UnmapFailed = 206, "CUDA_ERROR_UNMAP_FAILED", "unmapping of buffer object failed";
    ArrayIsMapped = 207, "CUDA_ERROR_ARRAY_IS_MAPPED", "array is mapped";
    AlreadyMapped = 208, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped";
    NoBinaryForGpu = 209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device";
    AlreadyAcquired = 210, "CUDA_ERROR_ALREADY_ACQUIRED", "resource already acquired";
    NotMapped = 211, "CUDA_ERROR_NOT_MAPPED", "resource not mapped";
    NotMappedAsArray = 212, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY", "resource not mapped as array";
    NotMappedAsPointer = 213, "CUDA_ERROR_NOT_MAPPED_AS_POINTER", "resource not mapped as pointer";
    EccUncorrectable = 214, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered";
    UnsupportedLimit = 215, "CUDA_ERROR_UNSUPPORTED_LIMIT", "limit is not supported on this architecture";
    ContextAlreadyInUse = 216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE", "exclusive-thread device already in use by a different thread";
    PeerAccessUnsupported = 217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices";
    InvalidPtx = 218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed";
    InvalidGraphicsContext = 219, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT", "invalid OpenGL or DirectX context";
    NvlinkUncorrectable = 220, "CUDA_ERROR_NVLINK_UNCORRECTABLE", "uncorrectable NVLink error detected during the execution";
    JitCompilerNotFound = 221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "PTX JIT compiler library not found";
    UnsupportedPtxVersion = 222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain.";
    JitCompilationDisabled = 223, "CUDA_ERROR_JIT_COMPILATION_DISABLED", "PTX JIT compilation was disabled";
    UnsupportedExecAffinity = 224, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY", "the provided execution affinity is not supported";
    UnsupportedDevsideSync = 225, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC", "the provided PTX contains unsupported call to cudaDeviceSynchronize";
    InvalidSource = 300, "CUDA_ERROR_INVALID_SOURCE", "device kernel image is invalid";
    FileNotFound = 301, "CUDA_ERROR_FILE_NOT_FOUND", "file not found";
    SharedObjectSymbolNotFound = 302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", "shared object symbol not found";
    SharedObjectInitFailed = 303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", "shared object initialization failed";
    OperatingSystem = 304, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS";
    InvalidHandle = 400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle";
    IllegalState = 401, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state";
    NotFound = 500, "CUDA_ERROR_NOT_FOUND", "named symbol not found";
    NotReady = 600, "CUDA_ERROR_NOT_READY", "device not ready";
    IllegalAddress = 700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered";
    LaunchOutOfResources = 701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch";
    LaunchTimeout = 702, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated";
    LaunchIncompatibleTexturing = 703, "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING", "launch uses incompatible texturing mode";
    PeerAccessAlreadyEnabled = 704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled";
    PeerAccessNotEnabled = 705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled";
    PrimaryContextActive = 708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "cannot set while device is active in this process";
    ContextIsDestroyed = 709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed";
    Assert = 710, "CUDA_ERROR_ASSERT", "device-side assert triggered";
    TooManyPeers = 711, "CUDA_ERROR_TOO_MANY_PEERS", "peer mapping resources exhausted";
    HostMemoryAlreadyRegistered = 712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped";
    HostMemoryNotRegistered = 713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region";
    HardwareStackError = 714, "CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error";
    IllegalInstruction = 715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction was encountered";
    MisalignedAddress = 716, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address";
    InvalidAddressSpace = 717, "CUDA_ERROR_INVALID_ADDRESS_SPACE", "operation not supported on global/shared address space";
    InvalidPc = 718, "CUDA_ERROR_INVALID_PC", "invalid program counter";
    LaunchFailed = 719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure";
    CooperativeLaunchTooLarge = 720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "too many blocks in cooperative launch";
    NotPermitted = 800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted";
    NotSupported = 801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported";
    SystemNotReady = 802, "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized";
    SystemDriverMismatch = 803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination";
    CompatNotSupportedOnDevice = 804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "forward compatibility was attempted on non supported HW";
    MpsConnectionFailed = 805, "CUDA_ERROR_MPS_CONNECTION_FAILED", "MPS client failed to connect to the MPS control daemon or the MPS server";
    MpsRpcFailure = 806, "CUDA_ERROR_MPS_RPC_FAILURE", "the remote procedural call between the MPS server and the MPS client failed";
    MpsServerNotReady = 807, "CUDA_ERROR_MPS_SERVER_NOT_READY", "MPS server is not ready to accept new MPS client requests";
    MpsMaxClientsReached = 808, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED", "the hardware resources required to create MPS client have been exhausted";
    MpsMaxConnectionsReached = 809, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED", "the hardware resources required to support device connections have been exhausted";
    MpsClientTerminated = 810, "CUDA_ERROR_MPS_CLIENT_TERMINATED", "the MPS client has been terminated by the server";
    CdpNotSupported = 811, "CUDA_ERROR_CDP_NOT_SUPPORTED", "is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it";
    CdpVersionMismatch = 812, "CUDA_ERROR_CDP_VERSION_MISMATCH", "unsupported interaction between different versions of CUDA Dynamic Parallelism";
    StreamCaptureUnsupported = 900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing";
    StreamCaptureInvalidated = 901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture";
    StreamCaptureMerge = 902, "CUDA_ERROR_STREAM_CAPTURE_MERGE", "operation would result in a merge of separate capture sequences";
    StreamCaptureUnmatched = 903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "capture was not ended in the same stream as it began";
    StreamCaptureUnjoined = 904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "capturing stream has unjoined work";
    StreamCaptureIsolation = 905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "dependency created on uncaptured work in another stream";
    StreamCaptureImplicit = 906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "operation would make the legacy stream depend on a capturing blocking stream";
    CapturedEvent = 907, "CUDA_ERROR_CAPTURED_EVENT", "operation not permitted on an event last recorded in a capturing stream";
    StreamCaptureWrongThread = 908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempt to terminate a thread-local capture sequence from another thread";
    Timeout = 909, "CUDA_ERROR_TIMEOUT", "wait operation timed out";
    GraphExecUpdateFailure = 910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update";
    ExternalDevice = 911, "CUDA_ERROR_EXTERNAL_DEVICE", "an async error has occured in external entity outside of CUDA";
    InvalidClusterSize = 912, "CUDA_ERROR_INVALID_CLUSTER_SIZE", "a kernel launch error has occurred due to cluster misconfiguration";
    Unknown = 999, "CUDA_ERROR_UNKNOWN", "unknown error";
}
