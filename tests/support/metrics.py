"""Reading a /metrics exposition in tests, with prometheus_client's own parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(body: str) -> dict[str, float]:
    """`name{k="v",…}` (labels sorted) -> value, for every sample of the exposition."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return found


def metric_value(found: dict[str, float], name: str) -> float:
    """One series' value, or the sum over a name's labelled series."""
    return sum(value for key, value in found.items() if key == name or key.startswith(name + "{"))
