//! The grouped rows (`--only grouped`): the Mixture-of-Experts GEMMs of torch's
//! `F.grouped_mm`, 128 experts with top-8 routing (rows = tokens × 8), bf16 on the
//! tensor-core tier, with the group offsets in device memory, against a loop of one
//! `cublasGemmEx` per non-empty expert on the same buffers (offsets known on the host).
//!
//! Two passes: the experts' forward (rows split: `[rows, H] · [E, H, W]`, the weights in
//! torch's `[E, W, H]` layout, so each expert's B is column-major) and their weight gradient
//! (reduction split: `dW[e] += Xᵀ · dY` over the expert's rows, accumulated into f32; Xᵀ
//! column-major, dY row-major). Two routings: balanced (every expert equally likely) and
//! Zipf-like (expert i weighs 1/(i+1)), drawn from a fixed seed so every run times the same
//! group sizes.

use std::ffi::c_void;

use cudarc::driver::sys;
use sgemm_bi::{
    DType, Engine, GemmPointers, GroupOffsets, GroupSplit, GroupedGemm, Operand, Output,
    OutputMode, Stream, Tier,
};

use crate::cases::MEMORY_FLOOR_BYTES_PER_S;
use crate::device::{Sizes, Timing};

pub const EXPERTS: usize = 128;
pub const TOP_K: usize = 8;
const TOKENS: [usize; 2] = [4096, 16384];
/// (hidden H, expert width W) of the experts' first layer.
const SHAPES: [(usize, usize); 2] = [(2048, 768), (4096, 1536)];
/// An H200's dense bf16 tensor-core rate (datasheet, without sparsity): the compute floor's.
pub const TENSOR_FLOPS_PER_S: f64 = 989e12;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// `Y = X · W[e]` per expert: the rows split.
    Forward,
    /// `dW[e] += X[e]ᵀ · dY[e]`: the reduction split.
    WeightGrad,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    Balanced,
    Zipf,
}

impl Pass {
    fn name(self) -> &'static str {
        match self {
            Pass::Forward => "fwd",
            Pass::WeightGrad => "wgrad",
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            Pass::Forward => "fwd (rows split)",
            Pass::WeightGrad => "dW += Xᵀ·dY (f32, reduction split)",
        }
    }
}

impl Routing {
    pub fn name(self) -> &'static str {
        match self {
            Routing::Balanced => "balanced",
            Routing::Zipf => "zipf",
        }
    }
}

/// One grouped row of the table.
#[derive(Clone, Debug)]
pub struct GroupedCase {
    pub pass: Pass,
    pub routing: Routing,
    pub tokens: usize,
    pub hidden: usize,
    pub width: usize,
    /// The cumulative group ends (torch's `offs`), `EXPERTS` of them.
    pub ends: Vec<i32>,
}

impl GroupedCase {
    /// `grouped/pass/bf16/TOKENSt/HxW/routing`: what `--only` matches.
    pub fn id(&self) -> String {
        format!(
            "grouped/{}/bf16/{}t/{}x{}/{}",
            self.pass.name(),
            self.tokens,
            self.hidden,
            self.width,
            self.routing.name()
        )
    }

    pub fn rows(&self) -> usize {
        self.tokens * TOP_K
    }

    /// The grouped call the engine runs.
    pub fn call(&self) -> GroupedGemm {
        let (rows, h, w) = (self.rows(), self.hidden, self.width);
        let bf16 = DType::BF16;
        match self.pass {
            Pass::Forward => GroupedGemm {
                split: GroupSplit::Rows,
                gemm: sgemm_bi::Gemm {
                    batch: EXPERTS,
                    b: Operand::col_major(bf16, h).with_batch_stride(h * w),
                    tier: Tier::TensorCores,
                    ..sgemm_bi::Gemm::dense(rows, w, h, bf16)
                },
            },
            Pass::WeightGrad => GroupedGemm {
                split: GroupSplit::Reduction,
                gemm: sgemm_bi::Gemm {
                    batch: EXPERTS,
                    a: Operand::col_major(bf16, h),
                    c: Output {
                        mode: OutputMode::AccumulateF32,
                        ldc: w,
                        batch_stride: h * w,
                    },
                    tier: Tier::TensorCores,
                    ..sgemm_bi::Gemm::dense(h, w, rows, bf16)
                },
            },
        }
    }

    /// The non-empty groups, `(expert, start, end)`.
    pub fn groups(&self) -> Vec<(usize, usize, usize)> {
        let mut start = 0;
        let mut out = Vec::new();
        for (e, &end) in self.ends.iter().enumerate() {
            let end = end as usize;
            if end > start {
                out.push((e, start, end));
            }
            start = end;
        }
        out
    }

    /// The most rows any expert got.
    pub fn largest(&self) -> usize {
        self.groups()
            .iter()
            .map(|&(_, s, e)| e - s)
            .max()
            .unwrap_or(0)
    }

    pub fn flops(&self) -> f64 {
        2.0 * self.rows() as f64 * self.hidden as f64 * self.width as f64
    }

    /// Bytes any implementation must move: the activations once, the weights (forward) or
    /// the f32 gradients (read and written) of the experts that have rows.
    pub fn bytes(&self) -> f64 {
        let (rows, h, w) = (self.rows() as f64, self.hidden as f64, self.width as f64);
        let used = self.groups().len() as f64;
        match self.pass {
            Pass::Forward => 2.0 * (rows * h + used * h * w + rows * w),
            Pass::WeightGrad => 2.0 * (rows * h + rows * w) + 2.0 * 4.0 * used * h * w,
        }
    }

    /// The floor: the time to compute the FLOPs at the tensor-core rate or to move the bytes
    /// at the memory floor's bandwidth, whichever is longer.
    pub fn floor_ms(&self) -> f64 {
        1e3 * (self.flops() / TENSOR_FLOPS_PER_S).max(self.bytes() / MEMORY_FLOOR_BYTES_PER_S)
    }

    /// The bytes of A, B and C of the whole call.
    pub fn sizes(&self) -> Sizes {
        let (rows, h, w) = (self.rows(), self.hidden, self.width);
        match self.pass {
            Pass::Forward => Sizes {
                a: rows * h * 2,
                b: EXPERTS * h * w * 2,
                c: rows * w * 2,
            },
            Pass::WeightGrad => Sizes {
                a: rows * h * 2,
                b: rows * w * 2,
                c: EXPERTS * h * w * 4,
            },
        }
    }
}

/// SplitMix64, for the routing.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The group ends of `tokens` tokens each routed to `TOP_K` distinct experts, drawn one after
/// the other with the routing's weights (a draw of an expert the token already has is drawn
/// again): the counts a router's top-8 would give, the same on every run.
pub fn route(routing: Routing, tokens: usize) -> Vec<i32> {
    let weights: Vec<f64> = (0..EXPERTS)
        .map(|i| match routing {
            Routing::Balanced => 1.0,
            Routing::Zipf => 1.0 / (i + 1) as f64,
        })
        .collect();
    let cumulative: Vec<f64> = weights
        .iter()
        .scan(0.0, |s, w| {
            *s += w;
            Some(*s)
        })
        .collect();
    let total = cumulative[EXPERTS - 1];
    let mut rng = Rng(0x5eed ^ ((tokens as u64) << 8) ^ routing as u64);
    let mut counts = [0usize; EXPERTS];
    for _ in 0..tokens {
        let mut chosen = [usize::MAX; TOP_K];
        let mut n = 0;
        while n < TOP_K {
            let x = rng.unit() * total;
            let e = cumulative.partition_point(|&c| c <= x).min(EXPERTS - 1);
            if !chosen[..n].contains(&e) {
                chosen[n] = e;
                n += 1;
            }
        }
        for e in chosen {
            counts[e] += 1;
        }
    }
    counts
        .iter()
        .scan(0usize, |end, c| {
            *end += c;
            Some(*end as i32)
        })
        .collect()
}

/// Every grouped case, in table order.
pub fn all() -> Vec<GroupedCase> {
    let mut cases = Vec::new();
    for pass in [Pass::Forward, Pass::WeightGrad] {
        for (hidden, width) in SHAPES {
            for tokens in TOKENS {
                for routing in [Routing::Balanced, Routing::Zipf] {
                    cases.push(GroupedCase {
                        pass,
                        routing,
                        tokens,
                        hidden,
                        width,
                        ends: route(routing, tokens),
                    });
                }
            }
        }
    }
    cases
}

/// The cases that match any of `terms` (all when `terms` is empty): `grouped` (the group's
/// name) or any part of a case's id.
pub fn select(cases: Vec<GroupedCase>, terms: &[String]) -> Vec<GroupedCase> {
    if terms.is_empty() {
        return cases;
    }
    cases
        .into_iter()
        .filter(|c| {
            let id = c.id();
            terms
                .iter()
                .any(|t| t == "grouped" || id.contains(t.as_str()))
        })
        .collect()
}

/// One measured grouped case.
pub struct GroupedRow {
    pub case: GroupedCase,
    pub ours: Timing,
    /// The loop of one cublasGemmEx per non-empty expert.
    pub cublas: Timing,
    /// How ours ran: "grouped kernel" or "group by group" (see [`path`]).
    pub path: &'static str,
}

impl GroupedRow {
    pub fn ratio(&self) -> f64 {
        self.cublas.ms / self.ours.ms
    }
}

/// Which path the engine takes for `gg` with the device offsets `ends` on `p`: the call is
/// captured in a CUDA graph (and the graph dropped unlaunched), which only the grouped
/// kernel survives: the group-by-group path reads the offsets back first, which a capture
/// refuses.
///
/// # Safety
/// As for [`Engine::grouped_gemm`]; nothing is launched.
pub unsafe fn path(
    engine: &Engine,
    gg: &GroupedGemm,
    ends: *const i32,
    p: GemmPointers,
    stream: sys::CUstream,
) -> &'static str {
    let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    // SAFETY: driver calls on a live stream of the engine's context; the captured call only
    // records work (the caller's contract for its buffers), and the graph is destroyed
    // without being launched.
    unsafe {
        sys::cuStreamBeginCapture_v2(stream, mode)
            .result()
            .expect("cuStreamBeginCapture");
        let call = engine.grouped_gemm(
            gg,
            GroupOffsets::Device(ends),
            p,
            Stream(stream as *mut c_void),
        );
        let mut graph = std::ptr::null_mut();
        let ended = sys::cuStreamEndCapture(stream, &mut graph).result();
        if !graph.is_null() {
            let _ = sys::cuGraphDestroy(graph);
        }
        match (call, ended) {
            (Ok(()), Ok(())) => "grouped kernel",
            _ => "group by group",
        }
    }
}
