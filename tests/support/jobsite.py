"""A site for the job queue's tests: hosts n0, n1, ... that report `processors` each, an executor
token for each (exec0, exec1, ...), and submit tokens bound to the users alice and bob."""

from __future__ import annotations

from support.server import InProcessServer, ServerFactory


def job_site(serve_app: ServerFactory, hosts: int = 2, processors: int = 4) -> InProcessServer:
    server = serve_app(agents=hosts, users={"alice": "alice", "bob": "bob"},
                       executors={f"exec{n}": f"n{n}" for n in range(hosts)})
    for number in range(hosts):
        server.report(f"n{number}", server.agent_token(), processors=processors)
    return server  # type: ignore[return-value]
