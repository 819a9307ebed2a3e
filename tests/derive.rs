//! `#[derive(DeviceCopy)]`: structs that pass its checks, their layout (C's, without
//! padding), and on a GPU their values through device memory and kernels that read them as
//! C structs (`kernels/derive.cu`). The refused structs are the compile-fail cases in
//! `ui-tests/fail/7_derive/`. Without a GPU the layout tests run and the others are
//! ignored; with `CUDA_BRAND_REQUIRE_GPU=1` they fail instead.

use crate::common;

use std::mem::{align_of, offset_of, size_of};

use cuda_brand::{DeviceBuffer, DeviceCopy, In, Out, PinnedBuffer};
use static_assertions::{assert_impl_all, assert_not_impl_any};

const PTX: &str = include_str!("../kernels/derive.ptx");

/// C: `struct Particle { float pos[3]; float mass; unsigned id; unsigned flags; }`.
#[derive(Clone, Copy, Debug, PartialEq, DeviceCopy)]
#[repr(C)]
struct Particle {
    pos: [f32; 3],
    mass: f32,
    id: u32,
    flags: u32,
}

/// A derived struct inside a derived struct. C: `struct Cell { struct Particle particle;
/// unsigned long long key; double weight; }`.
#[derive(Clone, Copy, Debug, PartialEq, DeviceCopy)]
#[repr(C)]
struct Cell {
    particle: Particle,
    key: u64,
    weight: f64,
}

/// Arrays of derived structs, an array field and an explicit padding field.
#[derive(Clone, Copy, Debug, PartialEq, DeviceCopy)]
#[repr(C)]
struct Pair {
    cells: [Cell; 2],
    range: [u32; 2],
    tag: u8,
    _pad: [u8; 7],
}

/// A tuple struct.
#[derive(Clone, Copy, Debug, PartialEq, DeviceCopy)]
#[repr(C)]
struct Rgba(u8, u8, u8, u8);

/// A one-field wrapper.
#[derive(Clone, Copy, Debug, PartialEq, DeviceCopy)]
#[repr(transparent)]
struct Meters(f64);

/// `align` and `packed` are allowed next to `C`, when they leave no padding.
#[derive(Clone, Copy, Debug, PartialEq, DeviceCopy)]
#[repr(C, align(16))]
struct Aligned {
    v: [f32; 4],
}

#[derive(Clone, Copy, Debug, PartialEq, DeviceCopy)]
#[repr(C, packed)]
struct Packed {
    tag: u8,
    value: u32,
}

/// No fields: no bytes.
#[derive(Clone, Copy, Debug, PartialEq, DeviceCopy)]
#[repr(C)]
struct Nothing;

// The derive implements the trait for each of them, and arrays of them are `DeviceCopy`
// too; tuples are not, of derived structs or of numbers (the trait's one rule: no padding,
// which no tuple impl could check where `cargo check` sees it).
assert_impl_all!(Particle: DeviceCopy);
assert_impl_all!(Cell: DeviceCopy);
assert_impl_all!(Pair: DeviceCopy);
assert_impl_all!(Rgba: DeviceCopy);
assert_impl_all!(Meters: DeviceCopy);
assert_impl_all!(Aligned: DeviceCopy);
assert_impl_all!(Packed: DeviceCopy);
assert_impl_all!(Nothing: DeviceCopy);
assert_impl_all!([Particle; 8]: DeviceCopy);
assert_not_impl_any!((Rgba, Meters): DeviceCopy);
assert_not_impl_any!((u32, u32): DeviceCopy);

fn derived_structs_have_c_layout_without_padding() {
    // the offsets kernels/derive.cu's PTX reads (ld.global at +12, +16, +20; +24, +32)
    assert_eq!((size_of::<Particle>(), align_of::<Particle>()), (24, 4));
    assert_eq!(offset_of!(Particle, mass), 12);
    assert_eq!(offset_of!(Particle, id), 16);
    assert_eq!(offset_of!(Particle, flags), 20);
    assert_eq!((size_of::<Cell>(), align_of::<Cell>()), (40, 8));
    assert_eq!(offset_of!(Cell, key), 24);
    assert_eq!(offset_of!(Cell, weight), 32);
    assert_eq!(size_of::<Pair>(), 2 * 40 + 8 + 1 + 7);
    assert_eq!(size_of::<Rgba>(), 4);
    assert_eq!(size_of::<Meters>(), 8);
    assert_eq!((size_of::<Aligned>(), align_of::<Aligned>()), (16, 16));
    assert_eq!((size_of::<Packed>(), align_of::<Packed>()), (5, 1));
    assert_eq!(size_of::<Nothing>(), 0);
}

fn particle(i: usize) -> Particle {
    let f = i as f32;
    Particle {
        pos: [f, -f, 0.5 * f],
        mass: (i % 7) as f32 + 0.25,
        id: i as u32 * 3,
        flags: (i as u32).rotate_left(13),
    }
}

fn cell(i: usize) -> Cell {
    Cell {
        particle: particle(i),
        key: (i as u64) << 33 | 0x5555,
        weight: i as f64 * 1.5,
    }
}

fn pair(i: usize) -> Pair {
    Pair {
        cells: [cell(2 * i), cell(2 * i + 1)],
        range: [i as u32, u32::MAX - i as u32],
        tag: i as u8,
        _pad: [0; 7],
    }
}

fn a_vec_of_derived_structs_round_trips_with_exact_values() {
    common::in_context(|ctx| {
        for len in [1, 3, 1000] {
            let particles: Vec<Particle> = (0..len).map(particle).collect();
            let cells: Vec<Cell> = (0..len).map(cell).collect();
            let pairs: Vec<Pair> = (0..len).map(pair).collect();
            let colors: Vec<Rgba> = (0..len)
                .map(|i| Rgba(i as u8, (i >> 8) as u8, 7, 255))
                .collect();
            let lengths: Vec<Meters> = (0..len).map(|i| Meters(i as f64 / 4.0)).collect();
            let packed: Vec<Packed> = (0..len)
                .map(|i| Packed {
                    tag: i as u8,
                    value: i as u32 * 0x0101_0101,
                })
                .collect();

            let on_gpu = DeviceBuffer::from_slice(ctx, &particles)?;
            assert_eq!(on_gpu.size_in_bytes(), len * 24);
            assert_eq!(on_gpu.to_vec()?, particles, "{len} particles");
            assert_eq!(ctx.from_slice(&cells)?.to_vec()?, cells, "{len} cells");
            assert_eq!(ctx.from_slice(&pairs)?.to_vec()?, pairs, "{len} pairs");
            assert_eq!(ctx.from_slice(&colors)?.to_vec()?, colors, "{len} colors");
            assert_eq!(
                ctx.from_slice(&lengths)?.to_vec()?,
                lengths,
                "{len} lengths"
            );
            assert_eq!(ctx.from_slice(&packed)?.to_vec()?, packed, "{len} packed");

            // device to device, into a buffer that held other values
            let mut other = DeviceBuffer::from_slice(ctx, &vec![particle(99); len])?;
            other.copy_from_device(&on_gpu)?;
            let mut back = vec![particle(98); len];
            other.copy_to_host(&mut back)?;
            assert_eq!(back, particles, "device-to-device copy of {len} particles");
        }
        Ok(())
    });
}

fn derived_structs_go_through_pinned_memory_in_a_stream_scope() {
    common::in_context(|ctx| {
        let cells: Vec<Cell> = (0..4096).map(cell).collect();
        let pinned = PinnedBuffer::from_slice(ctx, &cells)?;
        let mut dev = ctx.zeroed::<Cell>(cells.len())?;
        let mut back = PinnedBuffer::<Cell>::zeroed(ctx, cells.len())?;
        ctx.new_stream()?.scope(|s| {
            let dev = s.bind_mut(&mut dev);
            s.copy_from_host(dev, &pinned)?;
            s.copy_to_host(&mut back, dev.into_ref())
        })?;
        assert_eq!(&back[..], &cells[..]);
        Ok(())
    });
}

fn a_kernel_reads_and_writes_derived_structs_at_c_offsets() {
    common::in_context(|ctx| {
        let module = ctx.module_from_ptx(PTX)?;
        // SAFETY: `particles_step(const Particle *in, size_t in_len, Particle *out, size_t
        // out_len)`, with `Particle` laid out as the Rust struct (`#[repr(C)]`, same fields);
        // it reads `in` and writes `out` below the smaller length.
        let step = unsafe { module.kernel::<(In<Particle>, Out<Particle>)>("particles_step") }?;
        // SAFETY: `cells_sum(const Cell *in, size_t in_len, unsigned long long *out, size_t
        // out_len)`, the same way.
        let sum = unsafe { module.kernel::<(In<Cell>, Out<u64>)>("cells_sum") }?;

        let n = 10_000;
        let particles: Vec<Particle> = (0..n).map(particle).collect();
        let cells: Vec<Cell> = (0..n).map(cell).collect();
        let input = ctx.from_slice(&particles)?;
        let mut output = ctx.zeroed::<Particle>(n)?;
        let cells_in = ctx.from_slice(&cells)?;
        let mut sums = ctx.zeroed::<u64>(n)?;
        ctx.new_stream()?.scope(|s| {
            s.launch(&step, step.config_for(n)?, (&input, &mut output))?;
            s.launch(&sum, sum.config_for(n)?, (&cells_in, &mut sums))
        })?;

        let stepped = output.to_vec()?;
        for (i, (p, q)) in particles.iter().zip(&stepped).enumerate() {
            // exact: small integers, halves and quarters
            let expected = Particle {
                pos: [
                    p.pos[0] + p.mass,
                    p.pos[1] + 2.0 * p.mass,
                    p.pos[2] + 3.0 * p.mass,
                ],
                mass: p.mass,
                id: p.id + 1000,
                flags: p.flags | 0x100,
            };
            assert_eq!(*q, expected, "particle {i}");
        }
        let sums = sums.to_vec()?;
        for (i, (c, s)) in cells.iter().zip(&sums).enumerate() {
            let expected =
                c.key + u64::from(c.particle.id) + c.weight as u64 + c.particle.mass as u64;
            assert_eq!(*s, expected, "cell {i}");
        }
        Ok(())
    });
}

gpu_tests!(
    a_vec_of_derived_structs_round_trips_with_exact_values,
    derived_structs_go_through_pinned_memory_in_a_stream_scope,
    a_kernel_reads_and_writes_derived_structs_at_c_offsets;
    anywhere: [derived_structs_have_c_layout_without_padding]
);
