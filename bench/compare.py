"""Several git revisions measured alternately on one machine: the tool every speed claim uses.

    PYTHONPATH=$PWD .venv/bin/python bench/compare.py 9f75571 main [.] [--rounds 5]

Each REF is checked out into a temporary ``git worktree`` under /tmp (removed afterwards); a
REF that is a directory is used as it is (``.``: this tree with its uncommitted changes). Each
round runs every revision once, in an order that rotates from round to round, so a change of
the machine's other load favours none. Per revision and round:

- closed loop: 20 chats x 25 messages, each chat sending its next message when the answer to
  the last one arrived, the model instant: messages per second, the gateway's CPU per message,
  p95 of a message's latency (sent -> answer seen), resident memory after the run;
- burst: 50 chats send one message at once, the model takes 1 s: seconds to the last answer;
- idle latency: one chat alone, 40 messages one after another, the model instant: p50;
- ``companion --help``: wall time (median of 5) and peak resident memory.

The gateway runs in a process of its own (bench/compare_gateway.py) with the revision's tree
first on PYTHONPATH, on the real python-telegram-bot. The fake Bot API, the fake LLM
(tests/fakes, both from this tree, so every revision meets the same counterpart) and the
driver share this process's event loop, on 127.0.0.1 only; their CPU is reported apart, as
"harness CPU/msg", so a saturated harness would show. The table gives the median over rounds
of each figure, its range, and its ratio to the first REF's median.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.fake_llm import FakeLLM, Reply  # noqa: E402
from tests.fakes.fake_telegram import TOKEN, FakeTelegram  # noqa: E402

PYTHON = str(Path(sys.executable))
RUNNER = str(ROOT / "bench" / "compare_gateway.py")
FIRST_CHAT = 100_001
CLOSED_CHATS, CLOSED_MESSAGES = 20, 25
BURST_CHATS, BURST_MODEL_SECONDS = 50, 1.0
IDLE_MESSAGES = 40
HELP_RUNS = 5
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Revision:
    ref: str
    tree: Path
    label: str
    deps: str | None


# ---------------------------------------------------------------- revisions


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@contextlib.contextmanager
def checked_out(refs: list[str]) -> Iterator[list[Revision]]:
    """Each REF in a detached worktree under /tmp (a directory REF as it is); removed after."""
    scratch = Path(tempfile.mkdtemp(prefix="compare-", dir="/tmp"))
    added: list[Path] = []
    try:
        revisions = []
        for number, ref in enumerate(refs):
            if Path(ref).is_dir():
                tree = Path(ref).resolve()
                label = f"{tree.name} (tree)"
            else:
                sha = git("rev-parse", "--short", f"{ref}^{{commit}}")
                tree = scratch / f"{number}-{sha}"
                git("worktree", "add", "--detach", "--quiet", str(tree), sha)
                added.append(tree)
                label = ref if ref == sha else f"{ref} ({sha})"
            revisions.append(Revision(ref, tree, label, dependency_path(tree)))
        yield revisions
    finally:
        for tree in added:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)
        subprocess.run(["git", "worktree", "prune"], cwd=ROOT)
        subprocess.run(["rm", "-rf", str(scratch)])


def missing_requirements(tree: Path) -> list[str]:
    """The revision's dependencies this interpreter lacks (an older release may need a
    package the project has since dropped, such as PyYAML)."""
    project = tomllib.loads((tree / "pyproject.toml").read_text())["project"]
    missing = []
    for line in project.get("dependencies", []):
        requirement = Requirement(line)
        try:
            installed = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            missing.append(line)
            continue
        if installed not in requirement.specifier:
            print(f"note: {tree.name} wants {line}, this interpreter has {installed}")
    return missing


def dependency_path(tree: Path) -> str | None:
    """A folder with the missing dependencies (pip --target, cached under /tmp), or None."""
    missing = missing_requirements(tree)
    if not missing:
        return None
    folder = (
        Path("/tmp/compare-deps")
        / hashlib.sha256("\n".join(sorted(missing)).encode()).hexdigest()[:12]
    )
    if not folder.is_dir():
        print(f"installing {', '.join(missing)} for {tree.name} into {folder}", flush=True)
        subprocess.run(
            [
                PYTHON,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--target",
                str(folder),
                *missing,
            ],
            check=True,
        )
    return str(folder)


def child_env(revision: Revision) -> dict[str, str]:
    """The revision's tree first on the path, then whatever it needs that the venv lacks."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPANION_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(revision.tree), revision.deps)))
    return env


# ---------------------------------------------------------------- the gateway process


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and all its threads so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


@contextlib.asynccontextmanager
async def gateway(revision: Revision, fake: FakeTelegram, llm_url: str) -> AsyncIterator[int]:
    """The revision's gateway serving the fake Bot API; yields its process id."""
    with tempfile.TemporaryDirectory(prefix="compare-data-") as data_dir:
        settings = {
            "llm_url": llm_url,
            "telegram_url": fake.base_url,
            "token": TOKEN,
            "data_dir": data_dir,
        }
        process = await asyncio.create_subprocess_exec(
            PYTHON, "-P", RUNNER, json.dumps(settings),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env=child_env(revision), cwd=revision.tree,
        )  # fmt: skip
        assert process.stdin is not None and process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), 120)
            if not line:
                raise RuntimeError(f"{revision.label}: the gateway exited before serving")
            check_files(revision, json.loads(line)["files"])
            yield process.pid
        finally:
            process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()
                await process.wait()


def check_files(revision: Revision, files: dict[str, str]) -> None:
    """The revision's own packages must have been imported, not the editable install's."""
    for name, file in files.items():
        if not Path(file).is_relative_to(revision.tree):
            raise RuntimeError(f"{revision.label}: {name} came from {file}, not {revision.tree}")


# ---------------------------------------------------------------- driving it


class Replies:
    """Counts answered sendMessage calls per chat and when each count was reached."""

    def __init__(self, fake: FakeTelegram) -> None:
        self.fake = fake
        self.count: Counter[int] = Counter()
        self._seen = 0
        self._open: list[int] = []
        self._changed = asyncio.Condition()

    async def watch(self) -> None:
        calls = self.fake.calls
        while True:
            await self.fake.wait_until(
                lambda: len(calls) > self._seen or any(calls[i].status for i in self._open),
                timeout=3600,
            )
            self._open.extend(range(self._seen, len(calls)))
            self._seen = len(calls)
            still_open = []
            for index in self._open:
                call = calls[index]
                if call.status is None:
                    still_open.append(index)
                elif call.ok and call.method == "sendMessage":
                    self.count[int(call.params["chat_id"])] += 1
            self._open = still_open
            async with self._changed:
                self._changed.notify_all()

    async def wait(self, chat_id: int, count: int) -> None:
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: self.count[chat_id] >= count), timeout=120
            )


@contextlib.asynccontextmanager
async def watching(fake: FakeTelegram) -> AsyncIterator[Replies]:
    replies = Replies(fake)
    watcher = asyncio.create_task(replies.watch())
    try:
        yield replies
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


async def conversations(fake: FakeTelegram, chats: int, per_chat: int) -> list[float]:
    """Every chat sends its next message once the last was answered; each message's seconds."""
    latencies: list[float] = []
    async with watching(fake) as replies:

        async def conversation(chat_id: int) -> None:
            for number in range(per_chat):
                sent = time.perf_counter()
                fake.send_user_message(chat_id=chat_id, text=f"message {number}", first_name="U")
                await replies.wait(chat_id, number + 1)
                latencies.append(time.perf_counter() - sent)

        await asyncio.gather(*(conversation(FIRST_CHAT + i) for i in range(chats)))
    return latencies


@contextlib.asynccontextmanager
async def serving(
    revision: Revision, model_seconds: float
) -> AsyncIterator[tuple[FakeTelegram, int]]:
    reply = Reply(text="ok", delay_seconds=model_seconds)
    async with (
        FakeTelegram() as fake,
        FakeLLM(lambda _request: reply) as llm,
        gateway(revision, fake, llm.base_url) as pid,
    ):
        yield fake, pid


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def py_spy() -> str:
    """The venv's py-spy, else the one on PATH; a clear error when there is none."""
    beside = Path(PYTHON).parent / "py-spy"
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise SystemExit("--profile needs py-spy: install it in the venv or put it on PATH")
    return found


@contextlib.asynccontextmanager
async def sampled(pid: int, output: Path | None) -> AsyncIterator[None]:
    """py-spy samples the gateway into ``output`` (collapsed stacks) while the block runs."""
    if output is None:
        yield
        return
    spy = await asyncio.create_subprocess_exec(
        py_spy(), "record", "--format", "raw", "--rate", "250",
        "--nonblocking", "--gil", "--pid", str(pid), "--output", str(output),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        await asyncio.sleep(0.5)  # py-spy attaches
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        await spy.wait()


async def closed_loop(revision: Revision, profile: Path | None) -> dict[str, float]:
    async with serving(revision, 0.0) as (fake, pid), sampled(pid, profile):
        messages = CLOSED_CHATS * CLOSED_MESSAGES
        cpu, own_cpu = cpu_seconds(pid), time.process_time()
        started = time.perf_counter()
        latencies = await conversations(fake, CLOSED_CHATS, CLOSED_MESSAGES)
        seconds = time.perf_counter() - started
        return {
            "msgs/s": messages / seconds,
            "CPU ms/msg": (cpu_seconds(pid) - cpu) / messages * 1000,
            "p95 ms": percentile(latencies, 0.95) * 1000,
            "RSS MiB": rss_mib(pid),
            "harness CPU ms/msg": (time.process_time() - own_cpu) / messages * 1000,
        }


async def burst(revision: Revision) -> dict[str, float]:
    async with (
        serving(revision, BURST_MODEL_SECONDS) as (fake, _pid),
        watching(fake) as replies,
    ):
        started = time.perf_counter()
        chats = [FIRST_CHAT + i for i in range(BURST_CHATS)]
        for chat in chats:
            fake.send_user_message(chat_id=chat, text="hello", first_name="U")
        await asyncio.gather(*(replies.wait(chat, 1) for chat in chats))
        return {"burst s": time.perf_counter() - started}


async def idle_latency(revision: Revision) -> dict[str, float]:
    async with serving(revision, 0.0) as (fake, _pid):
        latencies = await conversations(fake, 1, IDLE_MESSAGES)
        return {"one chat p50 ms": statistics.median(latencies) * 1000}


PEAK_AT_EXIT = (
    "import atexit, sys; atexit.register(lambda: sys.stderr.write([l for l in "
    "open('/proc/self/status') if l.startswith('VmHWM:')][0]))"
)
"""The child reports its own peak memory: ru_maxrss from wait4 would count this process's,
which the child's memory map replaced at exec."""


def help_timing(revision: Revision) -> dict[str, float]:
    """``companion --help`` through the revision's own entry point (pyproject's script)."""
    scripts = tomllib.loads((revision.tree / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["companion"].split(":")
    code = (
        f"{PEAK_AT_EXIT}; sys.argv = ['companion', '--help']; import {module} as m; m.{function}()"
    )
    walls, peaks = [], []
    for _ in range(HELP_RUNS):
        started = time.perf_counter()
        done = subprocess.run(
            [PYTHON, "-P", "-c", code], env=child_env(revision), cwd=revision.tree,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        walls.append(time.perf_counter() - started)
        if done.returncode != 0 or "VmHWM:" not in done.stderr:
            raise RuntimeError(f"{revision.label}: companion --help failed: {done.stderr}")
        peaks.append(int(done.stderr.split("VmHWM:")[1].split()[0]) / 1024)
    return {"--help s": statistics.median(walls), "--help MiB": statistics.median(peaks)}


async def one_round(revision: Revision, profile: Path | None) -> dict[str, float]:
    figures = await closed_loop(revision, profile)
    figures |= await burst(revision)
    figures |= await idle_latency(revision)
    figures |= help_timing(revision)
    return figures


# ---------------------------------------------------------------- the table


def table(revisions: list[Revision], results: dict[str, list[dict[str, float]]]) -> str:
    names = list(results[revisions[0].label][0])
    base = {name: statistics.median(r[name] for r in results[revisions[0].label]) for name in names}
    lines = [f"{'figure':<20}" + "".join(f"{r.label[:34]:>36}" for r in revisions)]
    for name in names:
        cells = []
        for revision in revisions:
            values = [r[name] for r in results[revision.label]]
            median = statistics.median(values)
            spread = f"{min(values):.4g}-{max(values):.4g}"
            cells.append(f"{median:.4g} [{spread}] {median / base[name]:.2f}x")
        lines.append(f"{name:<20}" + "".join(f"{cell:>36}" for cell in cells))
    return "\n".join(lines)


async def run(
    revisions: list[Revision], rounds: int, profile: Path | None
) -> dict[str, list[dict[str, float]]]:
    results: dict[str, list[dict[str, float]]] = defaultdict(list)
    for number in range(rounds):
        shift = number % len(revisions)
        for place, revision in enumerate(revisions[shift:] + revisions[:shift]):
            output = None
            if profile is not None:
                output = profile / f"{(shift + place) % len(revisions)}-round{number + 1}.txt"
            figures = await one_round(revision, output)
            results[revision.label].append(figures)
            summary = ", ".join(f"{k} {v:.4g}" for k, v in figures.items())
            print(f"round {number + 1} {revision.label}: {summary}", flush=True)
    return results


def stop_on_term(signum: int, frame: object) -> None:
    del signum, frame
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("refs", nargs="+", help="git revisions or directories; ratios vs the first")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--profile",
        type=Path,
        help="folder for py-spy's collapsed stacks of each closed loop (N-roundR.txt, N: the "
        "REF's position); sampling slows the gateway, so figures of such a run do not count",
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, stop_on_term)  # kill PID: worktrees and gateways still go
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    with checked_out(args.refs) as revisions:
        results = asyncio.run(run(revisions, args.rounds, args.profile))
    print(f"\nmedian [range] and ratio to {revisions[0].label}, {args.rounds} rounds:")
    print(table(revisions, results))


if __name__ == "__main__":
    main()
