"""Generator wall time on real edit corpora: full regeneration vs prompt lookup vs
Copy-as-Decode executing oracle programs (with and without speculative gen bodies).

Every method is teacher-forced on the gold answer, so the cost of an edit is measured
whatever the model would have written (the model has random weights; speed depends on
shapes, not weight values). Per case, on one model and KV cache:

* ``regen``: full regeneration. Prompt = the instruction + the PLAIN document (asking for
  the whole new document; no line numbers: they are the edit program's addressing and
  would only break the baselines' n-gram matches at every line start); then the gold new
  document one token per forward, plus the forward that would predict the end token
  (argmax taken each step, as a greedy sampler). On long-file corpora (thousands of steps
  per case) its time is estimated from 32 strata: in each, 8 consecutive decode steps
  timed on the real KV cache at the stratum's middle, their mean times the stratum's steps;
  answers of at most 1,000 tokens are also timed at every step, and the report shows the
  estimate's error there.
* ``pld``: prompt lookup decoding (transformers' ``PromptLookupCandidateGenerator``
  rules) simulated on the gold output, same plain-document prompt as ``regen``: the
  longest suffix n-gram (n <= 3) of prompt +
  output so far, its leftmost occurrence with a continuation, up to 10 draft tokens;
  accepted = the longest draft prefix equal to the gold continuation, then one bonus
  token; each verify is one real forward of 1 + draft tokens (all positions' logits),
  the rejected positions cropped from the cache. Teacher-forced, the verifies depend on the
  gold tokens alone, so the lookup runs first (timed whole); on long-file corpora the verify
  forwards are then estimated as regeneration's steps are, from 16 strata of 8 consecutive
  verifies each (runs of at most 400 verifies are also timed whole, and the report shows the
  estimate's error there).
* ``cad_prefill`` / ``cad_skip``: ``CopyEditor.execute`` of the max-copy oracle program
  (token counts from this tokenizer) in both copy modes: generated tokens one forward
  each, forced tokens fast-forwarded, copies one forward (prefill) or none (skip); the
  grammar mask is computed at every step, as in a real run.
* ``cad_spec``: the same (prefill) with ``speculative=10``: inside gen bodies drafts by
  lookup in the document and the tokens written so far, accepted while they equal the
  program's tokens, verified in one forward each.
* each edit format of ``--formats`` (search/replace, unified diff, apply_patch, str_replace;
  ``analysis.formats``): its oracle program (minimal hunks, old lines widened until unique)
  from the format's own prompt (its instructions and the plain document), ``F``: constrained,
  ``CopyEditor.execute(..., format=F)`` (grammar and document constraint at every step; a forced
  run, such as the rest of a search line once its prefix is unique, enters the KV cache in the
  forward of the chosen token before it), and
  ``F_free``: unconstrained, the same tokens one forward each with no mask, then applied by the
  format's applier. Both start from the same prompt, prefilled once.

Wall times include the prompt forward; "after prompt" subtracts it. Each prompt kind (plain
for the baselines, numbered for CaD, each format's own) is prefilled once per case and its time counted in every
method that uses it; the others start from a copy of its KV cache. The closed-form
bound (coverage study, kernel CSV) excludes the prompt, so it compares with the
"after prompt" speedup of ``cad_prefill``. Correctness: every executed program must
reproduce the gold text exactly, and the lookup runs must end with the gold tokens in the
cache (the study fails otherwise).
"""

from __future__ import annotations

import csv
import random
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cad_outlines.decoding.kv import append, cache_len, clone_cache, crop_cache, new_cache
from cad_outlines.edits import oracle_program, split_lines
from cad_outlines.generators.copy_decode import CopyEditor
from cad_outlines.generators.ngram import NgramLookup

from .coverage import DEFAULT_KERNEL_CSV, Tally, case_tally, read_kernel_curves
from .formats import (FORMATS, LABELS as FORMAT_LABELS, add_format_argument, format_argv, format_methods, format_programs,
                      free, method_label, parse_formats)
from .datasets import (LENGTH_BUCKETS, EditCase, OVER, add_corpus_arguments, changed_fraction, corpora_from_args, corpus_argv,
                       length_bucket, parse_buckets, report_stem, sample_by_bucket, shared_data_dir)
from .kernel import CONFIGS, build_model, set_cudnn_attention
from .report import markdown_table, write_report

DESCRIPTION = ("generator wall time: full regeneration, prompt lookup, Copy-as-Decode oracle programs "
               "(prefill/skip, speculative gen bodies)")
DEFAULT = ["humanevalfix-python", "humanevalfix-js", "editeval"]
METHODS = ["regen", "pld", "cad_prefill", "cad_skip", "cad_spec"]
LABELS = {"regen": "full regeneration", "pld": "prompt lookup (n<=3, 10 drafts)",
          "cad_prefill": "CaD prefill", "cad_skip": "CaD skip", "cad_spec": "CaD prefill + speculative gen"}
DEFAULT_LIMIT = 8
QUICK_LIMIT = 2
# long-file corpora (commits): cases per document-length bucket. One 500-1,500-line case costs about half an
# hour at 1 thread on qwen2.5-0.5b fp32 (full regeneration alone decodes ~9k tokens at ~0.1 s each, and every
# method prefills its own ~9k-token prompt), so the default (3 cases) stays near 40 min on a quiet machine.
DEFAULT_PER_BUCKET = 1
# long-file corpora: full regeneration (thousands of decode steps per case, most of a run's time) is timed on
# this many strata of its steps (run_regen_sampled); answers up to DEFAULT_REGEN_FULL_MAX tokens are also timed
# at every step, which checks the estimate in every default run
DEFAULT_REGEN_STRATA = 32
DEFAULT_REGEN_FULL_MAX = 1000
# the same for prompt lookup's verify forwards (each of up to 11 tokens over the whole context: on the 1,048-line
# default case 956 of them took 14 of the run's 43 minutes); up to DEFAULT_PLD_FULL_MAX forwards also timed whole
DEFAULT_PLD_STRATA = 16
DEFAULT_PLD_FULL_MAX = 400
# a tiny Qwen2 with the Qwen2.5 vocabulary: for smoke runs and tests
QUICK_CONFIG = dict(CONFIGS["tiny"], vocab_size=151936)
REGEN_INSTRUCTIONS = "Rewrite the document below as the instruction asks. Answer with the whole new document."


def regen_prompt(tokenizer, document: str, instruction: str) -> str:
    """The full-regeneration prompt (also prompt lookup's and vLLM n-gram's): instruction +
    the PLAIN document, through the chat template when the tokenizer has one. Only edit
    programs need line numbers (``build_prompt``); in a baseline's prompt they would break
    every n-gram match at a line start, so its lookups could not copy across lines."""
    body = f"{REGEN_INSTRUCTIONS}\n\nInstruction: {instruction}\n\nDocument:\n{document}"
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template([{"role": "user", "content": body}], tokenize=False,
                                             add_generation_prompt=True)
    return body + "\n"


@dataclass
class Run:
    """One method on one case. `prompt_s` is the prompt forward of the method's prompt kind
    (plain or numbered document), measured once per case and counted in every method that
    uses it (the others start from a copy of its KV cache)."""

    prompt_s: float
    after_prompt_s: float
    forwards: int  # after the prompt
    tokens: int  # output tokens (regen/pld: gold tokens; CaD: program tokens written)
    extra: dict = field(default_factory=dict)

    @property
    def wall_s(self) -> float:
        return self.prompt_s + self.after_prompt_s


@dataclass
class Prompt:
    """A prompt prefilled once: its KV cache, the logits after it, and what the forward took."""

    ids: list[int]
    cache: object
    logits: object
    seconds: float


def prefill(model, prompt_ids: list[int]) -> Prompt:
    _sync(model)
    start = time.perf_counter()
    cache = new_cache(model)
    logits = append(model, cache, prompt_ids)
    _sync(model)
    return Prompt(prompt_ids, cache, logits, time.perf_counter() - start)


def _sync(model) -> None:
    import torch

    if getattr(model, "device", None) is not None and model.device.type == "cuda":
        torch.cuda.synchronize()


def run_regen(model, prompt: Prompt, targets: list[int]) -> Run:
    """Full regeneration, teacher-forced: `targets` (gold tokens + end token) one
    forward per token; the end token is predicted, never fed."""
    import torch

    cache, logits = clone_cache(model, prompt.cache), prompt.logits
    start = time.perf_counter()
    for tok in targets[:-1]:
        int(torch.argmax(logits))
        logits = append(model, cache, [tok])
    int(torch.argmax(logits))
    after = time.perf_counter() - start
    if cache_len(cache) != len(prompt.ids) + len(targets) - 1:
        raise RuntimeError("regeneration cache length is off")
    return Run(prompt.seconds, after, len(targets) - 1, len(targets) - 1, {"timed_steps": len(targets) - 1})


def strata_runs(n: int, strata: int, run: int) -> list[tuple[int, int]]:
    """(size, first) per stratum of `n` forwards cut into `strata` equal parts: a run of 1 + `run`
    consecutive forwards from `first` is centred in the part (kept inside 0..n), and its timed mean
    stands for the part's `size` forwards."""
    bounds = [round(i * n / strata) for i in range(strata + 1)]
    return [(hi - lo, min(max((lo + hi) // 2 - run // 2, 0), max(n - run - 1, 0)))
            for lo, hi in zip(bounds, bounds[1:]) if hi > lo]


def run_regen_sampled(model, prompt: Prompt, targets: list[int], *, strata: int, run: int = 8,
                      chunk: int = 1024) -> Run:
    """Full regeneration's time after the prompt, estimated from `strata` runs of `run`
    consecutive decode steps instead of all steps: the T = len(targets) - 1 steps are cut
    into `strata` equal parts; in each, the gold tokens before its middle are prefilled
    (untimed, in chunks), then 1 + `run` steps are decoded there exactly as :func:`run_regen`
    does (argmax, a one-token forward of the gold token), the first untimed (it follows the
    prefill), and the mean of the other `run` stands for every step of the part. A decode
    step's cost is close to linear in the context length, so the middle's is the part's
    mean; the steps run back to back because a step's cost depends on what ran just before
    it (on a GPU, a step after a large prefill took a third of one inside a run of steps).
    ``--regen-full-max`` checks the estimate against every step on short cases."""
    import torch

    n = len(targets) - 1
    cache = clone_cache(model, prompt.cache)
    base = len(prompt.ids)
    total, timed, fed = 0.0, 0, 0
    for part, first in strata_runs(n, strata, run):  # the run's first step feeds targets[first]
        if first < fed:
            crop_cache(cache, base + first)
        elif first > fed:
            append(model, cache, targets[fed:first], chunk=chunk)
        fed = first
        k = min(run + 1, n - fed)
        _sync(model)
        for i in range(k):
            if i == 1:
                t0 = time.perf_counter()
            int(torch.argmax(append(model, cache, [targets[fed + i]])))
        per_step = (time.perf_counter() - t0) / (k - 1) if k > 1 else 0.0
        fed += k
        timed += max(k - 1, 0)
        total += part * per_step
    return Run(prompt.seconds, total, n, n, {"timed_steps": timed, "strata": strata})


@dataclass
class PldStep:
    """One verify forward of prompt lookup: the gold token at `pos` and the `draft` after it,
    of which the first `accepted` equal the gold continuation."""

    pos: int
    draft: list[int]
    accepted: int


def pld_schedule(prompt_ids: list[int], targets: list[int], *, draft: int = 10, max_n: int = 3,
                 eos_ids: tuple[int, ...] = ()) -> list[PldStep]:
    """Prompt lookup's verify forwards on `targets` (gold tokens + end token), without the model:
    teacher-forced, a draft's fate depends only on the gold tokens, so the lookup's whole work
    (transformers' ``PromptLookupCandidateGenerator`` rules) is done here and timed apart."""
    lookup = NgramLookup([], max_n)
    lookup.extend(prompt_ids)
    steps: list[PldStep] = []
    pos = 0  # targets[pos] is chosen from the last forward's logits
    while True:
        lookup.extend([targets[pos]])
        if pos == len(targets) - 1:  # the end token
            break
        cand = lookup.propose(draft)
        cut = [i for i, t in enumerate(cand) if t in eos_ids]  # as transformers: no end token in a draft
        cand = cand[: cut[0]] if cut else cand
        n_ok = 0
        while n_ok < len(cand) and pos + 1 + n_ok < len(targets) and cand[n_ok] == targets[pos + 1 + n_ok]:
            n_ok += 1
        steps.append(PldStep(pos, cand, n_ok))
        if n_ok:
            lookup.extend(targets[pos + 1 : pos + 1 + n_ok])
        pos += 1 + n_ok
    if lookup.written[len(prompt_ids) :] != targets:
        raise RuntimeError("prompt lookup did not reproduce the gold tokens")
    return steps


def timed_pld_schedule(prompt_ids: list[int], targets: list[int], **kwargs) -> tuple[list[PldStep], float]:
    """:func:`pld_schedule` and the seconds it took (the lookup's share of prompt lookup's time)."""
    t0 = time.perf_counter()
    steps = pld_schedule(prompt_ids, targets, **kwargs)
    return steps, time.perf_counter() - t0


def _verify(model, cache, targets: list[int], step: PldStep):
    """One verify forward of `step` on `cache` (which holds the prompt and targets[:step.pos]);
    the rejected draft positions are cropped. Returns the logits that choose the next token."""
    base = cache_len(cache)
    out = append(model, cache, [targets[step.pos]] + step.draft, all_logits=bool(step.draft))
    if not step.draft:
        return out
    crop_cache(cache, base + 1 + step.accepted)
    return out[step.accepted]


def run_pld(model, prompt: Prompt, targets: list[int], *, draft: int = 10, max_n: int = 3,
            eos_ids: tuple[int, ...] = (), strata: int | None = None, run: int = 8, chunk: int = 1024,
            schedule: tuple[list[PldStep], float] | None = None) -> Run:
    """Prompt lookup decoding simulated on `targets` (gold tokens + end token): each
    verify forward is [last token + draft], accepted = the draft prefix equal to the
    targets, then one bonus token (what the model's argmax would be). Its time after the
    prompt is the lookup's (:func:`pld_schedule`, timed whole) plus the verify forwards':
    every one of them, or with `strata` an estimate from that many runs of `run` consecutive
    verifies, sampled as :func:`run_regen_sampled` samples decode steps (the verifies before
    a run prefilled untimed; the run's mean forward stands for every forward of its part).
    `schedule`: (:func:`pld_schedule`'s steps, the seconds it took) where the caller ran it."""
    import torch

    steps, lookup_s = schedule or timed_pld_schedule(prompt.ids, targets, draft=draft, max_n=max_n, eos_ids=eos_ids)
    cache, logits = clone_cache(model, prompt.cache), prompt.logits
    base = len(prompt.ids)
    n = len(steps)
    extra = {"drafted": sum(len(x.draft) for x in steps), "accepted": sum(x.accepted for x in steps),
             "lookup_s": lookup_s}
    if strata is None or n <= strata:
        _sync(model)
        start = time.perf_counter()
        for step in steps:
            int(torch.argmax(logits.reshape(-1, logits.shape[-1])[-1]))
            logits = _verify(model, cache, targets, step)
        int(torch.argmax(logits.reshape(-1, logits.shape[-1])[-1]))
        _sync(model)
        forwards_s = time.perf_counter() - start
        if cache_len(cache) != base + len(targets) - 1:
            raise RuntimeError("prompt lookup cache length is off")
        extra["timed_forwards"] = n
    else:
        forwards_s, timed, fed = 0.0, 0, 0  # fed: gold tokens in the cache
        for part, first in strata_runs(n, strata, run):
            at = steps[first].pos
            if at < fed:
                crop_cache(cache, base + at)
            elif at > fed:
                append(model, cache, targets[fed:at], chunk=chunk)
            k = min(run + 1, n - first)
            _sync(model)
            for i in range(k):
                if i == 1:
                    t1 = time.perf_counter()
                logits = _verify(model, cache, targets, steps[first + i])
                int(torch.argmax(logits.reshape(-1, logits.shape[-1])[-1]))
            _sync(model)
            per_forward = (time.perf_counter() - t1) / (k - 1) if k > 1 else 0.0
            last = steps[first + k - 1]
            fed = last.pos + 1 + last.accepted
            timed += max(k - 1, 0)
            forwards_s += part * per_forward
        extra.update(timed_forwards=timed, strata=strata)
    return Run(prompt.seconds, lookup_s + forwards_s, n, len(targets) - 1, extra)


def run_cad(editor: CopyEditor, before: str, after: str, program_text: str, instruction: str, *,
            prompt_s: float | None = None, **execute) -> Run:
    """`editor.execute` of the program (`execute`: its keyword arguments: copy_mode, speculative,
    format, constrained); `prompt_s` (the prompt's forward, when this run reused a kept prompt's KV)
    stands for its own prompt time. `tokens` counts the program's tokens, `extra["chosen"]` those the
    model chose (the rest were forced by the grammar or the document constraint)."""
    start = time.perf_counter()
    result = editor.execute(before, program_text, instruction, **execute)
    wall = time.perf_counter() - start
    if not result.complete or result.text != after or not result.program_text.endswith(program_text):
        raise RuntimeError(f"the oracle program did not reproduce the gold text ({execute})")
    s = result.stats
    return Run(s.prompt_s if prompt_s is None else prompt_s, wall - s.prompt_s,
               s.total_forwards - s.forwards["prompt"], s.generated_tokens + s.fast_forwarded_tokens,
               {"forwards": dict(s.forwards), "copied": s.copied_tokens, "fast_forwarded": s.fast_forwarded_tokens,
                "chosen": s.generated_tokens, "drafted": s.drafted_tokens, "accepted": s.accepted_tokens,
                "mask_s": s.mask_s, "model_s": s.model_s, "prompt_tokens": s.prompt_tokens,
                "model_s_by_kind": dict(s.model_s_by_kind), "tokenize_s": s.tokenize_s,
                "prompt_reused": s.prompt_reused_tokens})


def run_formats(editor: CopyEditor, case, programs: dict[str, str | None]) -> dict[str, Run]:
    """Each format's oracle program (`programs`: text, None where the format cannot write the edit)
    teacher-forced under its grammar and document constraint (``F``), and the same tokens decoded one
    at a time without them (``F_free``) from the same plain prompt, prefilled once for both."""
    runs: dict[str, Run] = {}
    for name, text in programs.items():
        if text is None:
            continue
        editor.forget_prompts()
        runs[name] = run_cad(editor, case.before, case.after, text, case.instruction, format=name)
        runs[free(name)] = run_cad(editor, case.before, case.after, text, case.instruction, format=name,
                                   constrained=False, prompt_s=runs[name].prompt_s)
    editor.forget_prompts()
    return runs


# --------------------------------------------------------------------------- study


def warm_up_case(corpus) -> EditCase:
    """A small edit for the untimed warm-up: the first 12 lines of the corpus's shortest
    document, one line replaced."""
    head = "".join(split_lines(min(corpus.cases, key=lambda c: len(c.before)).before)[:12])
    lines = split_lines(head)
    after = "".join(lines[:5] + ["warm_up = True\n"] + lines[6:])
    return EditCase("warm-up", head, after, "warm up")


def sample_cases(corpus, limit: int | None, seed: int, buckets: list[str] | None = None) -> list:
    """A seeded sample of `limit` cases (all with None), in corpus order; for a bucketed
    corpus (long files: ``commits``) `limit` cases per document-length bucket, only
    `buckets` if given."""
    if getattr(corpus, "bucketed", False):
        return sample_by_bucket(corpus, limit, f"{seed}:{corpus.name}", buckets)
    cases = list(corpus)
    if limit is None or limit >= len(cases):
        return cases
    keep = set(random.Random(f"{seed}:{corpus.name}").sample(range(len(cases)), limit))
    return [c for i, c in enumerate(cases) if i in keep]


def add_arguments(parser) -> None:
    add_corpus_arguments(parser, DEFAULT)
    parser.add_argument("--config", default="qwen2.5-0.5b",
                        help=f"model configuration from analysis.kernel.CONFIGS ({', '.join(CONFIGS)}; random weights)")
    parser.add_argument("--dtype", default="fp32", help="fp32, bf16 or fp16")
    parser.add_argument("--tokenizer", default=None, help="tokenizer folder (default: shared qwen2.5)")
    parser.add_argument("--limit", type=int, default=None,
                        help=f"cases per corpus, a seeded sample (default {DEFAULT_LIMIT}; --quick {QUICK_LIMIT}; "
                             f"0 = all); for long-file corpora (commits) cases per length bucket (default "
                             f"{DEFAULT_PER_BUCKET})")
    parser.add_argument("--buckets", default=None, metavar="LABEL,...",
                        help=f"long-file corpora: only these length buckets ({', '.join(LENGTH_BUCKETS)})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the case sample and the random weights")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's, one per core, as the kernel study that "
                             "gives the bound's s(N))")
    parser.add_argument("--device", default="cpu", help="where the model runs: cpu or cuda (GPU timings)")
    parser.add_argument("--no-cudnn-sdp", action="store_true",
                        help="cuda: no cuDNN attention in any forward (default: as the library runs, none in "
                             "forwards of up to 16 tokens, PyTorch's choice in longer ones; see the decode-phases "
                             "study)")
    parser.add_argument("--regen-sample", type=int, default=None, metavar="N",
                        help=f"time full regeneration on N strata of its steps instead of every step (0: every "
                             f"step; default {DEFAULT_REGEN_STRATA} for long-file corpora, 0 for the others)")
    parser.add_argument("--regen-full-max", type=int, default=DEFAULT_REGEN_FULL_MAX, metavar="TOKENS",
                        help="with --regen-sample, also time every step of answers up to this many tokens and "
                             f"report the estimate's error there (default {DEFAULT_REGEN_FULL_MAX})")
    parser.add_argument("--pld-sample", type=int, default=None, metavar="N",
                        help=f"time prompt lookup's verify forwards on N strata instead of every one (0: every "
                             f"one; default {DEFAULT_PLD_STRATA} for long-file corpora, 0 for the others)")
    parser.add_argument("--pld-full-max", type=int, default=DEFAULT_PLD_FULL_MAX, metavar="FORWARDS",
                        help="with --pld-sample, also time every verify of runs up to this many forwards and "
                             f"report the estimate's error there (default {DEFAULT_PLD_FULL_MAX})")
    parser.add_argument("--draft", type=int, default=10, help="max draft tokens (prompt lookup and speculative)")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run: a tiny Qwen2 with the Qwen2.5 vocabulary, {QUICK_LIMIT} cases per corpus")
    parser.add_argument("--kernel-csv", default=str(DEFAULT_KERNEL_CSV), help="kernel speedup CSV for the bound")
    parser.add_argument("--kernel-select", default=None, metavar="KEY=VALUE,...",
                        help="kernel CSV rows for the bound (default: config=CONFIG,dtype=DTYPE,device=DEVICE)")
    parser.add_argument("--no-plot", action="store_true", help="skip the plots (no matplotlib needed)")
    add_format_argument(parser)
    parser.add_argument("--report-name", default=None,
                        help="file name stem of the report, CSV and plots (default generator, generator_NAME for "
                             "--dataset NAME; --quick generator_quick)")


@dataclass
class CaseResult:
    corpus: str
    id: str
    out_tokens: int
    program_tokens: int
    runs: dict[str, Run]
    case: object = None  # the EditCase
    bucketed: bool = False  # reported per document-length bucket too

    @property
    def lines(self) -> int:
        return self.case.lines_before

    def speedup(self, method: str) -> float:
        """After-prompt speedup of `method` over full regeneration on this case."""
        return self.runs["regen"].after_prompt_s / self.runs[method].after_prompt_s


def measure_case(model, editor: CopyEditor, tokenizer, case, *, draft: int, regen_strata: int | None = None,
                 regen_full_max: int = 0, pld_strata: int | None = None, pld_full_max: int = 0,
                 formats: Sequence[str] = ()) -> CaseResult:
    """All methods on one case, and each of `formats` constrained and unconstrained
    (:func:`run_formats`); raises if any fails to reproduce the gold output.

    Regeneration is timed at every step when `regen_strata` is None or the gold answer has at
    most `regen_full_max` tokens, else estimated from `regen_strata` timed steps
    (:func:`run_regen_sampled`); prompt lookup likewise, by its verify forwards (`pld_strata`,
    `pld_full_max`). Where both ways run, the report compares them. Each prompt kind
    is prefilled once: regeneration and prompt lookup start from a copy of the plain prompt's
    KV cache, the CaD runs after the first reuse the numbered prompt's (`editor` keeps one)."""
    encode = editor.encode
    count = lambda text: len(encode(text))
    program = oracle_program(case.before, case.after, count_tokens=count).to_text(header=False)
    eos = tokenizer.eos_token_id
    targets = encode(case.after) + [eos]
    if b"".join(editor.vocab.token_bytes[t] for t in targets[:-1]) != case.after.encode("utf-8"):
        raise RuntimeError(f"{case.id}: the gold tokens do not spell the gold text")
    prompt = prefill(model, editor.encode_prompt(regen_prompt(tokenizer, case.before, case.instruction)))
    steps = len(targets) - 1
    sample = regen_strata is not None and steps > regen_strata
    full = run_regen(model, prompt, targets) if not sample or steps <= regen_full_max else None
    sampled = run_regen_sampled(model, prompt, targets, strata=regen_strata) if sample else None
    regen = full or sampled
    regen.extra.update(full_s=full.after_prompt_s if full else None,
                       sampled_s=sampled.after_prompt_s if sampled else None, prompt_tokens=len(prompt.ids))
    full_pld = sampled_pld = None
    schedule = timed_pld_schedule(prompt.ids, targets, draft=draft, eos_ids=(eos,))  # one lookup for both runs
    n_verifies = len(schedule[0])
    if not pld_strata or n_verifies <= pld_full_max or n_verifies <= pld_strata:
        full_pld = run_pld(model, prompt, targets, draft=draft, eos_ids=(eos,), schedule=schedule)
    if pld_strata and n_verifies > pld_strata:
        sampled_pld = run_pld(model, prompt, targets, draft=draft, eos_ids=(eos,), strata=pld_strata,
                              schedule=schedule)
    pld = full_pld or sampled_pld
    pld.extra.update(full_s=full_pld.after_prompt_s if full_pld else None,
                     sampled_s=sampled_pld.after_prompt_s if sampled_pld else None)
    runs = {"regen": regen, "pld": pld}
    del prompt
    editor.forget_prompts()
    runs["cad_prefill"] = run_cad(editor, case.before, case.after, program, case.instruction)
    cad_prompt_s = runs["cad_prefill"].prompt_s
    runs["cad_skip"] = run_cad(editor, case.before, case.after, program, case.instruction, copy_mode="skip",
                               prompt_s=cad_prompt_s)
    runs["cad_spec"] = run_cad(editor, case.before, case.after, program, case.instruction, copy_mode="prefill",
                               speculative=draft, prompt_s=cad_prompt_s)
    runs.update(run_formats(editor, case, format_programs(case.before, case.after, list(formats))))
    return CaseResult("", case.id, len(targets) - 1, runs["cad_prefill"].tokens, runs, case)


def methods_of(results: list[CaseResult]) -> list[str]:
    """The methods measured on `results`: :data:`METHODS`, then each format that ran, constrained
    and unconstrained (:func:`free`), in :data:`~analysis.formats.FORMATS` order."""
    ran = {m for r in results for m in r.runs}
    return METHODS + [m for m in format_methods(list(FORMATS)) if m in ran]


def label(method: str) -> str:
    return method_label(method, LABELS)


def _speedups(results: list[CaseResult], after_prompt: bool) -> dict[str, float]:
    """Regeneration's summed time over each method's, on the cases that method ran (a format
    skips an edit it cannot write)."""
    def total(m: str, rs: list[CaseResult]) -> float:
        return sum(r.runs[m].after_prompt_s if after_prompt else r.runs[m].wall_s for r in rs)

    out = {}
    for m in methods_of(results):
        rs = [r for r in results if m in r.runs]
        out[m] = total("regen", rs) / total(m, rs)
    return out


def groups_of(by_corpus: dict[str, list[CaseResult]]) -> dict[str, list[CaseResult]]:
    """The report's rows: each corpus, each length bucket of a bucketed corpus
    (``commits <200``), and ``pooled``."""
    groups: dict[str, list[CaseResult]] = {}
    for name, rs in by_corpus.items():
        groups[name] = rs
        if any(r.bucketed for r in rs):
            for label in [*LENGTH_BUCKETS, OVER]:
                part = [r for r in rs if length_bucket(r.lines) == label]
                if part:
                    groups[f"{name} {label}"] = part
    groups["pooled"] = [r for rs in by_corpus.values() for r in rs]
    return groups


def _group_tallies(by_corpus: dict[str, list[CaseResult]]) -> dict[str, Tally]:
    """The coverage study's tally (Qwen2.5 tokens, max-copy oracle programs) of each report row."""
    from .coverage import load_encoder

    _, encode = load_encoder(None)
    tallies = {id(r): case_tally(r.case.before, r.case.after, encode) for rs in by_corpus.values() for r in rs}
    out = {}
    for name, rs in groups_of(by_corpus).items():
        tally = Tally()
        for r in rs:
            tally.add(tallies[id(r)])
        out[name] = tally
    return out


def _bound(tallies: dict[str, Tally], curve) -> dict[str, float]:
    """The closed-form bound of each report row, from its tally (:func:`_group_tallies`)."""
    return {name: tally.bounds(curve)[0] if curve and tally.cases else float("nan")
            for name, tally in tallies.items()}


def bound_check_table(by_corpus: dict[str, list[CaseResult]], curve,
                      tallies: dict[str, Tally] | None = None) -> str | None:
    """Why CaD lands where it does against the closed-form bound, from this run's own timings.

    The bound prices a copied span of N tokens at 1/s(N) decode steps, s from the kernel study
    (copies timed on a short prefix). Here a copied token's price is what the `cad_prefill` run's
    copy forwards took per copied token, in units of regeneration's mean decode step on the same
    case. The bound recomputed with that price ("at this run's copy cost") splits the gap in two:
    kernel bound -> run-cost bound is what the case's longer context costs the copies; run-cost
    bound -> CaD is the rest: CaD's own decode steps run after the longer numbered prompt, so they
    cost more than regeneration's mean step, plus grammar masks, tokenization and Python.
    `tallies`: the rows' tallies where the caller has them already."""
    if curve is None:
        return None
    groups = groups_of(by_corpus)
    rows = []
    for name, tally in (tallies or _group_tallies(by_corpus)).items():
        rs = groups[name]
        regen_s = sum(r.runs["regen"].after_prompt_s for r in rs)
        steps = sum(r.runs["regen"].forwards for r in rs)
        cad = [r.runs["cad_prefill"] for r in rs]
        copy_s = sum(x.extra["model_s_by_kind"].get("copy", 0.0) for x in cad)
        copied = sum(x.extra["copied"] for x in cad)
        if not steps or not copied or not tally.out_tokens:
            continue
        step_s = regen_s / steps
        kernel_price = sum(n / curve(n) for n in tally.copy_tokens if n > 0) / max(sum(tally.copy_tokens), 1)
        run_price = copy_s / copied / step_s
        kernel_bound = tally.bounds(curve)[0]
        run_bound = tally.out_tokens / (tally.program_tokens + run_price * sum(tally.copy_tokens))
        cad_x = regen_s / sum(x.after_prompt_s for x in cad)
        context = sum(x.extra["prompt_tokens"] + r.out_tokens for x, r in zip(cad, rs)) / len(rs)
        rows.append((name, f"{context:,.0f}", f"{1000 * step_s:.0f}", f"{kernel_price:.3f}", f"{run_price:.3f}",
                     f"{kernel_bound:.2f}x", f"{run_bound:.2f}x", f"{cad_x:.2f}x",
                     f"{run_bound / kernel_bound:.2f}", f"{cad_x / run_bound:.2f}"))
    if not rows:
        return None
    return markdown_table(["corpus", "context at the end (mean positions)", "decode step ms (regen)",
                           "copied token, decode steps: kernel", "copied token, decode steps: this run",
                           "bound (kernel)", "bound at this run's copy cost", "CaD after prompt",
                           "context share", "rest share"], rows)


def tables(by_corpus: dict[str, list[CaseResult]], bounds: dict[str, float]) -> tuple[str, str, str]:
    groups = groups_of(by_corpus)
    speed_rows, wall_rows, fwd_rows = [], [], []
    for name, rs in groups.items():
        e2e, post = _speedups(rs, False), _speedups(rs, True)
        speed_rows.append((name, len(rs)) + tuple(f"{e2e[m]:.2f}x / {post[m]:.2f}x" for m in METHODS[1:])
                          + (f"{bounds.get(name, float('nan')):.2f}x",))
        wall_rows.append((name,) + tuple(f"{sum(r.runs[m].wall_s for r in rs):.1f}" for m in METHODS)
                         + (f"{sum(r.runs['regen'].prompt_s for r in rs):.1f}",
                            f"{sum(r.runs['cad_prefill'].prompt_s for r in rs):.1f}",
                            f"{sum(r.runs['cad_prefill'].extra['mask_s'] for r in rs):.1f}"))
        pld = [r.runs["pld"].extra for r in rs]
        spec = [r.runs["cad_spec"].extra for r in rs]
        fwd_rows.append((name, sum(r.out_tokens for r in rs), sum(r.program_tokens for r in rs))
                        + tuple(sum(r.runs[m].forwards for r in rs) for m in METHODS)
                        + (f"{sum(x['accepted'] for x in pld)}/{sum(x['drafted'] for x in pld)}",
                           f"{sum(x['accepted'] for x in spec)}/{sum(x['drafted'] for x in spec)}"))
    speed = markdown_table(["corpus", "cases"] + [LABELS[m] for m in METHODS[1:]] + ["closed-form bound"],
                           speed_rows)
    wall = markdown_table(["corpus"] + [f"{m} s" for m in METHODS]
                          + ["regen prompt s", "CaD prompt s", "CaD mask s (prefill)"], wall_rows)
    fwd = markdown_table(["corpus", "gold tokens", "program tokens"] + [f"{m} forwards" for m in METHODS]
                         + ["pld accepted/drafted", "spec accepted/drafted"], fwd_rows)
    return speed, wall, fwd


FORMAT_ROWS = ("regen", "cad_prefill")  # the format table's rows besides the formats: regeneration and CaD


def format_table(by_corpus: dict[str, list[CaseResult]]) -> str:
    """The edit formats beside regeneration and CaD, per report row (corpus, length bucket,
    pooled): output tokens, tokens the model chose (the rest forced by the grammar or the document
    constraint; unconstrained and regeneration: every token), forwards after the prompt, prompt
    tokens, and seconds (prompt, after it, wall), with wall and after-prompt speedups over
    regeneration on the same cases."""
    rows = []
    for name, rs in groups_of(by_corpus).items():
        for m in [*FORMAT_ROWS, *methods_of(rs)[len(METHODS):]]:
            done = [r for r in rs if m in r.runs]
            runs = [r.runs[m] for r in done]
            tokens = sum(x.tokens for x in runs)
            chosen = sum(x.extra.get("chosen", x.tokens) for x in runs)
            prompt_tokens = sum(x.extra["prompt_tokens"] for x in runs)
            regen_wall = sum(r.runs["regen"].wall_s for r in done)
            regen_post = sum(r.runs["regen"].after_prompt_s for r in done)
            wall, post = sum(x.wall_s for x in runs), sum(x.after_prompt_s for x in runs)
            rows.append((name, label(m), len(done), f"{tokens:,}", f"{chosen:,}", f"{sum(x.forwards for x in runs):,}",
                         f"{prompt_tokens:,}", f"{sum(x.prompt_s for x in runs):.1f}", f"{post:.1f}", f"{wall:.1f}",
                         f"{regen_wall / wall:.2f}x / {regen_post / post:.2f}x"))
    return markdown_table(["corpus", "method", "cases", "output tokens", "tokens chosen", "forwards after the prompt",
                           "prompt tokens", "prompt s", "after prompt s", "wall s",
                           "speedup vs regeneration (wall / after prompt)"], rows)


def format_targets(by_corpus: dict[str, list[CaseResult]]) -> str | None:
    """Issue 31's targets per report row, on the cases every compared method ran: the best
    constrained format's wall time (prompt included) against CaD's and against the same format
    unconstrained, each met or missed, with the measured parts of both times."""
    lines = []
    for name, rs in groups_of(by_corpus).items():
        formats = [m for m in methods_of(rs)[len(METHODS):] if not m.endswith("_free")]
        done = [r for r in rs if all(m in r.runs for f in formats for m in (f, free(f)))]
        if not formats or not done:
            continue

        def wall(m: str) -> float:
            return sum(r.runs[m].wall_s for r in done)

        def parts(m: str) -> str:
            runs = [r.runs[m] for r in done]
            return (f"{wall(m):.1f} s = prompt {sum(x.prompt_s for x in runs):.1f} s + {sum(x.forwards for x in runs):,} "
                    f"forwards {sum(x.after_prompt_s for x in runs):.1f} s")

        best = min(formats, key=wall)
        verdict = lambda ok: "met" if ok else "missed"  # noqa: E731
        lines.append(f"* {name} ({len(done)} cases): best constrained format {label(best)}, {parts(best)}; "
                     f"CaD {parts('cad_prefill')} (<= CaD: {verdict(wall(best) <= wall('cad_prefill'))}); "
                     f"{label(free(best))} {parts(free(best))} (<= unconstrained: "
                     f"{verdict(wall(best) <= wall(free(best)))}).")
    return "\n".join(lines) or None


def estimate_check_table(by_corpus: dict[str, list[CaseResult]]) -> str | None:
    """Cases where a baseline (regeneration, prompt lookup) was timed both whole and by strata:
    the estimate's error."""
    rows = [(LABELS.get(m, m), r.corpus, r.id, r.runs[m].forwards, f"{x['full_s']:.1f}", f"{x['sampled_s']:.1f}",
             f"{100 * (x['sampled_s'] / x['full_s'] - 1):+.1f}%")
            for m in ("regen", "pld") for rs in by_corpus.values() for r in rs
            if (x := r.runs[m].extra).get("full_s") and x.get("sampled_s")]
    if not rows:
        return None
    return markdown_table(["method", "corpus", "case", "forwards", "every forward s", "estimate s", "estimate error"],
                          rows)


def time_table(by_corpus: dict[str, list[CaseResult]]) -> str:
    """Where the time of the CaD and edit-format runs goes after the prompt: model time per
    forward kind (seconds / forwards), grammar masking (and the document constraint), tokenization,
    and the rest (Python overhead: sampling, the resolver, the loop)."""
    groups = groups_of(by_corpus)
    kinds = ("decode", "fast_forward", "copy", "verify")
    rows = []
    for name, rs in groups.items():
        for m in methods_of(rs)[2:]:
            runs = [r.runs[m] for r in rs if m in r.runs]
            by_kind = {k: sum(x.extra["model_s_by_kind"].get(k, 0.0) for x in runs) for k in kinds}
            counts = {k: sum(x.extra["forwards"].get(k, 0) for x in runs) for k in kinds}
            mask = sum(x.extra["mask_s"] for x in runs)
            tok = sum(x.extra["tokenize_s"] for x in runs)
            post = sum(x.after_prompt_s for x in runs)
            other = post - sum(by_kind.values()) - mask - tok
            rows.append((name, m, f"{post:.1f}")
                        + tuple(f"{by_kind[k]:.1f} / {counts[k]} ({1000 * by_kind[k] / max(counts[k], 1):.0f} ms)"
                                for k in kinds)
                        + (f"{mask:.1f}", f"{tok:.2f}", f"{other:.1f}"))
    return markdown_table(["corpus", "method", "after prompt s"] + [f"{k} s / forwards (per forward)" for k in kinds]
                          + ["masking s", "tokenization s", "other s"], rows)


def plot(by_corpus: dict[str, list[CaseResult]], bounds: dict[str, float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = groups_of(by_corpus)
    methods = [m for m in methods_of(groups["pooled"])[1:] if not m.endswith("_free")]
    fig, ax = plt.subplots(figsize=(max(8, 2.4 * len(groups)), 5))
    width = 0.8 / (len(methods) + 1)
    for i, m in enumerate(methods):
        vals = [_speedups(rs, True).get(m, 0.0) for rs in groups.values()]
        ax.bar([g + (i - len(methods) / 2) * width for g in range(len(groups))], vals, width, label=label(m))
    ax.bar([g + (len(methods) / 2) * width for g in range(len(groups))], [bounds.get(n, 0) for n in groups], width,
           label="closed-form bound", color="lightgray", edgecolor="black", hatch="//")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xticks(range(len(groups)), list(groups), fontsize=8 if len(groups) > 4 else None)
    ax.set_ylabel("speedup vs full regeneration (after the prompt)")
    ax.legend(fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.08), frameon=False)
    ax.set_title("Edit generation wall time, teacher-forced on gold answers")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_by_length(by_corpus: dict[str, list[CaseResult]], path: Path) -> None:
    """Per-case after-prompt speedup over regeneration against the document's length
    (lines) and the changed fraction of its lines, one marker per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rs = [r for rows in by_corpus.values() for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    xs = {"lines": [r.lines for r in rs], "changed": [max(changed_fraction(r.case), 1e-4) for r in rs]}
    for ax, (key, label) in zip(axes, (("lines", "document length (lines before)"),
                                      ("changed", "changed fraction of the document's lines"))):
        for m, marker in zip(METHODS[1:], "os^D"):
            ax.scatter(xs[key], [r.speedup(m) for r in rs], marker=marker, label=LABELS[m], alpha=0.75)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_xlabel(label)
        if key == "lines":
            for lo, _ in list(LENGTH_BUCKETS.values())[1:]:
                ax.axvline(lo, color="gray", lw=0.6, ls=":")
    axes[0].set_ylabel("speedup vs full regeneration (after the prompt)")
    axes[0].legend(fontsize=8)
    fig.suptitle("Per-case speedup against document length and changed fraction")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_cases_csv(path: Path, by_corpus: dict[str, list[CaseResult]]) -> None:
    """One row per case: its size, and each method's wall and prompt seconds, forwards, tokens and
    tokens chosen (empty where a format could not write the edit)."""
    methods = methods_of([r for rs in by_corpus.values() for r in rs])
    keys = ("wall_s", "prompt_s", "forwards", "tokens", "chosen")
    cols = ["corpus", "id", "lines_before", "changed_fraction", "gold_tokens", "program_tokens"] + [
        f"{m}_{k}" for m in methods for k in keys]

    def cells(run: Run | None) -> list:
        if run is None:
            return [""] * len(keys)
        return [f"{run.wall_s:.4f}", f"{run.prompt_s:.4f}", run.forwards, run.tokens, run.extra.get("chosen", run.tokens)]

    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for name, rs in by_corpus.items():
            for r in rs:
                w.writerow([name, r.id, r.lines, f"{changed_fraction(r.case):.4f}", r.out_tokens, r.program_tokens]
                           + [v for m in methods for v in cells(r.runs.get(m))])


def run(args) -> int:
    import torch
    from transformers import PreTrainedTokenizerFast

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    args.threads_used = torch.get_num_threads()
    limit = args.limit if args.limit is not None else (QUICK_LIMIT if args.quick else DEFAULT_LIMIT)
    limit = None if limit == 0 else limit
    per_bucket = args.limit if args.limit is not None else (1 if args.quick else DEFAULT_PER_BUCKET)
    per_bucket = None if per_bucket == 0 else per_bucket
    config_name = "tiny-qwen-vocab" if args.quick else args.config
    if args.device not in ("cpu", "cuda"):
        raise SystemExit(f"--device: {args.device!r} is not cpu or cuda")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device")
    model = build_model(QUICK_CONFIG if args.quick else args.config, args.dtype, args.device, seed=args.seed)
    if args.no_cudnn_sdp:
        set_cudnn_attention(args.device, False)
    tok_dir = Path(args.tokenizer) if args.tokenizer else shared_data_dir() / "tokenizers" / "qwen2.5"
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(tok_dir))
    editor = CopyEditor(model, tokenizer, prompt_cache=1)
    select = args.kernel_select or f"config={args.config},dtype={args.dtype},device={args.device}"
    curves = read_kernel_curves(args.kernel_csv, select) if Path(args.kernel_csv).is_file() else {}
    curve = next(iter(curves.values()), None)

    buckets = parse_buckets(args.buckets)  # before the warm-up: a wrong label fails at once
    formats = parse_formats(args.formats)
    # warm-up (untimed): every code path once on a small case
    measure_case(model, editor, tokenizer, warm_up_case(next(iter(corpora_from_args(args)))), draft=args.draft,
                 formats=formats)

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = args.report_name or ("generator_quick" if args.quick else report_stem(args, "generator", DEFAULT))
    by_corpus: dict[str, list[CaseResult]] = {}
    cases_by_corpus: dict[str, list] = {}
    started = time.perf_counter()
    for corpus in corpora_from_args(args):
        cases = sample_cases(corpus, per_bucket if corpus.bucketed else limit, args.seed, buckets)
        cases_by_corpus[corpus.name] = cases
        results = []
        for case in cases:
            strata = args.regen_sample if args.regen_sample is not None else (
                DEFAULT_REGEN_STRATA if corpus.bucketed else 0)
            pld_strata = args.pld_sample if args.pld_sample is not None else (
                DEFAULT_PLD_STRATA if corpus.bucketed else 0)
            r = measure_case(model, editor, tokenizer, case, draft=args.draft, regen_strata=strata or None,
                             regen_full_max=args.regen_full_max, pld_strata=pld_strata or None,
                             pld_full_max=args.pld_full_max, formats=formats)
            r.corpus, r.bucketed = corpus.name, corpus.bucketed
            results.append(r)
            print(f"{corpus.name} {case.id}: " + ", ".join(f"{m} {r.runs[m].wall_s:.2f}s" for m in methods_of([r])),
                  flush=True)
            by_corpus[corpus.name] = results
            # the per-case CSV after every case: a run cut off by a time limit keeps what it measured
            write_cases_csv(out / f"{name}_cases.csv", by_corpus)
        by_corpus[corpus.name] = results
    elapsed = time.perf_counter() - started
    bucketed = {n for n, rs in by_corpus.items() if any(r.bucketed for r in rs)}
    tallies = _group_tallies(by_corpus)  # tokenizes every case: once, for the bound and its check
    bounds = _bound(tallies, curve)
    speed, wall, fwd = tables(by_corpus, bounds)
    print(speed, wall, fwd, format_table(by_corpus) if formats else "", sep="\n\n")

    write_cases_csv(out / f"{name}_cases.csv", by_corpus)
    if not args.no_plot:
        plot(by_corpus, bounds, out / f"{name}.png")
        plot_by_length(by_corpus, out / f"{name}_length.png")
    sample = "; ".join(f"{n}: {', '.join(c.id for c in cs)}" for n, cs in cases_by_corpus.items())
    n_all = {c.name: len(c) for c in corpora_from_args(args)}
    sizes = ", ".join(f"{len(cs)} of {n_all[n]}" + (f" ({per_bucket or 'all'} per length bucket"
                                                    + (f", buckets {args.buckets}" if args.buckets else "") + ")"
                                                    if n in bucketed else "")
                      for n, cs in cases_by_corpus.items())
    where = (f"CUDA: {torch.cuda.get_device_name()}, torch {torch.__version__}" if args.device == "cuda"
             else f"CPU, {args.threads_used} torch thread(s), torch {torch.__version__}")
    noise_note = ("GPU timings: every step reads its argmax on the host (as a sampler does), so each step waits for "
                  "the GPU. " + ("sdpa without cuDNN attention in every forward (`--no-cudnn-sdp`)." if args.no_cudnn_sdp
                                 else "sdpa as the library runs it: no cuDNN attention in forwards of up to 16 "
                                      "tokens, PyTorch's choice in longer ones.")
                  if args.device == "cuda" else
                  f"The kernel CSV was measured with torch's default thread count; this study ran "
                  f"{args.threads_used} thread(s).")
    bound_note = (f"Closed-form bound: T / (T_gen + sum_k N_k / s(N_k)) over the same sampled cases (coverage study), "
                  f"s(N) from `{Path(args.kernel_csv).name}` rows `{select}`." if curve else
                  f"No kernel curve for `{select}` in `{args.kernel_csv}`: bound n/a.")
    n_cases = sum(map(len, by_corpus.values()))
    notes = []
    for m, what, flag in (("regen", "Full regeneration", "--regen-sample"),
                          ("pld", "Prompt lookup's verify forwards", "--pld-sample")):
        n_sampled = sum(1 for rs in by_corpus.values() for r in rs if r.runs[m].extra.get("full_s") is None)
        notes.append(f"{what} were estimated from timed strata on {n_sampled} of {n_cases} cases (`{flag}`), "
                     f"timed whole on the others." if n_sampled else f"{what} were timed whole on every case.")
    regen_note = " ".join(notes).replace("Full regeneration were", "Full regeneration was")
    check = estimate_check_table(by_corpus)
    if check:
        regen_note += (" Where both ran, the estimate against every forward (after the prompt; prompt lookup's "
                       "includes its lookup, timed whole either way):\n\n" + check)
    check_bound = bound_check_table(by_corpus, curve, tallies)
    bound_section = ("" if check_bound is None else
                     "\n**CaD against its bound, from this run's timings.** The bound prices a copied token at "
                     "1/s(N) decode steps, s from the kernel study (copies after a 1,024-token prefix); here a "
                     "copied token costs what `cad_prefill`'s copy forwards took per copied token, in regeneration's "
                     "mean decode steps on the same cases. The bound at that price splits CaD / bound into the "
                     "longer context's cost to the copies (context share) and the rest (rest share: CaD's decode "
                     "steps run after the longer numbered prompt, so they cost more than regeneration's mean step; "
                     "masks, tokenization, Python):\n\n" + check_bound + "\n")
    format_section = ""
    if formats:
        targets = format_targets(by_corpus)
        format_section = f"""
**Edit formats** ({", ".join(FORMAT_LABELS[f] for f in formats)}; `docs/edit_formats.md`), beside
regeneration and CaD. Each format's oracle program (minimal hunks, old lines widened until unique) runs
twice from the format's own prompt (its instructions and the plain document), prefilled once for both:
constrained (`CopyEditor.execute(..., format=F)`: the grammar and the document constraint at every step;
a forced run, such as search text once its prefix is unique, shares the forward of the chosen token before
it) and unconstrained
(`constrained=False`: the same tokens one forward each, no mask, then applied by the format's applier).
"Tokens chosen" are the model's decisions (the rest were forced); for regeneration and the unconstrained
runs, every token:

{format_table(by_corpus)}

Targets (issue 31), wall time with the prompt, on the cases every format could write:

{targets or "(no case that every format could write)"}
"""
    figures = "" if args.no_plot else f"""
![generator]({name}.png)

Per case, against document length and the changed fraction of its lines:

![generator by length]({name}_length.png)
"""
    body = f"""Model: `{config_name}` Qwen2 with seeded random weights ({args.dtype}, {where}); tokenizer: Qwen2.5 ({tok_dir.name}). Cases per corpus: {sizes} (seeded sample, seed {args.seed};
ids below). Measured time {elapsed:.0f} s (plus one untimed warm-up case). Draft length {args.draft}, n-grams up to 3.

{__doc__.split(chr(10) + chr(10), 1)[1].strip()}

**Speedup vs full regeneration** (ratio of summed wall times over the cases, end-to-end / after the prompt;
rows `NAME <200` etc. are a long-file corpus's document-length buckets, in lines before the edit):

{speed}

{bound_note} {noise_note}

{regen_note}
{bound_section}
**Summed wall times** (seconds; the CaD runs include the grammar mask at every step):

{wall}

**Forwards after the prompt**, and draft acceptance:

{fwd}

{format_section}
**Where the time goes** (Copy-as-Decode and edit-format runs, after the prompt; "other" is the rest of the
loop: sampling, the resolver, Python overhead). The tokenizer's time of the prompt is in the prompt:

{time_table(by_corpus)}

Per-case times: `{name}_cases.csv`. Sample: {sample}.
{figures}"""
    extra = ["--quick"] if args.quick else []
    extra += format_argv(formats)
    extra += ["--no-cudnn-sdp"] if args.no_cudnn_sdp else []
    for key in ("config", "dtype", "device", "limit", "buckets", "seed", "threads", "draft", "kernel_select",
                "regen_sample", "regen_full_max", "pld_sample", "pld_full_max", "report_name"):
        val = getattr(args, key)
        default = {"config": "qwen2.5-0.5b", "dtype": "fp32", "device": "cpu", "seed": 0,
                   "draft": 10, "regen_full_max": DEFAULT_REGEN_FULL_MAX,
                   "pld_full_max": DEFAULT_PLD_FULL_MAX}.get(key)
        if val is not None and val != default:
            extra += [f"--{key.replace('_', '-')}", str(val)]
    if Path(args.kernel_csv).resolve() != DEFAULT_KERNEL_CSV.resolve():
        csv_path = Path(args.kernel_csv)
        try:
            csv_path = csv_path.resolve().relative_to(Path.cwd())
        except ValueError:
            pass
        extra += ["--kernel-csv", str(csv_path)]
    path = write_report(out, name, "Generator wall time: regeneration, prompt lookup, Copy-as-Decode"
                        + (", edit formats" if formats else ""), body,
                        shlex.join(["cad-outlines", "study", "generator", *corpus_argv(args), *extra]))
    print(f"wrote {path}")
    return 0
