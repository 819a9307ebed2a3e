//! A long-lived GPU service: a TCP server whose state, kept across requests, is owned GPU
//! state, and whose requests await their GPU work instead of blocking a thread.
//!
//! `cargo run --release --example gpu_service [N]` (default N = 20000 requests). Without
//! a GPU it says so and exits 0; it exits 1 if any answer is wrong.
//!
//! What it shows, of the owning layer (`cuda_brand::owned`):
//!
//! * The server's state ([`Service`]) is `'static` and shared by every connection task:
//!   an [`OwnedContext`], the model's weights on the device (an
//!   `Arc<OwnedDeviceBuffer<f32>>` every request reads), two kernels
//!   (`Arc<OwnedKernel<..>>`, which hold their `OwnedModule`), [`STREAMS`] streams used in
//!   turn, and a pool of [`POOL`] buffer sets (two device buffers and a pinned host buffer
//!   each) that requests take and give back. The closure layer cannot hold any of this:
//!   its values carry a brand that cannot leave `with_context`'s closure.
//! * A request is one frame on a connection: `k` and [`DIM`] numbers `x`, all `f32`
//!   little-endian. The answer is the model's layer `y = (x + w) * k` (`w`: the weights),
//!   computed by the sample kernels `vector_add` then `scale`, and sent back as a status
//!   word (0: computed) and [`DIM`] numbers.
//! * Awaited: each request's work is a batch given to `OwnedStream::submit`, which queues
//!   it and returns a future; the connection task awaits it, so the runtime's few worker
//!   threads serve every connection while the GPU works. The batch owns what the work
//!   touches (the pool's buffers, the kernels, an `Arc` of the weights) and hands it back
//!   with the result.
//! * Blocking, for comparison: the same requests on the same state, each request's GPU
//!   work on a thread of its own (`spawn_blocking`), which enters the context, binds the
//!   owned handles, and runs a blocking `Stream::scope`.
//!
//! The client, in the same process, sends the N requests over [`CONNECTIONS`] concurrent
//! connections (one request at a time each, so as many requests are in flight), checks
//! every answer against the same arithmetic on the CPU (bit for bit: the GPU does one
//! `f32` addition and one `f32` multiplication per element, as the CPU does), and prints
//! requests per second and the median and 99th-percentile latency of both servers side by
//! side. Everything runs on 127.0.0.1, on a port the OS picks.

use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cuda_brand::owned::{
    OwnedContext, OwnedDeviceBuffer, OwnedKernel, OwnedPinnedBuffer, OwnedStream,
};
use cuda_brand::{Device, Error, ErrorCode, In, LaunchConfig, Out, samples};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// The model's width: the numbers of one request, of its answer, and of the weights.
const DIM: usize = 4096;
/// Streams of the service, used in turn by successive requests.
const STREAMS: usize = 4;
/// Buffer sets in the pool: at most this many requests have GPU work at once.
const POOL: usize = 16;
/// Concurrent client connections (each with one request in flight at a time).
const CONNECTIONS: usize = 32;
/// Requests of each measured run, unless the command line says otherwise.
const DEFAULT_REQUESTS: usize = 20_000;
/// Requests sent before the measured runs (first launches, connections, the pool).
const WARM_UP: usize = 4 * CONNECTIONS;

/// A request: `k`, then `x` (`DIM` numbers).
const REQUEST_BYTES: usize = 4 + 4 * DIM;
/// An answer: a status word (0: computed, 1: failed), then `y` (`DIM` numbers).
const RESPONSE_BYTES: usize = 4 + 4 * DIM;

/// The launch of both kernels: grid-stride loops, so any grid covers `DIM`.
const CONFIG: LaunchConfig = LaunchConfig::linear((DIM / 256) as u32, 256);

/// `vector_add(const float *a, size_t, const float *b, size_t, float *c, size_t)`.
type Add = (In<f32>, In<f32>, Out<f32>);
/// `scale(float *x, size_t, float k)`.
type Scale = (Out<f32>, f32);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> ExitCode {
    let requests = match std::env::args().nth(1).map(|a| a.parse::<usize>()) {
        None => DEFAULT_REQUESTS,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: gpu_service [N > 0]");
            return ExitCode::from(2);
        }
    };
    let device = match Device::get(0) {
        Ok(device) => device,
        Err(e) if no_gpu(&e) => {
            println!("no CUDA GPU here, so nothing to serve: {e}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(&device, requests) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(wrong) => {
            eprintln!("FAILED: {wrong} wrong answers");
            ExitCode::FAILURE
        }
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

/// Builds the service and the runtime, measures both servers, and returns how many
/// answers were wrong.
fn run(device: &Device, requests: usize) -> Result<usize, BoxError> {
    println!(
        "{} (compute {}): {requests} requests of {DIM} numbers, {CONNECTIONS} connections, \
         {STREAMS} streams, {POOL} buffer sets",
        device.name()?,
        device.compute_capability()?
    );
    let service = Arc::new(Service::new(device)?);
    let home = service.home.clone();

    // The fewest features: no timers, no signals, only sockets and the scheduler.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_io()
        .build()?;
    let (warm_up, awaited, blocking) = runtime.block_on(async {
        let warm_up = measure(&service, Mode::Awaited, WARM_UP).await?;
        let awaited = measure(&service, Mode::Awaited, requests).await?;
        let blocking = measure(&service, Mode::Blocking, requests).await?;
        Ok::<_, BoxError>((warm_up, awaited, blocking))
    })?;

    println!();
    println!(
        "{:<20} {:>26} {:>26}",
        "", "awaited (submit)", "blocking (a thread each)"
    );
    println!(
        "{:<20} {:>26.0} {:>26.0}",
        "requests/s",
        awaited.per_second(),
        blocking.per_second()
    );
    for (name, q) in [("p50 latency (us)", 0.50), ("p99 latency (us)", 0.99)] {
        println!(
            "{:<20} {:>26.1} {:>26.1}",
            name,
            awaited.percentile(q).as_secs_f64() * 1e6,
            blocking.percentile(q).as_secs_f64() * 1e6
        );
    }
    println!(
        "{:<20} {:>26} {:>26}",
        "wrong answers", awaited.wrong, blocking.wrong
    );
    let wrong = warm_up.wrong + awaited.wrong + blocking.wrong;
    if wrong == 0 {
        println!(
            "verified: all {} answers equal (x + w) * k computed on the CPU",
            warm_up.requests + awaited.requests + blocking.requests
        );
    }

    // Dropping the runtime drops the server's tasks and their shares of the state; then
    // the service's own handles go, in whatever order: each owned handle keeps the context
    // alive. Ours is then the last, so `close` tears the context down and returns what a
    // drop could not: the teardown's result.
    drop(runtime);
    drop(service);
    if home.handles() != 1 {
        return Err("a handle of the context outlived the service".into());
    }
    home.close()?;
    println!("context closed: every owned handle was dropped before it");
    Ok(wrong)
}

/// The service's state: everything it keeps on the GPU between requests.
struct Service {
    home: OwnedContext,
    /// The model's weights, read by every request at once (an `Arc`: nobody can write them).
    weights: Arc<OwnedDeviceBuffer<f32>>,
    /// Each kernel holds a share of the module, which stays loaded while either exists.
    add: Arc<OwnedKernel<Add>>,
    scale: Arc<OwnedKernel<Scale>>,
    streams: Vec<Arc<OwnedStream>>,
    next_stream: AtomicUsize,
    pool: Pool,
}

/// One request's buffers: `x` on the device, `y` on the device, and the pinned host
/// memory that `x` comes from and `y` goes to (pinned, so both copies are asynchronous: a
/// copy to pageable memory would make the submitting thread wait for the kernels).
struct Slot {
    x: OwnedDeviceBuffer<f32>,
    y: OwnedDeviceBuffer<f32>,
    host: OwnedPinnedBuffer<f32>,
}

/// The buffer sets not in use, and a permit for each: a request waits (without a thread)
/// for a set to be free. The lock is a plain one, never held across an await.
struct Pool {
    free: Mutex<Vec<Slot>>,
    ready: Semaphore,
}

/// How a server runs a request's GPU work.
#[derive(Clone, Copy)]
enum Mode {
    /// `OwnedStream::submit`, awaited on the connection's task.
    Awaited,
    /// A blocking `Stream::scope` on a thread of its own (`spawn_blocking`).
    Blocking,
}

/// The weight of element `j`.
fn weight(j: usize) -> f32 {
    (j % 97) as f32 * 0.03125 - 1.5
}

/// Request `i`: its `k` and its `x`.
fn request_values(i: usize) -> (f32, impl Iterator<Item = f32>) {
    let k = 0.5 + (i % 16) as f32 / 16.0;
    let x = (0..DIM).map(move |j| ((i * 31 + j * 7) % 1024) as f32 / 8.0 - 64.0);
    (k, x)
}

impl Service {
    fn new(device: &Device) -> Result<Service, Error> {
        let home = OwnedContext::primary(device)?;
        let weights: Vec<f32> = (0..DIM).map(weight).collect();
        // Made in one entry of the context, owned from then on.
        let (module, weights, streams, slots) = home.enter(|ctx| {
            let module = home.unbind(ctx, ctx.module_from_ptx(samples::KERNELS_PTX)?)?;
            let weights = home.unbind(ctx, ctx.from_slice(&weights)?)?;
            let mut streams = Vec::with_capacity(STREAMS);
            for _ in 0..STREAMS {
                streams.push(Arc::new(home.unbind(ctx, ctx.new_stream()?)?));
            }
            let mut slots = Vec::with_capacity(POOL);
            for _ in 0..POOL {
                slots.push(Slot {
                    x: home.unbind(ctx, ctx.zeroed::<f32>(DIM)?)?,
                    y: home.unbind(ctx, ctx.zeroed::<f32>(DIM)?)?,
                    host: home.unbind(ctx, ctx.pinned_zeroed::<f32>(DIM)?)?,
                });
            }
            Ok::<_, Error>((Arc::new(module), Arc::new(weights), streams, slots))
        })?;
        // SAFETY: `vector_add(const float *a, size_t a_len, const float *b, size_t b_len,
        // float *c, size_t c_len)` writes only c[0..c_len] and reads below every length
        // (see `cuda_brand::samples`).
        let add = unsafe { OwnedKernel::<Add>::new(&module, "vector_add") }?;
        // SAFETY: `scale(float *x, size_t x_len, float k)` writes only x[0..x_len].
        let scale = unsafe { OwnedKernel::<Scale>::new(&module, "scale") }?;
        Ok(Service {
            home,
            weights,
            add: Arc::new(add),
            scale: Arc::new(scale),
            streams,
            next_stream: AtomicUsize::new(0),
            pool: Pool {
                free: Mutex::new(slots),
                ready: Semaphore::new(POOL),
            },
        })
    }

    /// The next stream, in turn.
    fn stream(&self) -> &Arc<OwnedStream> {
        let i = self.next_stream.fetch_add(1, Ordering::Relaxed);
        &self.streams[i % self.streams.len()]
    }

    /// Answers `request` into `response` with awaited GPU work.
    async fn answer_awaited(&self, request: &[u8], response: &mut [u8]) -> Result<(), Error> {
        let slot = self.pool.take().await;
        let (result, slot) = self.compute_awaited(slot, request, response).await;
        self.pool.put(slot);
        result
    }

    /// The GPU work of one request: the slot goes into the batch and comes back with the
    /// result, whatever happens.
    async fn compute_awaited(
        &self,
        slot: Slot,
        request: &[u8],
        response: &mut [u8],
    ) -> (Result<(), Error>, Slot) {
        let Slot { x, y, mut host } = slot;
        let k = match decode_request(&mut host, request) {
            Ok(k) => k,
            Err(e) => return (Err(e), Slot { x, y, host }),
        };
        let batch = (
            Arc::clone(&self.weights),
            x,
            y,
            host,
            Arc::clone(&self.add),
            Arc::clone(&self.scale),
        );
        // Queued here, on this task's thread; the task then yields until the GPU is done.
        let work = self
            .stream()
            .submit(batch, move |s, (w, x, y, host, add, scale)| {
                s.copy_from_host_view(x, host.into_ref())?;
                s.launch(add, CONFIG, (x, w, y))?;
                s.launch(scale, CONFIG, (y, k))?;
                s.copy_to_host_view(host, y.into_ref())
            });
        let (result, (_, x, y, host, _, _)) = work.await;
        let result = result.and_then(|()| encode_response(&host, response));
        (result, Slot { x, y, host })
    }

    /// The same GPU work, blocking the calling thread: the context entered, the owned
    /// handles bound to its guard, and a stream scope that returns once the GPU is done.
    fn compute_blocking(
        &self,
        slot: &mut Slot,
        request: &[u8],
        response: &mut [u8],
    ) -> Result<(), Error> {
        let k = decode_request(&mut slot.host, request)?;
        let stream = self.stream();
        self.home.enter(|ctx| {
            let (stream, weights) = (stream.bind(ctx)?, self.weights.bind(ctx)?);
            let (add, scale) = (self.add.bind(ctx)?, self.scale.bind(ctx)?);
            let x = slot.x.bind_mut(ctx)?;
            let y = slot.y.bind_mut(ctx)?;
            let host = slot.host.bind_mut(ctx)?;
            stream.scope(|s| {
                let (x, y, host) = (s.bind_mut(x), s.bind_mut(y), s.bind_host_mut(host));
                s.copy_from_host_view(x, host.into_ref())?;
                s.launch(add, CONFIG, (x, weights, y))?;
                s.launch(scale, CONFIG, (y, k))?;
                s.copy_to_host_view(host, y.into_ref())
            })
        })?;
        encode_response(&slot.host, response)
    }
}

impl Pool {
    /// A free buffer set, waiting (without a thread) until one is.
    async fn take(&self) -> Slot {
        self.ready
            .acquire()
            .await
            .expect("the pool's semaphore is never closed")
            .forget();
        self.free
            .lock()
            .expect("no panic while the pool is locked")
            .pop()
            .expect("a permit for each free set")
    }

    /// Gives a buffer set back.
    fn put(&self, slot: Slot) {
        self.free
            .lock()
            .expect("no panic while the pool is locked")
            .push(slot);
        self.ready.add_permits(1);
    }
}

/// Reads a request frame into the pinned buffer (`x`) and returns `k`. An owned pinned
/// buffer is host memory: it reads and writes as a slice, without entering its context.
fn decode_request(host: &mut OwnedPinnedBuffer<f32>, request: &[u8]) -> Result<f32, Error> {
    for (v, bytes) in host.iter_mut().zip(request[4..].chunks_exact(4)) {
        *v = f32::from_le_bytes(bytes.try_into().expect("4 bytes"));
    }
    Ok(f32::from_le_bytes(
        request[..4].try_into().expect("4 bytes"),
    ))
}

/// Writes the answer frame from the pinned buffer (`y`).
fn encode_response(host: &OwnedPinnedBuffer<f32>, response: &mut [u8]) -> Result<(), Error> {
    response[..4].copy_from_slice(&0u32.to_le_bytes());
    for (bytes, v) in response[4..].chunks_exact_mut(4).zip(host.iter()) {
        bytes.copy_from_slice(&v.to_le_bytes());
    }
    Ok(())
}

/// The server: a task for each connection, for as long as the listener's task runs.
async fn serve(listener: TcpListener, service: Arc<Service>, mode: Mode) {
    loop {
        match listener.accept().await {
            Ok((socket, _)) => {
                let service = Arc::clone(&service);
                tokio::spawn(async move {
                    if let Err(e) = serve_connection(service, socket, mode).await {
                        eprintln!("server: connection failed: {e}");
                    }
                });
            }
            Err(e) => eprintln!("server: accept failed: {e}"),
        }
    }
}

/// Answers the requests of one connection, in order, until the client closes it.
async fn serve_connection(
    service: Arc<Service>,
    mut socket: TcpStream,
    mode: Mode,
) -> Result<(), BoxError> {
    socket.set_nodelay(true)?;
    let mut request = vec![0u8; REQUEST_BYTES];
    let mut response = vec![0u8; RESPONSE_BYTES];
    loop {
        match socket.read_exact(&mut request).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let result = match mode {
            Mode::Awaited => service.answer_awaited(&request, &mut response).await,
            Mode::Blocking => {
                let mut slot = service.pool.take().await;
                let worker = Arc::clone(&service);
                let (result, slot, req, resp) = tokio::task::spawn_blocking(move || {
                    let result = worker.compute_blocking(&mut slot, &request, &mut response);
                    (result, slot, request, response)
                })
                .await?;
                service.pool.put(slot);
                (request, response) = (req, resp);
                result
            }
        };
        if let Err(e) = result {
            eprintln!("server: request failed: {e}");
            response.fill(0);
            response[..4].copy_from_slice(&1u32.to_le_bytes());
        }
        socket.write_all(&response).await?;
    }
}

/// What one run of the client saw.
struct Run {
    requests: usize,
    elapsed: Duration,
    /// Sorted.
    latencies: Vec<Duration>,
    wrong: usize,
}

impl Run {
    fn per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile(&self, q: f64) -> Duration {
        let i = ((self.latencies.len() as f64 * q) as usize).min(self.latencies.len() - 1);
        self.latencies[i]
    }
}

/// Starts a server in `mode` on a port of 127.0.0.1 the OS picks, sends it `requests`
/// requests from [`CONNECTIONS`] connections at once, checks every answer, and stops it.
async fn measure(service: &Arc<Service>, mode: Mode, requests: usize) -> Result<Run, BoxError> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let server = tokio::spawn(serve(listener, Arc::clone(service), mode));

    let start = Instant::now();
    let clients: Vec<_> = (0..CONNECTIONS.min(requests))
        .map(|c| tokio::spawn(client(address, c, requests)))
        .collect();
    let mut run = Run {
        requests,
        elapsed: Duration::ZERO,
        latencies: Vec::with_capacity(requests),
        wrong: 0,
    };
    for client in clients {
        let (latencies, wrong) = client.await??;
        run.latencies.extend(latencies);
        run.wrong += wrong;
    }
    run.elapsed = start.elapsed();
    server.abort();
    run.latencies.sort_unstable();
    Ok(run)
}

/// One client connection: requests `c`, `c + CONNECTIONS`, ... below `requests`, one at a
/// time. Returns the latency of each and how many answers were wrong.
async fn client(
    address: SocketAddr,
    c: usize,
    requests: usize,
) -> Result<(Vec<Duration>, usize), BoxError> {
    let mut socket = TcpStream::connect(address).await?;
    socket.set_nodelay(true)?;
    let mut request = vec![0u8; REQUEST_BYTES];
    let mut response = vec![0u8; RESPONSE_BYTES];
    let (mut latencies, mut wrong) = (Vec::new(), 0);
    for i in (c..requests).step_by(CONNECTIONS) {
        let (k, x) = request_values(i);
        request[..4].copy_from_slice(&k.to_le_bytes());
        for (bytes, v) in request[4..].chunks_exact_mut(4).zip(x) {
            bytes.copy_from_slice(&v.to_le_bytes());
        }
        let sent = Instant::now();
        socket.write_all(&request).await?;
        socket.read_exact(&mut response).await?;
        latencies.push(sent.elapsed());
        if let Err(why) = check(i, &response) {
            if wrong == 0 {
                eprintln!("client {c}: request {i}: {why}");
            }
            wrong += 1;
        }
    }
    Ok((latencies, wrong))
}

/// Checks the answer to request `i` against the CPU: `y[j] = (x[j] + w[j]) * k`, the same
/// two `f32` operations, so equal bit for bit.
fn check(i: usize, response: &[u8]) -> Result<(), String> {
    let status = u32::from_le_bytes(response[..4].try_into().expect("4 bytes"));
    if status != 0 {
        return Err(format!("the server answered status {status}"));
    }
    let (k, x) = request_values(i);
    for (j, (bytes, x)) in response[4..].chunks_exact(4).zip(x).enumerate() {
        let got = f32::from_le_bytes(bytes.try_into().expect("4 bytes"));
        let want = (x + weight(j)) * k;
        if got.to_bits() != want.to_bits() {
            return Err(format!("y[{j}] = {got}, the CPU says {want}"));
        }
    }
    Ok(())
}
