//! A vector add split across every GPU, gathered on device 0 with peer copies, and the
//! measured peer bandwidth.
//!
//! `cargo run --release --example multi_gpu [N]`. Each device gets its own context (and
//! brand), opened nested so that device 0's result buffer stays usable inside the others.
//! Without a GPU it prints the driver's error and exits 1; with one it runs on that one.

use std::process::ExitCode;
use std::time::Instant;

use cuda_brand::{
    ContextFlags, ContextGuard, Device, DeviceBuffer, DeviceSlice, Error, In, Module, Out, Stream,
    StreamFlags, copy_peer, with_context,
};

const PTX: &str = include_str!("../kernels/kernels.ptx");

fn main() -> ExitCode {
    let n = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(64 << 20);
    match run(n) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let devices = Device::all()?;
    println!("{} device(s), N = {n}", devices.len());
    let a: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| (i / 1000) as f32 * 0.25).collect();

    let c = with_context(&devices[0], ContextFlags::default(), |c0| {
        let mut result = DeviceBuffer::<f32>::zeroed(c0, n)?;
        let t = Instant::now();
        add_on_devices(&devices, 0, c0, &mut result, &a, &b)?;
        println!(
            "split vector add + gather: {:.3} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
        if devices.len() > 1 {
            peer_bandwidth(&devices[1], c0)?;
        }
        result.to_vec()
    })?;

    let wrong = (0..n).filter(|&i| c[i] != a[i] + b[i]).count();
    if wrong > 0 {
        return Err(format!("{wrong} wrong elements").into());
    }
    println!("verified: all {n} elements equal a[i] + b[i] on device 0");
    Ok(())
}

/// The part of `0..n` that device `i` of `count` computes.
fn part(n: usize, i: usize, count: usize) -> std::ops::Range<usize> {
    n * i / count..n * (i + 1) / count
}

/// Computes device `i`'s part in a context of its own, copies it into `result` (device 0's
/// memory) with a peer copy, then recurses to the next device with this context still open.
fn add_on_devices<'c0>(
    devices: &[Device],
    i: usize,
    c0: ContextGuard<'c0>,
    result: &mut DeviceSlice<'c0, f32>,
    a: &[f32],
    b: &[f32],
) -> Result<(), Error> {
    let Some(device) = devices.get(i) else {
        return Ok(());
    };
    with_context(device, ContextFlags::default(), |ctx| {
        let range = part(a.len(), i, devices.len());
        let module = Module::from_ptx(ctx, PTX)?;
        // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*, size_t)
        // stays below the three lengths.
        let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
        let da = DeviceBuffer::from_slice(ctx, &a[range.clone()])?;
        let db = DeviceBuffer::from_slice(ctx, &b[range.clone()])?;
        let mut dc = DeviceBuffer::<f32>::zeroed(ctx, range.len())?;
        let config = add.config_for(range.len().max(1))?;
        Stream::new(ctx, StreamFlags::NonBlocking)?
            .scope(|s| s.launch(&add, config, (&da, &db, &mut dc)))?;
        // gather on device 0: destination and its guard first, then the source and its own
        copy_peer(&mut result[range.clone()], c0, &dc, ctx)?;
        println!("device {i} ({}): elements {range:?}", device.name()?);
        add_on_devices(devices, i + 1, c0, result, a, b)
    })
}

/// Times 256 MiB copies from `peer` to device 0, synchronous, median of 5.
fn peer_bandwidth(peer: &Device, c0: ContextGuard<'_>) -> Result<(), Error> {
    const BYTES: usize = 256 << 20;
    let mut on0 = DeviceBuffer::<u8>::zeroed(c0, BYTES)?;
    with_context(peer, ContextFlags::default(), |c1| {
        let on1 = DeviceBuffer::<u8>::zeroed(c1, BYTES)?;
        let mut median_gbps = || -> Result<f64, Error> {
            let mut times = Vec::new();
            for _ in 0..5 {
                let t = Instant::now();
                copy_peer(&mut on0, c0, &on1, c1)?;
                times.push(t.elapsed().as_secs_f64());
            }
            times.sort_by(f64::total_cmp);
            Ok(BYTES as f64 / times[2] / 1e9)
        };
        let without = median_gbps()?;
        c0.enable_peer_access(c1)?;
        let with = median_gbps()?;
        println!(
            "peer copy device 1 -> device 0, 256 MiB: {without:.1} GB/s; with peer access enabled: {with:.1} GB/s"
        );
        Ok(())
    })
}
