//! Special values on a CUDA GPU (docs/reliability.md, item 2): NaN (quiet, signalling,
//! payloads, signs), ±Inf, ±0, subnormals, the largest finite value and the smallest normal
//! planted in A, B, the bias and C (`common/specials.rs`). The scalar tier gives the CPU
//! backend's bits on every element; on the tensor-core tier every kernel gives the same bits
//! — the mma.sync path and, on sm_90, the Hopper path (forced through
//! `Engine::with_tc_path`), the planner's mix, and calls on a subset of the rows (batch
//! invariance) — and every NaN it stores is the canonical one. Every test needs a GPU, so
//! all are `#[ignore]`d; `bash .gpu/run gpu_special_values` runs them on the GPU host.

mod gpu_support;
#[path = "common/specials.rs"]
mod specials;

use gpu_support::{
    c_elements, first_difference, gpu_engine, DeviceBuf, HostBuf, Problem, RawStream, Rng,
};
use sgemm_bi::numeric::{CANONICAL_NAN_16, CANONICAL_NAN_F32};
use sgemm_bi::{
    bf16, f16, DType, Device, Engine, Gemm, GemmPointers, Layout, Operand, Output, OutputMode,
    TcPath, Tier,
};
use specials::{Plant, Reached, PLANTS};

const LAYOUTS: [Layout; 2] = [Layout::RowMajor, Layout::ColMajor];

/// Plants specials into `h` by `plant` (every element may change).
fn plant(h: &mut HostBuf, plan: Plant, rng: &mut Rng) {
    let dtype = h.dtype();
    let mut next = || rng.next_u64();
    match h {
        HostBuf::F32(v) => {
            for x in v.iter_mut() {
                if let Some(b) = specials::planted(plan, dtype, &mut next) {
                    *x = f32::from_bits(b);
                }
            }
        }
        HostBuf::BF16(v) => {
            for x in v.iter_mut() {
                if let Some(b) = specials::planted(plan, dtype, &mut next) {
                    *x = bf16::from_bits(b as u16);
                }
            }
        }
        HostBuf::F16(v) => {
            for x in v.iter_mut() {
                if let Some(b) = specials::planted(plan, dtype, &mut next) {
                    *x = f16::from_bits(b as u16);
                }
            }
        }
    }
}

/// Sparse specials in the bias and in an accumulating C (whatever the inputs' plan).
fn plant_bias_and_c(p: &mut Problem, rng: &mut Rng) {
    if let Some(bias) = p.bias.as_mut() {
        plant(bias, Plant::Sparse, rng);
    }
    if p.g.c.mode == OutputMode::AccumulateF32 {
        plant(&mut p.c0, Plant::Sparse, rng);
    }
}

/// `g` on random inputs with `plan`'s specials planted in A and B (and sparse ones in the
/// bias and an accumulating C): the GPU's bits are the CPU's. What the output reached is
/// added to `total`.
fn scalar_call_matches_cpu(
    (cpu, gpu): (&Engine, &Engine),
    stream: &RawStream,
    g: Gemm,
    plan: Plant,
    rng: &mut Rng,
    total: &mut Reached,
) {
    let mut p = Problem::random(g, rng);
    plant(&mut p.a, plan, rng);
    plant(&mut p.b, plan, rng);
    plant_bias_and_c(&mut p, rng);
    let want = p.on_cpu(cpu);
    let got = p.on_gpu(gpu, stream);
    if let Some((i, w, o)) = first_difference(&want, &got) {
        panic!("{plan:?} {g:?}: element {i} cpu {w:#x} gpu {o:#x}");
    }
    total.add(&reached(&got));
}

fn reached(h: &HostBuf) -> Reached {
    let mut r = Reached::default();
    for b in h.bits() {
        r.count(h.dtype(), b);
    }
    r
}

fn operand(dtype: DType, layout: Layout, rows: usize, cols: usize, pad: usize) -> Operand {
    let ld = if layout == Layout::RowMajor {
        cols
    } else {
        rows
    }
    .max(1)
        + pad;
    Operand {
        dtype,
        layout,
        ld,
        batch_stride: 0,
    }
}

/// Shapes with the GPU kernels' tails: single elements, K of 0 and 1, one off a tile, and
/// a few tiles wide.
const SHAPES: [(usize, usize, usize); 11] = [
    (1, 1, 1),
    (3, 5, 0),
    (7, 3, 1),
    (33, 65, 17),
    (127, 129, 63),
    (130, 97, 260),
    (300, 257, 129),
    (2, 1000, 520),
    // N in whole 16-byte units with tiles' tails: shapes the Hopper path takes.
    (5, 72, 17),
    (127, 136, 63),
    (300, 264, 129),
];

#[test]
#[ignore = "needs a CUDA GPU"]
fn scalar_tier_with_special_values_matches_the_cpu() {
    let Some(gpu) = gpu_engine() else { return };
    let cpu = Engine::new(Device::Cpu).unwrap();
    let stream = RawStream::new();
    let mut rng = Rng::new(0x5bec_0001);
    let (mut calls, mut total) = (0, Reached::default());
    for dtype in [DType::F32, DType::BF16, DType::F16] {
        for (p_i, plan) in PLANTS.into_iter().enumerate() {
            for (s_i, &(m, n, k)) in SHAPES.iter().enumerate() {
                for layouts in 0..4 {
                    let combo = p_i * SHAPES.len() * 4 + s_i * 4 + layouts;
                    let mode = [
                        OutputMode::Overwrite(DType::F32),
                        OutputMode::Overwrite(DType::BF16),
                        OutputMode::Overwrite(DType::F16),
                        OutputMode::AccumulateF32,
                    ][combo % 4];
                    let g = Gemm {
                        a: operand(dtype, LAYOUTS[layouts & 1], m, k, rng.below(3)),
                        b: operand(dtype, LAYOUTS[layouts >> 1], k, n, rng.below(3)),
                        bias: [None, Some(DType::F32), Some(dtype)][(combo / 4) % 3],
                        c: Output {
                            mode,
                            ldc: n.max(1) + rng.below(2),
                            batch_stride: 0,
                        },
                        ..Gemm::dense(m, n, k, dtype)
                    };
                    scalar_call_matches_cpu((&cpu, &gpu), &stream, g, plan, &mut rng, &mut total);
                    calls += 1;
                }
            }
        }
    }
    println!("scalar tier: {calls} calls identical to the CPU backend; {total}");
}

/// The few-row kernel (M ≤ 64 with operands in 16-byte pieces, `kernels-gpu/src/scalar/rows.rs`)
/// with every plant of specials, both B layouts and every output mode: the CPU's bits. A
/// chain that must stay −0.0 is one of the things it checks (no k step past K is taken).
#[test]
#[ignore = "needs a CUDA GPU"]
fn few_row_kernel_with_special_values_matches_the_cpu() {
    let Some(gpu) = gpu_engine() else { return };
    let cpu = Engine::new(Device::Cpu).unwrap();
    let stream = RawStream::new();
    let mut rng = Rng::new(0x5bec_0002);
    let round8 = |x: usize| x.max(1).div_ceil(8) * 8;
    let (mut calls, mut total) = (0, Reached::default());
    for dtype in [DType::F32, DType::BF16, DType::F16] {
        for plan in PLANTS {
            for &(m, n, k) in &[
                (1, 40, 16),
                (4, 64, 130),
                (16, 96, 33),
                (32, 48, 100),
                (64, 32, 264),
            ] {
                for b_layout in LAYOUTS {
                    let mode = [
                        OutputMode::Overwrite(DType::F32),
                        OutputMode::Overwrite(dtype),
                        OutputMode::AccumulateF32,
                    ][calls % 3];
                    let b_ld = round8(if b_layout == Layout::RowMajor { n } else { k });
                    let g = Gemm {
                        a: Operand {
                            ld: round8(k),
                            ..operand(dtype, Layout::RowMajor, m, k, 0)
                        },
                        b: Operand {
                            ld: b_ld,
                            ..operand(dtype, b_layout, k, n, 0)
                        },
                        bias: [None, Some(DType::F32), Some(dtype)][calls % 3],
                        c: Output {
                            mode,
                            ldc: n,
                            batch_stride: 0,
                        },
                        ..Gemm::dense(m, n, k, dtype)
                    };
                    scalar_call_matches_cpu((&cpu, &gpu), &stream, g, plan, &mut rng, &mut total);
                    calls += 1;
                }
            }
        }
    }
    println!("few-row kernel: {calls} calls identical to the CPU backend; {total}");
    assert!(total.all_kinds(), "{total}");
}

/// Checks every NaN of a tensor-core result is the canonical one.
fn nans_are_canonical(g: &Gemm, h: &HostBuf, what: &str) {
    let (canonical, is_nan): (u32, fn(u32) -> bool) = match h.dtype() {
        DType::F32 => (CANONICAL_NAN_F32, |b| {
            b & 0x7F80_0000 == 0x7F80_0000 && b & 0x7F_FFFF != 0
        }),
        DType::BF16 => (CANONICAL_NAN_16 as u32, |b| {
            b & 0x7F80 == 0x7F80 && b & 0x7F != 0
        }),
        DType::F16 => (CANONICAL_NAN_16 as u32, |b| {
            b & 0x7C00 == 0x7C00 && b & 0x3FF != 0
        }),
    };
    let poison = HostBuf::poison(h.dtype(), 1).bits()[0];
    for (i, b) in c_elements(g, h).into_iter().enumerate() {
        assert!(b != poison, "{what}: element {i} was not written");
        assert!(
            !is_nan(b) || b == canonical,
            "{what}: element {i} is the NaN {b:#x}"
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn tensor_core_kernels_agree_on_special_values() {
    let Some(auto) = gpu_engine() else { return };
    if !auto.supports(Tier::TensorCores) {
        eprintln!("skipped: no tensor-core tier on this GPU");
        return;
    }
    let portable = Engine::with_tc_path(Device::Cuda(0), TcPath::Portable).unwrap();
    let hopper = (auto.compute_capability() == Some((9, 0)))
        .then(|| Engine::with_tc_path(Device::Cuda(0), TcPath::Hopper).unwrap());
    if hopper.is_none() {
        eprintln!("not sm_90: the Hopper path is not compared");
    }
    let stream = RawStream::new();
    let mut rng = Rng::new(0x5bec_0002);
    let (mut calls, mut hopper_calls, mut rows_checked) = (0, 0, 0);
    let mut total = Reached::default();
    for dtype in [DType::BF16, DType::F16] {
        for plan in PLANTS {
            for &(m, n, k) in SHAPES.iter().filter(|s| s.2 > 0) {
                for layouts in 0..4 {
                    // Leading dimensions that are multiples of 8, as the Hopper path needs.
                    let op = |layout: Layout, rows: usize, cols: usize| {
                        let mut o = operand(dtype, layout, rows, cols, 0);
                        o.ld = o.ld.next_multiple_of(8);
                        o
                    };
                    let mode = if layouts == 3 {
                        OutputMode::Overwrite(dtype)
                    } else {
                        OutputMode::Overwrite(DType::F32)
                    };
                    let g = Gemm {
                        a: op(LAYOUTS[layouts & 1], m, k),
                        b: op(LAYOUTS[layouts >> 1], k, n),
                        bias: (layouts == 1).then_some(DType::F32),
                        // Rows of C in whole 16 bytes, as the Hopper path needs.
                        c: Output {
                            mode,
                            ldc: n.next_multiple_of(8),
                            batch_stride: 0,
                        },
                        tier: Tier::TensorCores,
                        ..Gemm::dense(m, n, k, dtype)
                    };
                    let mut p = Problem::random(g, &mut rng);
                    plant(&mut p.a, plan, &mut rng);
                    plant(&mut p.b, plan, &mut rng);
                    plant_bias_and_c(&mut p, &mut rng);
                    let what = format!("{dtype} {plan:?} {m}×{n}×{k} layouts {layouts}");
                    let x = p.on_gpu(&portable, &stream);
                    nans_are_canonical(&g, &x, &what);
                    let y = p.on_gpu(&auto, &stream);
                    assert_eq!(first_difference(&x, &y), None, "{what}: mma.sync vs auto");
                    // The Hopper path takes N in whole 16-byte units only.
                    if let Some(h) = hopper.as_ref().filter(|_| n % 8 == 0) {
                        let z = p.on_gpu(h, &stream);
                        assert_eq!(first_difference(&x, &z), None, "{what}: mma.sync vs wgmma");
                        hopper_calls += 1;
                    }
                    rows_checked += rows_alone(&auto, &p, &x, &stream, &mut rng, &what);
                    total.add(&reached(&x));
                    calls += 1;
                }
            }
        }
    }
    println!(
        "tensor cores: {calls} calls (mma.sync = planner's choice on all; = wgmma on \
         {hopper_calls}), {rows_checked} row subsets identical to the full calls; {total}"
    );
}

/// Runs rows `r0..r0+len` of `p` alone (A offset by r0 rows) and compares them with the same
/// rows of the full result `full`. Returns 1 when a subset was checked.
fn rows_alone(
    gpu: &Engine,
    p: &Problem,
    full: &HostBuf,
    stream: &RawStream,
    rng: &mut Rng,
    what: &str,
) -> usize {
    let g = p.g;
    if g.m < 2 {
        return 0;
    }
    let len = 1 + rng.below(g.m - 1);
    let r0 = rng.below(g.m - len + 1);
    let size = g.a.dtype.size();
    let a_off = match g.a.layout {
        Layout::RowMajor => r0 * g.a.ld,
        Layout::ColMajor => r0,
    };
    let sub = Gemm { m: len, ..g };
    let (a, b, c) = (
        DeviceBuf::upload(&p.a),
        DeviceBuf::upload(&p.b),
        DeviceBuf::upload(&p.c0),
    );
    let bias = p.bias.as_ref().map(DeviceBuf::upload);
    let ptrs = GemmPointers {
        a: a.at(a_off * size),
        b: b.at(0),
        bias: bias.as_ref().map_or(std::ptr::null(), |x| x.at(0)),
        c: c.at(r0 * g.c.ldc * g.c.mode.dtype().size()),
    };
    // SAFETY: rows r0.. of A and C lie inside their buffers; every buffer outlives the sync.
    unsafe { gpu.gemm(&sub, ptrs, stream.handle()) }.unwrap();
    stream.sync();
    let mut out = p.c0.clone();
    c.download_into(&mut out);
    let (got, want) = (out.bits(), full.bits());
    let rows = r0 * g.c.ldc..(r0 + len - 1) * g.c.ldc + g.n;
    assert_eq!(
        &got[rows.clone()],
        &want[rows],
        "{what}: rows {r0}..{} alone",
        r0 + len
    );
    1
}
