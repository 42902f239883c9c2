"""Resource quantities as plain integers.

Canonical units (the same Kueue uses internally): ``cpu`` in millicores, ``memory`` and
``ephemeral-storage`` (and any ``*hugepages*``) in bytes, every other resource as a whole
count (``pods``, ``nvidia.com/gpu``, ``vpc.amazonaws.com/efa``...).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from math import ceil

Resources = Mapping[str, int]

PODS = "pods"
CPU = "cpu"
MEMORY = "memory"
GPU = "nvidia.com/gpu"

_BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_SUFFIXES = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


class QuantityError(ValueError):
    """A Kubernetes quantity string that cannot be parsed."""


# Kubernetes keeps a quantity as an int64 count of its smallest unit (and refuses longer
# spellings); anything past these is refused before arithmetic on it can take time or memory.
MAX_QUANTITY_CHARS = 64
MAX_QUANTITY = Decimal(2**63 - 1)


def _shown(original: str | int | float) -> str:
    text = repr(original) if not isinstance(original, int) or abs(original) < 10**30 else "a number of "
    return text if len(text) <= MAX_QUANTITY_CHARS else text[: MAX_QUANTITY_CHARS - 3] + "..."


def _decimal(number: str, original: str | int | float) -> Decimal:
    try:
        amount = Decimal(number)
    except InvalidOperation as exc:
        raise QuantityError(f"invalid quantity {_shown(original)}") from exc
    if not amount.is_finite():
        raise QuantityError(f"invalid quantity {_shown(original)}: not a finite number")
    return amount


def _quantity_to_decimal(value: str | int | float) -> Decimal:
    """Binary (Ki..Ei) and decimal (n..E) suffixes; plain numbers may use exponents (1e3).
    Finite and at most 2^63 - 1 (Kubernetes' int64), or :class:`QuantityError`."""
    amount = _bounded_decimal(value)
    if abs(amount) > MAX_QUANTITY:
        raise QuantityError(f"quantity {_shown(value)} is too large (at most {MAX_QUANTITY})")
    return amount


def _bounded_decimal(value: str | int | float) -> Decimal:
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}")
    if isinstance(value, int) and abs(value) > MAX_QUANTITY:
        raise QuantityError(f"quantity {_shown(value)} is too large (at most {MAX_QUANTITY})")
    if isinstance(value, int | float):
        return _decimal(str(value), value)
    if len(value) > MAX_QUANTITY_CHARS:
        raise QuantityError(f"invalid quantity {_shown(value)}: longer than {MAX_QUANTITY_CHARS} characters")
    text = value.strip()
    for suffix, factor in _BINARY_SUFFIXES.items():
        if text.endswith(suffix):
            return _decimal(text[: -len(suffix)], value) * factor
    if len(text) > 1 and text[-1] in _DECIMAL_SUFFIXES:
        return _decimal(text[:-1], value) * _DECIMAL_SUFFIXES[text[-1]]
    return _decimal(text, value)


def uses_milli_units(resource: str) -> bool:
    """CPU is counted in millicores; everything else in whole units."""
    return resource == CPU


def parse_quantity(value: str | int | float, resource: str) -> int:
    """Parse a Kubernetes quantity into the canonical integer unit of ``resource``.

    Rounds up, as Kubernetes does when it converts a quantity to an integer scale, so a
    request is never under-counted.
    """
    amount = _quantity_to_decimal(value)
    if amount < 0:
        raise QuantityError(f"negative quantity {value!r} for {resource}")
    if uses_milli_units(resource):
        amount = amount * 1000
    return int(ceil(amount))


def quantity_float(value: str | int | float) -> float:
    """A Kubernetes quantity as a plain number (``"500m"`` -> 0.5), e.g. ``fairSharing.weight``."""
    return float(_quantity_to_decimal(value))


def format_quantity(amount: int, resource: str) -> str:
    """Inverse of :func:`parse_quantity`, in the shortest exact Kubernetes spelling."""
    if uses_milli_units(resource):
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if resource == MEMORY or "storage" in resource or "hugepages" in resource:
        for suffix in ("Ti", "Gi", "Mi", "Ki"):
            factor = _BINARY_SUFFIXES[suffix]
            if amount and amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)


def resources_from_k8s(quantities: Mapping[str, str | int | float] | None) -> dict[str, int]:
    """``{"cpu": "500m", "memory": "1Gi"}`` -> ``{"cpu": 500, "memory": 1073741824}``."""
    return {name: parse_quantity(q, name) for name, q in (quantities or {}).items()}


def add(a: Resources, b: Resources) -> dict[str, int]:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) + amount
    return out


def subtract(a: Resources, b: Resources) -> dict[str, int]:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) - amount
    return out


def scale(a: Resources, factor: int) -> dict[str, int]:
    return {name: amount * factor for name, amount in a.items()}


def total(items: Iterable[Resources]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        for name, amount in item.items():
            out[name] = out.get(name, 0) + amount
    return out


def with_pod_slot(per_pod: Resources) -> dict[str, int]:
    """Every pod also takes one unit of the ``pods`` resource (Kueue issue #4270)."""
    out = dict(per_pod)
    out[PODS] = out.get(PODS, 0) + 1
    return out


def pods_that_fit(free: Resources, per_pod: Resources) -> int:
    """How many pods of ``per_pod`` fit into ``free``.

    Kueue's rule: min over requested resources of floor(free / request); resources requested
    at 0 are ignored; a requested resource missing from ``free`` gives 0; negative free is 0.
    A pod requesting nothing at all fits without limit, which callers never see because
    every pod requests one ``pods`` slot.
    """
    best: int | None = None
    for name, request in per_pod.items():
        if request <= 0:
            continue
        available = max(free.get(name, 0), 0)
        count = available // request
        if best is None or count < best:
            best = count
            if best == 0:
                return 0
    return best if best is not None else 2**31 - 1


def limiting_resource(free: Resources, per_pod: Resources) -> str | None:
    """The resource that admits the fewest pods (ties broken by name), as Kueue reports it."""
    ranked = sorted(
        (max(free.get(name, 0), 0) // request, name) for name, request in per_pod.items() if request > 0
    )
    return ranked[0][1] if ranked else None
