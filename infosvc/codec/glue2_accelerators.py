"""GLUE 2.1's accelerator entities of a site (docs/glue-mapping.md, Accelerators), as XSEDE/ACCESS's
IPF publishes them in GLUE 2 JSON: an AcceleratorEnvironment per model of a subcluster's
accelerators, and per accelerator type the manager's figures (ComputingManagerAcceleratorInfo)
and each share's whose hosts have them (ComputingShareAcceleratorInfo). Only the JSON rendering
carries them: the 2.0 XSD and LDAP schema have no such classes (glue2.accelerator_info says it in
OtherInfo there)."""

from __future__ import annotations

from typing import Sequence

from infosvc.codec.glue2 import Assoc, Entity, Ids, given, id_part, local
from infosvc.codec.gridformat import subclusters_of_ce
from infosvc.model.glue import ComputingElement, GlueTree, SubCluster

__all__ = ["accelerator_entities"]


def accelerator_entities(tree: GlueTree, ces: Sequence[ComputingElement], subs: list[SubCluster],
                          ids: Ids) -> list[Entity]:
    """GLUE 2.1: an AcceleratorEnvironment per model of a subcluster's accelerators; per type, the
    manager's figures (ComputingManagerAcceleratorInfo) and each share's whose hosts have them."""
    environments: list[Entity] = []
    installed: dict[str, int] = {}
    of_type: dict[str, dict[str, SubCluster]] = {}  # type -> the subclusters with accelerators of it, by id
    for sub in subs:
        ee_id = ids.ee_of[sub.unique_id]
        for a in sub.accelerators:
            # each part escaped with its ':' (id_part): `x:y` with `z` and `x` with `y:z` were one id
            aid = f"{ids.urn}:accenv:{id_part(sub.unique_id)}:{id_part(a.model)}"
            installed[a.type] = installed.get(a.type, 0) + a.count * max(0, sub.host_count)
            of_type.setdefault(a.type, {})[sub.unique_id] = sub
            # named by its model alone: the subcluster's name (its processor model, any length a
            # report gives) repeated for each of a host's models made the answer their product
            environments.append(Entity(
                "AcceleratorEnvironment", "", aid, "", a.model,
                attrs=given([("Type", a.type), ("PhysicalAccelerators", a.count), ("LogicalAccelerators", a.count),
                            ("Vendor", a.vendor), ("Model", a.model), ("Memory", a.memory),
                            ("ComputeCapability", [a.compute_capability] if a.compute_capability else None)]),
                assoc=[Assoc("", "ExecutionEnvironmentID", (ee_id,))]))
    if not environments:
        return []
    managers = [Entity("ComputingManagerAcceleratorInfo", "", f"{ids.urn}:manageraccinfo:{local(t)}", "",
                       attrs=[("Type", t), ("TotalPhysicalAccelerators", n),
                              ("TotalAcceleratorSlots", sum(s.total_accelerators for s in of_type[t].values())),
                              ("UsedAcceleratorSlots", sum(s.used_accelerators for s in of_type[t].values()))],
                       assoc=[Assoc("", "ComputingManagerID", (ids.manager,), True)])
                for t, n in installed.items()]
    shares = []
    for ce in ces:
        served = subclusters_of_ce(tree, ce)
        for t in installed:
            mine = [s for s in served if s.unique_id in of_type[t]]
            if mine:
                shares.append(Entity(
                    "ComputingShareAcceleratorInfo", "", f"{ids.urn}:shareaccinfo:{id_part(ce.unique_id)}:{id_part(t)}",
                    "", attrs=[("Type", t), ("FreeAcceleratorSlots", sum(max(0, s.free_accelerators) for s in mine)),
                               ("UsedAcceleratorSlots", sum(max(0, s.used_accelerators) for s in mine)),
                               # a job may span the CE's hosts, as MaxSlotsPerJob says of CPUs
                               ("MaxAcceleratorSlotsPerJob", sum(max(0, s.total_accelerators) for s in mine))],
                    assoc=[Assoc("", "ComputingShareID", (ids.share_of[ce.unique_id],), True)]))
    return [*environments, *managers, *shares]
