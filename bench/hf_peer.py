#!/usr/bin/env python3
"""The Hugging Face peer of bench/gpu and bench/finetune: what a user trains
with otherwise.

    python3 bench/hf_peer.py PLAN.json

transformers' BERT with SDPA attention, fp32 weights under bf16 autocast
(fp32 without autocast where the plan says "precision": "fp32"), on the
plan's device (a CUDA GPU unless it says "device"); each step trains on the
sequences of one step of the plan (their lengths), each padded to a row of
max_len with an attention mask, as the task's scripts pad them:

  "task": "pretraining" (bench/gpu's): BertForPreTraining, 15% of each
      sequence's tokens masked (at most 76), random NSP labels;
  "task": "squad" (bench/finetune's SQuAD-384): BertForQuestionAnswering
      (run_squad.py pads every feature to max_seq_length), a random answer
      span inside each sequence;
  "task": "classifier" (bench/finetune's GLUE-128):
      BertForSequenceClassification with two labels (run_glue.py pads to
      max_seq_length), random labels;

in micro-batches of at most `micro_rows` rows whose gradients are
accumulated (as packed-bert's rows per micro-batch: the padded rows of a
step do not fit a GPU at once for BERT-large); torch's AdamW (fused on a
GPU). The first `warmup` steps are not timed.
Prints one JSON object: seconds, real tokens and sequences of the timed
steps, peak GPU memory (0 on the CPU), torch's version, the model class.
"""
import json
import sys
import time

import torch
from transformers import (BertConfig, BertForPreTraining, BertForQuestionAnswering,
                          BertForSequenceClassification)

MODELS = {"pretraining": BertForPreTraining, "squad": BertForQuestionAnswering,
          "classifier": BertForSequenceClassification}


def step_tensors(task, lengths, max_len, generator, device):
    """The padded rows of `lengths` and the task's targets, as keyword
    arguments of the model's forward."""
    rows = len(lengths)
    ids = torch.zeros(rows, max_len, dtype=torch.long)
    types = torch.zeros(rows, max_len, dtype=torch.long)
    mask = torch.zeros(rows, max_len, dtype=torch.long)
    labels = torch.full((rows, max_len), -100, dtype=torch.long)
    starts = torch.zeros(rows, dtype=torch.long)
    ends = torch.zeros(rows, dtype=torch.long)
    for r, n in enumerate(lengths):
        ids[r, :n] = torch.randint(1000, 30000, (n,), generator=generator)
        ids[r, 0], ids[r, n // 2], ids[r, n - 1] = 101, 102, 102
        types[r, n // 2 + 1:n] = 1
        mask[r, :n] = 1
        if task == "pretraining":
            masked = torch.rand(n, generator=generator) < 0.15
            masked[[0, n // 2, n - 1]] = False
            positions = masked.nonzero().flatten()[:76]
            labels[r, positions] = torch.randint(1000, 30000, (len(positions),),
                                                 generator=generator)
        else:
            starts[r] = int(torch.randint(0, n, (1,), generator=generator))
            ends[r] = min(n - 1, int(starts[r]) + int(torch.randint(0, 5, (1,),
                                                                    generator=generator)))
    out = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}
    if task == "pretraining":
        out.update(labels=labels, next_sentence_label=torch.randint(0, 2, (rows,),
                                                                    generator=generator))
    elif task == "squad":
        out.update(start_positions=starts, end_positions=ends)
    else:
        out.update(labels=torch.randint(0, 2, (rows,), generator=generator))
    return {k: v.to(device, non_blocking=True) for k, v in out.items()}


def main(path):
    plan = json.load(open(path))
    task = plan.get("task", "pretraining")
    if task not in MODELS:
        sys.exit("hf_peer: %s: task %r is none of %s" % (path, task, ", ".join(MODELS)))
    device = torch.device(plan.get("device", "cuda"))
    bf16 = plan.get("precision", "bf16") == "bf16"
    config = BertConfig(vocab_size=plan.get("vocab", 30522), hidden_size=plan["hidden"],
                        num_hidden_layers=plan["layers"], num_attention_heads=plan["heads"],
                        intermediate_size=plan["ffn"],
                        max_position_embeddings=max(512, plan["max_len"]), num_labels=2)
    torch.manual_seed(1)
    model = MODELS[task]._from_config(config, attn_implementation="sdpa").to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    generator = torch.Generator().manual_seed(3)
    micro = plan.get("micro_rows", max(len(lengths) for lengths in plan["steps"]))
    # Per step: its micro-batches, each with its share of the step's sequences.
    batches = [[(step_tensors(task, lengths[i:i + micro], plan["max_len"], generator, device),
                 len(lengths[i:i + micro]) / len(lengths))
                for i in range(0, len(lengths), micro)] for lengths in plan["steps"]]
    cuda = device.type == "cuda"

    def synchronize():
        if cuda:
            torch.cuda.synchronize()

    if cuda:
        torch.cuda.reset_peak_memory_stats()
    tokens = sequences = 0
    start = time.perf_counter()
    for step, micro_batches in enumerate(batches):
        if step == plan["warmup"]:
            synchronize()
            start = time.perf_counter()
        for inputs, share in micro_batches:
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                out = model(**inputs)
            (out.loss * share).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step >= plan["warmup"]:
            tokens += sum(plan["steps"][step])
            sequences += len(plan["steps"][step])
    synchronize()
    print(json.dumps({"seconds": time.perf_counter() - start, "tokens": tokens,
                      "sequences": sequences,
                      "peak_bytes": torch.cuda.max_memory_allocated() if cuda else 0,
                      "torch": torch.__version__, "model": MODELS[task].__name__}))


if __name__ == "__main__":
    main(sys.argv[1])
