//! [`NcclCode`]: NCCL's result codes, as an [`ErrorCode::Nccl`](super::ErrorCode::Nccl)
//! (feature `nccl`; public as `cuda_brand::nccl::NcclCode`). It lives with the errors so
//! that `error` names nothing of the layers above it.

#![forbid(unsafe_code)]

use std::fmt;

/// An `ncclResult_t` other than `ncclSuccess`, carried by
/// [`ErrorCode::Nccl`](super::ErrorCode::Nccl). The descriptions are NCCL's own (`ncclGetErrorString`),
/// without its advice to rerun with `NCCL_DEBUG`; the error's
/// [`detail`](super::Error::detail) holds NCCL's message for the failure itself
/// (`ncclGetLastError`), where it left one.
///
/// ```
/// use cuda_brand::nccl::NcclCode;
/// use cuda_brand::{Error, ErrorCode};
/// assert_eq!(NcclCode::from_raw(5), Some(NcclCode::InvalidUsage));
/// assert_eq!(NcclCode::from_raw(0), None); // ncclSuccess
/// let e = Error::new("ncclAllReduce", ErrorCode::Nccl(NcclCode::InvalidUsage));
/// assert_eq!(e.to_string(), "ncclAllReduce failed: ncclInvalidUsage (invalid usage)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NcclCode {
    /// `ncclUnhandledCudaError` (1): a CUDA call inside NCCL failed.
    UnhandledCudaError,
    /// `ncclSystemError` (2): a system call (memory, sockets, threads) failed.
    SystemError,
    /// `ncclInternalError` (3): NCCL's own bug or an unexpected state.
    InternalError,
    /// `ncclInvalidArgument` (4): a bad argument.
    InvalidArgument,
    /// `ncclInvalidUsage` (5): a valid argument used the wrong way (a device twice in a
    /// clique, a call that needs a group, ...).
    InvalidUsage,
    /// `ncclRemoteError` (6): a remote process exited or the network failed.
    RemoteError,
    /// `ncclInProgress` (7): a non-blocking operation is still in progress.
    InProgress,
    /// `ncclTimeout` (8, NCCL 2.29): an operation timed out.
    Timeout,
    /// A code this crate does not know, kept as NCCL returned it.
    Unrecognized(u32),
}

impl NcclCode {
    /// The code for a raw `ncclResult_t`; `None` for `ncclSuccess` (0).
    pub const fn from_raw(raw: u32) -> Option<NcclCode> {
        Some(match raw {
            0 => return None,
            1 => NcclCode::UnhandledCudaError,
            2 => NcclCode::SystemError,
            3 => NcclCode::InternalError,
            4 => NcclCode::InvalidArgument,
            5 => NcclCode::InvalidUsage,
            6 => NcclCode::RemoteError,
            7 => NcclCode::InProgress,
            8 => NcclCode::Timeout,
            other => NcclCode::Unrecognized(other),
        })
    }

    /// The raw `ncclResult_t` value.
    pub const fn raw(self) -> u32 {
        match self {
            NcclCode::UnhandledCudaError => 1,
            NcclCode::SystemError => 2,
            NcclCode::InternalError => 3,
            NcclCode::InvalidArgument => 4,
            NcclCode::InvalidUsage => 5,
            NcclCode::RemoteError => 6,
            NcclCode::InProgress => 7,
            NcclCode::Timeout => 8,
            NcclCode::Unrecognized(raw) => raw,
        }
    }

    /// NCCL's name of the code, e.g. `"ncclInvalidUsage"`.
    pub const fn name(self) -> &'static str {
        match self {
            NcclCode::UnhandledCudaError => "ncclUnhandledCudaError",
            NcclCode::SystemError => "ncclSystemError",
            NcclCode::InternalError => "ncclInternalError",
            NcclCode::InvalidArgument => "ncclInvalidArgument",
            NcclCode::InvalidUsage => "ncclInvalidUsage",
            NcclCode::RemoteError => "ncclRemoteError",
            NcclCode::InProgress => "ncclInProgress",
            NcclCode::Timeout => "ncclTimeout",
            NcclCode::Unrecognized(_) => "ncclUnrecognized",
        }
    }

    /// NCCL's description of the code, e.g. `"invalid usage"`.
    pub const fn description(self) -> &'static str {
        match self {
            NcclCode::UnhandledCudaError => "unhandled cuda error",
            NcclCode::SystemError => "unhandled system error",
            NcclCode::InternalError => {
                "internal error - please report this issue to the NCCL developers"
            }
            NcclCode::InvalidArgument => "invalid argument",
            NcclCode::InvalidUsage => "invalid usage",
            NcclCode::RemoteError => "remote process exited or there was a network error",
            NcclCode::InProgress => "NCCL operation in progress",
            NcclCode::Timeout => "timeout",
            NcclCode::Unrecognized(_) => "a result code this version of cuda-brand does not know",
        }
    }
}

impl fmt::Display for NcclCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NcclCode::Unrecognized(raw) => {
                write!(f, "{} {} ({})", self.name(), raw, self.description())
            }
            _ => write!(f, "{} ({})", self.name(), self.description()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Error, ErrorCode};
    use super::*;

    #[test]
    fn every_code_round_trips_and_reads_like_nccl() {
        for raw in 1..=20 {
            let code = NcclCode::from_raw(raw).unwrap();
            assert_eq!(code.raw(), raw);
            assert!(code.name().starts_with("nccl"));
            let e = ErrorCode::Nccl(code);
            assert_eq!(e.raw(), None, "not a CUresult");
            assert!(!e.is_sticky());
            assert_eq!(e.to_string(), code.to_string());
        }
        assert_eq!(NcclCode::from_raw(0), None);
        assert_eq!(
            NcclCode::from_raw(42).unwrap().to_string(),
            "ncclUnrecognized 42 (a result code this version of cuda-brand does not know)"
        );
        let e = Error::with_detail(
            "ncclCommInitAll",
            ErrorCode::Nccl(NcclCode::InvalidUsage),
            "Duplicate GPU detected",
        );
        assert_eq!(
            e.to_string(),
            "ncclCommInitAll failed: ncclInvalidUsage (invalid usage): Duplicate GPU detected"
        );
        assert_eq!(
            ErrorCode::NcclNotFound.to_string(),
            "CUDA_BRAND_NCCL_NOT_FOUND (NCCL library not found)"
        );
    }
}
