"""The cluster's data registry: which prepared data version each Ray node holds (docs/scale-out.md, Data).

A named detached actor in the campaign's namespace (`amb-data-registry`, on the head node, so it lives
as long as the cluster and outlives every controller) holding

    node id -> {"host", "registered_at", "data": {data_key: {"hash", "stats", "problem", "verified_at"}}}

A node registers what it holds after verifying it (`node_data`, run on the node by the controller's
probe or by a slot as it starts): the hash of the data's checksum manifest, checked file by file
against the manifest, and the files' stats at that moment. A later session's node trusts its earlier
entry only while the manifest hash and every file's stats (size, mtime, inode, ctime) are unchanged,
so a dataset of gigabytes is hashed once per node, not once per session; an entry that disagrees with
the files (a wrong hash, data changed since) is verified again and replaced. Entries of nodes no
longer alive are dropped (a restarted node comes back under a new node id and registers afresh).

Placement goes by what the nodes register: a run is pinned (node affinity) to nodes that hold its
suite's canonical hash; a node with another version, none, or data that failed its check is refused
for it, with that reason. A new registry (the cluster's first session) is not waited for: its start
(a Python worker) runs beside the slots' and nodes register into it when it is up.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

REGISTRY_NAME = "amb-data-registry"
HEAD_RESOURCE = "node:__internal_head__"  # Ray's resource of the head node
NODE_DATA_DIR = "AMB_NODE_DATA_DIR"  # a node's own path to the data dir, when it differs from the controller's


class DataRegistry:
    """The registry actor (see the module's docstring)."""

    def __init__(self):
        self.nodes: dict[str, dict[str, Any]] = {}

    def register(self, node_id: str, host: str, data: dict[str, dict[str, Any]]) -> None:
        entry = self.nodes.setdefault(node_id, {"host": host, "data": {}})
        entry.update(host=host, registered_at=time.time())
        entry["data"].update(data)

    def entries(self, alive: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """Every node's entry; with `alive`, the entries of other nodes (gone, or restarted under a new
        node id) are dropped first."""
        if alive is not None:
            for node_id in [n for n in self.nodes if n not in set(alive)]:
                del self.nodes[node_id]
        return self.nodes


def registry(ray, namespace: str) -> tuple[Any, bool]:
    """The namespace's registry actor, and whether it was there already; made on first use (on the head
    node; restarted empty if it dies, and filled again by the next probes)."""
    try:
        return ray.get_actor(REGISTRY_NAME, namespace=namespace), True
    except ValueError:
        pass
    options: dict[str, Any] = dict(name=REGISTRY_NAME, namespace=namespace, lifetime="detached", get_if_exists=True,
                                   num_cpus=0, max_restarts=-1, max_concurrency=16)
    if any(HEAD_RESOURCE in (n.get("Resources") or {}) for n in ray.nodes() if n.get("Alive")):
        options["resources"] = {HEAD_RESOURCE: 0.001}
    return ray.remote(DataRegistry).options(**options).remote(), False


def node_data_dir(data_dir: str) -> Path:
    return Path(os.environ.get(NODE_DATA_DIR) or data_dir)


def node_data(data_dir: str, keys: list[str], known: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What this node holds of each data key, verified: {"hash", "stats", "problem", "verified_at"}.

    `known` is this node's earlier registry entry: trusted only while the manifest's hash and every
    file's stats are what they were when it was verified; anything else is checked file by file."""
    from ..data import TaskData, file_stats, verify_manifest
    from .base import manifest_hash

    out = {}
    for key in keys:
        root = node_data_dir(data_dir) / key
        digest = manifest_hash(root)
        if digest is None:
            out[key] = {"hash": None, "stats": None, "problem": None, "verified_at": time.time()}
            continue
        data = TaskData(root)
        try:
            stats = file_stats(data)
        except OSError as e:
            out[key] = {"hash": None, "stats": None, "problem": f"unreadable: {e}", "verified_at": time.time()}
            continue
        before = known.get(key) or {}
        if before.get("hash") == digest and before.get("stats") == stats and not before.get("problem"):
            out[key] = before  # verified earlier, unchanged since
            continue
        problems = verify_manifest(data)
        out[key] = {"hash": None if problems else digest, "stats": stats, "verified_at": time.time(),
                    "problem": (f"its copy at {root} failed its checksum check ({'; '.join(problems[:3])})"
                                if problems else None)}
    return out
