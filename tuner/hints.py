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

# "try --scope full_iteration", "try --scope full_iteration or submodule", "use fwd_bwd"
HINT = re.compile(r"(?:try --scope |use )(\w+)(?: or (\w+))?")


def checked_hints(message: str, scope: str, scopes: tuple, refusal_of: Callable[[str], Optional[str]]) -> str:
    """``message``, ``scope``'s refusal, with each hint to a scope of ``scopes`` that
    ``refusal_of`` (a scope -> its refusal's reason, None where it applies) finds refused too
    taken out, and those reasons added at its end, less their own hints to ``scope`` or to
    another scope that refuses. Unchanged where every hinted scope applies."""
    reasons: dict = {}

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
        circular = (scope,) + tuple(o for m in HINT.finditer(why) for o in _named(m, scopes) if refused(o))
        said.append(f"; {other} does not apply either: {without_hints_to(why, circular)}")
    return without_hints_to(message, gone) + "".join(said)


def without_hints_to(message: str, scopes: tuple) -> str:
    """``message`` without its hints to ``scopes``: "try --scope a or b" becomes "try --scope
    b" where only a is among them, a hint to them alone is taken out."""
    # from the last hint back, so that the earlier ones' positions hold
    for match in reversed(list(HINT.finditer(message))):
        named = [scope for scope in match.groups() if scope]
        if not any(scope in scopes for scope in named):
            continue
        left = [scope for scope in named if scope not in scopes]
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
    copies them")."""
    start, end = match.start(), match.end()
    close = message.find(")", end)
    if message[:start].endswith("(") and close >= 0:
        before = message[:start - 1].rstrip(" ")
        return before + message[close + 1:]
    for joint in (", or ", "; ", ", "):
        if message[:start].endswith(joint):   # the clause ends at the parenthesis or the next semicolon
            stops = [at for at in (close, message.find(";", end)) if at >= 0]
            return message[:start - len(joint)] + message[min(stops, default=len(message)):]
    return message[:start].rstrip(" ,;") + message[end:]
