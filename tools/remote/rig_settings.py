"""The rig's settings (tools/remote/rig.conf) for its Python parts: defaults of their flags."""

import pathlib

RIG_CONF = pathlib.Path(__file__).resolve().parent / "rig.conf"


def read(path: pathlib.Path = RIG_CONF) -> dict[str, str]:
    """{NAME: VALUE} of rig.conf's NAME=VALUE lines."""
    settings = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            settings[name.strip()] = value.strip()
    return settings


SETTINGS = read()
PORT = int(SETTINGS["RIG_PORT"])
INSTANCE = SETTINGS["RIG_INSTANCE"]
POOL_DEAD_AFTER_S = float(SETTINGS["RIG_POOL_DEAD_AFTER_S"])
