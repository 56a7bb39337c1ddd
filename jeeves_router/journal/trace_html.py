"""The trace page: one self-contained HTML file for a recorded session (no network, no CDN).

:func:`render_trace_html` turns a :class:`~jeeves_router.journal.trace_data.SessionTrace`
(and optionally the agent's :class:`~jeeves_router.graph.AgentGraph`) into a page with,
per run: the routing decision (each route's score against the threshold), a timeline of
every step with its duration (agent runs, model calls with tokens and cost, tool calls and
results, retries, recovery, handoffs), and the totals per route. The graph is drawn as an
HTML tree, with its Mermaid source beside it. CSS and the few lines of script are inline.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

from .records import json_text
from .trace_data import RunTrace, SessionTrace, TraceNode

if TYPE_CHECKING:
    from ..graph import AgentGraph

__all__ = ["render_trace_html"]

_CSS = """
:root{--fg:#1f2328;--muted:#656d76;--line:#d0d7de;--run:#3367d6;--model:#8250df;--tool:#1a7f37;
--decision:#bf8700;--note:#656d76;--capability:#b06000;--bad:#cf222e;--cut:#9a6700}
*{box-sizing:border-box}body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);
margin:0;padding:24px 32px;background:#fff}h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
h3{font-size:14px;margin:18px 0 6px;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
.meta{color:var(--muted)}.card{border:1px solid var(--line);border-radius:8px;padding:12px 16px;margin:8px 0}
table{border-collapse:collapse;width:100%}td,th{padding:4px 8px;border-bottom:1px solid var(--line);text-align:left;
vertical-align:top}th{font-weight:600;color:var(--muted)}td.num{text-align:right;font-variant-numeric:tabular-nums}
.score{position:relative;height:14px;background:#f6f8fa;border-radius:3px;min-width:160px}
.score .fill{position:absolute;left:0;top:0;bottom:0;background:#9ec5fe;border-radius:3px}
.score .fill.chosen{background:var(--run)}.score .thr{position:absolute;top:-3px;bottom:-3px;width:2px;
background:var(--bad)}.chosen-row td{font-weight:600}
.row{display:grid;grid-template-columns:minmax(280px,38%) 90px 1fr;gap:8px;align-items:center;padding:3px 0;
border-bottom:1px solid #f0f2f4;cursor:pointer}.row:hover{background:#f6f8fa}
.lab{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}.kind{display:inline-block;min-width:64px;
font-size:11px;font-weight:600;text-transform:uppercase;color:#fff;border-radius:3px;padding:0 4px;margin-right:6px;
text-align:center}.bar{position:relative;height:12px}.bar span{position:absolute;top:0;bottom:0;border-radius:2px;
min-width:2px}.dur{text-align:right;font-variant-numeric:tabular-nums;color:var(--muted)}
.k-run{background:var(--run)}.k-model{background:var(--model)}.k-tool{background:var(--tool)}
.k-decision{background:var(--decision)}.k-note{background:var(--note)}.k-capability{background:var(--capability)}
.bad .lab{color:var(--bad)}.cut .lab,.st-cut{color:var(--cut);font-style:italic}
.detail{display:none;margin:2px 0 8px;padding:8px 12px;background:#f6f8fa;
border-radius:6px;white-space:pre-wrap;font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace}
.detail.open{display:block}.tree ul{list-style:none;margin:0;padding-left:22px;border-left:1px dashed var(--line)}
.tree>ul{border-left:none;padding-left:0}.tree li{margin:4px 0}.node{display:inline-block;border:1px solid var(--line);
border-radius:6px;padding:3px 8px;background:#fff}.node.router{border-color:var(--run);background:#e8f0fe}
.node.capability{border-color:var(--capability);background:#fef7e0}.node.unknown{border-style:dashed}
.edge{color:var(--muted);font-size:12px;margin-right:6px}.node small{color:var(--muted)}
pre.mermaid-src{background:#f6f8fa;padding:10px;border-radius:6px;overflow:auto;font-size:12px}
button{font:inherit;border:1px solid var(--line);background:#f6f8fa;border-radius:6px;padding:2px 10px;cursor:pointer}
"""

_JS = """
document.querySelectorAll('.row').forEach(function (row) {
  row.addEventListener('click', function () {
    var d = row.nextElementSibling;
    if (d && d.classList.contains('detail')) { d.classList.toggle('open'); }
  });
});
document.querySelectorAll('button[data-toggle]').forEach(function (b) {
  b.addEventListener('click', function () {
    var box = document.getElementById(b.getAttribute('data-toggle'));
    var open = b.getAttribute('data-open') !== '1';
    box.querySelectorAll('.detail').forEach(function (d) { d.classList.toggle('open', open); });
    b.setAttribute('data-open', open ? '1' : '0');
    b.textContent = open ? 'Collapse all' : 'Expand all';
  });
});
document.body.setAttribute('data-ready', '1');
"""


_CUT = (
    "This attempt was cut off before it ended (cancelled, e.g. by its server's shutdown, or its stream closed "
    "early): steps it left open are marked cut. Agent.resume() takes the run up from its recorded steps."
)


def _ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:.1f} ms" if ms < 1000 else f"{seconds:.2f} s"


def _cost(value: Any) -> str:
    return "unknown" if value is None else f"${float(value):.6f}"


def _usage_text(u: dict[str, Any] | None) -> str:
    if not u:
        return ""
    return f"{u['input_tokens']} in / {u['output_tokens']} out tokens · {u['requests']} req · {_cost(u['cost_usd'])}"


def _label(node: TraceNode) -> str:
    if node.kind == "model":
        usage = node.data.get("usage") or {}
        return f"{node.label} · {usage.get('input_tokens', 0)}→{usage.get('output_tokens', 0)} tok · {node.status}"
    if node.kind == "tool":
        call = f"{node.label}({', '.join(f'{k}={v!r}' for k, v in node.data.get('arguments', {}).items())})"
        return call + " · answered from an earlier attempt (not run again)" if node.data.get("from_ledger") else call
    if node.kind == "run":
        route = f" · route {node.data['route']}" if "route" in node.data else ""
        return f"{node.label} · {node.status}{route}"
    if node.kind == "note":
        return f"{node.label} {node.data.get('text', '')}"
    if node.kind == "capability" and node.data.get("answered_from"):
        earlier = node.data["answered_from"]
        return f"{node.label} · step {node.data.get('step')} · answered from step {earlier} (not run again)"
    if node.kind == "capability" and node.data.get("from_ledger"):
        return f"{node.label} · step {node.data.get('step')} · answered from an earlier attempt (not run again)"
    return node.label


def _detail(node: TraceNode) -> str:
    data = {k: v for k, v in node.data.items() if v not in (None, "", [], {})}
    return json_text(data, indent=2, default=str)


def _decision(d: dict[str, Any], routes: list[str]) -> str:
    thr = float(d["threshold"])
    rows = []
    for name, score in d["scores"]:
        chosen = name == d["route"]
        verdict = "≥ threshold" if score >= thr else "below threshold"
        rows.append(
            f'<tr class="{"chosen-row" if chosen else ""}"><td>{escape(name)}{" ✓" if chosen else ""}</td>'
            f'<td class="num">{score:.3f}</td><td><div class="score"><div class="fill{" chosen" if chosen else ""}" '
            f'style="width:{max(0.0, min(score, 1.0)) * 100:.1f}%"></div><div class="thr" '
            f'style="left:{thr * 100:.1f}%" title="threshold {thr:g}"></div></div></td><td>{verdict}</td></tr>'
        )
    scored = {name for name, _ in d["scores"]}
    rows.extend(
        f"<tr><td>{escape(name)}</td><td class='num'>—</td><td></td><td>not scored by this classifier</td></tr>"
        for name in routes
        if name not in scored
    )
    runner = ""
    if d.get("runner_up") is not None:
        runner = f" · runner-up <b>{escape(str(d['runner_up']))}</b> ({float(d['runner_up_confidence'] or 0):.3f})"
    reason = f"<div class='meta'>reason: {escape(str(d['reason']))}</div>" if d.get("reason") else ""
    fallback = d.get("fallback")
    if fallback:
        runner += f" → <b>fallback to {escape(str(fallback['route']))}</b> ({escape(str(fallback['reason']))})"
    usage = f"<div class='meta'>classifier: {_usage_text(d['usage'])}</div>" if d.get("usage") else ""
    return (
        f'<div class="card decision"><div><b>Decision:</b> route <b class="chosen-route">{escape(str(d["route"]))}'
        f"</b> with confidence <b>{float(d['confidence']):.3f}</b> against threshold <b>{thr:g}</b> "
        f"(classifier {escape(str(d['stage']))}, parse status {escape(str(d['status']))}){runner}</div>{reason}"
        f"{usage}<table><tr><th>route</th><th>score</th><th>score vs threshold (red line)</th><th></th></tr>"
        f"{''.join(rows)}</table></div>"
    )


def _timeline(run: RunTrace, box_id: str) -> str:
    t0, t1 = run.root.start, max(n.end for _, n in run.root.walk())
    span = max(t1 - t0, 1e-6)
    out = [f'<div id="{box_id}">']
    for depth, node in run.root.walk():
        left = (node.start - t0) / span * 100
        width = max(node.duration_s / span * 100, 0.3)
        bad = " bad" if node.status in ("failed", "error") else " cut" if node.status == "cut" else ""
        dur = _ms(node.duration_s) if node.kind not in ("note", "decision") else "·"
        out.append(
            f'<div class="row{bad}" title="{escape(node.kind)}"><div class="lab" style="padding-left:{depth * 18}px">'
            f'<span class="kind k-{node.kind}">{node.kind}</span>{escape(_label(node))}</div>'
            f'<div class="dur">{dur}</div><div class="bar"><span class="k-{node.kind}" '
            f'style="left:{left:.2f}%;width:{width:.2f}%"></span></div></div>'
            f'<div class="detail">{escape(_detail(node))}</div>'
        )
    out.append("</div>")
    return "".join(out)


def _totals(run: RunTrace) -> str:
    rows = "".join(
        f"<tr><td>{escape(route)}</td><td class='num'>{u['input_tokens']}</td><td class='num'>{u['output_tokens']}</td>"
        f"<td class='num'>{u['requests']}</td><td class='num'>{_cost(u['cost_usd'])}</td></tr>"
        for route, u in [*run.usage_by_route.items(), ("total", run.usage)]
    )
    return (
        "<table class='totals'><tr><th>route</th><th>input tokens</th><th>output tokens</th><th>requests</th>"
        f"<th>cost</th></tr>{rows}</table>"
    )


def _graph(graph: AgentGraph) -> str:
    nodes = {n.id: n for n in graph.nodes}
    out_edges: dict[str, list[Any]] = {}
    for e in graph.edges:
        out_edges.setdefault(e.source, []).append(e)
    seen: set[str] = set()

    def item(node_id: str, edge_text: str) -> str:
        n = nodes[node_id]
        details = "".join(f"<br><small>{escape(d)}</small>" for d in n.details)
        head = f'<span class="edge">{escape(edge_text)}</span>' if edge_text else ""
        box = f'<span class="node {n.kind}"><b>{escape(n.name)}</b>{details}</span>'
        if node_id in seen:
            return f"<li>{head}<span class='node {n.kind}'>↺ {escape(n.name)}</span></li>"
        seen.add(node_id)
        edges = out_edges.get(node_id, [])
        kids = "".join(item(e.target, f"{e.kind}: {e.label}" if e.label else e.kind) for e in edges)
        return f"<li>{head}{box}{f'<ul>{kids}</ul>' if kids else ''}</li>"

    tree = f'<div class="tree"><ul>{item(graph.root, "")}</ul></div>'
    return f'<h2>Agent graph</h2>{tree}<h3>Mermaid source</h3><pre class="mermaid-src">{escape(graph.mermaid())}</pre>'


def _routes_of(graph: AgentGraph | None, router: str) -> list[str]:
    """The route names of the router agent called ``router`` in ``graph`` (none without a graph)."""
    if graph is None:
        return []
    ids = {n.id for n in graph.nodes if n.name == router}
    return [e.label.split(" ")[0] for e in graph.edges if e.source in ids and e.kind == "route"]


def render_trace_html(trace: SessionTrace, graph: AgentGraph | None = None) -> str:
    """The trace page of ``trace`` as one HTML document (with ``graph`` when given)."""
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>jeeves-router trace · {escape(trace.session_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Session {escape(trace.session_id)}</h1>",
        f"<div class='meta'>{len(trace.runs)} run(s) · recorded by jeeves_router's journal</div>",
    ]
    for i, run in enumerate(trace.runs, 1):
        box = f"steps-{i}"
        total = run.root.duration_s
        parts.append(
            f"<h2>Run {i} · <span class='status st-{escape(run.status)}'>{escape(run.status)}</span> · {_ms(total)}"
            f"</h2><div class='meta'>run {escape(run.run_id)} · attempt {run.attempt} · {_usage_text(run.usage)}</div>"
            f"<div class='card'><b>Prompt:</b> {escape(run.prompt)}</div>"
        )
        if run.status == "cut":
            parts.append(f"<div class='card st-cut'>{_CUT}</div>")
        output = run.root.data.get("output") or next(
            (n.data["output"] for _, n in run.root.walk() if n.kind == "run" and n.data.get("output")), None
        )
        if output:
            parts.append(f"<div class='card'><b>Answer:</b> {escape(output)}</div>")
        parts.extend(_decision(d, _routes_of(graph, d["router"])) for d in run.decisions)
        parts.append(
            f"<h3>Steps</h3><button data-toggle='{box}'>Expand all</button> "
            f"<span class='meta'>click a step for its details</span>{_timeline(run, box)}"
        )
        parts.append(f"<h3>Totals per route</h3>{_totals(run)}")
    if graph is not None:
        parts.append(_graph(graph))
    parts.append(f"<script>{_JS}</script></body></html>")
    return "\n".join(parts)
