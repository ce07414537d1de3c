//! The training triad of a linear layer as GEMM descriptors: forward `Y = X·W + b`, the
//! weight gradient `dW = Xᵀ·dY` and the input gradient `dX = dY·Wᵀ`.
//!
//! X, Y, dY and dX are dense row-major `[M, ·]` matrices. W is stored either `[K, N]`
//! (in × out) or as torch stores it, `[N, K]` (out × in); dW has W's layout. Each pass is
//! expressed as one [`Gemm`], so it inherits the tier's contract: every output element is one
//! chain over the reduced dimension in ascending order.

use crate::types::{dense_ld, DType, Gemm, Layout, Operand, Output, OutputMode, Tier};

/// How a weight matrix is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WeightLayout {
    /// `W[K, N]`, row-major: in_features × out_features.
    KN = 0,
    /// `W[N, K]`, row-major: out_features × in_features (torch's `nn.Linear.weight`).
    NK = 1,
}

/// A linear layer applied to `m` rows: `k` input features, `n` output features.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Linear {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// Element type of X, W, dY (and of Y and dX, which are written in it).
    pub dtype: DType,
    pub weight: WeightLayout,
    pub tier: Tier,
}

impl Linear {
    fn weight_as_b(&self) -> Operand {
        match self.weight {
            WeightLayout::KN => Operand::row_major(self.dtype, self.n),
            WeightLayout::NK => Operand::col_major(self.dtype, self.k),
        }
    }

    /// `Y[M,N] = X[M,K] · W (+ bias[N])`, Y in `dtype`; the bias is f32 or `dtype`.
    pub fn forward(&self, bias: Option<DType>) -> Gemm {
        Gemm {
            m: self.m,
            n: self.n,
            k: self.k,
            batch: 1,
            a: Operand::row_major(self.dtype, self.k),
            b: self.weight_as_b(),
            bias,
            c: Output {
                mode: OutputMode::Overwrite(self.dtype),
                ldc: dense_ld(self.n),
                batch_stride: 0,
            },
            tier: self.tier,
        }
    }

    /// `dW = Xᵀ · dY` (reduced over the M rows, ascending), stored in W's layout: overwritten
    /// in a dtype, or accumulated into f32 (`dW += …`).
    pub fn backward_dw(&self, mode: OutputMode) -> Gemm {
        let (m, n, a, b) = match self.weight {
            // dW[K,N] = Xᵀ[K,M] · dY[M,N]
            WeightLayout::KN => (
                self.k,
                self.n,
                Operand::col_major(self.dtype, self.k),
                Operand::row_major(self.dtype, self.n),
            ),
            // dW[N,K] = dYᵀ[N,M] · X[M,K]
            WeightLayout::NK => (
                self.n,
                self.k,
                Operand::col_major(self.dtype, self.n),
                Operand::row_major(self.dtype, self.k),
            ),
        };
        Gemm {
            m,
            n,
            k: self.m,
            batch: 1,
            a,
            b,
            bias: None,
            c: Output {
                mode,
                ldc: dense_ld(n),
                batch_stride: 0,
            },
            tier: self.tier,
        }
    }

    /// The (A, B) operands of [`Linear::backward_dw`]'s GEMM, given dY and X: (X, dY) for
    /// `KN` weights (`dW = Xᵀ·dY`), (dY, X) for `NK` weights (`dWᵀ = dYᵀ·X`).
    pub fn dw_operands<T>(&self, dy: T, x: T) -> (T, T) {
        match self.weight {
            WeightLayout::KN => (x, dy),
            WeightLayout::NK => (dy, x),
        }
    }

    /// `dX[M,K] = dY[M,N] · Wᵀ`, in `dtype`.
    pub fn backward_dx(&self) -> Gemm {
        let b = match self.weight {
            // Wᵀ of a row-major [K,N] is an N×K column-major matrix with ld N.
            WeightLayout::KN => Operand::col_major(self.dtype, self.n),
            // Wᵀ as N×K is exactly the row-major [N,K] storage.
            WeightLayout::NK => Operand::row_major(self.dtype, self.k),
        };
        Gemm {
            m: self.m,
            n: self.k,
            k: self.n,
            batch: 1,
            a: Operand::row_major(self.dtype, self.n),
            b,
            bias: None,
            c: Output {
                mode: OutputMode::Overwrite(self.dtype),
                ldc: dense_ld(self.k),
                batch_stride: 0,
            },
            tier: self.tier,
        }
    }
}

impl Layout {
    /// The other storage order (what a transpose of the same memory reads as).
    pub const fn transposed(self) -> Layout {
        match self {
            Layout::RowMajor => Layout::ColMajor,
            Layout::ColMajor => Layout::RowMajor,
        }
    }
}
