"""Tenants, API keys and the owner triple a request resolves to."""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class Subject:
    issuer: str
    subject_id: str
    tenant: str
    lane: str = "api-key"
    kind: str = "workload"

    def to_json(self) -> dict[str, Any]:
        return {"issuer": self.issuer, "subjectId": self.subject_id, "tenant": self.tenant,
                "lane": self.lane, "kind": self.kind}


@attrs.frozen
class Owner:
    """The owner triple: tenant, optional workspace, subject."""

    tenant: str
    subject: Subject
    workspace: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tenant": self.tenant}
        if self.workspace is not None:
            out["workspace"] = self.workspace
        out["subject"] = self.subject.to_json()
        return out

    def can_read(self, other: Owner) -> bool:
        """Whether a caller with this triple may read a run owned by `other`.

        Same tenant, and the same workspace when the caller is workspace-scoped
        (assumption `owner-triple-readable`).
        """
        if self.tenant != other.tenant:
            return False
        return self.workspace is None or self.workspace == other.workspace


@attrs.frozen
class Tenant:
    name: str
    api_key: str
    workspace: str | None = None
    # The caller's triple, made once: every request authenticates (a frozen value, shared).
    _owner: Owner = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        subject = Subject(issuer="urn:refsim:api-key", subject_id=f"key-{self.name}",
                          tenant=self.name)
        object.__setattr__(self, "_owner", Owner(tenant=self.name, subject=subject,
                                                 workspace=self.workspace))

    def owner(self) -> Owner:
        return self._owner


DEFAULT_TENANTS: tuple[Tenant, ...] = (
    Tenant("acme", "hk_test_acme"),
    Tenant("globex", "hk_test_globex"),
)
