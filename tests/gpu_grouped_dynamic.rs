//! The grouped kernels' dynamic tile order (`SGEMM_BI_GROUPED_ORDER=dynamic`): each block
//! (each cluster) takes its next tile from a counter of the call, so which block runs a
//! tile depends on timing — the bits must not. Rows split: every output must be the CPU
//! engine's bits for balanced and Zipf-like routings, empty groups (first, inside, last),
//! all rows in one group, and rows past the last group's end (tiles announced without
//! copies), in both B layouts, with and without a bias, 16-bit and f32 outputs, on more
//! tiles than the GPU has SMs (so the counter hands out most of them). Reduction split (its
//! clusters of two): the same routings, where an empty group's tiles are announced without
//! copies, and accumulation into f32. In each, a captured call replays its bits twice (each
//! replay zeroes its own counter: a counter left at the first replay's end would hand out
//! no tiles). The planner's default order for the rows split, and for the reduction split's
//! clusters from 2048 rows a group (these groups are shorter: forced here);
//! `tests/gpu_grouped_static.rs` checks the static one. A test binary of its own, because the engine reads the variable once per device
//! and process; the checks live in `tests/gpu_support/grouped_variants.rs`.
//!
//! `host/src/cuda/grouped.rs` (`the_dynamic_tile_order_runs_only_where_it_is_built_and_asked_for`,
//! `the_reduction_split_takes_clusters_unless_forced_off`) pins that these calls get the
//! `_dyn` entries.
//!
//! Needs a GPU: `bash .gpu/run gpu_grouped_dynamic` on the GPU host.

mod gpu_support;

/// One test for both splits: the variable is set before the engine exists, with no other
/// test thread reading the environment.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_dynamic_tile_order_gives_the_cpu_bits() {
    use gpu_support::grouped_variants as variants;
    variants::the_rows_split_gives_the_cpu_bits("SGEMM_BI_GROUPED_ORDER", "dynamic");
    variants::the_reduction_split_gives_the_cpu_bits("SGEMM_BI_GROUPED_ORDER", "dynamic");
}
