"""A sweep on Ray runs in a child process of ``farm sweep`` (the driver), watched by its parent,
a process Ray cannot end.

Why: the driver is attached to a raylet and its object store; when the head's node goes, Ray's
core worker ends the driver at once (``QuickExit``, status 1, no Python exception) wherever it
is, so a line printed by the driver after it judged the head lost, or during its clean-up,
may never come. The parent imports no Ray and does what the driver could not:

- the driver tells it (one JSON line each, through a pipe whose descriptor is in
  ``$FARM_SWEEP_REPORT_FD``): the head's address once joined (``notify(head=...)``), that
  the head is lost the moment it judges so, before any clean-up (``notify(lost=...)``), and
  that it finished its clean-up (``notify(done=exit code)``);
- the parent prints the ``lost the Ray head ... resume with ...`` line when told, or itself
  when the driver ended without a word while the head does not answer, or when the head has
  not answered for ``HEAD_TIMEOUT_S`` + ``GRACE_S`` (a driver stuck in a call to the head);
  only a head that answered once (or that the driver joined) can be lost: one that never
  answered is the driver's to report;
  a driver ended by a signal without a word otherwise (SIGKILL of it alone, a crash) gets
  the same line, naming the signal;
- then, if the driver did not finish its clean-up, it ends the driver and records what is
  stored (``settle``: the index, the MLflow runs left RUNNING ended);
- SIGINT, SIGTERM and SIGHUP are passed on to the driver, which ends as on Ctrl-C;
- otherwise it exits as the driver did (its code, or the same signal).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable

from optfarm.farm.runtime.capacity import HEAD_TIMEOUT_S, POLL_S, ClusterLost, HeadWatch

__all__ = ["GRACE_S", "end_with_parent", "notify", "supervise", "watched"]

ENV = "FARM_SWEEP_REPORT_FD"
PARENT_ENV = "FARM_SWEEP_PARENT"
# taken out of the environment at once: the processes a driver starts (a local Ray's) must not
# write to a descriptor number that means something else to them
_REPORT_FD = os.environ.pop(ENV, None)
_PARENT = os.environ.pop(PARENT_ENV, None)
GRACE_S = 2.0  # the parent's own verdict comes this long after the driver's should have
CLEANUP_S = 60.0  # a driver that reported its head lost gets this long to record what it has
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def watched() -> bool:
    """Whether this process is a driver watched by its parent."""
    return _REPORT_FD is not None


def notify(**message) -> None:
    """Tell the watching parent, if any, ``message`` (one JSON line; see the module doc)."""
    if _REPORT_FD is None:
        return
    try:
        os.write(int(_REPORT_FD), (json.dumps(message) + "\n").encode())
    except (OSError, ValueError):
        pass  # no parent to tell any more


def end_with_parent() -> None:
    """A watched driver ends (SIGKILL) when its parent does: killing ``farm sweep`` outright
    kills the sweep, as it did before there was a parent (Linux; elsewhere a no-op)."""
    if _PARENT is None or not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != int(_PARENT):  # it was gone before the request
        os.kill(os.getpid(), signal.SIGKILL)


def supervise(
    argv: list[str],
    lost_line: Callable[[str], str],
    settle: Callable[[], None],
    address: str | None = None,
    head_timeout: float = HEAD_TIMEOUT_S,
) -> int:
    """Run ``farm *argv`` as a watched driver (see the module doc); its exit code, or minus
    the signal that ended it. ``lost_line(why)`` is the line printed when the head is lost,
    ``settle()`` records what is stored when the driver could not; ``address``: the cluster
    the driver joins (``host:port``), watched from the start (the driver could be stuck
    joining it)."""
    r, w = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-m", "optfarm", *argv],
        pass_fds=(w,),
        env={**os.environ, ENV: str(w), PARENT_ENV: str(os.getpid())},
    )
    os.close(w)
    watch = _Watch(child, lost_line, head_timeout)
    if address and address.rpartition(":")[2].isdigit() and "://" not in address:
        watch.head = HeadWatch(address, head_timeout + GRACE_S, quiet=True)
    previous = {s: signal.signal(s, watch.forward) for s in _SIGNALS}
    try:
        watch.follow(r)
    finally:
        os.close(r)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if watch.lost is not None and watch.done is None:
        # the fault-injection tests' kill points ($FARM_FAULT) are the driver's: the parent's
        # clean-up logs the runs MLflow missed through the same code and must not die there
        os.environ.pop("FARM_FAULT", None)
        try:
            settle()
        except Exception as e:  # the stored runs are safe; the next sweep records them
            print(
                f"farm: warning: could not record what is stored ({type(e).__name__}: "
                f"{e}); the next `farm sweep` on the folder does",
                file=sys.stderr,
            )
    if watch.lost is not None:
        return 1
    if watch.done is not None:
        return watch.done
    code = child.returncode
    if watch.forwarded and code in (-s for s in _SIGNALS):
        print("farm: interrupted", file=sys.stderr)  # ended before it could handle the signal
        return 130
    return code


class _Watch:
    def __init__(
        self, child: subprocess.Popen, lost_line: Callable[[str], str], head_timeout: float
    ):
        self.child, self.lost_line, self.head_timeout = child, lost_line, head_timeout
        self.head: HeadWatch | None = None  # a cluster the driver joined (not its own Ray)
        # the head answered once (or the driver joined it): only then can it be lost; a head
        # that never answered is the driver's to report ("no Ray cluster answers at ...")
        self.answered = False
        self.lost: str | None = None
        self.done: int | None = None
        self.forwarded: list[int] = []
        self._deadline = float("inf")  # the driver is ended then
        self._checked = -float("inf")
        self._buffer = b""

    def forward(self, signum, _frame) -> None:
        self.forwarded.append(signum)
        if self.child.poll() is None:
            self.child.send_signal(signum)

    def follow(self, fd: int) -> None:
        """Until the driver has ended (or been ended: see ``_lost``)."""
        while self.child.poll() is None:
            if select.select([fd], [], [], 0.25)[0]:
                self._read(fd)
            self._check_head()
            if time.monotonic() > self._deadline:
                self.child.kill()
                self.child.wait()
        while select.select([fd], [], [], 0)[0] and self._read(fd):
            pass
        if self.lost is None and self.done is None:
            self._judge_silent_end()

    def _check_head(self) -> None:
        """Every ``POLL_S`` while nothing is decided: is the joined cluster's head still
        there?"""
        if (
            self.lost is None
            and self.done is None
            and self.head is not None
            and time.monotonic() - self._checked >= POLL_S
        ):
            self._checked = time.monotonic()
            try:
                self.answered |= self.head.check()
            except ClusterLost as e:  # the driver is stuck: it would have told by now
                if self.answered:
                    self._lost(str(e), GRACE_S)

    def _judge_silent_end(self) -> None:
        """The driver ended without saying lost or done: lost when its head is gone or it
        was killed alone."""
        if (
            self.head is not None
            and self.answered
            and not any(self.head.reachable() for _ in range(2))
        ):
            self._lost(
                f"lost the Ray head {self.head.host}:{self.head.port} (the driver "
                f"ended with {_status(self.child.returncode)})",
                0,
            )
        elif self.child.returncode < 0 and not self.forwarded:
            # killed alone (SIGKILL, a crash): what it had open is ours to end
            self._lost(
                f"the sweep's driver (pid {self.child.pid}) ended with "
                f"{_status(self.child.returncode)} before it finished; the MLflow runs "
                "it left RUNNING, if any, are ended (sweep FAILED, variants KILLED)",
                0,
            )

    def _read(self, fd: int) -> bool:
        chunk = os.read(fd, 65536)
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            message = json.loads(line)
            if message.get("joined"):
                self.head = HeadWatch(message["head"], self.head_timeout + GRACE_S, quiet=True)
                self.answered = True
            if "lost" in message and self.lost is None:
                self._lost(message["lost"], CLEANUP_S)
            if "done" in message:
                self.done = message["done"]
                if self.lost is not None:  # what is left is Ray's exit, waiting for the head
                    self._deadline = min(self._deadline, time.monotonic() + 0.5)
        return bool(chunk)

    def _lost(self, why: str, cleanup_s: float) -> None:
        """Print the line now; the driver gets ``cleanup_s`` to end by itself."""
        self.lost = why
        self._deadline = time.monotonic() + cleanup_s
        print(self.lost_line(why), file=sys.stderr, flush=True)


def _status(code: int) -> str:
    return f"signal {signal.Signals(-code).name}" if code < 0 else f"status {code}"
