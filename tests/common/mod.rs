//! Shared helpers of the CPU contract tests: typed buffers, a seeded generator, and an
//! independent reference of the scalar tier written from the contract text (ARCHITECTURE.md,
//! C3), not from the library's code:
//!
//! ```text
//! y[i,j] = round_out(bias_j + chain)
//! chain  = fma(a[i,K-1], b[K-1,j], … fma(a[i,0], b[0,j], +0.0) …)   (f32, ascending k)
//! accumulate mode: c = c + (bias_j + chain)                       (one f32 add)
//! ```
//!
//! Inputs are upcast with the `half` crate; the rounding to bf16/f16 is written out here by
//! hand (round to nearest, ties to even) so that the reference shares no rounding code with
//! the library. NaN outputs are canonical: f32 `0x7FFF_FFFF`, bf16/f16 `0x7FFF`.
//!
//! Every test binary includes this module and uses a different subset of it.
#![allow(dead_code)]

use sgemm_bi::{
    bf16, f16, DType, Engine, Gemm, HostSlice, HostSliceMut, Layout, Operand, Output, OutputMode,
    Tier,
};

/// The canonical NaNs of the contract (defined once, in the crate the kernels share).
pub use sgemm_bi::numeric::{CANONICAL_NAN_16, CANONICAL_NAN_F32};
/// What unwritten f32 output elements hold: a NaN whose payload no computation produces.
pub const SENTINEL_F32: u32 = 0x7FA5_5A5A;
/// What unwritten 16-bit output elements hold (a NaN for both bf16 and f16, not canonical).
pub const SENTINEL_16: u16 = 0x7FA5;

pub const DTYPES: [DType; 3] = [DType::F32, DType::BF16, DType::F16];
pub const LAYOUTS: [Layout; 2] = [Layout::RowMajor, Layout::ColMajor];

pub fn cpu() -> Engine {
    Engine::new(sgemm_bi::Device::Cpu).expect("the CPU engine always exists")
}

// ---------------------------------------------------------------------------------------
// Seeded generator (splitmix64).

#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5DEE_CE66_D1CE_F00D)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn bool(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// Random bits of a finite, non-zero value of `dtype` with a random sign, a full random
    /// mantissa and an unbiased binary exponent in `exp.0..=exp.1` (normal numbers only).
    /// Random mantissas make every rounding visible; random signs make products cancel.
    pub fn value_bits(&mut self, dtype: DType, exp: (i32, i32)) -> u32 {
        let e = exp.0 + self.below((exp.1 - exp.0 + 1) as usize) as i32;
        let s = self.next_u32() & 1;
        match dtype {
            DType::F32 => {
                assert!((-126..=127).contains(&e));
                (s << 31) | (((e + 127) as u32) << 23) | (self.next_u32() & 0x7F_FFFF)
            }
            DType::BF16 => {
                assert!((-126..=127).contains(&e));
                (s << 15) | (((e + 127) as u32) << 7) | (self.next_u32() & 0x7F)
            }
            DType::F16 => {
                assert!((-14..=15).contains(&e));
                (s << 15) | (((e + 15) as u32) << 10) | (self.next_u32() & 0x3FF)
            }
        }
    }
}

/// The exponent range the tests use by default: products and sums of a few dozen terms stay
/// far from overflow and underflow in every dtype, with visible cancellation.
pub const NARROW: (i32, i32) = (-3, 3);

// ---------------------------------------------------------------------------------------
// Typed buffers.

/// A host buffer of one dtype, addressed by raw bits so that tests compare bits only.
#[derive(Clone, Debug)]
pub enum Buf {
    F32(Vec<f32>),
    BF16(Vec<bf16>),
    F16(Vec<f16>),
}

impl Buf {
    /// `len` elements, each with the raw bits `bits` (truncated to the element width).
    pub fn filled(dtype: DType, len: usize, bits: u32) -> Self {
        match dtype {
            DType::F32 => Buf::F32(vec![f32::from_bits(bits); len]),
            DType::BF16 => Buf::BF16(vec![bf16::from_bits(bits as u16); len]),
            DType::F16 => Buf::F16(vec![f16::from_bits(bits as u16); len]),
        }
    }

    /// `len` random finite non-zero values with exponents in `exp`.
    pub fn random(dtype: DType, len: usize, rng: &mut Rng, exp: (i32, i32)) -> Self {
        let mut b = Buf::filled(dtype, len, 0);
        for i in 0..len {
            let v = rng.value_bits(dtype, exp);
            b.set_bits(i, v);
        }
        b
    }

    /// The sentinel an untouched output element holds.
    pub fn sentinel(dtype: DType, len: usize) -> Self {
        match dtype {
            DType::F32 => Buf::filled(dtype, len, SENTINEL_F32),
            DType::BF16 | DType::F16 => Buf::filled(dtype, len, SENTINEL_16 as u32),
        }
    }

    pub fn dtype(&self) -> DType {
        match self {
            Buf::F32(_) => DType::F32,
            Buf::BF16(_) => DType::BF16,
            Buf::F16(_) => DType::F16,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Buf::F32(v) => v.len(),
            Buf::BF16(v) => v.len(),
            Buf::F16(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn bits(&self, i: usize) -> u32 {
        match self {
            Buf::F32(v) => v[i].to_bits(),
            Buf::BF16(v) => v[i].to_bits() as u32,
            Buf::F16(v) => v[i].to_bits() as u32,
        }
    }

    pub fn set_bits(&mut self, i: usize, bits: u32) {
        match self {
            Buf::F32(v) => v[i] = f32::from_bits(bits),
            Buf::BF16(v) => v[i] = bf16::from_bits(bits as u16),
            Buf::F16(v) => v[i] = f16::from_bits(bits as u16),
        }
    }

    /// Element `i` upcast exactly to f32 (with the `half` crate).
    pub fn get(&self, i: usize) -> f32 {
        match self {
            Buf::F32(v) => v[i],
            Buf::BF16(v) => v[i].to_f32(),
            Buf::F16(v) => v[i].to_f32(),
        }
    }

    /// Stores `v` with one round-to-nearest-even to this buffer's dtype (canonical NaN).
    pub fn store(&mut self, i: usize, v: f32) {
        let bits = match self.dtype() {
            DType::F32 => store_f32_bits(v),
            DType::BF16 => round_bf16_bits(v) as u32,
            DType::F16 => round_f16_bits(v) as u32,
        };
        self.set_bits(i, bits);
    }

    pub fn all_bits(&self) -> Vec<u32> {
        (0..self.len()).map(|i| self.bits(i)).collect()
    }

    pub fn slice(&self) -> HostSlice<'_> {
        match self {
            Buf::F32(v) => v.as_slice().into(),
            Buf::BF16(v) => v.as_slice().into(),
            Buf::F16(v) => v.as_slice().into(),
        }
    }

    /// A view of the elements from `offset` on (to run a call on a sub-matrix).
    pub fn slice_from(&self, offset: usize) -> HostSlice<'_> {
        match self {
            Buf::F32(v) => v[offset..].into(),
            Buf::BF16(v) => v[offset..].into(),
            Buf::F16(v) => v[offset..].into(),
        }
    }

    pub fn slice_mut(&mut self) -> HostSliceMut<'_> {
        match self {
            Buf::F32(v) => v.as_mut_slice().into(),
            Buf::BF16(v) => v.as_mut_slice().into(),
            Buf::F16(v) => v.as_mut_slice().into(),
        }
    }

    /// A view of the elements from `offset` on, to write (a call's C at an offset).
    pub fn slice_mut_from(&mut self, offset: usize) -> HostSliceMut<'_> {
        match self {
            Buf::F32(v) => (&mut v[offset..]).into(),
            Buf::BF16(v) => (&mut v[offset..]).into(),
            Buf::F16(v) => (&mut v[offset..]).into(),
        }
    }

    /// The buffer's bytes (to copy it to a device).
    pub fn bytes(&self) -> &[u8] {
        let s = self.slice();
        // SAFETY: plain-old-data elements; the byte view covers exactly the slice.
        unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), s.len() * s.dtype().size()) }
    }

    /// The buffer's bytes, to write (to copy it back from a device).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let mut s = self.slice_mut();
        let len = s.len() * s.dtype().size();
        // SAFETY: as above, through a unique borrow.
        unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), len) }
    }

    pub fn as_ptr(&self) -> *const std::ffi::c_void {
        self.slice().as_ptr()
    }

    pub fn as_mut_ptr(&mut self) -> *mut std::ffi::c_void {
        self.slice_mut().as_mut_ptr()
    }
}

// ---------------------------------------------------------------------------------------
// The roundings of the contract, written out.

pub fn store_f32_bits(v: f32) -> u32 {
    if v.is_nan() {
        CANONICAL_NAN_F32
    } else {
        v.to_bits()
    }
}

/// One round-to-nearest-even of `v` to bf16.
pub fn round_bf16_bits(v: f32) -> u16 {
    if v.is_nan() {
        return CANONICAL_NAN_16;
    }
    let bits = v.to_bits();
    // Add just under half an ulp, plus one when the kept lsb is odd: ties go to even, and a
    // carry out of the mantissa bumps the exponent (up to ±Inf) as it should.
    let bias = 0x7FFF + ((bits >> 16) & 1);
    (bits.wrapping_add(bias) >> 16) as u16
}

/// One round-to-nearest-even of `v` to f16 (overflow to ±Inf, gradual underflow).
pub fn round_f16_bits(v: f32) -> u16 {
    if v.is_nan() {
        return CANONICAL_NAN_16;
    }
    let sign = ((v.to_bits() >> 16) & 0x8000) as u16;
    let x = v.abs();
    // 65520 = 65504 + half an ulp: it and everything above rounds to Inf.
    if x >= 65520.0 {
        return sign | 0x7C00;
    }
    if x < 2f32.powi(-14) {
        // Subnormal (or zero): a multiple of 2^-24. Scaling by 2^24 is exact in f32.
        let units = (x * 2f32.powi(24)).round_ties_even() as u16;
        return sign | units; // 1024 units is the smallest normal, 0x0400: still right.
    }
    let bits = x.to_bits();
    let exp = ((bits >> 23) as i32) - 127; // -14..=15
    let mant = bits & 0x7F_FFFF;
    let mut h = (((exp + 15) as u32) << 10) | (mant >> 13);
    let rest = mant & 0x1FFF;
    if rest > 0x1000 || (rest == 0x1000 && h & 1 == 1) {
        h += 1; // a carry into the exponent is the correct next value
    }
    sign | h as u16
}

// ---------------------------------------------------------------------------------------
// Indexing and spans (from the Layout documentation).

/// Element offset of `M[r, c]` of a matrix with this layout and leading dimension.
pub fn at(layout: Layout, ld: usize, r: usize, c: usize) -> usize {
    match layout {
        Layout::RowMajor => r * ld + c,
        Layout::ColMajor => r + c * ld,
    }
}

/// Elements spanned by one `rows × cols` matrix (0 if empty).
pub fn one_span(layout: Layout, ld: usize, rows: usize, cols: usize) -> usize {
    if rows == 0 || cols == 0 {
        return 0;
    }
    match layout {
        Layout::RowMajor => (rows - 1) * ld + cols,
        Layout::ColMajor => (cols - 1) * ld + rows,
    }
}

/// Elements spanned by `batch` matrices `stride` apart.
pub fn span(
    layout: Layout,
    ld: usize,
    rows: usize,
    cols: usize,
    batch: usize,
    stride: usize,
) -> usize {
    let one = one_span(layout, ld, rows, cols);
    if one == 0 || batch == 0 {
        0
    } else {
        (batch - 1) * stride + one
    }
}

/// The smallest valid leading dimension (never 0, as in BLAS).
pub fn min_ld(layout: Layout, rows: usize, cols: usize) -> usize {
    match layout {
        Layout::RowMajor => cols,
        Layout::ColMajor => rows,
    }
    .max(1)
}

// ---------------------------------------------------------------------------------------
// The reference.

/// Bias buffer of a call: `g.bias` says its dtype.
pub fn chain(g: &Gemm, a: &Buf, b: &Buf, batch: usize, i: usize, j: usize) -> f32 {
    let mut acc = 0.0f32;
    for k in 0..g.k {
        let x = a.get(batch * g.a.batch_stride + at(g.a.layout, g.a.ld, i, k));
        let y = b.get(batch * g.b.batch_stride + at(g.b.layout, g.b.ld, k, j));
        acc = x.mul_add(y, acc);
    }
    acc
}

/// Computes the call `g` into `c` as the contract says, touching only the elements the call
/// writes.
pub fn reference(g: &Gemm, a: &Buf, b: &Buf, bias: Option<&Buf>, c: &mut Buf) {
    assert_eq!(g.tier, Tier::Scalar);
    assert_eq!(g.bias.is_some(), bias.is_some());
    for bt in 0..g.batch {
        for i in 0..g.m {
            for j in 0..g.n {
                let mut v = chain(g, a, b, bt, i, j);
                if let Some(bias) = bias {
                    v += bias.get(j);
                }
                let ci = bt * g.c.batch_stride + i * g.c.ldc + j;
                match g.c.mode {
                    OutputMode::Overwrite(d) => {
                        assert_eq!(c.dtype(), d);
                        c.store(ci, v)
                    }
                    OutputMode::AccumulateF32 => {
                        assert_eq!(c.dtype(), DType::F32);
                        let old = c.get(ci);
                        c.store(ci, old + v)
                    }
                }
            }
        }
    }
}

/// Asserts two buffers hold the same bits, naming the first difference.
pub fn assert_same_bits(got: &Buf, want: &Buf, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for i in 0..got.len() {
        if got.bits(i) != want.bits(i) {
            let differing = (0..got.len())
                .filter(|&j| got.bits(j) != want.bits(j))
                .count();
            panic!(
                "{what}: element {i} is {:#x} ({}), the reference says {:#x} ({}); {differing} of {} elements differ",
                got.bits(i),
                got.get(i),
                want.bits(i),
                want.get(i),
                got.len()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// A whole test case: a descriptor, its buffers, and the check against the reference.

/// Everything that describes one call; `Case::build` turns it into a descriptor.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub batch: usize,
    pub dtype: DType,
    pub la: Layout,
    pub lb: Layout,
    /// Extra leading-dimension elements beyond the minimum, for A, B and C.
    pub pad: (usize, usize, usize),
    /// Extra batch-stride elements beyond one matrix, for A, B and C.
    pub gap: (usize, usize, usize),
    /// B is the same matrix for every batch entry (batch stride 0).
    pub broadcast_b: bool,
    pub bias: Option<DType>,
    pub mode: OutputMode,
}

impl Shape {
    pub fn new(m: usize, n: usize, k: usize, dtype: DType) -> Self {
        Shape {
            m,
            n,
            k,
            batch: 1,
            dtype,
            la: Layout::RowMajor,
            lb: Layout::RowMajor,
            pad: (0, 0, 0),
            gap: (0, 0, 0),
            broadcast_b: false,
            bias: None,
            mode: OutputMode::Overwrite(dtype),
        }
    }

    pub fn gemm(&self) -> Gemm {
        let lda = min_ld(self.la, self.m, self.k) + self.pad.0;
        let ldb = min_ld(self.lb, self.k, self.n) + self.pad.1;
        let ldc = self.n.max(1) + self.pad.2;
        let sa = one_span(self.la, lda, self.m, self.k) + self.gap.0;
        let sb = if self.broadcast_b {
            0
        } else {
            one_span(self.lb, ldb, self.k, self.n) + self.gap.1
        };
        let sc = one_span(Layout::RowMajor, ldc, self.m, self.n) + self.gap.2;
        Gemm {
            m: self.m,
            n: self.n,
            k: self.k,
            batch: self.batch,
            a: Operand {
                dtype: self.dtype,
                layout: self.la,
                ld: lda,
                batch_stride: sa,
            },
            b: Operand {
                dtype: self.dtype,
                layout: self.lb,
                ld: ldb,
                batch_stride: sb,
            },
            bias: self.bias,
            c: Output {
                mode: self.mode,
                ldc,
                batch_stride: sc,
            },
            tier: Tier::Scalar,
        }
    }
}

/// Extra elements after each buffer's span: a write past the span lands there and is caught.
pub const GUARD: usize = 3;

/// A descriptor with random buffers for it.
pub struct Case {
    pub g: Gemm,
    pub a: Buf,
    pub b: Buf,
    pub bias: Option<Buf>,
    /// C before the call: random values where the call writes in accumulate mode, the
    /// sentinel NaN everywhere else.
    pub c: Buf,
}

impl Case {
    pub fn build(s: &Shape, rng: &mut Rng) -> Case {
        Case::from_gemm(s.gemm(), rng, NARROW)
    }

    pub fn from_gemm(g: Gemm, rng: &mut Rng, exp: (i32, i32)) -> Case {
        let na = span(g.a.layout, g.a.ld, g.m, g.k, g.batch, g.a.batch_stride);
        let nb = span(g.b.layout, g.b.ld, g.k, g.n, g.batch, g.b.batch_stride);
        let nc = span(
            Layout::RowMajor,
            g.c.ldc,
            g.m,
            g.n,
            g.batch,
            g.c.batch_stride,
        );
        let a = Buf::random(g.a.dtype, na + GUARD, rng, exp);
        let b = Buf::random(g.b.dtype, nb + GUARD, rng, exp);
        let bias = g.bias.map(|d| Buf::random(d, g.n + GUARD, rng, exp));
        let cd = g.c.mode.dtype();
        let mut c = Buf::sentinel(cd, nc + GUARD);
        if g.c.mode == OutputMode::AccumulateF32 {
            for bt in 0..g.batch {
                for i in 0..g.m {
                    for j in 0..g.n {
                        let v = rng.value_bits(DType::F32, exp);
                        c.set_bits(bt * g.c.batch_stride + i * g.c.ldc + j, v);
                    }
                }
            }
        }
        Case { g, a, b, bias, c }
    }

    /// What the reference says C holds after the call.
    pub fn expected(&self) -> Buf {
        let mut c = self.c.clone();
        reference(&self.g, &self.a, &self.b, self.bias.as_ref(), &mut c);
        c
    }

    /// C after running the call on `engine` (panics on an error).
    pub fn run(&self, engine: &Engine) -> Buf {
        let mut c = self.c.clone();
        engine
            .gemm_host(
                &self.g,
                self.a.slice(),
                self.b.slice(),
                self.bias.as_ref().map(Buf::slice),
                c.slice_mut(),
            )
            .unwrap_or_else(|e| panic!("{:?}: {e}", self.g));
        c
    }

    /// Runs the call and compares every element of C (written or not) with the reference.
    pub fn check(&self, engine: &Engine, what: &str) {
        let got = self.run(engine);
        assert_same_bits(&got, &self.expected(), &format!("{what} {:?}", self.g));
    }
}
