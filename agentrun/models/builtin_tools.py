"""Each built-in tool declared once: its arguments model (which gives the JSON Schema a model is
offered and the parsing of what the model sends) and the settings its calls run under as an
activity (one attempt's time, heartbeat, attempts, the whole call's time).

The workflow reads the settings when it schedules a call and the activity parses the arguments
with the same model, so the schema a model reads and the checks its call meets cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["BUILTINS", "BadArguments", "BuiltinTool", "ToolArgs", "ToolSettings"]

START_S = 60.0  # room to start a tool and read its output, on top of a command's own limit


class ToolSettings(BaseModel):
    """How one tool's calls run as activities. A worker that dies during a call stops heartbeating;
    within `heartbeat_s` the call is attempted again on another worker, `attempts` times at most,
    and the whole call (every attempt and the waits between them) ends within schedule_to_close_s."""

    model_config = ConfigDict(frozen=True)

    timeout_s: float = START_S  # one attempt; with `adds_limit`, on top of the tool's own limit
    # The tool's own time limit is part of an attempt's (bash: the policy's command limit; an MCP
    # tool: its server's timeout).
    adds_limit: bool = False
    heartbeat_s: float = 5.0
    attempts: int = 3
    backoff_s: float = 1.0  # the first wait between attempts, doubled each time

    def start_to_close_s(self, limit_s: float) -> float:
        return self.timeout_s + (limit_s if self.adds_limit else 0.0)

    def schedule_to_close_s(self, limit_s: float) -> float:
        """Room for every attempt to run its whole time, and the waits between attempts."""
        waits = sum(self.backoff_s * 2**n for n in range(self.attempts - 1))
        return self.attempts * self.start_to_close_s(limit_s) + waits


class BadArguments(ValueError):
    """The model's arguments do not fit the tool's schema; the message says which and why."""


class ToolArgs(BaseModel):
    """A built-in's arguments. Keys the schema does not name are ignored, as a chat API's models
    sometimes add them; a value of the wrong type is an error the model reads."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    # Names the schema marks required although parsing gives them a default (grep's and ls's path).
    offered_required: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def parse(cls, arguments: dict[str, Any]) -> ToolArgs:
        try:
            return cls.model_validate(arguments)
        except ValidationError as exc:
            raise BadArguments("; ".join(_said(e) for e in exc.errors())) from None

    @staticmethod
    def said(error: Any) -> str:
        """One of pydantic's errors as the model reads it (host tools' arguments use it too)."""
        return _said(error)

    @classmethod
    def offered_schema(cls) -> dict[str, Any]:
        """The JSON Schema a model is offered: the fields and their descriptions, without the
        titles and defaults pydantic adds."""
        schema = cls.model_json_schema()
        # "type" first, as a schema is usually written (the bytes a model is sent stay as they were).
        properties = {
            name: {k: prop[k] for k in sorted(prop, key=lambda k: k != "type") if k not in ("title", "default")}
            for name, prop in schema.get("properties", {}).items()
        }
        required = list(cls.offered_required) or schema.get("required", [])
        return {"type": "object", "properties": properties, "required": required}


def _said(error: Any) -> str:
    where = ".".join(str(part) for part in error["loc"]) or "arguments"
    if error["type"] == "missing":
        return f"missing argument '{where}'"
    if error["type"] == "string_type":
        return f"argument '{where}' must be a string, not {type(error['input']).__name__}"
    return f"argument '{where}': {error['msg']}"


_PATH = "The file, as a path inside the work directory"


class ReadArgs(ToolArgs):
    path: str = Field(description=_PATH)


class WriteArgs(ToolArgs):
    path: str = Field(description=_PATH)
    content: str = Field(description="The file's new text")


class EditArgs(ToolArgs):
    path: str = Field(description=_PATH)
    old: str = Field(description="The passage as the file has it now")
    new: str = Field(description="What the passage becomes")


class GlobArgs(ToolArgs):
    pattern: str = Field(description="The pattern, e.g. *.py or src/**/*.yaml")


class GrepArgs(ToolArgs):
    offered_required: ClassVar[tuple[str, ...]] = ("pattern", "path")
    pattern: str = Field(description="The regular expression")
    path: str = Field(".", description="The file or folder to look in")


class LsArgs(ToolArgs):
    offered_required: ClassVar[tuple[str, ...]] = ("path",)
    path: str = Field(".", description="The folder, inside the work directory")


class BashArgs(ToolArgs):
    command: str = Field(description="The command line")


class WebFetchArgs(ToolArgs):
    url: str = Field(description="The page's address, http or https")
    question: str = Field("", description="What you want from the page (optional)")


class WebSearchArgs(ToolArgs):
    query: str = Field(description="What to search for")
    count: int = Field(5, description="How many results, 1 to 10 (5 when left out)")


@dataclass(frozen=True)
class BuiltinTool:
    """One built-in as declared: the name a model calls, what it is told the tool does, its
    arguments, and how its calls run."""

    name: str
    description: str
    args: type[ToolArgs]
    settings: ToolSettings = field(default_factory=ToolSettings)

    @property
    def parameters(self) -> dict[str, Any]:
        return self.args.offered_schema()


BUILTINS: dict[str, BuiltinTool] = {
    tool.name: tool
    for tool in (
        BuiltinTool("read", "Give back the whole text of one file of the work directory.", ReadArgs),
        BuiltinTool(
            "write",
            "Put text into a file of the work directory, replacing what it held; missing folders are made.",
            WriteArgs,
        ),
        BuiltinTool(
            "edit",
            "Change one passage of a file: the first place `old` stands, letter for letter (spaces and "
            "line breaks too), becomes `new`. An error when the file or the passage is missing.",
            EditArgs,
        ),
        BuiltinTool(
            "glob",
            "List the files of the work directory whose path fits a pattern: * stands for any name part "
            "within a folder, ? for one character, ** for any depth of folders (docs/**/*.md).",
            GlobArgs,
        ),
        BuiltinTool(
            "grep",
            "Look for a regular expression in a file, or in every file under a folder; each line that "
            "matches comes back with its file and line number.",
            GrepArgs,
        ),
        BuiltinTool(
            "ls",
            "Name what one folder holds, one level deep: each entry's name, whether it is a file or a "
            "folder, and its size.",
            LsArgs,
        ),
        BuiltinTool(
            "bash",
            "Run a shell command line in the work directory and give back what it printed and its exit "
            "status. A command still running at the time limit is stopped, so start nothing that never ends.",
            BashArgs,
            # A command's own limit bounds each attempt; a command is one that may have partly run, so
            # it is attempted again once after a crash, not more.
            ToolSettings(adds_limit=True, attempts=2),
        ),
        BuiltinTool("web_fetch", "Get a web page and give back its text (an HTML page as plain text).", WebFetchArgs),
        BuiltinTool(
            "web_search",
            "Ask a web search service; each result comes back as a title, an address and a few lines. "
            "Read a result's page with web_fetch.",
            WebSearchArgs,
        ),
    )
}
