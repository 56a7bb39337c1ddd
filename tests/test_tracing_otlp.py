"""The real OTLP/HTTP exporter sends a routed run's spans to a receiver on 127.0.0.1 (protobuf decoded)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.test_tracing import ROUTED, desk


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver: keeps every decoded ExportTraceServiceRequest."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[tuple[str, str]] = []


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.paths.append((self.path, self.headers["Content-Type"]))
        self.server.requests.append(ExportTraceServiceRequest.FromString(body))
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.mark.anyio
async def test_otlp_http_export_of_a_routed_run(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    host, port = receiver.server_address[:2]
    exporter = OTLPSpanExporter(endpoint=f"http://{host}:{port}/v1/traces", timeout=10)
    provider = TracerProvider(resource=Resource.create({"service.name": "support-desk"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    try:
        result = await desk(ROUTED).run("I was charged twice", session_id="otlp-1")
        assert result.route == "billing"
        assert provider.force_flush(10_000)
    finally:
        provider.shutdown()
    assert receiver.paths and all(p == ("/v1/traces", "application/x-protobuf") for p in receiver.paths)
    spans = []
    for req in receiver.requests:
        for rs in req.resource_spans:
            service = {a.key: a.value.string_value for a in rs.resource.attributes}["service.name"]
            assert service == "support-desk"
            for ss in rs.scope_spans:
                assert ss.scope.name == "jeeves_router"
                spans.extend(ss.spans)
    by_id = {s.span_id: s for s in spans}
    names = sorted(s.name for s in spans)
    assert names == sorted(
        [
            "invoke_agent desk",
            "chat clf",
            "invoke_agent billing",
            "chat billing",
            "execute_tool lookup_invoice",
            "chat billing",
        ]
    )
    [root] = [s for s in spans if s.name == "invoke_agent desk"]
    assert root.parent_span_id == b""
    [billing] = [s for s in spans if s.name == "invoke_agent billing"]
    assert by_id[billing.parent_span_id].name == "invoke_agent desk"
    for s in spans:
        if s.name in ("chat billing", "execute_tool lookup_invoice"):
            assert by_id[s.parent_span_id].name == "invoke_agent billing"
    values = {a.key: a.value for a in root.attributes}
    assert values["gen_ai.operation.name"].string_value == "invoke_agent"
    assert values["gen_ai.conversation.id"].string_value == "otlp-1"
    assert values["jeeves_router.route"].string_value == "billing"
    assert values["gen_ai.usage.input_tokens"].int_value == 30
    [decision] = [e for e in root.events if e.name == "jeeves_router.route.decision"]
    decided = {a.key: a.value for a in decision.attributes}
    assert decided["jeeves_router.route.confidence"].double_value == 0.9
    assert decided["jeeves_router.route.threshold"].double_value == 0.6
    chat = next(s for s in spans if s.name == "chat billing")
    chat_values = {a.key: a.value for a in chat.attributes}
    assert chat_values["gen_ai.provider.name"].string_value == "test"
    assert [v.string_value for v in chat_values["gen_ai.response.finish_reasons"].array_value.values] == ["tool_calls"]
    assert chat.kind == 3  # SPAN_KIND_CLIENT
