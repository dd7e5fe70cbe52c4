"""A small CAS client for the rig's worker: read blobs and directory trees, upload outputs.

Small blobs travel in batches (BatchReadBlobs / BatchUpdateBlobs), large ones through
ByteStream, as REAPI clients are expected to do: one gRPC message must stay under the server's
4 MiB limit.
"""

import hashlib
import pathlib
import uuid
from collections.abc import Iterable, Iterator

from buildgrid._protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re_pb2
from buildgrid._protos.build.bazel.remote.execution.v2.remote_execution_pb2_grpc import (
    ContentAddressableStorageStub,
)
from buildgrid._protos.google.bytestream import bytestream_pb2
from buildgrid._protos.google.bytestream.bytestream_pb2_grpc import ByteStreamStub
from buildgrid._protos.google.rpc import code_pb2

# Under BuildGrid's 4 MiB message limit, with room for the request's own fields.
BATCH_BYTES = 2 * 1024 * 1024
CHUNK_BYTES = 1024 * 1024
RPC_TIMEOUT_S = 300


def digest_of(data: bytes) -> re_pb2.Digest:
    return re_pb2.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


def file_digest(path: pathlib.Path) -> re_pb2.Digest:
    sha = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while block := f.read(CHUNK_BYTES):
            sha.update(block)
            size += len(block)
    return re_pb2.Digest(hash=sha.hexdigest(), size_bytes=size)


def batches(digests: Iterable[re_pb2.Digest]) -> Iterator[list[re_pb2.Digest]]:
    batch: list[re_pb2.Digest] = []
    size = 0
    for d in digests:
        if batch and size + d.size_bytes > BATCH_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(d)
        size += d.size_bytes
    if batch:
        yield batch


class Cas:
    def __init__(self, channel, instance: str):
        self._cas = ContentAddressableStorageStub(channel)
        self._bytestream = ByteStreamStub(channel)
        self._instance = instance

    # Reading.

    def read(self, digests: Iterable[re_pb2.Digest]) -> dict[str, bytes]:
        """Blobs by hash; fails if the CAS lacks one."""
        digests = list(digests)
        unique = {d.hash: d for d in digests if d.size_bytes}
        blobs = {d.hash: b"" for d in digests if not d.size_bytes}  # the empty blob
        small = [d for d in unique.values() if d.size_bytes <= BATCH_BYTES // 2]
        for batch in batches(small):
            request = re_pb2.BatchReadBlobsRequest(instance_name=self._instance, digests=batch)
            for response in self._cas.BatchReadBlobs(request, timeout=RPC_TIMEOUT_S).responses:
                if response.status.code != code_pb2.OK:
                    raise RuntimeError(f"CAS read of {response.digest.hash}: {response.status}")
                blobs[response.digest.hash] = response.data
        for d in unique.values():
            if d.size_bytes > BATCH_BYTES // 2:
                blobs[d.hash] = self.read_stream(d)
        return blobs

    def read_stream(self, digest: re_pb2.Digest) -> bytes:
        name = f"{self._instance}/blobs/{digest.hash}/{digest.size_bytes}"
        request = bytestream_pb2.ReadRequest(resource_name=name)
        return b"".join(r.data for r in self._bytestream.Read(request, timeout=RPC_TIMEOUT_S))

    def read_to_file(self, digest: re_pb2.Digest, path: pathlib.Path) -> None:
        name = f"{self._instance}/blobs/{digest.hash}/{digest.size_bytes}"
        request = bytestream_pb2.ReadRequest(resource_name=name)
        with path.open("wb") as f:
            for response in self._bytestream.Read(request, timeout=RPC_TIMEOUT_S):
                f.write(response.data)

    def read_message(self, digest: re_pb2.Digest, message):
        message.ParseFromString(self.read([digest])[digest.hash])
        return message

    def read_tree(self, root: re_pb2.Digest) -> dict[str, re_pb2.Directory]:
        """Every Directory under `root`, by digest hash (fetched level by level)."""
        directories: dict[str, re_pb2.Directory] = {}
        level = [root]
        while level:
            blobs = self.read(level)
            following = []
            for d in level:
                directory = re_pb2.Directory()
                directory.ParseFromString(blobs[d.hash])
                directories[d.hash] = directory
                following += [c.digest for c in directory.directories]
            unique = {d.hash: d for d in following}
            level = [d for d in unique.values() if d.hash not in directories]
        return directories

    # Writing.

    def missing(self, digests: Iterable[re_pb2.Digest]) -> set[str]:
        unique = list({d.hash: d for d in digests}.values())
        missing: set[str] = set()
        for start in range(0, len(unique), 1000):
            request = re_pb2.FindMissingBlobsRequest(
                instance_name=self._instance, blob_digests=unique[start : start + 1000]
            )
            response = self._cas.FindMissingBlobs(request, timeout=RPC_TIMEOUT_S)
            missing.update(d.hash for d in response.missing_blob_digests)
        return missing

    def upload(self, blobs: dict[str, tuple[re_pb2.Digest, bytes | pathlib.Path]]) -> None:
        """Uploads the blobs (digest, bytes or file) the CAS does not have yet."""
        wanted = self.missing(d for d, _ in blobs.values())
        small = []
        for h in wanted:
            digest, content = blobs[h]
            if digest.size_bytes <= BATCH_BYTES // 2:
                data = content if isinstance(content, bytes) else content.read_bytes()
                small.append(re_pb2.BatchUpdateBlobsRequest.Request(digest=digest, data=data))
            else:
                self._write_stream(digest, content)
        for batch in batches(r.digest for r in small):
            in_batch = {d.hash for d in batch}
            request = re_pb2.BatchUpdateBlobsRequest(
                instance_name=self._instance,
                requests=[r for r in small if r.digest.hash in in_batch],
            )
            for response in self._cas.BatchUpdateBlobs(request, timeout=RPC_TIMEOUT_S).responses:
                if response.status.code != code_pb2.OK:
                    raise RuntimeError(f"CAS write of {response.digest.hash}: {response.status}")

    def _write_stream(self, digest: re_pb2.Digest, content: bytes | pathlib.Path) -> None:
        name = f"{self._instance}/uploads/{uuid.uuid4()}/blobs/{digest.hash}/{digest.size_bytes}"

        def chunks() -> Iterator[bytes]:
            if isinstance(content, bytes):
                for start in range(0, len(content), CHUNK_BYTES):
                    yield content[start : start + CHUNK_BYTES]
            else:
                with content.open("rb") as f:
                    while block := f.read(CHUNK_BYTES):
                        yield block

        def requests() -> Iterator[bytestream_pb2.WriteRequest]:
            offset = 0
            for block in chunks():
                yield bytestream_pb2.WriteRequest(
                    resource_name=name if offset == 0 else "",
                    write_offset=offset,
                    data=block,
                    finish_write=offset + len(block) == digest.size_bytes,
                )
                offset += len(block)

        response = self._bytestream.Write(requests(), timeout=RPC_TIMEOUT_S)
        if response.committed_size != digest.size_bytes:
            raise RuntimeError(f"ByteStream write of {digest.hash}: {response.committed_size} B")
