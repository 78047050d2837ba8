"""``python -m cairn.modelserver --scenario FILE --record FILE [--port N]``: serve until signal."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from cairn.modelserver.scenario import ScenarioError
from cairn.modelserver.server import ModelServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cairn.modelserver",
        description="Scripted Anthropic Messages / OpenAI Responses server on 127.0.0.1.",
    )
    parser.add_argument("--scenario", required=True, help="the scenario YAML file")
    parser.add_argument("--record", help="append one JSON line per model request to this file")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any)")
    parser.add_argument("--verbose", action="store_true", help="log every HTTP request to stderr")
    args = parser.parse_args(argv)
    try:
        server = ModelServer(args.scenario, args.record, port=args.port, verbose=args.verbose)
    except (OSError, ScenarioError) as exc:
        print(f"modelserver: {exc}", file=sys.stderr)
        return 2
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    url = server.start()
    print(f"listening on {url}", flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
