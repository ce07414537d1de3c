//! Sources that a script in the repository generates are its output, byte for byte: the
//! check fails when someone edits the generated file by hand or changes the script without
//! running it. Only in a clone: the published crate carries neither the kernels' sources nor
//! the scripts.

use std::path::Path;
use std::process::Command;

/// `kernels-gpu/src/arch/wgmma.rs` is what `scripts/gen-wgmma` writes.
#[test]
fn wgmma_wrappers_are_the_generators_output() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = root.join("scripts/gen-wgmma");
    if !script.is_file() || !root.join("kernels-gpu/src/arch/wgmma.rs").is_file() {
        eprintln!("skipped: not a clone (no scripts/gen-wgmma or kernel sources)");
        return;
    }
    let out = Command::new("python3")
        .arg(&script)
        .arg("--check")
        .output()
        .expect("python3 runs scripts/gen-wgmma (a clone's scripts need Python 3)");
    assert!(
        out.status.success(),
        "scripts/gen-wgmma --check failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
