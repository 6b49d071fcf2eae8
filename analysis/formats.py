"""The edit formats in the edit studies (coverage, generator, serving): which ones a run takes
(``--formats``), each case's oracle program in each, and the names the reports give them.

``copy`` (Copy-as-Decode) is always in a study as its own methods; ``--formats`` picks the
diff-style formats that run beside it (:data:`FORMATS`: search/replace, unified diff,
apply_patch, str_replace), each constrained (grammar + document constraint) and unconstrained
(the same tokens decoded one at a time from the same plain prompt, then applied).
"""

from __future__ import annotations

from cad_outlines.edits.formats import EDIT_FORMATS, InexpressibleEditError, oracle_text

__all__ = ["FORMATS", "LABELS", "add_format_argument", "parse_formats", "format_programs", "format_argv", "free",
           "format_methods", "method_label"]

FORMATS: tuple[str, ...] = tuple(f for f in EDIT_FORMATS if f != "copy")
LABELS = {"copy": "CaD program", "search_replace": "search/replace", "udiff": "unified diff",
          "apply_patch": "apply_patch (V4A)", "str_replace": "str_replace (JSON)"}


def add_format_argument(parser, default: str = "all") -> None:
    parser.add_argument("--formats", default=default, metavar="NAME,...",
                        help=f"the edit formats run beside regeneration and Copy-as-Decode: 'all' ({', '.join(FORMATS)}), "
                             f"'none', or a comma-separated list (default {default})")


def parse_formats(text: str | None) -> list[str]:
    """``--formats``: 'all', 'none' (or empty), or names from :data:`FORMATS` -> the names, in
    :data:`FORMATS` order; an unknown name raises SystemExit naming it and the known ones."""
    words = [w.strip() for w in (text or "").split(",") if w.strip()]
    if words == ["all"]:
        return list(FORMATS)
    if words in ([], ["none"]):
        return []
    unknown = [w for w in words if w not in FORMATS]
    if unknown:
        raise SystemExit(f"--formats: unknown {', '.join(map(repr, unknown))} (known: {', '.join(FORMATS)}, all, none)")
    return [f for f in FORMATS if f in words]


def format_argv(formats: list[str], default: str = "all") -> list[str]:
    """``--formats`` for a reproduce line: nothing when it is the default."""
    spelled = "all" if formats == list(FORMATS) else ",".join(formats) or "none"
    return [] if spelled == default else ["--formats", spelled]


def format_programs(before: str, after: str, formats: list[str]) -> dict[str, str | None]:
    """Each format's oracle program text for the edit (what the model writes after the prompt's
    header), None where the format cannot write it (a line format and a change of the final newline)."""
    out: dict[str, str | None] = {}
    for name in formats:
        try:
            out[name] = oracle_text(before, after, name)
        except InexpressibleEditError:
            out[name] = None
    return out


def free(name: str) -> str:
    """The method name of format `name`'s unconstrained run (the constrained one is `name`)."""
    return f"{name}_free"


def format_methods(formats: list[str]) -> list[str]:
    """The study methods of `formats`: each constrained, then unconstrained."""
    return [m for f in formats for m in (f, free(f))]


def method_label(method: str, labels: dict[str, str]) -> str:
    """A method's name in a report: `labels`' for the study's own methods, a format's name and
    whether it ran constrained otherwise."""
    if method in labels:
        return labels[method]
    name = method.removesuffix("_free")
    return f"{LABELS[name]}, " + ("unconstrained" if method != name else "constrained")
