"""Writes the loopback rig's credentials (tools/remote/rig.sh up), never kept in the repository.

Into AUTH_DIR (mode 0700): `secret` (HS256 key BuildGrid checks every call's JWT with),
`<role>.token` per role, `acl.yml` (what each role may call, by RPC name, BuildGrid's
acl-config) and `redis` (the action cache's Redis password). Roles:
  ci      everything, in particular UpdateActionResult: only CI writes results it ran itself
  dev     developers and pool clients: execute remotely and read results, never write them
  worker  the rig's workers: bot sessions and the CAS
Results of remote executions are written by the server itself, whoever asked for them.

Usage (BuildGrid's venv, for PyJWT): python -m tools.remote.rig_auth AUTH_DIR INSTANCE
"""

import datetime
import json
import pathlib
import secrets
import sys

import jwt

CAS = [
    "FindMissingBlobs",
    "BatchReadBlobs",
    "BatchUpdateBlobs",
    "GetTree",
    "Read",
    "Write",
    "QueryWriteStatus",
]
ROLES = {
    "ci": None,  # every request
    "dev": [
        "GetCapabilities",
        "GetActionResult",
        "Execute",
        "WaitExecution",
        "GetOperation",
        "ListOperations",
        "CancelOperation",
        *CAS,
    ],
    "worker": ["GetCapabilities", "CreateBotSession", "UpdateBotSession", "PostBotEventTemp", *CAS],
}
# The rig lives for hours; a real deployment issues short-lived tokens from its identity provider.
TOKEN_DAYS = 30


def _write(path: pathlib.Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o600)


def main() -> None:
    auth_dir, instance = pathlib.Path(sys.argv[1]), sys.argv[2]
    auth_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    secret = secrets.token_hex(32)
    _write(auth_dir / "secret", secret)
    _write(auth_dir / "redis", secrets.token_hex(16))
    expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=TOKEN_DAYS)
    acls = []
    for role, requests in ROLES.items():
        token = jwt.encode({"sub": role, "exp": expires}, secret, algorithm="HS256")
        _write(auth_dir / f"{role}.token", token)
        acls.append({"subject": f"^{role}$", **({"requests": requests} if requests else {})})
    # YAML is a superset of JSON.
    _write(auth_dir / "acl.yml", json.dumps({instance: {"allow": acls}}, indent=2))


if __name__ == "__main__":
    main()
