"""Which real JSON Schemas the front end compiles, over whole corpora: every MaskBench schema (and, with
``--jsb-data``, every JSONSchemaBench schema), compiled as `compile_json_schema` compiles
it (whitespace ``flexible``) for a vocabulary of the 256 bytes (what is measured is the schema front end and
its terminals, not a tokenizer's walks), each under a compile budget (``--timeout`` seconds). A schema is
compiled or refused; a refusal is counted by the keyword its error names (a limit by the limit's name), with
one example each. With ``--instances``, every MaskBench instance of a compiled schema is teacher-forced through
the grammar byte by byte (``json.dumps`` without indent, as the ``maskbench`` study writes it): a valid
instance rejected or an invalid one admitted is counted and listed. The per-engine comparison on samples,
with a real tokenizer's masks, is the ``maskbench`` study.
"""

from __future__ import annotations

import json
import re
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path

from .report import markdown_table, write_report

DESCRIPTION = "JSON Schema front end: which schemas of whole corpora compile, and why the others are refused"
REPO = Path(__file__).resolve().parent.parent


def add_arguments(parser) -> None:
    parser.add_argument("--jsb", required=True, help="a clone of github.com/guidance-ai/jsonschemabench")
    parser.add_argument("--jsb-data", action="store_true", help="also JSONSchemaBench's data/<category>/ schemas")
    parser.add_argument("--timeout", type=float, default=3.0, help="compile seconds per schema")
    parser.add_argument("--property-order", default="declared", choices=["declared", "any"],
                        help="compile_json_schema's property_order (MaskBench's valid instances keep their generated "
                             "key order where llguidance refuses the schema: 'any' for --instances)")
    parser.add_argument("--instances", action="store_true",
                        help="teacher-force MaskBench's instances through each compiled schema, byte by byte")
    parser.add_argument("--out-dir", default=str(REPO / "docs" / "results"))


def _reason(error: Exception) -> str:
    text = str(error)
    m = re.match(r"keyword (\S+):", text)
    if m:
        return m.group(1)
    m = re.search(r"(max_\w+|min_\w+) exceeded", text)
    return m.group(1) if m else type(error).__name__


def _accepts(grammar, text: str) -> bool | None:
    """Whether the grammar (compiled for :meth:`Vocabulary.of_bytes`) admits `text` whole; None where a
    decode-time limit stops the matcher or the text has no UTF-8 form (a lone surrogate)."""
    from cad_outlines.engine.matcher import InvalidTokenError, Matcher
    from cad_outlines.errors import MatcherLimitError

    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    m = Matcher(grammar)
    try:
        m.advance_many(list(data))
        return m.is_accepting()
    except InvalidTokenError:
        return False
    except MatcherLimitError:
        return None


def run(args) -> int:
    from tqdm import tqdm

    from cad_outlines import compile_json_schema
    from cad_outlines.engine.frontend.json_schema import SchemaOrderWarning
    from cad_outlines.errors import CadOutlinesError
    from cad_outlines.limits import Limits

    from .maskbench import _category
    from cad_outlines.engine.vocabulary import Vocabulary

    root = Path(args.jsb)
    corpora = [("MaskBench", sorted((root / "maskbench" / "data").glob("*.json")), True)]
    if args.jsb_data:
        corpora.append(("JSONSchemaBench", sorted((root / "data").glob("*/*.json")), False))
    vocab = Vocabulary.of_bytes()
    sections = []
    started = time.perf_counter()
    for corpus, files, wrapped in corpora:
        per_cat: dict[str, Counter] = defaultdict(Counter)
        reasons: Counter = Counter()
        example: dict[str, str] = {}
        wrong: list[str] = []
        for f in tqdm(files, desc=corpus, leave=False):
            cat = _category(f, wrapped)
            loaded = json.loads(f.read_text())
            schema = loaded["schema"] if wrapped else loaded
            per_cat[cat]["schemas"] += 1
            try:
                with warnings.catch_warnings(record=True) as warned:
                    warnings.simplefilter("always", SchemaOrderWarning)
                    g = compile_json_schema(schema, vocab, cache=False, progress=False, whitespace="flexible",
                                            property_order=args.property_order,
                                            limits=Limits(max_compile_seconds=args.timeout))
                per_cat[cat]["compiled"] += 1
                per_cat[cat]["declared order"] += any(issubclass(w.category, SchemaOrderWarning) for w in warned)
                for i, test in enumerate(loaded.get("tests", []) if wrapped and args.instances else []):
                    valid = bool(test["valid"])
                    got = _accepts(g, json.dumps(test["data"], indent=None, ensure_ascii=False))
                    per_cat[cat]["valid" if valid else "invalid"] += 1
                    if got is None:
                        per_cat[cat]["unchecked"] += 1
                    elif got != valid:
                        per_cat[cat]["false rej." if valid else "false adm."] += 1
                        wrong.append(f"{f.name} instance {i}: {'valid, rejected' if valid else 'invalid, admitted'}")
            except CadOutlinesError as e:
                why = _reason(e)
                reasons[why] += 1
                example.setdefault(why, f"{f.name}: {str(e).splitlines()[0][:160]}")
            except Exception as e:  # noqa: BLE001 - not a refusal: a bug of the front end, counted and shown
                why = f"crash: {type(e).__name__}"
                reasons[why] += 1
                example.setdefault(why, f"{f.name}: {str(e).splitlines()[0][:160] if str(e) else ''}")
        total = sum((c for c in per_cat.values()), Counter())
        rows = [[cat, c["schemas"], c["compiled"], f"{100 * c['compiled'] / c['schemas']:.1f}%"]
                for cat, c in sorted(per_cat.items())]
        rows.append(["all", total["schemas"], total["compiled"], f"{100 * total['compiled'] / total['schemas']:.1f}%"])
        body = (f"## {corpus}: {total['compiled']:,} of {total['schemas']:,} schemas compile "
                f"({100 * total['compiled'] / total['schemas']:.1f}%)\n\n"
                + markdown_table(["category", "schemas", "compiled", "share"], rows)
                + "\n\nRefusals, by what the error names (one example each):\n\n"
                + markdown_table(["reason", "schemas", "example"],
                                 [[f"`{k}`", n, example[k].replace("|", "\\|")] for k, n in reasons.most_common()]))
        if wrapped and args.instances:
            cols = ["compiled", "declared order", "valid", "false rej.", "invalid", "false adm.", "unchecked"]
            counts = [[cat] + [c[k] for k in cols] for cat, c in sorted(per_cat.items())]
            counts.append(["all"] + [total[k] for k in cols])
            body += (f"\n\n### {corpus}: instances of the compiled schemas, teacher-forced (property_order="
                     f"{args.property_order!r})\n\n"
                     + markdown_table(["category", "schemas compiled", "kept declared order", "valid", "false rej.",
                                       "invalid", "false adm.", "unchecked"], counts)
                     + "\n\nKept declared order: an object whose any-order states are over the budget keeps its "
                     "declared order (`SchemaOrderWarning`). Unchecked: a decode-time limit stopped the matcher, or "
                     "the text has no UTF-8 form."
                     + ("\n\nWrong verdicts:\n\n" + "\n".join(f"- {w}" for w in wrong[:40])
                        + (f"\n- ... {len(wrong) - 40} more" if len(wrong) > 40 else "") if wrong else ""))
        sections.append(body)
    minutes = (time.perf_counter() - started) / 60
    intro = __doc__.split("\n\n", 1)[0].strip().replace("``", "`")
    body = (intro + f" {args.timeout:g} s a schema; {minutes:.1f} min in all.\n\n"
            + "\n\n".join(sections))
    cmd = (f"python -m analysis schema-coverage --jsb PATH --timeout {args.timeout:g}"
           + (" --jsb-data" if args.jsb_data else "")
           + (f" --property-order {args.property_order}" if args.property_order != "declared" else "")
           + (" --instances" if args.instances else ""))
    path = write_report(Path(args.out_dir), "schema_coverage", "Which real JSON Schemas compile", body, cmd)
    print(f"wrote {path}")
    return 0
