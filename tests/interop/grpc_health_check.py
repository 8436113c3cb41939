"""Calls grpc.health.v1.Health/Check through gRPC's own xDS client (C-core,
the grpcio package) for each target given, with the bootstrap named by
GRPC_XDS_BOOTSTRAP. Prints one line per target; exits 1 unless every call
answers SERVING.

Run by .ci/run against `xdsfed testbed --bootstrap-out`: the bootstrap the
testbed writes must work in gRPC unchanged.
"""

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

DEADLINE_SECONDS = 20


def check(target: str) -> bool:
    with grpc.insecure_channel(target) as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=DEADLINE_SECONDS)
            stub = health_pb2_grpc.HealthStub(channel)
            reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=DEADLINE_SECONDS)
        except (grpc.RpcError, grpc.FutureTimeoutError) as error:
            print(f"{target}: failed: {error!r}")
            return False
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    print(f"{target}: {status}")
    return status == "SERVING"


def main() -> int:
    results = [check(target) for target in sys.argv[1:]]
    return 0 if results and all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
