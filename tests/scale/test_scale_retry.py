"""``cairn fleet retry`` on the temporal engine: a ticket that failed is started again as a new
run of its workflow, resumes from what the remote holds (its completed task is not redone) and,
with ``--fresh-config``, runs with the base branch's cairn.toml."""

from __future__ import annotations

from pathlib import Path

from helpers import assert_one_line_error, cairn, git
from scale import temporal_server
from scale.scale_setup import agent_env, agent_log, events, shared_repo, start_worker


def test_a_failed_ticket_is_retried_and_resumes_without_redoing_a_task(
    tmp_path: Path, temporal: temporal_server.DevServer
) -> None:
    user = shared_repo(tmp_path, temporal.address, {"F-1": 2})
    config = user / "cairn.toml"
    text = config.read_text().replace("max_continuations = 2", "max_continuations = 0")
    config.write_text(text.replace("[fleet]\n", "[fleet]\nmax_attempts = 1\n"))
    env = agent_env(tmp_path, SCALE_AGENT_FAIL="F-1:2")
    failing = Path(env["SCALE_AGENT_DIR"]) / "failing"
    failing.touch()
    worker = start_worker(user, tmp_path / "w1", env)
    try:
        first = cairn("fleet", "start", "--once", "--json", cwd=user, env=env)
        ended = events(first.stdout)[-1]["tickets"]["F-1"]
        assert ended in ("interrupted", "failed"), first.stdout
        again = cairn("fleet", "start", "--once", cwd=user, env=env)
        assert f"exists already ({ended}: cairn fleet retry F-1)" in again.stdout, again.stdout

        # the fix: the agent no longer fails, and the base branch's config changed since
        failing.unlink()
        config.write_text(
            config.read_text().replace('scale_agent.py"]', 'scale_agent.py", "fresh"]')
        )
        git(user, "commit", "-qam", "the agent, fixed")
        git(user, "push", "-q", "origin", "HEAD")
        retried = cairn("fleet", "retry", "F-1", "--fresh-config", "--json", cwd=user, env=env)
        assert retried.returncode == 0, (retried.stdout, retried.stderr)
        said = events(retried.stdout)[0]
        assert said["event"] == "ticket_retried" and said["was"] == ended
        assert "cairn.toml committed onto cairn/F-1 as" in said["config"]
        bare = tmp_path / "shared.git"
        assert '"fresh"]' in git(bare, "show", "cairn/F-1:cairn.toml")

        last = cairn("fleet", "start", "--once", "--json", cwd=user, env=env)
        assert last.returncode == 0, (last.stdout, last.stderr)
        assert events(last.stdout)[-1]["tickets"] == {"F-1": "completed"}
    finally:
        worker.stop()
    log = agent_log(env, "F-1")
    assert [e["task"] for e in log if e["event"] == "done"] == [1, 2]  # task 1 not redone
    assert [e["argv"] for e in log if e["event"] == "start" and e["task"] == 2][-1] == ["fresh"]

    completed = cairn("fleet", "retry", "F-1", cwd=user, env=env)
    assert_one_line_error(completed)
    assert "ticket F-1 is completed, so there is nothing to retry" in completed.stderr
    unknown = cairn("fleet", "retry", "F-9", cwd=user, env=env)
    assert_one_line_error(unknown)
