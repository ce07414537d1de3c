"""0.1 checkpoints load without loss: sgemm-bi 0.1's ``Linear`` stored ``weight`` as
``[in_features, out_features]``, this version stores torch's ``[out_features, in_features]``.

``Linear.load_state_dict(sd, layout="in_out")`` and ``sgemm_bi.compat.load_01_state_dict``
transpose 0.1 weights; loading one without them fails with a message that names the layout
and the fix. A square layer cannot be told apart by shape, so only the explicit layout loads
it right (tested: without it the weight loads as stored, transposed). CPU only: nothing here
runs the engine but the last check.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import sgemm_bi
from sgemm_bi.compat import load_01_state_dict


def sd_01(layer: sgemm_bi.Linear) -> dict[str, torch.Tensor]:
    """The state_dict 0.1 would have saved for ``layer``'s parameters: weight [in, out]."""
    sd = {"weight": layer.weight.detach().t().contiguous().clone()}
    if layer.bias is not None:
        sd["bias"] = layer.bias.detach().clone()
    return sd


def test_layout_in_out_transposes_a_01_weight() -> None:
    src = sgemm_bi.Linear(5, 3, tier="scalar")
    dst = sgemm_bi.Linear(5, 3, tier="scalar")
    dst.load_state_dict(sd_01(src), layout="in_out")
    assert torch.equal(dst.weight, src.weight) and torch.equal(dst.bias, src.bias)
    # The default layout is torch's: this version's own state_dict round-trips.
    again = sgemm_bi.Linear(5, 3)
    again.load_state_dict(dst.state_dict())
    assert torch.equal(again.weight, src.weight)
    assert not hasattr(dst, "_sgemm_bi_weight_layout")  # nothing left behind


def test_a_01_weight_without_the_layout_names_it_and_the_fix() -> None:
    src = sgemm_bi.Linear(5, 3)
    dst = sgemm_bi.Linear(5, 3)
    before = dst.weight.detach().clone()
    with pytest.raises(RuntimeError) as e:
        dst.load_state_dict(sd_01(src))
    msg = str(e.value)
    assert "size mismatch for weight" in msg  # torch's own line stays
    for part in ("[5, 3]", "[in_features, out_features]", "0.1", "layout='in_out'",
                 "load_01_state_dict", "square"):
        assert part in msg, (part, msg)
    assert torch.equal(dst.weight, before)


def test_layout_in_out_refuses_a_weight_already_out_in() -> None:
    layer = sgemm_bi.Linear(5, 3)
    with pytest.raises(RuntimeError, match=r"\[out_features, in_features\] already"):
        layer.load_state_dict(sgemm_bi.Linear(5, 3).state_dict(), layout="in_out")


def test_an_unknown_layout_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="'out_in'.*'in_out'"):
        sgemm_bi.Linear(2, 2).load_state_dict({}, layout="kn")


def test_a_square_layer_needs_the_explicit_layout() -> None:
    src = sgemm_bi.Linear(4, 4)
    sd = sd_01(src)
    guessed = sgemm_bi.Linear(4, 4)
    guessed.load_state_dict(sd)  # loads: the shape cannot say it is 0.1's layout
    assert torch.equal(guessed.weight, src.weight.t())
    told = sgemm_bi.Linear(4, 4)
    told.load_state_dict(sd, layout="in_out")
    assert torch.equal(told.weight, src.weight)


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = sgemm_bi.Linear(6, 8, tier="scalar")
        self.square = sgemm_bi.Linear(8, 8, bias=False, tier="scalar")
        self.norm = nn.LayerNorm(8)
        self.down = sgemm_bi.Linear(8, 2, tier="scalar")


def model_sd_01(model: Model) -> dict[str, torch.Tensor]:
    sd = {}
    for name, t in model.state_dict().items():
        layer = name.rsplit(".", 1)[0]
        is_linear = isinstance(model.get_submodule(layer), sgemm_bi.Linear)
        sd[name] = t.t().contiguous() if is_linear and name.endswith(".weight") else t.clone()
    return sd


def test_load_01_state_dict_loads_a_whole_model() -> None:
    torch.manual_seed(0)
    src, dst = Model(), Model()
    result = load_01_state_dict(dst, model_sd_01(src))
    assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []
    for (name, a), (_, b) in zip(src.state_dict().items(), dst.state_dict().items()):
        assert torch.equal(a, b), name
    assert not any(hasattr(m, "_sgemm_bi_weight_layout") for m in dst.modules())
    # strict=False reports what is missing, as torch does.
    partial = model_sd_01(src)
    del partial["down.bias"]
    assert load_01_state_dict(Model(), partial, strict=False).missing_keys == ["down.bias"]


def test_load_01_state_dict_into_one_layer() -> None:
    src, dst = sgemm_bi.Linear(3, 7), sgemm_bi.Linear(3, 7)
    load_01_state_dict(dst, sd_01(src))
    assert torch.equal(dst.weight, src.weight)


def test_a_loaded_01_layer_computes_what_0_1_computed() -> None:
    """The loaded layer gives deterministic_linear's bits on the 0.1 weight."""
    torch.manual_seed(1)
    src = sgemm_bi.Linear(16, 8, tier="scalar")
    sd = sd_01(src)
    dst = sgemm_bi.Linear(16, 8, tier="scalar")
    dst.load_state_dict(sd, layout="in_out")
    x = torch.randn(5, 16)
    want = sgemm_bi.deterministic_linear(x, sd["weight"], sd["bias"])
    assert torch.equal(dst(x).detach(), want)
