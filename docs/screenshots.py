"""Take the docs site's pictures again, as a user would see them:

    python docs/screenshots.py

On a dev server of its own (fresh ports, a temporary state folder, stopped at the end) it runs the
quickstart, starts examples/release.yaml on a standalone worker and answers its first question,
then photographs the inbox page (`client ui`) with the release's approval waiting, and the
quickstart's run in Temporal Web. Debian's chromium through Playwright, headless (apt-get install
chromium; never `playwright install`). Writes docs/images/inbox.png and
docs/images/temporal-web-run.png.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs" / "images"
QUICKSTART, RELEASE = "quickstart-docs", "release-docs"
WIDTH = 1100


def main() -> int:
    chromium = shutil.which("chromium")
    if chromium is None:
        print("error: no chromium on PATH\n  hint: apt-get install chromium", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="agentrun-screenshots-") as folder, dev_server(Path(folder)) as env:
        ui_port = int(env["AGENTRUN_TEMPORAL_UI_PORT"])
        # A copy, so the run's input in the picture names a passing folder, not this checkout.
        examples = shutil.copytree(ROOT / "examples", Path(folder) / "examples")
        client(env, "start", str(examples / "quickstart.yaml"), "--id", QUICKSTART)
        with background(env, "-m", "worker") as worker:
            # Polling before the run starts, or `start` would give the run a queue of its own.
            assert worker.stdout is not None and "polling" in worker.stdout.readline()
            release(env, Path(folder) / "release")
            with background(env, "-m", "client", "ui", "--port", str(free_port())) as ui:
                said = ui.stdout.readline() if ui.stdout else ""  # "inbox at http://127.0.0.1:PORT/ …"
                inbox_url = next(word for word in said.split() if word.startswith("http://"))
                photograph(chromium, inbox_url, f"http://127.0.0.1:{ui_port}")
    return 0


@contextmanager
def dev_server(folder: Path) -> Iterator[dict[str, str]]:
    """The environment of commands that share an embedded server of their own, which the first
    command starts; the server is stopped when the block ends."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TEMPORAL_", "OTEL_"))}
    env |= {
        "AGENTRUN_SERVER_PORT": str(free_port()),
        "AGENTRUN_TEMPORAL_UI_PORT": str(free_port()),
        "AGENTRUN_STATE_DIR": str(folder / "state"),
        "AGENTRUN_FORKSERVER": "off",  # no server left behind
        "PYTHONPATH": str(ROOT),
    }
    try:
        yield env
    finally:
        pid_file = folder / "state" / "temporal.pid"
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGTERM)


def release(env: dict[str, str], workdir: Path) -> None:
    """examples/release.yaml started on the standalone worker, its notes answered: it waits on publish."""
    workdir.mkdir()
    agent = f"command:{sys.executable} {ROOT / 'examples' / 'agents' / 'shell_agent.py'}"
    client(
        env, "start", "examples/release.yaml", "--id", RELEASE, "--workdir", str(workdir), "--agent", agent, "--detach"
    )
    wait_for(lambda: waiting_on(env, "notes"))
    client(env, "answer", RELEASE, "--gate", "notes", "First stable release", "--as", "ada")
    wait_for(lambda: waiting_on(env, "publish"))


def photograph(chromium: str, inbox_url: str, web_url: str) -> None:
    from playwright.sync_api import sync_playwright

    IMAGES.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium)
        page = browser.new_page(viewport={"width": WIDTH, "height": 900})
        page.goto(inbox_url)
        card = page.locator(f'.gate[data-key="{RELEASE}/publish"]')
        card.locator("input[name=by]").fill("ada")
        card.locator("input[name=comment]").fill("looks good")
        box = page.locator("#questions").bounding_box() or {"y": 0, "height": 600}
        page.screenshot(
            path=str(IMAGES / "inbox.png"),
            clip={"x": 0, "y": 0, "width": WIDTH, "height": box["y"] + box["height"] + 16},
        )

        page.set_viewport_size({"width": 1400, "height": 1400})  # the page scrolls inside itself: tall enough
        page.goto(f"{web_url}/namespaces/default/workflows/{QUICKSTART}")
        page.get_by_text("Completed", exact=True).first.wait_for(timeout=30_000)
        page.wait_for_load_state("networkidle")
        timeline = page.get_by_role("heading", name="Timeline").bounding_box() or {"y": 700}
        page.screenshot(
            path=str(IMAGES / "temporal-web-run.png"),
            clip={"x": 0, "y": 0, "width": 1400, "height": min(1400, timeline["y"] + 520)},
        )
        browser.close()


def client(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "client", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        raise SystemExit(f"python -m client {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


@contextmanager
def background(env: dict[str, str], *args: str) -> Iterator[subprocess.Popen[str]]:
    """A command of ours running while the block runs; Ctrl-C'd (as a person stops it) at its end."""
    proc = subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def waiting_on(env: dict[str, str], gate: str) -> bool:
    pending = json.loads(client(env, "pending", "--json") or "[]")
    return any(q["run_id"] == RELEASE and q["gate"] == gate for q in pending)


def wait_for(condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting for the release run's gate")
        time.sleep(0.5)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


if __name__ == "__main__":
    sys.exit(main())
