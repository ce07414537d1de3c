//! The grouped GEMM's contract on the CPU engine: every group's part of C has the bits of the
//! dense call of that part with the group's operand, whatever the other groups hold; a row
//! (a token) keeps its bits when the routing of every other token changes; rows past the last
//! group are +0.0; bad offsets are rejected before anything is written.

mod common;

use common::*;
use proptest::prelude::{prop_assert, prop_assert_eq, proptest, ProptestConfig};
use sgemm_bi::{
    DType, Engine, Error, ErrorOperand, Gemm, GroupOffsets, GroupSplit, GroupedGemm, Layout,
    Operand, Output, OutputMode, Tier,
};

/// Cumulative ends for `sizes`.
fn ends(sizes: &[usize]) -> Vec<i32> {
    sizes
        .iter()
        .scan(0usize, |end, &s| {
            *end += s;
            Some(*end as i32)
        })
        .collect()
}

/// Random group sizes summing to at most `total` (some empty, some large).
fn routing(rng: &mut Rng, groups: usize, total: usize) -> Vec<usize> {
    let mut sizes = vec![0; groups];
    let routed = total - rng.below(3).min(total);
    for _ in 0..routed {
        // Uneven: the first groups take more.
        let g = rng.below(groups).min(rng.below(groups));
        sizes[g] += 1;
    }
    sizes
}

struct Grouped {
    gg: GroupedGemm,
    a: Buf,
    b: Buf,
    bias: Option<Buf>,
}

impl Grouped {
    fn new(gg: GroupedGemm, a_len: usize, b_len: usize, bias_len: usize, rng: &mut Rng) -> Self {
        let dtype = gg.gemm.a.dtype;
        Grouped {
            a: Buf::random(dtype, a_len, rng, NARROW),
            b: Buf::random(dtype, b_len, rng, NARROW),
            bias: gg.gemm.bias.map(|d| Buf::random(d, bias_len, rng, NARROW)),
            gg,
        }
    }

    fn run(&self, engine: &Engine, offsets: &[i32], c: &mut Buf) -> sgemm_bi::Result<()> {
        engine.grouped_gemm_host(
            &self.gg,
            offsets,
            self.a.slice(),
            self.b.slice(),
            self.bias.as_ref().map(|b| b.slice()),
            c.slice_mut(),
        )
    }

    /// C as the dense calls of the groups give it, each run on copies of its group's parts
    /// that this test cuts out itself (not with the library's [`GroupedGemm::group`]).
    fn dense(&self, engine: &Engine, offsets: &[i32], c: &mut Buf) {
        let g = &self.gg.gemm;
        let mut start = 0;
        for (group, &end) in offsets.iter().enumerate() {
            let end = end as usize;
            let len = end - start;
            // The group's rows × columns of A and B and its part of C, by (row, column) ranges
            // and batch entry.
            let (a_rows, a_cols, b_rows, b_cols, c_rows, c_cols) = match self.gg.split {
                GroupSplit::Rows => (start..end, 0..g.k, 0..g.k, 0..g.n, start..end, 0..g.n),
                GroupSplit::Columns => (0..g.m, 0..g.k, 0..g.k, start..end, 0..g.m, start..end),
                GroupSplit::Reduction => (0..g.m, start..end, start..end, 0..g.n, 0..g.m, 0..g.n),
            };
            let a_entry = if self.gg.split == GroupSplit::Columns {
                group
            } else {
                0
            };
            let b_entry = if self.gg.split == GroupSplit::Rows {
                group
            } else {
                0
            };
            let c_entry = if self.gg.split == GroupSplit::Reduction {
                group
            } else {
                0
            };
            let a = cut(&self.a, &g.a, a_entry, a_rows.clone(), a_cols);
            let b = cut(&self.b, &g.b, b_entry, b_rows, b_cols.clone());
            let bias = self.bias.as_ref().map(|bias| {
                let first = if self.gg.split == GroupSplit::Rows {
                    group * g.n
                } else {
                    0
                };
                let mut part = Buf::filled(bias.dtype(), b_cols.len(), 0);
                for (j, col) in b_cols.clone().enumerate() {
                    part.set_bits(j, bias.bits(first + col));
                }
                part
            });
            let k = if self.gg.split == GroupSplit::Reduction {
                len
            } else {
                g.k
            };
            let (m, n) = (c_rows.len(), c_cols.len());
            start = end;
            if m == 0 || n == 0 {
                continue;
            }
            let c_base = c_entry * g.c.batch_stride;
            let mut part = Buf::filled(c.dtype(), m * n, 0);
            for (i, row) in c_rows.clone().enumerate() {
                for (j, col) in c_cols.clone().enumerate() {
                    part.set_bits(i * n + j, c.bits(c_base + row * g.c.ldc + col));
                }
            }
            let dense = Gemm {
                m,
                n,
                k,
                batch: 1,
                a: Operand::row_major(g.a.dtype, k),
                b: Operand::row_major(g.b.dtype, n),
                bias: g.bias,
                c: Output {
                    mode: g.c.mode,
                    ldc: n.max(1),
                    batch_stride: 0,
                },
                tier: g.tier,
            };
            engine
                .gemm_host(
                    &dense,
                    a.slice(),
                    b.slice(),
                    bias.as_ref().map(|b| b.slice()),
                    part.slice_mut(),
                )
                .unwrap_or_else(|e| panic!("group {group}: {e}"));
            for (i, row) in c_rows.clone().enumerate() {
                for (j, col) in c_cols.clone().enumerate() {
                    c.set_bits(c_base + row * g.c.ldc + col, part.bits(i * n + j));
                }
            }
        }
    }
}

/// Rows `rows` × columns `cols` of batch entry `entry` of `op` in `buf`, copied row-major.
fn cut(
    buf: &Buf,
    op: &Operand,
    entry: usize,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
) -> Buf {
    let mut out = Buf::filled(buf.dtype(), (rows.len() * cols.len()).max(1), 0);
    for (i, r) in rows.clone().enumerate() {
        for (j, c) in cols.clone().enumerate() {
            let from = entry * op.batch_stride + at(op.layout, op.ld, r, c);
            out.set_bits(i * cols.len() + j, buf.bits(from));
        }
    }
    out
}

/// `tokens × k` activations routed to `groups` experts with weights `[G, K, N]` (`layout`:
/// row-major `[G, K, N]`, or column-major = torch's `[G, N, K]` weight transposed), a bias
/// per expert.
fn rows_case(
    dtype: DType,
    tier: Tier,
    layout: Layout,
    (tokens, k, n, groups): (usize, usize, usize, usize),
    bias: bool,
    rng: &mut Rng,
) -> Grouped {
    let b = match layout {
        Layout::RowMajor => Operand::row_major(dtype, n),
        Layout::ColMajor => Operand::col_major(dtype, k),
    }
    .with_batch_stride(k * n);
    let gg = GroupedGemm {
        split: GroupSplit::Rows,
        gemm: Gemm {
            batch: groups,
            b,
            bias: bias.then_some(DType::F32),
            tier,
            ..Gemm::dense(tokens, n, k, dtype)
        },
    };
    Grouped::new(gg, tokens * k, groups * k * n, groups * n, rng)
}

const TIERS: [(DType, Tier); 4] = [
    (DType::F32, Tier::Scalar),
    (DType::BF16, Tier::Scalar),
    (DType::BF16, Tier::TensorCores),
    (DType::F16, Tier::TensorCores),
];

#[test]
fn each_group_of_rows_has_the_bits_of_its_dense_call() {
    let engine = cpu();
    let mut rng = Rng::new(7);
    for (dtype, tier) in TIERS {
        for layout in LAYOUTS {
            for (tokens, k, n, groups) in [(37, 24, 19, 5), (130, 40, 33, 8), (9, 17, 8, 12)] {
                let case = rows_case(dtype, tier, layout, (tokens, k, n, groups), true, &mut rng);
                let routings = [
                    routing(&mut rng, groups, tokens),
                    // Everything in one group, the others empty.
                    (0..groups)
                        .map(|g| if g == 1 { tokens } else { 0 })
                        .collect(),
                    // Every group empty: C is all +0.0.
                    vec![0; groups],
                ];
                for sizes in routings {
                    let offsets = ends(&sizes);
                    let mut got = Buf::sentinel(dtype, tokens * n);
                    case.run(&engine, &offsets, &mut got).unwrap();
                    let mut want = Buf::filled(dtype, tokens * n, 0);
                    case.dense(&engine, &offsets, &mut want);
                    assert_same_bits(
                        &got,
                        &want,
                        &format!("{dtype} {tier} B {layout:?} {sizes:?}"),
                    );
                }
            }
        }
    }
}

#[test]
fn a_token_keeps_its_bits_whatever_the_other_tokens_are_routed_to() {
    let engine = cpu();
    let mut rng = Rng::new(11);
    let (k, n, groups) = (48, 24, 6);
    for (dtype, tier) in TIERS {
        let alone = rows_case(
            dtype,
            tier,
            Layout::ColMajor,
            (1, k, n, groups),
            true,
            &mut rng,
        );
        let token: Vec<u32> = alone.a.all_bits();
        for expert in [0, 3, groups - 1] {
            // The token alone in its expert's group...
            let mut sizes = vec![0; groups];
            sizes[expert] = 1;
            let mut one = Buf::sentinel(dtype, n);
            alone.run(&engine, &ends(&sizes), &mut one).unwrap();
            // ...and among 200 others, at a random place of its group, with every other
            // group's size changed.
            let tokens = 201;
            let mut big = Grouped {
                a: Buf::random(dtype, tokens * k, &mut rng, NARROW),
                ..rows_case(
                    dtype,
                    tier,
                    Layout::ColMajor,
                    (tokens, k, n, groups),
                    true,
                    &mut rng,
                )
            };
            big.b = alone.b.clone();
            big.bias = alone.bias.clone();
            let mut sizes = routing(&mut rng, groups, tokens - 1);
            let routed: usize = sizes.iter().sum();
            sizes[expert] += 1;
            let before: usize = sizes[..expert].iter().sum();
            let row = before + rng.below(sizes[expert]);
            for (i, &bits) in token.iter().enumerate() {
                big.a.set_bits(row * k + i, bits);
            }
            let mut all = Buf::sentinel(dtype, tokens * n);
            big.run(&engine, &ends(&sizes), &mut all).unwrap();
            for j in 0..n {
                assert_eq!(
                    all.bits(row * n + j),
                    one.bits(j),
                    "{dtype} {tier} expert {expert}: row {row} of {}, column {j}",
                    routed + 1
                );
            }
        }
    }
}

#[test]
fn rows_past_the_last_group_are_cleared_or_kept() {
    let engine = cpu();
    let mut rng = Rng::new(3);
    let (tokens, k, n, groups) = (20, 8, 6, 3);
    let mut case = rows_case(
        DType::F32,
        Tier::Scalar,
        Layout::RowMajor,
        (tokens, k, n, groups),
        true,
        &mut rng,
    );
    let offsets = [4, 9, 15];
    let mut c = Buf::sentinel(DType::F32, tokens * n);
    case.run(&engine, &offsets, &mut c).unwrap();
    for i in 15 * n..tokens * n {
        assert_eq!(c.bits(i), 0, "element {i} past the last group is +0.0");
    }
    // Accumulating: the rows past the end keep what C held.
    case.gg.gemm.c.mode = OutputMode::AccumulateF32;
    let mut acc = Buf::random(DType::F32, tokens * n, &mut rng, NARROW);
    let before = acc.clone();
    case.run(&engine, &offsets, &mut acc).unwrap();
    for i in 15 * n..tokens * n {
        assert_eq!(
            acc.bits(i),
            before.bits(i),
            "element {i} past the last group"
        );
    }
    assert_ne!(
        acc.bits(0),
        before.bits(0),
        "rows of a group are accumulated into"
    );
}

/// The experts' weight gradient: `dW[g] = Xᵀ[:, rows of g] · dY[rows of g, :]`, torch's 2-D
/// × 2-D grouped_mm, against the dense dW of the group's rows.
#[test]
fn each_group_of_a_split_reduction_has_the_bits_of_its_dense_weight_gradient() {
    let engine = cpu();
    let mut rng = Rng::new(5);
    for (dtype, tier) in TIERS {
        for mode in [OutputMode::Overwrite(dtype), OutputMode::AccumulateF32] {
            let (tokens, k_in, n, groups) = (90, 20, 13, 7);
            // A = Xᵀ (k_in × tokens): X row-major [tokens, k_in] read column-major.
            let gg = GroupedGemm {
                split: GroupSplit::Reduction,
                gemm: Gemm {
                    m: k_in,
                    n,
                    k: tokens,
                    batch: groups,
                    a: Operand::col_major(dtype, k_in),
                    b: Operand::row_major(dtype, n),
                    bias: None,
                    c: Output {
                        mode,
                        ldc: n,
                        batch_stride: k_in * n,
                    },
                    tier,
                },
            };
            let case = Grouped::new(gg, tokens * k_in, tokens * n, 0, &mut rng);
            let mut sizes = routing(&mut rng, groups, tokens);
            sizes[2] = 0;
            let offsets = ends(&sizes);
            let out = mode.dtype();
            let start = Buf::random(out, groups * k_in * n, &mut rng, NARROW);
            let mut got = start.clone();
            case.run(&engine, &offsets, &mut got).unwrap();
            let mut want = start.clone();
            case.dense(&engine, &offsets, &mut want);
            assert_same_bits(&got, &want, &format!("{dtype} {tier} {mode:?} {sizes:?}"));
            if matches!(mode, OutputMode::Overwrite(_)) {
                // An empty group's gradient is the empty chain's +0.0.
                for i in 2 * k_in * n..3 * k_in * n {
                    assert_eq!(got.bits(i), 0, "empty group, element {i}");
                }
            }
        }
    }
}

/// torch's 3-D × 2-D: each group owns columns of B and C, with its own A.
#[test]
fn each_group_of_columns_has_the_bits_of_its_dense_call() {
    let engine = cpu();
    let mut rng = Rng::new(9);
    for (dtype, tier) in TIERS {
        let (m, k, n_total, groups) = (11, 30, 50, 4);
        let gg = GroupedGemm {
            split: GroupSplit::Columns,
            gemm: Gemm {
                batch: groups,
                a: Operand::row_major(dtype, k).with_batch_stride(m * k),
                b: Operand::col_major(dtype, k),
                bias: Some(dtype),
                tier,
                ..Gemm::dense(m, n_total, k, dtype)
            },
        };
        let case = Grouped::new(gg, groups * m * k, n_total * k, n_total, &mut rng);
        let offsets = ends(&routing(&mut rng, groups, n_total));
        let mut got = Buf::sentinel(dtype, m * n_total);
        case.run(&engine, &offsets, &mut got).unwrap();
        let mut want = Buf::filled(dtype, m * n_total, 0);
        case.dense(&engine, &offsets, &mut want);
        assert_same_bits(&got, &want, &format!("{dtype} {tier} {offsets:?}"));
    }
}

#[test]
fn bad_offsets_are_rejected_before_anything_is_written() {
    let engine = cpu();
    let mut rng = Rng::new(1);
    let (tokens, k, n, groups) = (10, 4, 3, 3);
    let case = rows_case(
        DType::F32,
        Tier::Scalar,
        Layout::RowMajor,
        (tokens, k, n, groups),
        false,
        &mut rng,
    );
    let bad: [(&[i32], usize); 5] = [
        (&[3, 2, 10], 1),   // decreasing
        (&[-1, 2, 10], 0),  // negative
        (&[3, 5, 11], 2),   // past the end
        (&[3, 5], 2),       // one short
        (&[1, 2, 3, 4], 3), // one too many
    ];
    for (offsets, group) in bad {
        let mut c = Buf::sentinel(DType::F32, tokens * n);
        let err = case.run(&engine, offsets, &mut c).unwrap_err();
        assert!(
            matches!(err, Error::BadOffsets { group: g, .. } if g == group),
            "{offsets:?}: {err}"
        );
        assert_eq!(
            c.all_bits(),
            Buf::sentinel(DType::F32, tokens * n).all_bits()
        );
    }
    // Offsets in device memory mean nothing to the CPU engine.
    let mut c = Buf::sentinel(DType::F32, tokens * n);
    let p = sgemm_bi::GemmPointers {
        a: case.a.as_ptr(),
        b: case.b.as_ptr(),
        bias: std::ptr::null(),
        c: c.as_mut_ptr(),
    };
    let offsets = [3, 5, 10];
    // SAFETY: every buffer holds the whole call's span; the call is refused before use.
    let err = unsafe {
        engine.grouped_gemm(
            &case.gg,
            GroupOffsets::Device(offsets.as_ptr()),
            p,
            Default::default(),
        )
    }
    .unwrap_err();
    assert!(matches!(err, Error::WrongDevice(_)), "{err}");
}

#[test]
fn bad_descriptors_are_rejected() {
    let engine = cpu();
    let mut rng = Rng::new(2);
    let (tokens, k, n, groups) = (10, 4, 3, 3);
    let case = rows_case(
        DType::F32,
        Tier::Scalar,
        Layout::RowMajor,
        (tokens, k, n, groups),
        true,
        &mut rng,
    );
    // B shorter than its groups need.
    let short = Grouped {
        b: Buf::random(DType::F32, 2 * k * n, &mut rng, NARROW),
        ..rows_case(
            DType::F32,
            Tier::Scalar,
            Layout::RowMajor,
            (tokens, k, n, groups),
            true,
            &mut rng,
        )
    };
    let mut c = Buf::sentinel(DType::F32, tokens * n);
    let err = short.run(&engine, &[1, 2, 3], &mut c).unwrap_err();
    assert!(
        matches!(err, Error::BufferTooSmall { operand: ErrorOperand::B, needed, .. } if needed == groups * k * n),
        "{err}"
    );
    // A bias needs N per group.
    let mut thin = case.gg;
    thin.gemm.bias = Some(DType::F32);
    let few = Buf::random(DType::F32, n, &mut rng, NARROW);
    let err = engine
        .grouped_gemm_host(
            &thin,
            &[1, 2, 3],
            case.a.slice(),
            case.b.slice(),
            Some(few.slice()),
            c.slice_mut(),
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::BufferTooSmall {
                operand: ErrorOperand::Bias,
                ..
            }
        ),
        "{err}"
    );
    // A weight gradient takes no bias.
    let dw = GroupedGemm {
        split: GroupSplit::Reduction,
        gemm: Gemm {
            batch: groups,
            bias: Some(DType::F32),
            c: Output {
                mode: OutputMode::Overwrite(DType::F32),
                ldc: n,
                batch_stride: tokens * n,
            },
            ..Gemm::dense(tokens, n, k, DType::F32)
        },
    };
    let mut out = Buf::sentinel(DType::F32, groups * tokens * n);
    let err = engine
        .grouped_gemm_host(
            &dw,
            &[1, 2, 3],
            case.a.slice(),
            case.b.slice(),
            Some(few.slice()),
            out.slice_mut(),
        )
        .unwrap_err();
    assert!(matches!(err, Error::UnsupportedDtype(_)), "{err}");
    // Groups of C that overlap.
    let overlapping = GroupedGemm {
        gemm: Gemm {
            bias: None,
            c: Output {
                batch_stride: n,
                ..dw.gemm.c
            },
            ..dw.gemm
        },
        ..dw
    };
    let err = engine
        .grouped_gemm_host(
            &overlapping,
            &[1, 2, 3],
            case.a.slice(),
            case.b.slice(),
            None,
            out.slice_mut(),
        )
        .unwrap_err();
    assert!(matches!(err, Error::OverlappingBatches { .. }), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random shapes, layouts, routings and splits: every group has its dense call's bits.
    #[test]
    fn random_grouped_calls_match_their_dense_calls(
        seed in 0u64..u64::MAX,
        split in 0usize..3,
        (m, n, k, groups) in (1usize..40, 1usize..40, 0usize..40, 1usize..9),
    ) {
        let mut rng = Rng::new(seed);
        let dtype = rng.pick(&DTYPES);
        let tier = if dtype != DType::F32 && rng.bool() { Tier::TensorCores } else { Tier::Scalar };
        let (a_layout, b_layout) = (rng.pick(&LAYOUTS), rng.pick(&LAYOUTS));
        let operand = |layout, rows, cols| match layout {
            Layout::RowMajor => Operand::row_major(dtype, cols),
            Layout::ColMajor => Operand::col_major(dtype, rows),
        };
        let split = [GroupSplit::Rows, GroupSplit::Columns, GroupSplit::Reduction][split];
        let mut a = operand(a_layout, m, k);
        let mut b = operand(b_layout, k, n);
        let mut c = Output { mode: OutputMode::Overwrite(dtype), ldc: n, batch_stride: 0 };
        let (mut a_len, mut b_len, mut c_len, total) = (m * k, k * n, m * n, [m, n, k][split as usize]);
        match split {
            GroupSplit::Rows => { b.batch_stride = k * n; b_len *= groups; }
            GroupSplit::Columns => { a.batch_stride = m * k; a_len *= groups; }
            GroupSplit::Reduction => { c.batch_stride = m * n; c_len *= groups; }
        }
        let bias = (split != GroupSplit::Reduction && rng.bool()).then_some(DType::F32);
        let bias_len = if split == GroupSplit::Rows { groups * n } else { n };
        let gg = GroupedGemm {
            split,
            gemm: Gemm { m, n, k, batch: groups, a, b, bias, c, tier },
        };
        let case = Grouped::new(gg, a_len.max(1), b_len.max(1), bias_len, &mut rng);
        let offsets = ends(&routing(&mut rng, groups, total));
        let mut got = Buf::sentinel(dtype, c_len);
        case.run(&cpu(), &offsets, &mut got).unwrap();
        let mut want = Buf::filled(dtype, c_len, 0);
        case.dense(&cpu(), &offsets, &mut want);
        assert_same_bits(&got, &want, &format!("{split} {dtype} {tier} {offsets:?}"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any offsets: a call either succeeds with each group's dense bits, or fails with
    /// `BadOffsets` naming the first bad group and C untouched, exactly as a check written
    /// here from the documentation decides (one end per group, non-decreasing from 0, none
    /// past the rows).
    #[test]
    fn any_offsets_are_run_or_rejected_before_anything_is_written(
        seed in 0u64..u64::MAX,
        raw in proptest::collection::vec(-3i32..40, 0..7),
        groups in 1usize..6,
    ) {
        let mut rng = Rng::new(seed);
        let (tokens, k, n) = (30, 8, 5);
        let case = rows_case(DType::F32, Tier::Scalar, Layout::RowMajor, (tokens, k, n, groups), true, &mut rng);
        let first_bad = if raw.len() != groups {
            Some(raw.len().min(groups))
        } else {
            let mut previous = 0i32;
            raw.iter().position(|&end| {
                let bad = end < previous || end as i64 > tokens as i64;
                previous = end;
                bad
            })
        };
        let mut got = Buf::sentinel(DType::F32, tokens * n);
        let result = case.run(&cpu(), &raw, &mut got);
        match first_bad {
            Some(group) => {
                let err = result.unwrap_err();
                prop_assert!(matches!(err, Error::BadOffsets { group: g, .. } if g == group), "{raw:?}: {err}");
                prop_assert_eq!(got.all_bits(), Buf::sentinel(DType::F32, tokens * n).all_bits());
            }
            None => {
                result.unwrap();
                let mut want = Buf::filled(DType::F32, tokens * n, 0);
                case.dense(&cpu(), &raw, &mut want);
                prop_assert_eq!(got.all_bits(), want.all_bits());
            }
        }
    }
}
