"""``GET /metrics`` (``bruce.admin.pages.metrics``): Prometheus text behind the token, every metric
prefixed ``bruce_``."""

from __future__ import annotations

from bruce.values import ConversationId
from tests.fakes.llm_server import Step
from tests.helpers import BEARER, say


async def test_metrics_are_prometheus_text_behind_the_token(app, admin, fake_llm):
    fake_llm.add(Step.tool_calls(("math_calculate", {"expression": "2+2"})), Step.text("4."))
    await say(app, "2+2?")
    assert (await admin.get("/metrics")).status == 401
    response = await admin.get("/metrics", headers=BEARER)
    assert response.status == 200 and response.headers["Content-Type"].startswith("text/plain")
    text = await response.text()
    assert 'bruce_turns_total{source="chat",status="ok"} 1.0' in text
    assert 'bruce_llm_calls_total{model="openai/primary",status="ok"} 2.0' in text
    assert 'bruce_llm_tokens_total{kind="prompt",model="openai/primary"} 20.0' in text
    assert 'bruce_tool_executions_total{status="ok",tool="math.calculate"} 1.0' in text
    assert 'bruce_llm_call_latency_seconds_count 2.0' in text and 'bruce_tool_latency_seconds_bucket{le="+Inf"} 1.0' in text
    assert "bruce_outbox_unsent 0.0" in text
    assert all(line.startswith(("bruce_", "# HELP bruce_", "# TYPE bruce_")) for line in text.splitlines() if line)


async def test_jobs_are_counted_by_status(app, admin):
    await app.jobs.create(ConversationId("test", "c1"), {"execution_mode": "message", "content": "Call Ana", "in_seconds": 120})
    text = await (await admin.get("/metrics", headers=BEARER)).text()
    assert 'bruce_jobs{status="active"} 1.0' in text and "bruce_outbox_unsent 0.0" in text
