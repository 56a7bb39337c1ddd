"""Tool names follow the model providers' rule, ``^[a-zA-Z0-9_-]{1,64}$`` (OpenAI and Anthropic)."""

from __future__ import annotations

import pytest

from jeeves_router import UsageError, tool
from jeeves_router.architectures.handoffs.tools import classify_tool, transfer_tool
from jeeves_router.classify.toolcall import route_tool
from jeeves_router.classify.types import RouteSpec
from jeeves_router.tools import Tool


def noop() -> str:
    """Do nothing."""
    return ""


@pytest.mark.parametrize("name", ["café", "名前", "\uff21\uff22\uff23", "x²", "Ωmega"])
def test_non_ascii_letters_and_digits_are_refused_with_the_rule(name: str) -> None:
    # str.isalnum() is True for each of these; both providers answer such a tool with a 400
    assert name.replace("_", "a").isalnum()
    with pytest.raises(UsageError, match=r"1-64 ASCII letters, digits, '_' or '-'.*@tool\(name=\.\.\.\)"):
        Tool(noop, name=name)


def test_a_function_with_a_non_ascii_name_needs_an_explicit_name() -> None:
    def café() -> str:
        """Order a coffee."""
        return "ok"

    with pytest.raises(UsageError, match="'café'"):
        tool(café)
    assert tool(name="cafe")(café).name == "cafe"


@pytest.mark.parametrize("name", ["a" * 65, "has space", "dotted.name", "colon:name", "line\n"])
def test_other_names_outside_the_rule_are_refused(name: str) -> None:
    with pytest.raises(UsageError, match="tool name"):
        Tool(noop, name=name)


@pytest.mark.parametrize("name", ["a", "lookup_invoice", "get-weather", "A1_b-2", "_private", "a" * 64])
def test_names_within_the_rule_are_kept(name: str) -> None:
    assert Tool(noop, name=name).name == name


def test_decorated_functions_and_generated_tools_still_work() -> None:
    from jeeves_router.tools import check_tool_name

    @tool
    def lookup_invoice_2(invoice: str) -> str:
        """Look an invoice up."""
        return invoice

    assert lookup_invoice_2.name == "lookup_invoice_2"
    longest = "r" * 24 + "-" + "s" * 23  # a route name at its 48-character limit
    assert check_tool_name(classify_tool(longest, "the longest route").name)
    assert check_tool_name(transfer_tool(longest, "the longest agent").name)
    assert check_tool_name(route_tool(RouteSpec(longest, "d")).name)  # the tool-call classifier's
