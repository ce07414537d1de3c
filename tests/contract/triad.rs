//! The training triad of a linear layer (`sgemm_bi::Linear`): forward, dW (overwritten or
//! accumulated in f32) and dX, through the descriptors `Linear` builds and through the
//! raw-pointer entry points (`Engine::forward`, `backward_dw`, `backward_dx`), for both
//! weight layouts. On the scalar tier the bits are the math written out by hand:
//!
//! ```text
//! forward  Y[i,j]  = round(bias_j + chain_k  X[i,k]·W[k,j])   k ascending
//! dW       dW[k,j] = round(         chain_m  X[m,k]·dY[m,j])  m ascending (or += in f32)
//! dX       dX[i,k] = round(         chain_j  dY[i,j]·W[k,j])  j ascending
//! ```
//!
//! where a chain is f32 fmas from +0.0 and `W[k,j]` is `w[k·N + j]` for `WeightLayout::KN`
//! and `w[j·K + k]` for `WeightLayout::NK` (dW is stored like W). On the tensor-core tier
//! the result is within the output dtype's bound of the exact one (relative Frobenius
//! error), and its bits are the CPU's model's on sm_90 and the mma.sync path's for the
//! planner's choice and the Hopper path. On every target the engines named by
//! [`Runner::expected`] (the CPU for the scalar tier on a GPU) give the same bits, and
//! nothing past an output is written.

use super::common::{assert_same_bits, Buf, Rng, GUARD, NARROW};
use super::gpu_support::{DeviceBuf, RawStream};
use super::target::{Offsets, Runner, Target};
use sgemm_bi::{DType, Device, Engine, Gemm, Linear, OutputMode, Stream, Tier, WeightLayout};

/// One layer's tensors: X `[M,K]`, W in both layouts (the same values), a bias `[N]` and an
/// upstream gradient dY `[M,N]`, each with a guard after it.
struct Layer {
    l: Linear,
    x: Buf,
    w_kn: Buf,
    w_nk: Buf,
    bias: Buf,
    dy: Buf,
}

impl Layer {
    fn new(t: Target, (m, k, n): (usize, usize, usize), dtype: DType, bias: DType) -> Layer {
        let mut rng = Rng::new((m * 1_000_003 + k * 1009 + n) as u64 ^ dtype.size() as u64);
        Layer::with_rng(t, (m, k, n), dtype, bias, &mut rng)
    }

    fn with_rng(
        t: Target,
        (m, k, n): (usize, usize, usize),
        dtype: DType,
        bias: DType,
        rng: &mut Rng,
    ) -> Layer {
        let x = Buf::random(dtype, m * k + GUARD, rng, NARROW);
        let w_kn = Buf::random(dtype, k * n + GUARD, rng, NARROW);
        let mut w_nk = Buf::filled(dtype, k * n + GUARD, 0);
        for kk in 0..k {
            for j in 0..n {
                w_nk.set_bits(j * k + kk, w_kn.bits(kk * n + j));
            }
        }
        Layer {
            l: Linear {
                m,
                k,
                n,
                dtype,
                weight: WeightLayout::KN,
                tier: t.tier(),
            },
            x,
            w_kn,
            w_nk,
            bias: Buf::random(bias, n + GUARD, rng, NARROW),
            dy: Buf::random(dtype, m * n + GUARD, rng, NARROW),
        }
    }

    fn linear(&self, weight: WeightLayout) -> Linear {
        Linear { weight, ..self.l }
    }

    fn w(&self, weight: WeightLayout) -> &Buf {
        match weight {
            WeightLayout::KN => &self.w_kn,
            WeightLayout::NK => &self.w_nk,
        }
    }

    /// `W[k, j]`, read from the KN copy.
    fn w_at(&self, k: usize, j: usize) -> f32 {
        self.w_kn.get(k * self.l.n + j)
    }

    /// Index of `dW[k, j]` in W's storage.
    fn dw_index(&self, weight: WeightLayout, k: usize, j: usize) -> usize {
        match weight {
            WeightLayout::KN => k * self.l.n + j,
            WeightLayout::NK => j * self.l.k + k,
        }
    }
}

/// What an output must hold: the scalar tier's bits (guard included) and the exact values
/// of its elements.
struct Want {
    bits: Buf,
    exact: Vec<f64>,
}

/// The f32 fma chain from +0.0 and the exact sum of the same terms.
fn chain(len: usize, term: impl Fn(usize) -> (f32, f32)) -> (f32, f64) {
    let (mut acc, mut exact) = (0.0f32, 0.0f64);
    for t in 0..len {
        let (x, y) = term(t);
        acc = x.mul_add(y, acc);
        exact += x as f64 * y as f64;
    }
    (acc, exact)
}

fn forward_ref(s: &Layer, with_bias: bool) -> Want {
    let Linear { m, k, n, dtype, .. } = s.l;
    let mut bits = Buf::sentinel(dtype, m * n + GUARD);
    let mut exact = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let (mut v, mut e) = chain(k, |kk| (s.x.get(i * k + kk), s.w_at(kk, j)));
            if with_bias {
                v += s.bias.get(j);
                e += s.bias.get(j) as f64;
            }
            bits.store(i * n + j, v);
            exact[i * n + j] = e;
        }
    }
    Want { bits, exact }
}

/// dW chains (before the store) and their exact values, indexed `[k][j]`.
fn dw_chains(s: &Layer, x: &Buf, dy: &Buf) -> Vec<Vec<(f32, f64)>> {
    let Linear { m, k, n, .. } = s.l;
    (0..k)
        .map(|kk| {
            (0..n)
                .map(|j| chain(m, |r| (x.get(r * k + kk), dy.get(r * n + j))))
                .collect()
        })
        .collect()
}

fn dw_ref(s: &Layer, weight: WeightLayout, mode: OutputMode, dw0: &Buf) -> Want {
    let chains = dw_chains(s, &s.x, &s.dy);
    let mut bits = dw0.clone();
    let mut exact = vec![0.0; s.l.k * s.l.n];
    for (kk, row) in chains.iter().enumerate() {
        for (j, &(v, e)) in row.iter().enumerate() {
            let idx = s.dw_index(weight, kk, j);
            match mode {
                OutputMode::Overwrite(_) => {
                    bits.store(idx, v);
                    exact[idx] = e;
                }
                OutputMode::AccumulateF32 => {
                    let old = dw0.get(idx);
                    bits.store(idx, old + v);
                    exact[idx] = old as f64 + e;
                }
            }
        }
    }
    Want { bits, exact }
}

fn dx_ref(s: &Layer) -> Want {
    let Linear { m, k, n, dtype, .. } = s.l;
    let mut bits = Buf::sentinel(dtype, m * k + GUARD);
    let mut exact = vec![0.0; m * k];
    for i in 0..m {
        for kk in 0..k {
            let (v, e) = chain(n, |j| (s.dy.get(i * n + j), s.w_at(kk, j)));
            bits.store(i * k + kk, v);
            exact[i * k + kk] = e;
        }
    }
    Want { bits, exact }
}

/// A target's runner with the engines whose bits it must give.
struct Triad {
    run: Runner,
    /// The reference target's engine and, on sm_90's tensor-core tier, the CPU's model.
    peers: Vec<(Engine, &'static str)>,
}

impl Triad {
    fn new(t: Target) -> Option<Triad> {
        let run = Runner::new(t)?;
        let mut peers = Vec::new();
        if let Some(r) = t.reference() {
            peers.push((
                r.engine().expect("the reference runs"),
                "the reference target",
            ));
        }
        if let Some(cpu) = run.cpu_model() {
            peers.push((cpu, "the CPU's model"));
        }
        Some(Triad { run, peers })
    }

    fn target(&self) -> Target {
        self.run.target
    }

    /// Whether the target takes `g` (the Hopper path declines calls its copy engine cannot
    /// describe).
    fn takes(&self, g: &Gemm) -> bool {
        self.run.takes(g, Offsets::default())
    }

    /// Runs `f` on the target's engine and each peer's, checks the bits agree and, by tier,
    /// that they are the math's (scalar) or within the bound of the exact values (tensor
    /// cores; the guard untouched). Returns the target's result.
    fn check(&self, f: impl Fn(&Engine) -> Buf, want: &Want, what: &str) -> Buf {
        let t = self.target();
        let got = f(&self.run.engine);
        for (engine, name) in &self.peers {
            assert_same_bits(&got, &f(engine), &format!("{t:?} {what}: vs {name}"));
        }
        match t.tier() {
            Tier::Scalar => assert_same_bits(&got, &want.bits, &format!("{t:?} {what}")),
            _ => within_bound(&got, want, &format!("{t:?} {what}")),
        }
        got
    }

    fn forward(&self, engine: &Engine, s: &Layer, weight: WeightLayout, with_bias: bool) -> Buf {
        let l = s.linear(weight);
        let g = l.forward(with_bias.then(|| s.bias.dtype()));
        let mut y = Buf::sentinel(l.dtype, l.m * l.n + GUARD);
        let bias = with_bias.then_some(&s.bias);
        let inputs = (&s.x, s.w(weight), bias);
        self.run
            .run_on(engine, &g, inputs, &mut y, Offsets::default());
        y
    }

    /// dW with W's layout: A and B are X and dY in the order the descriptor's comment gives.
    fn dw(
        &self,
        engine: &Engine,
        s: &Layer,
        weight: WeightLayout,
        mode: OutputMode,
        (x, dy): (&Buf, &Buf),
        dw: &mut Buf,
    ) {
        let g = s.linear(weight).backward_dw(mode);
        let (a, b) = match weight {
            WeightLayout::KN => (x, dy), // dW[K,N] = Xᵀ · dY
            WeightLayout::NK => (dy, x), // dW[N,K] = dYᵀ · X
        };
        self.run
            .run_on(engine, &g, (a, b, None), dw, Offsets::default());
    }

    fn dx(&self, engine: &Engine, s: &Layer, weight: WeightLayout) -> Buf {
        let l = s.linear(weight);
        let mut dx = Buf::sentinel(l.dtype, l.m * l.k + GUARD);
        let inputs = (&s.dy, s.w(weight), None);
        self.run.run_on(
            engine,
            &l.backward_dx(),
            inputs,
            &mut dx,
            Offsets::default(),
        );
        dx
    }
}

/// The relative Frobenius error of `got` against the exact values within the output
/// dtype's bound, and the guard after it untouched.
fn within_bound(got: &Buf, want: &Want, what: &str) {
    let (mut err, mut norm) = (0.0f64, 0.0f64);
    for (i, &w) in want.exact.iter().enumerate() {
        err += (got.get(i) as f64 - w).powi(2);
        norm += w * w;
    }
    let bound = match got.dtype() {
        DType::BF16 => 1e-2,
        DType::F16 => 2e-3,
        DType::F32 => 1e-4,
    };
    if norm > 0.0 {
        let rel = (err / norm).sqrt();
        assert!(rel <= bound, "{what}: relative error {rel:.3e} > {bound:e}");
    } else {
        assert!(err == 0.0, "{what}: {err} where the exact result is zero");
    }
    for i in want.exact.len()..got.len() {
        assert_eq!(got.bits(i), want.bits.bits(i), "{what}: guard element {i}");
    }
}

const WEIGHTS: [WeightLayout; 2] = [WeightLayout::KN, WeightLayout::NK];

/// Layer shapes (M, K, N): small ones with tails on every target, and on a GPU a large one
/// (N = 129 on the scalar tier, 136 on the tensor cores), plus one whose X, W and dY rows
/// are whole 16-byte units (which the Hopper path takes).
fn shapes(t: Target) -> Vec<(usize, usize, usize)> {
    let mut v = vec![(23, 37, 19), (130, 65, 33), (1, 129, 2)];
    if t.is_cuda() {
        v.push(if t.tier() == Tier::Scalar {
            (301, 257, 129)
        } else {
            (301, 257, 136)
        });
        v.push((301, 256, 136));
    }
    v
}

/// Y = X·W (+ bias), bias in f32 and in the input dtype, both weight layouts.
pub fn forward_matches_the_math(t: Target) {
    let Some(tri) = Triad::new(t) else { return };
    let mut ran = 0;
    for &dtype in t.dtypes() {
        for mnk in shapes(t) {
            for bias in [DType::F32, dtype] {
                let s = Layer::new(t, mnk, dtype, bias);
                for weight in WEIGHTS {
                    for with_bias in [false, true] {
                        let g = s.linear(weight).forward(with_bias.then_some(bias));
                        if !tri.takes(&g) {
                            continue;
                        }
                        tri.check(
                            |e| tri.forward(e, &s, weight, with_bias),
                            &forward_ref(&s, with_bias),
                            &format!("forward {weight:?} {dtype} {mnk:?} bias {with_bias}"),
                        );
                        ran += 1;
                    }
                }
            }
        }
    }
    assert!(ran > 0, "{t:?}: no call ran");
}

/// dW = Xᵀ·dY overwritten in the input dtype and in f32, and accumulated in f32.
pub fn backward_dw_matches_the_math(t: Target) {
    let Some(tri) = Triad::new(t) else { return };
    let mut rng = Rng::new(102);
    let mut ran = 0;
    for &dtype in t.dtypes() {
        for (m, k, n) in shapes(t) {
            let s = Layer::new(t, (m, k, n), dtype, dtype);
            for weight in WEIGHTS {
                for mode in [
                    OutputMode::Overwrite(dtype),
                    OutputMode::Overwrite(DType::F32),
                    OutputMode::AccumulateF32,
                ] {
                    if !tri.takes(&s.linear(weight).backward_dw(mode)) {
                        continue;
                    }
                    let dw0 = match mode {
                        OutputMode::AccumulateF32 => {
                            Buf::random(DType::F32, k * n + GUARD, &mut rng, NARROW)
                        }
                        OutputMode::Overwrite(d) => Buf::sentinel(d, k * n + GUARD),
                    };
                    tri.check(
                        |e| {
                            let mut dw = dw0.clone();
                            tri.dw(e, &s, weight, mode, (&s.x, &s.dy), &mut dw);
                            dw
                        },
                        &dw_ref(&s, weight, mode, &dw0),
                        &format!("dW {weight:?} {dtype} {mode:?} {m}×{k}×{n}"),
                    );
                    ran += 1;
                }
            }
        }
    }
    assert!(ran > 0, "{t:?}: no call ran");
}

/// dX = dY·Wᵀ, both weight layouts.
pub fn backward_dx_matches_the_math(t: Target) {
    let Some(tri) = Triad::new(t) else { return };
    let mut ran = 0;
    for &dtype in t.dtypes() {
        for mnk in shapes(t) {
            let s = Layer::new(t, mnk, dtype, dtype);
            for weight in WEIGHTS {
                if !tri.takes(&s.linear(weight).backward_dx()) {
                    continue;
                }
                tri.check(
                    |e| tri.dx(e, &s, weight),
                    &dx_ref(&s),
                    &format!("dX {weight:?} {dtype} {mnk:?}"),
                );
                ran += 1;
            }
        }
    }
    assert!(ran > 0, "{t:?}: no call ran");
}

/// Gradient accumulation over two micro-batches. On the scalar tier `dW = (0 + chain₁) +
/// chain₂` in f32, one add per micro-batch and no rounding to 16 bits in between; on the
/// tensor cores within the bound of the exact sum (and the peers' bits).
pub fn dw_accumulates_micro_batches_in_f32(t: Target) {
    let Some(tri) = Triad::new(t) else { return };
    let mut rng = Rng::new(104);
    let (m, k, n) = if t == Target::CudaHopper {
        (48, 32, 16)
    } else {
        (48, 31, 17)
    };
    for &dtype in t.dtypes() {
        let s = Layer::with_rng(t, (m, k, n), dtype, dtype, &mut rng);
        let x2 = Buf::random(dtype, m * k + GUARD, &mut rng, NARROW);
        let dy2 = Buf::random(dtype, m * n + GUARD, &mut rng, NARROW);
        let c1 = dw_chains(&s, &s.x, &s.dy);
        let c2 = dw_chains(&s, &x2, &dy2);
        for weight in WEIGHTS {
            let mode = OutputMode::AccumulateF32;
            assert!(tri.takes(&s.linear(weight).backward_dw(mode)), "{t:?}");
            let mut want = Want {
                bits: Buf::filled(DType::F32, k * n + GUARD, 0),
                exact: vec![0.0; k * n],
            };
            for kk in 0..k {
                for j in 0..n {
                    let i = s.dw_index(weight, kk, j);
                    let v = (0.0f32 + c1[kk][j].0) + c2[kk][j].0;
                    want.bits.set_bits(i, v.to_bits());
                    want.exact[i] = c1[kk][j].1 + c2[kk][j].1;
                }
            }
            tri.check(
                |e| {
                    let mut dw = Buf::filled(DType::F32, k * n + GUARD, 0);
                    tri.dw(e, &s, weight, mode, (&s.x, &s.dy), &mut dw);
                    tri.dw(e, &s, weight, mode, (&x2, &dy2), &mut dw);
                    dw
                },
                &want,
                &format!("{dtype} {weight:?}: two micro-batches"),
            );
        }
    }
}

/// W stored KN and the same W stored NK give the same bits for Y and dX, and dW with the
/// same bits transposed.
pub fn kn_and_nk_weights_give_identical_bits(t: Target) {
    let Some(tri) = Triad::new(t) else { return };
    let e = &tri.run.engine;
    let (m, k, n) = if t == Target::CudaHopper {
        (70, 48, 40)
    } else {
        (70, 45, 39)
    };
    for &dtype in t.dtypes() {
        let s = Layer::new(t, (m, k, n), dtype, DType::F32);
        for l in [s.linear(WeightLayout::KN), s.linear(WeightLayout::NK)] {
            assert!(tri.takes(&l.forward(Some(DType::F32))), "{t:?} {l:?}");
            assert!(tri.takes(&l.backward_dx()), "{t:?} {l:?}");
        }
        assert_same_bits(
            &tri.forward(e, &s, WeightLayout::KN, true),
            &tri.forward(e, &s, WeightLayout::NK, true),
            &format!("{t:?} {dtype} Y: KN vs NK"),
        );
        assert_same_bits(
            &tri.dx(e, &s, WeightLayout::KN),
            &tri.dx(e, &s, WeightLayout::NK),
            &format!("{t:?} {dtype} dX: KN vs NK"),
        );
        for mode in [OutputMode::Overwrite(dtype), OutputMode::AccumulateF32] {
            let mut kn = Buf::filled(mode.dtype(), k * n + GUARD, 0);
            let mut nk = Buf::filled(mode.dtype(), k * n + GUARD, 0);
            tri.dw(e, &s, WeightLayout::KN, mode, (&s.x, &s.dy), &mut kn);
            tri.dw(e, &s, WeightLayout::NK, mode, (&s.x, &s.dy), &mut nk);
            for kk in 0..k {
                for j in 0..n {
                    assert_eq!(
                        kn.bits(kk * n + j),
                        nk.bits(j * k + kk),
                        "{t:?} {dtype} {mode:?}: dW[{kk},{j}] KN vs NK"
                    );
                }
            }
        }
    }
}

/// `Engine::forward`, `backward_dw` and `backward_dx` on raw pointers (host memory on the
/// CPU, device memory and a stream on a GPU) on `engine`: Y, dW accumulated onto `dw0`, dX.
fn raw_triad(engine: &Engine, s: &Layer, weight: WeightLayout, dw0: &Buf) -> [Buf; 3] {
    let l = s.linear(weight);
    let mut y = Buf::sentinel(l.dtype, l.m * l.n + GUARD);
    let mut dw = dw0.clone();
    let mut dx = Buf::sentinel(l.dtype, l.m * l.k + GUARD);
    let acc = OutputMode::AccumulateF32;
    if engine.device() == Device::Cpu {
        // SAFETY: every buffer is a live host allocation of the dtype and at least the size
        // the layer says (X [M,K], W [K·N], bias [N], Y and dY [M,N], dW [K·N], dX [M,K]);
        // outputs are distinct from inputs; nothing else touches them.
        unsafe {
            let bias = Some((s.bias.as_ptr(), DType::F32));
            let (x, w) = (s.x.as_ptr(), s.w(weight).as_ptr());
            engine
                .forward(&l, x, w, bias, y.as_mut_ptr(), Stream::DEFAULT)
                .unwrap();
            engine
                .backward_dw(&l, s.dy.as_ptr(), x, dw.as_mut_ptr(), acc, Stream::DEFAULT)
                .unwrap();
            engine
                .backward_dx(&l, s.dy.as_ptr(), w, dx.as_mut_ptr(), Stream::DEFAULT)
                .unwrap();
        }
        return [y, dw, dx];
    }
    let up = |b: &Buf| DeviceBuf::upload_bytes(b.bytes());
    let (x, w, bias, d_dy) = (up(&s.x), up(s.w(weight)), up(&s.bias), up(&s.dy));
    let (d_y, d_dw, d_dx) = (up(&y), up(&dw), up(&dx));
    let stream = RawStream::new();
    // SAFETY: device buffers holding the host buffers whole (the sizes above); outputs are
    // distinct from inputs; all live until the stream is synchronized.
    unsafe {
        let h = stream.handle();
        let bias = Some((bias.at(0) as *const _, DType::F32));
        engine
            .forward(&l, x.at(0), w.at(0), bias, d_y.at(0), h)
            .unwrap();
        engine
            .backward_dw(&l, d_dy.at(0), x.at(0), d_dw.at(0), acc, h)
            .unwrap();
        engine
            .backward_dx(&l, d_dy.at(0), w.at(0), d_dx.at(0), h)
            .unwrap();
    }
    stream.sync();
    d_y.download_bytes(y.bytes_mut());
    d_dw.download_bytes(dw.bytes_mut());
    d_dx.download_bytes(dx.bytes_mut());
    [y, dw, dx]
}

/// The raw-pointer entry points wire the operands as the descriptors say: their bits are
/// the descriptors' calls' on the same engine (and the math's on the scalar tier).
pub fn raw_pointer_entry_points_match_the_descriptors(t: Target) {
    let Some(tri) = Triad::new(t) else { return };
    let mut rng = Rng::new(106);
    let e = &tri.run.engine;
    let (m, k, n) = if t == Target::CudaHopper {
        (21, 32, 16)
    } else {
        (21, 34, 13)
    };
    for &dtype in t.dtypes() {
        let s = Layer::with_rng(t, (m, k, n), dtype, DType::F32, &mut rng);
        for weight in WEIGHTS {
            let what = format!("{t:?} {dtype} {weight:?}");
            let acc = OutputMode::AccumulateF32;
            let l = s.linear(weight);
            for g in [
                l.forward(Some(DType::F32)),
                l.backward_dw(acc),
                l.backward_dx(),
            ] {
                assert!(tri.takes(&g), "{what}: {g:?}");
            }
            let dw0 = Buf::random(DType::F32, k * n + GUARD, &mut rng, NARROW);
            let [y, dw, dx] = raw_triad(e, &s, weight, &dw0);
            let mut by_desc = dw0.clone();
            tri.dw(e, &s, weight, acc, (&s.x, &s.dy), &mut by_desc);
            let descriptors = [
                tri.forward(e, &s, weight, true),
                by_desc,
                tri.dx(e, &s, weight),
            ];
            let math = [
                forward_ref(&s, true),
                dw_ref(&s, weight, acc, &dw0),
                dx_ref(&s),
            ];
            for (((got, desc), want), name) in [y, dw, dx]
                .iter()
                .zip(&descriptors)
                .zip(&math)
                .zip(["forward", "backward_dw", "backward_dx"])
            {
                assert_same_bits(got, desc, &format!("{name} {what}: vs the descriptor"));
                match t.tier() {
                    Tier::Scalar => assert_same_bits(got, &want.bits, &format!("{name} {what}")),
                    _ => within_bound(got, want, &format!("{name} {what}")),
                }
            }
        }
    }
}

/// An empty micro-batch (M = 0): Y and dX are empty (their guards untouched), dW is zeros
/// (overwrite) or unchanged up to `c + 0.0` (accumulate), since its chain over zero rows is
/// +0.0.
pub fn empty_batch_gives_zero_weight_gradient(t: Target) {
    let Some(tri) = Triad::new(t) else { return };
    let mut rng = Rng::new(107);
    let e = &tri.run.engine;
    for &dtype in t.dtypes() {
        let s = Layer::with_rng(t, (0, 6, 5), dtype, dtype, &mut rng);
        for weight in WEIGHTS {
            let guard = Buf::sentinel(dtype, GUARD);
            assert_same_bits(&tri.forward(e, &s, weight, true), &guard, "Y");
            assert_same_bits(&tri.dx(e, &s, weight), &guard, "dX");
            for mode in [OutputMode::Overwrite(dtype), OutputMode::AccumulateF32] {
                let mut dw0 = match mode {
                    OutputMode::AccumulateF32 => {
                        Buf::random(DType::F32, 30 + GUARD, &mut rng, NARROW)
                    }
                    OutputMode::Overwrite(d) => Buf::sentinel(d, 30 + GUARD),
                };
                if mode == OutputMode::AccumulateF32 {
                    dw0.set_bits(7, 0x8000_0000); // -0.0 + +0.0 is +0.0
                }
                let mut dw = dw0.clone();
                tri.dw(e, &s, weight, mode, (&s.x, &s.dy), &mut dw);
                for i in 0..30 + GUARD {
                    let want = match mode {
                        _ if i >= 30 => dw0.bits(i),
                        OutputMode::AccumulateF32 => (dw0.get(i) + 0.0).to_bits(),
                        OutputMode::Overwrite(_) => 0,
                    };
                    assert_eq!(
                        dw.bits(i),
                        want,
                        "{t:?} {dtype} {weight:?} {mode:?}: dW element {i}"
                    );
                }
            }
        }
    }
}

/// Layers with no input features (K = 0: Y is the bias, dW and dX are empty) or no output
/// features (N = 0: Y and dW are empty, dX is zeros) are shapes of the contract (C5).
pub fn zero_feature_layers(t: Target) {
    let Some(tri) = Triad::new(t) else { return };
    let mut rng = Rng::new(108);
    let e = &tri.run.engine;
    for &dtype in t.dtypes() {
        for (m, k, n) in [(4, 0, 3), (4, 3, 0)] {
            let s = Layer::with_rng(t, (m, k, n), dtype, DType::F32, &mut rng);
            for weight in WEIGHTS {
                let what = format!("{t:?} {dtype} {weight:?} {m}×{k}×{n}");
                assert_same_bits(
                    &tri.forward(e, &s, weight, true),
                    &forward_ref(&s, true).bits,
                    &format!("forward {what}"),
                );
                assert_same_bits(
                    &tri.dx(e, &s, weight),
                    &dx_ref(&s).bits,
                    &format!("dX {what}"),
                );
                let guard = Buf::sentinel(dtype, GUARD);
                let mut dw = guard.clone();
                let mode = OutputMode::Overwrite(dtype);
                tri.dw(e, &s, weight, mode, (&s.x, &s.dy), &mut dw);
                assert_same_bits(&dw, &guard, &format!("dW {what}"));
            }
        }
    }
}
