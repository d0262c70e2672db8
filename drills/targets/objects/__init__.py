"""Object storage of one site, read-only: S3-compatible stores and Azure Blob Storage.

store (ObjectStore through boto3, and the records every store answers with), listing
(key-ordered listings, sharded and fetched concurrently in bounded memory), compare (a
dataset's two copies compared as two ordered streams), azure (AzureBlobStore), and
azure_settings (the azure-blob provider's settings made into a client).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from drills.faces import lazy_face

if TYPE_CHECKING:
    from drills.targets.objects.azure import AzureBlobStore
    from drills.targets.objects.azure_settings import client_for
    from drills.targets.objects.compare import (
        DatasetDiff,
        DeleteFindings,
        Location,
        compare_deletes,
        compare_objects,
    )
    from drills.targets.objects.listing import Listing, ListingLimits
    from drills.targets.objects.store import (
        KeyHistory,
        LifecycleRule,
        ObjectInfo,
        ObjectStore,
        VersionInfo,
    )

__all__ = [
    "AzureBlobStore",
    "DatasetDiff",
    "DeleteFindings",
    "KeyHistory",
    "LifecycleRule",
    "Listing",
    "ListingLimits",
    "Location",
    "ObjectInfo",
    "ObjectStore",
    "VersionInfo",
    "client_for",
    "compare_deletes",
    "compare_objects",
]

__getattr__ = lazy_face(
    __name__,
    {
        "azure": ["AzureBlobStore"],
        "azure_settings": ["client_for"],
        "compare": [
            "DatasetDiff",
            "DeleteFindings",
            "Location",
            "compare_deletes",
            "compare_objects",
        ],
        "listing": ["Listing", "ListingLimits"],
        "store": ["KeyHistory", "LifecycleRule", "ObjectInfo", "ObjectStore", "VersionInfo"],
    },
)
