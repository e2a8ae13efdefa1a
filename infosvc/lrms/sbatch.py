"""A submitted job (the SSS model, whichever of the three formats it came in) as one `sbatch`: its
options and its batch script, or a refusal that names the field Slurm cannot be told.

Pure: nothing here runs Slurm. `translate(needs, request, ...)` reads the resolved job (its needs
read into Requested, infosvc.model.jobneeds) and the scheduling request read from it
(infosvc.sched.request), so a job means the same to Slurm as to the service's own queue. Every
Requested term, simple property and Extension is either translated, known to ask nothing of a
batch system (a description, a state a CCS job was written with), or refused with a
DocumentError whose `element` names the field: nothing a job asks is dropped. docs/slurm.md,
"Submitting through Slurm", has the table.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Final, Mapping

from ClusterShell.NodeSet import NodeSetException

from infosvc.errors import DocumentError, excerpt
from infosvc.lrms.batchscript import batch_script, refuse, stream_options
from infosvc.model.glue import GPU, LICENSE
from infosvc.model.job import Condition, Conj, Consumable, Feature, Job, Op, Properties, Simple, Term
from infosvc.model.jobneeds import NeedsRead
from infosvc.model.nodeset import names_upper_bound
from infosvc.model.noderef import Aggregation, NodeRef, NodeRefError
from infosvc.sched.budget import MAX_EXPANDED_BYTES, MAX_NODES, Budget
from infosvc.sched.request import NORMAL, After, JobRequest

__all__ = ["Batch", "translate"]

#: Simple properties that ask nothing of a batch system: what a job is, was or was given.
INFORMATIONAL: Final = frozenset({
    "Id", "GlobalId", "Description", "State", "StatusMessage", "CreationTime", "SubmitTime", "SubmitHost",
    "StartTime", "EndTime", "ExitCode", "StartCount", "StagedTime", "Charge", "Quote", "TimeCategory",
    "Session", "Process", "ReservationTime", "Application",
    # read elsewhere: the owner (infosvc.queue.submissions.owner_of), the request, the script
    "User", "Name", "Priority", "Executable", "Arguments", "InitialWorkingDirectory", "Restartable", "Type",
    "TaskCount", "EligibleTime", "Deadline", "Hold", "Shell", "Account", "Project", "Queue", "Partition",
    "QualityOfService", "Reservation", "NodeCount",
    # written outside Requested they describe what a job ran on as much as what it asks
    # (infosvc.model.jobneeds): the service's own queue reads them only inside Requested, and so does this
    "Architecture", "OperatingSystem", "Machine", "ResourceManagerType", "Duration", "Group", "GlobalUser",
})
#: Boolean properties a batch script cannot honour when true.
NOT_WHEN_TRUE: Final = {
    "Interactive": "an sbatch job is a batch script; run interactive work with salloc or srun",
    "Checkpointable": "Slurm 22.05 checkpoints no job",
}
#: Extensions that ask nothing of the batch system (for people, or read by the request).
KEPT_EXTENSIONS: Final = frozenset({"description", "meta", "fork", "default_storage_base", "IsExclusive",
                                    "IsBackfill", "SubmittedBy", "RequiredNodes"})
#: Extension types whose values are kept for people only (a CCS job's extended terms).
KEPT_TYPES: Final = frozenset({"ExtendedTerm"})
#: Slurm's own word for the one batch system these jobs go to.
SLURM: Final = "slurm"
#: The longest one sbatch argument may be, in bytes: Linux's MAX_ARG_STRLEN (32 pages) less the
#: argument's terminating NUL. execve refuses a longer one (E2BIG), so the job is refused first.
MAX_OPTION_BYTES: Final = 32 * 4096 - 1
#: The most all of one sbatch's options may hold together: half of Linux's usual ARG_MAX (2 MiB),
#: the rest left to the environment and the command's own words.
MAX_OPTIONS_BYTES: Final = 1024 * 1024
#: The field of the document an overlong option comes from (else the option names itself).
_FIELD_OF_OPTION: Final = {
    "--job-name": "Name", "--constraint": "Feature", "--nodelist": "Node", "--exclude": "Node",
    "--dependency": "Dependency", "--chdir": "InitialWorkingDirectory", "--input": "InputFile",
    "--output": "OutputFile", "--error": "ErrorFile", "--licenses": "Resource License",
}


@dataclass(frozen=True, slots=True)
class Batch:
    """One sbatch: its options (`--name=value`, in a fixed order) and its batch script."""

    options: tuple[str, ...]
    script: str


def translate(needs: NeedsRead, request: JobRequest, *, slurm_ids: Mapping[str, str], directory: str,
              vo_accounts: Mapping[str, str] | None = None) -> Batch:
    """The sbatch of one resolved job. `slurm_ids` maps the ids and names of jobs it may depend on
    (those of its own JobGroup submitted before it) to their Slurm job ids; `directory` is where it
    runs when it names none (its account's home); `vo_accounts` maps a VO (the job's Project) to
    the Slurm account the site runs it under. DocumentError (400) names what cannot be translated."""
    job = needs.job
    props = job.properties
    _check_properties(job)
    options: list[str] = [f"--job-name={_one_line('Name', request.name or job.id or 'infosvc')}"]
    terms = _all_requested(job)
    for where, term in terms:
        _check_term(where, term)
    options += _processors(request)
    if math.isfinite(request.estimate):
        options.append(f"--time={_clock(request.estimate)}")
    if request.memory_mb:
        options.append(f"--mem={math.ceil(request.memory_mb)}M")
    options += _placement(request, [term for _, term in terms])
    options += _credentials(props, [term for _, term in terms], vo_accounts or {})
    if request.gpus:
        options.append(f"--gres={_gres(request.gpus, [term for _, term in terms])}")
    if request.licenses:
        options.append("--licenses=" + ",".join(f"{_word('License', name)}:{count}" for name, count in request.licenses))
    if request.after:
        options.append("--dependency=" + ",".join(_dependency(after, slurm_ids) for after in request.after))
    options += _controls(request)
    options += _task_options(request, directory)
    shell = props.get("Shell") or "/bin/sh"
    if not shell.startswith("/") or any(c.isspace() for c in shell):
        raise refuse("Shell", f"{excerpt(shell)!r} is not an absolute path to a shell")
    _check_lengths(options)
    return Batch(tuple(options), batch_script(request, shell))


def _check_lengths(options: list[str]) -> None:
    """Each option one argument the system passes to sbatch (MAX_OPTION_BYTES), and all of them
    together a command line it runs (MAX_OPTIONS_BYTES): a longer one is the job's refusal, by the
    field it comes from, not a failure to run sbatch."""
    total = 0
    for option in options:
        size = len(option.encode("utf-8", "surrogatepass"))
        total += size + 1
        if size > MAX_OPTION_BYTES:
            name = option.partition("=")[0]
            raise refuse(_FIELD_OF_OPTION.get(name, name), f"{name} would be {size} bytes long; the system passes "
                                                          f"sbatch no argument over 128 KiB")
    if total > MAX_OPTIONS_BYTES:
        raise refuse("Job", f"its sbatch options would be {total} bytes long in all; the most is "
                            f"{MAX_OPTIONS_BYTES // 2**20} MiB")


# --- what a job says outside Requested -------------------------------------------------------------

def _check_properties(job: Job) -> None:
    levels = [job.properties, *(group.properties for group in job.effective_task_groups()),
              *(task.properties for group in job.effective_task_groups() for task in group.tasks)]
    for props in levels:
        for name, value in props.simple.items():
            if name in NOT_WHEN_TRUE and props.boolean(name):
                raise refuse(name, NOT_WHEN_TRUE[name])
            if name not in INFORMATIONAL and name not in NOT_WHEN_TRUE and name != "Suspendable":
                raise refuse(name, f"{excerpt(value)!r} has no sbatch option")
        if (props.get("Executable") or "").startswith("#"):
            raise refuse("Executable", "an attached File is not run through Slurm; name the program by a path")
        if props.resource_limits:
            raise refuse("ResourceLimit", "sbatch sets no per-job rlimit; Slurm takes the submitting shell's")
        if props.notification_list is not None and set(props.notification_list.events) - {"None"}:
            raise refuse("NotificationList", "mail is the site's to configure in Slurm (MailProg)")
        if props.task_distribution is not None:
            raise refuse("TaskDistribution", "task layouts are not translated; write the srun options in the "
                                             "program")
        if props.nodes:
            raise refuse("Node", "a Node outside Requested names where a task ran; ask for nodes inside Requested")
        for item in props.extensions:
            if item.name in ("RuntillCancelled", "RunUntilCanceled") and item.value.strip().lower() in ("true", "1"):
                raise refuse(item.name, "Slurm ends a job when its batch script ends")
            if item.type in KEPT_TYPES or item.name in KEPT_EXTENSIONS or item.name in ("RuntillCancelled",
                                                                                         "RunUntilCanceled"):
                continue
            raise refuse(item.name, f"extension {excerpt(item.value)!r} has no sbatch option (input and output "
                                    "files are not staged; exit codes above 0 fail a Slurm job)")


def _all_requested(job: Job) -> list[tuple[str, Term]]:
    found: list[tuple[str, Term]] = [("the job", term) for term in job.properties.requested]
    for group in job.effective_task_groups():
        found += [("a task group", term) for term in group.properties.requested]
        found += [("a task", term) for group in (group,) for task in group.tasks for term in task.properties.requested]
    return found


#: What each Requested element may say, by its operators.
_OPS: Final[dict[str, frozenset[Op]]] = {
    "Processors": frozenset({Op.EQ, Op.GE, Op.GT, Op.LE, Op.LT}),
    "Memory": frozenset({Op.EQ, Op.GE, Op.GT}),
    "Duration": frozenset({Op.EQ, Op.LE, Op.LT}),
    "Feature": frozenset({Op.EQ}),
    "Node": frozenset({Op.EQ, Op.NE}),
    "NodeCount": frozenset({Op.EQ, Op.GE, Op.LE}),
    "ResourceManagerType": frozenset({Op.EQ, Op.NE}),
    **{name: frozenset({Op.EQ}) for name in ("Queue", "Partition", "User", "Account", "Project",
                                               "QualityOfService", "Reservation")},
}


def _check_term(where: str, term: Term) -> None:
    name = term.name
    label = name if not isinstance(term.item, Consumable) or term.item.name is None else f"{name} {term.item.name}"
    if term.effective_conj is not Conj.AND or term.group or term.preference is not None:
        raise refuse(label, f"{where} writes it as an alternative or a preference; sbatch takes one set of "
                            "options, all of them required")
    item = term.item
    if isinstance(item, Consumable) and item.kind == "Resource":
        if item.name not in (GPU, LICENSE):
            raise refuse(label, "sbatch asks for GPUs (--gres) and licenses (--licenses) alone")
        if term.effective_op not in (Op.EQ, Op.GE, Op.GT):
            raise refuse(label, f"{term.effective_op.value}: Slurm takes an amount, not a most")
        return
    if isinstance(item, Consumable) and item.kind in ("Swap", "Network", "Disk"):
        raise refuse(label, "sbatch asks for processors, memory, GPUs and licenses")
    allowed = _OPS.get(name)
    if allowed is None:
        raise refuse(label, f"{where} asks for it and sbatch has no such option")
    if term.effective_op not in allowed:
        raise refuse(label, f"{term.effective_op.value} is not translated (only "
                            f"{', '.join(sorted(op.value for op in allowed))})")
    if isinstance(item, Feature) and item.aggregation is Aggregation.PATTERN:
        raise refuse("Feature", "a Pattern of features has no --constraint; name them")
    if isinstance(item, NodeRef) and item.aggregation is Aggregation.PATTERN:
        raise refuse("Node", "a Pattern of nodes has no --nodelist; name them or give a Range")
    if isinstance(item, Simple) and name == "ResourceManagerType":
        is_slurm = item.value.strip().lower() == SLURM
        if is_slurm != (term.effective_op is Op.EQ):
            raise refuse(name, f"{term.effective_op.value} {excerpt(item.value)!r}: this site's batch system is Slurm")


# --- options -------------------------------------------------------------------------------------

def _processors(request: JobRequest) -> list[str]:
    """One task: --ntasks of the processors it asks (the least of a range: Slurm gives a job a
    fixed count, and the job said it runs on that many). Several: one Slurm task each, with the
    largest task's processors as --cpus-per-task (Slurm gives every task of a job alike; each step
    then takes its own, `srun --cpus-per-task`)."""
    tasks = request.tasks
    if len(tasks) <= 1:
        return [f"--ntasks={request.min_processors}"]
    size = max(task.processors for task in tasks)
    if request.min_processors > size * len(tasks):
        raise refuse("Processors", f"the job asks {request.min_processors} processors for {len(tasks)} tasks of "
                                   f"at most {size}; Slurm allocates a job's tasks, no more")
    return [f"--ntasks={len(tasks)}", f"--cpus-per-task={size}"]


def _clock(seconds: float) -> str:
    """A run time limit as sbatch's D-HH:MM:SS, rounded up to the minute Slurm counts in."""
    minutes = max(1, math.ceil(seconds / 60))
    days, rest = divmod(minutes, 24 * 60)
    return f"{days}-{rest // 60:02d}:{rest % 60:02d}:00"


def _word(field: str, value: str) -> str:
    """A value that goes into an option list as one word: no separators Slurm would read."""
    text = value.strip()
    if not text or any(c.isspace() or c in ",:&|=\"'" for c in text) or not text.isprintable():
        raise refuse(field, f"{excerpt(value)!r} is not one word sbatch can take")
    return text


def _one_line(field: str, value: str) -> str:
    if not value.isprintable():
        raise refuse(field, f"{excerpt(value)!r} holds control characters")
    return value


def _simple_terms(terms: list[Term], name: str, op: Op = Op.EQ) -> list[str]:
    return [term.item.value for term in terms
            if isinstance(term.item, Simple) and term.item.name == name and term.effective_op is op]


def _one(field: str, values: list[str]) -> str | None:
    distinct = sorted({value.strip() for value in values})
    if len(distinct) > 1:
        raise refuse(field, f"asked as {' and '.join(repr(excerpt(v)) for v in distinct)}; a job has one")
    return _word(field, distinct[0]) if distinct else None


def _placement(request: JobRequest, terms: list[Term]) -> list[str]:
    options = []
    partition = _one("Queue", _simple_terms(terms, "Queue") + _simple_terms(terms, "Partition"))
    if partition:
        options.append(f"--partition={partition}")
    features = [name for term in terms if isinstance(term.item, Feature) for name in term.item.names()]
    if features:
        options.append("--constraint=" + "&".join(_word("Feature", name) for name in dict.fromkeys(features)))
    options += _nodes(request, terms)
    if request.exclusive and not request.exclusive_by_default:
        options.append("--exclusive")
    return options


def _nodes(request: JobRequest, terms: list[Term]) -> list[str]:
    """Required nodes (every one in the allocation) are Slurm's --nodelist; asked nodes (only
    those) are the same when there is one, or when they are all required; NE nodes are --exclude."""
    options = []
    required = set(request.required_nodes)
    asked = set(request.asked_nodes) if request.asked_nodes is not None else None
    if asked is not None and len(asked) != 1 and asked != required:
        raise refuse("Node", f"the job may run on any of {len(asked)} nodes; Slurm's --nodelist asks for every "
                             "node it names (ask for one, or say which are required)")
    listed = sorted(required | (asked or set()))
    if asked is not None and not listed:
        raise refuse("Node", "no node is both asked and required")
    if listed:
        options.append("--nodelist=" + ",".join(_word("Node", name) for name in listed))
    excluded = _excluded(terms)
    if excluded:
        options.append("--exclude=" + ",".join(_word("Node", name) for name in excluded))
    counts = [(term.effective_op, term.item.value) for term in terms
              if isinstance(term.item, Simple) and term.item.name == "NodeCount"]
    low, high = 1, None
    for op, text in counts:
        if not text.strip().isdigit() or int(text) < 1:
            raise refuse("NodeCount", f"{excerpt(text)!r} is not a count of nodes")
        if op in (Op.EQ, Op.GE):
            low = max(low, int(text))
        if op in (Op.EQ, Op.LE):
            high = int(text) if high is None else min(high, int(text))
    if counts:
        if high is not None and high < low:
            raise refuse("NodeCount", f"at least {low} and at most {high}")
        options.append(f"--nodes={low}" if high == low else f"--nodes={low}-{'' if high is None else high}")
    return options


def _excluded(terms: list[Term]) -> list[str]:
    """The names of the job's NE nodes, each once: bounded as the request's own host-name lists are
    (infosvc/sched/budget.py: MAX_NODES names, MAX_EXPANDED_BYTES of text, all NE terms together),
    by their text before a range is written out."""
    budget = Budget()
    excluded: dict[str, None] = {}
    for term in terms:
        ref = term.item
        if not isinstance(ref, NodeRef) or term.effective_op is not Op.NE:
            continue
        text = ref.value.strip()
        try:
            if ref.aggregation is Aggregation.RANGE:
                most = names_upper_bound(text)
                budget.take_names(most, "Node")
                budget.take_text(most * len(text))  # no name of a range is longer than the range
            elif ref.aggregation is Aggregation.LIST:
                budget.take_names(ref.value.count(ref.delimiter or ",") + 1, "Node")
            else:
                budget.take_names(1, "Node")
            names = ref.names()
        except DocumentError:
            raise refuse("Node", f"op NE excludes more than {MAX_NODES} hosts, or {MAX_EXPANDED_BYTES // 2**20} "
                                 "MiB of host names, in all (the most a job may name); exclude fewer, or ask "
                                 "for the hosts it may run on by Feature") from None
        except (NodeRefError, NodeSetException) as exc:
            raise refuse("Node", f"op NE: {exc}") from None
        excluded.update(dict.fromkeys(names))
    return list(excluded)


def _credentials(props: Properties, terms: list[Term], vo_accounts: Mapping[str, str]) -> list[str]:
    """--account from Account (SSS), else the account the site maps the job's Project (its VO) to,
    else the Project itself; --qos and --reservation as asked."""
    options = []
    account = _one("Account", _simple_terms(terms, "Account") + [v for v in [props.get("Account")] if v])
    project = _one("Project", _simple_terms(terms, "Project") + [v for v in [props.get("Project")] if v])
    if account is None and project is not None:
        account = _word("Project", vo_accounts.get(project, project))
    if account is not None:
        options.append(f"--account={account}")
    for name, option in (("QualityOfService", "qos"), ("Reservation", "reservation")):
        value = _one(name, _simple_terms(terms, name) + [v for v in [props.get(name)] if v])
        if value is not None:
            options.append(f"--{option}={value}")
    return options


def _gres(count: int, terms: list[Term]) -> str:
    types = {term.item.type.strip() for term in terms if isinstance(term.item, Consumable)
             and term.item.kind == "Resource" and term.item.name == GPU and term.item.type}
    if len(types) > 1:
        raise refuse("Resource GPU", f"{len(types)} GPU types; --gres takes one")
    return f"gpu:{_word('Resource GPU', types.pop())}:{count}" if types else f"gpu:{count}"


def _dependency(after: After, slurm_ids: Mapping[str, str]) -> str:
    """afterok / afternotok / afterany on the Slurm id of a job of the same group (by id or name),
    or of a job this service submitted earlier (its id is Slurm's)."""
    if after.condition is Condition.ON_EXIT and after.code is not None:
        raise refuse("Dependency", f"on {excerpt(after.job)!r} exiting with code {after.code}: Slurm's "
                                   "dependencies tell success, failure or any end")
    target = slurm_ids.get(after.job)
    if target is None and not after.by_name and after.job.isascii() and after.job.isdigit():
        target = after.job
    if target is None:
        raise refuse("Dependency", f"{excerpt(after.job)!r} is no job of this group nor a Slurm job id")
    kind = {Condition.ON_SUCCESS: "afterok", Condition.ON_FAILURE: "afternotok", Condition.ON_EXIT: "afterany"}
    return f"{kind[after.condition]}:{target}"


def _local(seconds: float) -> str:
    """An instant as sbatch reads --begin and --deadline: local time, to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(seconds))


def _controls(request: JobRequest) -> list[str]:
    options = []
    if request.holds:  # a System hold is put on once the job is in (scontrol hold: infosvc.web.slurmjobs)
        options.append("--hold")
    if request.eligible is not None:
        options.append(f"--begin={_local(request.eligible)}")
    if request.deadline is not None:
        options.append(f"--deadline={_local(request.deadline)}")
    if request.priority > NORMAL:
        raise refuse("Priority", f"{request.priority_name}: only Slurm's operators raise a job's priority")
    if request.priority < NORMAL:
        options.append(f"--nice={(NORMAL - request.priority) * 100}")
    if all(not task.rerunnable for task in request.tasks) and request.tasks:
        options.append("--no-requeue")
    return options


def _task_options(request: JobRequest, directory: str) -> list[str]:
    """The job's working directory (its one task's, else its account's home) and, for a job of one
    task, its streams; several tasks redirect their own in the script."""
    tasks = request.tasks
    workdirs = {task.workdir for task in tasks if task.workdir}
    chdir = workdirs.pop() if len(tasks) == 1 and workdirs else directory
    options = [f"--chdir={_one_line('InitialWorkingDirectory', chdir)}"]
    if len(tasks) == 1:
        options += stream_options(tasks[0])
    return options
