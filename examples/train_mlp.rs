//! Trains a small MLP (64 → 256 → 256 → 10, ReLU, softmax cross-entropy, plain SGD) on
//! synthetic data with every matmul going through the sgemm-bi engine, then checks the
//! library's promises on the result:
//!
//! - **run-to-run**: two trainings from one seed end with bit-identical weights;
//! - **batch invariance**: each row of a 64-row forward pass has the same bits as that row
//!   run alone (M = 1);
//! - **CPU = GPU**: on a GPU, the same training on the CPU engine ends with the same bits
//!   (the scalar tier's contract).
//!
//! Forward, weight gradient and input gradient are the descriptors of [`Linear`]; ReLU,
//! the loss, the bias gradient and the SGD update are plain host loops in a fixed order.
//! Weights and activations live on the host; on a GPU each GEMM copies its operands to the
//! device and its output back (slow, but it keeps the training code identical on both
//! devices).
//!
//! `cargo run --release --example train_mlp`; `SGEMM_BI_DEVICE=cpu` forces the CPU,
//! `SGEMM_BI_DEVICE=cuda` (or `cuda:N`) requires a GPU instead of falling back.

use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use sgemm_bi::{
    validate, DType, Device, Engine, Gemm, GemmPointers, Linear, OutputMode, Stream, Tier,
    WeightLayout,
};

type AnyResult<T> = Result<T, Box<dyn std::error::Error>>;

const SEED: u64 = 0x5eed_0fb1;
const IN: usize = 64;
const HIDDEN: usize = 256;
const CLASSES: usize = 10;
/// Rows per SGD step, split into micro-batches whose gradients accumulate in f32.
const BATCH: usize = 64;
const MICRO_BATCHES: usize = 2;
const STEPS: usize = 100;
const LOG_EVERY: usize = 10;
const LR: f32 = 0.1;
const TRAIN_ROWS: usize = 4096;
const TEST_ROWS: usize = 64;

// ---------------------------------------------------------------------------------------
// Where the GEMMs run.

/// An engine plus what it needs to take host slices. Both variants run the same
/// descriptors; only the data movement differs.
enum Backend {
    Cpu(Engine),
    Gpu {
        engine: Engine,
        stream: Arc<CudaStream>,
    },
}

impl Backend {
    fn cpu() -> AnyResult<Self> {
        Ok(Backend::Cpu(Engine::new(Device::Cpu)?))
    }

    fn gpu(ordinal: usize) -> AnyResult<Self> {
        let engine = Engine::new(Device::Cuda(ordinal))?;
        let stream = engine
            .cuda_context()
            .ok_or("a CUDA engine without a CUDA context")?
            .new_stream()?;
        Ok(Backend::Gpu { engine, stream })
    }

    fn engine(&self) -> &Engine {
        match self {
            Backend::Cpu(engine) | Backend::Gpu { engine, .. } => engine,
        }
    }

    fn describe(&self) -> String {
        let engine = self.engine();
        match engine.compute_capability() {
            Some((major, minor)) => {
                format!("{} (compute capability {major}.{minor})", engine.device())
            }
            None => engine.device().to_string(),
        }
    }

    /// Runs `g` (all operands f32) on host slices: `c` is read too when `g` accumulates.
    fn gemm(
        &self,
        g: &Gemm,
        a: &[f32],
        b: &[f32],
        bias: Option<&[f32]>,
        c: &mut [f32],
    ) -> AnyResult<()> {
        match self {
            Backend::Cpu(engine) => {
                engine.gemm_host(g, a.into(), b.into(), bias.map(Into::into), c.into())?
            }
            Backend::Gpu { engine, stream } => gemm_via_device(engine, stream, g, a, b, bias, c)?,
        }
        Ok(())
    }
}

/// Checks what `Engine::gemm_host` checks for the CPU: every operand is f32 and each slice
/// covers the span the descriptor gives it.
fn check_host_spans(
    g: &Gemm,
    a: &[f32],
    b: &[f32],
    bias: Option<&[f32]>,
    c: &[f32],
) -> AnyResult<()> {
    let ext = validate::check(g)?;
    let f32s = [
        Some(g.a.dtype),
        Some(g.b.dtype),
        g.bias,
        Some(g.c.mode.dtype()),
    ];
    if f32s.iter().flatten().any(|&d| d != DType::F32) {
        return Err(format!("this example passes f32 slices only: {g:?}").into());
    }
    if g.bias.is_some() != bias.is_some() {
        return Err("bias slice given iff the descriptor has a bias".into());
    }
    let spans = [
        ("A", a.len(), ext.a),
        ("B", b.len(), ext.b),
        ("bias", bias.map_or(0, <[f32]>::len), ext.bias),
        ("C", c.len(), ext.c),
    ];
    for (name, len, needed) in spans {
        if len < needed {
            return Err(format!("{name} has {len} elements, the call needs {needed}").into());
        }
    }
    Ok(())
}

/// Copies the operands to the device, runs `g` on `stream` and copies C back.
fn gemm_via_device(
    engine: &Engine,
    stream: &Arc<CudaStream>,
    g: &Gemm,
    a: &[f32],
    b: &[f32],
    bias: Option<&[f32]>,
    c: &mut [f32],
) -> AnyResult<()> {
    check_host_spans(g, a, b, bias, c)?;
    let a_dev = stream.clone_htod(a)?;
    let b_dev = stream.clone_htod(b)?;
    let bias_dev = bias.map(|s| stream.clone_htod(s)).transpose()?;
    // Copied in as well: AccumulateF32 reads C.
    let mut c_dev = stream.clone_htod(&*c)?;
    {
        // The guards order other streams' use of these buffers after this call; they drop
        // once the launch is enqueued.
        let (a_ptr, _a_guard) = a_dev.device_ptr(stream);
        let (b_ptr, _b_guard) = b_dev.device_ptr(stream);
        let bias_ptr = bias_dev.as_ref().map(|d| d.device_ptr(stream));
        let (c_ptr, _c_guard) = c_dev.device_ptr_mut(stream);
        let p = GemmPointers {
            a: a_ptr as *const c_void,
            b: b_ptr as *const c_void,
            bias: bias_ptr
                .as_ref()
                .map_or(std::ptr::null(), |(ptr, _)| *ptr as *const c_void),
            c: c_ptr as *mut c_void,
        };
        // SAFETY: (1) each device buffer is a copy of a host slice that
        // `check_host_spans` found long enough for its span, allocated in the engine's
        // context (the stream belongs to `engine.cuda_context()`), and the bias pointer is
        // null only when `g.bias` is None; (2) C is its own allocation; (3) the buffers are
        // dropped only after `stream.synchronize()` below (or, on an early return, cudarc
        // frees them in stream order), and `stream` is a live stream of that context.
        unsafe { engine.gemm(g, p, Stream(stream.cu_stream() as *mut c_void)) }?;
    }
    stream.memcpy_dtoh(&c_dev, c)?;
    stream.synchronize()?;
    Ok(())
}

/// Picks the device: `SGEMM_BI_DEVICE` = `cpu`, `cuda[:N]`, or unset/`auto` (GPU 0 when
/// an engine can be made there, else the CPU).
fn choose_backend() -> AnyResult<Backend> {
    let wanted = std::env::var("SGEMM_BI_DEVICE").unwrap_or_default();
    match wanted.as_str() {
        "cpu" => {
            println!("CPU forced by SGEMM_BI_DEVICE=cpu");
            Backend::cpu()
        }
        "" | "auto" => match Backend::gpu(0) {
            Ok(gpu) => Ok(gpu),
            Err(e) => {
                println!("falling back to the CPU: no GPU engine on cuda:0: {e}");
                Backend::cpu()
            }
        },
        cuda => {
            let ordinal = match cuda.strip_prefix("cuda") {
                Some("") => 0,
                Some(n) => n
                    .strip_prefix(':')
                    .and_then(|n| n.parse().ok())
                    .ok_or(format!(
                        "SGEMM_BI_DEVICE={cuda}: expected cpu, cuda or cuda:N"
                    ))?,
                None => {
                    return Err(
                        format!("SGEMM_BI_DEVICE={cuda}: expected cpu, cuda or cuda:N").into(),
                    )
                }
            };
            Backend::gpu(ordinal)
                .map_err(|e| format!("SGEMM_BI_DEVICE={cuda} but no GPU engine: {e}").into())
        }
    }
}

// ---------------------------------------------------------------------------------------
// Synthetic data.

/// SplitMix64: a tiny, fixed-sequence generator.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1), exactly representable (24 random bits).
    fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (2.0 / (1u64 << 24) as f32) - 1.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Rows of `IN` features and a class label each.
struct Dataset {
    x: Vec<f32>,
    labels: Vec<usize>,
}

impl Dataset {
    fn rows(&self) -> usize {
        self.labels.len()
    }

    fn row_range(&self, start: usize, count: usize) -> (&[f32], &[usize]) {
        (
            &self.x[start * IN..(start + count) * IN],
            &self.labels[start..start + count],
        )
    }
}

/// Inputs uniform in [-1, 1); labels from a fixed random teacher: argmax over classes of
/// `relu(x · T1) · T2` (host arithmetic in f64), so the task is learnable but not linear.
fn make_data(rng: &mut Rng, train_rows: usize, test_rows: usize) -> (Dataset, Dataset) {
    const TEACHER_HIDDEN: usize = 32;
    let t1: Vec<f64> = (0..IN * TEACHER_HIDDEN)
        .map(|_| rng.uniform() as f64)
        .collect();
    let t2: Vec<f64> = (0..TEACHER_HIDDEN * CLASSES)
        .map(|_| rng.uniform() as f64)
        .collect();
    let mut make = |rows: usize| {
        let x: Vec<f32> = (0..rows * IN).map(|_| rng.uniform()).collect();
        let labels = x
            .chunks_exact(IN)
            .map(|row| {
                let hidden: Vec<f64> = (0..TEACHER_HIDDEN)
                    .map(|h| {
                        let s: f64 = (0..IN)
                            .map(|i| row[i] as f64 * t1[i * TEACHER_HIDDEN + h])
                            .sum();
                        s.max(0.0)
                    })
                    .collect();
                let score = |c: usize| -> f64 {
                    (0..TEACHER_HIDDEN)
                        .map(|h| hidden[h] * t2[h * CLASSES + c])
                        .sum()
                };
                (1..CLASSES).fold(0, |best, c| if score(c) > score(best) { c } else { best })
            })
            .collect();
        Dataset { x, labels }
    };
    let train = make(train_rows);
    let test = make(test_rows);
    (train, test)
}

// ---------------------------------------------------------------------------------------
// The model.

/// A linear layer with its parameters and their f32 gradients.
#[derive(Clone)]
struct Layer {
    k: usize,
    n: usize,
    layout: WeightLayout,
    /// `[K, N]` for `KN`, `[N, K]` for `NK` (torch's layout).
    w: Vec<f32>,
    bias: Vec<f32>,
    dw: Vec<f32>,
    dbias: Vec<f32>,
}

impl Layer {
    /// Uniform in ±sqrt(6 / fan_in) (He init for ReLU), bias zero.
    fn new(rng: &mut Rng, k: usize, n: usize, layout: WeightLayout) -> Self {
        let scale = (6.0 / k as f32).sqrt();
        Layer {
            k,
            n,
            layout,
            w: (0..k * n).map(|_| rng.uniform() * scale).collect(),
            bias: vec![0.0; n],
            dw: vec![0.0; k * n],
            dbias: vec![0.0; n],
        }
    }

    fn linear(&self, m: usize) -> Linear {
        Linear {
            m,
            k: self.k,
            n: self.n,
            dtype: DType::F32,
            weight: self.layout,
            tier: Tier::Scalar,
        }
    }

    /// `y[m, N] = x[m, K] · W + bias`.
    fn forward(&self, be: &Backend, m: usize, x: &[f32]) -> AnyResult<Vec<f32>> {
        let mut y = vec![0.0; m * self.n];
        let g = self.linear(m).forward(Some(DType::F32));
        be.gemm(&g, x, &self.w, Some(&self.bias), &mut y)?;
        Ok(y)
    }

    /// Adds this micro-batch's gradients to `dw` and `dbias`; returns `dx` if asked.
    fn backward(
        &mut self,
        be: &Backend,
        m: usize,
        x: &[f32],
        dy: &[f32],
        want_dx: bool,
    ) -> AnyResult<Option<Vec<f32>>> {
        let l = self.linear(m);
        // dW += Xᵀ·dY. Which of X and dY is the GEMM's A follows the weight layout (the
        // same choice `Engine::backward_dw` makes for device pointers).
        let (a, b) = match self.layout {
            WeightLayout::KN => (x, dy),
            WeightLayout::NK => (dy, x),
        };
        be.gemm(
            &l.backward_dw(OutputMode::AccumulateF32),
            a,
            b,
            None,
            &mut self.dw,
        )?;
        // dbias += column sums of dY, rows ascending, one f32 add per micro-batch (like
        // AccumulateF32).
        for (j, db) in self.dbias.iter_mut().enumerate() {
            let mut sum = 0.0f32;
            for row in dy.chunks_exact(self.n) {
                sum += row[j];
            }
            *db += sum;
        }
        if !want_dx {
            return Ok(None);
        }
        let mut dx = vec![0.0; m * self.k];
        be.gemm(&l.backward_dx(), dy, &self.w, None, &mut dx)?;
        Ok(Some(dx))
    }

    /// `p -= lr · dp`, then zeroes the gradients for the next step.
    fn sgd_step(&mut self, lr: f32) {
        for (p, d) in self.w.iter_mut().zip(&mut self.dw) {
            *p -= lr * *d;
            *d = 0.0;
        }
        for (p, d) in self.bias.iter_mut().zip(&mut self.dbias) {
            *p -= lr * *d;
            *d = 0.0;
        }
    }
}

fn relu(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| if x > 0.0 { x } else { 0.0 }).collect()
}

/// `dy · [pre > 0]`, in place.
fn relu_backward(pre: &[f32], dy: &mut [f32]) {
    for (d, &p) in dy.iter_mut().zip(pre) {
        if p <= 0.0 {
            *d = 0.0;
        }
    }
}

/// Mean softmax cross-entropy over `batch` rows (of which these `logits` are some), and
/// its gradient with respect to the logits.
fn softmax_xent(logits: &[f32], labels: &[usize], batch: usize) -> (f64, Vec<f32>) {
    let mut loss = 0.0f64;
    let mut grad = vec![0.0f32; logits.len()];
    for ((row, g), &label) in logits
        .chunks_exact(CLASSES)
        .zip(grad.chunks_exact_mut(CLASSES))
        .zip(labels)
    {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f32;
        for (gi, &z) in g.iter_mut().zip(row) {
            *gi = (z - max).exp();
            sum += *gi;
        }
        loss += (sum.ln() + max - row[label]) as f64;
        for (c, gi) in g.iter_mut().enumerate() {
            let target = if c == label { 1.0 } else { 0.0 };
            *gi = (*gi / sum - target) / batch as f32;
        }
    }
    (loss / batch as f64, grad)
}

#[derive(Clone)]
struct Mlp {
    layers: [Layer; 3],
}

impl Mlp {
    /// Two torch-layout (`NK`) layers around one `KN` layer, so both layouts train.
    fn new(rng: &mut Rng) -> Self {
        Mlp {
            layers: [
                Layer::new(rng, IN, HIDDEN, WeightLayout::NK),
                Layer::new(rng, HIDDEN, HIDDEN, WeightLayout::KN),
                Layer::new(rng, HIDDEN, CLASSES, WeightLayout::NK),
            ],
        }
    }

    /// Logits `[m, CLASSES]`.
    fn forward(&self, be: &Backend, m: usize, x: &[f32]) -> AnyResult<Vec<f32>> {
        let [l1, l2, l3] = &self.layers;
        let h1 = relu(&l1.forward(be, m, x)?);
        let h2 = relu(&l2.forward(be, m, &h1)?);
        l3.forward(be, m, &h2)
    }

    /// Forward and backward of one micro-batch; gradients accumulate. Returns its share of
    /// the step's mean loss.
    fn accumulate_gradients(
        &mut self,
        be: &Backend,
        x: &[f32],
        labels: &[usize],
    ) -> AnyResult<f64> {
        let m = labels.len();
        let [l1, l2, l3] = &mut self.layers;
        let z1 = l1.forward(be, m, x)?;
        let h1 = relu(&z1);
        let z2 = l2.forward(be, m, &h1)?;
        let h2 = relu(&z2);
        let logits = l3.forward(be, m, &h2)?;
        let (loss, dlogits) = softmax_xent(&logits, labels, BATCH);

        let mut dh2 = l3.backward(be, m, &h2, &dlogits, true)?.expect("dx asked");
        relu_backward(&z2, &mut dh2);
        let mut dh1 = l2.backward(be, m, &h1, &dh2, true)?.expect("dx asked");
        relu_backward(&z1, &mut dh1);
        l1.backward(be, m, x, &dh1, false)?;
        Ok(loss)
    }

    fn params(&self) -> impl Iterator<Item = &f32> {
        self.layers.iter().flat_map(|l| l.w.iter().chain(&l.bias))
    }

    /// 64-bit FNV-1a over the bits of every parameter, in layer order.
    fn checksum(&self) -> u64 {
        self.params()
            .flat_map(|p| p.to_bits().to_le_bytes())
            .fold(0xcbf2_9ce4_8422_2325, |h, byte| {
                (h ^ byte as u64).wrapping_mul(0x0000_0100_0000_01b3)
            })
    }
}

/// Errors out at the first element whose bits differ.
fn same_bits<'a>(
    what: &str,
    a: impl IntoIterator<Item = &'a f32>,
    b: impl IntoIterator<Item = &'a f32>,
) -> AnyResult<usize> {
    let mut count = 0;
    let mut b = b.into_iter();
    for (i, x) in a.into_iter().enumerate() {
        let y = b.next().ok_or(format!("{what}: lengths differ"))?;
        if x.to_bits() != y.to_bits() {
            return Err(format!("{what}: element {i} differs: {x:e} vs {y:e}").into());
        }
        count += 1;
    }
    if b.next().is_some() {
        return Err(format!("{what}: lengths differ").into());
    }
    Ok(count)
}

// ---------------------------------------------------------------------------------------
// Training and the checks.

struct Trained {
    model: Mlp,
    losses: Vec<f64>,
    elapsed: Duration,
}

/// Multiply-adds of one training step: forward and dW for three layers, dX for two.
fn fmas_per_step() -> usize {
    let fwd = BATCH * (IN * HIDDEN + HIDDEN * HIDDEN + HIDDEN * CLASSES);
    let dx = BATCH * (HIDDEN * HIDDEN + HIDDEN * CLASSES);
    2 * fwd + dx
}

fn train(be: &Backend, data: &Dataset, init: &Mlp, log: bool) -> AnyResult<Trained> {
    let mut model = init.clone();
    // A fixed permutation of the training rows; step s takes the next BATCH of them.
    let mut order: Vec<usize> = (0..data.rows()).collect();
    let mut rng = Rng(SEED ^ 0x0bad_5eed);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let micro = BATCH / MICRO_BATCHES;
    let mut losses = Vec::with_capacity(STEPS);
    let start = Instant::now();
    for step in 0..STEPS {
        let mut loss = 0.0;
        for mb in 0..MICRO_BATCHES {
            let first = (step * BATCH + mb * micro) % data.rows();
            let rows = &order[first..first + micro];
            let x: Vec<f32> = rows
                .iter()
                .flat_map(|&r| data.row_range(r, 1).0)
                .copied()
                .collect();
            let labels: Vec<usize> = rows.iter().map(|&r| data.labels[r]).collect();
            loss += model.accumulate_gradients(be, &x, &labels)?;
        }
        for layer in &mut model.layers {
            layer.sgd_step(LR);
        }
        if log && (step % LOG_EVERY == 0 || step + 1 == STEPS) {
            println!("  step {step:4}  loss {loss:.5}");
        }
        losses.push(loss);
    }
    Ok(Trained {
        model,
        losses,
        elapsed: start.elapsed(),
    })
}

fn report_time(label: &str, t: &Trained) {
    let secs = t.elapsed.as_secs_f64();
    println!(
        "{label}: {secs:.2} s for {STEPS} steps ({:.1} ms/step, {:.2} GFLOP/s), checksum {:016x}",
        secs * 1e3 / STEPS as f64,
        (2 * fmas_per_step() * STEPS) as f64 / secs / 1e9,
        t.model.checksum()
    );
}

fn accuracy(logits: &[f32], labels: &[usize]) -> f64 {
    let hits = logits
        .chunks_exact(CLASSES)
        .zip(labels)
        .filter(|(row, &label)| {
            let best = (1..CLASSES).fold(0, |b, c| if row[c] > row[b] { c } else { b });
            best == label
        })
        .count();
    hits as f64 / labels.len() as f64
}

/// Row i of a `TEST_ROWS`-row forward pass against the same row run alone.
fn check_batch_invariance(be: &Backend, model: &Mlp, test: &Dataset) -> AnyResult<f64> {
    let (x, labels) = test.row_range(0, TEST_ROWS);
    let batched = model.forward(be, TEST_ROWS, x)?;
    for (i, row) in x.chunks_exact(IN).enumerate() {
        let alone = model.forward(be, 1, row)?;
        same_bits(
            &format!("logits of row {i}, batch of {TEST_ROWS} vs batch of 1"),
            &batched[i * CLASSES..(i + 1) * CLASSES],
            &alone,
        )?;
    }
    Ok(accuracy(&batched, labels))
}

fn main() -> std::process::ExitCode {
    match run(Instant::now()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(start: Instant) -> AnyResult<()> {
    let be = choose_backend()?;
    println!("device: {}", be.describe());
    // The first call loads its kernel: on a fresh machine this is what a user waits for.
    let probe = Gemm::dense(1, HIDDEN, IN, DType::F32);
    let mut out = vec![0.0f32; HIDDEN];
    be.gemm(&probe, &[0.5; IN], &vec![0.25; IN * HIDDEN], None, &mut out)?;
    println!(
        "first GEMM done {:.1} ms after start",
        start.elapsed().as_secs_f64() * 1e3
    );
    for image in be.engine().loaded_images() {
        println!("  {image}");
    }
    println!(
        "model: {IN} -> {HIDDEN} -> {HIDDEN} -> {CLASSES} (weights NK, KN, NK), f32, scalar tier; \
         {STEPS} SGD steps of {BATCH} rows ({MICRO_BATCHES} micro-batches), lr {LR}"
    );

    let mut rng = Rng(SEED);
    let (train_set, test_set) = make_data(&mut rng, TRAIN_ROWS, TEST_ROWS);
    let init = Mlp::new(&mut rng);

    println!("run 1 on {}:", be.engine().device());
    let run1 = train(&be, &train_set, &init, true)?;
    report_time("run 1", &run1);
    let run2 = train(&be, &train_set, &init, false)?;
    report_time("run 2", &run2);
    let loss_bits = |t: &Trained| t.losses.iter().map(|l| l.to_bits()).collect::<Vec<_>>();
    if loss_bits(&run1) != loss_bits(&run2) {
        return Err("losses differ between run 1 and run 2".into());
    }
    let n = same_bits(
        "weights, run 1 vs run 2",
        run1.model.params(),
        run2.model.params(),
    )?;
    println!("run-to-run: all {n} parameters bit-identical");

    if let Backend::Gpu { .. } = be {
        let cpu = Backend::cpu()?;
        let run_cpu = train(&cpu, &train_set, &init, false)?;
        report_time("cpu run", &run_cpu);
        same_bits(
            "weights, GPU vs CPU",
            run1.model.params(),
            run_cpu.model.params(),
        )?;
        println!(
            "GPU = CPU: all {n} parameters bit-identical (checksum {:016x})",
            run_cpu.model.checksum()
        );
    }

    let acc = check_batch_invariance(&be, &run1.model, &test_set)?;
    println!(
        "batch invariance: the logits of each of {TEST_ROWS} rows bit-identical at M = \
         {TEST_ROWS} and M = 1 (held-out accuracy {:.1}%)",
        acc * 100.0
    );
    println!(
        "final weights checksum (FNV-1a 64): {:016x}",
        run1.model.checksum()
    );
    Ok(())
}
