//! Errors: one [`Error`] type naming the failing driver call and its [`ErrorCode`].
//!
//! The floor of the house: this module imports nothing of the crate, and every layer, the
//! driver layer first, uses it. The result codes of the other NVIDIA libraries live here
//! for that reason ([`NcclCode`], feature `nccl`, public as `cuda_brand::nccl::NcclCode`).

#![forbid(unsafe_code)]

use std::fmt;

#[cfg(feature = "cublas")]
mod cublas_code;
#[cfg(feature = "nccl")]
mod nccl_code;

#[cfg(feature = "nccl")]
pub use nccl_code::NcclCode;

mod invalid;
pub use invalid::Invalid;

#[cfg(any(feature = "cufft", feature = "curand"))]
mod library_codes;

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
/// An input the crate refuses before any driver call (differing lengths, a range out of
/// bounds, overlapping memory, ...) is [`ErrorCode::InvalidInput`], and
/// [`invalid`](Error::invalid) says what was wrong as an [`Invalid`] with fields, which
/// `Display` prints after the code.
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
///
/// # Errors of a teardown
///
/// The closure-scoped entry points ([`with_context`](crate::with_context),
/// [`with_primary_context`](crate::with_primary_context),
/// [`SharedContext::enter`](crate::SharedContext::enter), [`Stream::scope`](crate::Stream::scope)
/// and their kin) end with a teardown (synchronize, pop, destroy; or a scope's final wait
/// and frees). When the closure returned an `Err` of this type and the teardown failed
/// too, the teardown's error is kept on the closure's, as
/// [`teardown_error`](Error::teardown_error), and `Display` prints both:
///
/// ```
/// use cuda_brand::{Error, ErrorCode};
/// let closure = Error::new("cuLaunchKernel", ErrorCode::LaunchOutOfResources);
/// let teardown = Error::new("cuCtxSynchronize", ErrorCode::IllegalAddress);
/// let e = closure.with_teardown_error(teardown.clone());
/// assert_eq!(e.code(), ErrorCode::LaunchOutOfResources); // the closure's error comes first
/// assert_eq!(e.teardown_error(), Some(&teardown));
/// assert_eq!(
///     e.to_string(),
///     "cuLaunchKernel failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (too many resources requested for launch); \
///      also, during teardown: cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)"
/// );
/// assert!(e.is_sticky()); // the teardown's error poisoned the context
/// ```
///
/// A teardown error may carry one of its own (a failed synchronize, then a failed destroy,
/// then the report of handles whose release failed in `drop`): [`teardown_errors`](
/// Error::teardown_errors) walks them all. For closures whose error type is not this one,
/// the `_and_teardown` entry points
/// ([`with_context_and_teardown`](crate::with_context_and_teardown) and its kin) return
/// both errors in a [`WithTeardown`].
///
/// The error is three words (32 bytes on 64-bit targets): the call, the code, and one
/// optional box holding the detail, the [`Invalid`] and the teardown's error, so `Result<(), Error>` stays
/// small on every path that succeeds.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub struct Error {
    call: &'static str,
    code: ErrorCode,
    extra: Option<Box<Extra>>,
}

/// The parts of an [`Error`] that most errors lack, boxed together.
#[derive(Clone, PartialEq, Eq)]
struct Extra {
    detail: Option<Box<str>>,
    invalid: Option<Invalid>,
    teardown: Option<Error>,
}

impl fmt::Debug for Error {
    /// The `Display` text (what `main` prints when it returns this error).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Error {
    /// The call, the code and the detail, then each teardown error after
    /// `; also, during teardown: `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in std::iter::once(self)
            .chain(self.teardown_errors())
            .enumerate()
        {
            if i > 0 {
                f.write_str("; also, during teardown: ")?;
            }
            write!(f, "{} failed: {}", e.call, e.code)?;
            if let Some(invalid) = e.invalid() {
                write!(f, ": {invalid}")?;
            }
            if let Some(detail) = e.detail() {
                write!(f, ": {detail}")?;
            }
        }
        Ok(())
    }
}

impl Error {
    /// An error of `call` with `code` and no detail.
    pub fn new(call: &'static str, code: ErrorCode) -> Self {
        Error {
            call,
            code,
            extra: None,
        }
    }

    /// An error of `call` with `code` and a human-readable detail (a JIT log, which library
    /// was not found). Input the crate refuses is [`invalid_input`](Error::invalid_input)
    /// instead, whose [`Invalid`] a program can match.
    pub fn with_detail(call: &'static str, code: ErrorCode, detail: impl Into<String>) -> Self {
        Error {
            call,
            code,
            extra: Some(Box::new(Extra {
                detail: Some(detail.into().into_boxed_str()),
                invalid: None,
                teardown: None,
            })),
        }
    }

    /// An error of `call` with the code [`ErrorCode::InvalidInput`]: the crate refused
    /// the input before any driver call, for the reason `invalid`.
    pub fn invalid_input(call: &'static str, invalid: Invalid) -> Self {
        Error {
            call,
            code: ErrorCode::InvalidInput,
            extra: Some(Box::new(Extra {
                detail: None,
                invalid: Some(invalid),
                teardown: None,
            })),
        }
    }

    /// What was wrong with the input, when the crate refused it before any driver call
    /// (the code is then [`ErrorCode::InvalidInput`]); `None` for every other error,
    /// the driver's own `CUDA_ERROR_INVALID_VALUE` included.
    ///
    /// ```
    /// use cuda_brand::{Error, ErrorCode, Invalid};
    /// let e = Error::invalid_input(
    ///     "DeviceSlice::split_at",
    ///     Invalid::OutOfBounds { start: 5, end: 5, len: 4 },
    /// );
    /// match e.invalid() {
    ///     Some(Invalid::OutOfBounds { len, .. }) => assert_eq!(*len, 4),
    ///     other => panic!("{other:?}"),
    /// }
    /// assert_eq!(Error::new("cuMemcpy", ErrorCode::InvalidValue).invalid(), None);
    /// ```
    pub fn invalid(&self) -> Option<&Invalid> {
        self.extra.as_ref()?.invalid.as_ref()
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

    /// Extra text: the JIT compiler's log, why a state refuses the call, or which driver
    /// library was not found and how to get one. What was wrong with an input the crate
    /// refused is [`invalid`](Error::invalid), with fields, not text.
    pub fn detail(&self) -> Option<&str> {
        self.extra.as_ref()?.detail.as_deref()
    }

    /// The error of the teardown that ran after this error happened, if that failed too:
    /// the closure of [`with_context`](crate::with_context) (or another closure-scoped entry
    /// point) returned this error, and then synchronizing, popping or destroying the
    /// context (or a scope's final wait) failed as well. `None` when the teardown
    /// succeeded, and for errors that no teardown followed.
    ///
    /// The teardown's error may carry another ([`teardown_errors`](Error::teardown_errors)
    /// lists the whole chain).
    pub fn teardown_error(&self) -> Option<&Error> {
        self.extra.as_ref()?.teardown.as_ref()
    }

    /// Every teardown error after this one, in the order they happened: the
    /// [`teardown_error`](Error::teardown_error), its own, and so on.
    ///
    /// ```
    /// use cuda_brand::{Error, ErrorCode};
    /// let e = Error::new("my step", ErrorCode::Unknown)
    ///     .with_teardown_error(Error::new("cuCtxSynchronize", ErrorCode::IllegalAddress))
    ///     .with_teardown_error(Error::new("cuMemFreeAsync", ErrorCode::IllegalAddress));
    /// let calls: Vec<_> = e.teardown_errors().map(|t| t.call()).collect();
    /// assert_eq!(calls, ["cuCtxSynchronize", "cuMemFreeAsync"]);
    /// ```
    pub fn teardown_errors(&self) -> impl Iterator<Item = &Error> {
        std::iter::successors(self.teardown_error(), |e| e.teardown_error())
    }

    /// This error with `teardown` appended to its chain of teardown errors (as the
    /// [`teardown_error`](Error::teardown_error) of the last one), so that both reach the
    /// caller.
    #[must_use]
    pub fn with_teardown_error(mut self, teardown: Error) -> Error {
        self.append_teardown_error(teardown);
        self
    }

    fn append_teardown_error(&mut self, teardown: Error) {
        let extra = self.extra.get_or_insert_with(|| {
            Box::new(Extra {
                detail: None,
                invalid: None,
                teardown: None,
            })
        });
        match &mut extra.teardown {
            Some(next) => next.append_teardown_error(teardown),
            slot @ None => *slot = Some(teardown),
        }
    }

    /// Whether this error or any of its [`teardown_errors`](Error::teardown_errors) has a
    /// sticky code ([`ErrorCode::is_sticky`]): then the context, and the process, are
    /// poisoned (see there).
    pub fn is_sticky(&self) -> bool {
        self.code.is_sticky() || self.teardown_errors().any(|t| t.code.is_sticky())
    }
}

/// An error of a closure together with the error of the teardown that followed it: what
/// the `_and_teardown` entry points
/// ([`with_context_and_teardown`](crate::with_context_and_teardown),
/// [`with_primary_context_and_teardown`](crate::with_primary_context_and_teardown),
/// [`SharedContext::enter_and_teardown`](crate::SharedContext::enter_and_teardown),
/// [`Stream::scope_and_teardown`](crate::Stream::scope_and_teardown),
/// [`Stream::scope_pair_and_teardown`](crate::Stream::scope_pair_and_teardown),
/// [`Stream::scope_all_and_teardown`](crate::Stream::scope_all_and_teardown)) return, for
/// any error type `E`.
///
/// [`error`](WithTeardown::error) is what the plain entry point returns: the closure's
/// error, or, when the closure succeeded and the teardown failed, `E::from` the
/// teardown's error. [`teardown_error`](WithTeardown::teardown_error) is the teardown's
/// error when the closure failed too, which the plain entry point can keep only when `E`
/// is [`Error`] (it cannot attach an error to a value of a type it does not know).
///
/// ```no_run
/// use cuda_brand::{with_context_and_teardown, ContextFlags, Device, WithTeardown};
/// # fn main() -> anyhow::Result<()> {
/// let device = Device::get(0)?;
/// let result = with_context_and_teardown(&device, ContextFlags::default(), |ctx| {
///     anyhow::ensure!(ctx.api_version()? >= 3020, "an old context API");
///     Ok(())
/// });
/// if let Err(failed) = result {
///     if let Some(teardown) = failed.teardown_error() {
///         eprintln!("the teardown failed too: {teardown}");
///     }
///     return Err(failed.into_error());
/// }
/// # Ok(()) }
/// ```
pub struct WithTeardown<E> {
    error: E,
    teardown: Option<Error>,
}

impl<E> WithTeardown<E> {
    /// `error`, with the error of the teardown that followed it (for wrappers of the
    /// `_and_teardown` entry points, and tests).
    ///
    /// ```
    /// use cuda_brand::{Error, ErrorCode, WithTeardown};
    /// let teardown = Error::new("cuCtxSynchronize", ErrorCode::IllegalAddress);
    /// let both = WithTeardown::new("my step failed", Some(teardown));
    /// assert_eq!(
    ///     both.to_string(),
    ///     "my step failed; also, during teardown: cuCtxSynchronize failed: \
    ///      CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)"
    /// );
    /// ```
    pub fn new(error: E, teardown: Option<Error>) -> Self {
        WithTeardown { error, teardown }
    }

    /// The error the plain entry point would return.
    pub fn error(&self) -> &E {
        &self.error
    }

    /// The teardown's error, when it failed after the closure had failed.
    pub fn teardown_error(&self) -> Option<&Error> {
        self.teardown.as_ref()
    }

    /// Both parts.
    pub fn into_parts(self) -> (E, Option<Error>) {
        (self.error, self.teardown)
    }

    /// The error the plain entry point would return, giving up the teardown's error (read
    /// it first with [`teardown_error`](WithTeardown::teardown_error)).
    pub fn into_error(self) -> E {
        self.error
    }

    /// What an `_and_teardown` entry point returns, from the plain entry point it wraps: `outcome`
    /// is what the closure returned (`None`: it never ran, as when creating the context
    /// failed), `torn_down` what the plain entry point returned for a closure that returned
    /// `Ok(())` (so its `Err` is the error of the setup or of the teardown).
    pub(crate) fn settle<R>(
        call: &'static str,
        outcome: Option<Result<R, E>>,
        torn_down: Result<()>,
    ) -> Result<R, Self>
    where
        E: From<Error>,
    {
        match (outcome, torn_down) {
            (Some(Ok(value)), Ok(())) => Ok(value),
            (Some(Err(error)), torn_down) => Err(WithTeardown {
                error,
                teardown: torn_down.err(),
            }),
            (Some(Ok(_)) | None, Err(e)) => Err(WithTeardown::new(E::from(e), None)),
            // the plain entry points return `Ok` only after running the closure
            (None, Ok(())) => Err(WithTeardown::new(
                E::from(Error::with_detail(
                    call,
                    ErrorCode::Unknown,
                    "the closure did not run",
                )),
                None,
            )),
        }
    }
}

impl WithTeardown<Error> {
    /// Both errors in one [`Error`]: the teardown's becomes the
    /// [`teardown_error`](Error::teardown_error) of the closure's (what the plain entry
    /// points return for closures of this error type).
    ///
    /// (A method, not a `From` impl: a second `From` impl into [`Error`] would stop the
    /// compiler from inferring the error type of a closure whose result is used with `?`.)
    pub fn into_combined(self) -> Error {
        match self.teardown {
            Some(t) => self.error.with_teardown_error(t),
            None => self.error,
        }
    }
}

impl<E: fmt::Display> fmt::Display for WithTeardown<E> {
    /// The error, then `; also, during teardown: ` and the teardown's error, if any.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)?;
        if let Some(t) = &self.teardown {
            write!(f, "; also, during teardown: {t}")?;
        }
        Ok(())
    }
}

impl<E: fmt::Debug> fmt::Debug for WithTeardown<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithTeardown")
            .field("error", &self.error)
            .field("teardown", &self.teardown)
            .finish()
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for WithTeardown<E> {}

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
            /// `CUDA_BRAND_INVALID_INPUT` (the crate's own, no raw value): the crate refused
            /// an input before any driver or library call; [`Error::invalid`] says what was
            /// wrong, as an [`Invalid`] with fields. The driver's own
            /// `CUDA_ERROR_INVALID_VALUE` is [`InvalidValue`](ErrorCode::InvalidValue).
            InvalidInput,
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
            /// `CUDA_BRAND_NVRTC_NOT_FOUND` (the crate's own, no raw value): the runtime
            /// compiler's library (`libnvrtc.so`, or the file that
            /// `CUDA_BRAND_NVRTC_LIBRARY` names) could not be loaded (the `nvrtc`
            /// feature). The error's detail says what was tried.
            NvrtcNotFound,
            /// An `nvrtcResult` of the runtime compiler (the `nvrtc` feature), kept as it
            /// returned it: `NVRTC_ERROR_COMPILATION` (6) for source that does not compile,
            /// with the compiler's log in the error's detail. Not a `CUresult`: no raw value.
            Nvrtc(u32),
            /// An NCCL call (feature `nccl`) returned this `ncclResult_t` (not `ncclSuccess`);
            /// no `CUresult`, so no raw value here (see [`NcclCode::raw`]).
            /// The error's detail is NCCL's own message (`ncclGetLastError`) where it left one.
            #[cfg(feature = "nccl")]
            Nccl(NcclCode),
            /// `CUDA_BRAND_NCCL_NOT_FOUND` (the crate's own, feature `nccl`): the NCCL library
            /// (`libnccl.so.2`, or the file that `CUDA_BRAND_NCCL_LIBRARY` names) could not be
            /// loaded. The error's detail says what was tried and where PyTorch keeps one.
            #[cfg(feature = "nccl")]
            NcclNotFound,
            /// `CUDA_BRAND_NCCL_TOO_OLD` (the crate's own, feature `nccl`): the NCCL library is
            /// older than the crate's minimum (NCCL 2.12) or lacks an entry point.
            #[cfg(feature = "nccl")]
            NcclTooOld,
            /// `CUDA_BRAND_NCCL_TIMEOUT` (the crate's own, feature `nccl`): a communicator
            /// spanning processes was not made, or its work did not finish, within the
            /// deadline it was given: a rank that never started or never arrived, a peer that
            /// stopped. Not NCCL's own `ncclTimeout`
            /// ([`Nccl(NcclCode::Timeout)`](NcclCode::Timeout)). The error's detail names
            /// the ranks and the deadline; a communicator that missed its deadline after it
            /// was made has been aborted.
            #[cfg(feature = "nccl")]
            NcclTimeout,
            /// `CUDA_BRAND_NCCL_ABORTED` (the crate's own, feature `nccl`): the communicator
            /// was aborted (`ncclCommAbort`, after a missed deadline or an asynchronous error
            /// such as a peer that died) and refuses every call after. The error's detail
            /// says why it was aborted.
            #[cfg(feature = "nccl")]
            NcclAborted,
            /// `CUDA_BRAND_NCCL_RENDEZVOUS` (the crate's own, feature `nccl`): the ranks of a
            /// communicator spanning processes could not exchange NCCL's unique id: the
            /// master's port is taken, or the ranks disagree about the world (its size, a
            /// rank started twice). The error's detail names the address and the cause.
            #[cfg(feature = "nccl")]
            NcclRendezvous,
            /// A cuBLAS call (feature `cublas`) returned this `cublasStatus_t` (not
            /// `CUBLAS_STATUS_SUCCESS`), kept as cuBLAS returned it:
            /// `CUBLAS_STATUS_INVALID_VALUE` (7), `CUBLAS_STATUS_NOT_SUPPORTED` (15), ... Not
            /// a `CUresult`: no raw value here.
            #[cfg(feature = "cublas")]
            Cublas(u32),
            /// `CUDA_BRAND_CUBLAS_NOT_FOUND` (the crate's own, feature `cublas`): the cuBLAS
            /// library (`libcublas.so.13`, `libcublas.so.12`, or the file that
            /// `CUDA_BRAND_CUBLAS_LIBRARY` names) could not be loaded, or lacks an entry point
            /// the crate needs. The error's detail says what was tried.
            #[cfg(feature = "cublas")]
            CublasNotFound,
            /// A cuFFT call (feature `cufft`) returned this `cufftResult` (not
            /// `CUFFT_SUCCESS`), kept as it returned it: `CUFFT_INVALID_SIZE` (8), ... Not a
            /// `CUresult`: no raw value here.
            #[cfg(feature = "cufft")]
            Cufft(u32),
            /// `CUDA_BRAND_CUFFT_NOT_FOUND` (the crate's own, feature `cufft`): the cuFFT
            /// library (`libcufft.so.12`, `.11`, or the file that `CUDA_BRAND_CUFFT_LIBRARY`
            /// names) could not be loaded, or lacks an entry point. The detail says what was
            /// tried.
            #[cfg(feature = "cufft")]
            CufftNotFound,
            /// A cuRAND call (feature `curand`) returned this `curandStatus_t` (not
            /// `CURAND_STATUS_SUCCESS`), kept as it returned it. Not a `CUresult`: no raw
            /// value here.
            #[cfg(feature = "curand")]
            Curand(u32),
            /// `CUDA_BRAND_CURAND_NOT_FOUND` (the crate's own, feature `curand`): the cuRAND
            /// library (`libcurand.so.10`, or the file that `CUDA_BRAND_CURAND_LIBRARY`
            /// names) could not be loaded, or lacks an entry point. The detail says what was
            /// tried.
            #[cfg(feature = "curand")]
            CurandNotFound,
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
                    ErrorCode::InvalidInput
                    | ErrorCode::DriverNotFound
                    | ErrorCode::DriverTooOld
                    | ErrorCode::NvrtcNotFound
                    | ErrorCode::Nvrtc(_) => None,
                    #[cfg(feature = "nccl")]
                    ErrorCode::Nccl(_)
                    | ErrorCode::NcclNotFound
                    | ErrorCode::NcclTooOld
                    | ErrorCode::NcclTimeout
                    | ErrorCode::NcclAborted
                    | ErrorCode::NcclRendezvous => None,
                    #[cfg(feature = "cublas")]
                    ErrorCode::Cublas(_) | ErrorCode::CublasNotFound => None,
                    #[cfg(feature = "cufft")]
                    ErrorCode::Cufft(_) | ErrorCode::CufftNotFound => None,
                    #[cfg(feature = "curand")]
                    ErrorCode::Curand(_) | ErrorCode::CurandNotFound => None,
                }
            }

            /// The driver's name of the code, e.g. `"CUDA_ERROR_OUT_OF_MEMORY"` (for the
            /// crate's own codes, a name in the same style: `"CUDA_BRAND_DRIVER_NOT_FOUND"`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $name,)*
                    ErrorCode::Unrecognized(_) => "CUDA_ERROR_UNRECOGNIZED",
                    ErrorCode::InvalidInput => "CUDA_BRAND_INVALID_INPUT",
                    ErrorCode::DriverNotFound => "CUDA_BRAND_DRIVER_NOT_FOUND",
                    ErrorCode::DriverTooOld => "CUDA_BRAND_DRIVER_TOO_OLD",
                    ErrorCode::NvrtcNotFound => "CUDA_BRAND_NVRTC_NOT_FOUND",
                    ErrorCode::Nvrtc(raw) => nvrtc_name(raw),
                    #[cfg(feature = "nccl")]
                    ErrorCode::Nccl(code) => code.name(),
                    #[cfg(feature = "nccl")]
                    ErrorCode::NcclNotFound => "CUDA_BRAND_NCCL_NOT_FOUND",
                    #[cfg(feature = "nccl")]
                    ErrorCode::NcclTooOld => "CUDA_BRAND_NCCL_TOO_OLD",
                    #[cfg(feature = "nccl")]
                    ErrorCode::NcclTimeout => "CUDA_BRAND_NCCL_TIMEOUT",
                    #[cfg(feature = "nccl")]
                    ErrorCode::NcclAborted => "CUDA_BRAND_NCCL_ABORTED",
                    #[cfg(feature = "nccl")]
                    ErrorCode::NcclRendezvous => "CUDA_BRAND_NCCL_RENDEZVOUS",
                    #[cfg(feature = "cublas")]
                    ErrorCode::Cublas(raw) => cublas_code::name(raw),
                    #[cfg(feature = "cublas")]
                    ErrorCode::CublasNotFound => "CUDA_BRAND_CUBLAS_NOT_FOUND",
                    #[cfg(feature = "cufft")]
                    ErrorCode::Cufft(raw) => library_codes::cufft_name(raw),
                    #[cfg(feature = "cufft")]
                    ErrorCode::CufftNotFound => "CUDA_BRAND_CUFFT_NOT_FOUND",
                    #[cfg(feature = "curand")]
                    ErrorCode::Curand(raw) => library_codes::curand_name(raw),
                    #[cfg(feature = "curand")]
                    ErrorCode::CurandNotFound => "CUDA_BRAND_CURAND_NOT_FOUND",
                }
            }

            /// The driver's description of the code, e.g. `"out of memory"` (the crate's own,
            /// for its own codes).
            pub const fn description(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $description,)*
                    ErrorCode::Unrecognized(_) => "a result code this version of cuda-brand does not know",
                    ErrorCode::InvalidInput => "invalid input, refused before the driver saw it",
                    ErrorCode::DriverNotFound => "CUDA driver library not found",
                    ErrorCode::DriverTooOld => "CUDA driver is too old",
                    ErrorCode::NvrtcNotFound => "NVRTC library not found",
                    ErrorCode::Nvrtc(raw) => nvrtc_description(raw),
                    #[cfg(feature = "nccl")]
                    ErrorCode::Nccl(code) => code.description(),
                    #[cfg(feature = "nccl")]
                    ErrorCode::NcclNotFound => "NCCL library not found",
                    #[cfg(feature = "nccl")]
                    ErrorCode::NcclTooOld => "NCCL library is too old",
                    #[cfg(feature = "nccl")]
                    ErrorCode::NcclTimeout => "an NCCL communicator missed its deadline",
                    #[cfg(feature = "nccl")]
                    ErrorCode::NcclAborted => "the NCCL communicator was aborted",
                    #[cfg(feature = "nccl")]
                    ErrorCode::NcclRendezvous => "the ranks could not exchange NCCL's unique id",
                    #[cfg(feature = "cublas")]
                    ErrorCode::Cublas(raw) => cublas_code::description(raw),
                    #[cfg(feature = "cublas")]
                    ErrorCode::CublasNotFound => "cuBLAS library not found",
                    #[cfg(feature = "cufft")]
                    ErrorCode::Cufft(raw) => library_codes::cufft_description(raw),
                    #[cfg(feature = "cufft")]
                    ErrorCode::CufftNotFound => "cuFFT library not found",
                    #[cfg(feature = "curand")]
                    ErrorCode::Curand(raw) => library_codes::curand_description(raw),
                    #[cfg(feature = "curand")]
                    ErrorCode::CurandNotFound => "cuRAND library not found",
                }
            }

            /// Every named `CUresult` code, in increasing order of value (not
            /// [`Unrecognized`](ErrorCode::Unrecognized), nor the crate's own codes).
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];
        }
    };
}

impl ErrorCode {
    /// Whether the error is *sticky*: it *poisons* the context it happened in and, as the
    /// crate treats every sticky code, the whole process.
    ///
    /// *Poisoned* means: every later driver call of the context returns the same error
    /// (synchronizing, allocating, freeing, launching, and also the teardown of
    /// [`with_context`](crate::with_context)), its device memory can no longer be relied
    /// on, and nothing but destroying the context is left to do with it. For a poisoned
    /// *process*, cuda.h adds: "any further CUDA work will return the same error. To
    /// continue using CUDA, the process must be terminated and relaunched": new contexts
    /// fail too (`tests/sticky_error.rs` observes a context created after an illegal
    /// address reporting `CUDA_ERROR_ILLEGAL_ADDRESS`). A program that
    /// must keep running restarts its GPU work in a new process.
    ///
    /// The codes, as cuda.h describes them (CUDA 11.8's, and a newer one's for the codes 226
    /// and 721 that 11.8 lacks):
    ///
    /// | code | what cuda.h says |
    /// |---|---|
    /// | [`IllegalAddress`](ErrorCode::IllegalAddress) (700), [`LaunchTimeout`](ErrorCode::LaunchTimeout) (702), [`HardwareStackError`](ErrorCode::HardwareStackError) (714), [`IllegalInstruction`](ErrorCode::IllegalInstruction) (715), [`MisalignedAddress`](ErrorCode::MisalignedAddress) (716), [`InvalidAddressSpace`](ErrorCode::InvalidAddressSpace) (717), [`InvalidPc`](ErrorCode::InvalidPc) (718), [`LaunchFailed`](ErrorCode::LaunchFailed) (719), [`TensorMemoryLeak`](ErrorCode::TensorMemoryLeak) (721), [`Contained`](ErrorCode::Contained) (226), [`ExternalDevice`](ErrorCode::ExternalDevice) (911) | "This leaves the process in an inconsistent state and any further CUDA work will return the same error. To continue using CUDA, the process must be terminated and relaunched." |
    /// | [`MpsClientTerminated`](ErrorCode::MpsClientTerminated) (810) | "To continue using CUDA, the process must be terminated and relaunched." |
    /// | [`Assert`](ErrorCode::Assert) (710) | "The context cannot be used anymore, and must be destroyed. All existing device memory allocations from this context are invalid"; the runtime API's documentation of the same error says the process must be relaunched, so the crate counts it as poisoning the process too |
    /// | [`EccUncorrectable`](ErrorCode::EccUncorrectable) (214), [`NvlinkUncorrectable`](ErrorCode::NvlinkUncorrectable) (220) | nothing about what follows; the crate counts them as sticky because the device's data can no longer be trusted |
    ///
    /// Not sticky: [`ContextIsDestroyed`](ErrorCode::ContextIsDestroyed) (709) names a
    /// context that is gone, not one that is poisoned; a failed launch
    /// ([`LaunchOutOfResources`](ErrorCode::LaunchOutOfResources),
    /// [`CooperativeLaunchTooLarge`](ErrorCode::CooperativeLaunchTooLarge)) or allocation
    /// ([`OutOfMemory`](ErrorCode::OutOfMemory)) can be retried.
    ///
    /// ```
    /// use cuda_brand::ErrorCode;
    /// assert!(ErrorCode::IllegalAddress.is_sticky());
    /// assert!(ErrorCode::from_raw(226).unwrap().is_sticky()); // CUDA_ERROR_CONTAINED
    /// assert!(!ErrorCode::OutOfMemory.is_sticky()); // a failed allocation can be retried
    /// ```
    pub const fn is_sticky(self) -> bool {
        matches!(
            self,
            ErrorCode::EccUncorrectable
                | ErrorCode::NvlinkUncorrectable
                | ErrorCode::Contained
                | ErrorCode::IllegalAddress
                | ErrorCode::LaunchTimeout
                | ErrorCode::Assert
                | ErrorCode::HardwareStackError
                | ErrorCode::IllegalInstruction
                | ErrorCode::MisalignedAddress
                | ErrorCode::InvalidAddressSpace
                | ErrorCode::InvalidPc
                | ErrorCode::LaunchFailed
                | ErrorCode::TensorMemoryLeak
                | ErrorCode::MpsClientTerminated
                | ErrorCode::ExternalDevice
        )
    }
}

/// The name of an `nvrtcResult` (nvrtc.h).
const fn nvrtc_name(raw: u32) -> &'static str {
    match raw {
        1 => "NVRTC_ERROR_OUT_OF_MEMORY",
        2 => "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
        3 => "NVRTC_ERROR_INVALID_INPUT",
        4 => "NVRTC_ERROR_INVALID_PROGRAM",
        5 => "NVRTC_ERROR_INVALID_OPTION",
        6 => "NVRTC_ERROR_COMPILATION",
        7 => "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
        8 => "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
        9 => "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
        10 => "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
        11 => "NVRTC_ERROR_INTERNAL_ERROR",
        _ => "NVRTC_ERROR_UNRECOGNIZED",
    }
}

/// What an `nvrtcResult` means, in words.
const fn nvrtc_description(raw: u32) -> &'static str {
    match raw {
        1 => "out of memory",
        2 => "the program could not be created",
        3 => "invalid input",
        4 => "invalid program",
        5 => "invalid compiler option",
        6 => "compilation failed",
        7 => "a builtin operation failed (is libnvrtc-builtins next to libnvrtc?)",
        8 => "name expressions must be added before compiling",
        9 => "lowered names exist only after compiling",
        10 => "the name expression is not valid",
        11 => "internal compiler error",
        _ => "a result code this version of cuda-brand does not know",
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorCode::Unrecognized(raw) => {
                write!(f, "{} {} ({})", self.name(), raw, self.description())
            }
            ErrorCode::Nvrtc(raw) if nvrtc_name(*raw).ends_with("UNRECOGNIZED") => {
                write!(f, "{} {} ({})", self.name(), raw, self.description())
            }
            #[cfg(feature = "nccl")]
            ErrorCode::Nccl(code) => fmt::Display::fmt(code, f),
            #[cfg(feature = "cublas")]
            ErrorCode::Cublas(raw) if cublas_code::name(*raw).ends_with("UNRECOGNIZED") => {
                write!(f, "{} {} ({})", self.name(), raw, self.description())
            }
            #[cfg(feature = "cufft")]
            ErrorCode::Cufft(raw) if self.name().ends_with("UNRECOGNIZED") => {
                write!(f, "{} {} ({})", self.name(), raw, self.description())
            }
            #[cfg(feature = "curand")]
            ErrorCode::Curand(raw) if self.name().ends_with("UNRECOGNIZED") => {
                write!(f, "{} {} ({})", self.name(), raw, self.description())
            }
            _ => write!(f, "{} ({})", self.name(), self.description()),
        }
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
    Contained = 226, "CUDA_ERROR_CONTAINED", "Invalid access of peer GPU memory over nvlink or a hardware error";
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
    TensorMemoryLeak = 721, "CUDA_ERROR_TENSOR_MEMORY_LEAK", "tensor memory not completely freed";
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
    InvalidResourceType = 914, "CUDA_ERROR_INVALID_RESOURCE_TYPE", "one or more resources passed in are not valid resource types for the operation";
    InvalidResourceConfiguration = 915, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION", "one or more resources are insufficient or non-applicable for the operation";
    Unknown = 999, "CUDA_ERROR_UNKNOWN", "unknown error";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_of_a_teardown_chain_in_order_and_print_after_the_first() {
        let sync = Error::new("cuCtxSynchronize", ErrorCode::IllegalAddress);
        let destroy = Error::with_detail("cuCtxDestroy_v2", ErrorCode::Unknown, "why");
        let e = Error::with_detail("my step", ErrorCode::InvalidValue, "bad input")
            .with_teardown_error(sync.clone())
            .with_teardown_error(destroy.clone());
        assert_eq!(e.detail(), Some("bad input"));
        assert_eq!(
            e.teardown_error(),
            Some(&sync.clone().with_teardown_error(destroy.clone()))
        );
        let chain: Vec<_> = e.teardown_errors().map(|t| (t.call(), t.code())).collect();
        assert_eq!(
            chain,
            [
                ("cuCtxSynchronize", ErrorCode::IllegalAddress),
                ("cuCtxDestroy_v2", ErrorCode::Unknown)
            ]
        );
        assert_eq!(
            e.to_string(),
            "my step failed: CUDA_ERROR_INVALID_VALUE (invalid argument): bad input; \
             also, during teardown: cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered); \
             also, during teardown: cuCtxDestroy_v2 failed: CUDA_ERROR_UNKNOWN (unknown error): why"
        );
        assert_eq!(format!("{e:?}"), e.to_string());
        assert!(e.is_sticky() && !e.code().is_sticky());
        assert!(!destroy.is_sticky());
        // an error without a detail keeps none when a teardown error is attached
        let plain = Error::new("x", ErrorCode::Unknown).with_teardown_error(destroy);
        assert_eq!(plain.detail(), None);
    }

    #[test]
    fn with_teardown_settles_every_outcome() {
        let t = Error::new("cuStreamSynchronize", ErrorCode::IllegalAddress);
        let settle = |o, d| WithTeardown::<Error>::settle::<u8>("t", o, d);
        assert_eq!(settle(Some(Ok(1)), Ok(())).ok(), Some(1));
        let mine = Error::new("mine", ErrorCode::Unknown);
        let w = settle(Some(Err(mine.clone())), Err(t.clone())).unwrap_err();
        assert_eq!((w.error(), w.teardown_error()), (&mine, Some(&t)));
        let w = settle(Some(Err(mine.clone())), Ok(())).unwrap_err();
        assert_eq!(w.into_parts(), (mine.clone(), None));
        // closure fine, teardown failed: the teardown's error is the error
        let w = settle(Some(Ok(1)), Err(t.clone())).unwrap_err();
        assert_eq!(w.into_parts(), (t.clone(), None));
        // the closure never ran: the setup's error
        let w = settle(None, Err(t.clone())).unwrap_err();
        assert_eq!(w.into_error(), t);
        let w = settle(None, Ok(())).unwrap_err();
        assert_eq!(w.error().detail(), Some("the closure did not run"));
        // into one `Error`
        let both = WithTeardown::new(mine.clone(), Some(t.clone())).into_combined();
        assert_eq!(both, mine.clone().with_teardown_error(t));
        assert_eq!(WithTeardown::new(mine.clone(), None).into_combined(), mine);
    }
}
