"""A worker for the loopback rig: python -m tools.remote.worker --name cpu --property Pool=cpu

Runs actions that BuildGrid's scheduler leases to it (see bots.py) until killed. BuildGrid ships
no worker and buildbox-worker is not installable here; production pools use their remote
execution service's own executors, never this.
"""

import argparse
import logging
import pathlib
import urllib.parse

import grpc
from buildgrid.server.client.auth_token_loader import AuthTokenLoader
from buildgrid.server.client.channel import _create_sync_interceptors

from tools.remote import rig_settings
from tools.remote.worker.bots import Bot
from tools.remote.worker.sandbox import enter_private_mount_namespace, gpu_exposure, staging_mode


def _property(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


# BuildGrid's Downloader fills batches up to the server's 4 MiB; the response's framing then
# exceeds gRPC's default 4 MiB receive limit ("Received message larger than max").
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def _channel(url: str, token_file: str | None) -> grpc.Channel:
    """BuildGrid's setup_channel (auth and request-metadata interceptors), with larger messages:
    setup_channel takes no channel options in 0.9.1."""
    address = urllib.parse.urlparse(url).netloc
    options = [
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ]
    channel = grpc.insecure_channel(address, options=options)
    loader = AuthTokenLoader(token_file, 3600) if token_file else None
    for interceptor in _create_sync_interceptors(auth_token_loader=loader):
        channel = grpc.intercept_channel(channel, interceptor)
    return channel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--server", default=f"http://127.0.0.1:{rig_settings.PORT}", help="BuildGrid URL"
    )
    parser.add_argument("--token-file", help="JWT sent as 'authorization: Bearer' (re-read hourly)")
    parser.add_argument("--instance", default=rig_settings.INSTANCE)
    parser.add_argument("--name", required=True, help="bot id, shown in the logs")
    parser.add_argument(
        "--property", type=_property, action="append", default=[], help="KEY=VALUE, repeatable"
    )
    parser.add_argument("--capacity", type=int, default=1, help="actions run at once")
    parser.add_argument("--work-dir", type=pathlib.Path, required=True)
    parser.add_argument(
        "--gpu-devices",
        nargs="?",
        const="/dev",
        metavar="DEV",
        help="a GPU pool's worker: actions see DEV/nvidia* (default /dev) and the lease folder",
    )
    args = parser.parse_args()
    enter_private_mount_namespace()  # before any thread starts
    sandbox_args = gpu_exposure(pathlib.Path(args.gpu_devices)) if args.gpu_devices else []

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s[" + args.name + "] %(message)s"
    )
    logging.getLogger("worker").info(
        "inputs staged by %s; sandbox adds %s", staging_mode(), sandbox_args or "nothing"
    )
    channel = _channel(args.server, args.token_file)
    Bot(
        channel,
        args.instance,
        args.name,
        args.property,
        args.capacity,
        args.work_dir,
        sandbox_args,
    ).serve_forever()


if __name__ == "__main__":
    main()
