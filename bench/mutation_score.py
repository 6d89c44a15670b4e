"""The mutation score of the modules that hold the gateway's promises (``make mutation``).

Reads mutmut's results and prints, per module, how many mutants the tests killed. A mutant
that timed out counts as killed (the tests noticed: the mutant hung); one with no test that
reaches it counts as survived. Mutants not yet checked (an interrupted run) are reported
apart and left out of the score, so a partial run is never mistaken for a full one.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

KILLED = {"killed", "timeout", "caught by type check", "segfault"}
UNCHECKED = {"not checked", "check was interrupted by user", "skipped"}
_RESULT = re.compile(r"^\s*(?P<name>\S+?)__mutmut_\d+: (?P<status>.+)$")


def module_of(mutant: str) -> str:
    """``bot.gateway.access.xǁAccessǁcheck_dm`` -> ``bot/gateway/access.py``."""
    module = mutant.split(".x", 1)[0]
    return module.replace(".", "/") + ".py"


def collect(lines: list[str]) -> dict[str, Counter[str]]:
    by_module: dict[str, Counter[str]] = defaultdict(Counter)
    for line in lines:
        match = _RESULT.match(line)
        if match:
            by_module[module_of(match["name"])][match["status"].strip()] += 1
    return by_module


def main() -> int:
    mutmut = Path(sys.executable).with_name("mutmut")
    output = subprocess.run(
        [str(mutmut), "results", "--all", "true"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    by_module = collect(output)
    if not by_module:
        print("no mutation results yet: run `make mutation`")
        return 1
    print("| module | mutants | killed | survived | not checked | score |")
    print("|---|---:|---:|---:|---:|---:|")
    totals: Counter[str] = Counter()
    for module, counts in sorted(by_module.items()):
        totals.update(counts)
        print(_row(module, counts))
    print(_row("**all**", totals))
    return 0


def _row(name: str, counts: Counter[str]) -> str:
    killed = sum(n for status, n in counts.items() if status in KILLED)
    unchecked = sum(n for status, n in counts.items() if status in UNCHECKED)
    checked = sum(counts.values()) - unchecked
    score = f"{killed / checked:.0%}" if checked else "-"
    return (
        f"| {name} | {sum(counts.values())} | {killed} | {checked - killed} | {unchecked} "
        f"| {score} |"
    )


if __name__ == "__main__":
    raise SystemExit(main())
