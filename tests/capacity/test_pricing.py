"""Pricing files in OpenCost's custom-pricing shape: what matches a node, and what is refused."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from drills.capacity.pricing import (
    GPU_PRODUCT_LABEL,
    INSTANCE_TYPE_LABEL,
    PricingError,
    load_pricing,
    parse_pricing,
)

# OpenCost's own configs/default.json, with the keys drills adds.
OPENCOST_DEFAULT = """{
    "provider": "custom",
    "description": "Default prices based on GCP us-central1",
    "CPU": "0.031611", "spotCPU": "0.006655", "RAM": "0.004237", "spotRAM": "0.000892",
    "GPU": "0.95", "storage": "0.00005479452", "zoneNetworkEgress": "0.01",
    "currencyCode": "EUR",
    "gpuProducts": {"NVIDIA-H100-80GB-HBM3": "2.49"},
    "instanceTypes": {"p5.48xlarge": "98.32"}
}"""


def test_instance_type_then_gpu_product_then_any_gpu() -> None:
    pricing = parse_pricing(OPENCOST_DEFAULT, "test")
    assert pricing.currency == "EUR"
    p5 = pricing.price(
        {INSTANCE_TYPE_LABEL: "p5.48xlarge", GPU_PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3"}, 8
    )
    assert p5 is not None and p5.per_gpu_hour == Decimal("98.32") / 8
    assert "p5.48xlarge" in p5.matched
    h100 = pricing.price(
        {INSTANCE_TYPE_LABEL: "other", GPU_PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3"}, 8
    )
    assert h100 is not None and h100.per_gpu_hour == Decimal("2.49")
    a10 = pricing.price({GPU_PRODUCT_LABEL: "NVIDIA-A10G"}, 1)
    assert a10 is not None and a10.per_gpu_hour == Decimal("0.95")


def test_a_node_nothing_prices_is_unpriced_not_free() -> None:
    pricing = parse_pricing('{"gpuProducts": {"NVIDIA-A100-SXM4-80GB": 1.8}}', "test")
    assert pricing.currency == "USD"
    assert pricing.price({GPU_PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3"}, 8) is None


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{not json", "not valid JSON or YAML"),
        ("[1, 2]", "must be an object"),
        ('{"CPU": "0.03"}', "prices no GPU"),
        ('{"GPU": "-1"}', "GPU must be a price of 0 or more"),
        ('{"GPU": "cheap"}', "GPU is not a number"),
        ('{"GPU": true}', "GPU must be a price"),
        ('{"GPU": "NaN"}', "GPU must be a price of 0 or more"),
        ('{"gpuProducts": ["H100"]}', "gpuProducts must map names"),
        ('{"GPU": "1", "currencyCode": "dollars"}', "currencyCode must be an ISO 4217 code"),
    ],
)
def test_a_bad_pricing_document_is_one_clear_line(text: str, said: str) -> None:
    with pytest.raises(PricingError) as caught:
        parse_pricing(text, "pricing file p.json")
    message = str(caught.value)
    assert said in message and "\n" not in message and message.startswith("pricing file p.json")


def test_a_missing_or_unreadable_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(PricingError, match=r"^pricing file .*absent\.json: No such file"):
        load_pricing(tmp_path / "absent.json")
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(PricingError, match=r"dir\.json"):
        load_pricing(tmp_path / "dir.json")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe{")
    with pytest.raises(PricingError, match="not UTF-8"):
        load_pricing(tmp_path / "bin.json")
