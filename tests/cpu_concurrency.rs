//! Concurrency on the CPU backend (docs/reliability.md, item 3): many threads × many engines
//! at once, and one engine shared by every thread, give exactly the bits of the same calls
//! run one after another; calls that fail on some threads change nothing for the others.
//! The GPU versions (threads × engines × streams, and dropping an engine while its work is
//! queued) are in tests/gpu_hardening.rs.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use sgemm_bi::{DType, Engine, Error, Layout, OutputMode};

const THREADS: usize = 8;
const ENGINES: usize = 3;
const ROUNDS: usize = 5;

/// Random calls: small ones (one thread each inside the backend) and a few past the
/// backend's threshold for splitting one call over its thread pool, so that calls from
/// different threads also share the pool.
fn cases(rng: &mut Rng) -> Vec<Case> {
    (0..24)
        .map(|i| {
            let dtype = DTYPES[i % 3];
            let big = i % 8 == 0;
            let dim = |rng: &mut Rng| {
                if big {
                    100 + rng.below(150)
                } else {
                    1 + rng.below(40)
                }
            };
            let mut s = Shape::new(dim(rng), dim(rng), dim(rng), dtype);
            s.la = rng.pick(&LAYOUTS);
            s.lb = rng.pick(&LAYOUTS);
            s.pad = (rng.below(3), rng.below(3), rng.below(3));
            s.batch = if big { 1 } else { 1 + rng.below(3) };
            s.bias = [None, Some(DType::F32), Some(dtype)][rng.below(3)];
            s.mode = [OutputMode::Overwrite(dtype), OutputMode::AccumulateF32][rng.below(2)];
            Case::build(&s, rng)
        })
        .collect()
}

/// Every thread runs every case `ROUNDS` times in its own order on engine `pick(thread)`,
/// with a rejected call (a leading dimension one too small) before some of them, and
/// compares each result with the serial one. Returns the number of calls made.
fn hammer(engines: &[Engine], cases: &[Case], serial: &[Buf]) -> usize {
    let calls = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let calls = &calls;
            s.spawn(move || {
                let engine = &engines[t % engines.len()];
                let mut rng = Rng::new(1000 + t as u64);
                for round in 0..ROUNDS {
                    let mut order: Vec<usize> = (0..cases.len()).collect();
                    for i in (1..order.len()).rev() {
                        order.swap(i, rng.below(i + 1));
                    }
                    for &i in &order {
                        let case = &cases[i];
                        if rng.chance(0.25) {
                            let mut bad = case.g;
                            bad.c.ldc = bad.n.max(1) - 1;
                            if bad.n > 1 {
                                let mut c = case.c.clone();
                                let err = engine
                                    .gemm_host(
                                        &bad,
                                        case.a.slice(),
                                        case.b.slice(),
                                        case.bias.as_ref().map(Buf::slice),
                                        c.slice_mut(),
                                    )
                                    .unwrap_err();
                                assert!(matches!(err, Error::BadLeadingDimension { .. }));
                            }
                        }
                        let got = case.run(engine);
                        assert_same_bits(
                            &got,
                            &serial[i],
                            &format!("thread {t} round {round} case {i} {:?}", case.g),
                        );
                        calls.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    calls.into_inner()
}

#[test]
fn threads_and_engines_give_the_serial_bits() {
    let mut rng = Rng::new(0xc0c0);
    let cases = cases(&mut rng);
    let serial_engine = cpu();
    let serial: Vec<Buf> = cases.iter().map(|c| c.run(&serial_engine)).collect();
    for (case, got) in cases.iter().zip(&serial) {
        assert_same_bits(got, &case.expected(), "serial run against the reference");
    }
    drop(serial_engine);

    let engines: Vec<Engine> = (0..ENGINES).map(|_| cpu()).collect();
    let calls = hammer(&engines, &cases, &serial);
    println!(
        "{THREADS} threads × {ENGINES} engines: {calls} calls, every one identical to the \
         serial run"
    );
    let shared = [cpu()];
    let calls = hammer(&shared, &cases, &serial);
    println!("{THREADS} threads × 1 shared engine: {calls} calls, every one identical");
}

/// Engines created and dropped on many threads while others compute.
#[test]
fn engines_come_and_go_while_others_compute() {
    let mut rng = Rng::new(0xc0c1);
    let mut s = Shape::new(61, 47, 300, DType::BF16);
    s.lb = Layout::ColMajor;
    let case = Case::build(&s, &mut rng);
    let want = case.expected();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (case, want) = (&case, &want);
            scope.spawn(move || {
                for i in 0..40 {
                    let engine = cpu();
                    if (t + i) % 2 == 0 {
                        assert_same_bits(&case.run(&engine), want, "a short-lived engine");
                    }
                    drop(engine);
                }
            });
        }
    });
}
