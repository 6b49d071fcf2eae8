"""Edit corpora: gzipped JSONL, the long-file `commits` corpus, length buckets and their
seeded samples, the changed fraction."""

from __future__ import annotations

import gzip
import json

import os

import pytest

from analysis.datasets import (LENGTH_BUCKETS, Corpus, EditCase, changed_fraction, length_bucket, load_corpus,
                               load_jsonl, sample_by_bucket)


def doc(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(n))


def test_length_buckets_cover_the_ranges():
    assert [length_bucket(n) for n in (1, 199, 200, 499, 500, 1500, 1501)] == [
        "<200", "<200", "200-500", "200-500", "500-1,500", "500-1,500", ">1,500"]
    assert list(LENGTH_BUCKETS) == ["<200", "200-500", "500-1,500"]
    assert EditCase("a", doc(250), "").lines_before == 250
    assert EditCase("a", "x\ny", "").lines_before == 2  # a last line without its newline counts


def test_sample_by_bucket_is_seeded_per_bucket_and_keeps_order():
    cases = [EditCase(str(i), doc(n), doc(n)) for i, n in enumerate([10, 20, 300, 30, 600, 700, 40, 800, 350])]
    a = sample_by_bucket(cases, 2, "s")
    assert a == sample_by_bucket(cases, 2, "s")
    by = {label: [c for c in a if length_bucket(c.lines_before) == label] for label in LENGTH_BUCKETS}
    assert {k: len(v) for k, v in by.items()} == {"<200": 2, "200-500": 2, "500-1,500": 2}
    assert [int(c.id) for c in a] == sorted(int(c.id) for c in a)  # input order
    assert sample_by_bucket(cases, None, "s") == cases
    assert sample_by_bucket(cases, 5, "s", ["<200"]) == [c for c in cases if c.lines_before < 200]
    seeds = {tuple(c.id for c in sample_by_bucket(cases, 1, s)) for s in range(20)}
    assert len(seeds) > 1  # the seed matters


def test_changed_fraction_counts_replaced_and_inserted_lines():
    before = doc(100)
    assert changed_fraction(EditCase("a", before, before)) == 0
    after = before.replace("line 5\n", "line five\n").replace("line 9\n", "line 9\nnew\nnew\n")
    assert changed_fraction(EditCase("a", before, after)) == pytest.approx(3 / 100)


def test_gzipped_jsonl_with_named_fields(tmp_path):
    path = tmp_path / "edits.jsonl.gz"
    rows = [{"id": "r1", "src": "a\n", "dst": "b\n", "subject": "change a"}, {"id": "r2", "src": "c\n", "dst": "d\n"}]
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("\n".join(json.dumps(r) for r in rows) + "\n")
    corpus = load_jsonl(path, "src", "dst", instruction_field="subject")
    assert corpus.name == "edits" and not corpus.bucketed
    assert [(c.id, c.before, c.after, c.instruction) for c in corpus] == [("r1", "a\n", "b\n", "change a"),
                                                                          ("r2", "c\n", "d\n", "")]


@pytest.mark.shared_data
def test_commits_joins_both_repositories_and_is_bucketed(data_dir, monkeypatch):
    monkeypatch.setenv("CAD_OUTLINES_DATA", str(data_dir))
    corpus = load_corpus("commits")
    assert isinstance(corpus, Corpus) and corpus.bucketed and len(corpus) == 600
    assert len({c.id for c in corpus}) == 600
    assert {c.id.split("@")[0] for c in corpus} == {"pallets/click", "psf/requests"}
    assert all(c.instruction and c.before != c.after for c in corpus)
    assert {length_bucket(c.lines_before) for c in corpus} == set(LENGTH_BUCKETS)
    click = load_corpus("commits-click")
    assert click.bucketed and list(click) == list(corpus)[:300]
    sample = sample_by_bucket(corpus, 3, "0:commits")
    assert len(sample) == 9


def long_corpus() -> Corpus:
    def case(i: int, n: int) -> EditCase:
        before = "".join(f"value_{k} = compute({k}, 'item {k}')\n" for k in range(n))
        return EditCase(f"c{i}", before, before.replace("compute(7,", "compute(70,"), "change 7 to 70")

    return Corpus("long", tuple(case(i, n) for i, n in enumerate([60, 250, 520])), bucketed=True)


@pytest.mark.parametrize("study", ["coverage", "perturb"])
def test_studies_report_long_corpora_per_length_bucket(study, tmp_path, monkeypatch):
    import argparse
    import importlib

    module = importlib.import_module(f"analysis.{study}")
    monkeypatch.setattr(module, "corpora_from_args", lambda args: [long_corpus()])
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    argv = ["--out-dir", str(tmp_path)] + (["--tokenizer", "approx"] if study == "coverage" else ["--trials", "2"])
    assert module.run(parser.parse_args(argv)) == 0
    text = (tmp_path / f"{study}.md").read_text()
    for label in LENGTH_BUCKETS:
        assert f"| long {label} | 1 |" in text
    if study == "coverage":
        assert (tmp_path / "coverage_length.png").stat().st_size > 0 and "coverage_length.png" in text
        assert "Per-case bound by the changed fraction of the document's lines (3 cases;" in text


def test_serving_study_takes_corpus_options(tmp_path):
    import argparse

    from analysis import serving

    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"id": "a", "src": "x\n" * 5, "dst": "y\n" * 5, "why": "change"}) + "\n")
    parser = argparse.ArgumentParser()
    serving.add_arguments(parser)
    args = parser.parse_args(["--jsonl", str(path), "--before-field", "src", "--after-field", "dst",
                              "--instruction-field", "why"])
    (corpus,) = serving.corpora(args)
    assert [(c.id, c.instruction) for c in corpus] == [("a", "change")]
    assert serving.sample_cases(3, 0, lambda case: True, [corpus]) == list(corpus)
    argv = serving._argv(args)
    assert argv[-8:] == ["--jsonl", str(path), "--before-field", "src", "--after-field", "dst",
                         "--instruction-field", "why"]


def test_serving_study_picks_the_cpus_native_dtype_and_binds_every_core(monkeypatch):
    from analysis import serving

    assert serving.native_dtype("flags\t\t: fpu sse2 avx2 fma\n") == "fp32"
    assert serving.native_dtype("flags\t\t: fpu avx512f avx512_bf16\n") == "bf16"
    assert serving.native_dtype("flags\t\t: fpu amx_bf16 amx_tile\n") == "bf16"
    for name in ("VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_NUM_OF_RESERVED_CPU"):
        monkeypatch.delenv(name, raising=False)
    cores = sorted(os.sched_getaffinity(0))
    env = serving.cpu_binding(None)
    assert env == {"VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, cores)), "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    assert serving.cpu_binding(1)["VLLM_CPU_OMP_THREADS_BIND"] == str(cores[0])
    assert serving.cpu_binding(0) == {}  # vLLM's own binding
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0")  # the user's setting wins
    assert "VLLM_CPU_OMP_THREADS_BIND" not in serving.cpu_binding(None)
    with pytest.raises(SystemExit, match="--cpu-threads"):
        serving.cpu_binding(len(cores) + 1)


def test_serving_study_names_its_report_by_corpus_and_states_each_target():
    import argparse

    from analysis import serving

    parser = argparse.ArgumentParser()
    serving.add_arguments(parser)
    assert serving.report_name(parser.parse_args(["--dtype", "bf16"])) == "serving"
    assert serving.report_name(parser.parse_args(["--dataset", "commits", "--dtype", "bf16"])) == "serving_commits"
    auto = serving.report_name(parser.parse_args([]))  # --dtype auto: this CPU's native dtype
    assert auto == ("serving" if serving.native_dtype() == "bf16" else "serving_fp32")
    assert serving.report_name(parser.parse_args(["--dataset", "commits", "--report-name", "x"])) == "x"
    assert serving.report_name(parser.parse_args(["--dataset", "commits", "--dtype", "fp32"])) == "serving_commits_fp32"
    assert serving._argv(parser.parse_args(["--dtype", "fp32"]))[-2:] == ["--dtype", "fp32"]
    assert serving._argv(parser.parse_args(["--report-name", "x"]))[-2:] == ["--report-name", "x"]
    long = parser.parse_args(["--dataset", "commits", "--dtype", "fp32", "--buckets", "200-500,500-1,500"])
    assert serving.report_name(long) == "serving_commits_lines_200-500_lines_500-1500_fp32"
    assert "--buckets" in serving._argv(long) and serving._argv(long)[serving._argv(long).index("--buckets") + 1] == \
        "200-500,500-1,500"

    def result(method, makespan, p50, computed, extra):
        return serving.MethodResult(method, makespan, [p50, p50], computed, 0, 0, 0, 2, extra)  # 2 edits

    regen = result("regen", 100.0, 50.0, 3000, {"gold_tokens": 1000})
    cad = result("cad", 10.0, 5.0, 2400, {"prompt": 1200, "program": 100, "copied": 900, "forced": 0,
                                          "forced_runs": 0})
    skip = result("cad_skip", 25.0, 20.0, 1310, {"prompt": 1200, "program": 100, "copied": 0, "forced": 0,
                                                 "forced_runs": 0})
    text = "\n".join(serving.accounting(2, [regen, cad, skip]))
    assert "| full regeneration | 0 | 500 | 500 | 0 | 1.0 | 0 | 1500 | 1.00 |" in text  # means per edit; all chosen
    one = next(line for line in text.splitlines() if line.startswith("* Copy-as-Decode, one request"))
    assert "edits/s 10.00x regeneration (target >= 5x: met)" in one and "p50 latency 0.10x (target <= 0.2x: met)" in one
    assert "1.09x its prompt + program + copied tokens (2200; target <= 1.1x: met)" in one
    assert "0.80x regeneration's 3000 (target below: met)" in one
    skipped = next(line for line in text.splitlines() if line.startswith("* Copy-as-Decode, copies skipped"))
    assert "edits/s 4.00x regeneration (target >= 5x: missed)" in skipped and "0.40x (target <= 0.2x: missed)" in skipped
    short = "\n".join(serving.accounting(2, [regen, skip], long_files=False))  # HumanEvalFix: no slower than regen
    assert "edits/s 4.00x regeneration (target on short files >= 1.0x: met)" in short
    assert "p50 latency 0.40x (no target on short files)" in short


def test_a_long_file_run_writes_its_own_report_beside_the_default_one():
    import argparse

    from analysis.datasets import add_corpus_arguments, report_stem

    parser = argparse.ArgumentParser()
    add_corpus_arguments(parser, ["editeval"])
    stem = lambda *argv: report_stem(parser.parse_args(list(argv)), "coverage", ["editeval"])  # noqa: E731
    assert stem() == "coverage" and stem("--dataset", "editeval") == "coverage"
    assert stem("--dataset", "commits") == "coverage_commits"
    assert stem("--dataset", "commits", "--dataset", "humanevalfix-js") == "coverage_commits_humanevalfix_js"
    assert stem("--dataset", "commits", "--jsonl", "x.jsonl") == "coverage"


def test_bucket_labels_parse_with_or_without_the_thousands_comma():
    from analysis.datasets import LENGTH_BUCKETS, OVER, parse_buckets

    assert parse_buckets(None) is None and parse_buckets("") is None
    assert parse_buckets("<200") == ["<200"]
    assert parse_buckets("500-1,500") == parse_buckets("500-1500") == ["500-1,500"]
    assert parse_buckets("200-500,500-1,500") == ["200-500", "500-1,500"]
    assert parse_buckets(",".join([*LENGTH_BUCKETS, OVER])) == [*LENGTH_BUCKETS, OVER]
    for bad in ("200-600", "500-1,", "<200,,200-500"):
        with pytest.raises(SystemExit, match="unknown bucket"):
            parse_buckets(bad)
