"""The benchmark tools' own logic, without a GPU: `profile_kernels.py` reads Nsight Compute's
CSV page into one row per kernel, whoever launched it, shortens CUTLASS's names, and rejects
malformed shapes, grouped layers and passes; `trace_grouped.py` parses its sequences."""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs: its dataclasses look their module up there.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
          '"Metric Value"')


def row(kid: str, kernel: str, block: str, grid: str, metric: str, unit: str, value: str) -> str:
    return (f'"{kid}","7","python3","host","{kernel}","1","7","{block}","{grid}","0","9.0",'
            f'"section","{metric}","{unit}","{value}"')


def test_ncu_csv_gives_one_row_per_kernel_in_launch_order():
    pk = load("profile_kernels")
    text = "\n".join([
        "the program's own output",
        "==PROF== Connected to process 7",
        HEADER,
        row("0", "nvjet_sm90_tst_64x32", "(384, 1, 1)", "(128, 1, 1)", "Duration", "usecond",
            "10.30"),
        row("0", "nvjet_sm90_tst_64x32", "(384, 1, 1)", "(128, 1, 1)", "Cluster Size", "",
            "2"),
        row("1", "sgemm_bi_hopper_bf16_rc_n32_m64", "(256, 1, 1)", "(128, 1, 1)", "Duration",
            "nsecond", "15,300"),
        row("1", "sgemm_bi_hopper_bf16_rc_n32_m64", "(256, 1, 1)", "(128, 1, 1)",
            "Unlisted Metric", "", "9"),
    ])
    kernels = pk.parse_ncu_csv(text)
    assert [(k.who, k.grid, k.block) for k in kernels] == [
        ("torch", "(128, 1, 1)", "(384, 1, 1)"),
        ("ours", "(128, 1, 1)", "(256, 1, 1)"),
    ]
    assert kernels[0].metrics == {"Duration": "10.3", "Cluster Size": "2"}
    assert kernels[1].metrics == {"Duration": "15.3"}, "ns to µs; metrics not shown are dropped"
    table = pk.table((64, 4096, 4096), "bf16", kernels)
    assert "| ours | `sgemm_bi_hopper_bf16_rc_n32_m64` | (128, 1, 1) | (256, 1, 1) | 15.3 |" in table


def test_ncu_output_without_a_csv_page_gives_no_kernels():
    pk = load("profile_kernels")
    assert pk.parse_ncu_csv("==ERROR== the profiler could not start\n") == []
    assert "no kernel profiled" in pk.table((1, 2, 3), "bf16", [])


@pytest.mark.parametrize("bad", ["64x4096", "64x0x4096", "ax4096x4096", ""])
def test_malformed_shapes_are_rejected(bad):
    pk = load("profile_kernels")
    assert pk.parse_shape("64X4096x14336") == (64, 4096, 14336)
    with pytest.raises(argparse.ArgumentTypeError):
        pk.parse_shape(bad)


def test_grouped_layers_and_passes_parse_or_are_rejected():
    pk = load("profile_kernels")
    g = pk.parse_grouped("16384:4096:1536:Zipf")
    assert (g.tokens, g.hidden, g.width, g.zipf) == (16384, 4096, 1536, True)
    assert g.label == "16384:4096:1536:zipf"
    assert pk.parse_grouped(g.label) == g, "a label parses back to its layer"
    assert not pk.parse_grouped("4096:2048:768:balanced").zipf
    for bad in ["4096:2048:768", "4096:2048:0:zipf", "4096:2048:768:skewed", "a:b:c:zipf"]:
        with pytest.raises(argparse.ArgumentTypeError):
            pk.parse_grouped(bad)
    assert pk.parse_passes("dw,fwd") == ["dw", "fwd"], "in the order given"
    for bad in ["", "fwd,bwd", ","]:
        with pytest.raises(argparse.ArgumentTypeError):
            pk.parse_passes(bad)


def test_a_titled_table_keeps_its_title_and_the_l2_column():
    pk = load("profile_kernels")
    kernels = pk.parse_ncu_csv("\n".join([
        HEADER,
        row("0", "sgemm_bi_hopper_grouped_bf16_c_n256_dyn", "(384, 1, 1)", "(132, 1, 1)",
            "L2 Hit Rate", "%", "56.21"),
    ]))
    text = pk.table("grouped 4096:2048:768:balanced, passes fwd", "bf16", kernels)
    assert text.startswith("### grouped 4096:2048:768:balanced, passes fwd bf16")
    assert "| L2 hit % |" in text
    assert text.rstrip().endswith("| – | – | – | – | – | 56.21 |")


def test_cutlass_kernel_names_shrink_to_their_tile_cluster_and_schedule():
    pk = load("profile_kernels")
    shape = "cute::tuple<cute::C<{}>, cute::C<{}>, cute::C<{}>>"
    name = ("void cutlass::device_kernel<at::enable_3x_kernel_for_sm9x<gemm::GemmUniversal<"
            "gemm::CollectiveMma<gemm::MainloopSm90ArrayTmaGmmaWarpSpecialized<4, "
            + shape.format(2, 1, 1) + ", gemm::KernelPtrArrayTmaWarpSpecializedCooperative>, "
            + shape.format(128, 256, 64) + ", cutlass::bfloat16_t>>>>(T1::Params)")
    assert pk.short_name(name) == ("cutlass::device_kernel<…> [tile 128×256×64, cluster "
                                   "2×1×1, PtrArrayTmaWarpSpecializedCooperative]")
    assert pk.short_name("void at::prepare_grouped_gemm_data<float, int>(T1 *, int)") == (
        "at::prepare_grouped_gemm_data<…>")
    assert pk.short_name("sgemm_bi_hopper_grouped_k_bf16_n256") == (
        "sgemm_bi_hopper_grouped_k_bf16_n256")


def test_f32_profiles_need_the_scalar_tier():
    script = str(BENCHMARKS / "profile_kernels.py")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, script, "--shapes", "1x64x64", *args],
                              capture_output=True, text=True, timeout=60)

    refused = run("--dtype", "f32")
    assert refused.returncode == 2
    assert "--dtype f32 needs --tier scalar" in refused.stderr
    # Accepted with the scalar tier: it goes on to look for ncu (absent here, by name).
    accepted = run("--dtype", "f32", "--tier", "scalar", "--ncu", "no-such-ncu-sgemm-bi")
    assert accepted.returncode == 2
    assert "no-such-ncu-sgemm-bi not found" in accepted.stderr


def test_smem_broadcast_warps_parse_or_are_rejected():
    sb = load("smem_broadcast")
    assert sb.parse_warps("4,16,32") == [4, 16, 32]
    for bad in ("", "0", "33", "4,x"):
        with pytest.raises(argparse.ArgumentTypeError):
            sb.parse_warps(bad)


@pytest.mark.parametrize("probe", ["smem_broadcast", "scalar_lane_tiles"])
def test_cupy_probes_exit_2_without_a_gpu(probe):
    # This machine has no CUDA GPU (CI), and perhaps no CuPy: either way exit 2, not a trace.
    try:
        import cupy  # noqa: F401
        if cupy.cuda.runtime.getDeviceCount() > 0:
            pytest.skip("a CUDA GPU is present")
    except Exception:
        pass
    out = subprocess.run([sys.executable, str(BENCHMARKS / f"{probe}.py")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert f"{probe}:" in out.stderr


def test_trace_sequences_parse_or_are_rejected():
    tg = load("trace_grouped")
    assert tg.parse_sequences("fwd,fwd+dx+dw") == [["fwd"], ["fwd", "dx", "dw"]]
    assert tg.parse_sequences("dw+fwd") == [["dw", "fwd"]]
    for bad in ("", "fwd+", "fwd,up", "fwd+dx+bias"):
        with pytest.raises(argparse.ArgumentTypeError):
            tg.parse_sequences(bad)
    assert tg.short("void " + "x" * 60, 10) == "x" * 9 + "…"
    assert tg.short("sgemm_bi_hopper_grouped_k_bf16_n256") == "sgemm_bi_hopper_grouped_k_bf16_n256"


def test_scalar_lane_tiles_shapes_and_tiles_parse_or_are_rejected():
    lt = load("scalar_lane_tiles")
    assert lt.parse_shapes("16x4096x4096,1X8X32") == [(16, 4096, 4096), (1, 8, 32)]
    for bad in ("", "16x4096", "0x8x32", "16x4095x32", "axbxc"):
        with pytest.raises(argparse.ArgumentTypeError):
            lt.parse_shapes(bad)
    assert lt.parse_tiles("4x1/4x1,2x2/2x2") == [(4, 1, 4, 1), (2, 2, 2, 2)]
    for bad in ("", "3x1/4x1", "4x3/4x1", "4x1/0x1", "4x1/8x4", "16x4/4x1", "4x1"):
        with pytest.raises(argparse.ArgumentTypeError):
            lt.parse_tiles(bad)
    # The kernel's own tile, two stages: 32 B columns of 256 + 16 bytes, 16 f32 A rows of
    # 128 k steps (bf16) or 64 (f32).
    assert lt.smem_bytes(4, 1, 4, 1, 2) == 2 * (32 * 272 + 16 * 128 * 4)
    assert lt.smem_bytes(4, 1, 4, 1, 4) == 2 * (32 * 272 + 16 * 64 * 4)
