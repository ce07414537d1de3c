//! Fuzzes the C ABI's descriptor validation on the CPU engine: `sgemm_bi_gemm` and
//! `sgemm_bi_forward` with descriptors built from the input bytes.
//!
//! Each input is a raw `sgemm_bi_gemm_desc` (or `sgemm_bi_linear`) whose fields a control
//! byte may steer towards valid values (struct_size, enums in range, small sizes) so that
//! both the rejections and the accepted calls are reached. Checked on every input:
//!
//! - no panic crosses the boundary (`SGEMM_BI_STATUS_PANIC` fails), every status is a code
//!   of the header, and the message is empty exactly when the status is OK;
//! - the C layer's own checks (struct_size, reserved fields, enums, has_bias, an
//!   accumulating output that is not f32, a bias pointer without has_bias) reject exactly
//!   what an independent decoding written from the header's documentation rejects;
//! - otherwise the status and message are those of the Rust API on the same descriptor;
//! - an accepted call whose buffers are small enough runs on buffers of exactly the
//!   extents the descriptor implies (AddressSanitizer catches any access outside them) and
//!   gives the Rust API's bits, with nothing written when it is rejected.
#![no_main]

use std::ffi::{c_void, CStr};
use std::mem::size_of;
use std::ptr::{null, null_mut};

use capi::{
    sgemm_bi_engine, sgemm_bi_engine_create, sgemm_bi_forward, sgemm_bi_gemm, sgemm_bi_gemm_desc,
    sgemm_bi_last_error_message, sgemm_bi_linear, sgemm_bi_operand, sgemm_bi_output,
    sgemm_bi_status, sgemm_bi_status_name,
};
use libfuzzer_sys::fuzz_target;
use sgemm_bi::{
    DType, Device, Engine, Error, Gemm, GemmPointers, Layout, Linear, Operand, Output, OutputMode,
    Stream, Tier, WeightLayout,
};

/// Buffers above this many elements are not allocated: the call then runs with NULL
/// pointers (rejected after every other check).
const MAX_ELEMS: usize = 1 << 16;

struct Engines {
    c: *mut sgemm_bi_engine,
    rust: Engine,
}
// SAFETY: the handle is `Send + Sync` (capi/src/engine.rs) and never destroyed.
unsafe impl Send for Engines {}
// SAFETY: as above.
unsafe impl Sync for Engines {}

fn engines() -> &'static Engines {
    static E: std::sync::OnceLock<Engines> = std::sync::OnceLock::new();
    E.get_or_init(|| {
        let mut c = null_mut();
        // SAFETY: a valid out-pointer.
        let st = unsafe { sgemm_bi_engine_create(0, 0, &mut c) };
        assert_eq!(st, sgemm_bi_status::Ok);
        Engines {
            c,
            rust: Engine::new(Device::Cpu).unwrap(),
        }
    })
}

/// Reads the input from the front.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        (self.u32() as u64) | (self.u32() as u64) << 32
    }
    /// A field value: raw when `raw`, else `small` (from a smaller range).
    fn pick(&mut self, raw: bool, small: impl FnOnce(&mut Self) -> u64) -> u64 {
        if raw {
            self.u64()
        } else {
            small(self)
        }
    }
}

fn message() -> String {
    // SAFETY: NUL-terminated, valid until the next call on this thread.
    unsafe { CStr::from_ptr(sgemm_bi_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

fn check_status(st: sgemm_bi_status) {
    assert_ne!(st, sgemm_bi_status::Panic, "a panic: {}", message());
    // SAFETY: a static string.
    let name = unsafe { CStr::from_ptr(sgemm_bi_status_name(st as u32)) };
    assert_ne!(name.to_str().unwrap(), "SGEMM_BI_STATUS_UNKNOWN");
    assert_eq!(
        st == sgemm_bi_status::Ok,
        message().is_empty(),
        "{st:?}: {:?}",
        message()
    );
}

/// The code the C ABI documents for each Rust error (status.rs's table, restated).
fn code(e: &Error) -> sgemm_bi_status {
    use sgemm_bi_status as S;
    match e {
        Error::NullPointer(_) => S::NullParameter,
        Error::Overflow { .. } => S::Overflow,
        Error::BadLeadingDimension { .. } => S::BadLeadingDimension,
        Error::OverlappingBatches { .. } => S::OverlappingBatches,
        Error::UnsupportedDtype(_) => S::UnsupportedDtype,
        Error::TierUnavailable { .. } => S::TierUnavailable,
        Error::OverlappingOperands { .. } => S::OverlappingOperands,
        other => panic!("the CPU engine returned {other:?}"),
    }
}

fn dtype(v: u32) -> Option<DType> {
    [DType::F32, DType::BF16, DType::F16]
        .get(v as usize)
        .copied()
}

fn layout(v: u32) -> Option<Layout> {
    [Layout::RowMajor, Layout::ColMajor]
        .get(v as usize)
        .copied()
}

fn tier(v: u32) -> Option<Tier> {
    [Tier::Scalar, Tier::TensorCores, Tier::Auto]
        .get(v as usize)
        .copied()
}

/// The descriptor as the header documents it, or the status its C-level checks give
/// (`bias_given`: a non-NULL bias pointer is passed).
fn decode(d: &sgemm_bi_gemm_desc, bias_given: bool) -> Result<Gemm, sgemm_bi_status> {
    use sgemm_bi_status as S;
    if d.struct_size as usize != size_of::<sgemm_bi_gemm_desc>() || d.reserved != [0; 4] {
        return Err(S::InvalidArgument);
    }
    let bias_dtype = dtype(d.bias_dtype).ok_or(S::InvalidArgument)?;
    let bias = match d.has_bias {
        0 => None,
        1 => Some(bias_dtype),
        _ => return Err(S::InvalidArgument),
    };
    let op = |o: &sgemm_bi_operand| -> Result<Operand, sgemm_bi_status> {
        Ok(Operand {
            dtype: dtype(o.dtype).ok_or(S::InvalidArgument)?,
            layout: layout(o.layout).ok_or(S::InvalidArgument)?,
            ld: o.ld as usize,
            batch_stride: o.batch_stride as usize,
        })
    };
    let (a, b) = (op(&d.a)?, op(&d.b)?);
    let c_dtype = match d.c.mode {
        0 | 1 => dtype(d.c.dtype).ok_or(S::InvalidArgument)?,
        _ => return Err(S::InvalidArgument),
    };
    let mode = match (d.c.mode, c_dtype) {
        (0, dt) => OutputMode::Overwrite(dt),
        (_, DType::F32) => OutputMode::AccumulateF32,
        _ => return Err(S::UnsupportedDtype),
    };
    let tier = tier(d.tier).ok_or(S::InvalidArgument)?;
    if bias.is_none() && bias_given {
        return Err(S::InvalidArgument);
    }
    Ok(Gemm {
        m: d.m as usize,
        n: d.n as usize,
        k: d.k as usize,
        batch: d.batch as usize,
        a,
        b,
        bias,
        c: Output {
            mode,
            ldc: d.c.ldc as usize,
            batch_stride: d.c.batch_stride as usize,
        },
        tier,
    })
}

/// A buffer of exactly `len` elements of `dtype` (bits from `fill`), as u32 or u16 words.
enum Buf {
    W32(Vec<u32>),
    W16(Vec<u16>),
}

impl Buf {
    fn new(dtype: DType, len: usize, fill: &mut impl FnMut() -> u32) -> Self {
        match dtype {
            DType::F32 => Buf::W32((0..len).map(|_| fill()).collect()),
            _ => Buf::W16((0..len).map(|_| fill() as u16).collect()),
        }
    }
    fn ptr(&mut self) -> *mut c_void {
        match self {
            Buf::W32(v) if v.is_empty() => null_mut(),
            Buf::W16(v) if v.is_empty() => null_mut(),
            Buf::W32(v) => v.as_mut_ptr().cast(),
            Buf::W16(v) => v.as_mut_ptr().cast(),
        }
    }
    fn words(&self) -> Vec<u32> {
        match self {
            Buf::W32(v) => v.clone(),
            Buf::W16(v) => v.iter().map(|&x| x as u32).collect(),
        }
    }
    fn dup(&self) -> Self {
        match self {
            Buf::W32(v) => Buf::W32(v.clone()),
            Buf::W16(v) => Buf::W16(v.clone()),
        }
    }
}

fn fuzz_gemm(bytes: &mut Bytes) {
    let steer = bytes.u32();
    let raw = |bit: u32| steer & (1 << bit) != 0 && steer >> 28 == 0xF;
    let small_dim = |b: &mut Bytes| (b.u8() % 24) as u64;
    let mut d = sgemm_bi_gemm_desc {
        struct_size: if raw(0) {
            bytes.u32()
        } else {
            size_of::<sgemm_bi_gemm_desc>() as u32
        },
        tier: bytes.pick(raw(1), |b| (b.u8() % 3) as u64) as u32,
        m: bytes.pick(raw(2), small_dim),
        n: bytes.pick(raw(3), small_dim),
        k: bytes.pick(raw(4), small_dim),
        batch: bytes.pick(raw(5), |b| (b.u8() % 4) as u64),
        a: sgemm_bi_operand::default(),
        b: sgemm_bi_operand::default(),
        has_bias: bytes.pick(raw(6), |b| (b.u8() % 2) as u64) as u32,
        bias_dtype: bytes.pick(raw(7), |b| (b.u8() % 3) as u64) as u32,
        c: sgemm_bi_output::default(),
        reserved: [0; 4],
    };
    let (m, n, k) = (d.m, d.n, d.k);
    let operand = |bytes: &mut Bytes, bit: u32, rows: u64, cols: u64| {
        let dt = bytes.pick(raw(bit), |b| (b.u8() % 3) as u64) as u32;
        let lay = bytes.pick(raw(bit + 1), |b| (b.u8() % 2) as u64) as u32;
        let min = if lay == 0 { cols } else { rows }.max(1);
        let ld = bytes.pick(raw(bit + 2), |b| {
            min.saturating_add((b.u8() % 4) as u64).saturating_sub(1)
        });
        let one = if lay == 0 { rows } else { cols }.saturating_sub(1);
        let stride = bytes.pick(raw(bit + 3), |b| {
            one.saturating_mul(ld)
                .saturating_add(min)
                .saturating_add((b.u8() % 3) as u64)
                .saturating_sub(1)
        });
        sgemm_bi_operand {
            dtype: dt,
            layout: lay,
            ld,
            batch_stride: stride,
        }
    };
    d.a = operand(bytes, 8, m, k);
    d.b = operand(bytes, 12, k, n);
    // Mostly the same dtype for A and B, as a valid call needs.
    if !raw(16) {
        d.b.dtype = d.a.dtype;
    }
    d.c = sgemm_bi_output {
        mode: bytes.pick(raw(17), |b| (b.u8() % 2) as u64) as u32,
        dtype: bytes.pick(raw(18), |b| (b.u8() % 3) as u64) as u32,
        ldc: bytes.pick(raw(19), |b| n.max(1).saturating_add((b.u8() % 3) as u64)),
        batch_stride: 0,
    };
    d.c.batch_stride = bytes.pick(raw(20), |b| {
        m.saturating_sub(1)
            .saturating_mul(d.c.ldc)
            .saturating_add(n)
            .saturating_add((b.u8() % 3) as u64)
            .saturating_sub(1)
    });
    if raw(21) {
        d.reserved[(bytes.u8() % 4) as usize] = bytes.u64();
    }
    let bias_given = bytes.u8() % 8 != 0;
    let mut seed = bytes.u64() | 1;
    let mut fill = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 16) as u32
    };

    let e = engines();
    let decoded = decode(&d, bias_given && d.has_bias == 0);
    // Buffers of exactly the descriptor's extents when it is valid and they are small.
    let ext = decoded
        .as_ref()
        .ok()
        .and_then(|g| sgemm_bi::validate::check(g).ok().map(|x| (*g, x)));
    let small = ext.is_some_and(|(_, x)| x.a.max(x.b).max(x.c) <= MAX_ELEMS);
    let (mut a, mut b, mut bias, mut c) = match (small, ext) {
        (true, Some((g, x))) => (
            Buf::new(g.a.dtype, x.a, &mut fill),
            Buf::new(g.b.dtype, x.b, &mut fill),
            Buf::new(g.bias.unwrap_or(DType::F32), x.bias, &mut fill),
            Buf::new(g.c.mode.dtype(), x.c, &mut fill),
        ),
        _ => (
            Buf::W32(vec![]),
            Buf::W32(vec![]),
            Buf::W32(vec![]),
            Buf::W32(vec![]),
        ),
    };
    let c_before = c.words();
    let mut c_rust = c.dup();
    // A bias pointer without has_bias: any non-NULL address (never read).
    let bias_ptr = match (bias_given, d.has_bias) {
        (true, 0) => std::ptr::dangling::<u32>().cast(),
        (true, _) => bias.ptr().cast_const(),
        (false, _) => null(),
    };
    let (pa, pb, pc) = (a.ptr().cast_const(), b.ptr().cast_const(), c.ptr());
    // SAFETY: every non-NULL pointer is a live buffer of exactly the extent the decoded
    // descriptor gives it (the decoding is checked against the library's below); buffers that
    // would be too large are NULL, which the library rejects before using any pointer; the
    // dangling bias is passed only when has_bias is 0, which the library rejects first.
    let st = unsafe { sgemm_bi_gemm(e.c, &d, pa, pb, bias_ptr, pc, null_mut()) };
    check_status(st);
    let c_msg = message();
    match decoded {
        Err(want) => {
            assert_eq!(st, want, "{d:?}: {c_msg}");
            assert_eq!(c.words(), c_before, "C written by a rejected call");
        }
        Ok(g) => {
            let p = GemmPointers {
                a: pa,
                b: pb,
                bias: if g.bias.is_some() { bias_ptr } else { null() },
                c: c_rust.ptr(),
            };
            // SAFETY: as above, with C's copy.
            let r = unsafe { e.rust.gemm(&g, p, Stream::DEFAULT) };
            match r {
                Ok(()) => {
                    assert_eq!(st, sgemm_bi_status::Ok, "{g:?}: {c_msg}");
                    assert_eq!(
                        c.words(),
                        c_rust.words(),
                        "{g:?}: C ABI and Rust API differ"
                    );
                }
                Err(err) => {
                    assert_eq!((st, c_msg.as_str()), (code(&err), err.to_string().as_str()));
                    assert_eq!(c.words(), c_before, "C written by a rejected call");
                }
            }
        }
    }
}

fn fuzz_forward(bytes: &mut Bytes) {
    use sgemm_bi_status as S;
    let steer = bytes.u8();
    let raw = |bit: u32| steer & (1 << bit) != 0 && steer >> 6 == 3;
    let l = sgemm_bi_linear {
        struct_size: if raw(0) {
            bytes.u32()
        } else {
            size_of::<sgemm_bi_linear>() as u32
        },
        dtype: bytes.pick(raw(1), |b| (b.u8() % 4) as u64) as u32,
        weight_layout: bytes.pick(raw(2), |b| (b.u8() % 3) as u64) as u32,
        tier: bytes.pick(raw(3), |b| (b.u8() % 4) as u64) as u32,
        m: bytes.pick(raw(4), |b| (b.u8() % 12) as u64),
        k: bytes.pick(raw(4), |b| (b.u8() % 12) as u64),
        n: bytes.pick(raw(4), |b| (b.u8() % 12) as u64),
        reserved: [0, if raw(5) { bytes.u64() } else { 0 }],
    };
    let bias_dtype = (bytes.u8() % 4) as u32;
    let with_bias = bytes.u8() % 2 == 0;
    let decoded = (|| {
        if l.struct_size as usize != size_of::<sgemm_bi_linear>() || l.reserved != [0; 2] {
            return Err(S::InvalidArgument);
        }
        let dt = dtype(l.dtype).ok_or(S::InvalidArgument)?;
        let weight = [WeightLayout::KN, WeightLayout::NK]
            .get(l.weight_layout as usize)
            .copied()
            .ok_or(S::InvalidArgument)?;
        let t = tier(l.tier).ok_or(S::InvalidArgument)?;
        let bd = dtype(bias_dtype).ok_or(S::InvalidArgument)?;
        Ok((
            Linear {
                m: l.m as usize,
                k: l.k as usize,
                n: l.n as usize,
                dtype: dt,
                weight,
                tier: t,
            },
            bd,
        ))
    })();
    let e = engines();
    // Buffers of the layer's shapes when they are small, else none (NULL pointers).
    let (m, k, n) = (l.m as usize, l.k as usize, l.n as usize);
    let fits = [
        m.checked_mul(k),
        k.checked_mul(n),
        m.checked_mul(n),
        Some(n),
    ]
    .iter()
    .all(|x| x.is_some_and(|x| x <= MAX_ELEMS));
    let len = |x: usize| if fits { x } else { 0 };
    let mut fill = || 0x3F80_3F80u32; // finite in every dtype
    let dt = dtype(l.dtype).unwrap_or(DType::F32);
    let mut x = Buf::new(dt, len(m.wrapping_mul(k)), &mut fill);
    let mut w = Buf::new(dt, len(k.wrapping_mul(n)), &mut fill);
    let bias_len = len(n);
    let mut bias = Buf::new(dtype(bias_dtype).unwrap_or(DType::F32), bias_len, &mut fill);
    let mut y = Buf::new(dt, len(m.wrapping_mul(n)), &mut || 0x7FA5_7FA5);
    let mut y_rust = y.dup();
    let y_before = y.words();
    let (px, pw) = (x.ptr().cast_const(), w.ptr().cast_const());
    let pbias = if with_bias {
        bias.ptr().cast_const()
    } else {
        null()
    };
    // SAFETY: dense buffers of the layer's shapes in its dtype (checked by the decoding
    // before any pointer is used: a rejected layer reads nothing).
    let st = unsafe { sgemm_bi_forward(e.c, &l, px, pw, pbias, bias_dtype, y.ptr(), null_mut()) };
    check_status(st);
    let c_msg = message();
    match decoded {
        Err(want) => {
            assert_eq!(st, want, "{l:?}: {c_msg}");
            assert_eq!(y.words(), y_before);
        }
        Ok((layer, bd)) => {
            // The header: a NULL bias is no bias (its dtype is still checked).
            let bias_arg = (!pbias.is_null()).then_some((pbias, bd));
            // SAFETY: as above.
            let r = unsafe {
                e.rust
                    .forward(&layer, px, pw, bias_arg, y_rust.ptr(), Stream::DEFAULT)
            };
            match r {
                Ok(()) => {
                    assert_eq!(st, S::Ok, "{layer:?}: {c_msg}");
                    assert_eq!(y.words(), y_rust.words());
                }
                Err(err) => {
                    assert_eq!((st, c_msg.as_str()), (code(&err), err.to_string().as_str()));
                    assert_eq!(y.words(), y_before);
                }
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut bytes = Bytes(data);
    if bytes.u8() % 4 == 3 {
        fuzz_forward(&mut bytes);
    } else {
        fuzz_gemm(&mut bytes);
    }
});
