//! Devices: enumeration, properties and attributes.

#![forbid(unsafe_code)]

use std::fmt;

use crate::driver::{self, CUdevice};
use crate::error::{Error, ErrorCode, Result};

/// A CUDA device (a GPU), found by its ordinal.
///
/// Looking up a device loads the driver library and runs `cuInit`, once per process; on a
/// machine without the driver that fails with [`ErrorCode::DriverNotFound`], on one with the
/// driver but without a GPU with `CUDA_ERROR_NO_DEVICE`, each an ordinary [`Error`]:
///
/// ```
/// use cuda_brand::{Device, ErrorCode};
/// match Device::get(0) {
///     Ok(device) => println!("found {}", device.name()?),
///     Err(e) => assert!(matches!(
///         e.code(),
///         ErrorCode::DriverNotFound | ErrorCode::NoDevice | ErrorCode::InvalidDevice
///     )),
/// }
/// # Ok::<(), cuda_brand::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Device {
    raw: CUdevice,
    ordinal: u32,
}

/// A device's compute capability, e.g. `9.0` for an H100.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComputeCapability {
    /// The major version (9 for Hopper).
    pub major: u32,
    /// The minor version.
    pub minor: u32,
}

impl fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// A device's UUID (16 bytes), displayed like `nvidia-smi -L` does (`GPU-xxxxxxxx-...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Uuid(pub [u8; 16]);

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GPU-")?;
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl Device {
    /// How many CUDA devices the driver sees.
    pub fn count() -> Result<usize> {
        Ok(driver::device_count()? as usize)
    }

    /// The device with this ordinal (0-based). An ordinal at or past [`Device::count`] is an
    /// `CUDA_ERROR_INVALID_DEVICE` error that says how many devices there are.
    pub fn get(ordinal: usize) -> Result<Device> {
        let count = Device::count()?;
        if ordinal >= count {
            return Err(Error::with_detail(
                "Device::get",
                ErrorCode::InvalidDevice,
                format!("ordinal {ordinal} is out of range: the driver sees {count} device(s)"),
            ));
        }
        let raw = driver::device_get(ordinal as i32)?;
        Ok(Device {
            raw,
            ordinal: ordinal as u32,
        })
    }

    /// Every device, in ordinal order.
    pub fn all() -> Result<Vec<Device>> {
        (0..Device::count()?).map(Device::get).collect()
    }

    /// The ordinal this device was looked up with.
    pub fn ordinal(&self) -> usize {
        self.ordinal as usize
    }

    /// The driver's handle (`CUdevice`). Safe, unlike the other `as_raw` methods: a device
    /// is no resource the crate owns, frees or brands, its handle is valid for as long as
    /// the process (drivers hand out the [`ordinal`](Self::ordinal) itself), and what could
    /// break a context with it (`cuDevicePrimaryCtxReset`) is an `unsafe` driver call.
    pub fn as_raw(&self) -> CUdevice {
        self.raw
    }

    /// A device value for tests that never reach the driver.
    #[cfg(test)]
    pub(crate) fn fake_for_tests(ordinal: u32) -> Device {
        Device {
            raw: ordinal as CUdevice,
            ordinal,
        }
    }

    /// The device's name, e.g. `"NVIDIA H100 80GB HBM3"`.
    pub fn name(&self) -> Result<String> {
        driver::device_name(self.raw)
    }

    /// Total device memory in bytes.
    pub fn total_memory(&self) -> Result<usize> {
        driver::device_total_mem(self.raw)
    }

    /// The compute capability (from the two attributes the driver reports it as).
    pub fn compute_capability(&self) -> Result<ComputeCapability> {
        Ok(ComputeCapability {
            major: self.attribute(DeviceAttribute::ComputeCapabilityMajor)? as u32,
            minor: self.attribute(DeviceAttribute::ComputeCapabilityMinor)? as u32,
        })
    }

    /// The device's UUID.
    pub fn uuid(&self) -> Result<Uuid> {
        driver::device_uuid(self.raw).map(Uuid)
    }

    /// One attribute's value; an attribute the driver does not know is an error
    /// (`CUDA_ERROR_INVALID_VALUE`).
    pub fn attribute(&self, attribute: DeviceAttribute) -> Result<i32> {
        driver::device_attribute(self.raw, attribute.raw())
    }

    /// Whether contexts on this device can map memory of `peer` (`cuDeviceCanAccessPeer`).
    /// A device cannot be its own peer: `peer == self` gives `false`.
    pub fn can_access_peer(&self, peer: &Device) -> Result<bool> {
        if peer == self {
            return Ok(false);
        }
        driver::device_can_access_peer(self.raw, peer.raw)
    }

    /// Sets the flags the device's primary context is created with
    /// (`cuDevicePrimaryCtxSetFlags`). Takes effect when the primary context is next
    /// created; while it is active, the driver accepts and applies them where it can.
    pub fn set_primary_context_flags(&self, flags: super::ContextFlags) -> Result<()> {
        driver::primary_ctx_set_flags(self.raw, flags.bits())
    }

    /// The primary context's flags and whether it is active (retained by someone),
    /// `cuDevicePrimaryCtxGetState`.
    pub fn primary_context_state(&self) -> Result<PrimaryContextState> {
        let (flags, active) = driver::primary_ctx_state(self.raw)?;
        Ok(PrimaryContextState {
            flags: super::ContextFlags::from_bits(flags),
            active,
        })
    }
}

/// The state of a device's primary context ([`Device::primary_context_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrimaryContextState {
    /// The flags it is (or will be) created with.
    pub flags: super::ContextFlags,
    /// Whether it exists now: retained by someone (this crate, the runtime, a library).
    pub active: bool,
}

macro_rules! device_attributes {
    ($($variant:ident = $value:literal, $name:literal;)*) => {
        /// A device attribute (`CUdevice_attribute`), for [`Device::attribute`].
        ///
        /// Every attribute of the bindings' CUDA 10 headers, a few newer ones, and
        /// [`DeviceAttribute::Other`] for any other value of the driver's enumeration.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum DeviceAttribute {
            $(
                #[doc = concat!("`", $name, "` (", $value, ").")]
                $variant,
            )*
            /// Any other `CUdevice_attribute` value.
            Other(i32),
        }

        impl DeviceAttribute {
            /// The raw `CUdevice_attribute` value.
            pub const fn raw(self) -> i32 {
                match self {
                    $(DeviceAttribute::$variant => $value,)*
                    DeviceAttribute::Other(v) => v,
                }
            }
        }
    };
}

device_attributes! {
    MaxThreadsPerBlock = 1, "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK";
    MaxBlockDimX = 2, "CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X";
    MaxBlockDimY = 3, "CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y";
    MaxBlockDimZ = 4, "CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z";
    MaxGridDimX = 5, "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X";
    MaxGridDimY = 6, "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y";
    MaxGridDimZ = 7, "CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z";
    MaxSharedMemoryPerBlock = 8, "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK";
    TotalConstantMemory = 9, "CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY";
    WarpSize = 10, "CU_DEVICE_ATTRIBUTE_WARP_SIZE";
    MaxPitch = 11, "CU_DEVICE_ATTRIBUTE_MAX_PITCH";
    MaxRegistersPerBlock = 12, "CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK";
    ClockRate = 13, "CU_DEVICE_ATTRIBUTE_CLOCK_RATE";
    TextureAlignment = 14, "CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT";
    GpuOverlap = 15, "CU_DEVICE_ATTRIBUTE_GPU_OVERLAP";
    MultiprocessorCount = 16, "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT";
    KernelExecTimeout = 17, "CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT";
    Integrated = 18, "CU_DEVICE_ATTRIBUTE_INTEGRATED";
    CanMapHostMemory = 19, "CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY";
    ComputeMode = 20, "CU_DEVICE_ATTRIBUTE_COMPUTE_MODE";
    MaximumTexture1dWidth = 21, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH";
    MaximumTexture2dWidth = 22, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH";
    MaximumTexture2dHeight = 23, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT";
    MaximumTexture3dWidth = 24, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH";
    MaximumTexture3dHeight = 25, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT";
    MaximumTexture3dDepth = 26, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH";
    MaximumTexture2dLayeredWidth = 27, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH";
    MaximumTexture2dLayeredHeight = 28, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT";
    MaximumTexture2dLayeredLayers = 29, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS";
    SurfaceAlignment = 30, "CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT";
    ConcurrentKernels = 31, "CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS";
    EccEnabled = 32, "CU_DEVICE_ATTRIBUTE_ECC_ENABLED";
    PciBusId = 33, "CU_DEVICE_ATTRIBUTE_PCI_BUS_ID";
    PciDeviceId = 34, "CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID";
    TccDriver = 35, "CU_DEVICE_ATTRIBUTE_TCC_DRIVER";
    MemoryClockRate = 36, "CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE";
    GlobalMemoryBusWidth = 37, "CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH";
    L2CacheSize = 38, "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE";
    MaxThreadsPerMultiprocessor = 39, "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR";
    AsyncEngineCount = 40, "CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT";
    UnifiedAddressing = 41, "CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING";
    MaximumTexture1dLayeredWidth = 42, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH";
    MaximumTexture1dLayeredLayers = 43, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS";
    CanTex2dGather = 44, "CU_DEVICE_ATTRIBUTE_CAN_TEX2D_GATHER";
    MaximumTexture2dGatherWidth = 45, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH";
    MaximumTexture2dGatherHeight = 46, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT";
    MaximumTexture3dWidthAlternate = 47, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE";
    MaximumTexture3dHeightAlternate = 48, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE";
    MaximumTexture3dDepthAlternate = 49, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE";
    PciDomainId = 50, "CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID";
    TexturePitchAlignment = 51, "CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT";
    MaximumTexturecubemapWidth = 52, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH";
    MaximumTexturecubemapLayeredWidth = 53, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH";
    MaximumTexturecubemapLayeredLayers = 54, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS";
    MaximumSurface1dWidth = 55, "CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH";
    MaximumSurface2dWidth = 56, "CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH";
    MaximumSurface2dHeight = 57, "CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT";
    MaximumSurface3dWidth = 58, "CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH";
    MaximumSurface3dHeight = 59, "CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT";
    MaximumSurface3dDepth = 60, "CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH";
    MaximumSurface1dLayeredWidth = 61, "CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH";
    MaximumSurface1dLayeredLayers = 62, "CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS";
    MaximumSurface2dLayeredWidth = 63, "CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH";
    MaximumSurface2dLayeredHeight = 64, "CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT";
    MaximumSurface2dLayeredLayers = 65, "CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS";
    MaximumSurfacecubemapWidth = 66, "CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH";
    MaximumSurfacecubemapLayeredWidth = 67, "CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH";
    MaximumSurfacecubemapLayeredLayers = 68, "CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS";
    MaximumTexture1dLinearWidth = 69, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH";
    MaximumTexture2dLinearWidth = 70, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH";
    MaximumTexture2dLinearHeight = 71, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT";
    MaximumTexture2dLinearPitch = 72, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH";
    MaximumTexture2dMipmappedWidth = 73, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH";
    MaximumTexture2dMipmappedHeight = 74, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT";
    ComputeCapabilityMajor = 75, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR";
    ComputeCapabilityMinor = 76, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR";
    MaximumTexture1dMipmappedWidth = 77, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH";
    StreamPrioritiesSupported = 78, "CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED";
    GlobalL1CacheSupported = 79, "CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED";
    LocalL1CacheSupported = 80, "CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED";
    MaxSharedMemoryPerMultiprocessor = 81, "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR";
    MaxRegistersPerMultiprocessor = 82, "CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR";
    ManagedMemory = 83, "CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY";
    MultiGpuBoard = 84, "CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD";
    MultiGpuBoardGroupId = 85, "CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID";
    HostNativeAtomicSupported = 86, "CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED";
    SingleToDoublePrecisionPerfRatio = 87, "CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO";
    PageableMemoryAccess = 88, "CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS";
    ConcurrentManagedAccess = 89, "CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS";
    ComputePreemptionSupported = 90, "CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED";
    CanUseHostPointerForRegisteredMem = 91, "CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM";
    CanUseStreamMemOps = 92, "CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS";
    CanUse64BitStreamMemOps = 93, "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS";
    CanUseStreamWaitValueNor = 94, "CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR";
    CooperativeLaunch = 95, "CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH";
    CooperativeMultiDeviceLaunch = 96, "CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH";
    MaxSharedMemoryPerBlockOptin = 97, "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN";
    CanFlushRemoteWrites = 98, "CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES";
    HostRegisterSupported = 99, "CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED";
    PageableMemoryAccessUsesHostPageTables = 100, "CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES";
    DirectManagedMemAccessFromHost = 101, "CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST";
    VirtualAddressManagementSupported = 102, "CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED";
    HandleTypePosixFileDescriptorSupported = 103, "CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED";
    HandleTypeWin32HandleSupported = 104, "CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED";
    HandleTypeWin32KmtHandleSupported = 105, "CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED";
    MaxBlocksPerMultiprocessor = 106, "CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR";
    GenericCompressionSupported = 107, "CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED";
    MaxPersistingL2CacheSize = 108, "CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE";
    MaxAccessPolicyWindowSize = 109, "CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE";
    GpuDirectRdmaWithCudaVmmSupported = 110, "CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED";
    ReservedSharedMemoryPerBlock = 111, "CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK";
    SparseCudaArraySupported = 112, "CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED";
    ReadOnlyHostRegisterSupported = 113, "CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED";
    TimelineSemaphoreInteropSupported = 114, "CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED";
    MemoryPoolsSupported = 115, "CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_and_compute_capabilities_print_like_nvidia_smi() {
        // the H100 of the project's GPU machine, as `nvidia-smi -L` printed it
        let uuid = Uuid([
            0x84, 0x01, 0x19, 0xdf, 0x0e, 0x37, 0xcf, 0x47, 0x23, 0xb9, 0xbf, 0x81, 0x52, 0x1c,
            0x83, 0xef,
        ]);
        assert_eq!(uuid.to_string(), "GPU-840119df-0e37-cf47-23b9-bf81521c83ef");
        assert_eq!(Uuid([0; 16]).to_string().len(), 40);
        let cc = ComputeCapability { major: 9, minor: 0 };
        assert_eq!(cc.to_string(), "9.0");
        assert!(ComputeCapability { major: 8, minor: 9 } < cc);
    }
}
