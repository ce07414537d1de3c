"""Llama-architecture models from ``transformers`` (random weights, nothing downloaded) with
and without ``sgemm_bi.mode()``: training step time, greedy decode tokens/s (eager, and a
static-cache decode step captured in a CUDA graph), and the batch-invariance check (a
prompt's logits alone vs in a batch of 8). Prints tables.

    python python/benchmarks/bench_llama.py                 # CUDA, bf16, two sizes
    python python/benchmarks/bench_llama.py --device cpu    # tiny sizes, f32 (a smoke run)

``transformers`` is optional: without it the script says so and exits 0. Timings are medians
of ``--repeats`` runs after a warm-up; on CUDA each run ends with a synchronize. Plain and
mode runs alternate (one of each a round) and the ratio column is the median of the rounds'
ratios, so that a drift of the host falls on both sides. The mode's
rows run the same model object with ``sgemm_bi.enable()`` around the timed work. Attention
``sdpa`` is torch's fused kernel, which the mode does not route (it routes matmuls); its
invariance rows show what that kernel does.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the package of this checkout, as the tests do
sys.path.insert(0, str(HERE))

import torch  # noqa: E402

import sgemm_bi  # noqa: E402
from bench_calls import commit  # noqa: E402

SIZES = {  # name: (hidden, intermediate, layers, heads, kv heads, vocab)
    "cuda": {"llama-0.2B": (1024, 2816, 8, 16, 8, 32000),
             "llama-1.1B": (2048, 5632, 22, 32, 4, 32000)},
    "cpu": {"tiny-64": (64, 128, 2, 4, 2, 256), "tiny-128": (128, 256, 2, 4, 2, 512)},
}


MODE_OPTIONS: dict[str, str] = {}  # --bias-grad


@contextlib.contextmanager
def maybe_mode(on: bool) -> Iterator[None]:
    if on:
        sgemm_bi.enable(**MODE_OPTIONS)
    try:
        yield
    finally:
        if on:
            sgemm_bi.disable()


def timed(fn: Callable[[], object], device: torch.device, repeats: int, warmup: int = 2,
          ) -> float:
    """Median seconds of ``fn()`` (synchronized on CUDA)."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def make_model(transformers: Any, size: tuple[int, ...], attn: str, device: torch.device,
               dtype: torch.dtype, max_len: int) -> Any:
    hidden, inter, layers, heads, kv, vocab = size
    config = transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=inter,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
        max_position_embeddings=max_len)
    config._attn_implementation = attn
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).to(device=device, dtype=dtype)


def train_step_s(model: Any, ids: torch.Tensor, device: torch.device, repeats: int) -> float:
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)  # the same cost with and without

    def step() -> None:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    model.train()
    return timed(step, device, repeats)


def interleaved(seconds: dict[bool, Callable[[], float]], repeats: int,
                ) -> tuple[float, float, float]:
    """(plain s, mode s, median ratio): ``repeats`` rounds, each taking ``seconds[False]()``
    plain and then ``seconds[True]()`` under the mode. Interleaving keeps slow drifts of the
    host (clocks, other processes; eager decode is bound by Python on the host) out of the
    ratio, which separate blocks of runs measured at ±30 % on the H200's host."""
    plain, moded, ratios = [], [], []
    for _ in range(repeats):
        pair = []
        for on in (False, True):
            with maybe_mode(on):
                pair.append(seconds[on]())
        plain.append(pair[0])
        moded.append(pair[1])
        ratios.append(pair[1] / pair[0])
    return statistics.median(plain), statistics.median(moded), statistics.median(ratios)


def train_steps_interleaved(model: Any, ids: torch.Tensor, device: torch.device,
                            repeats: int, steps: int = 3) -> tuple[float, float, float]:
    """:func:`interleaved` over training steps: each side of a round the median of
    ``steps`` steps, after two untimed ones (the switch's warm-up)."""
    step_s = functools.partial(train_step_s, model, ids, device, steps)
    return interleaved({False: step_s, True: step_s}, repeats)


def runs_interleaved(fns: dict[bool, Callable[[], object]], device: torch.device,
                     repeats: int) -> tuple[float, float, float]:
    """:func:`interleaved` over single runs of ``fns[False]`` plain and ``fns[True]`` under
    the mode, after one untimed run of each (captures, lazy loads)."""
    for on in (False, True):
        with maybe_mode(on):
            fns[on]()
    return interleaved({on: functools.partial(timed, fns[on], device, 1, warmup=0)
                        for on in (False, True)}, repeats)


def greedy_eager(model: Any, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy continuation with transformers' default (dynamic) cache, one token a step."""
    out = model(input_ids=prompt, use_cache=True)
    cache, tok = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
    toks = [tok]
    for _ in range(new_tokens - 1):
        out = model(input_ids=tok, past_key_values=cache, use_cache=True)
        cache, tok = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
        toks.append(tok)
    return torch.cat(toks, 1)


def _static_cache(transformers: Any, model: Any, batch: int, max_len: int) -> Any:
    """A StaticCache across transformers versions (the constructor's keywords changed)."""
    sc = transformers.StaticCache
    p = next(model.parameters())
    for kwargs in ({"config": model.config, "max_batch_size": batch, "max_cache_len": max_len,
                    "device": p.device, "dtype": p.dtype},
                   {"config": model.config, "max_cache_len": max_len}):
        try:
            return sc(**kwargs)
        except TypeError:
            continue
    raise RuntimeError("no StaticCache constructor of this transformers fits")


class GraphDecoder:
    """Greedy decode with a static cache, inputs in fixed buffers: the one-token step
    captured in a CUDA graph (``graph="capture"``), compiled with
    ``torch.compile(mode="reduce-overhead")`` (``"compile"``: inductor's CUDA graphs), or
    run as it is (``"none"``: the CPU, to check the loop)."""

    def __init__(self, transformers: Any, model: Any, batch: int, max_len: int,
                 graph: str) -> None:
        self.model, self.batch, self.max_len, self.graph = model, batch, max_len, graph
        self.transformers = transformers
        p = next(model.parameters())
        self.tok = torch.zeros(batch, 1, dtype=torch.long, device=p.device)
        self.pos = torch.zeros(1, dtype=torch.long, device=p.device)
        self.cache: Any = None
        self.cuda_graph: Any = None
        # Eager attention: the step's additive mask over the static cache, built from `pos`
        # by device ops. transformers builds it with `torch.tensor(0.0, device=...)`, a copy
        # from pageable host memory that a CUDA graph capture refuses; a 4-D mask it takes
        # as given.
        self.mask_parts: Any = None
        if getattr(model.config, "_attn_implementation", None) == "eager":
            self.mask_parts = (torch.arange(max_len, device=p.device),
                               torch.zeros((), dtype=p.dtype, device=p.device),
                               torch.full((), torch.finfo(p.dtype).min, dtype=p.dtype,
                                          device=p.device))
        self.logits: Any = None
        self.step = self._step
        if graph == "compile":
            self.step = torch.compile(self._step, mode="reduce-overhead", dynamic=False)

    def _step(self) -> torch.Tensor:
        mask = None
        if self.mask_parts is not None:
            kv, zero, lowest = self.mask_parts
            mask = torch.where(kv <= self.pos, zero, lowest).expand(self.batch, 1, 1, -1)
        return self.model(input_ids=self.tok, past_key_values=self.cache,
                          cache_position=self.pos, position_ids=self.pos[None].expand(
                              self.batch, 1), attention_mask=mask,
                          use_cache=True).logits[:, -1]

    def run(self, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
        self.cache = self.cache or _static_cache(self.transformers, self.model, self.batch,
                                                 self.max_len)
        self.cache.reset()
        n = prompt.shape[1]
        out = self.model(input_ids=prompt, past_key_values=self.cache, use_cache=True,
                         cache_position=torch.arange(n, device=prompt.device))
        self.tok.copy_(out.logits[:, -1].argmax(-1, keepdim=True))
        self.pos.fill_(n)
        toks = [self.tok.clone()]
        if self.graph == "capture" and self.cuda_graph is None:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):  # warm-up off the capture (allocator, lazy loads)
                self._step()
            torch.cuda.current_stream().wait_stream(s)
            self.cuda_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.cuda_graph):
                self.logits = self._step()
        for _ in range(new_tokens - 1):
            if self.cuda_graph is not None:
                self.cuda_graph.replay()
                logits = self.logits
            else:
                logits = self.step()
            self.tok.copy_(logits.argmax(-1, keepdim=True))
            self.pos.add_(1)
            toks.append(self.tok.clone())
        return torch.cat(toks, 1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda if present)")
    p.add_argument("--quick", action="store_true", help="fewer repeats and tokens")
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--sizes", nargs="*", default=None, help="size names (default: all)")
    p.add_argument("--decode-graph", choices=("capture", "compile"), default="capture",
                   help="CUDA graphs for decode: capture the static-cache step with "
                        "torch.cuda.CUDAGraph (default), or torch.compile(mode="
                        "'reduce-overhead')")
    p.add_argument("--bias-grad", choices=("torch", "engine"), default="torch",
                   help="the mode's bias_grad (engine: F.linear through sgemm_bi.linear)")
    args = p.parse_args()
    MODE_OPTIONS["bias_grad"] = args.bias_grad
    try:
        import transformers
    except ImportError:
        print("transformers is not installed: nothing to benchmark (pip install transformers)")
        return
    # transformers' deprecation notices (past_key_values -> cache, ...): the old spellings are
    # kept so the script runs on older transformers too.
    warnings.filterwarnings("ignore", category=FutureWarning)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda = device.type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    sizes = SIZES["cuda" if cuda else "cpu"]
    if args.sizes:
        sizes = {k: v for k, v in sizes.items() if k in args.sizes}
    repeats = args.repeats or (2 if args.quick else (5 if cuda else 3))
    train_shape = (4, 512) if cuda else (2, 16)
    prompt_len, new_tokens = (32, 8 if args.quick else 64) if cuda else (8, 4 if args.quick else 8)
    max_len = max(train_shape[1], prompt_len + new_tokens) + 8
    name = torch.cuda.get_device_name(device) if cuda else "CPU"
    print(f"device: {device} ({name}); torch {torch.__version__}; transformers "
          f"{transformers.__version__}; sgemm_bi {sgemm_bi.__version__}, commit {commit()}; "
          f"dtype {str(dtype).removeprefix('torch.')}; median of {repeats}; mode bias_grad="
          f"{args.bias_grad}")
    print(f"training: batch x seq = {train_shape[0]} x {train_shape[1]}, SGD step; decode: "
          f"prompt {prompt_len}, {new_tokens} new tokens, greedy")
    gen = torch.Generator().manual_seed(0)
    rows: list[tuple[str, ...]] = []
    inv: list[tuple[str, ...]] = []

    def add(table: list[tuple[str, ...]], row: tuple[str, ...]) -> None:
        # Each row also as it is measured, so that a run cut short still tells what it had.
        table.append(row)
        print("  " + " | ".join(row), flush=True)

    for size_name, size in sizes.items():
        for attn in ("eager", "sdpa"):
            model = make_model(transformers, size, attn, device, dtype, max_len)
            vocab = size[-1]
            ids = torch.randint(0, vocab, train_shape, generator=gen).to(device)
            prompts = torch.randint(0, vocab, (8, prompt_len), generator=gen).to(device)
            label = f"{size_name} {attn}"
            t_plain, t_mode, ratio = train_steps_interleaved(model, ids, device, repeats)
            add(rows, (label, "training step", f"{t_plain * 1e3:.2f} ms",
                       f"{t_mode * 1e3:.2f} ms", f"{ratio:.3f}x time"))
            model.eval()
            for batch in (1, 8):
                prompt = prompts[:batch]
                graph_name = f"CUDA graph ({args.decode_graph})" if cuda else "static cache"
                for how in ("eager", graph_name):
                    fns: dict[bool, Callable[[], object]] = {}
                    for on in (False, True):
                        if how == "eager":
                            fns[on] = functools.partial(greedy_eager, model, prompt, new_tokens)
                        else:  # one decoder (and graph) for each side
                            dec = GraphDecoder(transformers, model, batch, max_len,
                                               args.decode_graph if cuda else "none")
                            fns[on] = functools.partial(dec.run, prompt, new_tokens)
                    try:
                        with torch.no_grad():
                            s_plain, s_mode, ratio = runs_interleaved(fns, device, repeats)
                        tps = (batch * new_tokens / s_plain, batch * new_tokens / s_mode)
                        # Throughput ratio = time ratio inverted, the median over the rounds.
                        rel = 1.0 / ratio
                    except Exception as e:  # a decode path this stack cannot run
                        tps, rel = (float("nan"), float("nan")), float("nan")
                        print(f"  {label} {how} batch {batch}: "
                              f"{type(e).__name__}: {str(e)[:160]}")
                    add(rows, (label, f"decode b={batch} {how}", f"{tps[0]:.1f} tok/s",
                               f"{tps[1]:.1f} tok/s", f"{rel:.3f}x tok/s"))
            for on in (False, True):
                with torch.no_grad(), maybe_mode(on):
                    alone = model(input_ids=prompts[:1]).logits[0].float()
                    batched = model(input_ids=prompts).logits[0].float()
                add(inv, (label, "mode" if on else "plain",
                          f"{(alone - batched).abs().max().item():.3g}"))
            del model
            if cuda:
                torch.cuda.empty_cache()
            print(f"  done: {label}", flush=True)

    print()
    print("| model | what | plain | under the mode | mode / plain |")
    print("|---|---|---:|---:|---:|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print()
    print("Batch invariance: max |logits of prompt 0 alone - in a batch of 8| (0 = bit-identical)")
    print()
    print("| model | run | max abs diff |")
    print("|---|---|---:|")
    for r in inv:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
