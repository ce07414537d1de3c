//! Unit tests of the C ABI, called from Rust as a C program would call it. The C programs
//! themselves (examples/c, examples/cpp, capi/tests/c) run from `tests/c_programs.rs`.

use std::ffi::{c_void, CStr};
use std::mem::{offset_of, size_of};
use std::ptr::{null, null_mut};

use sgemm_bi::{
    bf16, f16, DType, Device, Engine, Error, ErrorOperand, Gemm, HostSlice, HostSliceMut, Layout,
    Linear, Operand, Output, OutputMode, Tier, WeightLayout,
};

use crate::desc::{sgemm_bi_device_kind as Kind, sgemm_bi_output_mode as Mode};
use crate::status::{boundary, Failure, ALL};
use crate::*;

const OK: sgemm_bi_status = sgemm_bi_status::Ok;

fn message() -> String {
    // SAFETY: the library returns a NUL-terminated string that lives until the next call.
    unsafe { CStr::from_ptr(sgemm_bi_last_error_message()) }
        .to_str()
        .unwrap()
        .to_owned()
}

/// The C name of `status`.
fn name(status: u32) -> &'static str {
    // SAFETY: the names are static NUL-terminated strings.
    unsafe { CStr::from_ptr(sgemm_bi_status_name(status)) }
        .to_str()
        .unwrap()
}

/// An engine handle that is destroyed when dropped.
struct Handle(*mut sgemm_bi_engine);

impl Handle {
    fn cpu() -> Self {
        let mut h = null_mut();
        // SAFETY: `h` is a valid out-pointer.
        assert_eq!(
            unsafe { sgemm_bi_engine_create(Kind::Cpu as u32, 0, &mut h) },
            OK
        );
        assert!(!h.is_null());
        Handle(h)
    }
}

impl Handle {
    /// The handle, through a method so that closures capture the whole (`Sync`) `Handle`.
    fn get(&self) -> *mut sgemm_bi_engine {
        self.0
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: created by `sgemm_bi_engine_create`, destroyed once, no call in flight.
        assert_eq!(unsafe { sgemm_bi_engine_destroy(self.0) }, OK);
    }
}

// SAFETY: the handle is `Send + Sync` as the header promises (asserted in engine.rs).
unsafe impl Send for Handle {}
// SAFETY: as above.
unsafe impl Sync for Handle {}

/// SplitMix64, for reproducible inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// A host buffer of one dtype.
#[derive(Clone, Debug, PartialEq)]
enum Buf {
    F32(Vec<f32>),
    BF16(Vec<bf16>),
    F16(Vec<f16>),
}

impl Buf {
    fn random(dtype: DType, len: usize, rng: &mut Rng) -> Self {
        let v = (0..len).map(|_| rng.unit());
        match dtype {
            DType::F32 => Buf::F32(v.collect()),
            DType::BF16 => Buf::BF16(v.map(bf16::from_f32).collect()),
            DType::F16 => Buf::F16(v.map(f16::from_f32).collect()),
        }
    }
    fn slice(&self) -> HostSlice<'_> {
        match self {
            Buf::F32(v) => v.into(),
            Buf::BF16(v) => v.into(),
            Buf::F16(v) => v.into(),
        }
    }
    fn slice_mut(&mut self) -> HostSliceMut<'_> {
        match self {
            Buf::F32(v) => v.into(),
            Buf::BF16(v) => v.into(),
            Buf::F16(v) => v.into(),
        }
    }
    fn ptr(&self) -> *const c_void {
        self.slice().as_ptr()
    }
    fn ptr_mut(&mut self) -> *mut c_void {
        self.slice_mut().as_mut_ptr()
    }
    /// The bits, for exact comparison (NaN included).
    fn bits(&self) -> Vec<u32> {
        match self {
            Buf::F32(v) => v.iter().map(|x| x.to_bits()).collect(),
            Buf::BF16(v) => v.iter().map(|x| x.to_bits().into()).collect(),
            Buf::F16(v) => v.iter().map(|x| x.to_bits().into()).collect(),
        }
    }
}

/// Elements a buffer needs for the span `validate::check` gives (at least 1).
fn extents(g: &Gemm) -> sgemm_bi::validate::Extents {
    sgemm_bi::validate::check(g).expect("a valid descriptor")
}

/// Runs `g` through `sgemm_bi_gemm` and through the Rust API on the same inputs and checks
/// the bits agree.
fn same_as_rust(h: &Handle, rust: &Engine, g: &Gemm, rng: &mut Rng) {
    let ext = extents(g);
    let a = Buf::random(g.a.dtype, ext.a.max(1), rng);
    let b = Buf::random(g.b.dtype, ext.b.max(1), rng);
    let bias = g.bias.map(|d| Buf::random(d, g.n.max(1), rng));
    let c0 = Buf::random(g.c.mode.dtype(), ext.c.max(1), rng);
    let (mut via_c, mut via_rust) = (c0.clone(), c0);
    let desc = sgemm_bi_gemm_desc::from_gemm(g);
    let bias_ptr = bias.as_ref().map_or(null(), Buf::ptr);
    // SAFETY: every buffer holds the extent the descriptor implies; C overlaps no input.
    let status = unsafe {
        sgemm_bi_gemm(
            h.0,
            &desc,
            a.ptr(),
            b.ptr(),
            bias_ptr,
            via_c.ptr_mut(),
            null_mut(),
        )
    };
    assert_eq!(status, OK, "{g:?}: {}", message());
    rust.gemm_host(
        g,
        a.slice(),
        b.slice(),
        bias.as_ref().map(Buf::slice),
        via_rust.slice_mut(),
    )
    .unwrap();
    assert_eq!(via_c.bits(), via_rust.bits(), "{g:?}");
}

#[test]
fn version_is_the_crate_version() {
    // SAFETY: the function returns a static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(sgemm_bi_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    assert_eq!(sgemm_bi_abi_version(), SGEMM_BI_ABI_VERSION);
}

/// The numbers are part of the ABI: this list may only grow.
#[test]
fn status_numbers_are_stable() {
    use sgemm_bi_status as S;
    let expected = [
        (S::Ok, 0, "SGEMM_BI_STATUS_OK"),
        (S::NullParameter, 1, "SGEMM_BI_STATUS_NULL_PARAMETER"),
        (S::Panic, 2, "SGEMM_BI_STATUS_PANIC"),
        (S::InvalidArgument, 3, "SGEMM_BI_STATUS_INVALID_ARGUMENT"),
        (S::Overflow, 4, "SGEMM_BI_STATUS_OVERFLOW"),
        (
            S::BadLeadingDimension,
            5,
            "SGEMM_BI_STATUS_BAD_LEADING_DIMENSION",
        ),
        (
            S::OverlappingBatches,
            6,
            "SGEMM_BI_STATUS_OVERLAPPING_BATCHES",
        ),
        (S::UnsupportedDtype, 7, "SGEMM_BI_STATUS_UNSUPPORTED_DTYPE"),
        (S::BufferTooSmall, 8, "SGEMM_BI_STATUS_BUFFER_TOO_SMALL"),
        (S::DtypeMismatch, 9, "SGEMM_BI_STATUS_DTYPE_MISMATCH"),
        (S::Misaligned, 10, "SGEMM_BI_STATUS_MISALIGNED"),
        (S::TierUnavailable, 11, "SGEMM_BI_STATUS_TIER_UNAVAILABLE"),
        (S::NoDriver, 12, "SGEMM_BI_STATUS_NO_DRIVER"),
        (S::NoDevice, 13, "SGEMM_BI_STATUS_NO_DEVICE"),
        (S::WrongDevice, 14, "SGEMM_BI_STATUS_WRONG_DEVICE"),
        (S::DriverError, 15, "SGEMM_BI_STATUS_DRIVER_ERROR"),
        (S::LaunchFailed, 16, "SGEMM_BI_STATUS_LAUNCH_FAILED"),
        (S::Other, 17, "SGEMM_BI_STATUS_OTHER"),
        (
            S::OverlappingOperands,
            18,
            "SGEMM_BI_STATUS_OVERLAPPING_OPERANDS",
        ),
        (
            S::InaccessibleMemory,
            19,
            "SGEMM_BI_STATUS_INACCESSIBLE_MEMORY",
        ),
        (S::BadOffsets, 20, "SGEMM_BI_STATUS_BAD_OFFSETS"),
        (S::Unsupported, 21, "SGEMM_BI_STATUS_UNSUPPORTED"),
    ];
    assert_eq!(ALL.len(), expected.len());
    for (i, (s, n, c_name)) in expected.into_iter().enumerate() {
        assert_eq!(s as u32, n);
        assert_eq!(ALL[i], s);
        assert_eq!(name(n), c_name);
    }
    assert_eq!(name(22), "SGEMM_BI_STATUS_UNKNOWN");
    assert_eq!(name(u32::MAX), "SGEMM_BI_STATUS_UNKNOWN");
}

/// Each kind of library error has a code of its own.
#[test]
fn every_error_kind_has_its_own_code() {
    let s = String::new;
    let errors = [
        Error::NullPointer(ErrorOperand::A),
        Error::Overflow {
            operand: ErrorOperand::A,
            detail: s(),
        },
        Error::BadLeadingDimension {
            operand: ErrorOperand::B,
            ld: 1,
            min: 2,
        },
        Error::OverlappingBatches {
            operand: ErrorOperand::C,
            stride: 1,
            span: 2,
        },
        Error::UnsupportedDtype(s()),
        Error::BufferTooSmall {
            operand: ErrorOperand::C,
            dtype: DType::F32,
            len: 1,
            needed: 2,
        },
        Error::DtypeMismatch {
            operand: ErrorOperand::A,
            given: DType::F16,
            expected: DType::F32,
        },
        Error::Misaligned {
            operand: ErrorOperand::A,
            addr: 1,
            align: 4,
        },
        Error::TierUnavailable {
            tier: Tier::TensorCores,
            device: Device::Cpu,
            reason: s(),
        },
        Error::NoDriver(s()),
        Error::NoDevice {
            ordinal: 1,
            count: 0,
        },
        Error::WrongDevice(s()),
        Error::Driver {
            call: "cuInit",
            message: s(),
        },
        Error::Launch {
            kernel: s(),
            message: s(),
        },
        Error::OverlappingOperands {
            output: ErrorOperand::C,
            input: ErrorOperand::A,
            c: 0..4,
            other: 2..6,
        },
        Error::InaccessibleMemory {
            operand: ErrorOperand::B,
            addr: 16,
            found: s(),
            device: Device::Cuda(0),
        },
    ];
    let mut codes: Vec<u32> = errors
        .iter()
        .map(|e| sgemm_bi_status::of(e) as u32)
        .collect();
    for (e, &c) in errors.iter().zip(&codes) {
        let reserved = [OK, sgemm_bi_status::Panic, sgemm_bi_status::InvalidArgument];
        assert!(
            !reserved.iter().any(|&r| r as u32 == c),
            "{e:?} -> {}",
            name(c)
        );
        assert_ne!(
            c,
            sgemm_bi_status::Other as u32,
            "{e:?} has no code of its own"
        );
    }
    codes.sort_unstable();
    codes.dedup();
    assert_eq!(codes.len(), errors.len(), "two error kinds share a code");
}

#[test]
fn panics_become_a_status() {
    let status = boundary(|| panic!("boom {}", 42));
    assert_eq!(status, sgemm_bi_status::Panic);
    let m = message();
    assert!(m.contains("panic") && m.contains("boom 42"), "{m}");
    let status = boundary(|| std::panic::panic_any(7u8));
    assert_eq!(status, sgemm_bi_status::Panic);
    assert!(message().contains("non-string"), "{}", message());
    // The next successful call clears the message.
    assert_eq!(boundary(|| Ok(())), OK);
    assert_eq!(message(), "");
    let status = boundary(|| Err(Failure::invalid("has a\0NUL")));
    assert_eq!(status, sgemm_bi_status::InvalidArgument);
    assert_eq!(message(), "has a\\0NUL");
}

/// The layouts the header promises, field by field (x86_64 and aarch64 alike: every field
/// is naturally aligned, so there is no padding).
#[test]
fn struct_layouts_are_the_abi() {
    assert_eq!(size_of::<sgemm_bi_operand>(), 24);
    assert_eq!(offset_of!(sgemm_bi_operand, ld), 8);
    assert_eq!(offset_of!(sgemm_bi_operand, batch_stride), 16);
    assert_eq!(size_of::<sgemm_bi_output>(), 24);
    assert_eq!(offset_of!(sgemm_bi_output, ldc), 8);
    assert_eq!(size_of::<sgemm_bi_gemm_desc>(), 152);
    assert_eq!(offset_of!(sgemm_bi_gemm_desc, struct_size), 0);
    assert_eq!(offset_of!(sgemm_bi_gemm_desc, m), 8);
    assert_eq!(offset_of!(sgemm_bi_gemm_desc, a), 40);
    assert_eq!(offset_of!(sgemm_bi_gemm_desc, b), 64);
    assert_eq!(offset_of!(sgemm_bi_gemm_desc, has_bias), 88);
    assert_eq!(offset_of!(sgemm_bi_gemm_desc, c), 96);
    assert_eq!(offset_of!(sgemm_bi_gemm_desc, reserved), 120);
    assert_eq!(size_of::<sgemm_bi_linear>(), 56);
    assert_eq!(offset_of!(sgemm_bi_linear, m), 16);
    assert_eq!(offset_of!(sgemm_bi_linear, reserved), 40);
    assert_eq!(size_of::<sgemm_bi_capabilities>(), 40);
    assert_eq!(offset_of!(sgemm_bi_capabilities, reserved), 24);
    assert_eq!(size_of::<sgemm_bi_status>(), 4);
}

#[test]
fn descriptors_round_trip() {
    let mut g = Gemm::dense(3, 5, 7, DType::BF16);
    assert_eq!(sgemm_bi_gemm_desc::from_gemm(&g).to_gemm().unwrap(), g);
    g.batch = 4;
    g.a = Operand::col_major(DType::BF16, 9).with_batch_stride(100);
    g.b = g.b.with_batch_stride(0);
    g.bias = Some(DType::F32);
    g.c = Output {
        mode: OutputMode::AccumulateF32,
        ldc: 6,
        batch_stride: 40,
    };
    g.tier = Tier::TensorCores;
    assert_eq!(sgemm_bi_gemm_desc::from_gemm(&g).to_gemm().unwrap(), g);

    let mut d = sgemm_bi_gemm_desc::default();
    // SAFETY: `d` is a valid out-pointer.
    assert_eq!(unsafe { sgemm_bi_gemm_desc_dense(4, 0, 2, 2, &mut d) }, OK);
    assert_eq!(d.to_gemm().unwrap(), Gemm::dense(4, 0, 2, DType::F16));
    assert_eq!(d.struct_size as usize, size_of::<sgemm_bi_gemm_desc>());
}

/// `sgemm_bi_gemm` computes what the Rust API computes, bit for bit, across dtypes,
/// layouts, padding, batching, bias and both output modes.
#[test]
fn gemm_matches_the_rust_api() {
    let h = Handle::cpu();
    let rust = Engine::new(Device::Cpu).unwrap();
    let mut rng = Rng(1);
    for dtype in [DType::F32, DType::BF16, DType::F16] {
        for (la, lb) in [
            (Layout::RowMajor, Layout::RowMajor),
            (Layout::ColMajor, Layout::RowMajor),
            (Layout::RowMajor, Layout::ColMajor),
            (Layout::ColMajor, Layout::ColMajor),
        ] {
            for (m, n, k) in [(1, 1, 1), (5, 7, 13), (17, 3, 0), (0, 4, 4)] {
                let mut g = Gemm::dense(m, n, k, dtype);
                g.batch = 3;
                g.a = Operand {
                    dtype,
                    layout: la,
                    ld: if la == Layout::RowMajor { k } else { m }.max(1) + 1,
                    batch_stride: 0,
                };
                g.a.batch_stride = (m + 1) * (k + 2);
                g.b = Operand {
                    dtype,
                    layout: lb,
                    ld: if lb == Layout::RowMajor { n } else { k }.max(1) + 2,
                    batch_stride: 0,
                };
                g.c.ldc = n.max(1) + 3;
                g.c.batch_stride = m.max(1) * g.c.ldc;
                same_as_rust(&h, &rust, &g, &mut rng);
                g.bias = Some(DType::F32);
                same_as_rust(&h, &rust, &g, &mut rng);
                g.bias = Some(dtype);
                g.c.mode = OutputMode::AccumulateF32;
                same_as_rust(&h, &rust, &g, &mut rng);
            }
        }
    }
}

/// The forward / dW / dX conveniences compute what the Rust API's do, for both weight
/// layouts.
#[test]
fn conveniences_match_the_rust_api() {
    let h = Handle::cpu();
    let rust = Engine::new(Device::Cpu).unwrap();
    let mut rng = Rng(2);
    for dtype in [DType::F32, DType::BF16] {
        for weight in [WeightLayout::KN, WeightLayout::NK] {
            let l = Linear {
                m: 9,
                k: 11,
                n: 6,
                dtype,
                weight,
                tier: Tier::Scalar,
            };
            let cl = sgemm_bi_linear {
                struct_size: size_of::<sgemm_bi_linear>() as u32,
                dtype: desc::c_dtype(dtype),
                weight_layout: weight as u32,
                tier: 0,
                m: 9,
                k: 11,
                n: 6,
                reserved: [0; 2],
            };
            let x = Buf::random(dtype, l.m * l.k, &mut rng);
            let w = Buf::random(dtype, l.k * l.n, &mut rng);
            let bias = Buf::random(DType::F32, l.n, &mut rng);
            let dy = Buf::random(dtype, l.m * l.n, &mut rng);

            let mut y = (
                Buf::random(dtype, l.m * l.n, &mut rng),
                Buf::random(dtype, l.m * l.n, &mut rng),
            );
            // SAFETY: dense buffers of the layer's shapes; outputs overlap no input.
            let st = unsafe {
                sgemm_bi_forward(
                    h.0,
                    &cl,
                    x.ptr(),
                    w.ptr(),
                    bias.ptr(),
                    0,
                    y.0.ptr_mut(),
                    null_mut(),
                )
            };
            assert_eq!(st, OK, "{}", message());
            rust.forward_host(
                &l,
                x.slice(),
                w.slice(),
                Some(bias.slice()),
                y.1.slice_mut(),
            )
            .unwrap();
            assert_eq!(y.0.bits(), y.1.bits(), "forward {l:?}");

            for mode in [
                OutputMode::Overwrite(DType::BF16),
                OutputMode::AccumulateF32,
            ] {
                let dw0 = Buf::random(mode.dtype(), l.k * l.n, &mut rng);
                let mut dw = (dw0.clone(), dw0);
                let (cm, cd) = match mode {
                    OutputMode::Overwrite(d) => (Mode::Overwrite, desc::c_dtype(d)),
                    OutputMode::AccumulateF32 => (Mode::AccumulateF32, 0),
                };
                // SAFETY: as above.
                let st = unsafe {
                    sgemm_bi_backward_dw(
                        h.0,
                        &cl,
                        dy.ptr(),
                        x.ptr(),
                        dw.0.ptr_mut(),
                        cm as u32,
                        cd,
                        null_mut(),
                    )
                };
                assert_eq!(st, OK, "{}", message());
                rust.backward_dw_host(&l, dy.slice(), x.slice(), dw.1.slice_mut(), mode)
                    .unwrap();
                assert_eq!(dw.0.bits(), dw.1.bits(), "dW {l:?} {mode:?}");
            }

            let mut dx = (
                Buf::random(dtype, l.m * l.k, &mut rng),
                Buf::random(dtype, l.m * l.k, &mut rng),
            );
            // SAFETY: as above.
            let st = unsafe {
                sgemm_bi_backward_dx(h.0, &cl, dy.ptr(), w.ptr(), dx.0.ptr_mut(), null_mut())
            };
            assert_eq!(st, OK, "{}", message());
            rust.backward_dx_host(&l, dy.slice(), w.slice(), dx.1.slice_mut())
                .unwrap();
            assert_eq!(dx.0.bits(), dx.1.bits(), "dX {l:?}");
        }
    }
}

/// A rejected call writes nothing and leaves the engine working; the message names the
/// field at fault.
#[test]
fn rejected_calls_name_the_field_and_write_nothing() {
    let h = Handle::cpu();
    let mut rng = Rng(3);
    let g = Gemm::dense(4, 5, 6, DType::F32);
    let good = sgemm_bi_gemm_desc::from_gemm(&g);
    let a = Buf::random(DType::F32, 24, &mut rng);
    let b = Buf::random(DType::F32, 30, &mut rng);
    let c0 = Buf::random(DType::F32, 20, &mut rng);
    let run = |d: &sgemm_bi_gemm_desc, bias: *const c_void| {
        let mut c = c0.clone();
        // SAFETY: buffers fit the valid descriptor; a rejected one reads and writes nothing.
        let st = unsafe { sgemm_bi_gemm(h.0, d, a.ptr(), b.ptr(), bias, c.ptr_mut(), null_mut()) };
        (st, message(), c)
    };
    use sgemm_bi_status as S;
    type Edit = fn(&mut sgemm_bi_gemm_desc);
    let cases: [(Edit, S, &str); 15] = [
        (
            |d| d.struct_size = 8,
            S::InvalidArgument,
            "desc->struct_size is 8",
        ),
        (
            |d| d.reserved[3] = 1,
            S::InvalidArgument,
            "desc->reserved[3]",
        ),
        (|d| d.tier = 3, S::InvalidArgument, "desc->tier is 3"),
        (
            |d| d.a.dtype = 3,
            S::InvalidArgument,
            "desc->a.dtype is 3, which is not a sgemm_bi_dtype",
        ),
        (
            |d| d.b.layout = 9,
            S::InvalidArgument,
            "desc->b.layout is 9",
        ),
        (|d| d.c.mode = 2, S::InvalidArgument, "desc->c.mode is 2"),
        (|d| d.c.dtype = 7, S::InvalidArgument, "desc->c.dtype is 7"),
        (
            |d| d.has_bias = 2,
            S::InvalidArgument,
            "desc->has_bias is 2",
        ),
        (
            |d| d.bias_dtype = 5,
            S::InvalidArgument,
            "desc->bias_dtype is 5",
        ),
        (
            |d| d.has_bias = 1,
            S::NullParameter,
            "null pointer for bias",
        ),
        (
            |d| (d.c.mode, d.c.dtype) = (1, 1),
            S::UnsupportedDtype,
            "ACCUMULATE_F32",
        ),
        (
            |d| d.a.ld = 5,
            S::BadLeadingDimension,
            "leading dimension of A is 5",
        ),
        (
            |d| d.a.ld = u64::MAX / 2,
            S::Overflow,
            "extent of A overflows",
        ),
        (
            |d| (d.batch, d.c.batch_stride) = (2, 3),
            S::OverlappingBatches,
            "overlap",
        ),
        (
            |d| d.tier = 1,
            S::UnsupportedDtype,
            "tensor-core tier takes bf16 or f16",
        ),
    ];
    for (edit, want, needle) in cases {
        let mut d = good;
        edit(&mut d);
        let (st, m, c) = run(&d, null());
        assert_eq!(st, want, "{d:?}: {m}");
        assert!(
            m.contains(needle),
            "message {m:?} does not mention {needle:?}"
        );
        assert_eq!(c.bits(), c0.bits(), "C written by a rejected call");
        let (st, m, c) = run(&good, null());
        assert_eq!((st, m.as_str()), (OK, ""));
        assert_ne!(c.bits(), c0.bits());
    }
    let (st, m, c) = run(&good, a.ptr());
    assert_eq!(st, S::InvalidArgument);
    assert!(
        m.contains("bias is not NULL, but desc->has_bias is 0"),
        "{m}"
    );
    assert_eq!(c.bits(), c0.bits());
    // SAFETY: NULL handle and descriptor are checked.
    let st = unsafe {
        sgemm_bi_gemm(
            null(),
            &good,
            a.ptr(),
            b.ptr(),
            null(),
            null_mut(),
            null_mut(),
        )
    };
    assert_eq!(
        (st, message()),
        (sgemm_bi_status::NullParameter, "engine is NULL".to_owned())
    );
    // SAFETY: as above.
    let st = unsafe {
        sgemm_bi_gemm(
            h.0,
            null(),
            a.ptr(),
            b.ptr(),
            null(),
            null_mut(),
            null_mut(),
        )
    };
    assert_eq!(
        (st, message()),
        (sgemm_bi_status::NullParameter, "desc is NULL".to_owned())
    );
}

/// The training triad's errors name each buffer as the caller passed it (`x`, `w`, `bias`,
/// `y`; `dy`, `x`, `dw`; `dy`, `w`, `dx`), never by its role in the GEMM (A, B, C), in both
/// weight layouts (dW's GEMM swaps its operands between them).
#[test]
fn triad_errors_name_the_callers_parameters() {
    let h = Handle::cpu();
    let mut rng = Rng(5);
    let (m, k, n) = (3usize, 4usize, 5usize);
    for (weight, layout) in [(WeightLayout::KN, 0u32), (WeightLayout::NK, 1)] {
        let cl = sgemm_bi_linear {
            struct_size: size_of::<sgemm_bi_linear>() as u32,
            dtype: desc::c_dtype(DType::F32),
            weight_layout: layout,
            tier: 0,
            m: m as u64,
            k: k as u64,
            n: n as u64,
            reserved: [0; 2],
        };
        assert_eq!(weight as u32, layout);
        let x = Buf::random(DType::F32, m * k, &mut rng);
        let w = Buf::random(DType::F32, k * n, &mut rng);
        let bias = Buf::random(DType::F32, n, &mut rng);
        let dy = Buf::random(DType::F32, m * n, &mut rng);
        let mut out = Buf::random(DType::F32, m * k.max(n) * k, &mut rng);
        let o = out.ptr_mut();
        let forward = |x, w, bias, y| {
            // SAFETY: every buffer holds what the layer needs or is NULL (checked).
            unsafe { sgemm_bi_forward(h.0, &cl, x, w, bias, 0, y, null_mut()) }
        };
        let dw = |dy, x, dw| {
            // SAFETY: as above.
            unsafe { sgemm_bi_backward_dw(h.0, &cl, dy, x, dw, 0, 0, null_mut()) }
        };
        let dx = |dy, w, dx| {
            // SAFETY: as above.
            unsafe { sgemm_bi_backward_dx(h.0, &cl, dy, w, dx, null_mut()) }
        };
        // The status and message of the call just made (the message is the calling
        // thread's last one, so each call is checked before the next).
        let check = |st: sgemm_bi_status, needle: &str| {
            let m = message();
            assert_ne!(st, OK, "{weight:?}: {needle}");
            assert!(
                m.contains(needle),
                "{weight:?}: {m:?} does not say {needle:?}"
            );
            for gemm_name in ["for A", "for B", "for C", "C (bytes"] {
                assert!(
                    !m.contains(gemm_name),
                    "{weight:?}: {m:?} names {gemm_name:?}"
                );
            }
        };
        check(
            forward(null(), w.ptr(), bias.ptr(), o),
            "null pointer for x",
        );
        check(
            forward(x.ptr(), null(), bias.ptr(), o),
            "null pointer for w",
        );
        check(
            forward(x.ptr(), w.ptr(), bias.ptr(), null_mut()),
            "null pointer for y",
        );
        check(dw(null(), x.ptr(), o), "null pointer for dy");
        check(dw(dy.ptr(), null(), o), "null pointer for x");
        check(dw(dy.ptr(), x.ptr(), null_mut()), "null pointer for dw");
        check(dx(null(), w.ptr(), o), "null pointer for dy");
        check(dx(dy.ptr(), null(), o), "null pointer for w");
        check(dx(dy.ptr(), w.ptr(), null_mut()), "null pointer for dx");
        // The output on top of an input: both named.
        check(
            forward(x.ptr(), w.ptr(), bias.ptr(), x.ptr().cast_mut()),
            "y (bytes",
        );
        let st = forward(x.ptr(), w.ptr(), bias.ptr(), x.ptr().cast_mut());
        assert_eq!(st, sgemm_bi_status::OverlappingOperands);
        assert!(message().contains("overlaps x"), "{}", message());
        let st = dw(dy.ptr(), x.ptr(), dy.ptr().cast_mut());
        assert_eq!(st, sgemm_bi_status::OverlappingOperands);
        assert!(message().starts_with("dw (bytes"), "{}", message());
        assert!(message().contains("overlaps dy"), "{}", message());
        // And the Rust API names them the same way.
        let rust = Engine::new(Device::Cpu).unwrap();
        let l = Linear {
            m,
            k,
            n,
            dtype: DType::F32,
            weight,
            tier: Tier::Scalar,
        };
        let short = Buf::random(DType::F32, 1, &mut rng);
        let err = rust
            .backward_dw_host(
                &l,
                dy.slice(),
                short.slice(),
                out.slice_mut(),
                OutputMode::Overwrite(DType::F32),
            )
            .unwrap_err();
        assert!(err.to_string().starts_with("x holds 1 elements"), "{err}");
        let err = rust
            .forward_host(&l, x.slice(), w.slice(), None, short.clone().slice_mut())
            .unwrap_err();
        assert!(err.to_string().starts_with("y holds 1 elements"), "{err}");
    }
}

#[test]
fn engine_creation_and_capabilities() {
    let mut h = std::ptr::dangling_mut::<sgemm_bi_engine>(); // must become NULL
                                                             // SAFETY: `h` is a valid out-pointer.
    let st = unsafe { sgemm_bi_engine_create(2, 0, &mut h) };
    assert_eq!(st, sgemm_bi_status::InvalidArgument);
    assert!(h.is_null(), "a failed create leaves *out NULL");
    assert!(message().contains("device_kind is 2"), "{}", message());
    // SAFETY: as above.
    let st = unsafe { sgemm_bi_engine_create(Kind::Cpu as u32, 1, &mut h) };
    assert_eq!(st, sgemm_bi_status::InvalidArgument);
    assert!(message().contains("ordinal"), "{}", message());
    // SAFETY: NULL out is checked.
    let st = unsafe { sgemm_bi_engine_create(Kind::Cpu as u32, 0, null_mut()) };
    assert_eq!(
        (st, message()),
        (sgemm_bi_status::NullParameter, "out is NULL".to_owned())
    );
    // SAFETY: destroying NULL is a no-op.
    assert_eq!(unsafe { sgemm_bi_engine_destroy(null_mut()) }, OK);

    // A CUDA engine exists only with a driver and a device; either way the answer is typed.
    // SAFETY: as above.
    let st = unsafe { sgemm_bi_engine_create(Kind::Cuda as u32, 4096, &mut h) };
    assert!(
        [sgemm_bi_status::NoDriver, sgemm_bi_status::NoDevice].contains(&st),
        "{}: {}",
        name(st as u32),
        message()
    );
    assert!(h.is_null() && !message().is_empty());

    let cpu = Handle::cpu();
    let mut caps = sgemm_bi_capabilities {
        struct_size: 12,
        ..Default::default()
    };
    // SAFETY: `caps` is a whole struct.
    let st = unsafe { sgemm_bi_engine_capabilities(cpu.0, &mut caps) };
    assert_eq!(st, sgemm_bi_status::InvalidArgument);
    assert!(
        message().contains("out->struct_size is 12"),
        "{}",
        message()
    );
    caps.struct_size = size_of::<sgemm_bi_capabilities>() as u32;
    // SAFETY: as above.
    assert_eq!(
        unsafe { sgemm_bi_engine_capabilities(cpu.0, &mut caps) },
        OK
    );
    assert_eq!(caps.device_kind, Kind::Cpu as u32);
    assert_eq!(
        caps.tiers,
        1 << sgemm_bi_tier::Scalar as u32
            | 1 << sgemm_bi_tier::TensorCores as u32
            | 1 << sgemm_bi_tier::Auto as u32
    );
    assert_eq!(
        (caps.compute_capability_major, caps.compute_capability_minor),
        (0, 0)
    );
    let mut yes = false;
    // SAFETY: `yes` is a valid out-pointer.
    assert_eq!(unsafe { sgemm_bi_engine_supports(cpu.0, 0, &mut yes) }, OK);
    assert!(yes);
    // SAFETY: as above.
    assert_eq!(unsafe { sgemm_bi_engine_supports(cpu.0, 1, &mut yes) }, OK);
    assert!(yes, "the CPU runs the tensor-core tier (the sm_90 model)");
    // SAFETY: as above.
    assert_eq!(
        unsafe { sgemm_bi_engine_supports(cpu.0, 5, &mut yes) },
        sgemm_bi_status::InvalidArgument
    );
    // SAFETY: NULL out is checked.
    assert_eq!(
        unsafe { sgemm_bi_engine_supports(cpu.0, 0, null_mut()) },
        sgemm_bi_status::NullParameter
    );
    // `Auto` on the CPU is the scalar tier for every input; a named tier stays itself.
    let mut resolved = u32::MAX;
    for (tier, dtype, want) in [
        (sgemm_bi_tier::Auto, DType::BF16, sgemm_bi_tier::Scalar),
        (sgemm_bi_tier::Auto, DType::F32, sgemm_bi_tier::Scalar),
        (
            sgemm_bi_tier::TensorCores,
            DType::BF16,
            sgemm_bi_tier::TensorCores,
        ),
        (sgemm_bi_tier::Scalar, DType::F16, sgemm_bi_tier::Scalar),
    ] {
        // SAFETY: `resolved` is a valid out-pointer.
        let status = unsafe {
            sgemm_bi_engine_resolve_tier(cpu.0, tier as u32, desc::c_dtype(dtype), &mut resolved)
        };
        assert_eq!(status, OK);
        assert_eq!(resolved, want as u32, "{tier:?} with {dtype} inputs");
    }
    // SAFETY: bad values and a NULL out are checked.
    unsafe {
        assert_eq!(
            sgemm_bi_engine_resolve_tier(cpu.0, 3, 0, &mut resolved),
            sgemm_bi_status::InvalidArgument
        );
        assert_eq!(
            sgemm_bi_engine_resolve_tier(cpu.0, 2, 9, &mut resolved),
            sgemm_bi_status::InvalidArgument
        );
        assert_eq!(
            sgemm_bi_engine_resolve_tier(cpu.0, 2, 0, null_mut()),
            sgemm_bi_status::NullParameter
        );
    }
}

/// The CPU engine checks every offset before it runs, so it never has a device error to
/// report; the call still checks its handle.
#[test]
fn a_cpu_engine_has_no_device_error() {
    let cpu = Handle::cpu();
    // SAFETY: a live engine.
    assert_eq!(unsafe { sgemm_bi_engine_take_device_error(cpu.get()) }, OK);
    assert_eq!(message(), "");
    // SAFETY: NULL is checked.
    assert_eq!(
        unsafe { sgemm_bi_engine_take_device_error(null()) },
        sgemm_bi_status::NullParameter
    );
    assert_eq!(message(), "engine is NULL");
}

/// One engine, several threads at once: every thread gets the single-threaded bits, and
/// each thread's last error is its own.
#[test]
fn one_engine_shared_by_threads() {
    let h = Handle::cpu();
    let g = Gemm::dense(33, 29, 71, DType::BF16);
    let desc = sgemm_bi_gemm_desc::from_gemm(&g);
    let mut rng = Rng(4);
    let a = Buf::random(DType::BF16, 33 * 71, &mut rng);
    let b = Buf::random(DType::BF16, 71 * 29, &mut rng);
    let run = |c: &mut Buf| {
        // SAFETY: dense buffers of the descriptor's shapes; each thread has its own C.
        let st = unsafe {
            sgemm_bi_gemm(
                h.get(),
                &desc,
                a.ptr(),
                b.ptr(),
                null(),
                c.ptr_mut(),
                null_mut(),
            )
        };
        assert_eq!(st, OK, "{}", message());
    };
    let mut expected = Buf::BF16(vec![bf16::ZERO; 33 * 29]);
    run(&mut expected);
    std::thread::scope(|s| {
        for t in 0..4 {
            let (run, expected, desc, h, a, b) = (&run, &expected, &desc, &h, &a, &b);
            s.spawn(move || {
                for i in 0..8 {
                    if (t + i) % 3 == 0 {
                        let mut bad = *desc;
                        bad.tier = 9;
                        let mut c = expected.clone();
                        // SAFETY: rejected before any pointer is used.
                        let st = unsafe {
                            sgemm_bi_gemm(
                                h.get(),
                                &bad,
                                a.ptr(),
                                b.ptr(),
                                null(),
                                c.ptr_mut(),
                                null_mut(),
                            )
                        };
                        assert_eq!(st, sgemm_bi_status::InvalidArgument);
                        assert!(message().contains("desc->tier is 9"));
                    }
                    let mut c = Buf::BF16(vec![bf16::NAN; 33 * 29]);
                    run(&mut c);
                    assert_eq!(message(), "", "another thread's error leaked into this one");
                    assert_eq!(c.bits(), expected.bits());
                }
            });
        }
    });
}

/// Each enum's table (used to parse and to name values in messages) lists its values in
/// numeric order under the names the header gives them.
#[test]
fn enum_tables_match_the_header() {
    use crate::desc::*;
    const HEADER: &str = include_str!("../../include/sgemm_bi.h");
    fn check<T: CEnum + std::fmt::Debug>(number: fn(T) -> u32) {
        for (i, &(v, c_name)) in T::VALUES.iter().enumerate() {
            assert_eq!(number(v), i as u32, "{}", T::NAME);
            assert!(
                HEADER.contains(&format!("    {c_name} = {i},\n")),
                "{c_name} = {i}"
            );
        }
        let past = T::VALUES.len() as u32;
        assert_eq!(
            T::parse(past, "f").unwrap_err().status,
            sgemm_bi_status::InvalidArgument
        );
    }
    check::<sgemm_bi_dtype>(|v| v as u32);
    check::<sgemm_bi_layout>(|v| v as u32);
    check::<sgemm_bi_tier>(|v| v as u32);
    check::<sgemm_bi_output_mode>(|v| v as u32);
    check::<sgemm_bi_device_kind>(|v| v as u32);
    check::<sgemm_bi_weight_layout>(|v| v as u32);
    for (i, s) in ALL.iter().enumerate() {
        assert!(HEADER.contains(&format!("    {} = {i},\n", name(*s as u32))));
    }
}

#[test]
fn build_info_names_the_version_and_every_module() {
    // SAFETY: a static NUL-terminated string.
    let json = unsafe { CStr::from_ptr(sgemm_bi_build_info()) }
        .to_str()
        .unwrap();
    assert!(json.starts_with(&format!("{{\"version\":\"{}\"", env!("CARGO_PKG_VERSION"))));
    assert!(json.contains("\"name\":\"sm80\"") && json.contains("\"name\":\"sm90a\""));
    assert!(!json.contains("\"loaded\""), "{json}");
    assert_eq!(json, sgemm_bi::build_info().to_json(None));
}

#[test]
fn engine_build_info_reports_its_length_and_refuses_short_buffers() {
    let h = Handle::cpu();
    let mut len = 0usize;
    // SAFETY (every call): a live engine; `buf` is NULL with capacity 0 or a live buffer
    // of the capacity given; `len` is a valid out-pointer or NULL.
    let status = unsafe { sgemm_bi_engine_build_info(h.get(), null_mut(), 0, &mut len) };
    assert_eq!(status, sgemm_bi_status::BufferTooSmall);
    assert!(message().contains("needs"), "{}", message());
    let mut buf = vec![0x55 as std::ffi::c_char; len + 1];
    let status = unsafe { sgemm_bi_engine_build_info(h.get(), buf.as_mut_ptr(), len, &mut len) };
    assert_eq!(status, sgemm_bi_status::BufferTooSmall);
    assert!(
        buf.iter().all(|&b| b == 0x55),
        "nothing written into a short buffer"
    );
    let status =
        unsafe { sgemm_bi_engine_build_info(h.get(), buf.as_mut_ptr(), len + 1, &mut len) };
    assert_eq!(status, OK);
    // SAFETY: the call wrote a NUL-terminated text into `buf`.
    let json = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap();
    assert_eq!(json.len(), len);
    assert!(
        json.ends_with(",\"loaded\":[]}"),
        "a CPU engine loads no module: {json}"
    );
    let status = unsafe { sgemm_bi_engine_build_info(h.get(), null_mut(), 8, &mut len) };
    assert_eq!(status, sgemm_bi_status::NullParameter);
    let status = unsafe { sgemm_bi_engine_build_info(h.get(), buf.as_mut_ptr(), 8, null_mut()) };
    assert_eq!(status, sgemm_bi_status::NullParameter);
    let status = unsafe { sgemm_bi_engine_build_info(null(), buf.as_mut_ptr(), 8, &mut len) };
    assert_eq!(status, sgemm_bi_status::NullParameter);
}
