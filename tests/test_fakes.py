"""The loopback fakes themselves: per-model replies, holding requests, and clients that hang up."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from tests.conftest import wait_for
from tests.fakes.openai_server import FakeOpenAI


def chat(server: FakeOpenAI, model: str, prompt: str, timeout_s: float = 10) -> httpx.Response:
    body = {
        "model": model,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": prompt}],
    }
    return httpx.post(f"{server.url}/chat/completions", json=body, timeout=timeout_s)


def text(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]["content"]


def in_background(fn, *args) -> tuple[threading.Thread, list]:
    out: list = []
    thread = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    thread.start()
    return thread, out


@pytest.fixture
def server():
    with FakeOpenAI(
        reply="default",
        by_model={"fixed": "F", "listed": ["one", "two"], "fn": lambda messages: messages[-1]["content"].upper()},
    ) as fake:
        yield fake


def test_replies_are_chosen_by_model_and_lists_are_counted_per_model(server):
    assert [text(chat(server, m, "hi")) for m in ("listed", "fixed", "listed", "other", "fn", "listed")] == [
        "one",
        "F",
        "two",
        "default",
        "HI",
        "two",
    ]
    anthropic = httpx.post(
        f"{server.base_url}/v1/messages",
        headers={"anthropic-version": "2023-06-01"},
        json={"model": "fixed", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
    )
    assert anthropic.json()["content"][0]["text"] == "F"
    assert server.prompts_for("listed") == ["hi"] * 3 and len(server.requests_for("fixed")) == 2


def test_a_streamed_chat_comes_as_server_sent_chunks_with_usage_last(server):
    body = {"model": "fixed", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    streamed = httpx.post(f"{server.url}/chat/completions", json={**body, "stream_options": {"include_usage": True}})
    assert streamed.headers["content-type"] == "text/event-stream"
    events = [line.removeprefix("data: ") for line in streamed.text.split("\n\n") if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert [c["object"] for c in chunks] == ["chat.completion.chunk"] * 4
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[1]["choices"][0]["delta"] == {"content": "F"}
    assert chunks[2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[3]["choices"] == [] and chunks[3]["usage"]["completion_tokens"] == 1


def test_a_request_for_json_output_must_have_been_scripted_json(server):
    body = {"model": "fixed", "messages": [{"role": "user", "content": "hi"}]}
    asked = httpx.post(f"{server.url}/chat/completions", json={**body, "response_format": {"type": "json_object"}})
    assert asked.status_code == 400 and "not JSON for a json_object request" in asked.text
    assert text(httpx.post(f"{server.url}/chat/completions", json=body)) == "F"


def test_a_held_model_blocks_until_released_while_others_answer(server):
    gate = server.hold("listed")
    thread, out = in_background(chat, server, "listed", "wait for me")
    wait_for(lambda: server.in_flight("listed") == 1, 5)
    assert text(chat(server, "fixed", "meanwhile")) == "F"
    time.sleep(0.2)
    assert not out and server.in_flight("listed") == 1 and server.in_flight("fixed") == 0
    assert server.prompts_for("listed") == ["wait for me"]  # recorded on arrival, before the answer

    server.release("listed")
    thread.join(5)
    assert text(out[0]) == "one" and gate.is_set() and server.in_flight("listed") == 0
    assert text(chat(server, "listed", "again")) == "two"  # released for good until held again

    server.hold("listed")
    thread, out = in_background(chat, server, "listed", "third")
    wait_for(lambda: server.in_flight("listed") == 1, 5)
    server.release()  # every model
    thread.join(5)
    assert text(out[0]) == "two"


def test_a_delayed_model_answers_after_its_delay(server):
    server.delay_s["fixed"] = 0.5
    started = time.monotonic()
    thread, out = in_background(chat, server, "fixed", "slowly")
    wait_for(lambda: server.in_flight("fixed") == 1, 5)
    thread.join(5)
    assert text(out[0]) == "F" and time.monotonic() - started >= 0.5 and server.in_flight("fixed") == 0


def test_a_client_that_hangs_up_on_a_held_request_leaves_the_server_serving(server, capsys):
    server.hold("listed")
    with pytest.raises(httpx.ReadTimeout):
        chat(server, "listed", "gone", timeout_s=0.3)
    wait_for(lambda: server.in_flight("listed") == 0, 5)
    assert [r.abandoned for r in server.requests_for("listed")] == [True]

    server.release("listed")
    assert text(chat(server, "listed", "back")) == "one"  # the abandoned request consumed no reply
    assert "Traceback" not in capsys.readouterr().err


def test_stopping_the_server_lets_held_requests_go():
    fake = FakeOpenAI().start()
    fake.hold("m")
    thread, out = in_background(lambda: _error_of(chat, fake, "m", "x"))
    wait_for(lambda: fake.in_flight("m") == 1, 5)
    fake.stop()
    thread.join(5)
    assert not thread.is_alive() and isinstance(out[0], httpx.TransportError)


def _error_of(fn, *args):
    try:
        return fn(*args)
    except Exception as err:  # noqa: BLE001 - the test inspects it
        return err
