"""Copy metrics (coverage, greedy token cover, kernel curve, bound) and the coverage and
perturb studies on tiny corpora."""

import argparse
import json
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis import coverage, perturb
from cad_outlines.edits import Copy, EditProgram, Gen, approx_token_count, oracle_program, resolve
from cad_outlines.edits.metrics import (KernelCurve, SuffixAutomaton, copied_char_ranges, copy_coverage,
                                        greedy_token_cover, speedup_bound)


def brute_cover(src: list[int], out: list[int], m: int) -> list[tuple[int, int]]:
    def occurs(run: list[int]) -> bool:
        return any(src[i : i + len(run)] == run for i in range(len(src) - len(run) + 1))

    spans, p = [], 0
    while p < len(out):
        length = 0
        while p + length < len(out) and occurs(out[p : p + length + 1]):
            length += 1
        if length >= m:
            spans.append((p, length))
            p += length
        else:
            p += 1
    return spans


ids = st.lists(st.integers(0, 3), max_size=40)


@settings(max_examples=300, deadline=None)
@given(ids, ids, st.integers(1, 6))
def test_greedy_cover_matches_brute_force(src, out, m):
    assert greedy_token_cover(src, out, m) == brute_cover(src, out, m)


@settings(max_examples=200, deadline=None)
@given(ids, ids, st.data())
def test_suffix_automaton_longest_match(src, query, data):
    start = data.draw(st.integers(0, len(query)))
    sam = SuffixAutomaton(src)
    length = sam.longest_match(query, start)
    run = query[start : start + length]
    assert any(src[i : i + length] == run for i in range(len(src) - length + 1))
    if start + length < len(query):
        longer = query[start : start + length + 1]
        assert not any(src[i : i + length + 1] == longer for i in range(len(src) - length))


def test_greedy_cover_hand_example():
    assert greedy_token_cover([1, 2, 3, 9, 4, 5], [1, 2, 3, 4, 5, 7, 4], 1) == [(0, 3), (3, 2), (6, 1)]
    assert greedy_token_cover([1, 2, 3, 9, 4, 5], [1, 2, 3, 4, 5, 7, 4], 3) == [(0, 3)]
    with pytest.raises(ValueError):
        greedy_token_cover([1], [1], 0)


def test_line_coverage_hand_example():
    before, after = "a\nb\nc\n", "a\nX\nc\n"
    program = oracle_program(before, after)
    assert program == EditProgram([Copy(1, 1), Gen("X\n"), Copy(3, 3)])
    assert copied_char_ranges(program, before) == [(0, 2), (4, 6)]
    assert copy_coverage(program, before) == (4, 6)  # a \n | X \n | c \n
    # a token straddling the copy/gen boundary counts as generated
    assert copy_coverage(program, before, [(0, 1), (1, 3), (3, 4), (4, 6)]) == (2, 4)


def test_kernel_curve_interpolates_in_log_n():
    curve = KernelCurve.from_points([(64, 32.0), (8, 4.0)])
    assert curve.points[0] == (1.0, 1.0)  # anchored: no point at N <= 1
    assert curve(8) == 4.0 and curve(64) == 32.0
    assert curve(math.sqrt(8 * 64)) == pytest.approx(18.0)
    assert curve(math.sqrt(8)) == pytest.approx(2.5)
    assert curve(1) == curve(0.5) == 1.0
    assert curve(10_000) == 32.0
    assert KernelCurve.from_points([(1, 2.0), (8, 4.0)])(0.5) == 2.0  # a given N=1 point is kept
    with pytest.raises(ValueError):
        KernelCurve.from_points([(8, 1.0), (8, 2.0)])


def test_speedup_bound_hand_example():
    curve = KernelCurve.from_points([(8, 4.0), (64, 32.0)])
    # 100 / (10 + 8/4 + 64/32)
    assert speedup_bound(100, 10, [8, 64], curve) == pytest.approx(100 / 14)
    assert speedup_bound(100, 100, [], curve) == 1.0


class FixedRng:
    def __init__(self, offsets):
        self.offsets = iter(offsets)

    def randint(self, a, b):
        value = next(self.offsets)
        assert a <= value <= b
        return value


def test_perturb_clamps_and_swaps():
    program = EditProgram([Copy(1, 4), Gen("x\n"), Copy(2, 3)])
    # start 1-1 -> clamped to 1, end 4+3 -> clamped to 5; start 2+2=4, end 3-2=1 -> swapped to 1-4
    assert perturb.perturb_program(program, 5, 3, FixedRng([-1, 3, 2, -2])) == EditProgram(
        [Copy(1, 5), Gen("x\n"), Copy(1, 4)])
    assert perturb.perturb_program(program, 5, 0, random.Random(1)) == program


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 20), st.integers(0, 5), st.integers(0, 2**32 - 1))
def test_perturbed_spans_stay_valid(n, eps, seed):
    program = EditProgram([Copy(1, n), Copy(n, n), Copy(1, 1)])
    for op in perturb.perturb_program(program, n, eps, random.Random(seed)).ops:
        assert 1 <= op.start <= op.end <= n
        assert abs(op.start - 1) <= eps or abs(op.start - n) <= eps


def test_case_rng_is_stable():
    assert perturb.case_rng(0, "a", 1).random() == perturb.case_rng(0, "a", 1).random()
    assert perturb.case_rng(0, "a", 1).random() != perturb.case_rng(0, "b", 1).random()


def write_jsonl(path, cases):
    records = ({"task_id": i, "before": b, "after": a} for i, (b, a) in enumerate(cases))
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def study_args(module, argv):
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return parser.parse_args(argv)


def test_coverage_study_on_tiny_corpus(tmp_path):
    pytest.importorskip("matplotlib")
    data = write_jsonl(tmp_path / "tiny.jsonl", [("a\nb\nc\n", "a\nX\nc\n")])
    csv = tmp_path / "kernel.csv"
    csv.write_text("config,dtype,n,speedup\nbig,bf16,1,1\nbig,bf16,2,2\nsmall,bf16,2,4\n")
    argv = ["--jsonl", str(data), "--out-dir", str(tmp_path), "--tokenizer", "approx", "--kernel-csv", str(csv)]
    assert coverage.run(study_args(coverage, argv + ["--kernel-select", "config=big"])) == 0
    md = (tmp_path / "coverage.md").read_text()
    assert (tmp_path / "coverage.png").stat().st_size > 1000
    # line-level 4/6; token m=1,2: "a \n" + "\n c \n" = 5/6; m>=4: nothing
    assert "| tiny | 1 | 6 | 66.67% | 83.33% | 83.33% | 0.00% | 0.00% | 0.00% | 0.00% |" in md
    t_gen = approx_token_count('<copy lines="1-1"/>\n<gen>X\n</gen>\n<copy lines="3-3"/>\n</program>')
    # two copies of 2 tokens at s(2) = 2; gen content "X\n" = 2 tokens
    row = f"| tiny | 6 | {t_gen} | {t_gen - 2} | 2 | 2 | 4 | {6 / (t_gen + 2):.2f}x | {6 / (2 + 2):.2f}x |"
    assert row in md and "bound (config=big,dtype=bf16)" in md
    assert "| tiny | 0 | 2 |" in md  # histogram: two copy ops in bucket 2-3

    assert coverage.run(study_args(coverage, argv)) == 0  # two curves -> two bound columns
    md = (tmp_path / "coverage.md").read_text()
    assert f"{6 / (t_gen + 1):.2f}x | {6 / (2 + 1):.2f}x |" in md and "tags-free (config=small,dtype=bf16)" in md

    argv[-1] = str(tmp_path / "missing.csv")
    assert coverage.run(study_args(coverage, argv)) == 0
    assert "| n/a (no kernel CSV) |" in (tmp_path / "coverage.md").read_text()


def test_perturb_study_on_tiny_corpus(tmp_path):
    pytest.importorskip("matplotlib")
    single = write_jsonl(tmp_path / "single.jsonl", [("a\n", "a\n")])
    multi = write_jsonl(tmp_path / "multi.jsonl", [("x\ny\nz\nw\n", "x\ny\nQ\nz\nw\n"), ("p\nq\n", "q\np\n")])
    argv = ["--jsonl", str(single), "--jsonl", str(multi), "--out-dir", str(tmp_path)]
    assert perturb.run(study_args(perturb, argv)) == 0
    md = (tmp_path / "perturb.md").read_text()
    assert (tmp_path / "perturb.png").stat().st_size > 1000
    # one line: every perturbed span clamps back to 1-1
    assert "| single | 1 | 0 | 1 | 100.00% | 100.00% | 100.00% | 100.00% |" in md
    assert "| multi | 2 | 0 | 4 | 100.00% |" in md and "| pooled | 3 | 0 | 5 | 100.00% |" in md
    table = md[md.index("| corpus"):md.index("Paper")]
    perturb.run(study_args(perturb, argv))
    again = (tmp_path / "perturb.md").read_text()
    assert again[again.index("| corpus"):again.index("Paper")] == table  # deterministic


def test_qwen_tokenizer_encoder(data_dir):
    name, encode = coverage.load_encoder(str(data_dir / "tokenizers" / "qwen2.5"))
    ids, offsets = encode("def f(x):\n    return x\n")
    assert name == "qwen2.5" and len(ids) == len(offsets) and offsets[-1][1] == 23
    case = coverage.case_tally("a = 1\nb = 2\n", "a = 1\nb = 3\n", encode)
    assert case.out_tokens == len(encode("a = 1\nb = 3\n")[0]) and 0 < case.line_covered < case.out_tokens
    assert resolve(oracle_program("a = 1\nb = 2\n", "a = 1\nb = 3\n"), "a = 1\nb = 2\n") == "a = 1\nb = 3\n"
