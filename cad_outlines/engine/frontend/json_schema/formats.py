"""String ``format``s as regular expressions, with the semantics of ``jsonschema``'s 2020-12 format
checker (with its optional checkers installed: ``rfc3339-validator``, ``rfc3986-validator``,
``isoduration``), which is what MaskBench's labels were made with.

Each regex is matched whole (``re.fullmatch``) against the decoded string:

- ``date``: ``YYYY-MM-DD`` (ASCII digits) that ``datetime.date.fromisoformat`` accepts: months
  01-12, days within the month, 29 February in leap years only, year 0000 refused;
- ``date-time``: RFC 3339 as ``rfc3339_validator`` checks the upper-cased string (so ``t`` and
  ``z`` may be lower case), the date as above, hours 00-23, seconds 00-59, optional fraction,
  ``Z`` or an offset; Python's ``$`` also lets one final line break through;
- ``time``: the part after ``T`` of a date-time (the checker prefixes ``1970-01-01T``);
- ``email`` and ``idn-email``: any string with an ``@`` (all the checker asks);
- ``ipv4``: four decimal octets 0-255 without leading zeros (``ipaddress.IPv4Address``);
- ``ipv6``: ``ipaddress.IPv6Address`` without a scope id: 1-4 hex digits per group, one ``::``
  standing for at least one group, an IPv4 address in the last 32 bits;
- ``uuid``: ``8-4-4-4-12`` hex digits (the checker's other spellings, ``{...}``, ``urn:uuid:``
  prefixes, are not admitted: a departure);
- ``uri``, ``uri-reference``: RFC 3986 as ``rfc3986_validator`` writes it;
- ``duration``: what ``isoduration.parse_duration`` parses and ends with a designator (the checker's
  test): ``[+-]P``, date designators ``Y M D W`` and, after ``T``, time designators ``H M S``, each
  at most once and in that order, each after a ``decimal.Decimal`` number (``,`` for ``.``, an
  exponent allowed); ``W`` only after zero values; the parser drops a number left before ``T`` when
  a designator or a ``,`` precedes it. A departure: exponents are limited to 5 digits (past about
  10**6 the checker raises ``decimal.Overflow`` instead of answering).

A format the checker does not know (``int32``, ``color``, ...) is an annotation and is ignored; one
it checks that has no exact regex here (``hostname``: its exact automaton, a length limit of 253 over
labels of at most 63, has 27,910 states, past the default ``max_dfa_states``; ``regex``,
``idn-hostname``, ``iri``, ``json-pointer``, ``uri-template``...) is refused with a
:class:`~cad_outlines.errors.SchemaError`.
"""

from __future__ import annotations

import functools

from ....errors import SchemaError

__all__ = ["FORMATS", "checked_format", "format_regex"]

_D = "[0-9]"
_LEAP = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
_YEAR = r"(?!0000)[0-9]{4}"
_MONTH_DAY = (r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
              r"|02-(?:0[1-9]|1[0-9]|2[0-8]))")
DATE = rf"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP}-02-29)"
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_H = "[0-9A-Fa-f]{1,4}"


def _ipv6(v4: str) -> str:
    """Every spelling of an IPv6 address: 8 groups, or k groups ``::`` m groups (k + m <= 7), and
    the same with an IPv4 address as the last two groups."""
    forms = [f"(?:{_H}:){{7}}{_H}", f"(?:{_H}:){{6}}{v4}"]
    for k in range(8):
        for m in range(8 - k):
            if k + m > 7:
                continue
            head = f"(?:{_H}:){{{k}}}" if k else ":"
            tail = f"(?::{_H}){{{m}}}" if m else ":"
            forms.append(head + tail)
            if k + m <= 5:
                mid = f"(?:{_H}:){{{m}}}" if m else ""
                forms.append((f"(?:{_H}:){{{k}}}:" if k else "::") + mid + v4)
    return "(?:" + "|".join(forms) + ")"


IPV6 = _ipv6(IPV4)
UUID = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"

# RFC 3986 (appendix A), as rfc3986_validator spells it (its IPv4 allows leading zeros)
_PCT = "%[0-9A-Fa-f]{2}"
_UNRES_SUB = r"a-zA-Z0-9_.~\-!$&'()*+,;="
_OCT3986 = "(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)"
_V4_3986 = rf"(?:{_OCT3986}\.){{3}}{_OCT3986}"
_AUTH = (rf"(?:(?:[{_UNRES_SUB}:]|{_PCT})*@)?"
         rf"(?:\[(?:{_ipv6(_V4_3986)}|v[0-9A-Fa-f]+\.[{_UNRES_SUB}:]+)\]|{_V4_3986}|(?:[{_UNRES_SUB}]|{_PCT})*)"
         r"(?::[0-9]*)?")
_PCHAR = rf"(?:[{_UNRES_SUB}:@]|{_PCT})"
_QUERY = rf"(?:[{_UNRES_SUB}:@/?]|{_PCT})*"
_TAIL = rf"(?:\?{_QUERY})?(?:#{_QUERY})?"
URI = (rf"[a-zA-Z][a-zA-Z0-9+.\-]*:(?://{_AUTH}(?:/{_PCHAR}*)*|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?"
       rf"|{_PCHAR}+(?:/{_PCHAR}*)*|){_TAIL}")
_RELATIVE = (rf"(?://{_AUTH}(?:/{_PCHAR}*)*|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?"
             rf"|(?:[{_UNRES_SUB}@]|{_PCT})+(?:/{_PCHAR}*)*|){_TAIL}")

# ISO 8601 durations as isoduration 20.11 parses them (see the module docstring)
_EXP = "(?:[eE][+-]?0*[0-9]{1,5})"
_DEC = rf"[+-]?(?:[0-9]+(?:[.,][0-9]*)?|[.,][0-9]+){_EXP}?"
_ZERO = rf"[+-]?(?:0+(?:[.,]0*)?|[.,]0+){_EXP}?"
_DROPPED = r"[+\-0-9.,eE]"
_DUR_DATE = (rf"(?:{_DEC}Y(?:{_DEC}M)?(?:{_DEC}D)?|{_DEC}M(?:{_DEC}D)?|{_DEC}D"
             rf"|(?:{_ZERO}Y)?(?:{_ZERO}M)?(?:{_ZERO}D)?{_DEC}W)")
_DUR_TIME = rf"(?:{_DEC}H(?:{_DEC}M)?(?:{_DEC}S)?|{_DEC}M(?:{_DEC}S)?|{_DEC}S)"
DURATION = rf"[+-]?P(?:{_DUR_DATE}(?:{_DROPPED}*T{_DUR_TIME})?|(?:{_DROPPED}*,{_DROPPED}*)?T{_DUR_TIME})"

FORMATS = {
    "date": DATE,
    "date-time": rf"{DATE}[Tt]{_TIME}\n?",
    "time": rf"{_TIME}\n?",
    "email": r"[\s\S]*@[\s\S]*",
    "idn-email": r"[\s\S]*@[\s\S]*",
    "ipv4": IPV4,
    "ipv6": IPV6,
    "uuid": UUID,
    "uri": rf"{URI}\n?",
    "uri-reference": rf"(?:{URI}|{_RELATIVE})\n?",
    "duration": DURATION,
}
# checked by jsonschema's 2020-12 format checker (with its optional dependencies) but not here
_REFUSED = {"hostname", "idn-hostname", "regex", "iri", "iri-reference", "json-pointer",
            "relative-json-pointer", "uri-template"}


def checked_format(name: str, pointer: str) -> str | None:
    """The format to enforce for ``"format": name``: `name` itself, or None for an annotation (a
    format no checker knows); raises :class:`SchemaError` for a checked format without a regex."""
    if name in FORMATS:
        return name
    if name in _REFUSED:
        raise SchemaError("format", pointer, f"format {name!r} is checked by JSON Schema validators but has no "
                          "exact automaton here")
    return None


@functools.cache
def format_regex(name: str) -> str:
    return FORMATS[name]
