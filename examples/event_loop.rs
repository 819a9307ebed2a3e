//! An event-loop program: GPU state kept in the application's struct between frames, as a
//! GUI framework or game engine would hold it, without any GUI crate.
//!
//! `cargo run --release --example event_loop`. Without a GPU it says so and exits 0; it
//! exits 1 if any frame's result differs from the CPU model.
//!
//! What it shows, of the owning layer (`cuda_brand::owned`):
//!
//! * [`App`] is a plain `'static + Send` struct: an [`OwnedContext`], a stream, two kernels
//!   and three device buffers of the simulation's state, all owned handles. The closure
//!   layer cannot hold any of this across frames: its values carry a brand that cannot
//!   leave `with_context`'s closure, and a framework's callback must be `'static`.
//! * [`App::frame`] is called once per frame. It enters the context (on whatever thread
//!   the loop runs), binds the handles to today's guard, and runs one stream scope: the
//!   frame's input (a "brush" of heat at a place that moves every frame) goes up into the
//!   source buffer, `next = (heat + source) * DECAY` runs as the sample kernels
//!   `vector_add` then `scale`, and the cells under the brush come back as the frame's
//!   summary. Then `heat` and `next` swap: owned handles move like any value.
//! * [`EventLoop`] stands in for the framework: it takes a `'static + Send` callback, runs
//!   it on a thread of its own for [`FRAMES`] frames, and drops it when the loop ends.
//!   Every frame's summary is checked against a CPU model of the same arithmetic (bit for
//!   bit: one `f32` addition and one `f32` multiplication per cell), and the last frame
//!   checks every cell.
//! * Dropping needs nothing special: the struct's fields drop in declaration order, the
//!   context handle first, and that is fine, since every owned handle keeps its context
//!   alive; the last handle, wherever it is dropped, tears the context down.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use cuda_brand::owned::{OwnedContext, OwnedDeviceBuffer, OwnedKernel, OwnedStream};
use cuda_brand::{Device, Error, ErrorCode, In, LaunchConfig, Out, samples};

/// Cells of the simulation.
const CELLS: usize = 1 << 16;
/// Frames the loop runs.
const FRAMES: u64 = 120;
/// Cells under the brush, read back every frame.
const BRUSH: usize = 64;
/// What remains of the heat after a frame.
const DECAY: f32 = 0.75;
/// Both kernels are grid-stride loops: any grid covers all cells.
const CONFIG: LaunchConfig = LaunchConfig::linear((CELLS / 256) as u32, 256);

/// `vector_add(const float *a, size_t, const float *b, size_t, float *c, size_t)`.
type Add = (In<f32>, In<f32>, Out<f32>);
/// `scale(float *x, size_t, float k)`.
type Scale = (Out<f32>, f32);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> ExitCode {
    let device = match Device::get(0) {
        Ok(device) => device,
        Err(e) if no_gpu(&e) => {
            println!("no CUDA GPU here, so no frames to draw: {e}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(&device) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Whether `e` says that this machine has no GPU to use (no driver, or no device).
fn no_gpu(e: &Error) -> bool {
    matches!(e.code(), ErrorCode::NoDevice | ErrorCode::DriverNotFound)
        || (e.code() == ErrorCode::InvalidDevice && e.call() == "Device::get")
}

fn run(device: &Device) -> Result<(), BoxError> {
    println!(
        "{} (compute {}): {FRAMES} frames of {CELLS} cells",
        device.name()?,
        device.compute_capability()?
    );
    let mut app = App::new(device)?;
    // A handle of our own, to close the context once the loop has dropped the app.
    let home = app.home.clone();
    let mut model = Model::new();
    let mut frame_times = Vec::with_capacity(FRAMES as usize);

    // What a framework stores: a `'static + Send` callback that owns the app.
    EventLoop { frames: FRAMES }.run(move |n| {
        let start = Instant::now();
        let summary = app.frame(n)?;
        frame_times.push(start.elapsed());

        let expected = model.frame(n);
        if summary.at != expected.at || bits(&summary.cells) != bits(&expected.cells) {
            return Err(format!(
                "frame {n}: the GPU's cells at {} are {:?}..., the CPU model's at {} are {:?}...",
                summary.at,
                &summary.cells[..4],
                expected.at,
                &expected.cells[..4]
            )
            .into());
        }
        if n % 20 == 0 || n + 1 == FRAMES {
            println!(
                "frame {n:3}: brush at {:5}, heat under it {:8.4} (verified)",
                summary.at, summary.sum
            );
        }
        if n + 1 == FRAMES {
            // the last frame: every cell, against the model
            let heat = app.heat()?;
            if let Some(i) = (0..CELLS).find(|&i| heat[i].to_bits() != model.heat[i].to_bits()) {
                return Err(format!(
                    "after frame {n}: cell {i} is {} on the GPU, {} in the CPU model",
                    heat[i], model.heat[i]
                )
                .into());
            }
            let total: Duration = frame_times.iter().sum();
            println!(
                "verified: all {CELLS} cells after {FRAMES} frames equal the CPU model; \
                 {:.3} ms per frame on average",
                total.as_secs_f64() * 1e3 / FRAMES as f64
            );
        }
        Ok(())
    })?;

    // The loop has dropped the callback, and the app with it, on the loop's thread: ours
    // is the context's last handle, so `close` tears it down and returns its result.
    if home.handles() != 1 {
        return Err("a handle of the context outlived the app".into());
    }
    home.close()?;
    println!("context closed: the app's handles were all dropped with it");
    Ok(())
}

/// The application: everything it keeps on the GPU between frames. `'static` and `Send`,
/// so any framework can own it.
///
/// The fields drop in this order, the context handle first: nothing special is needed,
/// since each owned handle holds the context alive until it is itself dropped.
struct App {
    home: OwnedContext,
    stream: OwnedStream,
    add: OwnedKernel<Add>,
    scale: OwnedKernel<Scale>,
    /// The state: each cell's heat.
    heat: OwnedDeviceBuffer<f32>,
    /// The next frame's state, written by the frame's kernels.
    next: OwnedDeviceBuffer<f32>,
    /// The frame's input: the brush's heat, zero elsewhere.
    source: OwnedDeviceBuffer<f32>,
}

/// What a frame reads back: the cells under the brush.
struct Summary {
    at: usize,
    cells: [f32; BRUSH],
    sum: f32,
}

/// Frame `n`'s input: where the brush is, and its heat.
fn brush(n: u64) -> (usize, f32) {
    let at = (n as usize * 4099) % (CELLS - BRUSH);
    let strength = 1.0 + (n % 5) as f32;
    (at, strength)
}

impl App {
    fn new(device: &Device) -> Result<App, Error> {
        let home = OwnedContext::primary(device)?;
        let (module, stream, heat, next, source) = home.enter(|ctx| {
            let module = home.unbind(ctx, ctx.module_from_ptx(samples::KERNELS_PTX)?)?;
            Ok::<_, Error>((
                std::sync::Arc::new(module),
                home.unbind(ctx, ctx.new_stream()?)?,
                home.unbind(ctx, ctx.zeroed::<f32>(CELLS)?)?,
                home.unbind(ctx, ctx.zeroed::<f32>(CELLS)?)?,
                home.unbind(ctx, ctx.zeroed::<f32>(CELLS)?)?,
            ))
        })?;
        // SAFETY: `vector_add(const float *a, size_t a_len, const float *b, size_t b_len,
        // float *c, size_t c_len)` writes only c[0..c_len] and reads below every length
        // (see `cuda_brand::samples`).
        let add = unsafe { OwnedKernel::<Add>::new(&module, "vector_add") }?;
        // SAFETY: `scale(float *x, size_t x_len, float k)` writes only x[0..x_len].
        let scale = unsafe { OwnedKernel::<Scale>::new(&module, "scale") }?;
        // `module` (an `Arc`) is dropped here: the kernels hold it, so it stays loaded.
        Ok(App {
            home,
            stream,
            add,
            scale,
            heat,
            next,
            source,
        })
    }

    /// Runs frame `n`: the brush into `source`, `next = (heat + source) * DECAY`, the
    /// cells under the brush back to the host; then `next` becomes `heat`.
    fn frame(&mut self, n: u64) -> Result<Summary, Error> {
        let (at, strength) = brush(n);
        let input = [strength; BRUSH];
        let mut cells = [0.0f32; BRUSH];
        let App {
            home,
            stream,
            add,
            scale,
            heat,
            next,
            source,
        } = self;
        home.enter(|ctx| {
            // today's branded values: from here on every rule of the crate holds
            let (stream, add, scale) = (stream.bind(ctx)?, add.bind(ctx)?, scale.bind(ctx)?);
            let heat = heat.bind(ctx)?;
            let (next, source) = (next.bind_mut(ctx)?, source.bind_mut(ctx)?);
            stream.scope(|s| {
                let (next, source) = (s.bind_mut(next), s.bind_mut(source));
                s.fill(source, 0.0)?;
                s.copy_from_host(source.slice(at..at + BRUSH), &input)?;
                s.launch(add, CONFIG, (heat, source, next))?;
                s.launch(scale, CONFIG, (next, DECAY))?;
                s.copy_to_host(&mut cells, next.slice(at..at + BRUSH).into_ref())
            })
        })?;
        // the new state is `next`; the old one is next frame's output
        std::mem::swap(&mut self.heat, &mut self.next);
        Ok(Summary {
            at,
            cells,
            sum: cells.iter().sum(),
        })
    }

    /// Every cell of the state.
    fn heat(&self) -> Result<Vec<f32>, Error> {
        self.heat.enter(|_, heat| heat.to_vec())
    }
}

/// The same simulation on the CPU.
struct Model {
    heat: Vec<f32>,
}

impl Model {
    fn new() -> Model {
        Model {
            heat: vec![0.0; CELLS],
        }
    }

    /// Frame `n`, as [`App::frame`] computes it.
    fn frame(&mut self, n: u64) -> Summary {
        let (at, strength) = brush(n);
        for (i, h) in self.heat.iter_mut().enumerate() {
            let source = if (at..at + BRUSH).contains(&i) {
                strength
            } else {
                0.0
            };
            *h = (*h + source) * DECAY;
        }
        let cells: [f32; BRUSH] = self.heat[at..at + BRUSH].try_into().expect("BRUSH cells");
        Summary {
            at,
            cells,
            sum: cells.iter().sum(),
        }
    }
}

fn bits(cells: &[f32]) -> Vec<u32> {
    cells.iter().map(|c| c.to_bits()).collect()
}

/// A stand-in for a GUI framework's event loop (winit's, a game engine's): it owns the
/// application's callback, which must be `'static` and `Send`, calls it once per frame on
/// a thread of its own, and drops it when the loop ends.
struct EventLoop {
    frames: u64,
}

impl EventLoop {
    fn run<F>(self, mut on_frame: F) -> Result<(), BoxError>
    where
        F: FnMut(u64) -> Result<(), BoxError> + Send + 'static,
    {
        let frames = self.frames;
        std::thread::spawn(move || {
            for n in 0..frames {
                on_frame(n)?;
            }
            drop(on_frame); // the framework drops the app when its loop ends
            Ok(())
        })
        .join()
        .map_err(|_| "the event loop's thread panicked")?
    }
}
