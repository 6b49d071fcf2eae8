"""The official JSON Schema Test Suite (json-schema-org/JSON-Schema-Test-Suite, not shipped here: clone it and
pass its folder) through the JSON Schema front end: a suite written by others, case by case.

Each test group is a schema and instances labelled valid or invalid by the specification's authors. A schema
is compiled as `compile_json_schema` compiles it (the draft of its folder when the root
names none, as a validator for that draft reads it; whitespace ``flexible``), for a vocabulary of the 256
bytes: what is checked is the grammar's language, independent of a tokenizer (the token-level masks are
checked against it by the rest of the suite). Each instance is written with ``json.dumps`` and fed byte by
byte; it must be accepted to the end (EOS allowed) exactly when it is labelled valid.

A valid instance that is rejected is a false rejection; when some order of its objects' keys is accepted,
the rejection is the property order this front end fixes (declared properties in schema order, as
llguidance and xgrammar do), counted apart. An invalid instance accepted is a false admission. Where
``jsonschema`` (the reference this front end follows: its validator for the draft, with its format checker,
as MaskBench's labels were made) gives the same verdict as ours against the suite's label, the outcome is
counted as "as jsonschema" (formats asserted where the specification makes them annotations, Python's
regex classes where it asks for ECMA-262's, ...), apart from the disagreements with both. A schema the front
end refuses is counted by the keyword the refusal names. The optional tests (``optional/``: formats and edge
cases the specification lets a validator skip) are a section of their own.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

from .report import markdown_table, write_report

DESCRIPTION = "the official JSON Schema Test Suite through the JSON Schema front end (exactness, refusals)"
REPO = Path(__file__).resolve().parent.parent
DRAFTS = {  # folder -> the $schema a root without one is read as
    "draft4": "http://json-schema.org/draft-04/schema#",
    "draft6": "http://json-schema.org/draft-06/schema#",
    "draft7": "http://json-schema.org/draft-07/schema#",
    "draft2019-09": "https://json-schema.org/draft/2019-09/schema",
    "draft2020-12": "https://json-schema.org/draft/2020-12/schema",
}
MAX_ORDERS = 200  # key orders tried before a rejection is called an order rejection


def add_arguments(parser) -> None:
    parser.add_argument("--suite", required=True, help="a clone of github.com/json-schema-org/JSON-Schema-Test-Suite")
    parser.add_argument("--drafts", default="draft2020-12,draft7,draft4", help=f"of {', '.join(DRAFTS)}")
    parser.add_argument("--optional", action="store_true", help="also the optional/ tests (formats, edge cases)")
    parser.add_argument("--timeout", type=float, default=10.0, help="compile seconds per schema")
    parser.add_argument("--property-order", default="declared", choices=["declared", "any"],
                        help="the front end's property order (with any, no rejection is for the order)")
    parser.add_argument("--out-dir", default=str(REPO / "docs" / "results"))


def accepts(grammar, text: str) -> bool:
    """Whether `text` (UTF-8, byte by byte) is a whole value of `grammar`'s language."""
    from cad_outlines.engine.matcher import Matcher

    ids = list(text.encode("utf-8", "surrogatepass"))
    m = Matcher(grammar)
    if m.validate(ids) != len(ids):
        return False
    m.advance_many(ids)
    return m.is_accepting()


def key_orders(data, limit: int = MAX_ORDERS):
    """`data` with its objects' keys in other orders (up to `limit` variants, the given order first)."""
    def variants(x):
        if isinstance(x, dict):
            keys = list(x)
            inner = {k: list(itertools.islice(variants(v), 4)) for k, v in x.items()}
            for perm in itertools.islice(itertools.permutations(keys), 24):
                for choice in itertools.islice(itertools.product(*(inner[k] for k in perm)), 4):
                    yield dict(zip(perm, choice))
        elif isinstance(x, list):
            inner = [list(itertools.islice(variants(v), 4)) for v in x]
            yield from itertools.islice((list(c) for c in itertools.product(*inner)), 8)
        else:
            yield x

    return itertools.islice(variants(data), limit)


def jsonschema_verdict(schema, data) -> bool | None:
    """``jsonschema``'s verdict on `data` (its validator for the schema's draft, with its format checker);
    None where it cannot decide (an unresolvable reference, a schema it rejects)."""
    import jsonschema

    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        return cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(data)
    except Exception:  # noqa: BLE001 - any failure of the reference is "no verdict"
        return None


def check_group(group: dict, draft_uri: str, vocab, timeout: float, property_order: str = "declared") -> dict:
    """One test group: compiled or refused (the refusal's keyword), and each test's outcome."""
    from cad_outlines import compile_json_schema
    from cad_outlines.errors import CadOutlinesError
    from cad_outlines.limits import Limits

    schema = group["schema"]
    if isinstance(schema, dict) and "$schema" not in schema:
        schema = {"$schema": draft_uri, **schema}
    try:
        grammar = compile_json_schema(schema, vocab, cache=False, progress=False, whitespace="flexible",
                                      property_order=property_order, limits=Limits(max_compile_seconds=timeout))
    except CadOutlinesError as e:
        m = re.match(r"keyword (\S+):", str(e))
        return {"refused": m.group(1) if m else type(e).__name__, "why": str(e).splitlines()[0][:160]}
    out = []
    for test in group["tests"]:
        text = json.dumps(test["data"], ensure_ascii=False)
        got = accepts(grammar, text)
        kind = "ok" if got == test["valid"] else ("false admission" if got else "false rejection")
        if kind == "false rejection" and any(accepts(grammar, json.dumps(v, ensure_ascii=False))
                                             for v in key_orders(test["data"])):
            kind = "order"
        elif kind != "ok" and jsonschema_verdict(schema, test["data"]) == got:
            kind = "as jsonschema"
        out.append({"description": test["description"], "data": text[:120], "valid": test["valid"], "kind": kind})
    return {"tests": out}


def run(args) -> int:
    from tqdm import tqdm

    from cad_outlines.engine.vocabulary import Vocabulary

    suite = Path(args.suite) / "tests"
    vocab = Vocabulary.of_bytes()
    sections = []
    for draft in [d for d in args.drafts.split(",") if d]:
        folders = [("", suite / draft)] + ([("optional/", suite / draft / "optional")] if args.optional else [])
        for prefix, folder in folders:
            files = sorted(folder.glob("*.json")) + (sorted((folder / "format").glob("*.json")) if prefix else [])
            rows, refusals, wrong = [], Counter(), []
            totals = Counter()
            for f in tqdm(files, desc=f"{draft} {prefix or 'required'}", leave=False):
                per = Counter()
                for group in json.loads(f.read_text()):
                    res = check_group(group, DRAFTS[draft], vocab, args.timeout, args.property_order)
                    per["groups"] += 1
                    if "refused" in res:
                        per["refused"] += 1
                        per["tests refused"] += len(group["tests"])
                        refusals[res["refused"]] += 1
                        continue
                    for t in res["tests"]:
                        per["tests"] += 1
                        per[t["kind"]] += 1
                        if t["kind"] in ("false rejection", "false admission"):
                            wrong.append([f"{f.parent.name}/{f.name}" if prefix else f.name, group["description"],
                                          t["description"], f"`{t['data']}`", t["kind"]])
                totals.update(per)
                rows.append([f.name, per["groups"], per["refused"], per["tests"], per["ok"], per["order"],
                             per["as jsonschema"], per["false rejection"], per["false admission"]])
            head = (f"## {draft}, {'optional tests' if prefix else 'required tests'}\n\n"
                    f"{totals['groups']} groups, {totals['refused']} refused ({totals['tests refused']} tests); "
                    f"of {totals['tests']} tests checked: {totals['ok']} right, {totals['order']} rejected for the "
                    f"property order only, {totals['as jsonschema']} wrong as jsonschema is wrong, "
                    f"**{totals['false rejection']} false rejections, "
                    f"{totals['false admission']} false admissions**.\n\n")
            body = head + markdown_table(["file", "groups", "refused", "tests", "right", "order only",
                                          "as jsonschema", "false rej.", "false adm."], rows)
            if refusals:
                body += "\n\nRefused groups, by the keyword named: " + ", ".join(
                    f"`{k}` {n}" for k, n in refusals.most_common()) + "."
            if wrong:
                body += "\n\nEvery false rejection and admission:\n\n" + markdown_table(
                    ["file", "group", "test", "instance", "outcome"], wrong)
            sections.append(body)
    body = __doc__.split("\n\n", 1)[1].strip() + "\n\n" + "\n\n".join(sections)
    cmd = f"python -m analysis schema-test-suite --suite PATH --drafts {args.drafts}" + (
        " --optional" if args.optional else "")
    path = write_report(Path(args.out_dir), "schema_test_suite", "The JSON Schema Test Suite through the front end",
                        body, cmd)
    print(f"wrote {path}")
    return 0
