"""Amazon ECR as a site's registry: manifest digests through boto3, in batches.

``BatchGetImage`` takes up to 100 image ids of one repository and reports each
missing one as a failure rather than failing the call, so one request per
repository (per 100 images) answers for all of its images.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from drills.errors import PermanentError, TemporaryError
from drills.plan import DrillPlan, Site
from drills.targets.aws import (
    READ_TIMEOUT_S,
    AwsEndpoint,
    client,
    error_code,
    resolve_endpoint,
    translate,
)
from drills.targets.registry.images import Ref, is_digest
from drills.targets.registry.oci import MANIFEST_TYPES
from drills.targets.retry import retry_call

log = logging.getLogger("drills.targets.registry")

_BATCH = 100  # the most image ids BatchGetImage takes
_ABSENT = frozenset({"ImageNotFound", "ImageTagDoesNotMatchDigest"})
_RETRYABLE = frozenset({"KmsError", "UpstreamUnavailable", "ImageReferencedByManifestList"})


def _image_id(reference: str) -> dict[str, str]:
    return {"imageDigest": reference} if is_digest(reference) else {"imageTag": reference}


class EcrImages:
    """The manifest digests of one ECR registry (an account's registry in one region)."""

    def __init__(
        self,
        where: AwsEndpoint,
        registry_id: str,
        *,
        name: str = "registry",
        read_timeout: float = READ_TIMEOUT_S,
        max_pool: int = 32,
    ) -> None:
        self.registry_id = registry_id
        self.host = f"{registry_id}.dkr.ecr.{where.region}.amazonaws.com"
        self.plain_http = False
        at = f" at {where.endpoint_url}" if where.endpoint_url else ""
        self.target = f"{name} (ECR {registry_id} in {where.region}{at})"
        self._ecr = client("ecr", where, read_timeout=read_timeout, max_pool=max_pool)

    @classmethod
    def for_site(cls, name: str, site: Site, plan: DrillPlan) -> EcrImages:
        from drills.plan import EcrRegistry

        registry = site.registry
        assert isinstance(registry, EcrRegistry)
        region = site.registry_region
        assert region is not None  # the plan refuses an ECR registry without one
        aws_access = site.aws
        where = resolve_endpoint(
            plan,
            region,
            aws_access.endpoint_url if aws_access else None,
            aws_access.credentials if aws_access else None,
        )
        return cls(where, registry.registry_id, name=name)

    def digest(self, repository: str, reference: str) -> str | None:
        return self._repository(repository, [reference])[(repository, reference)]

    def digests(self, refs: Iterable[Ref], *, concurrency: int = 32) -> dict[Ref, str | None]:
        by_repo: dict[str, list[str]] = defaultdict(list)
        for repository, reference in dict.fromkeys(refs):
            by_repo[repository].append(reference)
        jobs = [
            (repository, references[i : i + _BATCH])
            for repository, references in by_repo.items()
            for i in range(0, len(references), _BATCH)
        ]
        if not jobs:
            return {}
        results: dict[Ref, str | None] = {}
        with ThreadPoolExecutor(max(1, min(concurrency, len(jobs)))) as pool:
            for found in pool.map(lambda job: self._repository(*job), jobs):
                results.update(found)
        return results

    def close(self) -> None:
        self._ecr.close()

    def _repository(self, repository: str, references: list[str]) -> dict[Ref, str | None]:
        results: dict[Ref, str | None] = dict.fromkeys((repository, r) for r in references)
        answer = self._batch_get(repository, references)
        if answer is None:
            return results
        absent = self._absent(repository, answer)
        images = answer.get("images", [])
        for image in images:
            image_id = image.get("imageId", {})
            for reference in references:
                if reference in (image_id.get("imageTag"), image_id.get("imageDigest")):
                    results[(repository, reference)] = image_id.get("imageDigest")
        unmatched = [r for r in references if results[(repository, r)] is None and r not in absent]
        if len(references) == 1 and unmatched and len(images) == 1:
            # Found, but echoed under another of its tags.
            results[(repository, references[0])] = images[0].get("imageId", {}).get("imageDigest")
        elif len(references) > 1:
            for reference in unmatched:  # ask one by one which answer was whose
                results.update(self._repository(repository, [reference]))
        return results

    def _absent(self, repository: str, answer: dict[str, Any]) -> set[str]:
        """The tags and digests the answer says are not there; any other failure raises."""
        absent: set[str] = set()
        for failure in answer.get("failures", []):
            code = failure.get("failureCode", "")
            failed_id = failure.get("imageId", {})
            if code in _ABSENT:
                absent.update(v for v in failed_id.values() if isinstance(v, str))
                continue
            cause = f"{code}: {failure.get('failureReason', '')} ({repository})"
            if code in _RETRYABLE:
                raise TemporaryError(self.target, cause)
            raise PermanentError(self.target, cause)
        return absent

    def _batch_get(self, repository: str, references: list[str]) -> dict[str, Any] | None:
        """``BatchGetImage``'s answer; None when the repository does not exist. A read: retried."""
        return retry_call(lambda: self._batch_get_once(repository, references))

    def _batch_get_once(self, repository: str, references: list[str]) -> dict[str, Any] | None:
        try:
            answer: dict[str, Any] = self._ecr.batch_get_image(
                registryId=self.registry_id,
                repositoryName=repository,
                imageIds=[_image_id(r) for r in references],
                acceptedMediaTypes=list(MANIFEST_TYPES),
            )
        except ClientError as exc:
            if error_code(exc) == "RepositoryNotFoundException":
                return None
            raise translate(self.target, exc) from exc
        except BotoCoreError as exc:
            raise translate(self.target, exc) from exc
        return answer

    def __repr__(self) -> str:
        return f"EcrImages({self.target})"
