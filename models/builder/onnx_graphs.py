"""The two ONNX graphs of a bundle, written as small torch modules over a MarianMTModel.

- `EncoderGraph` (encoder.onnx): source ids → the cross-attention keys and values of
  every decoder layer. The encoder output is only ever used through these
  projections, so they are computed here, once per sentence.
- `DecoderStepGraph` (decoder.onnx): one greedy step with a KV cache. It takes the
  new token, the self-attention cache (length 0 on the first step) and the cross K/V,
  and returns the logits (final_logits_bias applied) and the grown cache. It holds no
  encoder and one copy of the tied embedding, used by both the lookup (Gather) and the
  lm_head (Gemm with transB, so no transposed copy is stored).

The modules reuse the model's own layers (projections, layer norms, activation) and
mirror MarianDecoderLayer's post-norm order; the bundle validation proves the result
equal to `model.generate`. Export-time only.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

OPSET = 17


def _split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    batch, length, dim = x.shape
    return x.view(batch, length, heads, dim // heads).transpose(1, 2)


def _split_step_heads(x: torch.Tensor, attention: nn.Module) -> torch.Tensor:
    """`_split_heads` for one decoder step's [batch, 1, dim]: [batch, heads, 1, head_dim] by
    a Reshape alone (the length axis is 1, so no Transpose moves data) to a constant shape
    (Python ints, not traced sizes), so the graph computes no shapes at run time."""
    return x.reshape(-1, attention.num_heads, 1, attention.head_dim)


def _step_query(x: torch.Tensor, attention: nn.Module) -> torch.Tensor:
    """One decoder step's query [batch, 1, dim] as columns, [batch, heads, head_dim, 1]
    (a Reshape alone), for `_attend_step`."""
    return x.reshape(-1, attention.num_heads, attention.head_dim, 1)


def _merge_step_heads(x: torch.Tensor, attention: nn.Module) -> torch.Tensor:
    """One step's attention output [batch, heads, 1, head_dim] back to [batch, 1, dim], by
    a Reshape alone."""
    return x.reshape(-1, 1, attention.num_heads * attention.head_dim)


def _scaled_projection(linear: nn.Linear, factor: float, x: torch.Tensor) -> torch.Tensor:
    """`linear(x) * factor` with the factor folded into the weight and bias (exported as
    constants): the query's attention scaling, as MarianAttention applies it, without a Mul
    over the scores of every layer at every step. With head_dim 64 the factor is 1/8, a
    power of two, so the scores are bitwise those of scaling them after the product."""
    bias = None if linear.bias is None else linear.bias * factor
    return nn.functional.linear(x, linear.weight * factor, bias)


def _attend_step(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, additive_mask=None):
    """Attention of one step's query columns (`_step_query`, already scaled) over `key`
    and `value` [batch, heads, length, head_dim]: [batch, heads, 1, head_dim].

    The scores are computed as key · query, a [length, head_dim] × [head_dim, 1] product
    per row and head, rather than query · keyᵀ: ONNX Runtime then reads the keys as they
    are instead of packing a transposed copy of them for every product (an opus-mt-sized
    decoder step 6–14% faster)."""
    weights = torch.matmul(key, query).transpose(2, 3)
    if additive_mask is not None:
        weights = weights + additive_mask
    return torch.matmul(torch.softmax(weights, dim=-1), value)


class EncoderGraph(nn.Module):
    """Run the Marian encoder and project its output to every layer's cross K/V."""

    def __init__(self, model) -> None:
        super().__init__()
        self.encoder = model.get_encoder()
        self.cross = nn.ModuleList(layer.encoder_attn for layer in model.model.decoder.layers)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        """Return (cross_key_0, cross_value_0, cross_key_1, ...), each [batch, heads, src, head_dim]."""
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        outputs = []
        for attention in self.cross:
            outputs.append(_split_heads(attention.k_proj(hidden), attention.num_heads))
            outputs.append(_split_heads(attention.v_proj(hidden), attention.num_heads))
        return tuple(outputs)


class DecoderStepGraph(nn.Module):
    """One decoding step of the Marian decoder with a self-attention KV cache."""

    def __init__(self, model) -> None:
        super().__init__()
        decoder = model.model.decoder
        self.embed_tokens = decoder.embed_tokens
        self.embed_scale = float(decoder.embed_scale)
        self.positions = decoder.embed_positions
        self.layers = decoder.layers
        self.lm_head = model.lm_head
        self.register_buffer("final_logits_bias", model.final_logits_bias[0].clone())

    def forward(self, input_ids, encoder_attention_mask, *cache):
        """Step: `cache` is (past_key_i, past_value_i, cross_key_i, cross_value_i) per layer.

        Returns (logits [batch, vocab], present_key_0, present_value_0, ...).
        """
        past_length = torch._shape_as_tensor(cache[0])[2:3]
        hidden = self.embed_tokens(input_ids[:, 0]) * self.embed_scale
        hidden = hidden + self.positions.weight.index_select(0, past_length)
        hidden = hidden[:, None, :]
        neg = torch.finfo(hidden.dtype).min
        cross_mask = (1.0 - encoder_attention_mask[:, None, None, :].to(hidden.dtype)) * neg
        presents = []
        for number, layer in enumerate(self.layers):
            past_key, past_value, cross_key, cross_value = cache[4 * number : 4 * number + 4]
            attn = layer.self_attn
            key = torch.cat([past_key, _split_step_heads(attn.k_proj(hidden), attn)], dim=2)
            value = torch.cat([past_value, _split_step_heads(attn.v_proj(hidden), attn)], dim=2)
            presents += [key, value]
            query = _step_query(_scaled_projection(attn.q_proj, attn.scaling, hidden), attn)
            out = attn.out_proj(_merge_step_heads(_attend_step(query, key, value), attn))
            hidden = layer.self_attn_layer_norm(hidden + out)

            cross = layer.encoder_attn
            query = _step_query(_scaled_projection(cross.q_proj, cross.scaling, hidden), cross)
            out = _attend_step(query, cross_key, cross_value, cross_mask)
            hidden = layer.encoder_attn_layer_norm(hidden + cross.out_proj(_merge_step_heads(out, cross)))

            out = layer.fc2(layer.activation_fn(layer.fc1(hidden)))
            hidden = layer.final_layer_norm(hidden + out)
        logits = nn.functional.linear(hidden[:, 0, :], self.lm_head.weight, self.final_logits_bias)
        return (logits, *presents)


def cross_names(layers: int) -> list[str]:
    """Names of the cross-attention K/V tensors, in graph order."""
    return [f"cross_{kind}.{i}" for i in range(layers) for kind in ("key", "value")]


def past_names(layers: int, prefix: str) -> list[str]:
    """Names of the self-attention cache tensors ("past" inputs or "present" outputs)."""
    return [f"{prefix}_{kind}.{i}" for i in range(layers) for kind in ("key", "value")]


def export_encoder(model, path: Path) -> None:
    """Export EncoderGraph to `path` with dynamic batch and source axes."""
    layers = model.config.decoder_layers
    ids = torch.tensor([[5, 6, 7, 0], [8, 9, 0, model.config.pad_token_id]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    axes = {"input_ids": {0: "batch", 1: "src"}, "attention_mask": {0: "batch", 1: "src"}}
    axes.update({name: {0: "batch", 2: "src"} for name in cross_names(layers)})
    with torch.no_grad():
        torch.onnx.export(
            EncoderGraph(model).eval(),
            (ids, mask),
            str(path),
            input_names=["input_ids", "attention_mask"],
            output_names=cross_names(layers),
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )


def export_decoder(model, path: Path) -> None:
    """Export DecoderStepGraph to `path` with dynamic batch, source and cache axes."""
    config = model.config
    layers, heads = config.decoder_layers, config.decoder_attention_heads
    head_dim = config.d_model // heads
    batch, src, past = 2, 4, 3
    inputs = [torch.tensor([[5], [6]]), torch.ones(batch, src, dtype=torch.long)]
    names = ["input_ids", "encoder_attention_mask"]
    axes = {"input_ids": {0: "batch"}, "encoder_attention_mask": {0: "batch", 1: "src"}}
    past_in = past_names(layers, "past")
    crosses = cross_names(layers)
    for number in range(layers):
        for name, length, axis in (
            (past_in[2 * number], past, "past"),
            (past_in[2 * number + 1], past, "past"),
            (crosses[2 * number], src, "src"),
            (crosses[2 * number + 1], src, "src"),
        ):
            inputs.append(torch.randn(batch, heads, length, head_dim))
            names.append(name)
            axes[name] = {0: "batch", 2: axis}
    outputs = ["logits", *past_names(layers, "present")]
    axes["logits"] = {0: "batch"}
    axes.update({name: {0: "batch", 2: "total"} for name in outputs[1:]})
    with torch.no_grad():
        torch.onnx.export(
            DecoderStepGraph(model).eval(),
            tuple(inputs),
            str(path),
            input_names=names,
            output_names=outputs,
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )
