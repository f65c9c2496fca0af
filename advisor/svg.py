"""Small helpers that write inline SVG by hand: the report's plots are static SVG (no plotting
library, nothing to download), with <title> tooltips that every browser shows on hover."""

from __future__ import annotations

import math
from html import escape


def esc(text) -> str:
    return escape(str(text), quote=True)


def num(value: float) -> str:
    """A coordinate, short: 2 decimals, trailing zeros dropped."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def rect(x, y, w, h, cls: str, title: str = "", extra: str = "") -> str:
    tip = f"<title>{esc(title)}</title>" if title else ""
    return (f'<rect x="{num(x)}" y="{num(y)}" width="{num(max(w, 0))}" height="{num(h)}" class="{cls}"{extra}>'
            f"{tip}</rect>")


def line(x1, y1, x2, y2, cls: str, title: str = "") -> str:
    tip = f"<title>{esc(title)}</title>" if title else ""
    return f'<line x1="{num(x1)}" y1="{num(y1)}" x2="{num(x2)}" y2="{num(y2)}" class="{cls}">{tip}</line>'


def text(x, y, content, cls: str = "", anchor: str = "start") -> str:
    return f'<text x="{num(x)}" y="{num(y)}" class="{cls}" text-anchor="{anchor}">{esc(content)}</text>'


def nice_step(span: float, ticks: int = 5) -> float:
    """A round tick step (1, 2 or 5 times a power of ten) giving about ``ticks`` ticks."""
    if span <= 0:
        return 1.0
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def log_ticks(lo: float, hi: float) -> list:
    """Powers of ten (and their 2x, 5x between, when the range is short) inside [lo, hi]."""
    if math.log10(hi / lo) < 0.5:   # a short range (0.8x to 1.3x): plain round steps
        step = nice_step(hi - lo, 4)
        return [k * step for k in range(math.ceil(lo / step), math.floor(hi / step) + 1)]
    ticks = []
    for power in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in ((1,) if math.log10(hi / lo) > 3 else (1, 2, 5)):
            t = m * 10.0 ** power
            if lo <= t <= hi:
                ticks.append(t)
    return ticks


def fmt_us(us: float) -> str:
    """A duration for people: ns, us, ms or s."""
    if us < 1:
        return f"{us * 1e3:.0f} ns"
    if us < 1e3:
        return f"{us:.3g} us"
    if us < 1e6:
        return f"{us / 1e3:.4g} ms"
    return f"{us / 1e6:.4g} s"
