"""What the jobs of one submission may expand to, together. A few kilobytes can ask for far more
than they hold: a TaskCount makes ten thousand tasks of one line, a Node range ten thousand host
names, and a JobGroup's JobDefaults copy each of these, and every name, environment and command
line, into each of its jobs. Reading the request (infosvc/sched/request.py) charges each expansion
here before making it, so a document over the budget is refused before its cost is paid, with
one sentence that says which bound it passed."""

from __future__ import annotations

from typing import Final

from infosvc.errors import DocumentError

__all__ = ["MAX_EXPANDED_BYTES", "MAX_NODES", "MAX_TASKS", "Budget"]

#: Most tasks the jobs of one submission may have: bounds the work of scheduling and storing it.
MAX_TASKS: Final = 10_000
#: Most host names the jobs of one submission may list, by Node ranges and lists and RequiredNodes.
MAX_NODES: Final = 100_000
#: Most characters of text (names, command lines, environments, host names) the jobs of one
#: submission may carry once defaults and task counts are applied: what is stored and answered
#: for them (10,000 tasks with a 1.5 KB environment each fit).
MAX_EXPANDED_BYTES: Final = 16 * 1024 * 1024


class Budget:
    """What is left to one submission's jobs: a lone job's, or a JobGroup's (`group`), which its
    messages name as such."""

    __slots__ = ("group", "tasks", "names", "characters")

    def __init__(self, group: bool = False) -> None:
        self.group = group
        self.tasks = MAX_TASKS
        self.names = MAX_NODES
        self.characters = MAX_EXPANDED_BYTES

    def _said(self, one: str, many: str) -> str:
        return f"the job group's jobs {many}" if self.group else f"the job {one}"

    def take_tasks(self, count: int) -> None:
        if count > self.tasks:
            raise DocumentError(f"{self._said('has', 'have')} more than {MAX_TASKS} tasks"
                                + (" in all" if self.group else ""))
        self.tasks -= count

    def take_names(self, count: int, what: str) -> None:
        if count > self.names:
            raise DocumentError(f"{what}: {self._said('names', 'name')} more than {MAX_NODES} hosts in all; ask "
                                "for hosts by Feature or a Pattern, or submit the jobs in parts")
        self.names -= count

    def take_text(self, characters: int) -> None:
        if characters > self.characters:
            raise DocumentError(f"{self._said('carries', 'carry')} more than {MAX_EXPANDED_BYTES // 2**20} MiB of "
                                "names, command lines and environments once its defaults and task counts are "
                                "applied; write the environment once per task group, or submit the jobs in parts")
        self.characters -= characters
