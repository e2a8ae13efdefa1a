"""A Slurm node as an SSS Node (the Scalable Systems Software Node spec's object, infosvc/model/node.py)
from Slurm's facts alone, for the nodes no infosvc agent reports (docs/slurm.md, Reading the cluster).

The Node says what an agent's would where Slurm knows it, in the agent's kinds and units
(agents/infosvc_agents/host_node.py): Processors configured (the node's CPUs), available (those
Slurm has not allocated) and utilized (allocated); Memory in MB the same way from RealMemory and the
memory allocated; the node's features; its GRES GPUs as `Resource name="GPU"` of the GRES type
(`gpu` where Slurm names none), configured, available and utilized (GRES used). Its SSS State is
Offline when Slurm cannot use it, Busy with CPUs allocated, else Idle. What Slurm alone says (its
state and flags, the reason, the partitions) are Extensions of type "Slurm"; the kernel release and
the sockets are the agent's OperatingSystem and Processor Extensions. A pure function: no command,
no format, no HTTP.
"""

from __future__ import annotations

from infosvc.lrms.cluster import SlurmNode
from infosvc.model.node import Consumable, Extension, Node

#: the Extension type (context) of what Slurm alone says of a node
SLURM = "Slurm"


def sss_state(node: SlurmNode) -> str:
    """The SSS State: Offline when Slurm cannot use it, Busy with CPUs allocated, else Idle."""
    if node.down:
        return "Offline"
    return "Idle" if node.alloc_cpus == 0 else "Busy"


def slurm_state(node: SlurmNode) -> str:
    """Slurm's state as scontrol writes it: the base state, then its flags (`idle+DRAIN`)."""
    return "+".join((node.state.upper(), *node.flags))


def sss_node(node: SlurmNode, node_id: str) -> Node:
    """The SSS Node of one Slurm node, its Id `node_id` (the host's: the node's name, lower case)."""
    opsys, _, rest = (node.operating_system or "").partition(" ")
    release = rest.split(" ")[0]
    extensions = [Extension("KernelRelease", release, "OperatingSystem")] if release else []
    if node.sockets:
        extensions.append(Extension("Sockets", str(node.sockets), "Processor"))
    if node.sockets and node.cores_per_socket:
        extensions.append(Extension("PhysicalCores", str(node.sockets * node.cores_per_socket), "Processor"))
    extensions.append(Extension("State", slurm_state(node), SLURM))
    if node.reason:
        extensions.append(Extension("Reason", node.reason, SLURM))
    if node.partitions:
        extensions.append(Extension("Partitions", ",".join(node.partitions), SLURM))
    made = Node(id=node_id, name=node.name, features=list(node.features), opsys=opsys or None,
                arch=node.architecture or None, state=sss_state(node), extensions=extensions)
    alloc_cpus = min(node.alloc_cpus, node.cpus)
    made.configured.add(Consumable("Processors", node.cpus))
    made.available.add(Consumable("Processors", node.cpus - alloc_cpus))
    made.utilized.add(Consumable("Processors", alloc_cpus))
    if node.real_memory:
        alloc_memory = min(node.alloc_memory, node.real_memory)
        made.configured.add(Consumable("Memory", float(node.real_memory), units="MB"))
        made.available.add(Consumable("Memory", float(node.real_memory - alloc_memory), units="MB"))
        made.utilized.add(Consumable("Memory", float(alloc_memory), units="MB"))
    for kind in node.gpus:
        used = min(kind.used, kind.count)
        made.configured.add(Consumable("Resource", float(kind.count), name="GPU", type=kind.model))
        made.available.add(Consumable("Resource", float(kind.count - used), name="GPU", type=kind.model))
        made.utilized.add(Consumable("Resource", float(used), name="GPU", type=kind.model))
    return made
