//! The two 16-bit floating-point element types of cuBLAS's mixed-precision GEMM: [`F16`]
//! (IEEE 754 binary16, CUDA's `__half`) and [`Bf16`] (bfloat16, CUDA's `__nv_bfloat16`),
//! each its 16 bits, with conversions from and to `f32` rounding to nearest, ties to even.

use crate::memory::DeviceCopy;

/// An IEEE 754 half-precision number (binary16, CUDA's `__half`), stored as its bits.
///
/// ```
/// use cuda_brand::cublas::F16;
/// assert_eq!(F16::from_f32(1.5).to_bits(), 0x3e00);
/// assert_eq!(F16::from_f32(1.5).to_f32(), 1.5);
/// assert_eq!(F16::from_f32(65520.0).to_f32(), f32::INFINITY); // past the largest half
/// ```
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct F16(u16);

/// A bfloat16 number (CUDA's `__nv_bfloat16`: the upper 16 bits of an `f32`), stored as
/// its bits.
///
/// ```
/// use cuda_brand::cublas::Bf16;
/// assert_eq!(Bf16::from_f32(1.0).to_bits(), 0x3f80);
/// assert_eq!(Bf16::from_f32(3.0).to_f32(), 3.0);
/// ```
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Bf16(u16);

// SAFETY: `#[repr(transparent)]` over `u16`: plain bits, every pattern a value, no padding,
// no pointers; the GPU reads and writes the same 2 bytes.
unsafe impl DeviceCopy for F16 {
    const __PADDING_FREE: bool = true;
}
// SAFETY: as for `F16`.
unsafe impl DeviceCopy for Bf16 {
    const __PADDING_FREE: bool = true;
}

impl F16 {
    /// The number whose bits are `bits`.
    pub const fn from_bits(bits: u16) -> F16 {
        F16(bits)
    }

    /// The number's bits.
    pub const fn to_bits(self) -> u16 {
        self.0
    }

    /// The half nearest `x` (ties to even); past the largest half (65504), infinity; NaN
    /// stays NaN.
    pub fn from_f32(x: f32) -> F16 {
        F16(f32_to_f16(x))
    }

    /// The number as an `f32` (exact: every half is an `f32`).
    pub fn to_f32(self) -> f32 {
        f16_to_f32(self.0)
    }
}

impl Bf16 {
    /// The number whose bits are `bits`.
    pub const fn from_bits(bits: u16) -> Bf16 {
        Bf16(bits)
    }

    /// The number's bits.
    pub const fn to_bits(self) -> u16 {
        self.0
    }

    /// The bfloat16 nearest `x` (ties to even); NaN stays NaN.
    pub fn from_f32(x: f32) -> Bf16 {
        let bits = x.to_bits();
        if x.is_nan() {
            return Bf16(((bits >> 16) as u16) | 0x0040);
        }
        let round = 0x7fff + ((bits >> 16) & 1);
        Bf16((bits.wrapping_add(round) >> 16) as u16)
    }

    /// The number as an `f32` (exact).
    pub fn to_f32(self) -> f32 {
        f32::from_bits(u32::from(self.0) << 16)
    }
}

impl From<F16> for f32 {
    fn from(h: F16) -> f32 {
        h.to_f32()
    }
}

impl From<Bf16> for f32 {
    fn from(h: Bf16) -> f32 {
        h.to_f32()
    }
}

impl std::fmt::Debug for F16 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "F16({})", self.to_f32())
    }
}

impl std::fmt::Debug for Bf16 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bf16({})", self.to_f32())
    }
}

fn f32_to_f16(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x007f_ffff;
    if exp == 0xff {
        // infinity, or NaN (kept quiet and NaN)
        let nan = if man != 0 {
            0x0200 | (man >> 13) as u16
        } else {
            0
        };
        return sign | 0x7c00 | nan;
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        // a subnormal half (or zero): the full significand shifted right by 14 - e
        if e < -10 {
            return sign;
        }
        let full = man | 0x0080_0000;
        let shift = (14 - e) as u32;
        let half = full >> shift;
        let rest = full & ((1 << shift) - 1);
        let halfway = 1 << (shift - 1);
        let up = rest > halfway || (rest == halfway && half & 1 == 1);
        return sign | (half + u32::from(up)) as u16;
    }
    let half = ((e as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    let up = rest > 0x1000 || (rest == 0x1000 && half & 1 == 1);
    // a carry out of the significand raises the exponent, up to infinity: still right
    sign | (half + u32::from(up)) as u16
}

fn f16_to_f32(h: u16) -> f32 {
    let negative = h & 0x8000 != 0;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x03ff);
    let sign = u32::from(negative) << 31;
    match exp {
        0 => {
            // zero or subnormal: man × 2^-24, exact in f32
            let v = man as f32 * f32::from_bits(0x3380_0000);
            if negative { -v } else { v }
        }
        0x1f => f32::from_bits(sign | 0x7f80_0000 | (man << 13)),
        _ => f32::from_bits(sign | ((exp + 112) << 23) | (man << 13)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_half_converts_to_f32_and_back_unchanged() {
        for bits in 0..=u16::MAX {
            let h = F16::from_bits(bits);
            let back = F16::from_f32(h.to_f32());
            if h.to_f32().is_nan() {
                assert!(back.to_f32().is_nan(), "{bits:#x}");
            } else {
                assert_eq!(back.to_bits(), bits, "{bits:#x}");
            }
            let b = Bf16::from_bits(bits);
            let back = Bf16::from_f32(b.to_f32());
            if b.to_f32().is_nan() {
                assert!(back.to_f32().is_nan(), "{bits:#x}");
            } else {
                assert_eq!(back.to_bits(), bits, "{bits:#x}");
            }
        }
    }

    #[test]
    fn conversions_round_to_nearest_even() {
        assert_eq!(F16::from_f32(1.0).to_bits(), 0x3c00);
        assert_eq!(F16::from_f32(-2.0).to_bits(), 0xc000);
        assert_eq!(F16::from_f32(65504.0).to_bits(), 0x7bff);
        assert_eq!(F16::from_f32(65519.0).to_bits(), 0x7bff);
        assert_eq!(F16::from_f32(65520.0).to_bits(), 0x7c00);
        // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: to even (1)
        assert_eq!(F16::from_f32(1.0 + 2f32.powi(-11)).to_bits(), 0x3c00);
        // 1 + 3 × 2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: to even (1 + 2^-9)
        assert_eq!(F16::from_f32(1.0 + 3.0 * 2f32.powi(-11)).to_bits(), 0x3c02);
        // the smallest subnormal, and half of it (a tie, to even: zero)
        assert_eq!(F16::from_f32(2f32.powi(-24)).to_bits(), 0x0001);
        assert_eq!(F16::from_f32(2f32.powi(-25)).to_bits(), 0x0000);
        assert_eq!(F16::from_f32(1.5 * 2f32.powi(-24)).to_bits(), 0x0002);
        assert_eq!(F16::from_bits(0x0001).to_f32(), 2f32.powi(-24));
        assert!(F16::from_f32(f32::NAN).to_f32().is_nan());
        assert_eq!(F16::from_f32(f32::NEG_INFINITY).to_bits(), 0xfc00);
        assert_eq!(Bf16::from_f32(1.0 + 2f32.powi(-8)).to_bits(), 0x3f80); // tie, to even
        assert_eq!(Bf16::from_f32(1.0 + 3.0 * 2f32.powi(-8)).to_bits(), 0x3f82);
        assert!(Bf16::from_f32(f32::NAN).to_f32().is_nan());
        assert_eq!(std::mem::size_of::<F16>(), 2);
        assert_eq!(std::mem::size_of::<Bf16>(), 2);
    }
}
