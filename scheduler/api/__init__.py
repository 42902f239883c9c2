"""The engine's gRPC API (proto/toposched/v1/placement.proto): server, servicer, CLI client.

Generated stubs live in ``scheduler.api.gen`` (scripts/gen_proto.sh). See docs/api.md.
"""
