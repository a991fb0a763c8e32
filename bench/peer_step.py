#!/usr/bin/env python3
"""The Python peer of bench/step: one BERT pretraining step (forward, losses,
backward, gradient clipping, LAMB) written with torch.nn the way a competent
PyTorch user writes it (Hugging Face's module layout, NVIDIA's MLPerf habit
of running the MLM head on the masked positions only), on the batches
bench/step wrote. It runs under Debian's python3-torch, the LibTorch that
packed-bert links, and takes commands on standard input so that both sides
can take turns in one run:

  run CASE STEPS  ->  one JSON line: {"case", "seconds": [per step], "minflt"}
  version         ->  {"torch", "mode"}: the PyTorch and how the step runs
  rss             ->  {"maxrss_kb"}
  blas            ->  {"core"}: the OpenBLAS kernels in use
  quit

One model and optimizer per model size serve all cases of that size, as on
packed-bert's side. With PRECISION bf16 the forward pass and losses run
under CPU autocast to bfloat16 (fp32 weights), as packed-bert's bf16 does.

On PyTorch 2.x attention is F.scaled_dot_product_attention with a boolean
key-padding mask (what Hugging Face's BERT runs there); on 1.13, which has
no public SDPA, it is written out. MODE `compile` wraps the model in
torch.compile (inductor, PyTorch 2.x; it compiles during the warm-up steps).

usage: peer_step.py CASES_JSON THREADS [fp32|bf16] [eager|compile]
"""
import ctypes
import json
import math
import resource
import sys
import time

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")


class LayerNorm(nn.LayerNorm):
    """LayerNorm in fp32: PyTorch 1.13's CPU autocast does not cast its
    input, and a bf16 input with fp32 weights is an error there."""

    def forward(self, x):
        return super().forward(x.float())


class Embeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.position_embeddings = nn.Embedding(c["max_position_embeddings"], c["hidden_size"])
        self.token_type_embeddings = nn.Embedding(2, c["hidden_size"])
        self.LayerNorm = LayerNorm(c["hidden_size"], eps=1e-12)
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, input_ids, token_type_ids):
        positions = torch.arange(input_ids.size(1), device=input_ids.device)
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)[None]
             + self.token_type_embeddings(token_type_ids))
        return self.dropout(self.LayerNorm(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.heads = c["num_heads"]
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.attention_dropout = nn.Dropout(c["dropout"])
        self.attention_output = nn.Linear(h, h)
        self.attention_norm = LayerNorm(h, eps=1e-12)
        self.intermediate = nn.Linear(h, c["intermediate_size"])
        self.output = nn.Linear(c["intermediate_size"], h)
        self.output_norm = LayerNorm(h, eps=1e-12)
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, x, mask):
        b, s, h = x.shape
        d = h // self.heads

        def split(t):
            return t.view(b, s, self.heads, d).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if HAVE_SDPA:
            p = self.attention_dropout.p if self.training else 0.0
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        else:
            scores = q @ k.transpose(-1, -2) / math.sqrt(d) + mask
            probs = self.attention_dropout(torch.softmax(scores, dim=-1))
            context = probs @ v
        context = context.transpose(1, 2).reshape(b, s, h)
        x = self.attention_norm(x + self.dropout(self.attention_output(context)))
        y = self.output(F.gelu(self.intermediate(x)))
        return self.output_norm(x + self.dropout(y))


class BertForPreTraining(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.embeddings = Embeddings(c)
        self.layers = nn.ModuleList([Layer(c) for _ in range(c["num_layers"])])
        self.pooler = nn.Linear(h, h)
        self.transform = nn.Linear(h, h)
        self.transform_norm = LayerNorm(h, eps=1e-12)
        self.decoder_bias = nn.Parameter(torch.zeros(c["vocab_size"]))
        self.seq_relationship = nn.Linear(h, 2)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, input_ids, token_type_ids, attention_mask, masked_positions,
                masked_labels, next_sentence_labels):
        if HAVE_SDPA:
            # True where a key may be attended (SDPA's boolean mask).
            mask = attention_mask[:, None, None, :].bool()
        else:
            # The usual key-padding mask: 0 for tokens, -10000 for padding.
            mask = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        x = self.embeddings(input_ids, token_type_ids)
        for layer in self.layers:
            x = layer(x, mask)
        # The MLM head on the masked positions only (as NVIDIA's MLPerf code).
        used = masked_labels.view(-1) >= 0
        rows = torch.arange(x.size(0)).repeat_interleave(masked_positions.size(1))[used]
        picked = x[rows, masked_positions.view(-1)[used]]
        t = self.transform_norm(F.gelu(self.transform(picked)))
        mlm_logits = t @ self.embeddings.word_embeddings.weight.t() + self.decoder_bias
        mlm_loss = F.cross_entropy(mlm_logits, masked_labels.view(-1)[used])
        nsp_logits = self.seq_relationship(torch.tanh(self.pooler(x[:, 0])))
        return mlm_loss + F.cross_entropy(nsp_logits, next_sentence_labels)


class Lamb(torch.optim.Optimizer):
    """LAMB as MLPerf BERT uses it: Adam moments with bias correction,
    decoupled weight decay, and the layer-wise trust ratio."""

    def __init__(self, groups, lr, betas=(0.9, 0.999), eps=1e-6):
        super().__init__(groups, dict(lr=lr, betas=betas, eps=eps, weight_decay=0.01))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["m"] = torch.zeros_like(p)
                    state["v"] = torch.zeros_like(p)
                state["step"] += 1
                m, v = state["m"], state["v"]
                m.mul_(b1).add_(p.grad, alpha=1 - b1)
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                update = (m / (1 - b1 ** state["step"])) / (
                    (v / (1 - b2 ** state["step"])).sqrt_().add_(group["eps"]))
                if group["weight_decay"]:
                    update.add_(p, alpha=group["weight_decay"])
                w, u = p.norm(), update.norm()
                ratio = w / u if group["weight_decay"] and w > 0 and u > 0 else 1.0
                p.add_(update, alpha=-group["lr"] * float(ratio))


def load_tensors(case):
    tensors = {}
    for name, spec in case["tensors"].items():
        data = np.fromfile(spec["file"], dtype=np.int64).reshape(spec["shape"])
        tensors[name] = torch.from_numpy(data)
    return tensors


def make_model(config, mode):
    torch.manual_seed(1)
    model = BertForPreTraining(config)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if "bias" in name or "norm" in name.lower() else decay).append(p)
    optimizer = Lamb([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-4)
    if mode == "compile":
        model = torch.compile(model)
    return model, optimizer


def step(model, optimizer, t, bf16):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = model(t["input_ids"], t["token_type_ids"], t["attention_mask"],
                     t["masked_positions"], t["masked_labels"], t["next_sentence_labels"])
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()


def openblas_core():
    try:
        blas = ctypes.CDLL("libopenblas.so.0")
        blas.openblas_get_corename.restype = ctypes.c_char_p
        return blas.openblas_get_corename().decode()
    except (OSError, AttributeError):
        return "(not OpenBLAS)"


def main():
    cases = {c["name"]: c for c in json.load(open(sys.argv[1]))}
    torch.set_num_threads(int(sys.argv[2]))
    bf16 = len(sys.argv) > 3 and sys.argv[3] == "bf16"
    mode = sys.argv[4] if len(sys.argv) > 4 else "eager"
    if mode == "compile" and not hasattr(torch, "compile"):
        sys.exit(f"peer_step.py: torch.compile needs PyTorch 2.x, this is {torch.__version__}")
    models, tensors_of = {}, {}
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            return
        if words[0] == "version":
            print(json.dumps({"torch": torch.__version__, "mode": mode}), flush=True)
            continue
        if words[0] == "blas":
            print(json.dumps({"core": openblas_core()}), flush=True)
            continue
        if words[0] == "rss":
            print(json.dumps({"maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}),
                  flush=True)
            continue
        name, steps = words[1], int(words[2])
        case = cases[name]
        if name not in tensors_of:
            tensors_of[name] = load_tensors(case)
        key = json.dumps(case["model"], sort_keys=True)
        if key not in models:
            models[key] = make_model(case["model"], mode)
        model, optimizer = models[key]
        tensors = tensors_of[name]
        seconds = []
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(steps):
            start = time.perf_counter()
            step(model, optimizer, tensors, bf16)
            seconds.append(time.perf_counter() - start)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        print(json.dumps({"case": name, "seconds": seconds, "minflt": faults}), flush=True)


if __name__ == "__main__":
    main()
