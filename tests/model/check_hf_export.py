#!/usr/bin/python3
"""An independent check of a Hugging Face export (packed-bert model export-hf).

    check_hf_export.py OUT VOCAB

Lists the state dict of transformers' BertForPreTraining (or, as its
config.json says, BertForQuestionAnswering, BertForSequenceClassification or
BertForTokenClassification)
for the sizes in OUT/config.json, written from the module structure of transformers'
models/bert/modeling_bert.py (BertEmbeddings, BertLayer = BertAttention
(BertSelfAttention, BertSelfOutput) + BertIntermediate + BertOutput,
BertPooler, BertPreTrainingHeads), not from packed-bert's name table; reads
OUT/model.safetensors by the format's description (8-byte little-endian
header length, JSON header); and checks that the file holds exactly those
tensors, float32, with those shapes, its metadata says format "pt" (which
from_pretrained requires), config.json has the keys from_pretrained reads,
vocab.txt is VOCAB, and tokenizer_config.json names BERT's special tokens.
Prints what differs and exits 1, or exits 0.
"""
import json
import struct
import sys


def bert_for_pretraining_state_dict(c):
    """name -> shape, as BertForPreTraining(config).state_dict() holds them,
    less the two entries save_pretrained leaves out as tied:
    cls.predictions.decoder.weight (the word embeddings) and
    cls.predictions.decoder.bias (cls.predictions.bias)."""
    h, i, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    out = {
        "bert.embeddings.word_embeddings.weight": [v, h],
        "bert.embeddings.position_embeddings.weight": [c["max_position_embeddings"], h],
        "bert.embeddings.token_type_embeddings.weight": [c["type_vocab_size"], h],
        "bert.embeddings.LayerNorm.weight": [h],
        "bert.embeddings.LayerNorm.bias": [h],
    }
    for n in range(c["num_hidden_layers"]):
        layer = "bert.encoder.layer.%d." % n
        for projection in ("query", "key", "value"):
            out[layer + "attention.self.%s.weight" % projection] = [h, h]
            out[layer + "attention.self.%s.bias" % projection] = [h]
        out[layer + "attention.output.dense.weight"] = [h, h]
        out[layer + "attention.output.dense.bias"] = [h]
        out[layer + "attention.output.LayerNorm.weight"] = [h]
        out[layer + "attention.output.LayerNorm.bias"] = [h]
        out[layer + "intermediate.dense.weight"] = [i, h]
        out[layer + "intermediate.dense.bias"] = [i]
        out[layer + "output.dense.weight"] = [h, i]
        out[layer + "output.dense.bias"] = [h]
        out[layer + "output.LayerNorm.weight"] = [h]
        out[layer + "output.LayerNorm.bias"] = [h]
    out["bert.pooler.dense.weight"] = [h, h]
    out["bert.pooler.dense.bias"] = [h]
    architecture = c["architectures"][0]
    if architecture == "BertForQuestionAnswering":
        # BertModel(config, add_pooling_layer=False), then qa_outputs.
        del out["bert.pooler.dense.weight"], out["bert.pooler.dense.bias"]
        out["qa_outputs.weight"] = [2, h]
        out["qa_outputs.bias"] = [2]
        return out
    if architecture == "BertForTokenClassification":
        # BertModel(config, add_pooling_layer=False), dropout, classifier.
        del out["bert.pooler.dense.weight"], out["bert.pooler.dense.bias"]
        labels = len(c.get("id2label", {})) or 2
        out["classifier.weight"] = [labels, h]
        out["classifier.bias"] = [labels]
        return out
    if architecture == "BertForSequenceClassification":
        labels = c.get("num_labels", len(c.get("id2label", {})) or 2)
        out["classifier.weight"] = [labels, h]
        out["classifier.bias"] = [labels]
        return out
    out["cls.predictions.bias"] = [v]
    out["cls.predictions.transform.dense.weight"] = [h, h]
    out["cls.predictions.transform.dense.bias"] = [h]
    out["cls.predictions.transform.LayerNorm.weight"] = [h]
    out["cls.predictions.transform.LayerNorm.bias"] = [h]
    out["cls.seq_relationship.weight"] = [2, h]
    out["cls.seq_relationship.bias"] = [2]
    return out


CONFIG_KEYS = {
    "architectures": list, "model_type": str, "vocab_size": int, "hidden_size": int,
    "num_hidden_layers": int, "num_attention_heads": int, "intermediate_size": int,
    "hidden_act": str, "hidden_dropout_prob": float, "attention_probs_dropout_prob": float,
    "max_position_embeddings": int, "type_vocab_size": int, "initializer_range": float,
    "layer_norm_eps": float, "torch_dtype": str,
}


def main(out, vocab_path):
    problems = []
    with open(out + "/config.json") as f:
        config = json.load(f)
    for key, kind in CONFIG_KEYS.items():
        if not isinstance(config.get(key), kind):
            problems.append("config.json: %s is %r, expected a %s" % (key, config.get(key), kind.__name__))
    if problems:
        print("\n".join(problems))
        return 1
    architectures = ("BertForPreTraining", "BertForQuestionAnswering",
                     "BertForSequenceClassification", "BertForTokenClassification")
    if len(config["architectures"]) != 1 or config["architectures"][0] not in architectures or \
            config["model_type"] != "bert":
        problems.append("config.json: not a %s of model_type bert" % " or ".join(architectures))
    if config["architectures"][0] in ("BertForSequenceClassification", "BertForTokenClassification"):
        id2label = config.get("id2label", {})
        kinds = (None, "regression", "single_label_classification", "multi_label_classification")
        if config.get("problem_type") not in kinds:
            problems.append("config.json: problem_type %r is none of transformers'" % config.get("problem_type"))
        if config.get("problem_type") == "regression":
            if config.get("num_labels") != 1:
                problems.append("config.json: a regression with num_labels %r" % config.get("num_labels"))
        elif sorted(id2label) != [str(i) for i in range(len(id2label))] or len(id2label) < 2 or \
                {v: int(k) for k, v in id2label.items()} != config.get("label2id"):
            problems.append("config.json: id2label %r and label2id %r do not match" % (id2label, config.get("label2id")))
    if config["hidden_act"] != "gelu" or config["torch_dtype"] != "float32":
        problems.append("config.json: hidden_act %s, torch_dtype %s" % (config["hidden_act"], config["torch_dtype"]))
    if config["hidden_size"] % config["num_attention_heads"] != 0:
        problems.append("config.json: hidden_size is no multiple of num_attention_heads")

    with open(out + "/model.safetensors", "rb") as f:
        blob = f.read()
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + length].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    if metadata.get("format") != "pt":
        problems.append("model.safetensors: metadata format is %r, from_pretrained needs 'pt'" % metadata.get("format"))
    expected = bert_for_pretraining_state_dict(config)
    for name in sorted(set(expected) - set(header)):
        problems.append("model.safetensors: %s is missing" % name)
    for name in sorted(set(header) - set(expected)):
        problems.append("model.safetensors: %s is not a %s tensor" % (name, config["architectures"][0]))
    end = 0
    for name in sorted(set(header) & set(expected)):
        entry = header[name]
        if entry["shape"] != expected[name] or entry["dtype"] != "F32":
            problems.append("model.safetensors: %s is %s %s, expected F32 %s" % (name, entry["dtype"], entry["shape"], expected[name]))
        begin, stop = entry["data_offsets"]
        count = 1
        for d in entry["shape"]:
            count *= d
        if stop - begin != 4 * count:
            problems.append("model.safetensors: %s holds %d bytes for %d floats" % (name, stop - begin, count))
        end = max(end, stop)
    if 8 + length + end != len(blob):
        problems.append("model.safetensors: %d bytes, the header accounts for %d" % (len(blob), 8 + length + end))

    with open(vocab_path, "rb") as f, open(out + "/vocab.txt", "rb") as g:
        if f.read() != g.read():
            problems.append("vocab.txt differs from %s" % vocab_path)
    with open(out + "/tokenizer_config.json") as f:
        tokenizer = json.load(f)
    for key, token in (("unk_token", "[UNK]"), ("sep_token", "[SEP]"), ("pad_token", "[PAD]"),
                       ("cls_token", "[CLS]"), ("mask_token", "[MASK]")):
        if tokenizer.get(key) != token:
            problems.append("tokenizer_config.json: %s is %r" % (key, tokenizer.get(key)))
    if not isinstance(tokenizer.get("do_lower_case"), bool):
        problems.append("tokenizer_config.json: no do_lower_case")
    print("\n".join(problems) if problems else "%d tensors as %s holds them" % (len(header), config["architectures"][0]))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
