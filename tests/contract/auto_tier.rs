//! `Tier::Auto`: the engine names a tier for each input dtype (`Engine::resolve_tier`), and
//! a call with `Tier::Auto` gives the bits of the call with that tier asked for by name. On
//! the CPU, Auto is the scalar tier for every input dtype; on a GPU with tensor cores, the
//! tensor-core tier for bf16 and f16 inputs and the scalar tier for f32. A tier asked for by
//! name stays itself.

use super::common::{assert_same_bits, Case, Rng, Shape};
use super::target::{Offsets, Runner, Target};
use sgemm_bi::{DType, Tier};

/// Auto on the target's engine is the tier `resolve_tier` names, bit for bit (and that tier,
/// when it is the scalar one, gives the reference's bits).
pub fn auto_tier_is_the_tier_resolve_tier_names(t: Target) {
    let Some(run) = Runner::new(t) else { return };
    let engine = &run.engine;
    let (mut rng, (m, n, k)) = if t.is_cuda() {
        (Rng::new(0xa070), (130, 72, 200))
    } else {
        (Rng::new(17), (67, 45, 129))
    };
    let mut ran = 0;
    for dtype in [DType::BF16, DType::F16, DType::F32] {
        let named = if t.is_cuda() && dtype != DType::F32 && engine.supports(Tier::TensorCores) {
            Tier::TensorCores
        } else {
            Tier::Scalar
        };
        assert_eq!(
            engine.resolve_tier(Tier::Auto, dtype),
            named,
            "{t:?} {dtype}"
        );
        let mut s = Shape::new(m, n, k, dtype);
        s.bias = Some(DType::F32);
        let mut case = Case::build(&s, &mut rng);
        case.g.tier = named;
        if !run.takes(&case.g, Offsets::default()) {
            continue;
        }
        let by_name = run.run_case(&case);
        if named == Tier::Scalar {
            assert_same_bits(
                &by_name,
                &case.expected(),
                &format!("{t:?} {dtype}: scalar tier vs the reference"),
            );
        }
        case.g.tier = Tier::Auto;
        assert_same_bits(
            &run.run_case(&case),
            &by_name,
            &format!("{t:?} {dtype}: auto vs {named}"),
        );
        ran += 1;
    }
    assert!(ran > 0, "{t:?}: no call ran");
    for &dtype in t.dtypes() {
        assert_eq!(
            engine.resolve_tier(t.tier(), dtype),
            t.tier(),
            "{t:?} {dtype}"
        );
    }
}
