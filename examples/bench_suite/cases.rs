//! The suite's target table (the shapes training and serving run, each with the ratio to cuBLAS
//! it aims at) as a list of cases, and the `--only` filter.

use sgemm_bi::{DType, Gemm, Linear, OutputMode, Tier, WeightLayout};

/// A row group of the target table (its name is what `--only` matches first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// bf16/f16 forward at training shapes.
    Train,
    /// bf16 weight gradient, accumulated into f32.
    Dw,
    /// bf16 input gradient.
    Dx,
    /// bf16 forward at small-model shapes.
    Small,
    /// bf16 forward at decode / small-batch M (memory-bound).
    Decode,
    /// bf16 forward between decode and training M at K = N = 4096, for the plot (no target).
    Sweep,
    /// The scalar tier (f32 and bf16) against SGEMM with TF32 off.
    Scalar,
    /// The scalar tier at decode M (memory-bound), against SGEMM with TF32 off.
    ScalarDecode,
}

impl Group {
    pub const fn name(self) -> &'static str {
        match self {
            Group::Train => "train",
            Group::Dw => "dw",
            Group::Dx => "dx",
            Group::Small => "small",
            Group::Decode => "decode",
            Group::Sweep => "sweep",
            Group::Scalar => "scalar",
            Group::ScalarDecode => "scalar-decode",
        }
    }

    /// What the table's "case" column says.
    pub const fn label(self) -> &'static str {
        match self {
            Group::Train => "fwd, training",
            Group::Dw => "dW += Xᵀ·dY (f32)",
            Group::Dx => "dX = dY·Wᵀ",
            Group::Small => "fwd, small model",
            Group::Decode => "fwd, decode",
            Group::Sweep => "fwd, M sweep",
            Group::Scalar => "scalar tier",
            Group::ScalarDecode => "scalar tier, decode",
        }
    }
}

/// The bar a row is measured against, always on the cuBLAS-default ratio except
/// for the bf16 scalar tier, whose bar is the f32 scalar tier's speed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Target {
    /// ratio ≥ `goal`; between `floor` and `goal` the row is "near".
    Ratio {
        goal: f64,
        floor: f64,
    },
    /// ours ≥ the f32 scalar tier at the same shape.
    F32Scalar,
    /// ours within `within` × the memory floor (the case's bytes over
    /// [`MEMORY_FLOOR_BYTES_PER_S`]).
    MemoryFloor {
        within: f64,
    },
    None,
}

impl Target {
    /// The bar as the table shows it (`{:?}` keeps `1.0` and `0.95` as written).
    pub fn text(self) -> String {
        match self {
            Target::Ratio { goal, floor } if floor < goal => {
                format!("≥ {goal:?}× (never < {floor:?}×)")
            }
            Target::Ratio { goal, .. } => format!("≥ {goal:?}×"),
            Target::F32Scalar => "≥ f32 scalar".into(),
            Target::MemoryFloor { within } => format!("≤ {within:?}× memory floor"),
            Target::None => "–".into(),
        }
    }
}

/// One row of the table: the engine call, and what cuBLAS runs against it.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    pub group: Group,
    pub linear: Linear,
    pub target: Target,
}

impl Case {
    /// `group/dtype/MxKxN/weight`: what `--only` matches and the CSV's `case` column.
    pub fn id(&self) -> String {
        let l = &self.linear;
        format!(
            "{}/{}/{}x{}x{}/{}",
            self.group.name(),
            l.dtype,
            l.m,
            l.k,
            l.n,
            self.weight_name().to_lowercase()
        )
    }

    pub fn weight_name(&self) -> &'static str {
        match (self.group, self.linear.weight) {
            (Group::Scalar, _) => "dense",
            (_, WeightLayout::KN) => "KN",
            (_, WeightLayout::NK) => "NK",
        }
    }

    /// The descriptor the engine runs (and cuBLAS mirrors): the layer's forward, dW or dX.
    pub fn gemm(&self) -> Gemm {
        match self.group {
            Group::Dw => self.linear.backward_dw(OutputMode::AccumulateF32),
            Group::Dx => self.linear.backward_dx(),
            _ => self.linear.forward(None),
        }
    }

    pub fn flops(&self) -> f64 {
        let l = &self.linear;
        2.0 * l.m as f64 * l.k as f64 * l.n as f64
    }

    /// Bytes a GEMM must move at least: A and B once, C written once (read too when
    /// accumulating).
    pub fn bytes(&self) -> f64 {
        let g = self.gemm();
        let c_passes = if g.c.mode == OutputMode::AccumulateF32 {
            2
        } else {
            1
        };
        let elems = |r: usize, c: usize| (r * c) as f64;
        elems(g.m, g.k) * g.a.dtype.size() as f64
            + elems(g.k, g.n) * g.b.dtype.size() as f64
            + elems(g.m, g.n) * (g.c.mode.dtype().size() * c_passes) as f64
    }

    /// Rows of the scalar tier, whose cuBLAS opponent is f32 SGEMM.
    pub fn scalar(&self) -> bool {
        matches!(self.group, Group::Scalar | Group::ScalarDecode)
    }

    /// Rows whose bar is bandwidth: their GB/s is shown.
    pub fn memory_bound(&self) -> bool {
        matches!(self.group, Group::Decode | Group::ScalarDecode)
    }

    /// Seconds to move [`Case::bytes`] at [`MEMORY_FLOOR_BYTES_PER_S`].
    pub fn memory_floor_s(&self) -> f64 {
        self.bytes() / MEMORY_FLOOR_BYTES_PER_S
    }
}

const TRAIN: [(usize, usize, usize); 5] = [
    (16384, 4096, 4096),
    (16384, 4096, 14336),
    (16384, 14336, 4096),
    (8192, 8192, 8192),
    (4096, 4096, 4096),
];
const SMALL: [(usize, usize, usize); 3] = [(2048, 768, 3072), (4096, 1536, 3072), (2048, 768, 512)];
const DECODE_M: [usize; 6] = [1, 8, 16, 64, 128, 256];
const DECODE_N: [usize; 2] = [4096, 14336];
/// With DECODE_M and the training rows at K = N = 4096 (M = 4096, 16384), the plot's M axis.
const SWEEP_M: [usize; 4] = [512, 1024, 2048, 8192];
const SCALAR: [(usize, usize, usize); 2] = [(4096, 4096, 4096), (2048, 768, 3072)];
/// The scalar tier at decode: M rows against a weight of K = 4096 by N, in torch's [out, in]
/// layout (what a serving step reads).
const SCALAR_DECODE_M: [usize; 4] = [1, 4, 16, 64];
/// An H200's device-to-device copy rate, the memory floor's bandwidth (below the 4.8 TB/s
/// of the datasheet; no kernel streams faster).
pub const MEMORY_FLOOR_BYTES_PER_S: f64 = 4.3e12;

/// Every case, in table order, with the tensor-core rows for each of `weights`.
pub fn all(weights: &[WeightLayout]) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut push = |group, (m, k, n), dtype, weight, tier, target| {
        cases.push(Case {
            group,
            linear: Linear {
                m,
                k,
                n,
                dtype,
                weight,
                tier,
            },
            target,
        })
    };
    let tc = Tier::TensorCores;
    let ratio = |goal, floor| Target::Ratio { goal, floor };
    for &w in weights {
        for dtype in [DType::BF16, DType::F16] {
            for shape in TRAIN {
                push(Group::Train, shape, dtype, w, tc, ratio(1.0, 0.95));
            }
        }
        for group in [Group::Dw, Group::Dx] {
            for shape in TRAIN {
                push(group, shape, DType::BF16, w, tc, ratio(0.95, 0.95));
            }
        }
        for shape in SMALL {
            push(Group::Small, shape, DType::BF16, w, tc, ratio(0.9, 0.9));
        }
        for n in DECODE_N {
            for m in DECODE_M {
                push(
                    Group::Decode,
                    (m, 4096, n),
                    DType::BF16,
                    w,
                    tc,
                    ratio(1.0, 1.0),
                );
            }
        }
        for m in SWEEP_M {
            push(
                Group::Sweep,
                (m, 4096, 4096),
                DType::BF16,
                w,
                tc,
                Target::None,
            );
        }
    }
    for shape in SCALAR {
        let kn = WeightLayout::KN;
        push(
            Group::Scalar,
            shape,
            DType::F32,
            kn,
            Tier::Scalar,
            ratio(0.9, 0.9),
        );
        push(
            Group::Scalar,
            shape,
            DType::BF16,
            kn,
            Tier::Scalar,
            Target::F32Scalar,
        );
    }
    for dtype in [DType::F32, DType::BF16] {
        for n in DECODE_N {
            for m in SCALAR_DECODE_M {
                push(
                    Group::ScalarDecode,
                    (m, 4096, n),
                    dtype,
                    WeightLayout::NK,
                    Tier::Scalar,
                    Target::MemoryFloor { within: 2.0 },
                );
            }
        }
    }
    cases
}

/// The cases that match any of `terms` (all of them when `terms` is empty): a term matches
/// a group's name exactly, or any part of a case's id (`decode`, `f16`, `/16384x`, `nk`).
pub fn select(cases: Vec<Case>, terms: &[String]) -> Vec<Case> {
    if terms.is_empty() {
        return cases;
    }
    cases
        .into_iter()
        .filter(|c| {
            let id = c.id();
            terms
                .iter()
                .any(|t| t == c.group.name() || id.contains(&t.to_lowercase()))
        })
        .collect()
}
