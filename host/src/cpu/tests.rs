//! The tuned backend against the naive reference, bit for bit: every shape class, layout,
//! dtype, bias, output mode, batch and stride, with special values, on every instruction
//! set this machine has. Whole C buffers are compared, so elements the call must not touch
//! (padding between rows and batch entries) are checked too.

use proptest::prelude::*;

use super::kernel::Isa;
use super::reference::reference;
use crate::types::{DType, Gemm, GemmPointers, Layout, Operand, Output, OutputMode, Tier};
use crate::validate;

const LAYOUTS: [Layout; 2] = [Layout::RowMajor, Layout::ColMajor];
const DTYPES: [DType; 3] = [DType::F32, DType::BF16, DType::F16];
const DIMS: [usize; 12] = [0, 1, 2, 3, 7, 17, 31, 33, 64, 65, 127, 129];

/// One call to test.
#[derive(Clone, Copy, Debug)]
struct Case {
    m: usize,
    n: usize,
    k: usize,
    batch: usize,
    a: Layout,
    b: Layout,
    dtype: DType,
    bias: Option<DType>,
    mode: OutputMode,
    /// Extra elements on every leading dimension and batch stride.
    pad: usize,
    /// Offset every buffer by one byte, so no element is naturally aligned.
    misalign: bool,
    /// Fraction (in 1/256) of input elements that are NaN, ±Inf, ±0 or subnormal.
    specials: u32,
}

impl Case {
    fn new(m: usize, n: usize, k: usize, dtype: DType) -> Case {
        Case {
            m,
            n,
            k,
            batch: 1,
            a: Layout::RowMajor,
            b: Layout::RowMajor,
            dtype,
            bias: None,
            mode: OutputMode::Overwrite(dtype),
            pad: 0,
            misalign: false,
            specials: 0,
        }
    }

    fn gemm(&self) -> Gemm {
        let op = |layout, rows: usize, cols: usize| {
            let ld = match layout {
                Layout::RowMajor => cols,
                Layout::ColMajor => rows,
            }
            .max(1)
                + self.pad;
            let stride = ld * rows.max(cols).max(1) + self.pad;
            Operand {
                dtype: self.dtype,
                layout,
                ld,
                batch_stride: stride,
            }
        };
        let ldc = self.n.max(1) + self.pad;
        Gemm {
            m: self.m,
            n: self.n,
            k: self.k,
            batch: self.batch,
            a: op(self.a, self.m, self.k),
            b: op(self.b, self.k, self.n),
            bias: self.bias,
            c: Output {
                mode: self.mode,
                ldc,
                batch_stride: ldc * self.m.max(1) + self.pad,
            },
            tier: Tier::Scalar,
        }
    }
}

/// xorshift64: deterministic, dependency-free test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Raw bits of one element of `dtype`: a normal number with a random mantissa (so that
    /// products and sums round), or with probability `specials / 256` a special value.
    fn element(&mut self, dtype: DType, specials: u32) -> u32 {
        let r = self.next();
        if ((r >> 56) as u32) < specials {
            let pick = (r % 8) as usize;
            return match dtype {
                // NaN with payload, -NaN, +Inf, -Inf, +0, -0, smallest and a random subnormal
                DType::F32 => [
                    0x7FC0_1234,
                    0xFFC0_0000,
                    0x7F80_0000,
                    0xFF80_0000,
                    0,
                    0x8000_0000,
                    1,
                    (r >> 20) as u32 & 0x807F_FFFF,
                ][pick],
                DType::BF16 | DType::F16 => {
                    let (nan, inf) = if dtype == DType::BF16 {
                        (0x7FC1, 0x7F80)
                    } else {
                        (0x7E01, 0x7C00)
                    };
                    let sub = (r >> 20) as u32 & if dtype == DType::BF16 { 0x807F } else { 0x83FF };
                    [nan, nan | 0x8000, inf, inf | 0x8000, 0, 0x8000, 1, sub][pick]
                }
            };
        }
        let v = f32::from_bits(
            ((r >> 20) as u32 & 0x807F_FFFF) | ((123 + (r % 8) as u32) << 23), // ±[2^-4, 2^4)
        );
        match dtype {
            DType::F32 => v.to_bits(),
            DType::BF16 => v.to_bits() >> 16,
            DType::F16 => half::f16::from_f32(v).to_bits() as u32,
        }
    }

    /// A buffer of `len` elements of `dtype`, starting `offset` bytes into the vector.
    fn buffer(&mut self, dtype: DType, len: usize, offset: usize, specials: u32) -> Vec<u8> {
        let mut v = vec![0u8; offset + len * dtype.size()];
        for i in 0..len {
            let bits = self.element(dtype, specials);
            let at = offset + i * dtype.size();
            v[at..at + dtype.size()].copy_from_slice(&bits.to_le_bytes()[..dtype.size()]);
        }
        v
    }
}

/// Runs `case` through the reference and through the tuned backend on every instruction
/// set, and asserts that the whole C buffers are identical.
fn check(case: &Case, seed: u64) {
    let g = case.gemm();
    let ext = validate::check(&g).unwrap_or_else(|e| panic!("{case:?}: {e}"));
    let mut rng = Rng(seed | 1);
    let off = usize::from(case.misalign);
    let a = rng.buffer(case.dtype, ext.a, off, case.specials);
    let b = rng.buffer(case.dtype, ext.b, off, case.specials);
    let bias = rng.buffer(
        case.bias.unwrap_or(DType::F32),
        ext.bias,
        off,
        case.specials,
    );
    // C starts as random data: accumulate mode reads it, and gaps must survive unchanged.
    let c0 = rng.buffer(case.mode.dtype(), ext.c, off, case.specials);
    let run = |f: &dyn Fn(&GemmPointers)| {
        let mut c = c0.clone();
        let p = GemmPointers {
            a: a[off..].as_ptr().cast(),
            b: b[off..].as_ptr().cast(),
            bias: bias[off..].as_ptr().cast(),
            c: c[off..].as_mut_ptr().cast(),
        };
        f(&p);
        c
    };
    // SAFETY: every buffer holds the span validate::check gave for it, C is its own vector.
    let want = run(&|p| unsafe { reference(&g, p) });
    for isa in Isa::all() {
        // SAFETY: as above.
        let got = run(&|p| unsafe { super::gemm_with(isa, &g, p) });
        if got != want {
            let size = case.mode.dtype().size();
            let first = (0..got.len()).find(|&i| got[i] != want[i]).unwrap() / size;
            panic!("{isa:?} {case:?} seed {seed}: C differs first at element {first}");
        }
    }
}

fn modes(dtype: DType) -> [OutputMode; 4] {
    [
        OutputMode::Overwrite(dtype),
        OutputMode::Overwrite(DType::F32),
        OutputMode::Overwrite(if dtype == DType::F16 {
            DType::BF16
        } else {
            DType::F16
        }),
        OutputMode::AccumulateF32,
    ]
}

#[test]
fn every_small_shape_matches_reference() {
    // Each of the 12³ shapes once, with the other parameters varied by a counter.
    let mut i = 0u64;
    for m in DIMS {
        for n in DIMS {
            for k in DIMS {
                i += 1;
                let dtype = DTYPES[(i % 3) as usize];
                let case = Case {
                    a: LAYOUTS[(i % 2) as usize],
                    b: LAYOUTS[(i / 2 % 2) as usize],
                    bias: [None, Some(DType::F32), Some(dtype)][(i / 4 % 3) as usize],
                    mode: modes(dtype)[(i / 5 % 4) as usize],
                    pad: (i % 3) as usize,
                    ..Case::new(m, n, k, dtype)
                };
                check(&case, i);
            }
        }
    }
}

#[test]
fn every_layout_dtype_bias_and_mode_matches_reference() {
    let mut seed = 0;
    for (m, n, k) in [(17, 33, 65), (64, 1, 129), (1, 129, 7), (130, 70, 300)] {
        for dtype in DTYPES {
            for (a, b) in LAYOUTS.iter().flat_map(|&a| LAYOUTS.map(|b| (a, b))) {
                for bias in [None, Some(DType::F32), Some(dtype)] {
                    for mode in modes(dtype) {
                        seed += 1;
                        let case = Case {
                            a,
                            b,
                            bias,
                            mode,
                            ..Case::new(m, n, k, dtype)
                        };
                        check(&case, seed);
                    }
                }
            }
        }
    }
}

#[test]
fn large_and_multi_block_shapes_match_reference() {
    // Several K blocks (uneven), several row chunks, several column chunks, and the
    // multi-threaded path inside one entry.
    use super::blocking::{KC, MCH, NC};
    let shapes = [
        (300, 257, 2 * KC + 8),
        (200, 200, 4 * KC - 24),
        (40, NC + 76, KC + 88),
        (MCH + 76, 40, 20),
        (MCH + 1, NC + 6, 3),
        (MCH + 5, 33, KC + 1),
        (5, 3 * NC - 72, KC + 1),
    ];
    for (s, &(m, n, k)) in shapes.iter().enumerate() {
        let dtype = DTYPES[s % 3];
        let case = Case {
            a: LAYOUTS[s % 2],
            b: LAYOUTS[(s / 2) % 2],
            bias: Some(dtype),
            mode: modes(dtype)[s % 4],
            pad: s % 2,
            ..Case::new(m, n, k, dtype)
        };
        check(&case, 1000 + s as u64);
    }
}

#[test]
fn batched_strided_misaligned_calls_match_reference() {
    // Small entries (spread over the pool one per task) and large ones (each parallel).
    for (s, &(m, n, k, batch)) in [(7, 9, 13, 5), (33, 17, 65, 3), (130, 129, 70, 3)]
        .iter()
        .enumerate()
    {
        for dtype in DTYPES {
            for mode in [OutputMode::Overwrite(dtype), OutputMode::AccumulateF32] {
                let case = Case {
                    batch,
                    a: LAYOUTS[s % 2],
                    b: LAYOUTS[(s + 1) % 2],
                    bias: Some(DType::F32),
                    pad: 3,
                    misalign: true,
                    mode,
                    ..Case::new(m, n, k, dtype)
                };
                check(&case, 2000 + s as u64);
            }
        }
    }
}

#[test]
fn special_values_match_reference() {
    // NaN, ±Inf, ±0 and subnormals in A, B, bias and the initial C; 1/4 and 1/32 of inputs.
    let mut seed = 3000;
    for specials in [64, 8] {
        for dtype in DTYPES {
            for mode in modes(dtype) {
                for (m, n, k) in [(13, 35, 9), (70, 40, 300)] {
                    seed += 1;
                    let case = Case {
                        a: LAYOUTS[(seed % 2) as usize],
                        b: LAYOUTS[(seed / 2 % 2) as usize],
                        bias: Some(dtype),
                        specials,
                        mode,
                        ..Case::new(m, n, k, dtype)
                    };
                    check(&case, seed);
                }
            }
        }
    }
}

#[test]
fn k_zero_stores_bias_or_zero() {
    for dtype in DTYPES {
        for mode in modes(dtype) {
            for bias in [None, Some(DType::F32)] {
                check(
                    &Case {
                        bias,
                        mode,
                        batch: 2,
                        ..Case::new(5, 19, 0, dtype)
                    },
                    4000,
                );
            }
        }
    }
    // And the values themselves: 0 + bias, and +0.0 (not -0.0) without one.
    let g = Gemm {
        bias: Some(DType::F32),
        ..Gemm::dense(2, 3, 0, DType::F32)
    };
    let bias = [1.5f32, -0.0, -2.0];
    let mut c = [f32::NAN; 6];
    let p = GemmPointers {
        a: std::ptr::null(),
        b: std::ptr::null(),
        bias: bias.as_ptr().cast(),
        c: c.as_mut_ptr().cast(),
    };
    // SAFETY: K = 0 reads neither A nor B; bias holds N = 3 and C M·N = 6 elements.
    unsafe { super::gemm(&g, &p) };
    assert_eq!(
        c.map(f32::to_bits),
        [1.5f32, 0.0, -2.0, 1.5, 0.0, -2.0].map(f32::to_bits)
    );
}

#[test]
fn thread_count_does_not_change_bits() {
    // One large entry (split into tasks) and a batch of small ones (one task per entry),
    // on pools of 1, 2 and 3 threads: every run must match the reference.
    let cases = [
        Case {
            a: Layout::ColMajor,
            bias: Some(DType::F32),
            ..Case::new(150, 170, 600, DType::BF16)
        },
        Case {
            batch: 7,
            mode: OutputMode::AccumulateF32,
            ..Case::new(9, 40, 11, DType::F32)
        },
    ];
    for threads in 1..=3 {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        for (i, case) in cases.iter().enumerate() {
            pool.install(|| check(case, 5000 + i as u64));
        }
    }
}

fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![Just(Layout::RowMajor), Just(Layout::ColMajor)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn random_calls_match_reference(
        m in 0usize..80, n in 0usize..80, k in 0usize..300, batch in 0usize..3,
        a in layout(), b in layout(), d in 0usize..3, bias in 0usize..3, mode in 0usize..4,
        pad in 0usize..3, misalign: bool, specials in prop_oneof![Just(0u32), Just(16)],
        seed: u64,
    ) {
        let dtype = DTYPES[d];
        let case = Case {
            batch, a, b, pad, misalign, specials,
            bias: [None, Some(DType::F32), Some(dtype)][bias],
            mode: modes(dtype)[mode],
            ..Case::new(m, n, k, dtype)
        };
        check(&case, seed);
    }
}

/// Runs `case` on a one-thread pool, where every entry that `blocking::small` admits takes
/// the small-entry loop nest (on more threads, large ones are split into tasks instead).
fn check_one_thread(case: &Case, seed: u64) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    pool.install(|| check(case, seed));
}

#[test]
fn small_entries_match_reference_at_their_edges() {
    use super::blocking::{small, KC};
    use super::kernel::MR;
    // The row and depth limits of the small nest, just inside and just outside, with
    // several K blocks, partial panels of B and of A, every layout, dtype and mode.
    let mc = (1..).find(|&m| !small(m, 1)).unwrap() - 1;
    let k_max = |m: usize| (1..).find(|&k| !small(m, k)).unwrap() - 1;
    let shapes = [
        (mc, 45, k_max(mc)),
        (mc, 33, k_max(mc) + 1),
        (mc + 1, 40, 3 * KC + 5),
        (1, 300, KC + 1),
        (MR + 1, 31, 2 * KC),
        (2, 1, 5 * KC + 3),
    ];
    for (s, &(m, n, k)) in shapes.iter().enumerate() {
        let dtype = DTYPES[s % 3];
        let case = Case {
            a: LAYOUTS[s % 2],
            b: LAYOUTS[s / 2 % 2],
            bias: [None, Some(DType::F32), Some(dtype)][s % 3],
            mode: modes(dtype)[s % 4],
            // No NaN or Inf: over these depths almost every chain would meet one, and a
            // NaN result hides how the chain was computed.
            ..Case::new(m, n, k, dtype)
        };
        check_one_thread(&case, 7000 + s as u64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The small-entry nest (one thread, at most one task of rows): shapes across its K
    /// blocks and B panels, every layout, dtype, bias and mode, NaN/Inf/subnormal inputs.
    #[test]
    fn small_entries_match_reference(
        m in 1usize..100, n in 1usize..130, k in 0usize..700, batch in 1usize..3,
        a in layout(), b in layout(), d in 0usize..3, bias in 0usize..3, mode in 0usize..4,
        pad in 0usize..2, misalign: bool, specials in prop_oneof![Just(0u32), Just(1), Just(24)],
        seed: u64,
    ) {
        let dtype = DTYPES[d];
        let case = Case {
            batch, a, b, pad, misalign, specials,
            bias: [None, Some(DType::F32), Some(dtype)][bias],
            mode: modes(dtype)[mode],
            ..Case::new(m, n, k, dtype)
        };
        check_one_thread(&case, seed);
    }
}
