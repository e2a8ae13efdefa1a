"""The scheduler: the CCS policies as pure functions of (machine, running jobs, queue, now).

`policy.schedule` is the one scheduling pass that the service and `infosvc simulate` both run;
`pool.ProcessorPool` is the machine of a workload trace.
"""

from infosvc.sched.policy import (
    Machine, Plan, Policy, Queued, Reservation, Running, Start, queue_order, schedule,
)
from infosvc.sched.pool import ProcessorPool

__all__ = ["Machine", "Plan", "Policy", "ProcessorPool", "Queued", "Reservation", "Running", "Start",
           "queue_order", "schedule"]
