"""Tenants: every agent belongs to one, and a tenant's agent ids are its own namespace.

Internally an agent is stored under its key: the agent id itself for the default tenant (the
single-user embedded setup, auth off), `"<tenant>/<agent id>"` for any other. Agent ids cannot
contain "/", so no id a client sends can name another tenant's agent. Data-layer functions
take a `Scope` and derive the key themselves, so every query they run is confined to the
caller's tenant whatever the route does.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_TENANT = "default"
SEPARATOR = "/"


@dataclass(frozen=True)
class Scope:
    tenant_id: str = DEFAULT_TENANT

    def key(self, agent_id: str) -> str:
        """The stored agent key of this tenant's `agent_id`."""
        if self.tenant_id == DEFAULT_TENANT:
            return agent_id
        return f"{self.tenant_id}{SEPARATOR}{agent_id}"

    def agent_id(self, key: str) -> str:
        """The client-facing agent id of a stored key of this tenant."""
        if self.tenant_id == DEFAULT_TENANT:
            return key
        return key.removeprefix(f"{self.tenant_id}{SEPARATOR}")


DEFAULT_SCOPE = Scope()


def client_agent_id(key: str) -> str:
    """The agent id as its client named it, whatever its tenant."""
    return key.rpartition(SEPARATOR)[2]
