"""A wall-clock stack sampler for `infosvc serve` (py-spy is not installed here): runs the server in
this process with a thread that looks at the event-loop thread and the store's writer thread every
few milliseconds (sys._current_frames) and counts where each was, so time spent waiting (in
epoll, for the GIL, in fsync) shows beside time spent computing, which cProfile cannot tell apart.
It times the cyclic garbage collector's passes (gc.callbacks), and records each gap of the event loop (a turn of the loop that took longer than
`--stall-ms`) with the stacks seen during it: what held the loop when answers were late.

    python bench/stacksampler.py OUT.txt [--stall-ms 50] -- serve --listen ... (infosvc's arguments)

bench/soak.py --sample OUT.txt runs the soak's server this way. The report is written to OUT.txt
when the server stops (SIGTERM).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from types import FrameType

INTERVAL = 0.002
DEPTH = 14


def where(frame: FrameType | None, depth: int = DEPTH) -> str:
    """The innermost `depth` frames of a stack, outermost first, one line each."""
    lines = [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in traceback.extract_stack(frame)[-depth:]]
    return "\n    ".join(lines)


class Sampler:
    def __init__(self, stall: float) -> None:
        self.stall = stall
        self.counts: dict[str, Counter[str]] = {"loop": Counter(), "writer": Counter()}
        self.samples = 0
        self.stalls: list[tuple[float, float, Counter[str]]] = []
        self._beat = time.monotonic()
        self._during: Counter[str] = Counter()
        self._stop = threading.Event()
        self.main = threading.main_thread().ident
        #: the cyclic collector's passes: generation -> their durations
        self.collections: dict[int, list[float]] = {0: [], 1: [], 2: []}
        #: (when, generation, seconds, objects collected, gc.get_count() at its start, frozen objects)
        self.long_collections: list[tuple[float, int, float, int, tuple[int, int, int], int]] = []
        self._gc_started = 0.0
        self._gc_counts = (0, 0, 0)
        #: the writer thread's stacks seen during stalls
        self.writer_during: Counter[str] = Counter()

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
            self._gc_counts = gc.get_count()
        else:
            took = time.perf_counter() - self._gc_started
            self.collections[info["generation"]].append(took)
            if took > self.stall:  # what a long pass had to look at, and what it found
                self.long_collections.append((time.monotonic(), info["generation"], took, info["collected"],
                                              self._gc_counts, gc.get_freeze_count()))

    def heartbeat(self) -> None:
        """Called on the event loop every few milliseconds: a late call is a stall."""
        now = time.monotonic()
        gap = now - self._beat
        if gap > self.stall and self._during:
            self.stalls.append((now, gap, self._during))
        self._during = Counter()
        self._beat = now
        asyncio.get_running_loop().call_later(INTERVAL * 2, self.heartbeat)

    def run(self) -> None:
        while not self._stop.wait(INTERVAL):
            frames = sys._current_frames()
            writer = next((t.ident for t in threading.enumerate() if t.name == "infosvc-store-writer"), None)
            self.samples += 1
            loop_stack = where(frames.get(self.main)) if self.main in frames else "?"
            self.counts["loop"][loop_stack] += 1
            if time.monotonic() - self._beat > self.stall:
                self._during[loop_stack] += 1
            if writer is not None and writer in frames:
                self.counts["writer"][where(frames[writer], 6)] += 1
                if time.monotonic() - self._beat > self.stall:
                    self.writer_during[where(frames[writer], 6)] += 1

    def report(self, out: Path) -> None:
        lines = [f"{self.samples} samples every {INTERVAL * 1e3:.0f} ms ({self.samples * INTERVAL:.0f} s)"]
        for thread, counts in self.counts.items():
            total = sum(counts.values()) or 1
            lines.append(f"\n== {thread} thread: where it was, by share of samples")
            for stack, n in counts.most_common(25):
                lines.append(f"{n / total:6.1%}  {stack}")
        lines.append("\n== the cyclic garbage collector")
        for generation, took in self.collections.items():
            if took:
                lines.append(f"generation {generation}: {len(took)} passes, {sum(took):.2f} s in all, longest "
                             f"{max(took) * 1e3:.0f} ms, {sum(t > self.stall for t in took)} over {self.stall * 1e3:.0f} ms")
        for when, gen, seconds, collected, young, frozen in self.long_collections[:40]:
            lines.append(f"  at {when:.0f}: generation {gen} took {seconds * 1e3:.0f} ms, collected {collected}, "
                         f"counts at start {young}, frozen {frozen}")
        lines.append("\n== the writer thread during the stalls")
        for stack, n in self.writer_during.most_common(5):
            lines.append(f"{n} samples:\n    {stack}")
        lines.append(f"\n== event-loop stalls over {self.stall * 1e3:.0f} ms: {len(self.stalls)}")
        by_cause: Counter[str] = Counter()
        for _, gap, during in self.stalls:
            by_cause[during.most_common(1)[0][0]] += 1
        for stack, n in by_cause.most_common(8):
            lines.append(f"{n} stalls mostly in:\n    {stack}")
        worst = sorted(self.stalls, key=lambda s: -s[1])[:5]
        for at, gap, during in worst:
            lines.append(f"\nstall of {gap * 1e3:.0f} ms at {at:.0f}, mostly in:\n    {during.most_common(1)[0][0]}")
        out.write_text("\n".join(lines) + "\n")

    def stop(self) -> None:
        self._stop.set()


def main() -> int:
    out = Path(sys.argv[1])
    rest = sys.argv[2:]
    stall = 0.05
    if rest[:1] == ["--stall-ms"]:
        stall, rest = float(rest[1]) / 1e3, rest[2:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    sampler = Sampler(stall)
    gc.callbacks.append(sampler.on_gc)
    thread = threading.Thread(target=sampler.run, name="stack-sampler", daemon=True)
    thread.start()
    # The heartbeat goes on the server's own loop: infosvc.web.server.run makes it with new_event_loop.
    make_loop = asyncio.new_event_loop

    def new_event_loop() -> asyncio.AbstractEventLoop:
        loop = make_loop()
        loop.call_soon(sampler.heartbeat)
        return loop

    asyncio.new_event_loop = new_event_loop  # type: ignore[assignment]
    from infosvc.cli import main as infosvc_main

    try:
        return infosvc_main(rest)
    finally:
        sampler.stop()
        thread.join()
        sampler.report(out)


if __name__ == "__main__":
    raise SystemExit(main())
