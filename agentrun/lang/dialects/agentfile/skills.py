"""`AGENT x FROM skills/NAME`: an agent whose prompt comes from a skill folder, read as the real
Agentfile parser reads it. The folder holds SKILL.md (YAML front matter between `---` lines with
`name`, which must be the folder's name, and `description`; then the instructions) and the files the
skill uses; the prompt is the description, a blank line, the instructions, and the names of the
files under `scripts/` as a list headed `## Available Scripts`."""

from __future__ import annotations

import os

import yaml

from agentrun.lang.source import note


class SkillError(ValueError):
    """A folder that is not a skill; the message as the real parser says it, and a hint."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


FORMAT_HINT = "SKILL.md starts with ---, then name: and description: lines, then ---, then the instructions"


def skill_prompt(folder: str) -> tuple[str, str]:
    """(path of SKILL.md, the agent's prompt) for the skill in `folder`."""
    path = os.path.join(folder, "SKILL.md")
    if not os.path.isfile(path):
        raise SkillError(f"directory {folder} is not a valid skill (missing SKILL.md)", FORMAT_HINT)
    note(path)
    with open(path, encoding="utf-8") as fh:
        front, body = _split(fh.read())
    try:
        fields = yaml.safe_load(front) or {}
    except yaml.YAMLError as exc:
        raise SkillError(f"invalid frontmatter in {path}: {exc}", FORMAT_HINT) from None
    if not isinstance(fields, dict):
        raise SkillError(f"invalid frontmatter in {path}", FORMAT_HINT)
    for key in ("name", "description"):
        if not fields.get(key):
            raise SkillError(f"missing required field: {key}", f"add a {key}: line to the front matter of {path}")
    name = os.path.basename(os.path.normpath(folder))
    if fields["name"] != name:
        message = f'skill name "{fields["name"]}" does not match directory name "{name}"'
        raise SkillError(message, f"write name: {name} in SKILL.md, or rename the folder")
    prompt = f"{fields['description']}\n\n{body.strip()}"
    scripts = _scripts(folder)
    if scripts:
        prompt += "\n\n## Available Scripts\n" + "".join(f"- {s}\n" for s in scripts)
    return path, prompt


def _split(text: str) -> tuple[str, str]:
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        raise SkillError("missing frontmatter delimiter", FORMAT_HINT)
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :])
    raise SkillError("unclosed frontmatter", FORMAT_HINT)


def _scripts(folder: str) -> list[str]:
    scripts = os.path.join(folder, "scripts")
    if not os.path.isdir(scripts):
        return []
    return sorted(e.name for e in os.scandir(scripts) if not e.is_dir())
