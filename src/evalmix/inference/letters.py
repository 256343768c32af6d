"""Compact letter display of all pairwise comparisons, as maximal cliques.

Two models share a letter if and only if their difference is not significant. Piepho's
(2004) insert-and-absorb algorithm (start with one letter for all; for each significant
pair split every letter holding both; drop letters nested in another) ends with exactly
the maximal cliques of the graph whose edges are the *non*-significant pairs: every
maximal clique stays inside some letter through each split, and the letters left are
cliques none of which contains another. :func:`compact_letters` computes those cliques
directly, once, with the Bron-Kerbosch algorithm with Tomita pivoting (Tomita, Tanaka &
Takahashi 2006) on bitsets (one Python integer per model), instead of splitting K-wide
boolean letter arrays pair by pair (letters x letters x models per split: 7.6 GB and
341 s at 199 models, issue 37). Its time grows with the number of cliques, not with the
number of significant pairs.

The letters are the same as insert-and-absorb's (Piepho's algorithm without its optional
"sweep" of redundant letters, as in R's ``multcompView::multcompLetters`` and in evalmix
since its first leaderboard) and are named as ``multcompLetters`` names them: in the
lexicographic order of their members' ranks (by their best model, then their second
best, ...). evalmix's insert-and-absorb ordered letters with the same best model largest
first, then in the order its splits happened to make them.

The number of maximal cliques can grow fast on boards where significance is not ordered
by the estimates; beyond ``max_letters`` (default :data:`MAX_LETTERS`, every one- and
two-character letter name) the search stops and :func:`compact_letters` returns None: the
rank ranges then carry the comparisons (the leaderboard says so in its note).

networkx has ``find_cliques`` (the same pivoting algorithm), but it is not a dependency
of evalmix; on bitsets the search is about as short as the code calling it would be.

References
----------
Piepho, H.-P. (2004). An algorithm for a letter-based representation of all-pairwise
comparisons. Journal of Computational and Graphical Statistics 13, 456-466.
doi:10.1198/1061860043515
Tomita, E., Tanaka, A. & Takahashi, H. (2006). The worst-case time complexity for
generating all maximal cliques and computational experiments. Theoretical Computer
Science 363, 28-42. doi:10.1016/j.tcs.2006.06.015
"""

from __future__ import annotations

from string import ascii_letters

import numpy as np

from evalmix.errors import InvalidOptionError, check_count

__all__ = ["compact_letters", "maximal_cliques", "check_max_letters", "MAX_LETTERS"]

#: Every one- and two-character letter name (52 + 52 x 52); above it no letters.
MAX_LETTERS = len(ascii_letters) * (len(ascii_letters) + 1)


def check_max_letters(value: object) -> int:
    """``value`` as a letter cap: an integer from 1 to :data:`MAX_LETTERS`."""
    cap = check_count("max_letters", value)
    if cap > MAX_LETTERS:
        raise InvalidOptionError(f"max_letters is at most {MAX_LETTERS} (every one- and "
                                 f"two-character letter name), got {cap}")
    return cap


def _letter(n: int) -> str:
    if n < len(ascii_letters):
        return ascii_letters[n]
    return f"{ascii_letters[n // len(ascii_letters) - 1]}{ascii_letters[n % len(ascii_letters)]}"


def _members(s: int, nbytes: int) -> np.ndarray:
    """Indices of the set bits of ``s`` (``nbytes`` bytes), lowest first."""
    raw = np.frombuffer(s.to_bytes(nbytes, "little"), dtype=np.uint8)
    return np.flatnonzero(np.unpackbits(raw, bitorder="little"))


def maximal_cliques(same: np.ndarray, *, order: np.ndarray | None = None,
                    limit: int | None = None) -> list[int] | None:
    """All maximal cliques of a graph, as bitsets (bit ``m`` set: vertex ``m`` is in it).

    Bron-Kerbosch with Tomita pivoting, iterative (no recursion limit), with the outer
    level over the vertices in ``order`` (as Eppstein, Loffler & Strash 2010 do with a
    degeneracy order): vertex ``v`` starts the cliques whose first vertex in ``order`` it
    is, so its search sees only its neighbours. Sets are Python integers (one bit per
    vertex); at each step the neighbours in ``P`` of every vertex of ``P`` and ``X`` are
    counted at once (``numpy.bitwise_count`` on the packed adjacency), which gives the
    pivot and says whether ``P`` is already a clique (then ``R | P`` is the one candidate
    of that branch, reported unless a vertex of ``X`` is joined to all of ``P``).

    Parameters
    ----------
    same : (K, K) bool array
        Symmetric adjacency (the diagonal is ignored).
    order : (K,) int array, optional
        Vertex order of the outer level (default: by index).
    limit : int, optional
        Stop and return None once more than ``limit`` cliques are found.

    Returns
    -------
    list of int or None
    """
    adj = np.asarray(same, dtype=bool)
    k = adj.shape[0]
    nbytes = 8 * max(1, -(-k // 64))
    packed = np.zeros((k, nbytes), dtype=np.uint8)
    packed[:, :-(-k // 8)] = np.packbits(adj & ~np.eye(k, dtype=bool), axis=1,
                                         bitorder="little")
    words = packed.view(np.uint64)  # (K, words): row m is the neighbours of m
    nbr = [int.from_bytes(row.tobytes(), "little") for row in packed]

    out: list[int] = []
    later = (1 << k) - 1
    for v in (range(k) if order is None else (int(m) for m in order)):
        later &= ~(1 << v)
        stack = [(1 << v, nbr[v] & later, nbr[v] & ~later)]
        while stack:
            r, p, x = stack.pop()
            in_p = _members(p, nbytes)
            both = np.concatenate([in_p, _members(x, nbytes)])
            p_words = np.frombuffer(p.to_bytes(nbytes, "little"), dtype=np.uint64)
            degree = np.bitwise_count(words[both] & p_words).sum(axis=1)  # within P
            n = in_p.size
            if (degree[:n] == n - 1).all():  # P is a clique
                if not (degree[n:] == n).any():  # and no vertex of X extends it
                    out.append(r | p)
                    if limit is not None and len(out) > limit:
                        return None
                continue
            u = int(both[np.argmax(degree)])  # pivot: most neighbours in P
            for w in _members(p & ~nbr[u], nbytes).tolist():
                bit = 1 << w
                stack.append((r | bit, p & nbr[w], x & nbr[w]))
                p &= ~bit
                x |= bit
    return out


def compact_letters(order: np.ndarray, different: np.ndarray, *,
                    max_letters: int = MAX_LETTERS) -> list[str] | None:
    """Compact letter display of all pairwise comparisons (Piepho 2004).

    The letters are the maximal cliques of the non-significant pairs (see the module
    docstring), named ``a, b, ...`` in the lexicographic order of their members'
    positions in ``order`` (by their best model, then their second best, ...), as R's
    ``multcompView::multcompLetters`` names them for models given in that order.

    Parameters
    ----------
    order : (K,) int array
        Models from best to worst (letters ``a, b, ...`` follow it).
    different : (K, K) bool array
        The pair's difference is significant (``different | different.T`` is used).
    max_letters : int
        Above this many letters return None (no display).

    Returns
    -------
    list of str or None
        The letters of each model (index = model). With more than 52 letters, letters
        are two characters and separated by ``.``. None above ``max_letters``.

    Examples
    --------
    >>> d = np.zeros((3, 3), dtype=bool)
    >>> d[0, 2] = d[2, 0] = True   # only the best and the worst differ
    >>> compact_letters(np.arange(3), d)
    ['a', 'ab', 'b']

    References
    ----------
    Piepho (2004), doi:10.1198/1061860043515.
    """
    diff = np.asarray(different, dtype=bool)
    k = diff.shape[0]
    if diff.shape != (k, k):
        raise InvalidOptionError(f"different must be a square matrix, got shape {diff.shape}")
    max_letters = check_max_letters(max_letters)
    cliques = maximal_cliques(~(diff | diff.T), order=order, limit=max_letters)
    if cliques is None:
        return None
    rank_of = np.empty(k, dtype=np.int64)
    rank_of[np.asarray(order, dtype=np.int64)] = np.arange(k)
    nbytes = -(-k // 8)
    groups = [np.sort(rank_of[_members(c, nbytes)]).tolist() for c in cliques]
    groups.sort()  # by best member, then second best, ... (multcompLetters' sortCols)
    names: list[list[str]] = [[] for _ in range(k)]
    for n, ranks in enumerate(groups):
        name = _letter(n)
        for r in ranks:
            names[int(order[r])].append(name)
    sep = "" if len(groups) <= len(ascii_letters) else "."
    return [sep.join(x) for x in names]
