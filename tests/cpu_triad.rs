//! The training triad of a linear layer (`sgemm_bi::Linear`) on the CPU engine, against the
//! math written out by hand:
//!
//! ```text
//! forward  Y[i,j]  = round(bias_j + chain_k  X[i,k]·W[k,j])   k ascending
//! dW       dW[k,j] = round(         chain_m  X[m,k]·dY[m,j])  m ascending (or += in f32)
//! dX       dX[i,k] = round(         chain_j  dY[i,j]·W[k,j])  j ascending
//! ```
//!
//! where a chain is f32 fmas from +0.0 and `W[k,j]` is `w[k·N + j]` for `WeightLayout::KN`
//! and `w[j·K + k]` for `WeightLayout::NK` (dW is stored like W).

mod common;

use common::*;
use sgemm_bi::{DType, Engine, Linear, OutputMode, Stream, Tier, WeightLayout};

/// One layer's tensors: X `[M,K]`, W in both layouts (the same values), a bias `[N]` and an
/// upstream gradient dY `[M,N]`.
struct Layer {
    l: Linear,
    x: Buf,
    w_kn: Buf,
    w_nk: Buf,
    bias: Buf,
    dy: Buf,
}

impl Layer {
    fn new(m: usize, k: usize, n: usize, dtype: DType, bias: DType, rng: &mut Rng) -> Layer {
        let x = Buf::random(dtype, m * k, rng, NARROW);
        let w_kn = Buf::random(dtype, k * n, rng, NARROW);
        let mut w_nk = Buf::filled(dtype, k * n, 0);
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
                tier: Tier::Scalar,
            },
            x,
            w_kn,
            w_nk,
            bias: Buf::random(bias, n, rng, NARROW),
            dy: Buf::random(dtype, m * n, rng, NARROW),
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

fn fma_chain(len: usize, term: impl Fn(usize) -> (f32, f32)) -> f32 {
    let mut acc = 0.0f32;
    for t in 0..len {
        let (x, y) = term(t);
        acc = x.mul_add(y, acc);
    }
    acc
}

fn forward_ref(s: &Layer, with_bias: bool) -> Buf {
    let Linear { m, k, n, dtype, .. } = s.l;
    let mut y = Buf::filled(dtype, m * n, 0);
    for i in 0..m {
        for j in 0..n {
            let mut v = fma_chain(k, |kk| (s.x.get(i * k + kk), s.w_at(kk, j)));
            if with_bias {
                v += s.bias.get(j);
            }
            y.store(i * n + j, v);
        }
    }
    y
}

/// dW chains (before the store), indexed `[k][j]`.
fn dw_chains(s: &Layer, x: &Buf, dy: &Buf) -> Vec<Vec<f32>> {
    let Linear { m, k, n, .. } = s.l;
    (0..k)
        .map(|kk| {
            (0..n)
                .map(|j| fma_chain(m, |r| (x.get(r * k + kk), dy.get(r * n + j))))
                .collect()
        })
        .collect()
}

fn dw_ref(s: &Layer, weight: WeightLayout, mode: OutputMode, dw0: &Buf) -> Buf {
    let chains = dw_chains(s, &s.x, &s.dy);
    let mut dw = dw0.clone();
    for (kk, row) in chains.iter().enumerate() {
        for (j, &v) in row.iter().enumerate() {
            let idx = s.dw_index(weight, kk, j);
            match mode {
                OutputMode::Overwrite(_) => dw.store(idx, v),
                OutputMode::AccumulateF32 => {
                    let old = dw.get(idx);
                    dw.store(idx, old + v)
                }
            }
        }
    }
    dw
}

fn dx_ref(s: &Layer) -> Buf {
    let Linear { m, k, n, dtype, .. } = s.l;
    let mut dx = Buf::filled(dtype, m * k, 0);
    for i in 0..m {
        for kk in 0..k {
            let v = fma_chain(n, |j| (s.dy.get(i * n + j), s.w_at(kk, j)));
            dx.store(i * k + kk, v);
        }
    }
    dx
}

fn run_forward(engine: &Engine, s: &Layer, weight: WeightLayout, with_bias: bool) -> Buf {
    let l = s.linear(weight);
    let g = l.forward(with_bias.then(|| s.bias.dtype()));
    let mut y = Buf::sentinel(l.dtype, l.m * l.n);
    engine
        .gemm_host(
            &g,
            s.x.slice(),
            s.w(weight).slice(),
            with_bias.then(|| s.bias.slice()),
            y.slice_mut(),
        )
        .unwrap_or_else(|e| panic!("forward {l:?}: {e}"));
    y
}

/// dW with W's layout: A and B are X and dY in the order the descriptor's comment gives.
fn run_dw(
    engine: &Engine,
    s: &Layer,
    weight: WeightLayout,
    mode: OutputMode,
    x: &Buf,
    dy: &Buf,
    dw: &mut Buf,
) {
    let l = s.linear(weight);
    let g = l.backward_dw(mode);
    let (a, b) = match weight {
        WeightLayout::KN => (x, dy), // dW[K,N] = Xᵀ · dY
        WeightLayout::NK => (dy, x), // dW[N,K] = dYᵀ · X
    };
    engine
        .gemm_host(&g, a.slice(), b.slice(), None, dw.slice_mut())
        .unwrap_or_else(|e| panic!("backward_dw {l:?} {mode:?}: {e}"));
}

fn run_dx(engine: &Engine, s: &Layer, weight: WeightLayout) -> Buf {
    let l = s.linear(weight);
    let mut dx = Buf::sentinel(l.dtype, l.m * l.k);
    engine
        .gemm_host(
            &l.backward_dx(),
            s.dy.slice(),
            s.w(weight).slice(),
            None,
            dx.slice_mut(),
        )
        .unwrap_or_else(|e| panic!("backward_dx {l:?}: {e}"));
    dx
}

const WEIGHTS: [WeightLayout; 2] = [WeightLayout::KN, WeightLayout::NK];
const SHAPES: [(usize, usize, usize); 3] = [(23, 37, 19), (130, 65, 33), (1, 129, 2)];

#[test]
fn forward_matches_the_math() {
    let engine = cpu();
    let mut rng = Rng::new(101);
    for dtype in DTYPES {
        for (m, k, n) in SHAPES {
            for bias in [DType::F32, dtype] {
                let s = Layer::new(m, k, n, dtype, bias, &mut rng);
                for weight in WEIGHTS {
                    for with_bias in [false, true] {
                        let y = run_forward(&engine, &s, weight, with_bias);
                        assert_same_bits(
                            &y,
                            &forward_ref(&s, with_bias),
                            &format!("forward {weight:?} {dtype} {m}×{k}×{n} bias {with_bias}"),
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn backward_dw_matches_the_math() {
    let engine = cpu();
    let mut rng = Rng::new(102);
    for dtype in DTYPES {
        for (m, k, n) in SHAPES {
            let s = Layer::new(m, k, n, dtype, dtype, &mut rng);
            for weight in WEIGHTS {
                for mode in [
                    OutputMode::Overwrite(dtype),
                    OutputMode::Overwrite(DType::F32),
                    OutputMode::AccumulateF32,
                ] {
                    let dw0 = match mode {
                        OutputMode::AccumulateF32 => {
                            Buf::random(DType::F32, k * n, &mut rng, NARROW)
                        }
                        OutputMode::Overwrite(d) => Buf::sentinel(d, k * n),
                    };
                    let mut dw = dw0.clone();
                    run_dw(&engine, &s, weight, mode, &s.x, &s.dy, &mut dw);
                    assert_same_bits(
                        &dw,
                        &dw_ref(&s, weight, mode, &dw0),
                        &format!("dW {weight:?} {dtype} {mode:?} {m}×{k}×{n}"),
                    );
                }
            }
        }
    }
}

#[test]
fn backward_dx_matches_the_math() {
    let engine = cpu();
    let mut rng = Rng::new(103);
    for dtype in DTYPES {
        for (m, k, n) in SHAPES {
            let s = Layer::new(m, k, n, dtype, dtype, &mut rng);
            for weight in WEIGHTS {
                assert_same_bits(
                    &run_dx(&engine, &s, weight),
                    &dx_ref(&s),
                    &format!("dX {weight:?} {dtype} {m}×{k}×{n}"),
                );
            }
        }
    }
}

/// Gradient accumulation over two micro-batches: `dW = (0 + chain₁) + chain₂` in f32, one
/// add per micro-batch and no rounding to 16 bits in between.
#[test]
fn dw_accumulates_micro_batches_in_f32() {
    let engine = cpu();
    let mut rng = Rng::new(104);
    for dtype in DTYPES {
        let (m, k, n) = (48, 31, 17);
        let s = Layer::new(m, k, n, dtype, dtype, &mut rng);
        let x2 = Buf::random(dtype, m * k, &mut rng, NARROW);
        let dy2 = Buf::random(dtype, m * n, &mut rng, NARROW);
        let c1 = dw_chains(&s, &s.x, &s.dy);
        let c2 = dw_chains(&s, &x2, &dy2);
        for weight in WEIGHTS {
            let mut dw = Buf::filled(DType::F32, k * n, 0);
            run_dw(
                &engine,
                &s,
                weight,
                OutputMode::AccumulateF32,
                &s.x,
                &s.dy,
                &mut dw,
            );
            run_dw(
                &engine,
                &s,
                weight,
                OutputMode::AccumulateF32,
                &x2,
                &dy2,
                &mut dw,
            );
            for kk in 0..k {
                for j in 0..n {
                    let want = (0.0f32 + c1[kk][j]) + c2[kk][j];
                    assert_eq!(
                        dw.bits(s.dw_index(weight, kk, j)),
                        want.to_bits(),
                        "{dtype} {weight:?}: dW[{kk},{j}]"
                    );
                }
            }
        }
    }
}

/// W stored KN and the same W stored NK give the same bits for Y and dX, and dW with the
/// same bits transposed.
#[test]
fn kn_and_nk_weights_give_identical_bits() {
    let engine = cpu();
    let mut rng = Rng::new(105);
    for dtype in DTYPES {
        let (m, k, n) = (70, 45, 39);
        let s = Layer::new(m, k, n, dtype, DType::F32, &mut rng);
        assert_same_bits(
            &run_forward(&engine, &s, WeightLayout::KN, true),
            &run_forward(&engine, &s, WeightLayout::NK, true),
            "Y: KN vs NK",
        );
        assert_same_bits(
            &run_dx(&engine, &s, WeightLayout::KN),
            &run_dx(&engine, &s, WeightLayout::NK),
            "dX: KN vs NK",
        );
        for mode in [OutputMode::Overwrite(dtype), OutputMode::AccumulateF32] {
            let mut kn = Buf::filled(mode.dtype(), k * n, 0);
            let mut nk = Buf::filled(mode.dtype(), k * n, 0);
            run_dw(&engine, &s, WeightLayout::KN, mode, &s.x, &s.dy, &mut kn);
            run_dw(&engine, &s, WeightLayout::NK, mode, &s.x, &s.dy, &mut nk);
            for kk in 0..k {
                for j in 0..n {
                    assert_eq!(
                        kn.bits(kk * n + j),
                        nk.bits(j * k + kk),
                        "{dtype} {mode:?}: dW[{kk},{j}] KN vs NK"
                    );
                }
            }
        }
    }
}

/// The raw-pointer entry points (`Engine::forward`, `backward_dw`, `backward_dx`) wire the
/// operands as the descriptors say: their bits equal the math.
#[test]
fn raw_pointer_entry_points_match_the_math() {
    let engine = cpu();
    let mut rng = Rng::new(106);
    for dtype in DTYPES {
        let (m, k, n) = (21, 34, 13);
        let s = Layer::new(m, k, n, dtype, DType::F32, &mut rng);
        for weight in WEIGHTS {
            let l = s.linear(weight);
            let mut y = Buf::sentinel(dtype, m * n);
            let mut dw = Buf::random(DType::F32, k * n, &mut rng, NARROW);
            let dw0 = dw.clone();
            let mut dx = Buf::sentinel(dtype, m * k);
            // SAFETY: every buffer is a live host allocation of the dtype and size the layer
            // says (X [M,K], W [K·N], bias [N], Y and dY [M,N], dW [K·N], dX [M,K]); outputs
            // are distinct from inputs; nothing else touches them.
            unsafe {
                engine
                    .forward(
                        &l,
                        s.x.as_ptr(),
                        s.w(weight).as_ptr(),
                        Some((s.bias.as_ptr(), DType::F32)),
                        y.as_mut_ptr(),
                        Stream::DEFAULT,
                    )
                    .unwrap();
                engine
                    .backward_dw(
                        &l,
                        s.dy.as_ptr(),
                        s.x.as_ptr(),
                        dw.as_mut_ptr(),
                        OutputMode::AccumulateF32,
                        Stream::DEFAULT,
                    )
                    .unwrap();
                engine
                    .backward_dx(
                        &l,
                        s.dy.as_ptr(),
                        s.w(weight).as_ptr(),
                        dx.as_mut_ptr(),
                        Stream::DEFAULT,
                    )
                    .unwrap();
            }
            let what = format!("{dtype} {weight:?}");
            assert_same_bits(&y, &forward_ref(&s, true), &format!("forward {what}"));
            assert_same_bits(
                &dw,
                &dw_ref(&s, weight, OutputMode::AccumulateF32, &dw0),
                &format!("backward_dw {what}"),
            );
            assert_same_bits(&dx, &dx_ref(&s), &format!("backward_dx {what}"));
        }
    }
}

/// An empty micro-batch (M = 0): Y and dX are empty, dW is zeros (overwrite) or unchanged
/// up to `c + 0.0` (accumulate), since its chain over zero rows is +0.0.
#[test]
fn empty_batch_gives_zero_weight_gradient() {
    let engine = cpu();
    let mut rng = Rng::new(107);
    for dtype in DTYPES {
        let s = Layer::new(0, 6, 5, dtype, dtype, &mut rng);
        for weight in WEIGHTS {
            assert!(run_forward(&engine, &s, weight, true).is_empty());
            assert!(run_dx(&engine, &s, weight).is_empty());
            for mode in [OutputMode::Overwrite(dtype), OutputMode::AccumulateF32] {
                let dw0 = match mode {
                    OutputMode::AccumulateF32 => Buf::random(DType::F32, 30, &mut rng, NARROW),
                    OutputMode::Overwrite(d) => Buf::sentinel(d, 30),
                };
                let mut dw0 = dw0;
                if mode == OutputMode::AccumulateF32 {
                    dw0.set_bits(7, 0x8000_0000); // -0.0 + +0.0 is +0.0
                }
                let mut dw = dw0.clone();
                run_dw(&engine, &s, weight, mode, &s.x, &s.dy, &mut dw);
                for i in 0..30 {
                    let want = match mode {
                        OutputMode::AccumulateF32 => (dw0.get(i) + 0.0).to_bits(),
                        OutputMode::Overwrite(_) => 0,
                    };
                    assert_eq!(
                        dw.bits(i),
                        want,
                        "{dtype} {weight:?} {mode:?}: dW element {i}"
                    );
                }
            }
        }
    }
}

/// Layers with no input features (K = 0: Y is the bias, dW and dX are empty) or no output
/// features (N = 0: Y and dW are empty, dX is zeros) are shapes of the contract (C5).
#[test]
fn zero_feature_layers() {
    let engine = cpu();
    let mut rng = Rng::new(108);
    for dtype in DTYPES {
        for (m, k, n) in [(4, 0, 3), (4, 3, 0)] {
            let s = Layer::new(m, k, n, dtype, DType::F32, &mut rng);
            for weight in WEIGHTS {
                assert_same_bits(
                    &run_forward(&engine, &s, weight, true),
                    &forward_ref(&s, true),
                    &format!("forward {m}×{k}×{n}"),
                );
                assert_same_bits(
                    &run_dx(&engine, &s, weight),
                    &dx_ref(&s),
                    &format!("dX {m}×{k}×{n}"),
                );
                let mut dw = Buf::filled(dtype, 0, 0);
                run_dw(
                    &engine,
                    &s,
                    weight,
                    OutputMode::Overwrite(dtype),
                    &s.x,
                    &s.dy,
                    &mut dw,
                );
            }
        }
    }
}
