"""A scripted coding agent for the cyberian comparison, run by the fake agentapi server with the
prompt on stdin and the work directory as its folder.

    python cyberian_agent.py RULES.json STATE.json

RULES is a list of `{"when": TEXT, "replies": [{"say": TEXT, "write": {PATH: TEXT}}, ...]}`: the
first rule whose `when` the prompt contains answers with its next reply (the last one repeats),
writing the reply's files first. STATE keeps how far each rule has got, outside the work directory.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(rules_path: str, state_path: str) -> None:
    prompt = sys.stdin.read()
    rules = json.loads(Path(rules_path).read_text())
    state_file = Path(state_path)
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    index, rule = next((i, r) for i, r in enumerate(rules) if r["when"] in prompt)
    turn = state.get(str(index), 0)
    state[str(index)] = turn + 1
    state_file.write_text(json.dumps(state))
    reply = rule["replies"][min(turn, len(rule["replies"]) - 1)]
    for path, text in reply.get("write", {}).items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    print(reply["say"])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
