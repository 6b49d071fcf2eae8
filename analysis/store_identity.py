"""Are the flat files of two checkouts byte for byte the same? Compiles each grammar x tokenizer,
streamlined and not, in a fresh cache folder per checkout (one subprocess per checkout, run with
that checkout on ``PYTHONPATH``) and compares the ``flat-*.bin`` files' bytes, and on a difference
the arrays that differ.

Used for issue 20 item 2 (one store builder): the native builder's files against the Python
builder's (a copy of main before it)::

    git archive main | tar -x -C /tmp/oldmain   # plus its compiled core
    python -m analysis.store_identity --old /tmp/oldmain --new . --tokenizers qwen2.5,gpt2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT_GRAMMARS = ("json", "sql", "copy_edit", "python", "lark:examples/json.lark", "lark:python.lark@file_input")

_CHILD = r"""
import json, sys, time
from pathlib import Path
from cad_outlines.engine.compile import compile_grammar
from cad_outlines.engine.vocabulary import Vocabulary
grammars, tokenizers, data, out = json.loads(sys.argv[1])
times = {}
for tok in tokenizers:
    vocab = Vocabulary.from_tokenizer(Path(data) / "tokenizers" / tok)
    for name in grammars:
        path, _, start = name.partition("@")
        grammar = str(Path(data) / "grammars" / "lark" / path[5:]) if path.startswith("lark:") else path
        for streamline in (False, True):
            folder = Path(out) / f"{tok}-{path.replace('/', '_').replace(':', '_')}-{int(streamline)}"
            t0 = time.perf_counter()
            compile_grammar(grammar, vocab, cache=folder, progress=False, streamline=streamline, start=start or None)
            times[folder.name] = time.perf_counter() - t0
print(json.dumps(times))
"""


def _run(checkout: Path, grammars, tokenizers, data: Path, out: Path) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(checkout.resolve()), CAD_OUTLINES_CACHE=str(out / "unused"))
    got = subprocess.run([sys.executable, "-c", _CHILD, json.dumps([grammars, tokenizers, str(data), str(out)])],
                         env=env, capture_output=True, text=True, cwd=str(out))
    if got.returncode:
        raise SystemExit(f"compiling with {checkout} failed:\n{got.stderr[-4000:]}")
    return json.loads(got.stdout.strip().splitlines()[-1])


def _differing_arrays(a: Path, b: Path, checkout: Path) -> list[str]:
    code = ("import sys, numpy as np\nfrom cad_outlines.engine.store.flat_grammar import FlatGrammar\n"
            "x, y = FlatGrammar.load(sys.argv[1]), FlatGrammar.load(sys.argv[2])\n"
            "names = sorted(set(x.arrays) | set(y.arrays))\n"
            "bad = [n for n in names if n not in x.arrays or n not in y.arrays or x[n].dtype != y[n].dtype "
            "or not np.array_equal(x[n], y[n])]\n"
            "meta = [k for k in sorted(set(x.meta) | set(y.meta)) if x.meta.get(k) != y.meta.get(k)]\n"
            "print(' '.join(bad + ['meta:' + k for k in meta]))\n")
    env = dict(os.environ, PYTHONPATH=str(checkout.resolve()))
    got = subprocess.run([sys.executable, "-c", code, str(a), str(b)], env=env, check=True, capture_output=True,
                         text=True)
    return got.stdout.split()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", type=Path, required=True, help="the checkout whose files are the reference")
    parser.add_argument("--new", type=Path, default=Path("."), help="the checkout under test")
    parser.add_argument("--grammars", default=",".join(DEFAULT_GRAMMARS),
                        help="shipped grammar names, or lark:PATH under the shared data's grammars/lark; @START "
                             "names a start rule")
    parser.add_argument("--tokenizers", default="qwen2.5,gpt2", help="folders in the shared data's tokenizers/")
    parser.add_argument("--data", type=Path, default=None,
                        help="the shared data folder (default: as the studies find it)")
    args = parser.parse_args(argv)
    grammars, tokenizers = args.grammars.split(","), args.tokenizers.split(",")
    if args.data is None:
        from analysis.datasets import shared_data_dir

        args.data = shared_data_dir()
    with tempfile.TemporaryDirectory() as tmp:
        old, new = Path(tmp) / "old", Path(tmp) / "new"
        old.mkdir()
        new.mkdir()
        t_old = _run(args.old, grammars, tokenizers, args.data, old)
        t_new = _run(args.new, grammars, tokenizers, args.data, new)
        print("| grammar x tokenizer, streamlined | old s | new s | flat file |")
        print("|---|---|---|---|")
        same = True
        for name in t_old:
            a, b = sorted((old / name).glob("flat-*.bin")), sorted((new / name).glob("flat-*.bin"))
            if len(a) != 1 or len(b) != 1:
                verdict = f"missing ({len(a)} old, {len(b)} new)"
                same = False
            elif a[0].read_bytes() == b[0].read_bytes():
                verdict = f"identical ({a[0].stat().st_size:,} bytes)"
            else:
                same = False
                verdict = "DIFFERS: " + " ".join(_differing_arrays(a[0], b[0], args.new))
            print(f"| {name} | {t_old[name]:.2f} | {t_new[name]:.2f} | {verdict} |")
    print("all identical" if same else "SOME DIFFER")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
