"""Container registries: what an image reference resolves to, at one site.

images (image references, and the Registry every adapter is), from_plan (registry_for:
the built-in adapter a site's plan names), oci (the OCI Distribution API), auth (its
token and basic authentication), ecr (Amazon ECR through boto3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drills.faces import lazy_face

if TYPE_CHECKING:
    from drills.targets.registry.ecr import EcrImages
    from drills.targets.registry.from_plan import registry_for
    from drills.targets.registry.images import ImageName, Ref, Registry, parse_image
    from drills.targets.registry.oci import OciDistribution

__all__ = [
    "EcrImages",
    "ImageName",
    "OciDistribution",
    "Ref",
    "Registry",
    "parse_image",
    "registry_for",
]

__getattr__ = lazy_face(
    __name__,
    {
        "ecr": ["EcrImages"],
        "from_plan": ["registry_for"],
        "images": ["ImageName", "Ref", "Registry", "parse_image"],
        "oci": ["OciDistribution"],
    },
)
