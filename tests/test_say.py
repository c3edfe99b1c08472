"""Steering a running run: `say` leaves a note for the next prompt of a step, recorded in the run's
history, so it reaches the agent once even when the worker dies before it is delivered."""

from __future__ import annotations

from tests.conftest import run_id, sigkill, start_worker, wait_for, watch_with_new_worker, write_spec

QUEUE = "say-tests"
SPEC = """workflow:
  name: steer
  agents:
    planner: {prompt: "Plan the store."}
    writer: {prompt: "Write the schema."}
    critic:
      prompt: "Review the draft."
      validation: {rules: ["Must include passed boolean"]}
  steps:
    - id: plan
      agent: planner
    - id: review
      type: loop
      loop: {agent: writer, validator: critic, max_iterations: 3,
             feedback_path: "{{steps.review.output.feedback}}"}
"""
NOTE = "Use Postgres, not MySQL."


def test_a_note_reaches_the_next_rounds_prompt_once_across_kill_9(cli, address, llm, tmp_path):
    llm.by_model.update({"planner": "a plan", "writer": "draft", "critic": '{"passed": false, "feedback": "more"}'})
    held = llm.hold("writer")
    spec = write_spec(tmp_path, SPEC)
    rid = run_id("steer")
    agents = [f for a in ("planner", "writer", "critic") for f in ("--agent", f"{a}=openai:{a}")]
    worker = start_worker(address, "--task-queue", QUEUE)
    try:
        started = cli("start", str(spec), *agents, "--id", rid, "--task-queue", QUEUE, "--detach")
        assert started.code == 0, started.err
        wait_for(lambda: llm.in_flight("writer") == 1)  # round 1's prompt is with the agent
        said = cli("say", rid, NOTE, "--step", "review.writer", "--as", "ana")
        assert said.code == 0, said.err
        assert said.out == "note 1 from ana is for step review.writer's next prompt\n"
        refused = cli("say", rid, "Plan more.", "--step", "plan")
        assert refused.code == 2
        assert "step 'plan' has finished (completed): it will send no more prompts" in refused.err
        assert f"note 1 from ana waits for review.writer: {NOTE}" in cli("status", rid).out
    finally:
        sigkill(worker)  # the note is in the run's history; round 1's prompt is in flight
    held.set()
    watched = watch_with_new_worker(cli, address, QUEUE, rid)
    assert watched.code == 0, watched.out + watched.err
    prompts = llm.prompts_for("writer")
    noted = [n for n, prompt in enumerate(prompts) if NOTE in prompt]
    assert len(noted) == 1, prompts
    assert "Feedback on your previous output" in prompts[noted[0]]  # a later round's prompt, not round 1's
    assert "Notes from a person watching this run (not from the workflow)" in prompts[noted[0]]
    assert "- from ana: Use Postgres, not MySQL." in prompts[noted[0]]
    assert "- Note 1 from ana: 'Use Postgres, not MySQL.' delivered to review.writer (prompt 2)" in watched.out
    assert "waits for" not in cli("status", rid).out
    # A fork at the loop takes the plan step over and carries the note, which its writer reads again.
    forked = cli("fork", rid, "--at", "review.writer")
    assert forked.code == 0, forked.out + forked.err
    again = llm.prompts_for("writer")[len(prompts) :]
    assert [NOTE in prompt for prompt in again] == [True, False, False]
