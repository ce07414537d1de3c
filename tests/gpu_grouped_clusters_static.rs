//! The rows split in clusters of two in the static tile order (`SGEMM_BI_GROUPED_CLUSTER=2`
//! with `SGEMM_BI_GROUPED_ORDER=static`: the blocks of a cluster walk cluster tiles c,
//! c + clusters, … without a counter): the same checks as the other variants'
//! (`tests/gpu_support/grouped_variants.rs`). A test binary of its own, because the engine
//! reads the variables once per device and process.
//!
//! Needs a GPU: `bash .gpu/run gpu_grouped_clusters_static` on the GPU host.

mod gpu_support;

#[test]
#[ignore = "needs a CUDA GPU"]
fn clusters_in_the_static_order_give_the_cpu_bits() {
    // Set before the engine exists (the helper sets the other), with no other test thread
    // reading the environment.
    std::env::set_var("SGEMM_BI_GROUPED_ORDER", "static");
    gpu_support::grouped_variants::the_rows_split_gives_the_cpu_bits(
        "SGEMM_BI_GROUPED_CLUSTER",
        "2",
    );
}
