#!/usr/bin/env python3
"""The Hugging Face peer of bench/gpu: what a user trains with otherwise.

    python3 bench/hf_peer.py PLAN.json

transformers' BertForPreTraining with SDPA attention, fp32 weights under
bf16 autocast, on a CUDA GPU; each step trains on the sequences of one step
of bench/gpu's plan (their lengths), each padded to a row of max_len with an
attention mask, 15% of each sequence's tokens masked (at most 76), random
NSP labels, in micro-batches of at most `micro_rows` rows whose gradients
are accumulated (as packed-bert's rows per micro-batch: the padded rows of
a step do not fit a GPU at once for BERT-large); torch's fused AdamW. The
first `warmup` steps are not timed.
Prints one JSON object: seconds, real tokens and sequences of the timed
steps, peak GPU memory, torch's version.
"""
import json
import sys
import time

import torch
from transformers import BertConfig, BertForPreTraining


def step_tensors(lengths, max_len, generator, device):
    rows = len(lengths)
    ids = torch.zeros(rows, max_len, dtype=torch.long)
    types = torch.zeros(rows, max_len, dtype=torch.long)
    mask = torch.zeros(rows, max_len, dtype=torch.long)
    labels = torch.full((rows, max_len), -100, dtype=torch.long)
    for r, n in enumerate(lengths):
        ids[r, :n] = torch.randint(1000, 30000, (n,), generator=generator)
        ids[r, 0], ids[r, n // 2], ids[r, n - 1] = 101, 102, 102
        types[r, n // 2 + 1:n] = 1
        mask[r, :n] = 1
        masked = torch.rand(n, generator=generator) < 0.15
        masked[[0, n // 2, n - 1]] = False
        positions = masked.nonzero().flatten()[:76]
        labels[r, positions] = torch.randint(1000, 30000, (len(positions),), generator=generator)
    nsp = torch.randint(0, 2, (rows,), generator=generator)
    return [t.to(device, non_blocking=True) for t in (ids, types, mask, labels, nsp)]


def main(path):
    plan = json.load(open(path))
    device = torch.device("cuda")
    config = BertConfig(hidden_size=plan["hidden"], num_hidden_layers=plan["layers"],
                        num_attention_heads=plan["heads"], intermediate_size=plan["ffn"],
                        max_position_embeddings=plan["max_len"])
    torch.manual_seed(1)
    model = BertForPreTraining._from_config(config, attn_implementation="sdpa").to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    generator = torch.Generator().manual_seed(3)
    micro = plan.get("micro_rows", max(len(lengths) for lengths in plan["steps"]))
    # Per step: its micro-batches, each with its share of the step's sequences.
    batches = [[(step_tensors(lengths[i:i + micro], plan["max_len"], generator, device),
                 len(lengths[i:i + micro]) / len(lengths))
                for i in range(0, len(lengths), micro)] for lengths in plan["steps"]]
    torch.cuda.reset_peak_memory_stats()
    tokens = sequences = 0
    for step, micro_batches in enumerate(batches):
        if step == plan["warmup"]:
            torch.cuda.synchronize()
            start = time.perf_counter()
        for (ids, types, mask, labels, nsp), share in micro_batches:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(input_ids=ids, token_type_ids=types, attention_mask=mask,
                            labels=labels, next_sentence_label=nsp)
            (out.loss * share).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step >= plan["warmup"]:
            tokens += sum(plan["steps"][step])
            sequences += len(plan["steps"][step])
    torch.cuda.synchronize()
    print(json.dumps({"seconds": time.perf_counter() - start, "tokens": tokens,
                      "sequences": sequences, "peak_bytes": torch.cuda.max_memory_allocated(),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main(sys.argv[1])
