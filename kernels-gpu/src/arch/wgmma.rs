//! Warpgroup matrix multiply-accumulate (`wgmma`, sm_90a) and its ordering instructions.
//!
//! A warpgroup (4 consecutive warps, the first at a warp index divisible by 4) issues
//! `wgmma.mma_async` together; A and B come from shared memory through 64-bit matrix
//! descriptors, D (f32) lives in registers. Accumulator layout of `m64nNk16` (PTX ISA,
//! "Register Fragments: wgmma .m64nNk16"), for thread `t` of the warpgroup with warp
//! `w = t / 32`, `g = (t % 32) / 4`, `q = t % 4`: `d[4j + 2h + e]` is row `16w + 8h + g`,
//! column `8j + 2q + e` (j < N / 8): the `mma.sync` C fragment repeated along N.
//!
//! The wrappers take the accumulators as `&mut [f32; 128]` whatever N is and use
//! `d[0..N/2]`, so one register array serves every tile width. `TRANS_A` / `TRANS_B` are the
//! instruction's transpose immediates: 0 for a K-major operand, 1 for an M- (N-) major one
//! (16-bit inputs only). The accumulator is always added to (`scale-d` = 1): the chain starts
//! from +0.0 stored in the registers, as on the mma.sync path.
//!
//! The wgmma wrappers are generated (one operand list per register); do not edit them by hand.

use core::arch::asm;

/// `wgmma.fence.sync.aligned`: orders this warpgroup's earlier register accesses to the
/// accumulators before the next `wgmma.mma_async`.
#[inline(always)]
pub fn wgmma_fence() {
    // SAFETY: no operands; every thread of the warpgroup executes it together.
    unsafe { asm!("wgmma.fence.sync.aligned;", options(nostack)) };
}

/// `wgmma.commit_group.sync.aligned`: closes the group of wgmma operations issued since the
/// last commit.
#[inline(always)]
pub fn wgmma_commit_group() {
    // SAFETY: no operands; every thread of the warpgroup executes it together.
    unsafe { asm!("wgmma.commit_group.sync.aligned;", options(nostack)) };
}

/// `wgmma.wait_group.sync.aligned N`: waits until at most `N` committed groups are pending.
#[inline(always)]
pub fn wgmma_wait_group<const N: u32>() {
    // SAFETY: no operands; every thread of the warpgroup executes it together.
    unsafe { asm!("wgmma.wait_group.sync.aligned {n};", n = const N, options(nostack)) };
}

/// Keeps the compiler from moving accumulator accesses across an asynchronous wgmma
/// window: an asm with no instruction (a PTX comment) that "reads and writes" every
/// accumulator register.
#[inline(always)]
pub fn wgmma_fence_operands(d: &mut [f32; 128]) {
    // SAFETY: a PTX comment naming the registers; no instruction is emitted.
    unsafe {
        asm!(
            "// wgmma operand fence: {d0} {d1} {d2} {d3} {d4} {d5} {d6} {d7} {d8} {d9} {d10} {d11} {d12} {d13} {d14} {d15} {d16} {d17} {d18} {d19} {d20} {d21} {d22} {d23} {d24} {d25} {d26} {d27} {d28} {d29} {d30} {d31} {d32} {d33} {d34} {d35} {d36} {d37} {d38} {d39} {d40} {d41} {d42} {d43} {d44} {d45} {d46} {d47} {d48} {d49} {d50} {d51} {d52} {d53} {d54} {d55} {d56} {d57} {d58} {d59} {d60} {d61} {d62} {d63} {d64} {d65} {d66} {d67} {d68} {d69} {d70} {d71} {d72} {d73} {d74} {d75} {d76} {d77} {d78} {d79} {d80} {d81} {d82} {d83} {d84} {d85} {d86} {d87} {d88} {d89} {d90} {d91} {d92} {d93} {d94} {d95} {d96} {d97} {d98} {d99} {d100} {d101} {d102} {d103} {d104} {d105} {d106} {d107} {d108} {d109} {d110} {d111} {d112} {d113} {d114} {d115} {d116} {d117} {d118} {d119} {d120} {d121} {d122} {d123} {d124} {d125} {d126} {d127}",
            d0 = inout(reg32) d[0],
            d1 = inout(reg32) d[1],
            d2 = inout(reg32) d[2],
            d3 = inout(reg32) d[3],
            d4 = inout(reg32) d[4],
            d5 = inout(reg32) d[5],
            d6 = inout(reg32) d[6],
            d7 = inout(reg32) d[7],
            d8 = inout(reg32) d[8],
            d9 = inout(reg32) d[9],
            d10 = inout(reg32) d[10],
            d11 = inout(reg32) d[11],
            d12 = inout(reg32) d[12],
            d13 = inout(reg32) d[13],
            d14 = inout(reg32) d[14],
            d15 = inout(reg32) d[15],
            d16 = inout(reg32) d[16],
            d17 = inout(reg32) d[17],
            d18 = inout(reg32) d[18],
            d19 = inout(reg32) d[19],
            d20 = inout(reg32) d[20],
            d21 = inout(reg32) d[21],
            d22 = inout(reg32) d[22],
            d23 = inout(reg32) d[23],
            d24 = inout(reg32) d[24],
            d25 = inout(reg32) d[25],
            d26 = inout(reg32) d[26],
            d27 = inout(reg32) d[27],
            d28 = inout(reg32) d[28],
            d29 = inout(reg32) d[29],
            d30 = inout(reg32) d[30],
            d31 = inout(reg32) d[31],
            d32 = inout(reg32) d[32],
            d33 = inout(reg32) d[33],
            d34 = inout(reg32) d[34],
            d35 = inout(reg32) d[35],
            d36 = inout(reg32) d[36],
            d37 = inout(reg32) d[37],
            d38 = inout(reg32) d[38],
            d39 = inout(reg32) d[39],
            d40 = inout(reg32) d[40],
            d41 = inout(reg32) d[41],
            d42 = inout(reg32) d[42],
            d43 = inout(reg32) d[43],
            d44 = inout(reg32) d[44],
            d45 = inout(reg32) d[45],
            d46 = inout(reg32) d[46],
            d47 = inout(reg32) d[47],
            d48 = inout(reg32) d[48],
            d49 = inout(reg32) d[49],
            d50 = inout(reg32) d[50],
            d51 = inout(reg32) d[51],
            d52 = inout(reg32) d[52],
            d53 = inout(reg32) d[53],
            d54 = inout(reg32) d[54],
            d55 = inout(reg32) d[55],
            d56 = inout(reg32) d[56],
            d57 = inout(reg32) d[57],
            d58 = inout(reg32) d[58],
            d59 = inout(reg32) d[59],
            d60 = inout(reg32) d[60],
            d61 = inout(reg32) d[61],
            d62 = inout(reg32) d[62],
            d63 = inout(reg32) d[63],
            d64 = inout(reg32) d[64],
            d65 = inout(reg32) d[65],
            d66 = inout(reg32) d[66],
            d67 = inout(reg32) d[67],
            d68 = inout(reg32) d[68],
            d69 = inout(reg32) d[69],
            d70 = inout(reg32) d[70],
            d71 = inout(reg32) d[71],
            d72 = inout(reg32) d[72],
            d73 = inout(reg32) d[73],
            d74 = inout(reg32) d[74],
            d75 = inout(reg32) d[75],
            d76 = inout(reg32) d[76],
            d77 = inout(reg32) d[77],
            d78 = inout(reg32) d[78],
            d79 = inout(reg32) d[79],
            d80 = inout(reg32) d[80],
            d81 = inout(reg32) d[81],
            d82 = inout(reg32) d[82],
            d83 = inout(reg32) d[83],
            d84 = inout(reg32) d[84],
            d85 = inout(reg32) d[85],
            d86 = inout(reg32) d[86],
            d87 = inout(reg32) d[87],
            d88 = inout(reg32) d[88],
            d89 = inout(reg32) d[89],
            d90 = inout(reg32) d[90],
            d91 = inout(reg32) d[91],
            d92 = inout(reg32) d[92],
            d93 = inout(reg32) d[93],
            d94 = inout(reg32) d[94],
            d95 = inout(reg32) d[95],
            d96 = inout(reg32) d[96],
            d97 = inout(reg32) d[97],
            d98 = inout(reg32) d[98],
            d99 = inout(reg32) d[99],
            d100 = inout(reg32) d[100],
            d101 = inout(reg32) d[101],
            d102 = inout(reg32) d[102],
            d103 = inout(reg32) d[103],
            d104 = inout(reg32) d[104],
            d105 = inout(reg32) d[105],
            d106 = inout(reg32) d[106],
            d107 = inout(reg32) d[107],
            d108 = inout(reg32) d[108],
            d109 = inout(reg32) d[109],
            d110 = inout(reg32) d[110],
            d111 = inout(reg32) d[111],
            d112 = inout(reg32) d[112],
            d113 = inout(reg32) d[113],
            d114 = inout(reg32) d[114],
            d115 = inout(reg32) d[115],
            d116 = inout(reg32) d[116],
            d117 = inout(reg32) d[117],
            d118 = inout(reg32) d[118],
            d119 = inout(reg32) d[119],
            d120 = inout(reg32) d[120],
            d121 = inout(reg32) d[121],
            d122 = inout(reg32) d[122],
            d123 = inout(reg32) d[123],
            d124 = inout(reg32) d[124],
            d125 = inout(reg32) d[125],
            d126 = inout(reg32) d[126],
            d127 = inout(reg32) d[127],
            options(pure, nomem, nostack, preserves_flags)
        )
    };
}

/// `wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16`: `d[0..128] += A · B` for a 64 × 256
/// tile and 16 k, A and B from shared memory (descriptors `a`, `b`).
///
/// # Safety
/// Every thread of the warpgroup calls it together, after `wgmma_fence`; the descriptors
/// describe initialised shared memory that stays unchanged until the group completes; `d` is
/// not touched until a `wgmma_wait_group` covers this operation.
#[inline(always)]
pub unsafe fn wgmma_m64n256k16_f32_bf16<const TRANS_A: u32, const TRANS_B: u32>(
    d: &mut [f32; 128],
    a: u64,
    b: u64,
) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{{d0}, {d1}, {d2}, {d3}, {d4}, {d5}, {d6}, {d7}, {d8}, {d9}, {d10}, {d11}, {d12}, {d13}, {d14}, {d15}, {d16}, {d17}, {d18}, {d19}, {d20}, {d21}, {d22}, {d23}, {d24}, {d25}, {d26}, {d27}, {d28}, {d29}, {d30}, {d31}, {d32}, {d33}, {d34}, {d35}, {d36}, {d37}, {d38}, {d39}, {d40}, {d41}, {d42}, {d43}, {d44}, {d45}, {d46}, {d47}, {d48}, {d49}, {d50}, {d51}, {d52}, {d53}, {d54}, {d55}, {d56}, {d57}, {d58}, {d59}, {d60}, {d61}, {d62}, {d63}, {d64}, {d65}, {d66}, {d67}, {d68}, {d69}, {d70}, {d71}, {d72}, {d73}, {d74}, {d75}, {d76}, {d77}, {d78}, {d79}, {d80}, {d81}, {d82}, {d83}, {d84}, {d85}, {d86}, {d87}, {d88}, {d89}, {d90}, {d91}, {d92}, {d93}, {d94}, {d95}, {d96}, {d97}, {d98}, {d99}, {d100}, {d101}, {d102}, {d103}, {d104}, {d105}, {d106}, {d107}, {d108}, {d109}, {d110}, {d111}, {d112}, {d113}, {d114}, {d115}, {d116}, {d117}, {d118}, {d119}, {d120}, {d121}, {d122}, {d123}, {d124}, {d125}, {d126}, {d127}}}, {a}, {b}, p, 1, 1, {ta}, {tb}; }}",
            d0 = inout(reg32) d[0],
            d1 = inout(reg32) d[1],
            d2 = inout(reg32) d[2],
            d3 = inout(reg32) d[3],
            d4 = inout(reg32) d[4],
            d5 = inout(reg32) d[5],
            d6 = inout(reg32) d[6],
            d7 = inout(reg32) d[7],
            d8 = inout(reg32) d[8],
            d9 = inout(reg32) d[9],
            d10 = inout(reg32) d[10],
            d11 = inout(reg32) d[11],
            d12 = inout(reg32) d[12],
            d13 = inout(reg32) d[13],
            d14 = inout(reg32) d[14],
            d15 = inout(reg32) d[15],
            d16 = inout(reg32) d[16],
            d17 = inout(reg32) d[17],
            d18 = inout(reg32) d[18],
            d19 = inout(reg32) d[19],
            d20 = inout(reg32) d[20],
            d21 = inout(reg32) d[21],
            d22 = inout(reg32) d[22],
            d23 = inout(reg32) d[23],
            d24 = inout(reg32) d[24],
            d25 = inout(reg32) d[25],
            d26 = inout(reg32) d[26],
            d27 = inout(reg32) d[27],
            d28 = inout(reg32) d[28],
            d29 = inout(reg32) d[29],
            d30 = inout(reg32) d[30],
            d31 = inout(reg32) d[31],
            d32 = inout(reg32) d[32],
            d33 = inout(reg32) d[33],
            d34 = inout(reg32) d[34],
            d35 = inout(reg32) d[35],
            d36 = inout(reg32) d[36],
            d37 = inout(reg32) d[37],
            d38 = inout(reg32) d[38],
            d39 = inout(reg32) d[39],
            d40 = inout(reg32) d[40],
            d41 = inout(reg32) d[41],
            d42 = inout(reg32) d[42],
            d43 = inout(reg32) d[43],
            d44 = inout(reg32) d[44],
            d45 = inout(reg32) d[45],
            d46 = inout(reg32) d[46],
            d47 = inout(reg32) d[47],
            d48 = inout(reg32) d[48],
            d49 = inout(reg32) d[49],
            d50 = inout(reg32) d[50],
            d51 = inout(reg32) d[51],
            d52 = inout(reg32) d[52],
            d53 = inout(reg32) d[53],
            d54 = inout(reg32) d[54],
            d55 = inout(reg32) d[55],
            d56 = inout(reg32) d[56],
            d57 = inout(reg32) d[57],
            d58 = inout(reg32) d[58],
            d59 = inout(reg32) d[59],
            d60 = inout(reg32) d[60],
            d61 = inout(reg32) d[61],
            d62 = inout(reg32) d[62],
            d63 = inout(reg32) d[63],
            d64 = inout(reg32) d[64],
            d65 = inout(reg32) d[65],
            d66 = inout(reg32) d[66],
            d67 = inout(reg32) d[67],
            d68 = inout(reg32) d[68],
            d69 = inout(reg32) d[69],
            d70 = inout(reg32) d[70],
            d71 = inout(reg32) d[71],
            d72 = inout(reg32) d[72],
            d73 = inout(reg32) d[73],
            d74 = inout(reg32) d[74],
            d75 = inout(reg32) d[75],
            d76 = inout(reg32) d[76],
            d77 = inout(reg32) d[77],
            d78 = inout(reg32) d[78],
            d79 = inout(reg32) d[79],
            d80 = inout(reg32) d[80],
            d81 = inout(reg32) d[81],
            d82 = inout(reg32) d[82],
            d83 = inout(reg32) d[83],
            d84 = inout(reg32) d[84],
            d85 = inout(reg32) d[85],
            d86 = inout(reg32) d[86],
            d87 = inout(reg32) d[87],
            d88 = inout(reg32) d[88],
            d89 = inout(reg32) d[89],
            d90 = inout(reg32) d[90],
            d91 = inout(reg32) d[91],
            d92 = inout(reg32) d[92],
            d93 = inout(reg32) d[93],
            d94 = inout(reg32) d[94],
            d95 = inout(reg32) d[95],
            d96 = inout(reg32) d[96],
            d97 = inout(reg32) d[97],
            d98 = inout(reg32) d[98],
            d99 = inout(reg32) d[99],
            d100 = inout(reg32) d[100],
            d101 = inout(reg32) d[101],
            d102 = inout(reg32) d[102],
            d103 = inout(reg32) d[103],
            d104 = inout(reg32) d[104],
            d105 = inout(reg32) d[105],
            d106 = inout(reg32) d[106],
            d107 = inout(reg32) d[107],
            d108 = inout(reg32) d[108],
            d109 = inout(reg32) d[109],
            d110 = inout(reg32) d[110],
            d111 = inout(reg32) d[111],
            d112 = inout(reg32) d[112],
            d113 = inout(reg32) d[113],
            d114 = inout(reg32) d[114],
            d115 = inout(reg32) d[115],
            d116 = inout(reg32) d[116],
            d117 = inout(reg32) d[117],
            d118 = inout(reg32) d[118],
            d119 = inout(reg32) d[119],
            d120 = inout(reg32) d[120],
            d121 = inout(reg32) d[121],
            d122 = inout(reg32) d[122],
            d123 = inout(reg32) d[123],
            d124 = inout(reg32) d[124],
            d125 = inout(reg32) d[125],
            d126 = inout(reg32) d[126],
            d127 = inout(reg32) d[127],
            a = in(reg64) a,
            b = in(reg64) b,
            ta = const TRANS_A,
            tb = const TRANS_B,
            options(nostack)
        )
    };
}

/// `wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16`: `d[0..128] += A · B` for a 64 × 256
/// tile and 16 k, A and B from shared memory (descriptors `a`, `b`).
///
/// # Safety
/// Every thread of the warpgroup calls it together, after `wgmma_fence`; the descriptors
/// describe initialised shared memory that stays unchanged until the group completes; `d` is
/// not touched until a `wgmma_wait_group` covers this operation.
#[inline(always)]
pub unsafe fn wgmma_m64n256k16_f32_f16<const TRANS_A: u32, const TRANS_B: u32>(
    d: &mut [f32; 128],
    a: u64,
    b: u64,
) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {{{d0}, {d1}, {d2}, {d3}, {d4}, {d5}, {d6}, {d7}, {d8}, {d9}, {d10}, {d11}, {d12}, {d13}, {d14}, {d15}, {d16}, {d17}, {d18}, {d19}, {d20}, {d21}, {d22}, {d23}, {d24}, {d25}, {d26}, {d27}, {d28}, {d29}, {d30}, {d31}, {d32}, {d33}, {d34}, {d35}, {d36}, {d37}, {d38}, {d39}, {d40}, {d41}, {d42}, {d43}, {d44}, {d45}, {d46}, {d47}, {d48}, {d49}, {d50}, {d51}, {d52}, {d53}, {d54}, {d55}, {d56}, {d57}, {d58}, {d59}, {d60}, {d61}, {d62}, {d63}, {d64}, {d65}, {d66}, {d67}, {d68}, {d69}, {d70}, {d71}, {d72}, {d73}, {d74}, {d75}, {d76}, {d77}, {d78}, {d79}, {d80}, {d81}, {d82}, {d83}, {d84}, {d85}, {d86}, {d87}, {d88}, {d89}, {d90}, {d91}, {d92}, {d93}, {d94}, {d95}, {d96}, {d97}, {d98}, {d99}, {d100}, {d101}, {d102}, {d103}, {d104}, {d105}, {d106}, {d107}, {d108}, {d109}, {d110}, {d111}, {d112}, {d113}, {d114}, {d115}, {d116}, {d117}, {d118}, {d119}, {d120}, {d121}, {d122}, {d123}, {d124}, {d125}, {d126}, {d127}}}, {a}, {b}, p, 1, 1, {ta}, {tb}; }}",
            d0 = inout(reg32) d[0],
            d1 = inout(reg32) d[1],
            d2 = inout(reg32) d[2],
            d3 = inout(reg32) d[3],
            d4 = inout(reg32) d[4],
            d5 = inout(reg32) d[5],
            d6 = inout(reg32) d[6],
            d7 = inout(reg32) d[7],
            d8 = inout(reg32) d[8],
            d9 = inout(reg32) d[9],
            d10 = inout(reg32) d[10],
            d11 = inout(reg32) d[11],
            d12 = inout(reg32) d[12],
            d13 = inout(reg32) d[13],
            d14 = inout(reg32) d[14],
            d15 = inout(reg32) d[15],
            d16 = inout(reg32) d[16],
            d17 = inout(reg32) d[17],
            d18 = inout(reg32) d[18],
            d19 = inout(reg32) d[19],
            d20 = inout(reg32) d[20],
            d21 = inout(reg32) d[21],
            d22 = inout(reg32) d[22],
            d23 = inout(reg32) d[23],
            d24 = inout(reg32) d[24],
            d25 = inout(reg32) d[25],
            d26 = inout(reg32) d[26],
            d27 = inout(reg32) d[27],
            d28 = inout(reg32) d[28],
            d29 = inout(reg32) d[29],
            d30 = inout(reg32) d[30],
            d31 = inout(reg32) d[31],
            d32 = inout(reg32) d[32],
            d33 = inout(reg32) d[33],
            d34 = inout(reg32) d[34],
            d35 = inout(reg32) d[35],
            d36 = inout(reg32) d[36],
            d37 = inout(reg32) d[37],
            d38 = inout(reg32) d[38],
            d39 = inout(reg32) d[39],
            d40 = inout(reg32) d[40],
            d41 = inout(reg32) d[41],
            d42 = inout(reg32) d[42],
            d43 = inout(reg32) d[43],
            d44 = inout(reg32) d[44],
            d45 = inout(reg32) d[45],
            d46 = inout(reg32) d[46],
            d47 = inout(reg32) d[47],
            d48 = inout(reg32) d[48],
            d49 = inout(reg32) d[49],
            d50 = inout(reg32) d[50],
            d51 = inout(reg32) d[51],
            d52 = inout(reg32) d[52],
            d53 = inout(reg32) d[53],
            d54 = inout(reg32) d[54],
            d55 = inout(reg32) d[55],
            d56 = inout(reg32) d[56],
            d57 = inout(reg32) d[57],
            d58 = inout(reg32) d[58],
            d59 = inout(reg32) d[59],
            d60 = inout(reg32) d[60],
            d61 = inout(reg32) d[61],
            d62 = inout(reg32) d[62],
            d63 = inout(reg32) d[63],
            d64 = inout(reg32) d[64],
            d65 = inout(reg32) d[65],
            d66 = inout(reg32) d[66],
            d67 = inout(reg32) d[67],
            d68 = inout(reg32) d[68],
            d69 = inout(reg32) d[69],
            d70 = inout(reg32) d[70],
            d71 = inout(reg32) d[71],
            d72 = inout(reg32) d[72],
            d73 = inout(reg32) d[73],
            d74 = inout(reg32) d[74],
            d75 = inout(reg32) d[75],
            d76 = inout(reg32) d[76],
            d77 = inout(reg32) d[77],
            d78 = inout(reg32) d[78],
            d79 = inout(reg32) d[79],
            d80 = inout(reg32) d[80],
            d81 = inout(reg32) d[81],
            d82 = inout(reg32) d[82],
            d83 = inout(reg32) d[83],
            d84 = inout(reg32) d[84],
            d85 = inout(reg32) d[85],
            d86 = inout(reg32) d[86],
            d87 = inout(reg32) d[87],
            d88 = inout(reg32) d[88],
            d89 = inout(reg32) d[89],
            d90 = inout(reg32) d[90],
            d91 = inout(reg32) d[91],
            d92 = inout(reg32) d[92],
            d93 = inout(reg32) d[93],
            d94 = inout(reg32) d[94],
            d95 = inout(reg32) d[95],
            d96 = inout(reg32) d[96],
            d97 = inout(reg32) d[97],
            d98 = inout(reg32) d[98],
            d99 = inout(reg32) d[99],
            d100 = inout(reg32) d[100],
            d101 = inout(reg32) d[101],
            d102 = inout(reg32) d[102],
            d103 = inout(reg32) d[103],
            d104 = inout(reg32) d[104],
            d105 = inout(reg32) d[105],
            d106 = inout(reg32) d[106],
            d107 = inout(reg32) d[107],
            d108 = inout(reg32) d[108],
            d109 = inout(reg32) d[109],
            d110 = inout(reg32) d[110],
            d111 = inout(reg32) d[111],
            d112 = inout(reg32) d[112],
            d113 = inout(reg32) d[113],
            d114 = inout(reg32) d[114],
            d115 = inout(reg32) d[115],
            d116 = inout(reg32) d[116],
            d117 = inout(reg32) d[117],
            d118 = inout(reg32) d[118],
            d119 = inout(reg32) d[119],
            d120 = inout(reg32) d[120],
            d121 = inout(reg32) d[121],
            d122 = inout(reg32) d[122],
            d123 = inout(reg32) d[123],
            d124 = inout(reg32) d[124],
            d125 = inout(reg32) d[125],
            d126 = inout(reg32) d[126],
            d127 = inout(reg32) d[127],
            a = in(reg64) a,
            b = in(reg64) b,
            ta = const TRANS_A,
            tb = const TRANS_B,
            options(nostack)
        )
    };
}

/// `wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16`: `d[0..64] += A · B` for a 64 × 128
/// tile and 16 k, A and B from shared memory (descriptors `a`, `b`).
///
/// # Safety
/// Every thread of the warpgroup calls it together, after `wgmma_fence`; the descriptors
/// describe initialised shared memory that stays unchanged until the group completes; `d` is
/// not touched until a `wgmma_wait_group` covers this operation.
#[inline(always)]
pub unsafe fn wgmma_m64n128k16_f32_bf16<const TRANS_A: u32, const TRANS_B: u32>(
    d: &mut [f32; 128],
    a: u64,
    b: u64,
) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{{d0}, {d1}, {d2}, {d3}, {d4}, {d5}, {d6}, {d7}, {d8}, {d9}, {d10}, {d11}, {d12}, {d13}, {d14}, {d15}, {d16}, {d17}, {d18}, {d19}, {d20}, {d21}, {d22}, {d23}, {d24}, {d25}, {d26}, {d27}, {d28}, {d29}, {d30}, {d31}, {d32}, {d33}, {d34}, {d35}, {d36}, {d37}, {d38}, {d39}, {d40}, {d41}, {d42}, {d43}, {d44}, {d45}, {d46}, {d47}, {d48}, {d49}, {d50}, {d51}, {d52}, {d53}, {d54}, {d55}, {d56}, {d57}, {d58}, {d59}, {d60}, {d61}, {d62}, {d63}}}, {a}, {b}, p, 1, 1, {ta}, {tb}; }}",
            d0 = inout(reg32) d[0],
            d1 = inout(reg32) d[1],
            d2 = inout(reg32) d[2],
            d3 = inout(reg32) d[3],
            d4 = inout(reg32) d[4],
            d5 = inout(reg32) d[5],
            d6 = inout(reg32) d[6],
            d7 = inout(reg32) d[7],
            d8 = inout(reg32) d[8],
            d9 = inout(reg32) d[9],
            d10 = inout(reg32) d[10],
            d11 = inout(reg32) d[11],
            d12 = inout(reg32) d[12],
            d13 = inout(reg32) d[13],
            d14 = inout(reg32) d[14],
            d15 = inout(reg32) d[15],
            d16 = inout(reg32) d[16],
            d17 = inout(reg32) d[17],
            d18 = inout(reg32) d[18],
            d19 = inout(reg32) d[19],
            d20 = inout(reg32) d[20],
            d21 = inout(reg32) d[21],
            d22 = inout(reg32) d[22],
            d23 = inout(reg32) d[23],
            d24 = inout(reg32) d[24],
            d25 = inout(reg32) d[25],
            d26 = inout(reg32) d[26],
            d27 = inout(reg32) d[27],
            d28 = inout(reg32) d[28],
            d29 = inout(reg32) d[29],
            d30 = inout(reg32) d[30],
            d31 = inout(reg32) d[31],
            d32 = inout(reg32) d[32],
            d33 = inout(reg32) d[33],
            d34 = inout(reg32) d[34],
            d35 = inout(reg32) d[35],
            d36 = inout(reg32) d[36],
            d37 = inout(reg32) d[37],
            d38 = inout(reg32) d[38],
            d39 = inout(reg32) d[39],
            d40 = inout(reg32) d[40],
            d41 = inout(reg32) d[41],
            d42 = inout(reg32) d[42],
            d43 = inout(reg32) d[43],
            d44 = inout(reg32) d[44],
            d45 = inout(reg32) d[45],
            d46 = inout(reg32) d[46],
            d47 = inout(reg32) d[47],
            d48 = inout(reg32) d[48],
            d49 = inout(reg32) d[49],
            d50 = inout(reg32) d[50],
            d51 = inout(reg32) d[51],
            d52 = inout(reg32) d[52],
            d53 = inout(reg32) d[53],
            d54 = inout(reg32) d[54],
            d55 = inout(reg32) d[55],
            d56 = inout(reg32) d[56],
            d57 = inout(reg32) d[57],
            d58 = inout(reg32) d[58],
            d59 = inout(reg32) d[59],
            d60 = inout(reg32) d[60],
            d61 = inout(reg32) d[61],
            d62 = inout(reg32) d[62],
            d63 = inout(reg32) d[63],
            a = in(reg64) a,
            b = in(reg64) b,
            ta = const TRANS_A,
            tb = const TRANS_B,
            options(nostack)
        )
    };
}

/// `wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16`: `d[0..64] += A · B` for a 64 × 128
/// tile and 16 k, A and B from shared memory (descriptors `a`, `b`).
///
/// # Safety
/// Every thread of the warpgroup calls it together, after `wgmma_fence`; the descriptors
/// describe initialised shared memory that stays unchanged until the group completes; `d` is
/// not touched until a `wgmma_wait_group` covers this operation.
#[inline(always)]
pub unsafe fn wgmma_m64n128k16_f32_f16<const TRANS_A: u32, const TRANS_B: u32>(
    d: &mut [f32; 128],
    a: u64,
    b: u64,
) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{{d0}, {d1}, {d2}, {d3}, {d4}, {d5}, {d6}, {d7}, {d8}, {d9}, {d10}, {d11}, {d12}, {d13}, {d14}, {d15}, {d16}, {d17}, {d18}, {d19}, {d20}, {d21}, {d22}, {d23}, {d24}, {d25}, {d26}, {d27}, {d28}, {d29}, {d30}, {d31}, {d32}, {d33}, {d34}, {d35}, {d36}, {d37}, {d38}, {d39}, {d40}, {d41}, {d42}, {d43}, {d44}, {d45}, {d46}, {d47}, {d48}, {d49}, {d50}, {d51}, {d52}, {d53}, {d54}, {d55}, {d56}, {d57}, {d58}, {d59}, {d60}, {d61}, {d62}, {d63}}}, {a}, {b}, p, 1, 1, {ta}, {tb}; }}",
            d0 = inout(reg32) d[0],
            d1 = inout(reg32) d[1],
            d2 = inout(reg32) d[2],
            d3 = inout(reg32) d[3],
            d4 = inout(reg32) d[4],
            d5 = inout(reg32) d[5],
            d6 = inout(reg32) d[6],
            d7 = inout(reg32) d[7],
            d8 = inout(reg32) d[8],
            d9 = inout(reg32) d[9],
            d10 = inout(reg32) d[10],
            d11 = inout(reg32) d[11],
            d12 = inout(reg32) d[12],
            d13 = inout(reg32) d[13],
            d14 = inout(reg32) d[14],
            d15 = inout(reg32) d[15],
            d16 = inout(reg32) d[16],
            d17 = inout(reg32) d[17],
            d18 = inout(reg32) d[18],
            d19 = inout(reg32) d[19],
            d20 = inout(reg32) d[20],
            d21 = inout(reg32) d[21],
            d22 = inout(reg32) d[22],
            d23 = inout(reg32) d[23],
            d24 = inout(reg32) d[24],
            d25 = inout(reg32) d[25],
            d26 = inout(reg32) d[26],
            d27 = inout(reg32) d[27],
            d28 = inout(reg32) d[28],
            d29 = inout(reg32) d[29],
            d30 = inout(reg32) d[30],
            d31 = inout(reg32) d[31],
            d32 = inout(reg32) d[32],
            d33 = inout(reg32) d[33],
            d34 = inout(reg32) d[34],
            d35 = inout(reg32) d[35],
            d36 = inout(reg32) d[36],
            d37 = inout(reg32) d[37],
            d38 = inout(reg32) d[38],
            d39 = inout(reg32) d[39],
            d40 = inout(reg32) d[40],
            d41 = inout(reg32) d[41],
            d42 = inout(reg32) d[42],
            d43 = inout(reg32) d[43],
            d44 = inout(reg32) d[44],
            d45 = inout(reg32) d[45],
            d46 = inout(reg32) d[46],
            d47 = inout(reg32) d[47],
            d48 = inout(reg32) d[48],
            d49 = inout(reg32) d[49],
            d50 = inout(reg32) d[50],
            d51 = inout(reg32) d[51],
            d52 = inout(reg32) d[52],
            d53 = inout(reg32) d[53],
            d54 = inout(reg32) d[54],
            d55 = inout(reg32) d[55],
            d56 = inout(reg32) d[56],
            d57 = inout(reg32) d[57],
            d58 = inout(reg32) d[58],
            d59 = inout(reg32) d[59],
            d60 = inout(reg32) d[60],
            d61 = inout(reg32) d[61],
            d62 = inout(reg32) d[62],
            d63 = inout(reg32) d[63],
            a = in(reg64) a,
            b = in(reg64) b,
            ta = const TRANS_A,
            tb = const TRANS_B,
            options(nostack)
        )
    };
}

/// `wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16`: `d[0..32] += A · B` for a 64 × 64
/// tile and 16 k, A and B from shared memory (descriptors `a`, `b`).
///
/// # Safety
/// Every thread of the warpgroup calls it together, after `wgmma_fence`; the descriptors
/// describe initialised shared memory that stays unchanged until the group completes; `d` is
/// not touched until a `wgmma_wait_group` covers this operation.
#[inline(always)]
pub unsafe fn wgmma_m64n64k16_f32_bf16<const TRANS_A: u32, const TRANS_B: u32>(
    d: &mut [f32; 128],
    a: u64,
    b: u64,
) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{{d0}, {d1}, {d2}, {d3}, {d4}, {d5}, {d6}, {d7}, {d8}, {d9}, {d10}, {d11}, {d12}, {d13}, {d14}, {d15}, {d16}, {d17}, {d18}, {d19}, {d20}, {d21}, {d22}, {d23}, {d24}, {d25}, {d26}, {d27}, {d28}, {d29}, {d30}, {d31}}}, {a}, {b}, p, 1, 1, {ta}, {tb}; }}",
            d0 = inout(reg32) d[0],
            d1 = inout(reg32) d[1],
            d2 = inout(reg32) d[2],
            d3 = inout(reg32) d[3],
            d4 = inout(reg32) d[4],
            d5 = inout(reg32) d[5],
            d6 = inout(reg32) d[6],
            d7 = inout(reg32) d[7],
            d8 = inout(reg32) d[8],
            d9 = inout(reg32) d[9],
            d10 = inout(reg32) d[10],
            d11 = inout(reg32) d[11],
            d12 = inout(reg32) d[12],
            d13 = inout(reg32) d[13],
            d14 = inout(reg32) d[14],
            d15 = inout(reg32) d[15],
            d16 = inout(reg32) d[16],
            d17 = inout(reg32) d[17],
            d18 = inout(reg32) d[18],
            d19 = inout(reg32) d[19],
            d20 = inout(reg32) d[20],
            d21 = inout(reg32) d[21],
            d22 = inout(reg32) d[22],
            d23 = inout(reg32) d[23],
            d24 = inout(reg32) d[24],
            d25 = inout(reg32) d[25],
            d26 = inout(reg32) d[26],
            d27 = inout(reg32) d[27],
            d28 = inout(reg32) d[28],
            d29 = inout(reg32) d[29],
            d30 = inout(reg32) d[30],
            d31 = inout(reg32) d[31],
            a = in(reg64) a,
            b = in(reg64) b,
            ta = const TRANS_A,
            tb = const TRANS_B,
            options(nostack)
        )
    };
}

/// `wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16`: `d[0..32] += A · B` for a 64 × 64
/// tile and 16 k, A and B from shared memory (descriptors `a`, `b`).
///
/// # Safety
/// Every thread of the warpgroup calls it together, after `wgmma_fence`; the descriptors
/// describe initialised shared memory that stays unchanged until the group completes; `d` is
/// not touched until a `wgmma_wait_group` covers this operation.
#[inline(always)]
pub unsafe fn wgmma_m64n64k16_f32_f16<const TRANS_A: u32, const TRANS_B: u32>(
    d: &mut [f32; 128],
    a: u64,
    b: u64,
) {
    // SAFETY: forwarded contract.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{{d0}, {d1}, {d2}, {d3}, {d4}, {d5}, {d6}, {d7}, {d8}, {d9}, {d10}, {d11}, {d12}, {d13}, {d14}, {d15}, {d16}, {d17}, {d18}, {d19}, {d20}, {d21}, {d22}, {d23}, {d24}, {d25}, {d26}, {d27}, {d28}, {d29}, {d30}, {d31}}}, {a}, {b}, p, 1, 1, {ta}, {tb}; }}",
            d0 = inout(reg32) d[0],
            d1 = inout(reg32) d[1],
            d2 = inout(reg32) d[2],
            d3 = inout(reg32) d[3],
            d4 = inout(reg32) d[4],
            d5 = inout(reg32) d[5],
            d6 = inout(reg32) d[6],
            d7 = inout(reg32) d[7],
            d8 = inout(reg32) d[8],
            d9 = inout(reg32) d[9],
            d10 = inout(reg32) d[10],
            d11 = inout(reg32) d[11],
            d12 = inout(reg32) d[12],
            d13 = inout(reg32) d[13],
            d14 = inout(reg32) d[14],
            d15 = inout(reg32) d[15],
            d16 = inout(reg32) d[16],
            d17 = inout(reg32) d[17],
            d18 = inout(reg32) d[18],
            d19 = inout(reg32) d[19],
            d20 = inout(reg32) d[20],
            d21 = inout(reg32) d[21],
            d22 = inout(reg32) d[22],
            d23 = inout(reg32) d[23],
            d24 = inout(reg32) d[24],
            d25 = inout(reg32) d[25],
            d26 = inout(reg32) d[26],
            d27 = inout(reg32) d[27],
            d28 = inout(reg32) d[28],
            d29 = inout(reg32) d[29],
            d30 = inout(reg32) d[30],
            d31 = inout(reg32) d[31],
            a = in(reg64) a,
            b = in(reg64) b,
            ta = const TRANS_A,
            tb = const TRANS_B,
            options(nostack)
        )
    };
}
