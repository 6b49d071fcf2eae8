"""Grammar fuzzer with lark as the oracle: random grammars and mutations of real ones, texts sampled from
each and single-character edits of them, decided by lark (LALR, basic lexer) and by the engine
teacher-forced with a real BPE tokenizer's tokens and byte by byte, EOS at the end.

Every case must end in agreement or in a refusal the docs describe (:mod:`analysis.lark_oracle`); a
disagreement is minimised and printed as a regression case (``tests/engine/test_grammar_fuzz.py`` keeps
them). Seeded: grammar k of a run is ``random.Random(seed * 1_000_003 + k)``'s, so any one can be rerun alone
(``--first K --grammars 1``).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import resource
import shlex
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .lark_oracle import Case, EngineSide, LarkSide, check_case, judge_refusal, minimise
from .report import markdown_table, write_report

REPO = Path(__file__).resolve().parent.parent
DESCRIPTION = "random and mutated Lark grammars, sampled texts and edits: the engine against lark (LALR)"
SHIPPED = ["json", "json", "json", "sql", "sql", "copy_edit", "copy_edit", "python"]  # python: lark builds it in 1 s


@dataclass
class FuzzConfig:
    sentences: int = 20  # texts sampled from each grammar
    edits: int = 3  # single-character edits of each sampled text
    walks: int = 3  # random walks over the engine's masks
    walk_tokens: int = 24
    mutate_share: float = 0.2  # grammars that are mutations of the shipped ones
    eager_every: int = 6  # every k-th grammar the engine compiles also eagerly (streamlined store)
    minimise: bool = True


@dataclass
class GrammarResult:
    index: int
    origin: str  # "random" or "mutation of NAME"
    status: str  # "fuzzed", "lark refuses", "both refuse", "engine refuses: <category>"
    tokenizer: str = ""
    cases: int = 0
    verdicts: Counter = field(default_factory=Counter)
    problems: list[Case] = field(default_factory=list)
    seconds: float = 0.0
    cpu: float = 0.0  # this process's CPU seconds on it


class Tokenizers:
    """The vocabularies and encoders of the tokenizers a run uses, loaded once per process."""

    def __init__(self, names: list[str]):
        from tokenizers import Tokenizer

        from cad_outlines.engine.vocabulary import Vocabulary

        self.names = names
        self.vocab, self.encode, self.byte_ids = {}, {}, {}
        for name in names:
            path = tokenizer_path(name)
            vocab = Vocabulary.from_tokenizer(path)
            tok = Tokenizer.from_file(str(path / "tokenizer.json"))
            self.vocab[name] = vocab
            self.encode[name] = _encoder(tok)
            index = {b: i for i, b in enumerate(vocab.token_bytes) if len(b) == 1 and i not in vocab.special_ids}
            missing = [b for b in range(256) if bytes([b]) not in index]
            if missing:
                raise ValueError(f"tokenizer {name} has no single-byte token for bytes {missing[:5]}")
            self.byte_ids[name] = np.array([index[bytes([b])] for b in range(256)], dtype=np.int64)


def _encoder(tok):
    """text -> token ids with a ``tokenizers.Tokenizer`` (no special tokens)."""
    return lambda text: tok.encode(text, add_special_tokens=False).ids


def tokenizer_path(name: str) -> Path:
    """A tokenizer folder: a path, a folder of the shared data's tokenizers, or the vendored GPT-2."""
    if Path(name).is_dir():
        return Path(name)
    from .datasets import shared_data_dir

    try:
        return shared_data_dir() / "tokenizers" / name
    except FileNotFoundError:
        if name == "gpt2":
            return REPO / "tests" / "data" / "tokenizers" / "gpt2"
        raise


def grammar_for(seed: int, index: int, config: FuzzConfig) -> tuple[str, str]:
    """(origin, grammar text) of grammar `index` of the run with `seed`."""
    from cad_outlines.grammars import load_grammar_text

    from .grammar_sampler import mutate_grammar, random_grammar

    rng = random.Random(seed * 1_000_003 + index)
    if rng.random() < config.mutate_share:
        name = rng.choice(SHIPPED)
        text = load_grammar_text(name)
        for _ in range(rng.randint(1, 3)):
            text = mutate_grammar(rng, text)
        return f"mutation of {name}", text
    return "random", random_grammar(rng)


def _start_of(text: str) -> str | None:
    from cad_outlines.grammars import grammar_source

    return grammar_source(text).start


# compile limits for grammars under test, tighter than the defaults (a random regex can ask for a huge DFA): a
# grammar past one is a documented refusal ("resource limit"), and a worker's memory stays bounded
FUZZ_LIMITS_FIELDS = dict(max_compile_seconds=120, max_dfa_states=3000, max_lexer_configs=50_000,
                          max_store_rows=5_000_000)


def compile_engine(text: str, vocab, *, lazy: bool = True, start: str | None = None, import_paths=(),
                   postlex="auto"):
    """The engine's compile of a grammar under test (not cached: each is used once)."""
    from cad_outlines.engine.compile import compile_grammar
    from cad_outlines.limits import Limits

    return compile_grammar(text, vocab, start=start, import_paths=import_paths, postlex=postlex, cache=False,
                           lazy=lazy, progress=False, limits=Limits(**FUZZ_LIMITS_FIELDS))


def walk_texts(compiled, rng: random.Random, n: int, max_tokens: int) -> list[str]:
    """Texts of random walks over the engine's masks (uniform among allowed tokens, EOS ends a walk)."""
    from cad_outlines.engine.matcher import Matcher

    eos = set(compiled.eos_token_ids)
    out = []
    for _ in range(n):
        m, data = Matcher(compiled), b""
        for _ in range(rng.randint(1, max_tokens)):
            allowed = np.flatnonzero(m.allowed_mask())
            if not len(allowed):
                break
            tok = int(rng.choice(allowed))
            if tok in eos:
                break
            m.advance(tok)
            data += compiled.token_bytes(tok)
        try:
            out.append(data.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    return out


def fuzz_grammar(seed: int, index: int, tokenizers: Tokenizers, config: FuzzConfig,
                 grammar: tuple[str, str] | None = None) -> GrammarResult:
    """Every case of one grammar (grammar `index` of the run `seed`, or `grammar` = (origin, text))."""
    from .grammar_sampler import SentenceSampler, edits

    t0, c0 = time.perf_counter(), time.process_time()
    origin, text = grammar or grammar_for(seed, index, config)
    rng = random.Random(seed * 7_919 + index)
    tok_name = tokenizers.names[index % len(tokenizers.names)]
    res = GrammarResult(index, origin, "fuzzed", tok_name)
    start = _start_of(text)
    try:
        lark_side = LarkSide(text, start=start)
    except Exception:  # noqa: BLE001 - lark refuses: the engine must refuse it too
        res.status = "lark refuses"
        try:
            compile_engine(text, tokenizers.vocab[tok_name], start=start)
        except Exception:  # noqa: BLE001
            res.status = "both refuse"
        else:
            res.problems.append(Case(text, "", "refusal", "lark refuses the grammar, the engine compiles it", start))
        res.seconds, res.cpu = time.perf_counter() - t0, time.process_time() - c0
        return res
    engines = []
    eager = config.eager_every and index % config.eager_every == 0 and len(text) < 4000  # not python.lark's
    for lazy in ([True, False] if eager else [True]):
        try:
            compiled = compile_engine(text, tokenizers.vocab[tok_name], lazy=lazy, start=start)
        except Exception as e:  # noqa: BLE001 - a refusal: documented or a problem
            category, problem = judge_refusal(e, text, lark_side, start=start)
            res.status = f"engine refuses: {category}"
            if problem:
                res.problems.append(Case(text, "", "refusal" if category == "undocumented" else "loops", problem,
                                         start))
            res.seconds, res.cpu = time.perf_counter() - t0, time.process_time() - c0
            return res
        engines.append(EngineSide(compiled, tokenizers.encode[tok_name], tokenizers.byte_ids[tok_name]))
    sampler = SentenceSampler(lark_side.parser)
    texts: list[str] = []
    alphabet = "".join(sorted(set(text) - {"\n"}))
    for _ in range(config.sentences):
        s = sampler.sentence(rng)
        if s is None:
            continue
        texts.append(s)
        texts.extend(edits(s, rng, config.edits, alphabet + alphabet.upper() + " \n\t"))
    texts.extend(walk_texts(engines[0].compiled, rng, config.walks, config.walk_tokens))
    texts.append("")
    for t in dict.fromkeys(texts):
        for engine in engines:
            try:
                out = check_case(lark_side, engine, t)
            except Exception as e:  # noqa: BLE001 - the engine broke on a text
                res.problems.append(Case(text, t, "crash", f"{type(e).__name__}: {e}", start))
                continue
            res.verdicts[out.lark] += 1
            for p in out.problems:
                res.problems.append(Case(text, t, p.split(":", 1)[0], p, start))
        res.cases += 1
    res.seconds, res.cpu = time.perf_counter() - t0, time.process_time() - c0
    return res


def still_disagrees(case: Case, tokenizers: Tokenizers, tok_name: str) -> callable:
    """The predicate :func:`minimise` shrinks a case with: the same kind of problem on (grammar, text)."""

    def fails(grammar: str, text: str) -> bool:
        lark_side = LarkSide(grammar, start=case.start)
        if case.kind in ("refusal", "loops"):
            try:
                compile_engine(grammar, tokenizers.vocab[tok_name], start=case.start)
            except Exception as e:  # noqa: BLE001
                return judge_refusal(e, grammar, lark_side, start=case.start)[1] is not None
            return False
        compiled = compile_engine(grammar, tokenizers.vocab[tok_name], start=case.start)
        out = check_case(lark_side, EngineSide(compiled, tokenizers.encode[tok_name], tokenizers.byte_ids[tok_name]),
                         text)
        return any(p.startswith(case.kind) for p in out.problems)

    return fails


# ---------------------------------------------------------------------------------------- the study
_WORKER: dict = {}


def _init_worker(names: list[str], config: FuzzConfig) -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _WORKER["tok"] = Tokenizers(names)
    _WORKER["config"] = config


def _run_one(job: tuple[int, int]) -> tuple[GrammarResult, int]:
    seed, index = job
    res = fuzz_grammar(seed, index, _WORKER["tok"], _WORKER["config"])
    if res.problems and _WORKER["config"].minimise:
        first = res.problems[0]
        try:
            g, t = minimise(first.grammar, first.text, still_disagrees(first, _WORKER["tok"], res.tokenizer))
            res.problems[0] = Case(g, t, first.kind, first.detail + " (minimised)", first.start)
        except Exception:  # noqa: BLE001 - keep the case as found
            pass
    return res, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def add_arguments(parser) -> None:
    parser.add_argument("--grammars", type=int, default=6000, help="grammars to generate")
    parser.add_argument("--first", type=int, default=0, help="index of the first grammar")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokenizers", default="gpt2,qwen2.5", help="BPE tokenizers, one per grammar in turn")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--sentences", type=int, default=FuzzConfig.sentences)
    parser.add_argument("--edits", type=int, default=FuzzConfig.edits)
    parser.add_argument("--walks", type=int, default=FuzzConfig.walks)
    parser.add_argument("--eager-every", type=int, default=FuzzConfig.eager_every)
    parser.add_argument("--no-minimise", action="store_true")
    parser.add_argument("--out-dir", default=str(REPO / "docs" / "results"))
    parser.add_argument("--report-name", default="grammar_fuzz")


def run(args) -> int:
    from tqdm.auto import tqdm

    config = FuzzConfig(sentences=args.sentences, edits=args.edits, walks=args.walks, eager_every=args.eager_every,
                        minimise=not args.no_minimise)
    names = args.tokenizers.split(",")
    jobs = [(args.seed, k) for k in range(args.first, args.first + args.grammars)]
    t0 = time.perf_counter()
    results: list[GrammarResult] = []
    peak_kb = 0
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(args.jobs, initializer=_init_worker, initargs=(names, config)) as pool:
        bar = tqdm(total=len(jobs), unit="grammar", desc="grammar fuzz", mininterval=1.0)
        for res, rss in pool.imap_unordered(_run_one, jobs, chunksize=4):
            results.append(res)
            peak_kb = max(peak_kb, rss)
            for p in res.problems:  # at once, not only in the report: a long run shows what it finds
                bar.write(f"grammar {res.index} ({res.origin}): {p.kind}: {p.detail}\n{p.grammar}\ntext: {p.text!r}")
            bar.update(1)
            bar.set_postfix(cases=sum(r.cases for r in results), problems=sum(len(r.problems) for r in results))
        bar.close()
    wall = time.perf_counter() - t0
    results.sort(key=lambda r: r.index)
    body, problems = report_body(results, wall, peak_kb, args)
    cmd = shlex.join(["python", "-m", "analysis", "grammar-fuzz", "--grammars", str(args.grammars), "--seed",
                      str(args.seed), "--tokenizers", args.tokenizers, "--jobs", str(args.jobs)]
                     + (["--first", str(args.first)] if args.first else []))
    path = write_report(args.out_dir, args.report_name, "Grammar fuzzer: the engine against lark", body, cmd)
    print(body.split("\n\n## ")[0])
    print(f"wrote {path}")
    return 0 if not problems else 1


def report_body(results: list[GrammarResult], wall: float, peak_kb: int, args) -> tuple[str, list[Case]]:
    status = Counter(r.status for r in results)
    by_origin = Counter(r.origin.split(" of ")[0] for r in results)
    fuzzed = [r for r in results if r.status == "fuzzed"]
    cases = sum(r.cases for r in results)
    verdicts = sum((r.verdicts for r in results), Counter())
    problems = [p for r in results for p in r.problems]
    kinds = Counter(p.kind for p in problems)
    cpu = sum(r.cpu for r in results)
    per_tok = Counter()
    for r in fuzzed:
        per_tok[r.tokenizer] += r.cases
    rows = [["grammars generated", f"{len(results):,} ({by_origin['random']:,} random, "
             f"{by_origin['mutation']:,} mutations of the shipped grammars)"],
            ["lark builds, the engine compiles: fuzzed", f"{len(fuzzed):,}"],
            ["(grammar, text) cases", f"{cases:,} (" + ", ".join(f"{n}: {c:,}" for n, c in per_tok.items()) + ")"],
            ["lark's verdicts (counted per compile: lazy, and eager for every "
             f"{args.eager_every}th grammar)", ", ".join(f"{k} {v:,}" for k, v in verdicts.most_common())],
            ["disagreements", f"{len(problems):,}" + (f" ({dict(kinds)})" if problems else "")],
            ["wall time", f"{wall / 60:.1f} min on {args.jobs} worker processes ({cpu / 60:.1f} CPU min in them: "
             f"{1e3 * cpu / max(cases, 1):.1f} CPU ms per case)"],
            ["peak RSS of a worker process", f"{peak_kb / 1024:.0f} MiB"]]
    refusals = [[k, v] for k, v in sorted(status.items()) if k != "fuzzed"]
    body = (
        "Each grammar is random (`analysis/grammar_sampler.py`: rules with `?`/`!`/`_`, aliases, templates, rule "
        "and terminal priorities, `%ignore`, `%declare _INDENT _DEDENT` with lark's PythonIndenter, `\"...\"i`, "
        "regex terminals with classes, quantifiers (greedy and lazy), alternation, groups and flags, terminals "
        "built from terminals and `\"a\"..\"f\"` ranges, `~` repeats, empty alternatives, recursion, EBNF, "
        "`%import common`; a share of them written for lark's grammar syntax, as the reader's own test uses them) "
        "or one to three text-level mutations of a shipped grammar (`grammars/`: "
        f"{', '.join(dict.fromkeys(SHIPPED))}). lark 1.3.1 builds it with `parser=\"lalr\", lexer=\"basic\"` "
        "(the engine's "
        "semantics, docs/engine_semantics.md); the engine compiles it lazily (rows on first use), and every "
        f"{args.eager_every}th grammar eagerly too (the streamlined store). Texts: up to {args.sentences} "
        f"sampled from lark's rules (each terminal's text from its regex, checked with `re.fullmatch`), "
        f"{args.edits} single-character edits of each, {args.walks} random walks over the engine's masks, and "
        "the empty text. The engine compiles under tighter limits than its defaults ("
        + ", ".join(f"`{k}={v:,}`" for k, v in FUZZ_LIMITS_FIELDS.items())
        + "): a grammar past one is refused as the docs say (\"resource limit\"). Each text is decided by lark "
        "and by the engine teacher-forced with the grammar's BPE tokenizer (GPT-2 and Qwen2.5 in turn) and byte by byte, EOS at the end; where the engine refuses a "
        "token or decides the end, its mask must say the same. A grammar lark refuses must be refused by the "
        "engine; a grammar the engine refuses must be refused for a reason docs/engine_semantics.md gives "
        "(\"What the engine refuses\"), and a refusal because the parser would loop must make lark's own "
        "parser loop on the same terminals. \"no verdict\": lark's lexer ran past its time limit (1 s) on a regex "
        "that backtracks exponentially (its parser did not loop), or its parser ran out of Python stack; such texts "
        "say nothing about the language and are not counted as agreements.\n\n"
        + markdown_table(["", ""], rows)
        + "\n\n## Grammars not fuzzed\n\n" + markdown_table(["status", "grammars"], refusals)
        + "\n\n## Disagreements\n\n"
        + ("\n\n".join(f"- grammar {p.kind}: {p.detail}\n\n```\n{p.grammar}\n```\n\ntext: `{p.text!r}`"
                       for p in problems[:40]) if problems else "None.")
    )
    return body, problems
