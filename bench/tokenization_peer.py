#!/usr/bin/python3
"""The peer of bench/prepare's tokenization: Google's reference tokenizer
(tokenization.py from github.com/google-research/bert, the one that
create_pretraining_data.py runs), on every line of the given text files, in
one process, as the MLPerf BERT data preparation runs it.

    tokenization_peer.py TOKENIZATION_PY VOCAB FILE... > {"tokens": N, "seconds": S}

tokenization.py reads its vocabulary through TensorFlow's tf.gfile.GFile and
calls nothing else of TensorFlow: a stand-in module gives it Python's open,
so that TensorFlow need not be installed. Only the loop over the lines is
timed (the vocabulary's loading is not).
"""
import importlib.util
import json
import sys
import time
import types


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    sys.modules["tensorflow"] = types.SimpleNamespace(gfile=types.SimpleNamespace(GFile=open))
    spec = importlib.util.spec_from_file_location("tokenization", sys.argv[1])
    tokenization = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tokenization)
    tokenizer = tokenization.FullTokenizer(sys.argv[2], do_lower_case=True)
    lines = []
    for path in sys.argv[3:]:
        with open(path, encoding="utf-8") as f:
            lines.extend(f.read().split("\n"))
    start = time.perf_counter()
    tokens = 0
    for line in lines:
        pieces = tokenizer.tokenize(tokenization.convert_to_unicode(line))
        tokens += len(tokenizer.convert_tokens_to_ids(pieces))
    print(json.dumps({"tokens": tokens, "seconds": time.perf_counter() - start}))


if __name__ == "__main__":
    main()
