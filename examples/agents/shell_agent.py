"""A local agent for offline runs: it carries out the ```sh blocks of its prompt and reports.

It reads the prompt on stdin (the `command:` driver's protocol), runs each fenced `sh` block in the
current folder, and replies with what the commands printed, then `COMPLETION_STATUS: COMPLETE`
(or `ERROR` if a block failed). A block may print its own `COMPLETION_STATUS: X` line to steer a loop.
"""

from __future__ import annotations

import re
import subprocess
import sys

BLOCK = re.compile(r"```(?:sh|bash|shell)\n(.*?)```", re.DOTALL)


def main() -> int:
    prompt = sys.stdin.read()
    blocks = BLOCK.findall(prompt)
    if not blocks:
        print("I only carry out ```sh blocks and this prompt has none.")
        print("COMPLETION_STATUS: ERROR")
        return 0
    output = []
    for block in blocks:
        proc = subprocess.run(["sh", "-e", "-c", block], capture_output=True, text=True)
        output.append(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            print("".join(output).rstrip())
            print(f"COMPLETION_STATUS: ERROR (a command exited with {proc.returncode})")
            return 0
    text = "".join(output).rstrip()
    print(text)
    if "COMPLETION_STATUS:" not in text:
        print("COMPLETION_STATUS: COMPLETE")
    return 0


if __name__ == "__main__":
    sys.exit(main())
