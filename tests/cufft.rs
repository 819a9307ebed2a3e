//! cuFFT on a real GPU (`cargo test --features cufft --test cufft`), every result checked
//! against the mathematics: round trips, a cosine's two peaks, 2D and 3D, real-to-complex
//! and back, a plan reused across scopes and streams, and lengths refused before cuFFT.
//!
//! cuFFT is loaded as the crate loads it: `CUDA_BRAND_CUFFT_LIBRARY`, else
//! `libcufft.so.12`/`.11` on the loader's path or in `/usr/local/cuda/lib64`. A test that
//! finds a GPU but no cuFFT fails, saying so.

mod common;

use std::f64::consts::PI;

use cuda_brand::cufft::{self, Complex32, Complex64, Direction, FftPlan};
use cuda_brand::{ContextFlags, ContextGuard, Device, ErrorCode, with_context};

gpu_test_main!(
    c2c_f32_batched_1d_round_trip_returns_n_times_the_input,
    a_cosine_has_two_peaks_of_n_over_two_and_nothing_else,
    r2c_then_c2r_in_2d_f64_returns_n_times_the_input,
    z2z_3d_in_place_round_trip_returns_n_times_the_input,
    r2c_3d_f32_of_a_constant_is_one_peak_at_zero,
    one_plan_serves_two_scopes_and_two_streams,
    wrong_lengths_and_overlaps_are_refused_before_cufft,
    a_real_side_not_aligned_to_the_complex_type_is_refused_before_cufft;
    anywhere: [errors_name_the_call_and_the_cufft_code]
);

fn in_context(f: impl for<'ctx> FnOnce(ContextGuard<'ctx>) -> cuda_brand::Result<()>) {
    match cufft::version() {
        Ok(v) => eprintln!("cuFFT {v}"),
        Err(e) => {
            panic!("this test needs cuFFT: {e}\n(set CUDA_BRAND_CUFFT_LIBRARY to a libcufft.so)")
        }
    }
    let device = Device::get(0).expect("device 0");
    with_context(&device, ContextFlags::default(), f).expect("the test's GPU work");
}

fn signal(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| (i as f64 * 0.37).sin() + (i % 7) as f64 - 3.0)
        .collect()
}

fn c32(v: &[f64]) -> Vec<Complex32> {
    v.iter()
        .enumerate()
        .map(|(i, &x)| Complex32::new(x as f32, (i % 5) as f32 * 0.25))
        .collect()
}

fn c2c_f32_batched_1d_round_trip_returns_n_times_the_input() {
    in_context(|ctx| {
        let (n, batch) = (1024, 3);
        let plan = FftPlan::<Complex32, Complex32>::new(ctx, &[n], batch)?;
        let host = c32(&signal(n * batch));
        let x = ctx.from_slice(&host)?;
        let mut spectrum = ctx.zeroed::<Complex32>(n * batch)?;
        let mut back = ctx.zeroed::<Complex32>(n * batch)?;
        ctx.new_stream()?.scope(|s| {
            let sp = s.bind_mut(&mut spectrum); // written, then read, in stream order
            plan.exec(s, sp, &x, Direction::Forward)?;
            plan.exec(s, &mut back, sp.into_ref(), Direction::Inverse)
        })?;
        let back = back.to_vec()?;
        let worst = host
            .iter()
            .zip(&back)
            .map(|(a, b)| {
                (a.re - b.re / n as f32)
                    .abs()
                    .max((a.im - b.im / n as f32).abs())
            })
            .fold(0.0f32, f32::max);
        assert!(worst < 1e-4, "largest error {worst}");
        Ok(())
    });
}

fn a_cosine_has_two_peaks_of_n_over_two_and_nothing_else() {
    in_context(|ctx| {
        let (n, k) = (64usize, 5usize);
        let x: Vec<Complex32> = (0..n)
            .map(|j| Complex32::new((2.0 * PI * (k * j) as f64 / n as f64).cos() as f32, 0.0))
            .collect();
        let plan = FftPlan::<Complex32, Complex32>::new(ctx, &[n], 1)?;
        let input = ctx.from_slice(&x)?;
        let mut out = ctx.zeroed::<Complex32>(n)?;
        ctx.new_stream()?
            .scope(|s| plan.exec(s, &mut out, &input, Direction::Forward))?;
        for (i, z) in out.to_vec()?.iter().enumerate() {
            let expected = if i == k || i == n - k { 32.0 } else { 0.0 };
            assert!(
                (z.re - expected).abs() < 1e-4 && z.im.abs() < 1e-4,
                "X[{i}] = {z:?}"
            );
        }
        Ok(())
    });
}

fn r2c_then_c2r_in_2d_f64_returns_n_times_the_input() {
    in_context(|ctx| {
        let (shape, batch) = ([6usize, 10], 2);
        let forward = FftPlan::<f64, Complex64>::new(ctx, &shape, batch)?;
        let inverse = FftPlan::<Complex64, f64>::new(ctx, &shape, batch)?;
        assert_eq!(
            (forward.input_len(), forward.output_len()),
            (120, 2 * 6 * 6)
        );
        assert_eq!((inverse.input_len(), inverse.output_len()), (72, 120));
        let host = signal(120);
        let x = ctx.from_slice(&host)?;
        let mut half = ctx.zeroed::<Complex64>(72)?;
        let mut back = ctx.zeroed::<f64>(120)?;
        ctx.new_stream()?
            .scope(|s| forward.exec(s, &mut half, &x))?;
        // the zero frequency of each transform is its sum
        let spectrum = half.to_vec()?;
        for b in 0..batch {
            let sum: f64 = host[b * 60..(b + 1) * 60].iter().sum();
            assert!((spectrum[b * 36].re - sum).abs() < 1e-9, "batch {b}");
        }
        ctx.new_stream()?
            .scope(|s| inverse.exec(s, &mut back, &mut half))?;
        for (i, (a, b)) in host.iter().zip(back.to_vec()?).enumerate() {
            assert!(
                (a - b / 60.0).abs() < 1e-12,
                "x[{i}]: {a} against {}",
                b / 60.0
            );
        }
        Ok(())
    });
}

fn z2z_3d_in_place_round_trip_returns_n_times_the_input() {
    in_context(|ctx| {
        let shape = [4usize, 6, 8];
        let n = 192;
        let plan = FftPlan::<Complex64, Complex64>::new(ctx, &shape, 1)?;
        let host: Vec<Complex64> = signal(n)
            .iter()
            .enumerate()
            .map(|(i, &x)| Complex64::new(x, i as f64 * 0.01))
            .collect();
        let mut buf = ctx.from_slice(&host)?;
        ctx.new_stream()?.scope(|s| {
            let b = s.bind_mut(&mut buf);
            plan.exec_in_place(s, b, Direction::Forward)?;
            plan.exec_in_place(s, b, Direction::Inverse)
        })?;
        for (a, b) in host.iter().zip(buf.to_vec()?) {
            assert!(
                (a.re - b.re / n as f64).abs() < 1e-12 && (a.im - b.im / n as f64).abs() < 1e-12
            );
        }
        Ok(())
    });
}

fn r2c_3d_f32_of_a_constant_is_one_peak_at_zero() {
    in_context(|ctx| {
        let plan = FftPlan::<f32, Complex32>::new(ctx, &[3, 4, 5], 1)?;
        assert_eq!(plan.output_len(), 3 * 4 * 3);
        let x = ctx.from_slice(&[2.0f32; 60])?;
        let mut out = ctx.zeroed::<Complex32>(36)?;
        ctx.new_stream()?.scope(|s| plan.exec(s, &mut out, &x))?;
        let out = out.to_vec()?;
        assert!(
            (out[0].re - 120.0).abs() < 1e-3 && out[0].im.abs() < 1e-3,
            "{:?}",
            out[0]
        );
        assert!(out[1..].iter().all(|z| z.norm() < 1e-3), "{out:?}");
        Ok(())
    });
}

fn one_plan_serves_two_scopes_and_two_streams() {
    in_context(|ctx| {
        let n = 1 << 16;
        let plan = FftPlan::<Complex32, Complex32>::new(ctx, &[n], 1)?;
        let host = c32(&signal(n));
        let x = ctx.from_slice(&host)?;
        let (mut a, mut b) = (ctx.zeroed::<Complex32>(n)?, ctx.zeroed::<Complex32>(n)?);
        let (s1, s2) = (ctx.new_stream()?, ctx.new_stream()?);
        // nested scopes on two streams share the plan (and its work area): ordered
        s1.scope(|p| {
            s2.scope(|q| {
                plan.exec(p, &mut a, &x, Direction::Forward)?;
                plan.exec(q, &mut b, &x, Direction::Forward)
            })
        })?;
        assert_eq!(
            a.to_vec()?,
            b.to_vec()?,
            "both streams computed the same spectrum"
        );
        // and the plan again in a later scope
        let mut c = ctx.zeroed::<Complex32>(n)?;
        s2.scope(|q| plan.exec(q, &mut c, &x, Direction::Forward))?;
        assert_eq!(a.to_vec()?, c.to_vec()?);
        Ok(())
    });
}

fn wrong_lengths_and_overlaps_are_refused_before_cufft() {
    in_context(|ctx| {
        let plan = FftPlan::<Complex32, Complex32>::new(ctx, &[8], 2)?;
        let x = ctx.zeroed::<Complex32>(16)?;
        let mut short = ctx.zeroed::<Complex32>(15)?;
        let e = ctx
            .new_stream()?
            .scope(|s| plan.exec(s, &mut short, &x, Direction::Forward))
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidInput);
        assert_eq!(
            e.to_string(),
            "FftPlan::exec failed: CUDA_BRAND_INVALID_INPUT (invalid input, refused before the driver saw it): output has 15 elements, but the plan writes 16 (batch 2 of shape [8])"
        );
        // two views of one buffer, overlapping
        let mut both = ctx.zeroed::<Complex32>(24)?;
        let e = ctx
            .new_stream()?
            .scope(|s| {
                let whole = s.bind_mut(&mut both);
                let (i, o) = (whole.slice(0..16), whole.slice(8..24));
                plan.exec(s, o, i.into_ref(), Direction::Forward)
            })
            .unwrap_err();
        assert!(e.to_string().contains("overlap"), "{e}");
        // a C2R plan's input is the halved side: 2 × (8 / 2 + 1) = 10
        let c2r = FftPlan::<Complex32, f32>::new(ctx, &[8], 2)?;
        let (mut half, mut real) = (ctx.zeroed::<Complex32>(9)?, ctx.zeroed::<f32>(16)?);
        let e = ctx
            .new_stream()?
            .scope(|s| c2r.exec(s, &mut real, &mut half))
            .unwrap_err();
        assert!(
            e.to_string()
                .ends_with("input has 9 elements, but the plan reads 10 (batch 2 of shape [8])"),
            "{e}"
        );
        // shapes refused when planning
        let e = FftPlan::<f32, Complex32>::new(ctx, &[4, 0], 1).unwrap_err();
        assert_eq!(
            e.invalid().and_then(cuda_brand::Invalid::reason),
            Some("shape[1] is 0: every extent is at least 1")
        );
        Ok(())
    });
}

/// cuFFT requires both pointers of an R2C or C2R transform aligned to the complex type (its
/// kernels move real data in pairs): a real view starting at an odd element is refused
/// before cuFFT, which would otherwise read or write it misaligned.
fn a_real_side_not_aligned_to_the_complex_type_is_refused_before_cufft() {
    in_context(|ctx| {
        let r2c = FftPlan::<f32, Complex32>::new(ctx, &[8], 1)?;
        let reals = ctx.from_slice(&[1.0f32; 9])?;
        let mut half = ctx.zeroed::<Complex32>(5)?;
        let e = ctx
            .new_stream()?
            .scope(|s| r2c.exec(s, &mut half, &reals[1..]))
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidInput, "{e}");
        assert!(e.to_string().contains("input starts at"), "{e}");
        // the aligned view of the same buffer is transformed
        ctx.new_stream()?
            .scope(|s| r2c.exec(s, &mut half, &reals[..8]))?;
        assert_eq!(half.to_vec()?[0], Complex32::new(8.0, 0.0));
        let c2r = FftPlan::<Complex64, f64>::new(ctx, &[8], 1)?;
        let mut spectrum = ctx.zeroed::<Complex64>(5)?;
        let mut out = ctx.zeroed::<f64>(9)?;
        let e = ctx
            .new_stream()?
            .scope(|s| c2r.exec(s, &mut out[1..], &mut spectrum))
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidInput, "{e}");
        assert!(e.to_string().contains("output starts at"), "{e}");
        Ok(())
    });
}

fn errors_name_the_call_and_the_cufft_code() {
    let e = cuda_brand::Error::new("cufftExecC2C", ErrorCode::Cufft(6));
    assert_eq!(
        e.to_string(),
        "cufftExecC2C failed: CUFFT_EXEC_FAILED (failed to execute an FFT on the GPU)"
    );
}
