//! Fuzzes the CPU backend's planner (blocking, task split, microkernel and packing choices,
//! epilogue) against the independent reference of the scalar tier (`tests/common`): shapes
//! up to 48 (sometimes one dimension up to 300, past the cache blocks), batches, layouts,
//! padded leading dimensions, gaps and broadcast B, bias, output modes, and input values
//! whose bits come from the fuzzer (NaN, Inf, subnormals and −0 included) or from a seeded
//! generator with planted specials. Every element of C — the written ones, the padding and a
//! guard after its span — must have the reference's bits.
#![no_main]

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "../../tests/common/specials.rs"]
mod specials;

use common::{assert_same_bits, Buf, Case, Rng, Shape, DTYPES, LAYOUTS};
use libfuzzer_sys::fuzz_target;
use sgemm_bi::{DType, Device, Engine, OutputMode};
use specials::PLANTS;

fn engine() -> &'static Engine {
    static E: std::sync::OnceLock<Engine> = std::sync::OnceLock::new();
    E.get_or_init(|| Engine::new(Device::Cpu).unwrap())
}

/// Reads the input from the front (zeros once it is used up).
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
    fn below(&mut self, n: usize) -> usize {
        self.u8() as usize % n
    }
}

fuzz_target!(|data: &[u8]| {
    let mut bytes = Bytes(data);
    let dtype = DTYPES[bytes.below(3)];
    let flags = bytes.u8();
    let dim = |bytes: &mut Bytes, big: bool| {
        if big {
            bytes.u8() as usize + bytes.below(45)
        } else {
            bytes.below(49)
        }
    };
    let big = bytes.below(4); // 3: every dimension small
    let mut s = Shape::new(
        dim(&mut bytes, big == 0),
        dim(&mut bytes, big == 1),
        dim(&mut bytes, big == 2),
        dtype,
    );
    s.batch = bytes.below(4);
    s.la = LAYOUTS[bytes.below(2)];
    s.lb = LAYOUTS[bytes.below(2)];
    s.pad = (bytes.below(4), bytes.below(4), bytes.below(4));
    s.gap = (bytes.below(5), bytes.below(5), bytes.below(5));
    s.broadcast_b = flags & 1 != 0;
    s.bias = [None, Some(DType::F32), Some(dtype)][bytes.below(3)];
    s.mode = [
        OutputMode::Overwrite(DType::F32),
        OutputMode::Overwrite(DType::BF16),
        OutputMode::Overwrite(DType::F16),
        OutputMode::AccumulateF32,
    ][bytes.below(4)];
    let seed = u64::from_le_bytes(std::array::from_fn(|_| bytes.u8()));
    let mut rng = Rng::new(seed);
    // Exponent ranges: narrow (cancellation), or wide enough to overflow and underflow.
    let exp = match ((flags >> 1) & 3, dtype) {
        (0 | 1, _) => (-3, 3),
        (_, DType::F16) => (-14, 15),
        _ => (-60, 60),
    };
    let g = s.gemm();
    let mut case = Case::from_gemm(g, &mut rng, exp);
    // Values: the rest of the input's bytes, or a planting plan, or the random ones.
    let values = (flags >> 3) & 3;
    let fill = |b: &mut Buf, rng: &mut Rng, bytes: &mut Bytes| {
        let dtype = b.dtype();
        for i in 0..b.len() {
            match values {
                0 if !bytes.0.is_empty() => {
                    let raw = match dtype {
                        DType::F32 => u32::from_le_bytes(std::array::from_fn(|_| bytes.u8())),
                        _ => u16::from_le_bytes([bytes.u8(), bytes.u8()]) as u32,
                    };
                    b.set_bits(i, raw);
                }
                1 | 2 => {
                    let plant = PLANTS[(flags as usize >> 5) % PLANTS.len()];
                    if let Some(bits) = specials::planted(plant, dtype, || rng.next_u64()) {
                        b.set_bits(i, bits);
                    }
                }
                _ => {}
            }
        }
    };
    fill(&mut case.a, &mut rng, &mut bytes);
    fill(&mut case.b, &mut rng, &mut bytes);
    if let Some(bias) = case.bias.as_mut() {
        fill(bias, &mut rng, &mut bytes);
    }
    let want = case.expected();
    let got = case.run(engine());
    assert_same_bits(&got, &want, &format!("{:?}", case.g));
});
