"""A refusal's advice to try another scope, checked before the user reads it.

Patch's refusals point at the scope that usually takes a loop it cannot (a model called twice
an iteration: "try --scope full_iteration"). Where that scope refuses the same loop too, the
advice sends the user round in a circle: a GAN trainer's fwd_bwd said to try full_iteration,
whose refusal said to try fwd_bwd. Here each scope a refusal names is tried on the same
script; a hint to one that refuses is taken out, and its own reason is said instead.
"""

from __future__ import annotations

import re
from typing import Callable, Optional

# "try --scope full_iteration", "try --scope full_iteration or submodule", "use fwd_bwd" where a
# clause ends after it ("(use fwd_bwd: ...)", "; use fwd_bwd, which ..."): never "because" or
# "reuse", nor "use forward hooks" quoted from a script
HINT = re.compile(r"\btry --scope (\w+)(?: or (\w+))?\b|\buse (\w+)(?=[:),;]|$)")


def checked_hints(message: str, scope: str, scopes: tuple, refusal_of: Callable[[str], Optional[str]]) -> str:
    """``message``, ``scope``'s refusal, with each hint to a scope of ``scopes`` that
    ``refusal_of`` (a scope -> its refusal's reason, None where it applies) finds refused too
    taken out, and those reasons added at its end, less their own hints to ``scope`` or to
    another scope that refuses. Unchanged where every hinted scope applies."""
    reasons: dict = {scope: message}   # the refusal being checked: never tried again

    def refused(other: str) -> bool:
        if other not in reasons:
            reasons[other] = refusal_of(other)
        return reasons[other] is not None

    hinted = [other for match in HINT.finditer(message) for other in _named(match, scopes)]
    gone = tuple(dict.fromkeys(other for other in hinted if refused(other)))
    if not gone:
        return message
    said = []
    for other in gone:
        why = reasons[other]
        # its hints back to ``scope`` (seeded in ``reasons``) or on to another refusing scope
        circular = tuple(o for m in HINT.finditer(why) for o in _named(m, scopes) if refused(o))
        said.append(f"; {other} does not apply either: {without_hints_to(why, circular, scopes)}")
    return without_hints_to(message, gone, scopes) + "".join(said)


def without_hints_to(message: str, removed: tuple, scopes: tuple) -> str:
    """``message`` without its hints to ``removed``: "try --scope a or b" becomes "try --scope
    b" where only a is among them (b one of ``scopes``), a hint to them alone is taken out with
    its clause."""
    # from the last hint back, so that the earlier ones' positions hold
    for match in reversed(list(HINT.finditer(message))):
        named = _named(match, scopes)
        if not any(scope in removed for scope in named):
            continue
        left = [scope for scope in named if scope not in removed]
        if left:
            message = message[:match.start()] + f"try --scope {left[0]}" + message[match.end():]
        else:
            message = _without(message, match)
    return message


def _named(match, scopes: tuple) -> list:
    return [scope for scope in match.groups() if scope and scope in scopes]


def _without(message: str, match) -> str:
    """``message`` without the hint ``match``: its own parenthesis ("(try --scope x)", "(use x:
    ...)"), its clause within one (", or try --scope x)") or after a semicolon ("; use x, which
    copies them"), each to where it ends at its own depth of parentheses."""
    start, end = match.start(), match.end()
    if message[:start].endswith("("):
        close = _clause_end(message, end, semicolons=False)
        if close < len(message):
            return message[:start - 1].rstrip(" ") + message[close + 1:]
    for joint in (", or ", " or ", "; ", ", "):
        if message[:start].endswith(joint):
            return message[:start - len(joint)] + message[_clause_end(message, end):]
    return message[:start].rstrip(" ,;:") + message[_clause_end(message, end):]


def _clause_end(message: str, at: int, semicolons: bool = True) -> int:
    """Where the clause that goes on at ``at`` ends: the ")" closing the parenthesis it is in, or
    (``semicolons``) a ";" or a sentence's ". " outside any parenthesis it opens; the message's
    end otherwise."""
    depth = 0
    for index in range(at, len(message)):
        char = message[index]
        if char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                return index
            depth -= 1
        elif depth == 0 and semicolons and (char == ";" or message.startswith(". ", index)):
            return index
    return len(message)
