"""A worker for the loopback rig: python -m tools.remote.worker --name cpu --property Pool=cpu

Runs actions that BuildGrid's scheduler leases to it (see bots.py) until killed. BuildGrid ships
no worker and buildbox-worker is not installable here; production pools use their remote
execution service's own executors, never this.
"""

import argparse
import logging
import pathlib

import grpc

from tools.remote.worker.bots import Bot

# Responses carry batches of blobs; BuildGrid keeps them under 4 MiB, leave headroom.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def _property(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", default="127.0.0.1:8980", help="BuildGrid host:port")
    parser.add_argument("--instance", default="main")
    parser.add_argument("--name", required=True, help="bot id, shown in the logs")
    parser.add_argument(
        "--property", type=_property, action="append", default=[], help="KEY=VALUE, repeatable"
    )
    parser.add_argument("--capacity", type=int, default=1, help="actions run at once")
    parser.add_argument("--work-dir", type=pathlib.Path, required=True)
    args = parser.parse_args()

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s[" + args.name + "] %(message)s"
    )
    options = [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ]
    with grpc.insecure_channel(args.server, options=options) as channel:
        bot = Bot(channel, args.instance, args.name, args.property, args.capacity, args.work_dir)
        bot.serve_forever()


if __name__ == "__main__":
    main()
