"""Oracle hunks: the minimal hunks that turn `before` into `after`, each widened with context lines
until its old lines are unique in the document.

1. A minimal line diff (Myers' O((N+M)D) algorithm after trimming the common head and tail): the
   fewest removed plus added lines; each maximal run of changes between equal lines is a *region*.
2. Each region becomes a hunk whose old lines are the region's removed lines plus the fewest context
   lines (before and after it, w = a + b in all) that make them occur exactly once in the whole
   document (ties: the fewest characters, then more context before). A hunk that would reach into
   the next region's changes takes that region in (the equal lines between them become context);
   one that can only be made unique by reaching back past the previous hunk merges with it.
3. A pure insertion needs no context where the format's empty hunk lands on it: at the end of the
   document for search/replace and udiff (``empty_old="end"``), at the cursor (right after the
   previous hunk, or at the start) for apply_patch (``empty_old="cursor"``).

Unique in the whole document is stricter than the applier asks (unique after the previous hunk): an
oracle hunk also applies under aider's first-match appliers.
"""

from __future__ import annotations

from collections.abc import Sequence

from .hunks import DocumentLines, Hunk, InexpressibleEditError, line_bodies

__all__ = ["diff_regions", "oracle_runs", "oracle_hunks"]

Region = tuple[int, int, int, int]  # before[i1:i2] is replaced by after[j1:j2]


def _myers(a: Sequence, b: Sequence) -> list[tuple[str, int, int]]:
    """A shortest edit script from `a` to `b`: ("=", i, j), ("-", i, _), ("+", _, j) steps in order."""
    n, m = len(a), len(b)
    v = {1: 0}
    trace = []
    for d in range(n + m + 1):
        trace.append(dict(v))
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[k - 1] < v[k + 1]):
                x = v[k + 1]
            else:
                x = v[k - 1] + 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x, y = x + 1, y + 1
            v[k] = x
            if x >= n and y >= m:
                return _backtrack(trace, n, m, d)
    raise AssertionError("unreachable: a script of n + m steps always exists")


def _backtrack(trace: list[dict[int, int]], n: int, m: int, dmax: int) -> list[tuple[str, int, int]]:
    steps: list[tuple[str, int, int]] = []
    x, y = n, m
    for d in range(dmax, 0, -1):
        v = trace[d]
        k = x - y
        prev_k = k + 1 if (k == -d or (k != d and v[k - 1] < v[k + 1])) else k - 1
        px = v[prev_k]
        py = px - prev_k
        while x > px and y > py:
            x, y = x - 1, y - 1
            steps.append(("=", x, y))
        if x == px:
            y -= 1
            steps.append(("+", x, y))
        else:
            x -= 1
            steps.append(("-", x, y))
    while x > 0 and y > 0:
        x, y = x - 1, y - 1
        steps.append(("=", x, y))
    steps.reverse()
    return steps


def diff_regions(a: Sequence, b: Sequence) -> list[Region]:
    """The change regions of a minimal line diff from `a` to `b`, in order."""
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < len(a) - head and tail < len(b) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    regions: list[Region] = []
    cur: list[int] | None = None
    x, y = head, head
    for op, i, j in _myers(a[head:len(a) - tail], b[head:len(b) - tail]):
        if op == "=":
            if cur is not None:
                regions.append(tuple(cur))
                cur = None
            x, y = head + i + 1, head + j + 1
            continue
        if cur is None:
            cur = [x, x, y, y]
        if op == "-":
            cur[1] = x = head + i + 1
        else:
            cur[3] = y = head + j + 1
    if cur is not None:
        regions.append(tuple(cur))
    return regions


def _widen(doc: DocumentLines, i1: int, i2: int, lo: int, next_start: int, empty_ok: bool
           ) -> tuple[int, int] | None:
    """The context (a, b) that makes before[i1-a:i2+b] unique in the document with i1 - a >= lo:
    fewest lines, then no reach into the next region (past `next_start`), then fewest characters,
    then more context before. None where no such context exists."""
    room_a, room_b = i1 - lo, doc.n - i2
    for w in range(room_a + room_b + 1):
        best = None
        for a in range(min(w, room_a), max(0, w - room_b) - 1, -1):
            b = w - a
            run = doc.bodies[i1 - a:i2 + b]
            if not run:
                ok = empty_ok
            else:
                ok = len(doc.occurrences(run, 0, 2)) == 1
            if ok:
                key = (i2 + b > next_start, sum(map(len, run)), -a)
                if best is None or key < best[0]:
                    best = (key, (a, b))
        if best is not None:
            return best[1]
    return None


def oracle_runs(before_units: Sequence[str], after_units: Sequence[str], *, empty_old: str | None
                ) -> list[list[tuple[str, str]]]:
    """The oracle hunks from `before_units` to `after_units` (line bodies, or for str_replace lines
    with their endings) as tagged lines (``" "``, ``"-"``, ``"+"``). `empty_old`: where a hunk with
    no old lines applies ("end", "cursor"), or None where the format has no such hunk (then the
    document must not be empty unless `after_units` is)."""
    doc = DocumentLines(before_units)
    a_units = list(after_units)
    regions = diff_regions(doc.bodies, a_units)
    n = doc.n
    groups: list[tuple[int, int, int, int, int, int]] = []  # (first region, last region, a, b, lo, x2)
    r = 0
    cursor = 0
    while r < len(regions):
        first = last = r
        while True:
            i1, i2 = regions[first][0], regions[last][1]
            next_start = regions[last + 1][0] if last + 1 < len(regions) else n
            pure_insertion = first == last and i1 == i2
            empty_ok = pure_insertion and (
                (empty_old == "end" and i1 == n and last == len(regions) - 1)
                or (empty_old == "cursor" and i1 == cursor))
            found = _widen(doc, i1, i2, cursor, next_start, empty_ok)
            if found is None:  # cannot be unique after the previous hunk: merge with it
                first, _, _, _, cursor, _ = groups.pop()
                continue
            a, b = found
            if i2 + b > next_start:
                last += 1
                continue
            break
        groups.append((first, last, a, b, cursor, i2 + b))
        cursor = i2 + b
        r = last + 1
    hunks = []
    for first, last, a, b, _, _ in groups:
        i1 = regions[first][0]
        lines = [(" ", u) for u in doc.bodies[i1 - a:i1]]
        for k in range(first, last + 1):
            ri1, ri2, rj1, rj2 = regions[k]
            if k > first:
                lines += [(" ", u) for u in doc.bodies[regions[k - 1][1]:ri1]]
            lines += [("-", u) for u in doc.bodies[ri1:ri2]] + [("+", u) for u in a_units[rj1:rj2]]
        i2 = regions[last][1]
        lines += [(" ", u) for u in doc.bodies[i2:i2 + b]]
        hunks.append(lines)
    return hunks


def oracle_hunks(before: str, after: str, *, empty_old: str) -> list[Hunk]:
    """The oracle hunks of a line format (line bodies; every written line ends with a newline, so
    the final newline of `before` stays as it is: an `after` that changes it raises
    :class:`InexpressibleEditError`)."""
    b_bodies, b_terminated = line_bodies(before)
    a_bodies, a_terminated = line_bodies(after)
    if after and a_terminated != b_terminated:
        raise InexpressibleEditError(
            "the edit changes whether the document ends with a newline, which a line format cannot write "
            f"(before {'ends' if b_terminated else 'does not end'} with one, after "
            f"{'does' if a_terminated else 'does not'}); use str_replace or copy")
    return [Hunk(lines) for lines in oracle_runs(b_bodies, a_bodies, empty_old=empty_old)]
