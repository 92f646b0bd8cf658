"""Plots for the console, as geometry only: the templates draw them as inline SVG.

No JavaScript and no CDN: the server computes every point and label, and the template
(templates/_plot.html) writes the elements, autoescaped like any other text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

WIDTH, HEIGHT = 640, 200
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 12, 28


@dataclass(frozen=True)
class Series:
    name: str
    values: list[float | None]  # one per day; None: nothing that day
    css: str  # the class that colours it (console.css)


@dataclass(frozen=True)
class Plot:
    """A line plot of one or more series over days, with an optional horizontal limit line."""

    title: str
    key: str  # its id in the page
    days: list[str]
    series: list[Series]
    unit: str = ""
    limit: float | None = None  # e.g. the daily budget
    limit_label: str = ""
    top: float = 1.0  # the y value at the top of the plot
    lines: list[tuple[str, str]] = field(default_factory=list)  # (css, SVG points) per series
    dots: list[tuple[str, float, float, str]] = field(default_factory=list)  # (css, x, y, tooltip)
    x_labels: list[tuple[float, str]] = field(default_factory=list)
    y_labels: list[tuple[float, str]] = field(default_factory=list)
    limit_y: float | None = None

    @property
    def empty(self) -> bool:
        return not any(v is not None for s in self.series for v in s.values)


def line_plot(
    key: str,
    title: str,
    days: list[str],
    series: list[Series],
    unit: str = "",
    limit: float | None = None,
    limit_label: str = "",
    top: float | None = None,
) -> Plot:
    """Place every point: x by day, y scaled to `top` (else the largest value or limit)."""
    known = [v for s in series for v in s.values if v is not None]
    ceiling = top or max([*known, limit or 0.0, 0.0]) or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(i: int) -> float:
        return round(LEFT + (plot_w * i / (len(days) - 1) if len(days) > 1 else plot_w / 2), 1)

    def y(value: float) -> float:
        return round(TOP + plot_h * (1 - min(value, ceiling) / ceiling), 1)

    lines, dots = [], []
    for s in series:
        points = [(x(i), y(v)) for i, v in enumerate(s.values) if v is not None]
        lines.append((s.css, " ".join(f"{px},{py}" for px, py in points)))
        for i, v in enumerate(s.values):
            if v is not None:
                dots.append((s.css, x(i), y(v), f"{s.name} {days[i]}: {_number(v)}{unit}"))
    step = max(1, len(days) // 7)
    x_labels = [(x(i), day[5:]) for i, day in enumerate(days) if i % step == 0]
    y_labels = [(y(ceiling * f), _number(ceiling * f) + unit) for f in (0.0, 0.5, 1.0)]
    return Plot(
        title=title,
        key=key,
        days=days,
        series=series,
        unit=unit,
        limit=limit,
        limit_label=limit_label,
        top=ceiling,
        lines=lines,
        dots=dots,
        x_labels=x_labels,
        y_labels=y_labels,
        limit_y=y(limit) if limit else None,
    )


def _number(value: float) -> str:
    if value >= 100 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:.2f}".rstrip("0").rstrip(".")


def percentile(values: list[float], fraction: float) -> float | None:
    """The nearest-rank percentile (p50: fraction 0.5), None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * fraction // 1))  # ceil(n * fraction), at least the first
    return ordered[int(rank) - 1]
