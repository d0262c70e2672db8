"""Hourly GPU prices from a pricing file in OpenCost's custom-pricing shape.

OpenCost's ``default.json`` prices resources by the hour, as strings: ``"GPU": "0.95"``
is one GPU-hour of any model. drills reads that key, and two more for a pool of several
models: ``gpuProducts`` (a GPU-hour by the node's ``nvidia.com/gpu.product`` label) and
``instanceTypes`` (a node-hour by its ``node.kubernetes.io/instance-type`` label, shared
among the node's GPUs), with ``currencyCode`` (default USD). The file's other OpenCost keys
(CPU, RAM, storage, egress...) are accepted and not used: a standby's cost here is its GPUs.

A node matches its instance type first, then its GPU product, then ``GPU``. A GPU node
that matches none is unpriced, and reported by name: never counted as free.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml

from drills.errors import DrillError
from drills.plan.files import read_regular_file

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
MAX_PRICING_BYTES = 4 * 1024 * 1024
_CURRENCY = re.compile(r"^[A-Z]{3}$")


class PricingError(DrillError):
    """The pricing file cannot be used; the message is one line that says why."""


@dataclass(frozen=True)
class GpuPrice:
    per_gpu_hour: Decimal
    matched: str  # what matched, for the report: 'instance type p5.48xlarge'


@dataclass(frozen=True)
class Pricing:
    source: str
    currency: str = "USD"
    gpu: Decimal | None = None  # OpenCost's "GPU": any GPU without a better match
    gpu_products: Mapping[str, Decimal] = field(default_factory=dict)
    instance_types: Mapping[str, Decimal] = field(default_factory=dict)  # per node-hour

    def price(self, labels: Mapping[str, str], gpus: int) -> GpuPrice | None:
        """The hourly price of one of a node's ``gpus`` GPUs; None when nothing matches."""
        instance_type = labels.get(INSTANCE_TYPE_LABEL, "")
        if instance_type in self.instance_types and gpus > 0:
            per_gpu = self.instance_types[instance_type] / gpus
            return GpuPrice(per_gpu, f"instance type {instance_type}")
        product = labels.get(GPU_PRODUCT_LABEL, "")
        if product in self.gpu_products:
            return GpuPrice(self.gpu_products[product], f"GPU product {product}")
        if self.gpu is not None:
            return GpuPrice(self.gpu, "GPU (any model)")
        return None


def _price(value: Any, where: str, source: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise PricingError(f'{source}: {where} must be a price such as "2.50"')
    try:
        price = Decimal(str(value).strip())
    except InvalidOperation:
        raise PricingError(f"{source}: {where} is not a number: {str(value)[:40]!r}") from None
    if not price.is_finite() or price < 0:
        raise PricingError(f"{source}: {where} must be a price of 0 or more")
    return price


def _table(doc: Mapping[str, Any], key: str, source: str) -> dict[str, Decimal]:
    table = doc.get(key, {})
    if not isinstance(table, Mapping):
        raise PricingError(f"{source}: {key} must map names to hourly prices")
    return {str(name): _price(v, f"{key}.{name}", source) for name, v in table.items()}


def parse_pricing(text: str, source: str) -> Pricing:
    """A pricing document (JSON, or YAML) as :class:`Pricing`; PricingError when unusable."""
    try:
        doc = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        line = getattr(exc, "lineno", None) or getattr(
            getattr(exc, "problem_mark", None), "line", None
        )
        where = f" (line {line})" if line else ""
        raise PricingError(f"{source}: not valid JSON or YAML{where}") from None
    if not isinstance(doc, Mapping):
        raise PricingError(f"{source}: must be an object of prices (OpenCost's custom pricing)")
    currency = doc.get("currencyCode", "USD")
    if not isinstance(currency, str) or not _CURRENCY.match(currency):
        raise PricingError(f"{source}: currencyCode must be an ISO 4217 code such as USD")
    pricing = Pricing(
        source=source,
        currency=currency,
        gpu=_price(doc["GPU"], "GPU", source) if "GPU" in doc else None,
        gpu_products=_table(doc, "gpuProducts", source),
        instance_types=_table(doc, "instanceTypes", source),
    )
    if pricing.gpu is None and not pricing.gpu_products and not pricing.instance_types:
        raise PricingError(f"{source}: prices no GPU (give GPU, gpuProducts or instanceTypes)")
    return pricing


def load_pricing(path: Path) -> Pricing:
    """Read and parse a pricing file; PricingError (one line) for anything wrong with it."""
    try:
        data = read_regular_file(path, MAX_PRICING_BYTES)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise PricingError(f"pricing file {path}: {reason}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PricingError(f"pricing file {path}: not UTF-8 text") from None
    return parse_pricing(text, f"pricing file {path}")
