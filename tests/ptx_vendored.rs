//! The vendored kernels in `vendored/` are what the kernel sources compile to,
//! every module assembles with ptxas for the GPUs it targets without spills, and the vendored
//! machine code is exactly what the pinned ptxas makes of the vendored PTX.

use std::process::Command;

use sgemm_bi::kernels::{self, KERNELS};

fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

/// A vendored file (from the sgemm-bi-images package, as build.rs found it), embedded at
/// compile time so the test binary also runs where the sources are not, decompressed.
macro_rules! vendored {
    ($file:literal) => {
        zstd::decode_all(&include_bytes!(concat!(env!("SGEMM_BI_IMAGES_DIR"), "/", $file))[..])
            .unwrap()
    };
}

#[test]
fn vendored_ptx_equals_a_fresh_build() {
    if !kernels::SOURCE.starts_with("fresh") {
        assert!(
            !required("SGEMM_BI_REQUIRE_FRESH_PTX"),
            "SGEMM_BI_REQUIRE_FRESH_PTX=1 but this build used the vendored PTX (is the pinned \
             nightly with rust-src installed?)"
        );
        eprintln!(
            "skipped: the pinned nightly is not installed, the build embedded the vendored PTX"
        );
        return;
    }
    for (file, vendored, module) in [
        ("sm80.ptx.zst", vendored!("sm80.ptx.zst"), &KERNELS.sm80),
        ("sm90a.ptx.zst", vendored!("sm90a.ptx.zst"), &KERNELS.sm90a),
    ] {
        assert!(
            vendored == kernels::ptx_text(module).as_bytes(),
            "vendored/{file} is stale: regenerate it with \
             `SGEMM_BI_UPDATE_PTX=1 SGEMM_BI_PTXAS=<ptxas> cargo build`"
        );
    }
    assert_eq!(kernels::SOURCE, "fresh (equal to the vendored PTX)");
}

/// The flags build.rs assembles the vendored cubins with (`assemble` there), in its order:
/// ptxas records them in some cubins (sm_100's).
fn ptxas_flags(arch: &str) -> [String; 3] {
    ["-v".to_string(), format!("-arch={arch}"), "-O3".to_string()]
}

/// Assembles a module with ptxas for `arch`; returns ptxas's resource report and the cubin.
fn assemble(ptxas: &str, ptx: &str, name: &str, arch: &str) -> (String, Vec<u8>) {
    let dir = std::env::temp_dir().join(format!("sgemm-bi-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join(format!("{name}.ptx"));
    if !src.exists() {
        std::fs::write(&src, ptx).unwrap();
    }
    let cubin = dir.join(format!("{name}.{arch}.cubin"));
    let out = Command::new(ptxas)
        .args(ptxas_flags(arch))
        .arg(&src)
        .arg("-o")
        .arg(&cubin)
        .output()
        .expect("running ptxas");
    let report = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "ptxas -arch={arch} failed:\n{report}");
    (report, std::fs::read(&cubin).unwrap())
}

/// Every (module, architecture) the build embeds machine code for is assembled again here
/// (in parallel: the sm90a module alone takes ptxas over two minutes): every entry point, no
/// spills or local memory where the kernels are tuned, and the very bytes that are embedded. So the vendored machine
/// code cannot drift from the PTX next to it.
#[test]
fn every_module_assembles_without_spills_into_the_embedded_machine_code() {
    let Ok(ptxas) = std::env::var("SGEMM_BI_PTXAS") else {
        assert!(
            !required("SGEMM_BI_REQUIRE_PTXAS"),
            "SGEMM_BI_REQUIRE_PTXAS=1 but SGEMM_BI_PTXAS is not set"
        );
        eprintln!("skipped: set SGEMM_BI_PTXAS to a ptxas binary (scripts/test-all does)");
        return;
    };
    // The sm80 module runs on every GPU from sm_80 on; the sm90a module (wgmma, TMA,
    // setmaxnreg) only on sm_90a.
    let expected_archs = [
        (
            "sm80",
            vec!["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"],
            85,
        ),
        ("sm90a", vec!["sm_90a"], 182),
    ];
    let mut jobs = Vec::new();
    for (module, (name, archs, entries)) in KERNELS.modules().into_iter().zip(expected_archs) {
        assert_eq!(module.name, name);
        let embedded: Vec<&str> = module.cubins.iter().map(|c| c.arch).collect();
        assert_eq!(embedded, archs, "{name}: machine code embedded for");
        let ptx = kernels::ptx_text(module);
        for arch in archs {
            let (ptxas, ptx) = (ptxas.clone(), ptx.clone());
            jobs.push(std::thread::spawn(move || {
                let (report, cubin) = assemble(&ptxas, &ptx, name, arch);
                (name, arch, entries, report, cubin)
            }));
        }
    }
    for job in jobs {
        let (name, arch, expected, report, cubin) = job.join().unwrap();
        let entries = report.matches("Compiling entry function").count();
        assert_eq!(
            entries, expected,
            "{name}: expected 24 scalar (two tile widths), 36 few-row scalar, 9 grouped \
             scalar (6 rows split, 3 reduction split) and 16 tensor-core entry points (sm80) or \
             146 Hopper ones, 24 grouped Hopper ones and 12 scalar `_sm90` ones (sm90a: 32 \
             plain, 8 clustered along M, 16 ping-pong, 20 small-M, 30 decode widths, 6 decode \
             widths clustered along N, 8 wide short ones, 4 short ping-pong ones of an \
             N-contiguous B, 22 one-round widths; grouped: 8 static, 8 dynamic (4 in \
             clusters), 8 reduction (2 dynamic)):\n\
             {report}"
        );
        // A wgmma group must be straight code that starts with its own `wgmma.fence`: with a
        // branch between the fence and the commit (session 28), or a group without a fence
        // whose accumulators ptxas then fences itself on a divergent path (session 29),
        // ptxas serializes every wgmma of the entry point (info C7520, "in divergent path")
        // and the chains run several times slower (docs/perf-notes.md). ptxas says so only
        // as information, so it is checked here; so is the fence ptxas adds where a group
        // lacks one (info C7519, "warpgroup.arrive is injected"), the first sign of the
        // latter even where it does not serialize.
        for line in report.lines() {
            let wgmma = line.contains("wgmma") || line.contains("warpgroup");
            assert!(
                !(wgmma && (line.contains("Performance Loss") || line.contains("injected"))),
                "{name} for {arch}: {line}"
            );
        }
        // The kernels are tuned (and measured) on sm_80 and sm_90/sm_90a: there every entry
        // point fits its registers. ptxas spills a few bytes in a few f32 scalar entries
        // for sm_86/sm_89 and the Blackwell parts, which the driver's own compile of the PTX
        // would do too; those are bounded here so that a change cannot make them large.
        let spill_free = ["sm_80", "sm_90", "sm_90a"].contains(&arch);
        let mut spilling = 0;
        for line in report.lines().filter(|l| l.contains("spill")) {
            if line.contains("0 bytes spill stores, 0 bytes spill loads") {
                continue;
            }
            assert!(!spill_free, "{name} for {arch}: {line}");
            let bytes: Vec<u32> = line
                .split(',')
                .filter_map(|f| f.split_whitespace().next()?.parse().ok())
                .collect();
            assert!(
                bytes.iter().all(|&b| b <= 160),
                "{name} for {arch}: more than 160 bytes of spills: {line}"
            );
            spilling += 1;
        }
        assert!(
            spilling <= 6,
            "{name} for {arch}: {spilling} entry points spill"
        );
        for line in report.lines().filter(|l| l.contains("stack frame")) {
            assert!(
                !spill_free || line.trim_start().starts_with("0 bytes stack frame"),
                "{name} for {arch}: local memory: {line}"
            );
        }
        let module = if name == "sm80" {
            &KERNELS.sm80
        } else {
            &KERNELS.sm90a
        };
        let embedded = kernels::cubin(module, arch).unwrap();
        assert!(
            embedded == cubin,
            "{name} for {arch}: the embedded machine code ({} bytes) is not what this ptxas \
             makes of the PTX ({} bytes): regenerate vendored with \
             `SGEMM_BI_UPDATE_PTX=1 SGEMM_BI_PTXAS=<ptxas> cargo build`",
            embedded.len(),
            cubin.len()
        );
        println!(
            "{name} for {arch}: {entries} entry points, {spilling} with small spills, embedded \
             bytes equal"
        );
    }
}

/// Every embedded cubin is an ELF image for its architecture, and its size is the one the
/// table records; no module is without PTX.
#[test]
fn every_embedded_image_is_whole() {
    for module in KERNELS.modules() {
        assert!(module.ptx.len > 0, "{}: no PTX", module.name);
        let ptx = kernels::ptx_text(module);
        assert_eq!(ptx.len(), module.ptx.len);
        assert!(ptx.contains(&format!(".target {}", module.ptx_target)));
        if kernels::SOURCE != "fresh (differs from the vendored PTX)" {
            assert!(
                !module.cubins.is_empty(),
                "{}: no machine code",
                module.name
            );
        }
        for c in module.cubins {
            let image = kernels::cubin(module, c.arch).unwrap();
            assert_eq!(image.len(), c.image.len, "{} {}", module.name, c.arch);
            assert!(
                image.starts_with(b"\x7fELF"),
                "{} {}: not ELF",
                module.name,
                c.arch
            );
        }
    }
}

/// Each Hopper entry point has its prologue's block barrier once (`barrier.cluster.arrive`
/// in the clustered ones, `bar.sync 0` in the others). Those barriers are `.aligned`: every
/// thread of a warp must reach the same instruction. LLVM does not know that (inline asm is
/// not convergent to it) and may copy a barrier into both arms of a branch on the thread
/// index — it did once, around a `tid == 0` test after the barrier, and the kernels hung on
/// the H200 (docs/perf-notes.md, version 7). A second copy in one entry point is that; so is
/// a named barrier of the epilogue more often than its pieces need, or a ping-pong turn
/// (`hopper/pingpong.rs`) taken or handed over more often than its consumer loops need.
#[test]
fn no_hopper_barrier_is_duplicated() {
    let ptx = kernels::ptx_text(&KERNELS.sm90a);
    let mut entries = 0;
    for body in ptx.split(".entry ").skip(1) {
        let name = body.split('(').next().unwrap_or("").trim();
        if !name.starts_with("sgemm_bi_hopper_") {
            continue;
        }
        let body = body.split("\n}\n").next().unwrap_or(body);
        let (barrier, count) = if name.contains("_x2") {
            (
                "barrier.cluster.arrive",
                body.matches("barrier.cluster.arrive").count(),
            )
        } else {
            ("bar.sync 0;", body.matches("bar.sync 0;").count())
        };
        assert_eq!(count, 1, "{name}: `{barrier}` {count} times");
        // The epilogue's named barriers (`bar.sync id, 128`, one consumer warpgroup's), two
        // per stored piece: BN / 64 whole pieces of 16-bit C and BN / 32 of f32 C (the rest
        // of a one-round width's part goes from registers), each loop once with a bias and
        // once without (`epilogue::store_tma` branches once per part); a
        // ping-pong warpgroup stores two 64-row halves of its (128, 128) tiles, one of its
        // short ones.
        let bn: usize = name
            .split("_n")
            .nth(1)
            .and_then(|rest| rest.split('_').next())
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("{name}: no tile width in the name"));
        let named = body
            .lines()
            .filter(|l| {
                l.trim_start().starts_with("bar.sync %r") && l.trim_end().ends_with(", 128;")
            })
            .count();
        let pingpong = name.contains("_pp");
        let short_pingpong = name.contains("_m8_pp") || name.contains("_m16_pp");
        let halves = if pingpong && !short_pingpong { 2 } else { 1 };
        // The grouped kernels store as the dense ones do (the rows split: the parts inside
        // their group; one consumer loop per width). The reduction split's consumer loops
        // (one per store kind) that run the chain also zero a partial last K tile behind a
        // named barrier in each of their four tail forms (`mainloop::zero_k_rows`).
        // The decode tiles narrower than 64 columns store from registers
        // (`epilogue::store_registers`); those of 8 and 16 rows, whose warps take the chain
        // by mma.sync, hand their blocks to warp 0 behind two named barriers per consumer
        // loop (`hopper::decode`).
        let mma_sync_rows = name.ends_with("_m8") || name.ends_with("_m16");
        let pieces = if name.contains("_grouped_k_") {
            halves * 6 * bn / 32 + 3 * 4
        } else if bn < 64 {
            if mma_sync_rows {
                3 * 2
            } else {
                0
            }
        } else {
            halves * 4 * (bn / 64 + bn / 32)
        };
        assert_eq!(named, pieces, "{name}: {named} named barriers");
        // The turn (`bar.sync id, 256` / `bar.arrive id, 256`): taken once per consumer loop
        // (three: one per store kind), handed over once per chain (each loop has two, for
        // tiles inside and past M).
        let turns = |op: &str| {
            body.lines()
                .filter(|l| l.trim_start().starts_with(op) && l.trim_end().ends_with(", 256;"))
                .count()
        };
        let expected = if pingpong { (3, 6) } else { (0, 0) };
        assert_eq!(
            (turns("bar.sync"), turns("bar.arrive")),
            expected,
            "{name}: ping-pong turns"
        );
        entries += 1;
    }
    assert_eq!(entries, 170, "Hopper entry points (146 dense, 24 grouped)");
}

/// Asserts that the portable module holds exactly the entries `names` of the family whose
/// names start with `prefix` (a name on one side only would fail at the first call on a GPU,
/// never in CI), each with the launch bound of its `threads`-thread blocks.
fn portable_family_is_complete(prefix: &str, names: &[String], threads: u32) {
    let ptx = kernels::ptx_text(&KERNELS.sm80);
    for name in names {
        let body = ptx
            .split(&format!(".visible .entry {name}("))
            .nth(1)
            .unwrap_or_else(|| panic!("{name} is not in the sm80 module"));
        let head = body.split('{').next().unwrap_or("");
        assert!(
            head.contains(&format!(".maxntid {threads}, 1, 1")),
            "{name}: no {threads}-thread launch bound"
        );
    }
    let all = ptx.matches(&format!(".visible .entry {prefix}")).count();
    assert_eq!(all, names.len(), "{prefix} entries the planner cannot name");
}

/// The portable module holds every few-row scalar entry the planner can name
/// (`host/src/cuda/scalar.rs`: `sgemm_bi_scalar_rows_<dtype>_<B layout>_m<rows>[_n<columns>]`,
/// blocks of 4, 8 and 16 rows × 32 columns, of 8 and 16 rows × 64 and of 16 rows × 128), and
/// each gets the launch bounds of its 192-thread blocks (four chain warps, two producers).
#[test]
fn every_few_row_entry_is_in_the_portable_module() {
    let mut names = Vec::new();
    for dtype in ["f32", "bf16", "f16"] {
        for b in ["r", "c"] {
            for block in ["m4", "m8", "m8_n64", "m16", "m16_n64", "m16_n128"] {
                names.push(format!("sgemm_bi_scalar_rows_{dtype}_{b}_{block}"));
            }
        }
    }
    portable_family_is_complete("sgemm_bi_scalar_rows_", &names, 192);
}

/// The portable module holds every scalar grouped entry the planner can name
/// (`host/src/cuda/grouped_scalar.rs`: `sgemm_bi_scalar_grouped_<dtype>_<B layout>` for the
/// rows split, `sgemm_bi_scalar_grouped_k_<dtype>` for the reduction split), each with the
/// launch bounds of its 256-thread blocks, and none other.
#[test]
fn every_scalar_grouped_entry_is_in_the_portable_module() {
    let mut names = Vec::new();
    for dtype in ["f32", "bf16", "f16"] {
        for b in ["r", "c"] {
            names.push(format!("sgemm_bi_scalar_grouped_{dtype}_{b}"));
        }
        names.push(format!("sgemm_bi_scalar_grouped_k_{dtype}"));
    }
    portable_family_is_complete("sgemm_bi_scalar_grouped_", &names, 256);
}
