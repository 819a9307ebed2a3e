//! The `.nv.info` attributes whose payload this check understands, and the names of all
//! of them for messages.

/// `.nv.info` attributes whose payload this check understands.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Attr {
    /// A number in the record header (NVAL/BVAL/HVAL): nothing to follow.
    Flag,
    /// `EIATTR_CBANK_PARAM_SIZE` (HVAL).
    CbankParamSize,
    /// `n` plain 32-bit numbers.
    Words(usize),
    /// `[symbol index][value]` (global `.nv.info`).
    SymbolValue,
    /// `EIATTR_EXTERNS`: symbol indices.
    Externs,
    /// Offsets of instructions in the kernel's code, one `u32` each.
    Offsets,
    /// `EIATTR_MBARRIER_INSTR_OFFSETS`: 16-byte records starting with an instruction offset.
    MbarrierOffsets,
    /// `EIATTR_INDIRECT_BRANCH_TARGETS`: records of a branch's offset, two `u16`, a target
    /// count and that many target offsets.
    BranchTargets,
    /// `EIATTR_KPARAM_INFO`: index, ordinal, offset, flags (size in bits 18..32).
    KparamInfo,
    /// `EIATTR_PARAM_CBANK`: the constant bank's section symbol, `u16` offset, `u16` size.
    ParamCbank,
}

/// What kind of record attribute `attr` in format `fmt` is, where it is known here: in the
/// global `.nv.info` (`global`) or a kernel's.
pub(super) fn attribute(global: bool, fmt: u8, attr: u8) -> Option<Attr> {
    use Attr::*;
    Some(match (global, fmt == 4, attr) {
        // EIATTR_REGCOUNT, _FRAME_SIZE, _MIN_STACK_SIZE, _MAX_STACK_SIZE
        (true, true, 0x2f | 0x11 | 0x12 | 0x23) => SymbolValue,
        // EIATTR_CUDA_API_VERSION, _SW_WAR, _CRS_STACK_SIZE
        (false, true, 0x37 | 0x36 | 0x1e) => Words(1),
        // EIATTR_MAX_THREADS, _REQNTID, _CTA_PER_CLUSTER
        (false, true, 0x05 | 0x10 | 0x3d) => Words(3),
        (false, true, 0x17) => KparamInfo,
        (false, true, 0x0a) => ParamCbank,
        (false, true, 0x0f) => Externs,
        // EIATTR_EXIT_, _S2RCTAID_, _LD_CACHEMOD_, _ATOM_SYS_, _COOP_GROUP_,
        // _INT_WARP_WIDE_INSTR_OFFSETS
        (false, true, 0x1c | 0x1d | 0x25 | 0x27 | 0x28 | 0x31) => Offsets,
        (false, true, 0x39) => MbarrierOffsets,
        (false, true, 0x34) => BranchTargets,
        (false, false, 0x19) if fmt == 3 => CbankParamSize,
        // Numbers and flags in the record header: EIATTR_CTAIDZ_USED, _MAXREG_COUNT,
        // _NEED_CNP_WRAPPER, _NEED_CNP_PATCH, _EXPLICIT_CACHING, _ISTYPEP_USED, _SUQ_USED,
        // _SW1850030_WAR, _WMMA_USED, _HAS_PRE_V10_OBJECT, _SW2393858_WAR, _SW2861232_WAR,
        // _NUM_MBARRIERS, _EXPLICIT_CLUSTER, _RESERVED_SMEM_USED, _NUM_BARRIERS,
        // _TEXMODE_INDEPENDENT, _SPARSE_MMA_MASK, _TCGEN05_1CTA_USED, _TCGEN05_2CTA_USED,
        // _GEN_ERRBAR_AT_EXIT, _BLOCKS_ARE_CLUSTERS, _SANITIZE, _MERCURY_ISA_VERSION
        (
            _,
            false,
            0x04 | 0x1b | 0x1f | 0x20 | 0x21 | 0x22 | 0x24 | 0x2a | 0x2b | 0x2c | 0x30 | 0x35
            | 0x38 | 0x3e | 0x41 | 0x4c | 0x4d | 0x50 | 0x51 | 0x52 | 0x53 | 0x5b | 0x5c | 0x5f,
        ) => Flag,
        _ => return None,
    })
}

/// Names of `.nv.info` attributes, for messages (codes from public descriptions of
/// ptxas 13.0's table).
pub(super) fn attribute_name(attr: u8) -> Option<&'static str> {
    NAMES.get(usize::from(attr)).copied()
}

/// `EIATTR_` names by attribute code, 0x00 to 0x5f.
const NAMES: [&str; 0x60] = [
    "ERROR",
    "PAD",
    "IMAGE_SLOT",
    "JUMPTABLE_RELOCS",
    "CTAIDZ_USED",
    "MAX_THREADS",
    "IMAGE_OFFSET",
    "IMAGE_SIZE",
    "TEXTURE_NORMALIZED",
    "SAMPLER_INIT",
    "PARAM_CBANK",
    "SMEM_PARAM_OFFSETS",
    "CBANK_PARAM_OFFSETS",
    "SYNC_STACK",
    "TEXID_SAMPID_MAP",
    "EXTERNS",
    "REQNTID",
    "FRAME_SIZE",
    "MIN_STACK_SIZE",
    "SAMPLER_FORCE_UNNORMALIZED",
    "BINDLESS_IMAGE_OFFSETS",
    "BINDLESS_TEXTURE_BANK",
    "BINDLESS_SURFACE_BANK",
    "KPARAM_INFO",
    "SMEM_PARAM_SIZE",
    "CBANK_PARAM_SIZE",
    "QUERY_NUMATTRIB",
    "MAXREG_COUNT",
    "EXIT_INSTR_OFFSETS",
    "S2RCTAID_INSTR_OFFSETS",
    "CRS_STACK_SIZE",
    "NEED_CNP_WRAPPER",
    "NEED_CNP_PATCH",
    "EXPLICIT_CACHING",
    "ISTYPEP_USED",
    "MAX_STACK_SIZE",
    "SUQ_USED",
    "LD_CACHEMOD_INSTR_OFFSETS",
    "LOAD_CACHE_REQUEST",
    "ATOM_SYS_INSTR_OFFSETS",
    "COOP_GROUP_INSTR_OFFSETS",
    "COOP_GROUP_MASK_REGIDS",
    "SW1850030_WAR",
    "WMMA_USED",
    "HAS_PRE_V10_OBJECT",
    "ATOMF16_EMUL_INSTR_OFFSETS",
    "ATOM16_EMUL_INSTR_REG_MAP",
    "REGCOUNT",
    "SW2393858_WAR",
    "INT_WARP_WIDE_INSTR_OFFSETS",
    "SHARED_SCRATCH",
    "STATISTICS",
    "INDIRECT_BRANCH_TARGETS",
    "SW2861232_WAR",
    "SW_WAR",
    "CUDA_API_VERSION",
    "NUM_MBARRIERS",
    "MBARRIER_INSTR_OFFSETS",
    "COROUTINE_RESUME_OFFSETS",
    "SAM_REGION_STACK_SIZE",
    "PER_REG_TARGET_PERF_STATS",
    "CTA_PER_CLUSTER",
    "EXPLICIT_CLUSTER",
    "MAX_CLUSTER_RANK",
    "INSTR_REG_MAP",
    "RESERVED_SMEM_USED",
    "RESERVED_SMEM_0_SIZE",
    "UCODE_SECTION_DATA",
    "UNUSED_LOAD_BYTE_OFFSET",
    "KPARAM_INFO_V2",
    "SYSCALL_OFFSETS",
    "SW_WAR_MEMBAR_SYS_INSTR_OFFSETS",
    "GRAPHICS_GLOBAL_CBANK",
    "SHADER_TYPE",
    "VRC_CTA_INIT_COUNT",
    "TOOLS_PATCH_FUNC",
    "NUM_BARRIERS",
    "TEXMODE_INDEPENDENT",
    "PERF_STATISTICS",
    "AT_ENTRY_FRAGEMENTS",
    "SPARSE_MMA_MASK",
    "TCGEN05_1CTA_USED",
    "TCGEN05_2CTA_USED",
    "GEN_ERRBAR_AT_EXIT",
    "REG_RECONFIG",
    "ANNOTATIONS",
    "UNKNOWN",
    "STACK_CANARY_TRAP_OFFSETS",
    "STUB_FUNCTION_KIND",
    "LOCAL_CTA_ASYNC_STORE_OFFSETS",
    "MERCURY_FINALIZER_OPTIONS",
    "BLOCKS_ARE_CLUSTERS",
    "SANITIZE",
    "SYSCALLS_FALLBACK",
    "CUDA_REQ",
    "MERCURY_ISA_VERSION",
];
